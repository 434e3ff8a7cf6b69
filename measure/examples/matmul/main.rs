//! Built-in matmul: TFLOP/s of each path, timed with GPU timestamps, each
//! result checked against the CPU.
//!
//! ```text
//! cargo run --release -p vkcompute-measure --example matmul [-- [--f16-only | --f32-only | --prefill-shapes [--prefill-tiles]] [--json PATH]]
//! ```
//!
//! `--prefill-shapes` runs only the batched f16 product at the Qwen3-4B
//! prefill's projections (`prefill_bench.rs`); with `--prefill-tiles`,
//! each batched N×K tile the adapter fits beside the default choice.
//!
//! `--f32-only` runs the adapter dump and the f32 rows only: checks, the
//! default plan beside every candidate per shape (`f32_bench.rs`: each
//! SGEMM tile, split-K where the grid is small, the older kernel's tiles;
//! each row names the kernels it ran; then `sgemm*_default_over_best`), the
//! older kernel's tile sweep and GEMV.
//!
//! `--f16-only` runs the adapter dump, the f16 benchmark
//! (`f16_bench.rs`: every candidate kernel per shape, named plans, warmed,
//! interleaved, min / median / max, the default-over-best rule) and the
//! cooperative-matrix ceilings, and skips the f32 rows. The process exits
//! with status 1 when a check fails and 2 when only the rule (f32 or f16
//! default over the best candidate) is broken.
//! On the GPU machine, with the CUDA reference in the same call (about
//! three minutes together):
//!
//! ```text
//! cargo build --release -p vkcompute-measure --example matmul     # here; carry the binary
//! matmul --f16-only; python3 cuda_reference.py --matmul
//! ```
//!
//! Rows: f32 at 1024³, 2048³, 4096³, 8192³, 4097³, 127×255×63 and
//! 4×4096×9728, and 1×4096×4096 (the M = 1 GEMV kernels), default and
//! candidates (and a few tiles at 4096³ for
//! tuning, `_v4` ones with 16-byte loads and stores), the anchor's odd shapes, GEMV 8192² (N = 1, as `torch.mv`), f16 on
//! cooperative matrices at 4096³ and 8192³ (beside them, `_bt_` rows: B
//! stored N×K through one batched product, outside the default's rule),
//! bf16 weights at 4096³ and 8192³ (`bf16_bench.rs`, `bf16w*` rows: B
//! stored N×K and K×N with f16 A, N×K with f32 A; each names the kernel
//! that ran), and the ceiling of a minimal
//! cooperative-matrix loop (registers only) on the same device. FLOPs are
//! 2·M·N·K, as `../shared/gpu/cuda_ops_anchor.py` counts them; GEMV bytes
//! are 4·M·K. Each figure is the median over several repetitions in one
//! batch, separated by barriers, of the GPU time per command.
//!
//! Checks: at 512³ (or 512² for GEMV) every entry against an f64 CPU
//! product, reported as the largest |error| / Σ_k |a_ik·b_kj| (bound: K·u with
//! u = 2⁻²⁴, 2·K·u on tensor cores); at full size 16 random entries
//! recomputed in f64 against the same bound. A failed check marks the row
//! WRONG and the process exits with status 1. `VKCOMPUTE_QUICK=1` uses small
//! sizes.

use std::time::Instant;

use vkcompute::ops::{
    self, Cm2Tile, CoopTile, MatmulCaps, MatmulDtype, MatmulKernel, MatmulPlan, TileConfig,
};
use vkcompute::{Batch, BatchOptions, Buffer, Device, Profiling, Result};
use vkcompute_measure::probe::values;

mod bf16_bench;
mod f16_bench;
mod f32_bench;
mod f32_rows;
mod peak;
mod prefill_bench;

use f16_bench::Run;
use f32_rows::f32_rows;

use peak::{
    cm2_peak, cm2_peak_in_child, coopmat_peak, peak_in_child, CM2_PEAK_CHILD, CM2_PEAK_KERNELS,
    PEAK_CHILD,
};

/// f16 bits of a multiple of 1/64 in [-1, 1) (exact).
fn f16_bits(x: f32) -> u16 {
    if x == 0.0 {
        return 0;
    }
    let b = x.to_bits();
    let exp = ((b >> 23) & 0xff) as i32 - 112;
    ((b >> 16) & 0x8000) as u16 | ((exp as u16) << 10) | ((b >> 13) & 0x3ff) as u16
}

/// |c − exact| / Σ|a||b| for entry (i, j), in f64.
fn entry_error(a: &[f32], b: &[f32], c: &[f32], k: usize, n: usize, i: usize, j: usize) -> f64 {
    let (mut s, mut abs) = (0f64, 0f64);
    for p in 0..k {
        let t = f64::from(a[i * k + p]) * f64::from(b[p * n + j]);
        s += t;
        abs += t.abs();
    }
    (f64::from(c[i * n + j]) - s).abs() / abs.max(f64::MIN_POSITIVE)
}

/// Largest normalised error over all entries (full check) or 16 random ones.
fn max_error(a: &[f32], b: &[f32], c: &[f32], (m, k, n): (usize, usize, usize), full: bool) -> f64 {
    if full {
        let mut worst = 0f64;
        for i in 0..m {
            for j in 0..n {
                worst = worst.max(entry_error(a, b, c, k, n, i, j));
            }
        }
        return worst;
    }
    let r = values(m as u64 ^ 77, 32);
    (0..16)
        .map(|t| {
            let i = ((r[2 * t] + 1.0) * 0.5 * m as f32) as usize % m;
            let j = ((r[2 * t + 1] + 1.0) * 0.5 * n as f32) as usize % n;
            entry_error(a, b, c, k, n, i, j)
        })
        .fold(0.0, f64::max)
}

/// Median GPU nanoseconds per repetition of `record` (one command each).
fn time_ns(
    gpu: &Device,
    reps: usize,
    mut record: impl FnMut(&mut Batch) -> Result<()>,
) -> Result<f64> {
    if !gpu.info().timestamps {
        let mut batch = gpu.batch_with(BatchOptions::single_submit())?;
        record(&mut batch)?;
        batch.submit()?;
        let mut batch = gpu.batch_with(BatchOptions::single_submit())?;
        for _ in 0..reps {
            batch.barrier();
            record(&mut batch)?;
        }
        let t = Instant::now();
        batch.submit()?;
        return Ok(t.elapsed().as_secs_f64() * 1e9 / reps as f64);
    }
    let opts = BatchOptions::single_submit().with_profiling(Profiling::Commands);
    let mut batch = gpu.batch_with(opts)?;
    batch.label("warm-up");
    record(&mut batch)?;
    for _ in 0..reps {
        batch.barrier();
        batch.label("rep");
        record(&mut batch)?;
    }
    let ticket = batch.submit_async()?;
    ticket.wait()?;
    // A repetition is its labelled command and any that follow it before
    // the next label (split-K's reduction pass).
    let mut t: Vec<f64> = Vec::new();
    for c in ticket.profile()?.commands {
        if c.label == "rep" {
            t.push(c.gpu_ns);
        } else if c.label != "warm-up" {
            if let Some(last) = t.last_mut() {
                *last += c.gpu_ns;
            }
        }
    }
    t.sort_by(f64::total_cmp);
    Ok(t.get(t.len() / 2).copied().unwrap_or(f64::NAN))
}

struct Row {
    key: String,
    value: f64,
    unit: &'static str,
    error: Option<f64>,
    bound: f64,
    note: String,
}

struct Report {
    rows: Vec<Row>,
    failed: bool,
}

impl Report {
    fn push(
        &mut self,
        key: &str,
        value: f64,
        unit: &'static str,
        error: Option<f64>,
        bound: f64,
        note: String,
    ) {
        let ok = !matches!(error, Some(e) if e.is_nan() || e > bound);
        self.failed |= !ok;
        println!(
            "{key:<34} {value:>10.2} {unit:<7} {:>12} {}{note}",
            error.map_or("-".into(), |e| format!("{e:.2e}")),
            if ok { "" } else { "WRONG " }
        );
        self.rows.push(Row {
            key: key.into(),
            value,
            unit,
            error,
            bound,
            note,
        });
    }

    fn json(&self, device: &str) -> String {
        let mut s = format!("{{\n \"device\": {device:?}");
        for r in &self.rows {
            s += &format!(
                ",\n {:?}: {}",
                format!("{}_{}", r.key, r.unit),
                json_num(r.value)
            );
            if let Some(e) = r.error {
                s += &format!(
                    ",\n {:?}: {}",
                    format!("{}_max_rel_err", r.key),
                    json_num(e)
                );
                s += &format!(
                    ",\n {:?}: {}",
                    format!("{}_err_bound", r.key),
                    json_num(r.bound)
                );
            }
            if !r.note.is_empty() {
                s += &format!(",\n {:?}: {:?}", format!("{}_note", r.key), r.note);
            }
        }
        s += &format!(",\n \"all_checks_passed\": {}\n}}\n", !self.failed);
        s
    }
}

fn json_num(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".into()
    }
}

/// Times and checks one f32 matmul; returns TFLOP/s.
#[allow(clippy::too_many_arguments)]
fn f32_case(
    gpu: &Device,
    rep: &mut Report,
    key: &str,
    (m, k, n): (u32, u32, u32),
    plan: Option<MatmulPlan>,
    reps: usize,
    full_check: bool,
) -> Result<f64> {
    let (a, b) = (values(1, (m * k) as usize), values(2, (k * n) as usize));
    let (ga, gb) = (gpu.upload(&a)?, gpu.upload(&b)?);
    let gc = gpu.alloc::<f32>((m as usize) * (n as usize))?;
    let mut record = |batch: &mut Batch| match plan {
        None => ops::matmul(batch, &ga, &gb, &gc, m, k, n),
        Some(p) => ops::matmul::matmul_with_plan(batch, &ga, &gb, &gc, m, k, n, p),
    };
    let ns = time_ns(gpu, reps, &mut record)?;
    let c = gc.download()?;
    let err = max_error(&a, &b, &c, (m as usize, k as usize, n as usize), full_check);
    let bound = f64::from(k) * f64::powi(2.0, -24);
    let caps = MatmulCaps::of(gpu.info());
    let kernel = plan.unwrap_or_else(|| ops::choose_matmul(m, k, n, MatmulDtype::F32, &caps));
    let flops = 2.0 * f64::from(m) * f64::from(k) * f64::from(n);
    let tflops = flops / ns / 1e3;
    if n == 1 {
        let gbps = 4.0 * f64::from(m) * f64::from(k) / ns;
        rep.push(
            key,
            gbps,
            "GBps",
            Some(err),
            bound,
            format!(" {:?}, {:.1} µs", kernel.kernel, ns / 1e3),
        );
    } else if m * n < 1 << 20 {
        rep.push(
            key,
            ns / 1e3,
            "us",
            Some(err),
            bound,
            format!(" {:?}, {tflops:.2} TFLOP/s", kernel.kernel),
        );
    } else {
        rep.push(
            key,
            tflops,
            "TFLOPs",
            Some(err),
            bound,
            format!(" {:?}", kernel.kernel),
        );
    }
    Ok(tflops)
}

/// Checks one f16 matmul with full-entropy inputs (`f16_bench::f16_inputs`)
/// against K·u·max|a|·max|b|, recording `plan` (the default when `None`);
/// the row names the kernel labels that ran.
fn f16_case(
    gpu: &Device,
    rep: &mut Report,
    key: &str,
    s: u32,
    plan: Option<MatmulPlan>,
    full_check: bool,
) -> Result<()> {
    let (abits, a) = f16_bench::f16_inputs(3, (s * s) as usize);
    let (bbits, b) = f16_bench::f16_inputs(4, (s * s) as usize);
    let (ga, gb): (Buffer<u16>, Buffer<u16>) = (gpu.upload(&abits)?, gpu.upload(&bbits)?);
    let gc = gpu.alloc::<f32>((s as usize) * (s as usize))?;
    let plan = plan.unwrap_or_else(|| f16_bench::default_plan(gpu, (s, s, s)));
    let opts = BatchOptions::single_submit().with_profiling(Profiling::Commands);
    let mut batch = gpu.batch_with(if gpu.info().timestamps {
        opts
    } else {
        BatchOptions::single_submit()
    })?;
    ops::matmul::matmul_f16_with_plan(&mut batch, &ga, &gb, &gc, s, s, s, plan)?;
    let ticket = batch.submit_async()?;
    ticket.wait()?;
    let labels: Vec<String> = if gpu.info().timestamps {
        ticket
            .profile()?
            .commands
            .into_iter()
            .map(|c| c.label)
            .collect()
    } else {
        vec!["(no timestamps)".into()]
    };
    let c = gc.download()?;
    let err = f16_bench::abs_error(&a, &b, &c, (s as usize, s as usize, s as usize), full_check);
    let bound = f16_bench::error_bound(&a, &b, s);
    let note = format!(
        " {}; ran {}; |err| {err:.2e} (bound K·u·max|a|·max|b| = {bound:.2e})",
        plan_name(&plan),
        labels.join(" + ")
    );
    rep.push(key, err / bound, "of_bound", Some(err / bound), 1.0, note);
    Ok(())
}

/// The workgroup-scope ceiling rows: each loop variant in a child process
/// of its own; the row is the fastest that ran.
fn cm2_peak_rows(rep: &mut Report, quick: bool) {
    let mut peak = f64::NAN;
    for (name, _) in CM2_PEAK_KERNELS {
        match cm2_peak_in_child(name) {
            Ok(t) => {
                println!("coopmat2 workgroup-scope peak loop {name}: {t:.1} TFLOP/s");
                if t.is_nan() {
                    rep.failed = true;
                } else if peak.is_nan() || t > peak {
                    peak = t;
                }
            }
            Err(e) => println!("coopmat2 workgroup-scope peak loop {name}: no figure ({e})"),
        }
    }
    rep.push(
        "coopmat2_peak",
        peak,
        "TFLOPs",
        None,
        0.0,
        format!(
            " workgroup-scope {} loop (operands in registers), fastest variant that ran{}",
            CM2_PEAK_KERNELS
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(" / "),
            if quick { " (quick)" } else { "" }
        ),
    );
}

/// A row name for an f16 plan.
fn plan_name(plan: &MatmulPlan) -> String {
    match plan.kernel {
        MatmulKernel::CoopMatF16(t) => {
            format!("cm1_{}x{}_w{}x{}_k{}", t.bm(), t.bn(), t.wm, t.wn, t.bk)
        }
        MatmulKernel::CoopMatKhrF16(t) => {
            format!("khr_{}x{}_w{}x{}_k{}", t.bm(), t.bn(), t.wm, t.wn, t.bk)
        }
        MatmulKernel::CoopMat2F16(t) => cm2_name(&t),
        MatmulKernel::Tiled(t) if plan.widen_f16 => {
            format!("widened_f32_{}x{}x{}", t.bm, t.bn, t.bk)
        }
        other => format!("{other:?}{}", if plan.widen_f16 { "_widened" } else { "" }),
    }
}

/// A row name for a workgroup-scope tile: `cm2_<bm>x<bn>x<bk>`, then
/// `_g<group>` for a grouped launch and `_u<unroll>` past two slices.
fn cm2_name(t: &Cm2Tile) -> String {
    let mut s = format!("cm2_{}x{}x{}", t.bm, t.bn, t.bk);
    if t.group > 1 {
        s += &format!("_g{}", t.group);
    }
    if t.unroll != 2 {
        s += &format!("_u{}", t.unroll);
    }
    s
}

/// The f16 candidates at m×k×n: the default plan, every workgroup-scope
/// tile that fits the adapter, and every subgroup-scope tile (KHR and NV)
/// where those kernels apply (each named by [`plan_name`]); then, reading
/// B stored N×K through one batched product, the batched entry's own
/// choice (`bt_default`) and every workgroup-scope tile with a kernel for
/// that layout (`bt_cm2_...`), which the rule leaves out.
fn f16_candidates(gpu: &Device, shape: (u32, u32, u32)) -> (Vec<f16_bench::Candidate>, String) {
    let (m, k, n) = shape;
    let caps = MatmulCaps::of(gpu.info());
    let default = f16_bench::default_plan(gpu, shape);
    let mut plans = vec![default];
    for t in Cm2Tile::ALL {
        if t.fits(&caps) {
            plans.push(MatmulPlan {
                kernel: MatmulKernel::CoopMat2F16(t),
                widen_f16: false,
            });
        }
    }
    // The subgroup-scope kernels' tiles (KHR and NV) where their rule
    // allows the shape.
    if ops::matmul::subgroup_coop_fits(m, k, n, &caps) {
        for t in [CoopTile::DEFAULT, CoopTile::WIDE, CoopTile::TALL] {
            if t.shared_bytes() > caps.max_shared_memory {
                continue;
            }
            if caps.coopmat_khr_f16 && t.khr_kernel().is_some() {
                plans.push(MatmulPlan {
                    kernel: MatmulKernel::CoopMatKhrF16(t),
                    widen_f16: false,
                });
            }
            if caps.coopmat_f16 {
                plans.push(MatmulPlan {
                    kernel: MatmulKernel::CoopMatF16(t),
                    widen_f16: false,
                });
            }
        }
    }
    let mut out: Vec<f16_bench::Candidate> = Vec::new();
    for p in plans {
        let name = plan_name(&p);
        if !out.iter().any(|c| c.name == name) {
            out.push(f16_bench::Candidate {
                name,
                run: Run::Plan(p),
            });
        }
    }
    out.push(f16_bench::Candidate {
        name: "bt_default".into(),
        run: Run::BatchedBt(None),
    });
    for t in Cm2Tile::ALL {
        if t.fits(&caps) && t.batched_kernel_name(true).is_some() {
            let name = format!("bt_{}", cm2_name(&t));
            if !out.iter().any(|c| c.name == name) {
                out.push(f16_bench::Candidate {
                    name,
                    run: Run::BatchedBt(Some(t)),
                });
            }
        }
    }
    (out, plan_name(&default))
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let json = args
        .iter()
        .position(|a| a == "--json")
        .and_then(|i| args.get(i + 1));
    let quick = std::env::var_os("VKCOMPUTE_QUICK").is_some();
    let f16_only = args.iter().any(|a| a == "--f16-only");
    let prefill_shapes = args.iter().any(|a| a == "--prefill-shapes");
    let prefill_tiles = args.iter().any(|a| a == "--prefill-tiles");
    let f32_only = args.iter().any(|a| a == "--f32-only");
    if args.get(1).map(String::as_str) == Some(CM2_PEAK_CHILD) {
        let name = args.get(2).cloned().unwrap_or_default();
        let gpu = Device::new()?;
        let t = cm2_peak(&gpu, &name, quick)?;
        if gpu.validation_enabled() && gpu.validation_message_count() > 0 {
            for m in gpu.validation_messages() {
                eprintln!("{m}");
            }
            std::process::exit(1);
        }
        println!("peak {t}");
        return Ok(());
    }
    if args.get(1).map(String::as_str) == Some(PEAK_CHILD) {
        let acc: u32 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(8);
        let optimize = args.get(3).map(String::as_str) != Some("O0");
        let spirv13 = args.get(4).map(String::as_str) != Some("spv15");
        let shared = args.get(5).map(String::as_str) == Some("shared");
        let gpu = Device::new()?;
        let reps = if quick { 3 } else { 10 };
        println!(
            "peak {}",
            coopmat_peak(&gpu, reps, quick, acc, optimize, spirv13, shared)?
        );
        return Ok(());
    }
    let gpu = Device::new()?;
    let info = gpu.info();
    let device = format!("{} ({}, {})", info.name, info.driver_name, info.driver_info);
    println!("adapter: {device}");
    let caps = MatmulCaps::of(info);
    println!("caps: {caps:?}");
    f16_bench::dump_coopmat(&gpu);
    println!(
        "{:<34} {:>10} {:<7} {:>12}",
        "case", "value", "unit", "max_rel_err"
    );
    let mut rep = Report {
        rows: Vec::new(),
        failed: false,
    };
    let mut rule_ok = true;
    if prefill_shapes {
        let (rounds, warm) = if quick {
            (5, std::time::Duration::from_millis(20))
        } else {
            (15, f16_bench::WARM_FOR)
        };
        if info.storage_buffer16 {
            prefill_bench::bench_prefill_shapes(
                &gpu,
                &mut rep,
                rounds,
                warm,
                quick,
                prefill_tiles,
            )?;
        } else {
            println!("skipped: the prefill rows need storageBuffer16BitAccess");
        }
        return finish(&gpu, rep, json, &device, rule_ok);
    }
    if !f16_only {
        rule_ok &= f32_rows(&gpu, &mut rep, quick)?;
    }
    let chk = if quick { 128 } else { 512 };
    if f32_only {
        println!("skipped: f16 rows and coopmat ceilings (--f32-only)");
    } else if info.storage_buffer16 {
        // Every entry of the default plan's product against f64.
        let key = format!("check_hgemm{chk}");
        if let Err(e) = f16_case(&gpu, &mut rep, &key, chk, None, true) {
            println!("{key}: did not run: {e}");
            rep.failed = true;
        }
        let sizes: &[u32] = if quick {
            &[64, 128, 129]
        } else {
            &[1024, 2048, 4096, 8192, 4097]
        };
        let (rounds, warm) = if quick {
            (15, std::time::Duration::from_millis(20))
        } else {
            (15, f16_bench::WARM_FOR)
        };
        for &sz in sizes {
            let shape = (sz, sz, sz);
            let (cands, default) = f16_candidates(&gpu, shape);
            match f16_bench::bench_shape(
                &gpu, &mut rep, shape, &cands, &default, rounds, warm, false,
            ) {
                Ok(ok) => rule_ok &= ok,
                Err(e) => {
                    println!("hgemm {sz}³: the benchmark stopped: {e}");
                    rep.failed = true;
                }
            }
        }
        // torch.bmm's shape of the CUDA reference: 32 × (512 × 128 × 512).
        let (count, bmm) = if quick {
            (4, (64, 32, 64))
        } else {
            (32, (512, 128, 512))
        };
        if let Err(e) = f16_bench::bench_bmm(&gpu, &mut rep, count, bmm, rounds, warm) {
            println!("hbmm: the benchmark stopped: {e}");
            rep.failed = true;
        }
        // bf16 weights (ops::matmul_bf16w): B stored N×K (nn.Linear's
        // layout) and K×N with f16 A, and N×K with f32 A (ops::linear's
        // operands).
        let bf16_sizes: &[u32] = if quick { &[128, 129] } else { &[4096, 8192] };
        // Beside the default, B N×K with f16 A through the 128×256 tile.
        // (where the adapter has that tile's tensor-core kernel).
        let wide = Some(Cm2Tile::WIDE_GROUPED);
        let caps = MatmulCaps::of(gpu.info());
        let has_wide = caps.coopmat2_decode && Cm2Tile::WIDE_GROUPED.fits(&caps);
        if !has_wide {
            println!(
                "skipped: bf16w rows on the 128×256 tile: {} has no tensor-core bf16-weight \
                 kernel for it (VK_NV_cooperative_matrix2 with cooperativeMatrixBlockLoads)",
                info.name
            );
        }
        for &sz in bf16_sizes {
            let cases = [
                (true, false, None),
                (false, false, None),
                (true, true, None),
                (true, false, wide),
            ];
            for (b_nk, a_f32, tile) in cases {
                if tile.is_some() && !has_wide {
                    continue;
                }
                let shape = (sz, sz, sz);
                if let Err(e) =
                    bf16_bench::bench_bf16w(&gpu, &mut rep, shape, b_nk, a_f32, tile, rounds, warm)
                {
                    println!("bf16w {sz}³: the benchmark stopped: {e}");
                    rep.failed = true;
                }
            }
        }
    } else {
        println!(
            "skipped: f16 rows: no storageBuffer16BitAccess on {}",
            info.name
        );
    }
    if f32_only {
        // Neither ceiling: they are the f16 paths'.
    } else if Cm2Tile::ALL.iter().any(|t| t.fits(&caps)) {
        cm2_peak_rows(&mut rep, quick);
    } else {
        println!(
            "skipped: workgroup-scope coopmat2 ceiling: no usable VK_NV_cooperative_matrix2 \
             f16 shape on {}",
            info.name
        );
    }
    if f32_only {
        // Said above.
    } else if caps.coopmat_f16 && caps.subgroup_size == 32 {
        // The ceiling: a few accumulator counts, optimised by shaderc or
        // not, each in a process of its own (the driver crashed on every
        // variant of an earlier form of the loop on the H200, 2026-11-23);
        // the ceiling is the fastest that ran.
        let mut peak = f64::NAN;
        // Fragments from shared memory each round (as the matmul kernel
        // loads them) first, then the registers-only form that crashed.
        let variants = [
            (8u32, true, true, true),
            (4, true, true, true),
            (2, true, true, true),
            (8, true, true, false),
            (4, true, true, false),
            (8, false, false, false),
        ];
        for (acc, optimize, spirv13, shared) in variants {
            let how = format!(
                "{acc} accumulators, fragments from {}, shaderc {}, SPIR-V {}",
                if shared { "shared memory" } else { "registers" },
                if optimize { "-O" } else { "-O0" },
                if spirv13 { "1.3" } else { "1.5" }
            );
            match peak_in_child(acc, optimize, spirv13, shared) {
                Ok(t) => {
                    println!("coopmat peak loop, {how}: {t:.1} TFLOP/s");
                    if t.is_nan() {
                        rep.failed = true;
                    } else if peak.is_nan() || t > peak {
                        peak = t;
                    }
                }
                Err(e) => println!("coopmat peak loop, {how}: no figure ({e})"),
            }
        }
        rep.push(
            "coopmat_peak",
            peak,
            "TFLOPs",
            None,
            0.0,
            " 16x16x16 loop (shared-memory or registers-only fragments), fastest variant that ran"
                .into(),
        );
    } else {
        println!(
            "skipped: f16 cooperative-matrix rows: no usable 16×16×16 f16 shape on {}",
            info.name
        );
    }

    finish(&gpu, rep, json, &device, rule_ok)
}

/// Writes the JSON report where `--json` asked, prints the validation
/// messages, and exits with 1 when a check (or validation) failed, 2 when
/// only the choice rule is broken.
fn finish(
    gpu: &Device,
    mut rep: Report,
    json: Option<&String>,
    device: &str,
    rule_ok: bool,
) -> Result<()> {
    if let Some(path) = json {
        match std::fs::write(path, rep.json(device)) {
            Ok(()) => println!("wrote {path}"),
            Err(e) => {
                eprintln!("could not write {path}: {e}");
                rep.failed = true;
            }
        }
    }
    if gpu.validation_enabled() && gpu.validation_message_count() > 0 {
        for m in gpu.validation_messages() {
            eprintln!("{m}");
        }
        rep.failed = true;
    }
    if rep.failed {
        eprintln!("a check failed");
        std::process::exit(1);
    }
    if !rule_ok {
        eprintln!(
            "the default f32 or f16 plan is over {}× the best candidate at some shape (rows \
             *_default_over_best): the choice rule is broken",
            f16_bench::RULE_LIMIT
        );
        std::process::exit(2);
    }
    Ok(())
}
