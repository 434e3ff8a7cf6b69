//! A stack of transformer FFN blocks, `y = (silu(x·Wgᵀ) * (x·Wuᵀ))·Wdᵀ + x`
//! per layer, at Qwen3-4B's shape by default (hidden 2560, intermediate
//! 9728, 36 layers), weights as `nn.Linear` stores them (`[out, in]`), f32
//! and bf16: the decode-time workload of a real model, bound by the
//! bandwidth of reading every weight once per forward.
//!
//! Each layer is one [`ops::swiglu_mlp`] block (`--blocks mlp`, the
//! default: the merged `[2·I, H]` gate|up weight and the `[H, I]` down
//! weight, the residual added in place, [`ops::choose_mlp`]'s plan), or
//! the same block forced onto its fused kernel (`fused`:
//! [`ops::MlpPlan::fused`], one dispatch up to [`ops::MLP_FUSED_MAX_M`]
//! tokens where the adapter has f32 atomic adds), or two [`ops::linear`]
//! calls (`linear`): gate|up with [`Epilogue::SiluMul`], then down with an
//! in-place [`Epilogue::Residual`]. `--blocks mlp,fused,linear` times them
//! in one process (rows keyed `{dtype}_T{t}`, `{dtype}_T{t}_fused`,
//! `{dtype}_T{t}_linear`); each row prints the plan it ran. A forward for T tokens (x is `[T, H]`)
//! is recorded once as a [`Graph`] (a copy of x into the residual stream,
//! then the layers, barriers between) and launched `--reps` times (default
//! 30) after untimed launches of the same graph for at least `--warm-ms`
//! milliseconds (default 500) and at least `--warm` launches, so that the
//! GPU's clocks have ramped before the first timed one and nothing else
//! runs between the warm-up and the timing; each launch is timed on the
//! wall clock from launch to the end of its wait. Printed per (weights, T): median, min and
//! max ms per forward, the weight bandwidth (weight bytes / median time),
//! the copy bandwidth measured in the same process (a `Batch::copy` of a
//! large buffer, GPU time, read + write bytes, as `gpu_report` measures
//! it) and their ratio, and PyTorch's time from `scripts/ffn_reference.py`
//! when `--torch` names its JSON.
//!
//! Before timing, each (weights, T) forward runs once on the first
//! `--check-layers` layers (default 2, at the full width) and is compared
//! with a CPU f64 reference using the same (stored) weights; the largest
//! error relative to the output's largest magnitude must stay under 1e-4
//! (1e-3 where the layers run on the tensor cores, which round the
//! activations to f16: [`LinearPlan::rounds_x_to_f16`]).
//!
//! ```text
//! cargo run --release -p vkcompute-measure --example ffn_stack -- [--hidden 2560] [--inter 9728]
//!     [--layers 36] [--tokens 1,4,64] [--dtypes f32,bf16] [--warm 5]
//!     [--warm-ms 500] [--reps 30] [--check-layers 2] [--json out.json] [--torch torch.json]
//!     [--rows-per-pass R] [--splits S] [--profile] [--blocks mlp,fused,linear]
//! ```
//!
//! `--profile` launches each timed graph once more recorded with GPU
//! timestamps per command (after the timing, which runs unprofiled) and
//! prints the time per kernel and place in the layer (the gate|up launch,
//! the down launch and the split-K reductions after each).
//!
//! `--rows-per-pass` and `--splits` replace those of [`ops::choose_linear`]'s
//! plan for every layer (`--splits S_GATE_UP,S_DOWN`: one count for each
//! of the two launches) (for tuning: [`ops::linear_with_plan`]): rows per
//! pass 1 to 16 run the streaming kernel, 64 the register-tiled one that
//! the plan picks past 16 tokens where the adapter has no tensor-core
//! linear (`--rows-per-pass 16 --splits 1` at 64 tokens is the streaming
//! kernel's plan for them), 4294967295 ([`ops::LINEAR_TENSOR_TILES`]) the
//! tensor-core kernel the plan picks there for bf16 weights on coopmat2
//! adapters (forced at fewer rows, with that route's own split count
//! unless `--splits` says one), 4294967294 ([`ops::LINEAR_TENSOR_STREAM`])
//! the tensor-core streaming kernel (16-bit weights, up to 64 tokens; its
//! own split count unless `--splits` says one), 4294967293
//! ([`ops::LINEAR_TENSOR_WINDOW`]) its window form at any row count.

use vkcompute_measure::bandwidth;
use vkcompute_measure::cuda_ref;

use std::time::Instant;

use vkcompute::ops::{self, Bf16, Epilogue, LinearPlan, MatmulCaps};
use vkcompute::{Buffer, Device, Graph, Profiling, Result};

/// Command-line settings.
struct Args {
    hidden: u32,
    inter: u32,
    layers: usize,
    tokens: Vec<u32>,
    dtypes: Vec<String>,
    warm: usize,
    warm_ms: u64,
    reps: usize,
    check_layers: usize,
    json: Option<String>,
    torch: Option<String>,
    rows_per_pass: Option<u32>,
    splits: Option<(u32, u32)>,
    profile: bool,
    blocks: Vec<String>,
}

fn args() -> Args {
    let flag = |name: &str| std::env::args().skip_while(|a| a != name).nth(1);
    let num = |name: &str, default: usize| {
        flag(name).map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} takes a number, got {v:?}"))
        })
    };
    let list = |name: &str, default: &str| -> Vec<String> {
        flag(name)
            .unwrap_or_else(|| default.to_string())
            .split(',')
            .map(str::to_string)
            .collect()
    };
    let args = Args {
        hidden: num("--hidden", 2560) as u32,
        inter: num("--inter", 9728) as u32,
        layers: num("--layers", 36),
        tokens: list("--tokens", "1,4,64")
            .iter()
            .map(|t| t.parse().expect("--tokens takes numbers"))
            .collect(),
        dtypes: list("--dtypes", "f32,bf16"),
        warm: num("--warm", 5),
        warm_ms: num("--warm-ms", 500) as u64,
        reps: num("--reps", 30),
        check_layers: num("--check-layers", 2),
        json: flag("--json"),
        torch: flag("--torch"),
        rows_per_pass: flag("--rows-per-pass").map(|v| v.parse().expect("--rows-per-pass")),
        splits: flag("--splits").map(|v| {
            let n = |s: &str| s.parse().expect("--splits takes S or S_GATE_UP,S_DOWN");
            match v.split_once(',') {
                Some((g, d)) => (n(g), n(d)),
                None => (n(&v), n(&v)),
            }
        }),
        profile: std::env::args().any(|a| a == "--profile"),
        blocks: list("--blocks", "mlp"),
    };
    for b in &args.blocks {
        assert!(
            b == "mlp" || b == "linear" || b == "fused",
            "--blocks: mlp, fused or linear, got {b}"
        );
    }
    assert!(
        args.layers >= 1 && args.reps >= 1,
        "--layers and --reps ≥ 1"
    );
    for d in &args.dtypes {
        assert!(d == "f32" || d == "bf16", "--dtypes: f32 or bf16, got {d}");
    }
    args
}

/// One layer's weights on the GPU, and the values they hold (as f32, the
/// stored values exactly) for the CPU reference.
enum Weight {
    F32(Buffer<f32>),
    Bf16(Buffer<Bf16>),
}

impl Weight {
    fn bytes(&self) -> u64 {
        match self {
            Weight::F32(b) => b.byte_size(),
            Weight::Bf16(b) => b.byte_size(),
        }
    }

    fn dtype(&self) -> ops::DType {
        match self {
            Weight::F32(_) => ops::DType::F32,
            Weight::Bf16(_) => ops::DType::Bf16,
        }
    }

    /// Records one layer with [`linear_plan`]'s plan.
    fn linear(
        &self,
        b: &mut vkcompute::Batch,
        x: &Buffer<f32>,
        y: &Buffer<f32>,
        (m, k, n): (u32, u32, u32),
        e: Epilogue<'_>,
        force: (Option<u32>, Option<u32>),
    ) -> Result<()> {
        let w: ops::Weights<'_> = match self {
            Weight::F32(w) => w.into(),
            Weight::Bf16(w) => w.into(),
        };
        let silu = matches!(e, Epilogue::SiluMul);
        let caps = MatmulCaps::of(x.device().info());
        let plan = linear_plan(self.dtype(), (m, k, n), silu, force, &caps);
        ops::linear_with_plan(b, x, w, y, m, k, n, e, plan)
    }
}

/// The plan one linear layer records: [`ops::choose_linear`]'s, with
/// `force`'s rows per pass and splits where given (a forced tensor-core
/// route takes that route's own split count unless `force` names one).
fn linear_plan(
    dtype: ops::DType,
    (m, k, n): (u32, u32, u32),
    silu: bool,
    force: (Option<u32>, Option<u32>),
    caps: &MatmulCaps,
) -> LinearPlan {
    let auto = ops::choose_linear(m, k, n, dtype, silu, caps);
    let rows_per_pass = force.0.unwrap_or(auto.rows_per_pass);
    let auto_splits = match rows_per_pass {
        ops::LINEAR_TENSOR_TILES if force.0.is_some() => {
            ops::matmul::tensor_splits(m, k, n, silu, caps)
        }
        ops::LINEAR_TENSOR_STREAM if force.0.is_some() => {
            ops::matmul::stream_splits(m, k, n, silu, caps)
        }
        ops::LINEAR_TENSOR_WINDOW if force.0.is_some() => {
            ops::matmul::window_splits(m, k, n, silu, caps)
        }
        _ => auto.splits,
    };
    LinearPlan {
        rows_per_pass,
        splits: force.1.unwrap_or(auto_splits),
    }
}

/// Prints a profiled forward's GPU time per place in a layer: after the
/// first command (the input copy) the `layers` layers repeat one pattern
/// of commands, and each command is keyed by its label and its position
/// in that pattern (so the reduction after gate|up and the one after down
/// get rows of their own).
fn print_profile(what: &str, p: &vkcompute::Profile, layers: usize) {
    let body = p.commands.len().saturating_sub(1);
    let period = if layers > 0 && body % layers == 0 {
        body / layers
    } else {
        0
    };
    let mut places: Vec<(String, usize, f64)> = Vec::new();
    for (n, c) in p.commands.iter().enumerate() {
        let key = match (n, period) {
            (0, _) | (_, 0) => c.label.clone(),
            _ => format!(
                "{} (command {} of each layer)",
                c.label,
                (n - 1) % period + 1
            ),
        };
        match places.iter_mut().find(|(k, _, _)| *k == key) {
            Some(e) => {
                e.1 += 1;
                e.2 += c.gpu_ns;
            }
            None => places.push((key, 1, c.gpu_ns)),
        }
    }
    println!("{what}: profile of one forward (GPU timestamps per command):");
    for (key, count, ns) in places {
        println!(
            "  {key:<60} {count:4} × {:8.1} µs = {:9.1} µs",
            ns / count as f64 / 1e3,
            ns / 1e3
        );
    }
    println!("  total {:.1} µs", p.total_ns / 1e3);
}

/// Deterministic values in [-scale, scale) (the probes' stream, scaled).
fn random(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    vkcompute_measure::probe::values(seed, n)
        .into_iter()
        .map(|v| v * scale)
        .collect()
}

/// Distinct host weight sets; layer l uploads set l % SETS (each layer
/// still has its own GPU buffers, so every forward streams all of them).
const SETS: usize = 4;

/// Host weights of one set: merged gate|up `[2I, H]` and down `[H, I]`,
/// rounded to the stored type (so the CPU reference uses what the GPU
/// reads), scaled by 1/√fan-in to keep activations of order 1.
fn host_set(set: usize, h: usize, i: usize, bf16: bool) -> (Vec<f32>, Vec<f32>) {
    let round = |v: Vec<f32>| -> Vec<f32> {
        if bf16 {
            v.into_iter().map(|x| Bf16::from_f32(x).to_f32()).collect()
        } else {
            v
        }
    };
    let gu = random(100 + set as u64, 2 * i * h, 1.0 / (h as f32).sqrt());
    let d = random(200 + set as u64, h * i, 1.0 / (i as f32).sqrt());
    (round(gu), round(d))
}

fn upload(gpu: &Device, v: &[f32], bf16: bool) -> Result<Weight> {
    Ok(if bf16 {
        let b: Vec<Bf16> = v.iter().map(|&x| Bf16::from_f32(x)).collect();
        Weight::Bf16(gpu.upload(&b)?)
    } else {
        Weight::F32(gpu.upload(v)?)
    })
}

/// The buffers of one forward of T tokens.
struct Acts {
    x: Buffer<f32>,
    h: Buffer<f32>,
    y: Buffer<f32>,
}

/// The plan an MLP block records at `t` tokens: `mlp`, [`ops::choose_mlp`]'s;
/// `fused`, [`ops::MlpPlan::fused`] up to [`ops::MLP_FUSED_MAX_M`] tokens
/// on adapters with f32 atomic adds (else `choose_mlp`'s as well).
fn mlp_plan(gpu: &Device, block: &str, t: u32) -> ops::MlpPlan {
    let fuses = gpu.info().float32_atomic_add && t <= ops::MLP_FUSED_MAX_M;
    if block == "fused" && fuses {
        ops::MlpPlan::fused(t)
    } else {
        ops::choose_mlp(t)
    }
}

/// Records a forward through `layers` into a graph: y = x, then per layer
/// y = y + silu(y·Wgᵀ)·(y·Wuᵀ)·Wdᵀ, as `block` says (`mlp`, `fused`: one
/// [`ops::swiglu_mlp`]; `linear`: two [`ops::linear`]s through h, with
/// `force`'s plan where given).
#[allow(clippy::too_many_arguments)]
fn record(
    gpu: &Device,
    layers: &[(Weight, Weight)],
    a: &Acts,
    (t, h, i): (u32, u32, u32),
    force: (Option<u32>, Option<(u32, u32)>),
    profiling: Profiling,
    block: &str,
) -> Result<Graph> {
    let mut rec = gpu.graph_recorder_with(profiling)?;
    rec.copy(&a.x, &a.y)?;
    for (gu, d) in layers {
        rec.barrier();
        if block != "linear" {
            let plan = mlp_plan(gpu, block, t);
            let shape = (t, h, i);
            match (gu, d) {
                (Weight::F32(g), Weight::F32(d)) => {
                    ops::swiglu_mlp_with_plan(&mut rec, &a.y, None, g, d, &a.y, shape, plan)?
                }
                (Weight::Bf16(g), Weight::Bf16(d)) => {
                    ops::swiglu_mlp_with_plan(&mut rec, &a.y, None, g, d, &a.y, shape, plan)?
                }
                _ => unreachable!("a layer's weights share their dtype"),
            }
            continue;
        }
        gu.linear(
            &mut rec,
            &a.y,
            &a.h,
            (t, h, 2 * i),
            Epilogue::SiluMul,
            (force.0, force.1.map(|s| s.0)),
        )?;
        rec.barrier();
        d.linear(
            &mut rec,
            &a.h,
            &a.y,
            (t, i, h),
            Epilogue::Residual(&a.y),
            (force.0, force.1.map(|s| s.1)),
        )?;
    }
    rec.finish()
}

/// The CPU f64 forward of `layers` host sets over `x` ([t, h]).
fn reference(
    x: &[f32],
    sets: &[(Vec<f32>, Vec<f32>)],
    layers: usize,
    t: usize,
    h: usize,
    i: usize,
) -> Vec<f64> {
    let mut y: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    for l in 0..layers {
        let (gu, d) = &sets[l % SETS];
        let rows: Vec<Vec<f64>> = std::thread::scope(|s| {
            let handles: Vec<_> = y
                .chunks(h)
                .map(|row| {
                    s.spawn(move || {
                        let dot = |w: &[f32], v: &[f64]| -> f64 {
                            w.iter().zip(v).map(|(&a, &b)| f64::from(a) * b).sum()
                        };
                        let hid: Vec<f64> = (0..i)
                            .map(|j| {
                                let g = dot(&gu[j * h..(j + 1) * h], row);
                                let u = dot(&gu[(i + j) * h..(i + j + 1) * h], row);
                                g / (1.0 + (-g).exp()) * u
                            })
                            .collect();
                        (0..h)
                            .map(|c| row[c] + dot(&d[c * i..(c + 1) * i], &hid))
                            .collect()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|j| j.join().expect("reference thread"))
                .collect()
        });
        y = rows.concat();
    }
    debug_assert_eq!(y.len(), t * h);
    y
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The copy bandwidth (GB/s, read + write, GPU time; median of 9 after 3
/// warm-up copies), as `gpu_report` measures it.
fn copy_gbps(gpu: &Device) -> Result<f64> {
    let copy = bandwidth::Copy::new(gpu, bandwidth::copy_bytes(gpu.info()))?;
    for _ in 0..3 {
        copy.run_gpu()?;
    }
    let mut v = (0..9)
        .map(|_| copy.run_gpu().map(|d| d.as_secs_f64()))
        .collect::<Result<Vec<_>>>()?;
    copy.check().expect("copy result");
    Ok(copy.bytes() as f64 / median(&mut v) / 1e9)
}

/// One (weights, tokens) case of the table: what each block runs on.
struct Case<'a> {
    gpu: &'a Device,
    /// `f32` or `bf16`.
    dt: &'a str,
    layers: &'a [(Weight, Weight)],
    /// The host weight sets, for the reference.
    sets: &'a [(Vec<f32>, Vec<f32>)],
    /// The input rows, `[t, h]`.
    x: &'a [f32],
    acts: &'a Acts,
    /// (t, h, i).
    shape: (u32, u32, u32),
    /// Weight bytes of the whole stack.
    wbytes: u64,
    /// The copy bandwidth measured in this process, GB/s.
    copy: f64,
    /// `ffn_reference.py`'s JSON, when given.
    torch: Option<&'a str>,
}

/// Runs one block of a case: prints what runs, checks the first layers
/// against the f64 reference, times the whole stack (and profiles it with
/// `--profile`); returns the row's JSON fields.
fn run_block(a: &Args, c: &Case<'_>, block: &str) -> Result<String> {
    let (dt, gpu) = (c.dt, c.gpu);
    let (t, h, i) = c.shape;
    let (tu, hu, iu) = (t as usize, h as usize, i as usize);
    // `--rows-per-pass` and `--splits` apply to the explicit linear layers
    // only; the blocks take the op's own plans.
    let force = if block == "linear" {
        (a.rows_per_pass, a.splits)
    } else {
        (None, None)
    };
    // The kernels this block runs: the fused kernel, or two linear layers.
    let plan = mlp_plan(gpu, block, t);
    let fused = block != "linear" && plan.fused;
    let caps = MatmulCaps::of(gpu.info());
    let dtype = c.layers[0].0.dtype();
    let layer =
        |k, n, silu, s: Option<u32>| linear_plan(dtype, (t, k, n), silu, (force.0, s), &caps);
    let gate_up = layer(h, 2 * i, true, force.1.map(|s| s.0));
    let down = layer(i, h, false, force.1.map(|s| s.1));
    if fused {
        println!(
            "{dt} T={t} [{block}]: fused MLP kernel, {} rows per pass",
            plan.rows_per_pass
        );
    } else {
        println!("{dt} T={t} [{block}]: two linear layers: gate|up {gate_up:?}, down {down:?}");
    }
    // Correctness on the first layers, at the full width.
    let nc = a.check_layers.min(a.layers);
    if nc > 0 {
        let g = record(
            gpu,
            &c.layers[..nc],
            c.acts,
            c.shape,
            force,
            Profiling::Off,
            block,
        )?;
        g.launch()?.wait()?;
        let got = c.acts.y.download()?;
        let want = reference(c.x, c.sets, nc, tu, hu, iu);
        let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let err = got
            .iter()
            .zip(&want)
            .map(|(&g, &w)| (f64::from(g) - w).abs())
            .fold(0.0f64, f64::max)
            / scale;
        // Either layer on the tensor cores rounds its x to f16.
        let f16_acts = !fused && (gate_up.rounds_x_to_f16() || down.rounds_x_to_f16());
        let tol = if f16_acts { 1e-3 } else { 1e-4 };
        assert!(
            err < tol,
            "{dt} T={t} [{block}]: {nc} layers differ from the f64 reference by {err:.2e} of \
             the largest output (bound {tol:.0e})"
        );
        println!(
            "{dt} T={t} [{block}]: {nc} layers match the f64 reference (max error {err:.1e} of \
             the largest output)"
        );
    }
    let graph = record(gpu, c.layers, c.acts, c.shape, force, Profiling::Off, block)?;
    // Warm-up: the same graph, back to back, until the clocks have ramped
    // (at least --warm-ms and --warm launches).
    let warm_for = std::time::Duration::from_millis(a.warm_ms);
    let (w0, mut warm_n) = (Instant::now(), 0usize);
    while warm_n < a.warm || w0.elapsed() < warm_for {
        graph.launch()?.wait()?;
        warm_n += 1;
    }
    let mut times: Vec<f64> = (0..a.reps)
        .map(|_| {
            let s = Instant::now();
            graph.launch()?.wait()?;
            Ok(s.elapsed().as_secs_f64())
        })
        .collect::<Result<_>>()?;
    let med = median(&mut times);
    let (min, max) = (times[0], times[times.len() - 1]);
    let bw = c.wbytes as f64 / med / 1e9;
    let key = match block {
        "mlp" => format!("{dt}_T{t}"),
        b => format!("{dt}_T{t}_{b}"),
    };
    let theirs = c
        .torch
        .and_then(|j| cuda_ref::anchor_value(j, &format!("{dt}_T{t}_ms")));
    let vs = theirs.map_or(String::new(), |ms| {
        format!(", PyTorch {ms:.3} ms (ours / theirs {:.2})", med * 1e3 / ms)
    });
    println!(
        "{dt} T={t} [{block}]: median {:.3} ms (min {:.3}, max {:.3}) per forward of {} \
         launches; weights {bw:.1} GB/s = {:.2}× copy{vs}",
        med * 1e3,
        min * 1e3,
        max * 1e3,
        a.reps,
        bw / c.copy
    );
    if a.profile {
        let g = record(
            gpu,
            c.layers,
            c.acts,
            c.shape,
            force,
            Profiling::Commands,
            block,
        )?;
        g.launch()?.wait()?;
        g.launch()?.wait()?;
        print_profile(
            &format!("{dt} T={t} [{block}]"),
            &g.last_profile()?,
            c.layers.len(),
        );
    }
    Ok(format!(
        "\"{key}_ms\": {:.4}, \"{key}_min_ms\": {:.4}, \"{key}_max_ms\": {:.4}, \
         \"{key}_weight_GBps\": {bw:.2}",
        med * 1e3,
        min * 1e3,
        max * 1e3
    ))
}

fn main() -> Result<()> {
    let a = args();
    let gpu = Device::new()?;
    let info = gpu.info();
    let (h, i) = (a.hidden, a.inter);
    let (hu, iu) = (h as usize, i as usize);
    println!(
        "ffn_stack on {} ({}): hidden {h}, intermediate {i}, {} layers, tokens {:?}",
        info.name, info.driver_name, a.layers, a.tokens
    );
    let copy = copy_gbps(&gpu)?;
    println!("copy bandwidth (Batch::copy, read + write, GPU time): {copy:.1} GB/s");
    let torch = a
        .torch
        .as_ref()
        .map(|p| std::fs::read_to_string(p).expect("--torch file"));
    let mut json = Vec::new();
    for dt in &a.dtypes {
        let bf16 = dt == "bf16";
        let t0 = Instant::now();
        let sets: Vec<_> = (0..SETS.min(a.layers.max(a.check_layers)))
            .map(|s| host_set(s, hu, iu, bf16))
            .collect();
        let mut layers = Vec::with_capacity(a.layers);
        for l in 0..a.layers {
            let (gu, d) = &sets[l % sets.len()];
            layers.push((upload(&gpu, gu, bf16)?, upload(&gpu, d, bf16)?));
        }
        let wbytes: u64 = layers.iter().map(|(g, d)| g.bytes() + d.bytes()).sum();
        println!(
            "{dt}: {:.2} GB of weights made and uploaded in {:.1} s",
            wbytes as f64 / 1e9,
            t0.elapsed().as_secs_f64()
        );
        for &t in &a.tokens {
            let tu = t as usize;
            let x = random(7 + u64::from(t), tu * hu, 1.0);
            let acts = Acts {
                x: gpu.upload(&x)?,
                h: gpu.alloc(tu * iu)?,
                y: gpu.alloc(tu * hu)?,
            };
            let case = Case {
                gpu: &gpu,
                dt,
                layers: &layers,
                sets: &sets,
                x: &x,
                acts: &acts,
                shape: (t, h, i),
                wbytes,
                copy,
                torch: torch.as_deref(),
            };
            for block in &a.blocks {
                json.push(run_block(&a, &case, block)?);
            }
        }
    }
    if let Some(path) = a.json {
        let body = format!(
            "{{\"hidden\": {h}, \"inter\": {i}, \"layers\": {}, \"copy_GBps\": {copy:.2}, {}}}\n",
            a.layers,
            json.join(", ")
        );
        std::fs::write(&path, body).expect("--json file");
        println!("wrote {path}");
    }
    Ok(())
}
