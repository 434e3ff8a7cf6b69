//! The report's workloads on scry-gpu 0.1 (its Vulkan backend, WGSL
//! compiled by naga).
//!
//! What its API offers, and so what is measured: `Device::auto` (no
//! adapter choice), `upload` (allocates a new buffer), `alloc`, `compile`,
//! `batch()` with `run_with_push_constants` / `run_configured` / `barrier`
//! (a global compute→compute memory barrier) / `submit` (fence wait) /
//! `submit_async` + `Ticket::{is_ready, wait}`, `Buffer::download` (returns
//! a Vec), `copy_buffer` (allocates the destination). No timestamps, no
//! buffer ranges (every binding is the whole buffer), no write into an
//! existing buffer.

use std::time::Instant;

use scry_gpu::{Buffer, Device, Kernel};

use crate::{
    check_chain, gbps, grid, measure, pattern, sample_indices, saxpy_x, saxpy_y0, us, Adapter,
    Config, Fail, PeerReport, Workload, N, SAXPY_A, WG,
};

const AXPB: &str = r#"
struct P { a: f32, b: f32, n: u32 }
var<push_constant> p: P;
@group(0) @binding(0) var<storage, read_write> x: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i < p.n) {
        x[i] = x[i] * p.a + p.b;
    }
}
"#;

const SAXPY: &str = r#"
struct P { a: f32 }
var<push_constant> p: P;
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> y: array<vec4<f32>>;

// A 2-D grid of 256-wide groups (one dimension holds at most 65535 groups).
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i < arrayLength(&y)) {
        y[i] = p.a * x[i] + y[i];
    }
}
"#;

const NO_TIMESTAMPS: &str = "scry-gpu has no timestamp queries";

struct Dispatch<'g> {
    gpu: &'g Device,
    k: Kernel,
    x: Buffer<f32>,
    many: Vec<Buffer<f32>>,
    pc: [u8; 12],
}

impl<'g> Dispatch<'g> {
    fn new(gpu: &'g Device, steps: usize) -> Result<Dispatch<'g>, Fail> {
        let mut pc = [0u8; 12];
        pc[..4].copy_from_slice(&1.0f32.to_le_bytes());
        pc[4..8].copy_from_slice(&1.0f32.to_le_bytes());
        pc[8..].copy_from_slice(&N.to_le_bytes());
        let zeros = vec![0.0f32; N as usize];
        Ok(Dispatch {
            gpu,
            k: gpu.compile(AXPB)?,
            x: gpu.upload(&zeros)?,
            many: (0..steps)
                .map(|_| gpu.upload(&zeros))
                .collect::<Result<_, _>>()?,
            pc,
        })
    }

    fn record(&self, b: &mut scry_gpu::Batch, n: usize, chain: bool) -> Result<(), Fail> {
        for i in 0..n {
            if chain {
                b.run_with_push_constants(&self.k, &[&self.x], N, &self.pc)?;
                b.barrier();
            } else {
                b.run_with_push_constants(&self.k, &[&self.many[i]], N, &self.pc)?;
            }
        }
        Ok(())
    }

    /// The chain from zero (buffers are fresh from `upload`), and the
    /// independent dispatches once each, checked.
    fn verify(&self, steps: usize) -> Result<(), Fail> {
        let mut b = self.gpu.batch()?;
        self.record(&mut b, steps, true)?;
        self.record(&mut b, steps, false)?;
        b.submit()?;
        check_chain(&self.x.download()?, steps)?;
        for i in [0, steps / 2, steps - 1] {
            check_chain(&self.many[i].download()?, 1).map_err(|e| match e {
                Fail::Wrong(w) => Fail::Wrong(format!("independent buffer {i}: {w}")),
                e => e,
            })?;
        }
        Ok(())
    }

    /// CPU µs per dispatch recorded into a batch (the same kernel on the
    /// same buffer, as gpu_report does); the batch is dropped unsubmitted.
    fn record_cost(&self, n: usize, barrier: bool) -> Result<f64, Fail> {
        let mut b = self.gpu.batch()?;
        let t = Instant::now();
        for _ in 0..n {
            b.run_with_push_constants(&self.k, &[&self.x], N, &self.pc)?;
            if barrier {
                b.barrier();
            }
        }
        let e = t.elapsed();
        drop(b);
        Ok(us(e) / n as f64)
    }

    /// Wall µs per dispatch: new batch, record, submit, fence wait.
    fn run(&self, n: usize, chain: bool) -> Result<f64, Fail> {
        let t = Instant::now();
        let mut b = self.gpu.batch()?;
        self.record(&mut b, n, chain)?;
        b.submit()?;
        Ok(us(t.elapsed()) / n as f64)
    }

    fn round_trip(&self, spin: bool) -> Result<f64, Fail> {
        let t = Instant::now();
        let mut b = self.gpu.batch()?;
        b.run_with_push_constants(&self.k, &[&self.x], N, &self.pc)?;
        if spin {
            let ticket = b.submit_async()?;
            while !ticket.is_ready()? {
                std::hint::spin_loop();
            }
            ticket.wait()?;
        } else {
            b.submit()?;
        }
        Ok(us(t.elapsed()))
    }
}

/// Runs every workload; the report says what could not be run and why.
pub fn run(cfg: &Config, adapter: &Adapter, version: &'static str) -> PeerReport {
    let mut r = PeerReport::new("scry-gpu", version);
    let gpu = match Device::auto() {
        Ok(g) if g.name() == adapter.name => g,
        Ok(g) => {
            let why = format!("Device::auto chose {}, not {}", g.name(), adapter.name);
            r.setup = format!("not run: {why}");
            for w in Workload::ALL {
                r.na(w, why.clone());
            }
            return r;
        }
        Err(e) => {
            r.setup = format!("not run: Device::auto: {e}");
            for w in Workload::ALL {
                r.na(w, format!("no scry-gpu device: {e}"));
            }
            return r;
        }
    };
    r.setup = format!(
        "{} via {:?} (Device::auto: first discrete GPU, else first integrated, else first); \
         parameters in push constants; no timestamps",
        gpu.name(),
        gpu.backend_kind()
    );
    dispatch_workloads(cfg, &gpu, &mut r);
    saxpy(cfg, adapter, &gpu, &mut r);
    copy(cfg, &gpu, &mut r);
    transfers(cfg, &gpu, &mut r);
    r
}

const DISPATCH_ROWS: [Workload; 8] = [
    Workload::RecordDispatch,
    Workload::RecordDispatchBarrier,
    Workload::ChainGpu,
    Workload::ChainWall,
    Workload::IndependentGpu,
    Workload::IndependentWall,
    Workload::RoundTripSpin,
    Workload::RoundTripBlocking,
];

fn dispatch_workloads(cfg: &Config, gpu: &Device, r: &mut PeerReport) {
    let steps = cfg.steps;
    let d = match Dispatch::new(gpu, steps).and_then(|d| d.verify(steps).map(|()| d)) {
        Ok(d) => d,
        Err(e) => {
            for w in DISPATCH_ROWS {
                r.fail(w, &e);
            }
            return;
        }
    };
    let (warm, reps) = (cfg.warm, cfg.reps);
    r.put(
        Workload::RecordDispatch,
        measure(warm, reps, || d.record_cost(steps, false)),
        format!(
            "{steps} × Batch::run_with_push_constants on one buffer (each allocates and \
             writes a descriptor set; a new descriptor pool every 64), batch made before \
             the clock starts, dropped unsubmitted"
        ),
    );
    r.put(
        Workload::RecordDispatchBarrier,
        measure(warm, reps, || d.record_cost(steps, true)),
        "as above, each dispatch followed by Batch::barrier (vkCmdPipelineBarrier with a \
         global memory barrier, compute → compute, SHADER_WRITE → SHADER_READ)",
    );
    r.na(Workload::ChainGpu, NO_TIMESTAMPS);
    r.put(
        Workload::ChainWall,
        measure(warm, reps, || d.run(steps, true)),
        "new batch, dispatch + barrier × n, submit (one vkQueueSubmit, vkWaitForFences)",
    );
    r.na(Workload::IndependentGpu, NO_TIMESTAMPS);
    r.put(
        Workload::IndependentWall,
        measure(warm, reps, || d.run(steps, false)),
        "new batch, one dispatch per buffer (separate buffers: scry-gpu binds whole \
         buffers only), no barriers, submit (vkWaitForFences)",
    );
    r.put(
        Workload::RoundTripSpin,
        measure(cfg.rt_warm, cfg.rt_reps, || d.round_trip(true)),
        "new batch, one dispatch, submit_async, spin on Ticket::is_ready \
         (vkGetFenceStatus), then wait (scry-gpu has no spin-then-block wait of its own)",
    );
    r.put(
        Workload::RoundTripBlocking,
        measure(cfg.rt_warm, cfg.rt_reps, || d.round_trip(false)),
        "new batch, one dispatch, submit (vkWaitForFences)",
    );
}

fn saxpy(cfg: &Config, adapter: &Adapter, gpu: &Device, r: &mut PeerReport) {
    r.na(Workload::SaxpyGpu, NO_TIMESTAMPS);
    let res = (|| -> Result<(), Fail> {
        let n = cfg.saxpy_n;
        let bytes_per = n as u64 * 4;
        if bytes_per > adapter.max_storage_buffer_range {
            return Err(Fail::Na(format!(
                "scry-gpu binds whole buffers; {bytes_per} B > maxStorageBufferRange {}",
                adapter.max_storage_buffer_range
            )));
        }
        let k = gpu.compile(SAXPY)?;
        let xs: Vec<f32> = (0..n).map(saxpy_x).collect();
        let ys: Vec<f32> = (0..n).map(saxpy_y0).collect();
        let x = gpu.upload(&xs)?;
        let y = gpu.upload(&ys)?;
        drop((xs, ys));
        let wgs = ((n / 4) as u32).div_ceil(WG);
        let (gx, gy) = grid(wgs, 65535);
        let a = SAXPY_A.to_le_bytes();
        let one = || -> Result<std::time::Duration, Fail> {
            let t = Instant::now();
            let mut b = gpu.batch()?;
            b.run_configured(&k, &[&x, &y], [gx, gy, 1], Some(&a))?;
            b.submit()?;
            Ok(t.elapsed())
        };
        let check = |runs: usize| -> Result<(), Fail> {
            let got = y.download()?;
            for i in sample_indices(n) {
                let want = saxpy_y0(i) + runs as f32 * SAXPY_A * saxpy_x(i);
                if got[i] != want {
                    return Err(Fail::Wrong(format!(
                        "saxpy after {runs} runs: y[{i}] = {}, expected {want}",
                        got[i]
                    )));
                }
            }
            Ok(())
        };
        one()?;
        check(1)?;
        let bytes = 12.0 * n as f64;
        let mut runs = 1;
        let v = measure(cfg.bw_warm, cfg.bw_reps, || {
            let d = one()?;
            runs += 1;
            Ok(gbps(bytes, d))
        });
        r.put(
            Workload::SaxpyWall,
            v,
            "WGSL y = a*x + y over vec4<f32>, a as a push constant, 2-D grid of 256-wide \
             groups via Batch::run_configured (run() clamps to 65535 groups); new batch + \
             submit (vkWaitForFences); GB/s counting 12 B per element",
        );
        check(runs)
    })();
    if let Err(e) = res {
        r.fail(Workload::SaxpyWall, &e);
    }
}

fn copy(cfg: &Config, gpu: &Device, r: &mut PeerReport) {
    r.na(Workload::CopyGpu, NO_TIMESTAMPS);
    let res = (|| -> Result<f64, Fail> {
        let size = cfg.copy_bytes;
        let words = (size / 4) as usize;
        let src = {
            let data: Vec<u32> = (0..words).map(pattern).collect();
            gpu.upload(&data)?
        };
        let idx = sample_indices(words);
        let first = gpu.copy_buffer(&src)?;
        let got = first.download()?;
        if let Some(&i) = idx.iter().find(|&&i| got[i] != pattern(i)) {
            return Err(Fail::Wrong(format!(
                "copy: word {i} = {:#x}, expected {:#x}",
                got[i],
                pattern(i)
            )));
        }
        drop((got, first));
        let bytes = 2.0 * size as f64;
        measure(cfg.bw_warm, cfg.bw_reps, || {
            let t = Instant::now();
            let dst = gpu.copy_buffer(&src)?;
            let d = t.elapsed();
            drop(dst);
            Ok(gbps(bytes, d))
        })
    })();
    r.put(
        Workload::CopyWall,
        res,
        "Device::copy_buffer, its only copy: allocates the destination (inside the timed \
         span; freed outside it), one-shot submit, vkWaitForFences; GB/s counting read + write",
    );
}

fn transfers(cfg: &Config, gpu: &Device, r: &mut PeerReport) {
    let size = cfg.transfer_bytes;
    let words = (size / 4) as usize;
    let data: Vec<u32> = (0..words).map(pattern).collect();
    let idx = sample_indices(words);
    let check = |got: &[u32], what: &str| -> Result<(), Fail> {
        match idx.iter().find(|&&i| got[i] != pattern(i)) {
            None => Ok(()),
            Some(&i) => Err(Fail::Wrong(format!(
                "{what}: word {i} = {:#x}, expected {:#x}",
                got[i],
                pattern(i)
            ))),
        }
    };
    let up = (|| -> Result<f64, Fail> {
        check(&gpu.upload(&data)?.download()?, "upload")?;
        measure(cfg.bw_warm, cfg.bw_reps, || {
            let t = Instant::now();
            let b = gpu.upload(&data)?;
            let d = t.elapsed();
            drop(b);
            Ok(gbps(size as f64, d))
        })
    })();
    r.put(
        Workload::Upload,
        up,
        "Device::upload, its only upload: allocates a new device-local buffer (inside the \
         timed span; freed outside it), memcpy into a pooled staging buffer, one-shot copy, \
         vkWaitForFences",
    );
    let down = (|| -> Result<f64, Fail> {
        let src = gpu.upload(&data)?;
        measure(cfg.bw_warm, cfg.bw_reps, || {
            let t = Instant::now();
            let got: Vec<u32> = src.download()?;
            let d = t.elapsed();
            check(&got, "download")?;
            Ok(gbps(size as f64, d))
        })
    })();
    r.put(
        Workload::Download,
        down,
        "Buffer::download: one-shot copy into a pooled staging buffer, vkWaitForFences, \
         copy into a new Vec",
    );
}
