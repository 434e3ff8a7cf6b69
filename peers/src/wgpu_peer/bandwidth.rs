//! The bandwidth workloads on wgpu: saxpy (vec4, sliced past the storage
//! binding limit), buffer-to-buffer copy, and host upload and download.

use std::num::NonZeroU64;
use std::time::Instant;

use super::*;

pub(super) fn saxpy(cfg: &Config, g: &Gpu, r: &mut PeerReport) {
    let res = (|| -> Result<(), Fail> {
        let n = cfg.saxpy_n;
        let total = n as u64 * 4;
        if total > g.limits.max_buffer_size {
            return Err(Fail::Na(format!(
                "{total} B buffers exceed max_buffer_size {}",
                g.limits.max_buffer_size
            )));
        }
        let align = (g.limits.min_storage_buffer_offset_alignment as u64).max(16);
        let chunk = (g.max_binding / align * align).max(align).min(total);
        let slices: Vec<(u64, u64)> = (0..total)
            .step_by(chunk as usize)
            .map(|off| (off, chunk.min(total - off)))
            .collect();
        let src = shader(SAXPY_PARAMS, SAXPY_BODY, g.immediates, 2);
        let mut entries = vec![storage_entry(0, true), storage_entry(1, false)];
        if !g.immediates {
            entries.push(uniform_entry(2));
        }
        let (pipeline, bgl) = g.pipeline(&src, &entries, 4);
        let a = SAXPY_A.to_le_bytes();
        let params = (!g.immediates).then(|| g.uniform(&a));
        let usage = wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC;
        let x = g.filled("x", n, usage, |i| saxpy_x(i).to_bits())?;
        let y = g.filled("y", n, usage, |i| saxpy_y0(i).to_bits())?;
        let groups: Vec<(wgpu::BindGroup, u32, u32)> = slices
            .iter()
            .map(|&(off, len)| {
                let part = |buf| wgpu::BindGroupEntry {
                    binding: 0,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: buf,
                        offset: off,
                        size: NonZeroU64::new(len),
                    }),
                };
                let mut e = vec![
                    part(&x),
                    wgpu::BindGroupEntry {
                        binding: 1,
                        ..part(&y)
                    },
                ];
                if let Some(p) = &params {
                    e.push(whole(p, 2));
                }
                let bg = g.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: None,
                    layout: &bgl,
                    entries: &e,
                });
                let wgs = ((len / 16) as u32).div_ceil(WG);
                let (gx, gy) = grid(wgs, g.limits.max_compute_workgroups_per_dimension);
                (bg, gx, gy)
            })
            .collect();
        let encode = |timed: bool| {
            let mut enc = g.device.create_command_encoder(&Default::default());
            {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: None,
                    timestamp_writes: if timed { g.pass_timestamps() } else { None },
                });
                pass.set_pipeline(&pipeline);
                if g.immediates {
                    pass.set_immediates(0, &a);
                }
                for (bg, gx, gy) in &groups {
                    pass.set_bind_group(0, bg, &[]);
                    pass.dispatch_workgroups(*gx, *gy, 1);
                }
            }
            if timed {
                g.resolve(&mut enc);
            }
            enc.finish()
        };
        let mut runs = 0usize;
        let check = |runs: usize| -> Result<(), Fail> {
            let idx = sample_indices(n);
            let got = g.read_words(&y, &idx)?;
            for (&i, &w) in idx.iter().zip(&got) {
                let want = saxpy_y0(i) + runs as f32 * SAXPY_A * saxpy_x(i);
                if f32::from_bits(w) != want {
                    return Err(Fail::Wrong(format!(
                        "saxpy after {runs} runs: y[{i}] = {}, expected {want}",
                        f32::from_bits(w)
                    )));
                }
            }
            Ok(())
        };
        let one = |timed: bool| -> Result<std::time::Duration, Fail> {
            let t = Instant::now();
            let idx = g.queue.submit([encode(timed)]);
            g.wait(idx)?;
            Ok(t.elapsed())
        };
        one(false)?;
        runs += 1;
        check(runs)?;
        let bytes = 12.0 * n as f64;
        let sliced = if slices.len() > 1 {
            format!(
                " in {} slices of ≤ {} B (max storage binding {} B; wgpu adds a barrier \
                 between slices, since it tracks whole buffers)",
                slices.len(),
                chunk,
                g.max_binding
            )
        } else {
            String::new()
        };
        let kernel = format!(
            "WGSL y = a*x + y over vec4<f32> (wgpu's default bounds checks), a as {}, \
             2-D grid of 256-wide groups{sliced}; GB/s counting 12 B per element",
            if g.immediates {
                "an immediate"
            } else {
                "a uniform"
            }
        );
        if g.ts.is_some() {
            let v = measure(cfg.bw_warm, cfg.bw_reps, || {
                one(true)?;
                runs += 1;
                Ok(bytes / g.elapsed_ns()?)
            });
            r.put(
                Workload::SaxpyGpu,
                v,
                format!("{kernel}; pass timestamps, one submission"),
            );
        } else {
            r.na(Workload::SaxpyGpu, "adapter lacks TIMESTAMP_QUERY");
        }
        let v = measure(cfg.bw_warm, cfg.bw_reps, || {
            let d = one(false)?;
            runs += 1;
            Ok(gbps(bytes, d))
        });
        r.put(
            Workload::SaxpyWall,
            v,
            format!("{kernel}; encode + submit + poll(Wait)"),
        );
        check(runs)
    })();
    if let Err(e) = res {
        for w in [Workload::SaxpyGpu, Workload::SaxpyWall] {
            r.fail(w, &e);
        }
    }
}

pub(super) fn copy(cfg: &Config, g: &Gpu, r: &mut PeerReport) {
    let res = (|| -> Result<(), Fail> {
        let size = cfg.copy_bytes;
        if size > g.limits.max_buffer_size {
            return Err(Fail::Na(format!(
                "{size} B exceeds max_buffer_size {}",
                g.limits.max_buffer_size
            )));
        }
        let words = (size / 4) as usize;
        let src = g.filled(
            "copy src",
            words,
            wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            pattern,
        )?;
        let dst = g.buffer(
            "copy dst",
            size,
            wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
        );
        let one = |timed: bool| -> Result<std::time::Duration, Fail> {
            let t = Instant::now();
            let mut enc = g.device.create_command_encoder(&Default::default());
            let ts = g.ts.as_ref().filter(|_| timed);
            if let Some(ts) = ts {
                enc.write_timestamp(&ts.set, 0);
            }
            enc.copy_buffer_to_buffer(&src, 0, &dst, 0, size);
            if let Some(ts) = ts {
                enc.write_timestamp(&ts.set, 1);
                g.resolve(&mut enc);
            }
            let idx = g.queue.submit([enc.finish()]);
            g.wait(idx)?;
            Ok(t.elapsed())
        };
        one(false)?;
        let idx = sample_indices(words);
        let got = g.read_words(&dst, &idx)?;
        if let Some((&i, &w)) = idx.iter().zip(&got).find(|(&i, &w)| w != pattern(i)) {
            return Err(Fail::Wrong(format!(
                "copy: word {i} = {w:#x}, expected {:#x}",
                pattern(i)
            )));
        }
        let bytes = 2.0 * size as f64;
        if g.encoder_ts {
            let v = measure(cfg.bw_warm, cfg.bw_reps, || {
                one(true)?;
                Ok(bytes / g.elapsed_ns()?)
            });
            r.put(
                Workload::CopyGpu,
                v,
                "copy_buffer_to_buffer between CommandEncoder::write_timestamp pair \
                 (TIMESTAMP_QUERY_INSIDE_ENCODERS); GB/s counting read + write",
            );
        } else {
            r.na(
                Workload::CopyGpu,
                "adapter lacks TIMESTAMP_QUERY_INSIDE_ENCODERS (timestamps outside passes)",
            );
        }
        let v = measure(cfg.bw_warm, cfg.bw_reps, || Ok(gbps(bytes, one(false)?)));
        r.put(
            Workload::CopyWall,
            v,
            "copy_buffer_to_buffer, encode + submit + poll(Wait); GB/s counting read + write",
        );
        Ok(())
    })();
    if let Err(e) = res {
        for w in [Workload::CopyGpu, Workload::CopyWall] {
            r.fail(w, &e);
        }
    }
}

pub(super) fn transfers(cfg: &Config, g: &Gpu, r: &mut PeerReport) {
    let size = cfg.transfer_bytes;
    let words = (size / 4) as usize;
    let data: Vec<u32> = (0..words).map(pattern).collect();
    let idx = sample_indices(words);
    let check = |got: &[u32], what: &str| -> Result<(), Fail> {
        match idx.iter().zip(got).find(|(&i, &w)| w != pattern(i)) {
            None => Ok(()),
            Some((&i, &w)) => Err(Fail::Wrong(format!(
                "{what}: word {i} = {w:#x}, expected {:#x}",
                pattern(i)
            ))),
        }
    };
    let up = (|| -> Result<f64, Fail> {
        let dst = g.buffer(
            "upload dst",
            size,
            wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_DST
                | wgpu::BufferUsages::COPY_SRC,
        );
        let v = measure(cfg.bw_warm, cfg.bw_reps, || {
            let t = Instant::now();
            g.queue.write_buffer(&dst, 0, bytemuck::cast_slice(&data));
            let i = g.queue.submit([]);
            g.wait(i)?;
            Ok(gbps(size as f64, t.elapsed()))
        })?;
        check(&g.read_words(&dst, &idx)?, "upload")?;
        Ok(v)
    })();
    r.put(
        Workload::Upload,
        up,
        "Queue::write_buffer (wgpu copies into a staging buffer it allocates per call) \
         + submit + poll(Wait)",
    );
    let down = (|| -> Result<f64, Fail> {
        let src = g.filled(
            "download src",
            words,
            wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_DST
                | wgpu::BufferUsages::COPY_SRC,
            pattern,
        )?;
        let rb = g.buffer(
            "download staging",
            size,
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        );
        // Touched before timing, so page faults stay out of the figures
        // (as gpu_report's download_into).
        let mut out = vec![0u32; words];
        measure(cfg.bw_warm, cfg.bw_reps, || {
            out.iter_mut().for_each(|w| *w = 0);
            let t = Instant::now();
            let mut enc = g.device.create_command_encoder(&Default::default());
            enc.copy_buffer_to_buffer(&src, 0, &rb, 0, size);
            let i = g.queue.submit([enc.finish()]);
            g.wait(i)?;
            g.map_read(&rb)?;
            {
                let view = rb.get_mapped_range(..)?;
                out.copy_from_slice(bytemuck::cast_slice::<u8, u32>(&view));
            }
            rb.unmap();
            let d = t.elapsed();
            let got: Vec<u32> = idx.iter().map(|&i| out[i]).collect();
            check(&got, "download")?;
            Ok(gbps(size as f64, d))
        })
    })();
    r.put(
        Workload::Download,
        down,
        "copy into a MAP_READ buffer made once, submit, poll(Wait), map_async + poll, \
         copy from get_mapped_range() into an existing (touched) Vec, unmap",
    );
}
