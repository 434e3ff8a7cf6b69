//! The report's workloads on wgpu (Vulkan backend only).
//!
//! Parameters go in immediates (wgpu 30's name for push constants,
//! `Features::IMMEDIATES`, `var<immediate>` in WGSL, `set_immediates`)
//! when the adapter has them, else in a uniform buffer written once.
//! wgpu has no barrier call: wgpu-core tracks every buffer's use and
//! inserts a buffer barrier before a dispatch whose read-write storage
//! buffer an earlier dispatch wrote, so a chain is one compute pass.
//! GPU times are pass timestamps (`ComputePassTimestampWrites`, needs
//! `TIMESTAMP_QUERY`) or encoder timestamps around a copy (needs
//! `TIMESTAMP_QUERY_INSIDE_ENCODERS`).

use std::sync::mpsc;
use std::time::Instant;

use wgpu::util::DeviceExt as _;

mod bandwidth;

use crate::{
    check_chain, gbps, grid, measure, pattern, sample_indices, saxpy_x, saxpy_y0, us, Adapter,
    Config, Fail, PeerReport, Workload, N, SAXPY_A, WG,
};

const AXPB_PARAMS: &str = "struct P { a: f32, b: f32, n: u32 }\n";
const AXPB_BODY: &str = r#"
@group(0) @binding(0) var<storage, read_write> x: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i < p.n) {
        x[i] = x[i] * p.a + p.b;
    }
}
"#;

const SAXPY_PARAMS: &str = "struct P { a: f32 }\n";
const SAXPY_BODY: &str = r#"
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> y: array<vec4<f32>>;

// A 2-D grid of 256-wide groups (one dimension holds at most 65535 groups);
// the bound is the length of the bound slice.
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i < arrayLength(&y)) {
        y[i] = p.a * x[i] + y[i];
    }
}
"#;

/// WGSL for a kernel whose parameters are immediates or, without them, a
/// uniform at `uniform_binding`.
fn shader(params: &str, body: &str, immediates: bool, uniform_binding: u32) -> String {
    let decl = if immediates {
        "var<immediate> p: P;".to_string()
    } else {
        format!("@group(0) @binding({uniform_binding}) var<uniform> p: P;")
    };
    format!("{params}{decl}\n{body}")
}

/// Timestamp query set plus the buffers its two values are read through.
struct Timestamps {
    set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    read: wgpu::Buffer,
}

struct Gpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
    limits: wgpu::Limits,
    immediates: bool,
    /// Pass timestamps (TIMESTAMP_QUERY).
    ts: Option<Timestamps>,
    /// Timestamps on the encoder, around copies (TIMESTAMP_QUERY_INSIDE_ENCODERS).
    encoder_ts: bool,
    /// Nanoseconds per timestamp tick.
    period: f64,
    /// Largest storage binding used (the adapter's, or the test override
    /// `VKCOMPUTE_PEERS_MAX_BINDING`).
    max_binding: u64,
}

fn storage_entry(binding: u32, read_only: bool) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

fn uniform_entry(binding: u32) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

fn whole(buffer: &wgpu::Buffer, binding: u32) -> wgpu::BindGroupEntry<'_> {
    wgpu::BindGroupEntry {
        binding,
        resource: buffer.as_entire_binding(),
    }
}

impl Gpu {
    fn new(adapter: &Adapter) -> Result<(Gpu, String), Fail> {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = wgpu::Backends::VULKAN;
        desc.flags = wgpu::InstanceFlags::empty();
        let instance = wgpu::Instance::new(desc);
        let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::VULKAN));
        let names: Vec<String> = adapters.iter().map(|a| a.get_info().name).collect();
        let found = adapters
            .into_iter()
            .filter(|a| {
                let i = a.get_info();
                i.vendor == adapter.vendor_id
                    && i.device == adapter.device_id
                    && i.name == adapter.name
            })
            .nth(adapter.twin)
            .ok_or_else(|| {
                Fail::Na(format!(
                    "wgpu does not offer {} (it lists: {})",
                    adapter.name,
                    names.join(", ")
                ))
            })?;
        let info = found.get_info();
        let mut want = wgpu::Features::IMMEDIATES
            | wgpu::Features::TIMESTAMP_QUERY
            | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS;
        if std::env::var_os("VKCOMPUTE_PEERS_NO_IMMEDIATES").is_some() {
            want.remove(wgpu::Features::IMMEDIATES);
        }
        let features = found.features() & want;
        let limits = found.limits();
        let (device, queue) = pollster::block_on(found.request_device(&wgpu::DeviceDescriptor {
            label: Some("peers"),
            required_features: features,
            required_limits: limits.clone(),
            memory_hints: wgpu::MemoryHints::Performance,
            ..Default::default()
        }))?;
        let immediates = features.contains(wgpu::Features::IMMEDIATES);
        let ts = features
            .contains(wgpu::Features::TIMESTAMP_QUERY)
            .then(|| Timestamps {
                set: device.create_query_set(&wgpu::QuerySetDescriptor {
                    label: Some("ts"),
                    ty: wgpu::QueryType::Timestamp,
                    count: 2,
                }),
                resolve: device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("ts resolve"),
                    size: 16,
                    usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: false,
                }),
                read: device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("ts read"),
                    size: 16,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                }),
            });
        let encoder_ts =
            ts.is_some() && features.contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS);
        let period = queue.get_timestamp_period() as f64;
        let max_binding = std::env::var("VKCOMPUTE_PEERS_MAX_BINDING")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(limits.max_storage_buffer_binding_size)
            .min(limits.max_storage_buffer_binding_size);
        let setup = format!(
            "{} via {:?} ({} {}); parameters in {}; timestamps: {}; max storage binding {} B",
            info.name,
            info.backend,
            info.driver,
            info.driver_info,
            if immediates {
                "immediates (push constants)"
            } else {
                "a uniform buffer (no IMMEDIATES)"
            },
            match (ts.is_some(), encoder_ts) {
                (true, true) => "pass + encoder",
                (true, false) => "pass only",
                _ => "none",
            },
            max_binding
        );
        Ok((
            Gpu {
                device,
                queue,
                limits,
                immediates,
                ts,
                encoder_ts,
                period,
                max_binding,
            },
            setup,
        ))
    }

    fn wait(&self, idx: wgpu::SubmissionIndex) -> Result<(), Fail> {
        self.device.poll(wgpu::PollType::Wait {
            submission_index: Some(idx),
            timeout: None,
        })?;
        Ok(())
    }

    /// Maps `buf` for reading and waits until it is mapped.
    fn map_read(&self, buf: &wgpu::Buffer) -> Result<(), Fail> {
        let (tx, rx) = mpsc::channel();
        buf.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        self.device.poll(wgpu::PollType::wait_indefinitely())?;
        rx.try_recv()
            .map_err(|_| Fail::Error("map_async did not complete".into()))??;
        Ok(())
    }

    fn buffer(&self, label: &str, size: u64, usage: wgpu::BufferUsages) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage,
            mapped_at_creation: false,
        })
    }

    /// A storage buffer of `words` u32/f32 filled by `fill(i)`, written
    /// through a mapping at creation, 16 MiB at a time.
    fn filled(
        &self,
        label: &str,
        words: usize,
        usage: wgpu::BufferUsages,
        fill: impl Fn(usize) -> u32,
    ) -> Result<wgpu::Buffer, Fail> {
        let buf = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: words as u64 * 4,
            usage,
            mapped_at_creation: true,
        });
        {
            let mut view = buf.get_mapped_range_mut(..)?;
            let chunk = 4 << 20;
            let mut tmp = Vec::with_capacity(chunk);
            for start in (0..words).step_by(chunk) {
                let end = (start + chunk).min(words);
                tmp.clear();
                tmp.extend((start..end).map(&fill));
                view.slice(start * 4..end * 4)
                    .copy_from_slice(bytemuck::cast_slice(&tmp));
            }
        }
        buf.unmap();
        Ok(buf)
    }

    /// Reads the 32-bit words at `indices` of `buf` (one copy per word into
    /// one readback buffer, one submission).
    fn read_words(&self, buf: &wgpu::Buffer, indices: &[usize]) -> Result<Vec<u32>, Fail> {
        let rb = self.buffer(
            "readback",
            (indices.len() as u64 * 4).max(8).next_multiple_of(8),
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        );
        let mut enc = self.device.create_command_encoder(&Default::default());
        for (k, &i) in indices.iter().enumerate() {
            enc.copy_buffer_to_buffer(buf, i as u64 * 4, &rb, k as u64 * 4, 4);
        }
        let idx = self.queue.submit([enc.finish()]);
        self.wait(idx)?;
        self.map_read(&rb)?;
        let words = {
            let view = rb.get_mapped_range(..)?;
            bytemuck::cast_slice::<u8, u32>(&view)[..indices.len()].to_vec()
        };
        rb.unmap();
        Ok(words)
    }

    /// Resolves the two timestamps into the read buffer (end of an encoder).
    fn resolve(&self, enc: &mut wgpu::CommandEncoder) {
        if let Some(ts) = &self.ts {
            enc.resolve_query_set(&ts.set, 0..2, &ts.resolve, 0);
            enc.copy_buffer_to_buffer(&ts.resolve, 0, &ts.read, 0, 16);
        }
    }

    /// Nanoseconds between the two timestamps of the last resolved run.
    fn elapsed_ns(&self) -> Result<f64, Fail> {
        let ts = self
            .ts
            .as_ref()
            .ok_or_else(|| Fail::Na("no timestamps".into()))?;
        self.map_read(&ts.read)?;
        let t: [u64; 2] = {
            let view = ts.read.get_mapped_range(..)?;
            let w = bytemuck::cast_slice::<u8, u64>(&view);
            [w[0], w[1]]
        };
        ts.read.unmap();
        Ok(t[1].wrapping_sub(t[0]) as f64 * self.period)
    }

    fn pass_timestamps(&self) -> Option<wgpu::ComputePassTimestampWrites<'_>> {
        self.ts.as_ref().map(|ts| wgpu::ComputePassTimestampWrites {
            query_set: &ts.set,
            beginning_of_pass_write_index: Some(0),
            end_of_pass_write_index: Some(1),
        })
    }

    fn pipeline(
        &self,
        src: &str,
        entries: &[wgpu::BindGroupLayoutEntry],
        immediate_size: u32,
    ) -> (wgpu::ComputePipeline, wgpu::BindGroupLayout) {
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: None,
                source: wgpu::ShaderSource::Wgsl(src.into()),
            });
        let bgl = self
            .device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: None,
                entries,
            });
        let layout = self
            .device
            .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: None,
                bind_group_layouts: &[Some(&bgl)],
                immediate_size: if self.immediates { immediate_size } else { 0 },
            });
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: None,
                layout: Some(&layout),
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            });
        (pipeline, bgl)
    }

    fn uniform(&self, bytes: &[u8]) -> wgpu::Buffer {
        let mut data = bytes.to_vec();
        data.resize(16, 0);
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("params"),
                contents: &data,
                usage: wgpu::BufferUsages::UNIFORM,
            })
    }
}

/// The tiny-dispatch workloads: one 1 Ki buffer for the chain, `steps`
/// separate 1 Ki buffers for the independent dispatches (wgpu tracks whole
/// buffers, so dispatches on slices of one buffer would get barriers).
struct Dispatch<'g> {
    g: &'g Gpu,
    pipeline: wgpu::ComputePipeline,
    x: wgpu::Buffer,
    bg_x: wgpu::BindGroup,
    many: Vec<wgpu::Buffer>,
    bg_many: Vec<wgpu::BindGroup>,
    pc: [u8; 12],
}

impl<'g> Dispatch<'g> {
    fn new(g: &'g Gpu, steps: usize) -> Dispatch<'g> {
        let mut pc = [0u8; 12];
        pc[..4].copy_from_slice(&1.0f32.to_le_bytes());
        pc[4..8].copy_from_slice(&1.0f32.to_le_bytes());
        pc[8..].copy_from_slice(&N.to_le_bytes());
        let src = shader(AXPB_PARAMS, AXPB_BODY, g.immediates, 1);
        let mut entries = vec![storage_entry(0, false)];
        if !g.immediates {
            entries.push(uniform_entry(1));
        }
        let (pipeline, bgl) = g.pipeline(&src, &entries, 12);
        let params = (!g.immediates).then(|| g.uniform(&pc));
        let usage = wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC;
        let bind = |buf: &wgpu::Buffer| {
            let mut e = vec![whole(buf, 0)];
            if let Some(p) = &params {
                e.push(whole(p, 1));
            }
            g.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &bgl,
                entries: &e,
            })
        };
        let x = g.buffer("x", N as u64 * 4, usage);
        let bg_x = bind(&x);
        let many: Vec<wgpu::Buffer> = (0..steps)
            .map(|_| g.buffer("many", N as u64 * 4, usage))
            .collect();
        let bg_many = many.iter().map(bind).collect();
        Dispatch {
            g,
            pipeline,
            x,
            bg_x,
            many,
            bg_many,
            pc,
        }
    }

    /// Records `n` dispatches into one compute pass (on `x` when `chain`,
    /// else one buffer each), with pass timestamps when `timed`, and
    /// finishes the encoder (wgpu encodes the Vulkan commands there).
    fn encode(&self, n: usize, chain: bool, timed: bool) -> wgpu::CommandBuffer {
        let g = self.g;
        let mut enc = g.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: if timed { g.pass_timestamps() } else { None },
            });
            for i in 0..n {
                pass.set_pipeline(&self.pipeline);
                pass.set_bind_group(0, if chain { &self.bg_x } else { &self.bg_many[i] }, &[]);
                if g.immediates {
                    pass.set_immediates(0, &self.pc);
                }
                pass.dispatch_workgroups(N / WG, 1, 1);
            }
        }
        if timed {
            g.resolve(&mut enc);
        }
        enc.finish()
    }

    fn zero(&self, buf: &wgpu::Buffer) {
        self.g
            .queue
            .write_buffer(buf, 0, bytemuck::cast_slice(&[0.0f32; N as usize]));
    }

    /// Runs the chain once from zero and each independent dispatch once from
    /// zero, and checks both.
    fn verify(&self, steps: usize) -> Result<(), Fail> {
        let g = self.g;
        self.zero(&self.x);
        for b in &self.many {
            self.zero(b);
        }
        let idx = g.queue.submit([
            self.encode(steps, true, false),
            self.encode(steps, false, false),
        ]);
        g.wait(idx)?;
        let all: Vec<usize> = (0..N as usize).collect();
        let x: Vec<f32> = g
            .read_words(&self.x, &all)?
            .into_iter()
            .map(f32::from_bits)
            .collect();
        check_chain(&x, steps)?;
        for i in [0, steps / 2, steps - 1] {
            let v: Vec<f32> = g
                .read_words(&self.many[i], &all)?
                .into_iter()
                .map(f32::from_bits)
                .collect();
            check_chain(&v, 1).map_err(|e| match e {
                Fail::Wrong(w) => Fail::Wrong(format!("independent buffer {i}: {w}")),
                e => e,
            })?;
        }
        Ok(())
    }

    /// CPU µs per dispatch: encoder creation to `finish()`, not submitted.
    fn record_cost(&self, n: usize, chain: bool) -> f64 {
        let t = Instant::now();
        let cb = self.encode(n, chain, false);
        let e = t.elapsed();
        drop(cb);
        us(e) / n as f64
    }

    /// µs per dispatch: GPU (pass timestamps) or wall (encode → wait).
    fn run(&self, n: usize, chain: bool, gpu: bool) -> Result<f64, Fail> {
        let g = self.g;
        if gpu {
            let idx = g.queue.submit([self.encode(n, chain, true)]);
            g.wait(idx)?;
            Ok(g.elapsed_ns()? / 1e3 / n as f64)
        } else {
            let t = Instant::now();
            let idx = g.queue.submit([self.encode(n, chain, false)]);
            g.wait(idx)?;
            Ok(us(t.elapsed()) / n as f64)
        }
    }

    /// One dispatch: encode, submit, wait (spinning on `poll(Poll)`, or
    /// blocking in `poll(Wait)`).
    fn round_trip(&self, spin: bool) -> Result<f64, Fail> {
        let g = self.g;
        let t = Instant::now();
        let idx = g.queue.submit([self.encode(1, true, false)]);
        if spin {
            while !g.device.poll(wgpu::PollType::Poll)?.is_queue_empty() {
                std::hint::spin_loop();
            }
        } else {
            g.wait(idx)?;
        }
        Ok(us(t.elapsed()))
    }
}

/// Runs every workload; the report says what could not be run and why.
pub fn run(cfg: &Config, adapter: &Adapter, version: &'static str) -> PeerReport {
    let mut r = PeerReport::new("wgpu", version);
    let g = match Gpu::new(adapter) {
        Ok((g, setup)) => {
            r.setup = setup;
            g
        }
        Err(e) => {
            let why = match e {
                Fail::Na(s) | Fail::Error(s) | Fail::Wrong(s) => s,
            };
            r.setup = format!("not run: {why}");
            for w in crate::Workload::ALL {
                r.na(w, format!("no wgpu device: {why}"));
            }
            return r;
        }
    };
    dispatch_workloads(cfg, &g, &mut r);
    bandwidth::saxpy(cfg, &g, &mut r);
    bandwidth::copy(cfg, &g, &mut r);
    bandwidth::transfers(cfg, &g, &mut r);
    r
}

fn dispatch_workloads(cfg: &Config, g: &Gpu, r: &mut PeerReport) {
    let steps = cfg.steps;
    let d = Dispatch::new(g, steps);
    let pc_how = if g.immediates {
        "set_immediates"
    } else {
        "(parameters in a uniform)"
    };
    let verified = d.verify(steps);
    if let Err(e) = verified {
        for w in [
            Workload::RecordDispatch,
            Workload::RecordDispatchBarrier,
            Workload::ChainGpu,
            Workload::ChainWall,
            Workload::IndependentGpu,
            Workload::IndependentWall,
            Workload::RoundTripSpin,
            Workload::RoundTripBlocking,
        ] {
            r.fail(w, &e);
        }
        return;
    }
    let (warm, reps) = (cfg.warm, cfg.reps);
    r.put(
        Workload::RecordDispatch,
        measure(warm, reps, || Ok(d.record_cost(steps, false))),
        format!(
            "create_command_encoder, one compute pass with {steps} × (set_pipeline, \
             set_bind_group, {pc_how}, dispatch_workgroups) on {steps} separate buffers \
             (on one buffer wgpu would add a barrier per dispatch), end of pass, finish() \
             (where wgpu encodes the Vulkan commands); not submitted"
        ),
    );
    r.put(
        Workload::RecordDispatchBarrier,
        measure(warm, reps, || Ok(d.record_cost(steps, true))),
        "as above, every dispatch on the same buffer: wgpu has no barrier call; \
         wgpu-core inserts a buffer barrier (vkCmdPipelineBarrier, shader write → \
         shader read/write) before each dispatch itself, at finish()",
    );
    for (chain, gpu_w, wall_w) in [
        (true, Workload::ChainGpu, Workload::ChainWall),
        (false, Workload::IndependentGpu, Workload::IndependentWall),
    ] {
        let what = if chain {
            "one compute pass, every dispatch on one buffer (wgpu's own barrier before each)"
        } else {
            "one compute pass, one buffer per dispatch (no barriers)"
        };
        if g.ts.is_some() {
            r.put(
                gpu_w,
                measure(warm, reps, || d.run(steps, chain, true)),
                format!(
                    "{what}; timestamps at the pass's start and end \
                     (ComputePassTimestampWrites, both written at BOTTOM_OF_PIPE), \
                     recorded in full then submitted once"
                ),
            );
        } else {
            r.na(gpu_w, "adapter lacks TIMESTAMP_QUERY");
        }
        r.put(
            wall_w,
            measure(warm, reps, || d.run(steps, chain, false)),
            format!("{what}; encode + finish + submit + poll(Wait) on that submission"),
        );
    }
    r.put(
        Workload::RoundTripSpin,
        measure(cfg.rt_warm, cfg.rt_reps, || d.round_trip(true)),
        "one dispatch: encode, finish, submit, then device.poll(PollType::Poll) in a loop \
         until the queue is empty (wgpu has no spin-then-block wait of its own)",
    );
    r.put(
        Workload::RoundTripBlocking,
        measure(cfg.rt_warm, cfg.rt_reps, || d.round_trip(false)),
        "one dispatch: encode, finish, submit, device.poll(PollType::Wait) on that submission",
    );
}
