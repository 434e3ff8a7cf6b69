//! Bandwidth workloads, shared by `benches/bandwidth.rs`,
//! `measure/examples/gpu_report/` and `measure/examples/multi_gpu.rs`: saxpy with vec4
//! loads over a grid sized to the machine, buffer-to-buffer copy, and host
//! upload and download.
//!
//! Bytes are counted as CUDA's anchor counts them: saxpy moves 12 bytes per
//! element (read x, read y, write y), a copy twice its size (read + write),
//! a host transfer its size once.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use vkcompute::{AdapterInfo, BatchOptions, Buffer, Device, Kernel, Profiling, Result};

/// y = a*x + y over `n4` vec4s, grid-stride: any grid covers any length.
/// `ILP` (specialization constant 0) vec4s per invocation per trip give the
/// memory system more loads in flight.
pub const SAXPY_VEC4: &str = r#"
#version 450
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint ILP = 1;
layout(set = 0, binding = 0) readonly buffer X { vec4 x[]; };
layout(set = 0, binding = 1) buffer Y { vec4 y[]; };
layout(push_constant) uniform P { float a; uint n4; };
void main() {
    uint stride = gl_NumWorkGroups.x * 256u;
    for (uint base = gl_GlobalInvocationID.x; base < n4; base += stride * ILP) {
        for (uint k = 0u; k < ILP; k++) {
            uint i = base + k * stride;
            if (i < n4) {
                y[i] = fma(vec4(a), x[i], y[i]);
            }
        }
    }
}
"#;

/// Invocations per workgroup of [`SAXPY_VEC4`].
pub const WORKGROUP: u32 = 256;

/// Whether `VKCOMPUTE_QUICK` asks for small sizes.
pub fn quick() -> bool {
    std::env::var_os("VKCOMPUTE_QUICK").is_some()
}

/// A number from the environment, if set and valid.
pub fn env_num<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// Elements of the saxpy workload: 64 Mi f32 (4 Mi with `VKCOMPUTE_QUICK`);
/// `VKCOMPUTE_SAXPY_N` overrides.
pub fn saxpy_elements() -> usize {
    env_num("VKCOMPUTE_SAXPY_N").unwrap_or(if quick() { 4 << 20 } else { 64 << 20 })
}

/// Bytes of the copy workload: 1 GiB (16 MiB quick), or the largest single
/// buffer the adapter allows, and at most a quarter of its memory.
pub fn copy_bytes(info: &AdapterInfo) -> u64 {
    let want: u64 =
        env_num("VKCOMPUTE_COPY_BYTES").unwrap_or(if quick() { 16 << 20 } else { 1 << 30 });
    let mut limit = info.max_memory_allocation_size.min(info.max_buffer_size);
    if info.device_local_memory > 0 {
        limit = limit.min(info.device_local_memory / 4);
    }
    want.min(limit) & !15
}

/// Bytes of each host transfer: 256 MiB (16 MiB quick).
pub fn transfer_bytes() -> u64 {
    env_num("VKCOMPUTE_TRANSFER_BYTES").unwrap_or(if quick() { 16 << 20 } else { 256 << 20 }) & !15
}

/// Workgroups of a grid "sized to the machine": enough to keep every
/// compute unit full once (units × resident invocations / 256), where the
/// driver says how many; else 4 vec4s per invocation. Never more than the
/// work needs or the adapter allows. `VKCOMPUTE_SAXPY_WORKGROUPS` overrides.
pub fn machine_workgroups(info: &AdapterInfo, n4: u64) -> u32 {
    let need = n4.div_ceil(u64::from(WORKGROUP)).max(1);
    let chosen = env_num::<u64>("VKCOMPUTE_SAXPY_WORKGROUPS").unwrap_or_else(|| {
        if info.compute_units > 0 && info.max_threads_per_compute_unit >= WORKGROUP {
            u64::from(info.compute_units) * u64::from(info.max_threads_per_compute_unit / WORKGROUP)
        } else {
            need.div_ceil(4)
        }
    });
    chosen
        .clamp(1, need)
        .min(u64::from(info.max_workgroup_count[0])) as u32
}

/// One saxpy dispatch: elements `start..start + len` with `workgroups`.
#[derive(Debug, Clone, Copy)]
pub struct Slice {
    /// First element.
    pub start: usize,
    /// Elements in the slice.
    pub len: usize,
    /// Workgroups its dispatch launches.
    pub workgroups: u32,
}

/// Splits `n` elements (a multiple of 4) into slices whose bindings stay
/// within `max_binding` bytes and start at multiples of `align` bytes.
pub fn slices(n: usize, max_binding: u64, align: u64) -> Vec<(usize, usize)> {
    assert!(n % 4 == 0, "saxpy length must be a multiple of 4");
    let unit = lcm(16, align.max(1));
    let per = (max_binding / unit * unit / 4).max(unit / 4) as usize;
    (0..n).step_by(per).map(|s| (s, per.min(n - s))).collect()
}

fn lcm(a: u64, b: u64) -> u64 {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a / x * b
}

/// [`SAXPY_VEC4`] with `ilp` vec4s per trip.
pub fn saxpy_kernel(gpu: &Device, ilp: u32) -> Result<Kernel> {
    Kernel::builder(gpu)
        .glsl(SAXPY_VEC4)
        .spec_u32(0, ilp)
        .label("saxpy_vec4")
        .build()
}

/// The saxpy workload on one device.
pub struct Saxpy {
    /// The device it runs on.
    pub gpu: Device,
    /// [`saxpy_kernel`] at [`Saxpy::ilp`].
    pub kernel: Kernel,
    /// The input.
    pub x: Buffer<f32>,
    /// The input and output.
    pub y: Buffer<f32>,
    /// Elements of x and y.
    pub n: usize,
    /// The scale.
    pub a: f32,
    /// Vec4s per invocation per trip.
    pub ilp: u32,
    /// The dispatches one run records.
    pub slices: Vec<Slice>,
}

/// Initial x and y: small integers, so every result is exact in f32.
pub fn saxpy_inputs(n: usize, offset: usize) -> (Vec<f32>, Vec<f32>) {
    let x = (0..n).map(|i| ((i + offset) % 16) as f32).collect();
    let y = (0..n).map(|i| ((i + offset) % 7) as f32).collect();
    (x, y)
}

impl Saxpy {
    /// Buffers of `n` elements (x, y from [`saxpy_inputs`] at `offset`),
    /// bindings within `max_binding` bytes (default: the adapter's
    /// `maxStorageBufferRange`), `workgroups` per slice (default:
    /// [`machine_workgroups`]) and `ilp` vec4s per trip.
    pub fn new(
        gpu: &Device,
        n: usize,
        offset: usize,
        max_binding: Option<u64>,
        workgroups: Option<u32>,
        ilp: u32,
    ) -> Result<Saxpy> {
        let info = gpu.info();
        let (hx, hy) = saxpy_inputs(n, offset);
        let max_binding = max_binding
            .unwrap_or(info.max_storage_buffer_range)
            .min(info.max_storage_buffer_range);
        let slices = slices(n, max_binding, info.min_storage_buffer_offset_alignment)
            .into_iter()
            .map(|(start, len)| Slice {
                start,
                len,
                workgroups: 1,
            })
            .collect();
        let mut s = Saxpy {
            gpu: gpu.clone(),
            kernel: saxpy_kernel(gpu, ilp)?,
            x: gpu.upload(&hx)?,
            y: gpu.upload(&hy)?,
            n,
            a: 2.0,
            ilp,
            slices,
        };
        s.configure(workgroups, ilp)?;
        Ok(s)
    }

    /// Sets the launch shape: `workgroups` per slice (default:
    /// [`machine_workgroups`]) and `ilp` vec4s per trip.
    pub fn configure(&mut self, workgroups: Option<u32>, ilp: u32) -> Result<()> {
        if ilp != self.ilp {
            self.kernel = saxpy_kernel(&self.gpu, ilp)?;
            self.ilp = ilp;
        }
        let info = self.gpu.info().clone();
        for s in &mut self.slices {
            s.workgroups = workgroups
                .unwrap_or_else(|| machine_workgroups(&info, (s.len / 4) as u64))
                .clamp(1, info.max_workgroup_count[0]);
        }
        Ok(())
    }

    /// Bytes one run moves.
    pub fn bytes(&self) -> u64 {
        12 * self.n as u64
    }

    /// Records one y = a*x + y over every slice (independent dispatches).
    pub fn record(&self, b: &mut vkcompute::Batch) -> Result<()> {
        for s in &self.slices {
            let x = self.x.slice(s.start..s.start + s.len)?;
            let y = self.y.slice(s.start..s.start + s.len)?;
            let mut pc = [0u8; 8];
            pc[..4].copy_from_slice(&self.a.to_le_bytes());
            pc[4..].copy_from_slice(&((s.len / 4) as u32).to_le_bytes());
            b.run_configured(&self.kernel, &[&x, &y], [s.workgroups, 1, 1], Some(&pc))?;
        }
        Ok(())
    }

    /// Runs `reps` saxpys in one profiled batch (barriers between them) and
    /// returns GPU time per saxpy.
    pub fn run_gpu(&self, reps: usize) -> Result<Duration> {
        let mut b = self
            .gpu
            .batch_with(BatchOptions::single_submit().with_profiling(Profiling::Batch))?;
        for r in 0..reps {
            if r > 0 {
                b.barrier();
            }
            self.record(&mut b)?;
        }
        let ns = b.submit_async()?.profile()?.total_ns;
        Ok(Duration::from_nanos((ns / reps as f64) as u64))
    }

    /// Runs `reps` saxpys and returns wall time per saxpy (record, submit, wait).
    pub fn run_wall(&self, reps: usize) -> Result<Duration> {
        let t = Instant::now();
        let mut b = self.gpu.batch()?;
        for r in 0..reps {
            if r > 0 {
                b.barrier();
            }
            self.record(&mut b)?;
        }
        b.submit()?;
        Ok(t.elapsed() / reps as u32)
    }

    /// Checks y after `runs` saxpys since the buffers were filled.
    pub fn check(&self, offset: usize, runs: usize) -> std::result::Result<(), String> {
        let (hx, hy) = saxpy_inputs(self.n, offset);
        let y = self.y.download().map_err(|e| e.to_string())?;
        for i in 0..self.n {
            let want = hy[i] + runs as f32 * self.a * hx[i];
            if y[i] != want {
                return Err(format!("saxpy: y[{i}] = {} but expected {want}", y[i]));
            }
        }
        Ok(())
    }
}

/// Buffer-to-buffer copy of `bytes`.
pub struct Copy {
    /// The device it runs on.
    pub gpu: Device,
    /// What is copied (a known pattern).
    pub src: Buffer<u32>,
    /// Where it goes.
    pub dst: Buffer<u32>,
}

impl Copy {
    /// The two buffers of `bytes` each, src filled with its pattern.
    pub fn new(gpu: &Device, bytes: u64) -> Result<Copy> {
        let words = (bytes / 4) as usize;
        let host: Vec<u32> = (0..words as u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        Ok(Copy {
            gpu: gpu.clone(),
            src: gpu.upload(&host)?,
            dst: gpu.alloc(words)?,
        })
    }

    /// Bytes one copy moves (read + write).
    pub fn bytes(&self) -> u64 {
        2 * self.src.byte_size()
    }

    /// One copy in a profiled batch: GPU time.
    pub fn run_gpu(&self) -> Result<Duration> {
        let mut b = self
            .gpu
            .batch_with(BatchOptions::single_submit().with_profiling(Profiling::Batch))?;
        b.copy(&self.src, &self.dst)?;
        let ns = b.submit_async()?.profile()?.total_ns;
        Ok(Duration::from_nanos(ns as u64))
    }

    /// Checks that dst equals src.
    pub fn check(&self) -> std::result::Result<(), String> {
        let d = self.dst.download().map_err(|e| e.to_string())?;
        for (i, v) in d.iter().enumerate() {
            let want = (i as u32).wrapping_mul(2_654_435_761);
            if *v != want {
                return Err(format!("copy: dst[{i}] = {v:#x}, expected {want:#x}"));
            }
        }
        Ok(())
    }
}

/// Host transfers to and from one device-local buffer.
pub struct Transfer {
    /// The device-local buffer.
    pub buf: Buffer<f32>,
    /// The host data, as long as the buffer.
    pub host: Vec<f32>,
}

impl Transfer {
    /// A device-local buffer of `bytes` and host data as long.
    pub fn new(gpu: &Device, bytes: u64) -> Result<Transfer> {
        let n = (bytes / 4) as usize;
        // Touched before timing, so page faults stay out of the figures.
        let host: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
        Ok(Transfer {
            buf: gpu.alloc(n)?,
            host,
        })
    }

    /// Bytes one transfer moves.
    pub fn bytes(&self) -> u64 {
        self.buf.byte_size()
    }

    /// Host → device, wall time.
    pub fn upload(&self) -> Result<Duration> {
        let t = Instant::now();
        self.buf.write(0, &self.host)?;
        Ok(t.elapsed())
    }

    /// Device → host, wall time.
    pub fn download(&mut self) -> Result<Duration> {
        let t = Instant::now();
        self.buf.download_into(&mut self.host)?;
        Ok(t.elapsed())
    }

    /// Round trip check: upload, download, compare.
    pub fn check(&mut self) -> std::result::Result<(), String> {
        self.upload().map_err(|e| e.to_string())?;
        let want = self.host.clone();
        self.host.iter_mut().for_each(|v| *v = -1.0);
        self.download().map_err(|e| e.to_string())?;
        if self.host != want {
            return Err("transfer: downloaded data differs from uploaded".into());
        }
        Ok(())
    }
}

/// GB/s (10^9 bytes per second).
pub fn gbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e9
}
