//! The f16 matmul benchmark: every candidate kernel of a shape, each row
//! recording the plan it names and printing the label of the kernel that
//! ran (from the GPU profile), warmed for at least [`WARM_FOR`] of its own
//! work, timed interleaved with the other candidates of the shape (each
//! round runs every candidate in turn, barriers between: an untimed launch,
//! then the timed one, so the timed launch finds L2 as a launch of the same
//! kernel left it, as in the cuBLAS reference's loop of one product; with
//! the previous candidate's output in L2 instead, 2048³ read 205 TFLOP/s
//! where the same kernel back to back reads 244), min / median / max over
//! the rounds, checked once against an error bound; then the default
//! plan's median over the best candidate's (the rule: at most
//! [`RULE_LIMIT`]). Candidates reading B stored N×K ([`Run::BatchedBt`],
//! fed the transpose of the same B) are timed beside the others but are
//! not candidates of the K×N default: the rule compares [`Run::Plan`]
//! rows only.
//!
//! Inputs have full entropy: f16 values with random 10-bit significands
//! and exponents over [1/8, 2), either sign, so products and sums round.
//! C accumulates in f32, so |C − exact| ≤ K·u·max|a|·max|b| with
//! u = 2⁻²³ (round-to-nearest f32 gives 2⁻²⁴; tensor cores may truncate)
//! is the bound every checked entry must meet.

use std::time::{Duration, Instant};

use vkcompute::ops::{self, BatchedShape, Cm2Tile, MatmulDtype, MatmulPlan};
use vkcompute::{Batch, BatchOptions, Buffer, Device, Profiling, Result};

use crate::Report;
pub use vkcompute_measure::probe::f16_inputs;

/// Back-to-back work of one candidate before its shape's timed rounds.
pub const WARM_FOR: Duration = Duration::from_millis(500);
/// Default plan's median over the best candidate's above which the
/// process fails: the choice is a rule, and the default is the best.
pub const RULE_LIMIT: f64 = 1.10;

/// What a candidate records.
#[derive(Debug, Clone, Copy)]
pub enum Run {
    /// [`ops::matmul::matmul_f16_with_plan`] with B stored K×N.
    Plan(MatmulPlan),
    /// One product through the batched entry with B stored N×K
    /// ([`BatchedShape::with_b_transposed`]): [`ops::matmul_f16_batched`]'s
    /// own choice with `None`, else
    /// [`ops::matmul::matmul_f16_batched_with_tile`] with this tile.
    BatchedBt(Option<Cm2Tile>),
}

/// A plan to time, under the name its rows carry.
pub struct Candidate {
    /// Row name (the tile, e.g. `cm1_128x128_w64x32_k32`).
    pub name: String,
    /// What it records.
    pub run: Run,
}

/// A candidate's inputs: A, B stored K×N and the same B stored N×K.
struct Inputs {
    a: Buffer<u16>,
    b: Buffer<u16>,
    bt: Buffer<u16>,
}

/// `v` (k×n row-major) stored n×k row-major: B as nn.Linear keeps it.
pub fn transposed<T: Copy + Default>(v: &[T], k: usize, n: usize) -> Vec<T> {
    let mut out = vec![T::default(); v.len()];
    for r in 0..k {
        for c in 0..n {
            out[c * k + r] = v[r * n + c];
        }
    }
    out
}

/// Largest |C − exact| over the checked entries (every entry when `full`,
/// else 64 spread over C, corners included), in f64.
pub fn abs_error(
    a: &[f32],
    b: &[f32],
    c: &[f32],
    (m, k, n): (usize, usize, usize),
    full: bool,
) -> f64 {
    let entry = |i: usize, j: usize| {
        let mut s = 0f64;
        for p in 0..k {
            s += f64::from(a[i * k + p]) * f64::from(b[p * n + j]);
        }
        let e = (f64::from(c[i * n + j]) - s).abs();
        if e.is_nan() {
            f64::INFINITY
        } else {
            e
        }
    };
    let mut worst = 0f64;
    if full {
        for i in 0..m {
            for j in 0..n {
                worst = worst.max(entry(i, j));
            }
        }
        return worst;
    }
    let mut pts = vec![(0, 0), (m - 1, n - 1), (0, n - 1), (m - 1, 0)];
    let mut x = (m * 31 + n * 17 + k) as u64 | 1;
    while pts.len() < 64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        pts.push(((x % m as u64) as usize, ((x >> 32) % n as u64) as usize));
    }
    pts.into_iter()
        .map(|(i, j)| entry(i, j))
        .fold(0.0, f64::max)
}

/// The bound of the module header: K·u·max|a|·max|b|, u = 2⁻²³.
pub fn error_bound(a: &[f32], b: &[f32], k: u32) -> f64 {
    let max = |v: &[f32]| v.iter().fold(0f32, |m, x| m.max(x.abs()));
    f64::from(k) * 2f64.powi(-23) * f64::from(max(a)) * f64::from(max(b))
}

fn record(
    batch: &mut Batch,
    ins: &Inputs,
    c: &Buffer<f32>,
    (m, k, n): (u32, u32, u32),
    run: Run,
) -> Result<()> {
    let shape = BatchedShape::packed(1, m, k, n).with_b_transposed();
    match run {
        Run::Plan(plan) => {
            ops::matmul::matmul_f16_with_plan(batch, &ins.a, &ins.b, c, m, k, n, plan)
        }
        Run::BatchedBt(None) => ops::matmul_f16_batched(batch, &ins.a, &ins.bt, c, shape),
        Run::BatchedBt(tile) => {
            ops::matmul::matmul_f16_batched_with_tile(batch, &ins.a, &ins.bt, c, shape, tile)
        }
    }
}

/// What the timed rounds measured of one candidate.
struct Timing {
    /// GPU nanoseconds per round (all commands of one record summed).
    ns: Vec<f64>,
    /// The distinct labels of the commands it recorded, in order.
    labels: Vec<String>,
}

/// Benchmarks `candidates` (the default plan among them, named
/// `default_name`) at m×k×n; pushes one row per candidate and one rule
/// row. Returns false when the rule is broken.
#[allow(clippy::too_many_arguments)]
pub fn bench_shape(
    gpu: &Device,
    rep: &mut Report,
    (m, k, n): (u32, u32, u32),
    candidates: &[Candidate],
    default_name: &str,
    rounds: usize,
    warm_for: Duration,
    full_check: bool,
) -> Result<bool> {
    let shape = format!("{m}x{k}x{n}");
    let (abits, a) = f16_inputs(u64::from(m) * 3 + 1, (m * k) as usize);
    let (bbits, b) = f16_inputs(u64::from(n) * 5 + 2, (k * n) as usize);
    let ins = Inputs {
        a: gpu.upload(&abits)?,
        b: gpu.upload(&bbits)?,
        bt: gpu.upload(&transposed(&bbits, k as usize, n as usize))?,
    };
    let bound = error_bound(&a, &b, k);
    let mut outs = Vec::new();
    let mut errors = Vec::new();
    let mut kept: Vec<&Candidate> = Vec::new();
    for c in candidates {
        let gc = gpu.alloc::<f32>((m as usize) * (n as usize))?;
        // A candidate the driver refuses (pipeline creation, recording) is
        // a failed row, not the end of the run.
        let ran = (|| -> Result<()> {
            let mut batch = gpu.batch()?;
            record(&mut batch, &ins, &gc, (m, k, n), c.run)?;
            batch.submit()
        })();
        if let Err(e) = ran {
            rep.push(
                &format!("hgemm{shape}_{}", c.name),
                f64::NAN,
                "TFLOPs",
                Some(f64::INFINITY),
                1.0,
                format!(" did not run: {e}"),
            );
            continue;
        }
        let got = gc.download()?;
        errors.push(abs_error(
            &a,
            &b,
            &got,
            (m as usize, k as usize, n as usize),
            full_check,
        ));
        outs.push(gc);
        kept.push(c);
    }
    if kept.is_empty() {
        return Ok(true);
    }
    let candidates = kept;
    // Warm-up: each candidate back to back for `warm_for`.
    for (c, gc) in candidates.iter().zip(&outs) {
        let start = Instant::now();
        while start.elapsed() < warm_for {
            let mut batch = gpu.batch_with(BatchOptions::single_submit())?;
            for i in 0..4 {
                if i > 0 {
                    batch.barrier();
                }
                record(&mut batch, &ins, gc, (m, k, n), c.run)?;
            }
            batch.submit()?;
        }
    }
    let timings = if gpu.info().timestamps {
        timed_rounds(gpu, &ins, &outs, (m, k, n), &candidates, rounds)?
    } else {
        wall_rounds(gpu, &ins, &outs, (m, k, n), &candidates, rounds)?
    };
    let flops = 2.0 * f64::from(m) * f64::from(k) * f64::from(n);
    let mut medians = Vec::new();
    for ((c, t), err) in candidates.iter().zip(&timings).zip(&errors) {
        let mut ns = t.ns.clone();
        ns.sort_by(f64::total_cmp);
        let (lo, med, hi) = (ns[0], ns[ns.len() / 2], ns[ns.len() - 1]);
        medians.push(med);
        let tf = |x: f64| flops / x / 1e3;
        let f = |x: f64| {
            let t = tf(x);
            if t < 10.0 {
                format!("{t:.3}")
            } else {
                format!("{t:.1}")
            }
        };
        rep.push(
            &format!("hgemm{shape}_{}", c.name),
            tf(med),
            "TFLOPs",
            Some(*err / bound),
            1.0,
            format!(
                " min/med/max {}/{}/{} TFLOP/s over {} rounds; ran {}; |err| {:.2e} (bound {:.2e}){}",
                f(hi),
                f(med),
                f(lo),
                ns.len(),
                t.labels.join(" + "),
                err,
                bound,
                if c.name == default_name { "; DEFAULT" } else { "" }
            ),
        );
    }
    // The default's rivals: the candidates reading B as it does (K×N).
    let best = medians
        .iter()
        .enumerate()
        .filter(|(i, _)| matches!(candidates[*i].run, Run::Plan(_)))
        .min_by(|x, y| x.1.total_cmp(y.1))
        .map(|(i, _)| i)
        .unwrap_or(0);
    let Some(default) = candidates.iter().position(|c| c.name == default_name) else {
        // Its row above says why it did not run.
        return Ok(false);
    };
    let ratio = medians[default] / medians[best];
    let ok = ratio <= RULE_LIMIT;
    rep.push(
        &format!("hgemm{shape}_default_over_best"),
        ratio,
        "x",
        None,
        0.0,
        format!(
            " default {} ÷ best {} of B K×N (median times; rule: ≤ {RULE_LIMIT}){}",
            candidates[default].name,
            candidates[best].name,
            if ok { "" } else { " RULE BROKEN" }
        ),
    );
    Ok(ok)
}

/// One profiled batch: a discarded round, then `rounds` rounds; in each,
/// every candidate in turn records an untimed lead launch and then the
/// timed one, barriers between.
fn timed_rounds(
    gpu: &Device,
    ins: &Inputs,
    outs: &[Buffer<f32>],
    shape: (u32, u32, u32),
    candidates: &[&Candidate],
    rounds: usize,
) -> Result<Vec<Timing>> {
    let opts = BatchOptions::single_submit().with_profiling(Profiling::Commands);
    let mut batch = gpu.batch_with(opts)?;
    // (round, candidate, first command, end command)
    let mut spans = Vec::new();
    for r in 0..=rounds {
        for (i, (c, gc)) in candidates.iter().zip(outs).enumerate() {
            batch.barrier();
            record(&mut batch, ins, gc, shape, c.run)?;
            batch.barrier();
            let first = batch.len();
            record(&mut batch, ins, gc, shape, c.run)?;
            spans.push((r, i, first as usize, batch.len() as usize));
        }
    }
    let ticket = batch.submit_async()?;
    ticket.wait()?;
    let profile = ticket.profile()?;
    let mut out: Vec<Timing> = candidates
        .iter()
        .map(|_| Timing {
            ns: Vec::new(),
            labels: Vec::new(),
        })
        .collect();
    for (r, i, first, end) in spans {
        let cmds =
            &profile.commands[first.min(profile.commands.len())..end.min(profile.commands.len())];
        for c in cmds {
            if !out[i].labels.contains(&c.label) {
                out[i].labels.push(c.label.clone());
            }
        }
        if r > 0 {
            out[i].ns.push(cmds.iter().map(|c| c.gpu_ns).sum());
        }
    }
    Ok(out)
}

/// Without timestamps: wall time of a batch of `rounds` records per
/// candidate, in turn (labels unknown).
fn wall_rounds(
    gpu: &Device,
    ins: &Inputs,
    outs: &[Buffer<f32>],
    shape: (u32, u32, u32),
    candidates: &[&Candidate],
    rounds: usize,
) -> Result<Vec<Timing>> {
    let mut out: Vec<Timing> = candidates
        .iter()
        .map(|_| Timing {
            ns: Vec::new(),
            labels: vec!["(no timestamps: labels unknown)".into()],
        })
        .collect();
    for _ in 0..rounds {
        for (i, (c, gc)) in candidates.iter().zip(outs).enumerate() {
            let mut batch = gpu.batch_with(BatchOptions::single_submit())?;
            record(&mut batch, ins, gc, shape, c.run)?;
            let t = Instant::now();
            batch.submit()?;
            out[i].ns.push(t.elapsed().as_secs_f64() * 1e9);
        }
    }
    Ok(out)
}

/// The f16 plan [`ops::choose_matmul`] picks on `gpu`.
pub fn default_plan(gpu: &Device, (m, k, n): (u32, u32, u32)) -> MatmulPlan {
    let caps = ops::MatmulCaps::of(gpu.info());
    ops::choose_matmul(m, k, n, MatmulDtype::F16, &caps)
}

/// Prints the adapter's cooperative-matrix shape lists (KHR, NV) and
/// feature structures, VK_NV_cooperative_matrix2's among them.
pub fn dump_coopmat(gpu: &Device) {
    let info = gpu.info();
    let shape = |s: &vkcompute::CoopMatShape| {
        format!(
            "{}x{}x{} {:?}*{:?}+{:?}->{:?}{}",
            s.m,
            s.n,
            s.k,
            s.a,
            s.b,
            s.c,
            s.result,
            if s.subgroup_scope {
                ""
            } else {
                " (not subgroup scope)"
            }
        )
    };
    println!(
        "KHR cooperative-matrix shapes ({}):",
        info.cooperative_matrix_shapes.len()
    );
    for s in &info.cooperative_matrix_shapes {
        println!("  {}", shape(s));
    }
    println!(
        "NV cooperative-matrix shapes ({}):",
        info.cooperative_matrix_nv_shapes.len()
    );
    for s in &info.cooperative_matrix_nv_shapes {
        println!("  {}", shape(s));
    }
    let f = &info.cooperative_matrix_features;
    println!(
        "cooperative-matrix features: KHR robustBufferAccess {}, NV robustBufferAccess {}",
        f.khr_robust_buffer_access, f.nv_robust_buffer_access
    );
    match &f.nv2 {
        None => println!("VK_NV_cooperative_matrix2: not enabled on this device"),
        Some(v) => {
            println!(
                "VK_NV_cooperative_matrix2 features: workgroupScope {} flexibleDimensions {} \
                 reductions {} conversions {} perElementOperations {} tensorAddressing {} \
                 blockLoads {}",
                v.workgroup_scope,
                v.flexible_dimensions,
                v.reductions,
                v.conversions,
                v.per_element_operations,
                v.tensor_addressing,
                v.block_loads
            );
            println!(
                "VK_NV_cooperative_matrix2 properties: workgroupScopeMaxWorkgroupSize {} \
                 flexibleDimensionsMaxDimension {} workgroupScopeReservedSharedMemory {}",
                v.workgroup_scope_max_workgroup_size,
                v.flexible_dimensions_max_dimension,
                v.workgroup_scope_reserved_shared_memory
            );
            println!(
                "VK_NV_cooperative_matrix2 flexible shapes ({}):",
                v.flexible_shapes.len()
            );
            for s in &v.flexible_shapes {
                println!(
                    "  granularity {}x{}x{} {:?}*{:?}+{:?}->{:?} {} invocations {}{}",
                    s.m_granularity,
                    s.n_granularity,
                    s.k_granularity,
                    s.a,
                    s.b,
                    s.c,
                    s.result,
                    if s.workgroup_scope {
                        "workgroup"
                    } else {
                        "subgroup"
                    },
                    s.workgroup_invocations,
                    if s.saturating_accumulation {
                        " saturating"
                    } else {
                        ""
                    }
                );
            }
        }
    }
}

/// `batch` independent f16 products of m×k×n in one launch
/// ([`ops::matmul_f16_batched`], what `torch.bmm` computes): warmed for `warm_for`, then `rounds` rounds (a barrier
/// before each), every round's GPU time the sum of its commands' (their
/// timestamps follow one another). Each product is checked once.
#[allow(clippy::too_many_arguments)]
pub fn bench_bmm(
    gpu: &Device,
    rep: &mut Report,
    batch_count: u32,
    (m, k, n): (u32, u32, u32),
    rounds: usize,
    warm_for: Duration,
) -> Result<()> {
    let key = format!("hbmm{batch_count}x{m}x{k}x{n}");
    let shape = ops::BatchedShape::packed(batch_count, m, k, n);
    let [la, lb, _] = shape.lens();
    let (abits, a) = f16_inputs(11, la as usize);
    let (bbits, b) = f16_inputs(12, lb as usize);
    let (ga, gb) = (gpu.upload(&abits)?, gpu.upload(&bbits)?);
    let gc = gpu.alloc::<f32>(shape.lens()[2] as usize)?;
    let record_all =
        |batch: &mut Batch| -> Result<()> { ops::matmul_f16_batched(batch, &ga, &gb, &gc, shape) };
    let mut batch = gpu.batch()?;
    record_all(&mut batch)?;
    batch.submit()?;
    let got = gc.download()?;
    let (mk, kn, mn) = ((m * k) as usize, (k * n) as usize, (m * n) as usize);
    let mut worst = 0f64;
    let mut bound = 0f64;
    for i in 0..batch_count as usize {
        let (ai, bi) = (&a[i * mk..(i + 1) * mk], &b[i * kn..(i + 1) * kn]);
        worst = worst.max(abs_error(
            ai,
            bi,
            &got[i * mn..(i + 1) * mn],
            (m as usize, k as usize, n as usize),
            false,
        ));
        bound = bound.max(error_bound(ai, bi, k));
    }
    let (ns, labels) = profiled_rounds(gpu, rounds, warm_for, record_all)?;
    let flops = 2.0 * f64::from(batch_count) * f64::from(m) * f64::from(k) * f64::from(n);
    let tf = |x: f64| flops / x / 1e3;
    let (lo, med, hi) = (ns[0], ns[ns.len() / 2], ns[ns.len() - 1]);
    rep.push(
        &key,
        tf(med),
        "TFLOPs",
        Some(worst / bound),
        1.0,
        format!(
            " {batch_count} products, one batched launch; min/med/max {:.3}/{:.3}/{:.3} \
             TFLOP/s over {} rounds; ran {}; |err| {worst:.2e} (bound {bound:.2e})",
            tf(hi),
            tf(med),
            tf(lo),
            ns.len(),
            labels.join(" + ")
        ),
    );
    Ok(())
}

/// Warms `record` for `warm_for` (one product per submission), then times
/// `rounds` of it in one profiled batch (a barrier before each; one extra
/// round first, untimed): the GPU time of each round, sorted, and the
/// labels of the kernels that ran. Without timestamps, host time of each
/// round's submission and wait.
pub fn profiled_rounds(
    gpu: &Device,
    rounds: usize,
    warm_for: Duration,
    mut record: impl FnMut(&mut Batch) -> Result<()>,
) -> Result<(Vec<f64>, Vec<String>)> {
    let start = Instant::now();
    while start.elapsed() < warm_for {
        let mut batch = gpu.batch_with(BatchOptions::single_submit())?;
        record(&mut batch)?;
        batch.submit()?;
    }
    let mut ns = Vec::new();
    let mut labels: Vec<String> = Vec::new();
    if gpu.info().timestamps {
        let opts = BatchOptions::single_submit().with_profiling(Profiling::Commands);
        let mut batch = gpu.batch_with(opts)?;
        let mut spans = Vec::new();
        for r in 0..=rounds {
            batch.barrier();
            let first = batch.len() as usize;
            record(&mut batch)?;
            spans.push((r, first, batch.len() as usize));
        }
        let ticket = batch.submit_async()?;
        ticket.wait()?;
        let profile = ticket.profile()?;
        let len = profile.commands.len();
        for (r, first, end) in spans {
            let cmds = &profile.commands[first.min(len)..end.min(len)];
            for c in cmds {
                if !labels.contains(&c.label) {
                    labels.push(c.label.clone());
                }
            }
            if r > 0 {
                ns.push(cmds.iter().map(|c| c.gpu_ns).sum::<f64>());
            }
        }
    } else {
        labels.push("(no timestamps: labels unknown)".into());
        for _ in 0..rounds {
            let mut batch = gpu.batch_with(BatchOptions::single_submit())?;
            record(&mut batch)?;
            let t = Instant::now();
            batch.submit()?;
            ns.push(t.elapsed().as_secs_f64() * 1e9);
        }
    }
    ns.sort_by(f64::total_cmp);
    Ok((ns, labels))
}
