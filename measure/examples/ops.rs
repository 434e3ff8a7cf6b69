//! Bandwidth of the built-in ops (`vkcompute::ops`), each result checked
//! against the CPU once, in the byte-counting of
//! `../shared/gpu/cuda_ops_anchor.py` (so the figures sit beside PyTorch's):
//! element-wise ops and saxpy on 64 Mi f32 (add counts 3 × 4 bytes per
//! element, relu 2 × 4, fill 4, ...), sum/max on 64 Mi (4 bytes per
//! element), dot (8), softmax over 8192 × 8192 rows (read + write), transpose
//! 8192² (read + write), GEMV 8192² (the matrix only); f16-storage add and
//! gelu where the adapter has it (2 bytes per element read or written).
//!
//! Timing: GPU timestamps around each of several dispatches of the op in one
//! batch (separated by barriers), median; wall time over the batch when the
//! queue has no timestamps. `VKCOMPUTE_QUICK=1` uses 1 Mi elements and
//! 512² matrices.
//!
//! ```text
//! cargo run --release -p vkcompute-measure --example ops [-- --json ops.json]
//! ```

use cuda_ref::anchor_value;
use vkcompute_measure::cuda_ref;

use std::time::Instant;

use vkcompute::ops::{self, Binary, Unary, F16};
use vkcompute::{Batch, BatchOptions, Buffer, Device, Profiling, Result};

/// One measured op.
struct Row {
    key: String,
    bytes: f64,
    seconds: f64,
    max_err: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// How long each op runs back to back before it is timed.
const WARM_FOR: std::time::Duration = std::time::Duration::from_millis(500);
/// Whether [`time_each`] runs the op for [`WARM_FOR`] first (`--diag`
/// turns it off to show what the GPU's idle clocks do to a figure).
static PREWARM: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Times `reps` dispatches recorded by `op` (after `warm` untimed ones),
/// barriers between: the median GPU time of one, in seconds.
fn time(
    gpu: &Device,
    warm: usize,
    reps: usize,
    op: &dyn Fn(&mut Batch) -> Result<()>,
) -> Result<f64> {
    Ok(median(time_each(gpu, warm, reps, op)?.0))
}

/// Like [`time`], but every timed dispatch's GPU seconds in order (the
/// wall time per dispatch, once, where the queue has no timestamps) and
/// the wall time of the whole batch.
fn time_each(
    gpu: &Device,
    warm: usize,
    reps: usize,
    op: &dyn Fn(&mut Batch) -> Result<()>,
) -> Result<(Vec<f64>, f64)> {
    // The same op, back to back, for WARM_FOR before the timed batch: the
    // example checks every result on the CPU between ops (about a second
    // each at 64 Mi), long enough for the GPU to drop its clocks, while
    // PyTorch's loop keeps it busy. On the H200 (2026-11-23, `--diag`) a
    // GPU idle for a second or two ran copies at 1.6 TB/s even after 30 ms
    // or 200 back-to-back dispatches, and at 4.2 TB/s after a few hundred
    // ms of steady work. A rule, not a best-of: every op gets it.
    let start = Instant::now();
    while PREWARM.load(std::sync::atomic::Ordering::Relaxed) && start.elapsed() < WARM_FOR {
        let mut b = gpu.batch_with(BatchOptions::single_submit())?;
        for i in 0..10 {
            if i > 0 {
                b.barrier();
            }
            op(&mut b)?;
        }
        b.submit()?;
    }
    let profiled = gpu.info().timestamps;
    let opts = if profiled {
        BatchOptions::single_submit().with_profiling(Profiling::Commands)
    } else {
        BatchOptions::single_submit()
    };
    let mut b = gpu.batch_with(opts)?;
    for i in 0..warm + reps {
        if i > 0 {
            b.barrier();
        }
        b.label(if i < warm { "warm" } else { "timed" });
        op(&mut b)?;
    }
    let t0 = Instant::now();
    let ticket = b.submit_async()?;
    ticket.wait()?;
    let wall = t0.elapsed().as_secs_f64();
    if !profiled {
        return Ok((vec![wall / (warm + reps) as f64], wall));
    }
    let p = ticket.profile()?;
    let timed: Vec<f64> = p
        .commands
        .iter()
        .filter(|c| c.label == "timed")
        .map(|c| c.gpu_ns * 1e-9)
        .collect();
    Ok((timed, wall))
}

/// Largest error of `got` against `want`, relative to `scale` (per element).
fn max_rel_err(got: &[f32], want: impl Fn(usize) -> (f64, f64)) -> f64 {
    let mut worst = 0.0f64;
    for (i, &g) in got.iter().enumerate() {
        let (w, s) = want(i);
        let e = (f64::from(g) - w).abs() / s.max(f64::MIN_POSITIVE);
        worst = worst.max(if e.is_nan() { f64::INFINITY } else { e });
    }
    worst
}

/// Deterministic values in [-scale, scale) (the probes' stream, scaled).
fn random(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    vkcompute_measure::probe::values(seed, n)
        .into_iter()
        .map(|v| v * scale)
        .collect()
}

/// The issue's goal for an op: a ratio to our copy or to PyTorch.
enum Goal {
    Copy(f64),
    Torch(f64),
    None,
}

fn goal(key: &str) -> Goal {
    match key {
        "sum" | "max" | "dot" => Goal::Copy(0.9),
        k if k == "batch_copy" || k.ends_with("_f16") => Goal::None,
        k if k.starts_with("gemv") => Goal::Copy(0.8),
        k if k.starts_with("softmax") => Goal::Torch(1.5),
        k if k.starts_with("transpose") => Goal::Torch(2.0),
        _ => Goal::Torch(1.0),
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// erf by its series below 3 and 1 - erfc's continued fraction above.
fn erf(z: f64) -> f64 {
    if z < 0.0 {
        return -erf(-z);
    }
    if z < 3.0 {
        let (mut sum, mut term, mut n) = (0.0, z, 0.0);
        loop {
            let t = term / (2.0 * n + 1.0);
            sum += t;
            if t.abs() <= 1e-17 * sum.abs() || n > 200.0 {
                break;
            }
            n += 1.0;
            term *= -z * z / n;
        }
        2.0 / std::f64::consts::PI.sqrt() * sum
    } else {
        let mut f = 0.0;
        for k in (1..60).rev() {
            f = (k as f64 / 2.0) / (z + f);
        }
        1.0 - (-z * z).exp() / std::f64::consts::PI.sqrt() / (z + f)
    }
}

fn main() -> Result<()> {
    let flag = |name: &str| std::env::args().skip_while(|a| a != name).nth(1);
    let json = flag("--json");
    let diag = std::env::args().any(|a| a == "--diag");
    // `--anchor PATH`: cuda_ops_anchor.py's JSON from the same machine, for
    // the ratios against PyTorch.
    let anchor = flag("--anchor").and_then(|p| std::fs::read_to_string(p).ok());
    let quick = std::env::var_os("VKCOMPUTE_QUICK").is_some();
    let (n, r, warm, reps) = if quick {
        (1usize << 20, 512u32, 1, 3)
    } else {
        (64usize << 20, 8192u32, 3, 15)
    };
    let gpu = Device::new()?;
    println!(
        "{} ({}), {} Mi f32, {r}x{r} matrices, median of {reps}",
        gpu.info().name,
        gpu.info().driver_info,
        n >> 20
    );
    let x = random(1, n, 3.0);
    let y = random(2, n, 3.0);
    let (xs, ys) = (gpu.upload(&x)?, gpu.upload(&y)?);
    let out = gpu.alloc::<f32>(n)?;
    let mut rows: Vec<Row> = Vec::new();
    let nf = n as f64;

    // Element-wise, one input.
    type Ref = fn(f64) -> f64;
    let unary: [(&str, Unary, Ref); 8] = [
        ("copy", Unary::Copy, |v| v),
        ("scale", Unary::Scale(2.0), |v| 2.0 * v),
        ("relu", Unary::Relu, |v| v.max(0.0)),
        ("sigmoid", Unary::Sigmoid, sigmoid),
        ("tanh", Unary::Tanh, f64::tanh),
        ("swish", Unary::Swish, |v| v * sigmoid(v)),
        ("gelu_erf", Unary::Gelu, |v| {
            0.5 * v * (1.0 + erf(v / std::f64::consts::SQRT_2))
        }),
        ("gelu_tanh", Unary::GeluTanh, |v| {
            let u = (2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v * v * v);
            0.5 * v * (1.0 + u.tanh())
        }),
    ];
    for (key, f, reference) in unary {
        let t = time(&gpu, warm, reps, &|b| ops::unary(b, f, &xs, &out))?;
        let got = out.download()?;
        let err = max_rel_err(&got, |i| {
            let w = reference(f64::from(x[i]));
            (w, w.abs())
        });
        rows.push(Row {
            key: key.into(),
            bytes: 8.0 * nf,
            seconds: t,
            max_err: err,
        });
    }
    // Batch::copy (the registry's copy kernel for large aligned copies).
    let t = time(&gpu, warm, reps, &|b| b.copy(&xs, &out).map(|_| ()))?;
    let got = out.download()?;
    let err = if got == x { 0.0 } else { f64::INFINITY };
    rows.push(Row {
        key: "batch_copy".into(),
        bytes: 8.0 * nf,
        seconds: t,
        max_err: err,
    });
    // Element-wise, two inputs, and fill.
    type Ref2 = fn(f64, f64) -> f64;
    let binary: [(&str, Binary, Ref2); 3] = [
        ("add", Binary::Add, |a, b| a + b),
        ("sub", Binary::Sub, |a, b| a - b),
        ("mul", Binary::Mul, |a, b| a * b),
    ];
    for (key, g, reference) in binary {
        let t = time(&gpu, warm, reps, &|b| ops::binary(b, g, &xs, &ys, &out))?;
        let got = out.download()?;
        let err = max_rel_err(&got, |i| {
            let w = reference(f64::from(x[i]), f64::from(y[i]));
            (w, w.abs())
        });
        rows.push(Row {
            key: key.into(),
            bytes: 12.0 * nf,
            seconds: t,
            max_err: err,
        });
    }
    let t = time(&gpu, warm, reps, &|b| ops::fill(b, 1.5, &out))?;
    let err = max_rel_err(&out.download()?, |_| (1.5, 1.5));
    rows.push(Row {
        key: "fill".into(),
        bytes: 4.0 * nf,
        seconds: t,
        max_err: err,
    });
    // saxpy in place (y = 2x + y, as PyTorch's out.add_(x, alpha=2)):
    // timed on a scratch y, checked on one fresh run.
    let sy = gpu.upload(&y)?;
    let t = time(&gpu, warm, reps, &|b| ops::saxpy(b, 2.0, &xs, &sy))?;
    sy.write(0, &y)?;
    let mut b = gpu.batch()?;
    ops::saxpy(&mut b, 2.0, &xs, &sy)?;
    b.submit()?;
    let err = max_rel_err(&sy.download()?, |i| {
        let (p, q) = (f64::from(x[i]), f64::from(y[i]));
        (2.0 * p + q, 2.0 * p.abs() + q.abs())
    });
    rows.push(Row {
        key: "saxpy".into(),
        bytes: 12.0 * nf,
        seconds: t,
        max_err: err,
    });
    drop(sy);

    // Reductions: error relative to the sum of magnitudes; max exact.
    let res = gpu.alloc::<f32>(1)?;
    let sum_exact: f64 = x.iter().map(|&v| f64::from(v)).sum();
    let sum_mag: f64 = x.iter().map(|&v| f64::from(v).abs()).sum();
    let t = time(&gpu, warm, reps, &|b| ops::sum(b, &xs, &res))?;
    let err = (f64::from(res.download()?[0]) - sum_exact).abs() / sum_mag;
    rows.push(Row {
        key: "sum".into(),
        bytes: 4.0 * nf,
        seconds: t,
        max_err: err,
    });
    let t = time(&gpu, warm, reps, &|b| ops::max(b, &xs, &res))?;
    let want = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let err = if res.download()?[0] == want {
        0.0
    } else {
        f64::INFINITY
    };
    rows.push(Row {
        key: "max".into(),
        bytes: 4.0 * nf,
        seconds: t,
        max_err: err,
    });
    let dot_exact: f64 = x
        .iter()
        .zip(&y)
        .map(|(&p, &q)| f64::from(p) * f64::from(q))
        .sum();
    let dot_mag: f64 = x
        .iter()
        .zip(&y)
        .map(|(&p, &q)| (f64::from(p) * f64::from(q)).abs())
        .sum();
    let t = time(&gpu, warm, reps, &|b| ops::dot(b, &xs, &ys, &res))?;
    let err = (f64::from(res.download()?[0]) - dot_exact).abs() / dot_mag;
    rows.push(Row {
        key: "dot".into(),
        bytes: 8.0 * nf,
        seconds: t,
        max_err: err,
    });

    // f16 storage (compute in f32), where the adapter has it: add and gelu.
    let info = gpu.info();
    if info.float16 && info.storage_buffer16 {
        let h = |v: &[f32]| v.iter().map(|&q| F16::from_f32(q)).collect::<Vec<F16>>();
        let (xh, yh) = (h(&x), h(&y));
        let (xhs, yhs) = (gpu.upload(&xh)?, gpu.upload(&yh)?);
        let oh = gpu.alloc::<F16>(n)?;
        let t = time(&gpu, warm, reps, &|b| ops::add(b, &xhs, &yhs, &oh))?;
        let got: Vec<f32> = oh.download()?.iter().map(|q| q.to_f32()).collect();
        let err = max_rel_err(&got, |i| {
            let w = f64::from(xh[i].to_f32()) + f64::from(yh[i].to_f32());
            (w, w.abs() + 2f64.powi(-14))
        });
        rows.push(Row {
            key: "add_f16".into(),
            bytes: 6.0 * nf,
            seconds: t,
            max_err: err,
        });
        let t = time(&gpu, warm, reps, &|b| ops::gelu(b, &xhs, &oh))?;
        let got: Vec<f32> = oh.download()?.iter().map(|q| q.to_f32()).collect();
        let err = max_rel_err(&got, |i| {
            let v = f64::from(xh[i].to_f32());
            let w = 0.5 * v * (1.0 + erf(v / std::f64::consts::SQRT_2));
            (w, w.abs() + 2f64.powi(-14))
        });
        rows.push(Row {
            key: "gelu_f16".into(),
            bytes: 4.0 * nf,
            seconds: t,
            max_err: err,
        });
    } else {
        println!("f16 rows skipped: the adapter lacks shaderFloat16 or 16-bit storage");
    }

    // Matrices.
    let rr = (r as usize) * (r as usize);
    let m = random(3, rr, 4.0);
    let ms = gpu.upload(&m)?;
    let mo: Buffer<f32> = gpu.alloc(rr)?;
    let t = time(&gpu, warm, reps, &|b| ops::softmax(b, &ms, &mo, r, r))?;
    let got = mo.download()?;
    let mut err = 0.0f64;
    for (row, grow) in m.chunks(r as usize).zip(got.chunks(r as usize)) {
        let mx = row
            .iter()
            .map(|&v| f64::from(v))
            .fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = row.iter().map(|&v| (f64::from(v) - mx).exp()).sum();
        err = err.max(max_rel_err(grow, |i| {
            let w = (f64::from(row[i]) - mx).exp() / s;
            (w, w)
        }));
    }
    rows.push(Row {
        key: format!("softmax_rows{r}"),
        bytes: 8.0 * rr as f64,
        seconds: t,
        max_err: err,
    });
    let t = time(&gpu, warm, reps, &|b| ops::transpose(b, &ms, &mo, r, r))?;
    let got = mo.download()?;
    let ru = r as usize;
    let exact = (0..rr).all(|i| got[(i % ru) * ru + i / ru] == m[i]);
    rows.push(Row {
        key: format!("transpose{r}"),
        bytes: 8.0 * rr as f64,
        seconds: t,
        max_err: if exact { 0.0 } else { f64::INFINITY },
    });
    let v = random(4, ru, 1.0);
    let (vs, gy) = (gpu.upload(&v)?, gpu.alloc::<f32>(ru)?);
    let t = time(&gpu, warm, reps, &|b| ops::gemv(b, &ms, &vs, &gy, r, r))?;
    let got = gy.download()?;
    let err = max_rel_err(&got, |i| {
        let row = &m[i * ru..(i + 1) * ru];
        let w: f64 = row
            .iter()
            .zip(&v)
            .map(|(&p, &q)| f64::from(p) * f64::from(q))
            .sum();
        let s: f64 = row
            .iter()
            .zip(&v)
            .map(|(&p, &q)| (f64::from(p) * f64::from(q)).abs())
            .sum();
        (w, s)
    });
    rows.push(Row {
        key: format!("gemv{r}"),
        bytes: 4.0 * rr as f64,
        seconds: t,
        max_err: err,
    });

    // Report: bandwidth, error, and the in-run goals against our copy.
    let gbps = |row: &Row| row.bytes / row.seconds / 1e9;
    let copy = rows
        .iter()
        .find(|x| x.key == "copy")
        .map(gbps)
        .unwrap_or(0.0);
    println!(
        "{:<20} {:>10} {:>10} {:>10} {:>11} {:>10} {:>22}",
        "op", "GB/s", "µs", "vs copy", "max error", "vs torch", "goal"
    );
    let mut ok = true;
    for row in &rows {
        let bound =
            if row.key == "max" || row.key == "batch_copy" || row.key.starts_with("transpose") {
                0.0
            } else if row.key.ends_with("_f16") {
                // Outputs rounded to half precision (2^-11), relative to
                // |result| + 2^-14 (half's subnormal range).
                1.0 / 1024.0
            } else {
                1e-4
            };
        let pass = row.max_err <= bound;
        ok &= pass;
        let torch = anchor
            .as_deref()
            .and_then(|a| anchor_value(a, &format!("{}_GBps", row.key)))
            .map(|t| gbps(row) / t);
        let (vs_copy, vs_torch) = (gbps(row) / copy, torch.unwrap_or(f64::NAN));
        let goal = match goal(&row.key) {
            Goal::Copy(g) => format!(
                "{g}x copy: {}",
                if vs_copy >= g { "met" } else { "NOT met" }
            ),
            Goal::Torch(g) if torch.is_some() => {
                format!(
                    "{g}x torch: {}",
                    if vs_torch >= g { "met" } else { "NOT met" }
                )
            }
            Goal::Torch(g) => format!("{g}x torch"),
            Goal::None => String::new(),
        };
        println!(
            "{:<20} {:>10.1} {:>10.1} {:>9.2}x {:>11.2e} {:>9.2}x {:>22}{}",
            row.key,
            gbps(row),
            row.seconds * 1e6,
            vs_copy,
            row.max_err,
            vs_torch,
            goal,
            if pass { "" } else { "  WRONG" }
        );
    }
    if diag {
        let bufs: [(&str, &Buffer<f32>); 8] = [
            ("x", &xs),
            ("y", &ys),
            ("out", &out),
            ("res", &res),
            ("m", &ms),
            ("m_out", &mo),
            ("v", &vs),
            ("gemv_y", &gy),
        ];
        let first: Vec<(String, f64)> = rows.iter().map(|r| (r.key.clone(), gbps(r))).collect();
        diagnose(&gpu, n, r, &bufs, &first)?;
    }
    if anchor.is_none() {
        println!("(pass --anchor PATH with cuda_ops_anchor.py's JSON for the ratios to PyTorch)");
    }
    if let Some(path) = json {
        let mut s = String::from("{\n");
        s += &format!(
            "  \"device\": {:?},\n  \"elements\": {n},\n  \"matrix\": {r},\n",
            gpu.info().name
        );
        for row in &rows {
            s += &format!(
                "  \"{}_GBps\": {:.3},\n  \"{}_max_err\": {:e},\n",
                row.key,
                gbps(row),
                row.key,
                row.max_err
            );
        }
        s += &format!("  \"all_correct\": {ok}\n}}\n");
        std::fs::write(&path, s).map_err(|e| vkcompute::Error::CacheIo {
            path: path.into(),
            detail: e.to_string(),
        })?;
    }
    if !ok {
        eprintln!("a result was wrong: its figure does not count");
        std::process::exit(1);
    }
    Ok(())
}

/// Names of the memory property bits in `flags`.
fn flag_names(flags: u32) -> String {
    let names = [
        "DEVICE_LOCAL",
        "HOST_VISIBLE",
        "HOST_COHERENT",
        "HOST_CACHED",
    ];
    let v: Vec<&str> = (0..4)
        .filter(|b| flags & (1 << b) != 0)
        .map(|b| names[b])
        .collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join("|")
    }
}

/// `--diag`: what settles whether a slow figure is the kernel's or the
/// measurement's. Re-times every op (kernels checked in the main pass) in
/// reverse order, each in a fresh batch; times copy once more at the end
/// and after 2 s idle; runs 200 back-to-back copies, adds and swishes in
/// one batch and compares the first and last 20; prints each buffer's
/// memory placement and the grids the launch rules chose.
fn diagnose(
    gpu: &Device,
    n: usize,
    r: u32,
    bufs: &[(&str, &Buffer<f32>); 8],
    first: &[(String, f64)],
) -> Result<()> {
    let info = gpu.info();
    let [(_, x), (_, y), (_, out), (_, res), (_, m), (_, mo), (_, v), (_, gy)] = *bufs;
    println!("\n--diag (without the {WARM_FOR:?} warm-up the main pass gives each op)");
    PREWARM.store(false, std::sync::atomic::Ordering::Relaxed);
    println!(
        "adapter: {} compute units x {} resident invocations, max groups {:?}, subgroup {}, \
         timestamps {}, ReBAR bytes {}",
        info.compute_units,
        info.max_threads_per_compute_unit,
        info.max_workgroup_count,
        info.subgroup_size,
        info.timestamps,
        info.host_visible_device_memory
    );
    for (name, b) in bufs {
        let (flags, block, offset) = b.memory_placement();
        println!(
            "buffer {name:<7} {:>11} bytes  flags {flags:#x} ({})  block {block:#x} offset {offset}",
            b.byte_size(),
            flag_names(flags)
        );
    }
    let local = 256; // the 1-D built-ins' workgroup size (src/ops/grid.rs LOCAL)
    println!(
        "grid: element-wise {} groups x {local} over {n} elements (n/4 vec4 = {}), \
         reductions {} groups x {local}, softmax/gemv {r} row groups; \
         Batch::copy uses its own kernel (src/batch/copy_kernel.rs)",
        ops::elementwise_grid(info, n as u64),
        n / 4,
        ops::reduce_grid(info, n as u64)
    );
    let nf = n as f64;
    let rr = f64::from(r) * f64::from(r);
    type Op<'a> = Box<dyn Fn(&mut Batch) -> Result<()> + 'a>;
    let list: Vec<(&str, f64, Op<'_>)> = vec![
        (
            "copy",
            8.0 * nf,
            Box::new(|b| ops::unary(b, Unary::Copy, x, out)),
        ),
        (
            "scale",
            8.0 * nf,
            Box::new(|b| ops::unary(b, Unary::Scale(2.0), x, out)),
        ),
        (
            "relu",
            8.0 * nf,
            Box::new(|b| ops::unary(b, Unary::Relu, x, out)),
        ),
        (
            "sigmoid",
            8.0 * nf,
            Box::new(|b| ops::unary(b, Unary::Sigmoid, x, out)),
        ),
        (
            "tanh",
            8.0 * nf,
            Box::new(|b| ops::unary(b, Unary::Tanh, x, out)),
        ),
        (
            "swish",
            8.0 * nf,
            Box::new(|b| ops::unary(b, Unary::Swish, x, out)),
        ),
        (
            "gelu_erf",
            8.0 * nf,
            Box::new(|b| ops::unary(b, Unary::Gelu, x, out)),
        ),
        (
            "gelu_tanh",
            8.0 * nf,
            Box::new(|b| ops::unary(b, Unary::GeluTanh, x, out)),
        ),
        (
            "batch_copy",
            8.0 * nf,
            Box::new(|b| b.copy(x, out).map(|_| ())),
        ),
        ("add", 12.0 * nf, Box::new(|b| ops::add(b, x, y, out))),
        ("sub", 12.0 * nf, Box::new(|b| ops::sub(b, x, y, out))),
        ("mul", 12.0 * nf, Box::new(|b| ops::mul(b, x, y, out))),
        ("fill", 4.0 * nf, Box::new(|b| ops::fill(b, 1.5, out))),
        ("saxpy", 12.0 * nf, Box::new(|b| ops::saxpy(b, 2.0, x, out))),
        ("sum", 4.0 * nf, Box::new(|b| ops::sum(b, x, res))),
        ("max", 4.0 * nf, Box::new(|b| ops::max(b, x, res))),
        ("dot", 8.0 * nf, Box::new(|b| ops::dot(b, x, y, res))),
        (
            "softmax",
            8.0 * rr,
            Box::new(move |b| ops::softmax(b, m, mo, r, r)),
        ),
        (
            "transpose",
            8.0 * rr,
            Box::new(move |b| ops::transpose(b, m, mo, r, r)),
        ),
        (
            "gemv",
            4.0 * rr,
            Box::new(move |b| ops::gemv(b, m, v, gy, r, r)),
        ),
    ];
    let main_figure = |key: &str| {
        first
            .iter()
            .find(|(k, _)| k == key)
            .or_else(|| first.iter().find(|(k, _)| k.starts_with(key)))
            .map_or(f64::NAN, |f| f.1)
    };
    println!(
        "reverse order, fresh batch each (3 warm + 15 timed): \
         GB/s (gpu median), GB/s from wall time per dispatch, main-pass GB/s"
    );
    let row = |name: &str, bytes: f64, op: &Op<'_>| -> Result<()> {
        let (t, wall) = time_each(gpu, 3, 15, op.as_ref())?;
        println!(
            "  {name:<12} {:>9.1} {:>9.1} {:>9.1}",
            bytes / median(t) / 1e9,
            bytes / (wall / 18.0) / 1e9,
            main_figure(name)
        );
        Ok(())
    };
    for (name, bytes, op) in list.iter().rev() {
        row(name, *bytes, op)?;
    }
    println!("hot: the same with 100 warm-up dispatches first (a rise over the above = clocks or caches warming)");
    for (name, bytes, op) in &list {
        let (t, _) = time_each(gpu, 100, 15, op.as_ref())?;
        println!("  {name:<12} {:>9.1}", bytes / median(t) / 1e9);
    }
    println!("copy again at the end, then after 2 s idle:");
    row("copy", list[0].1, &list[0].2)?;
    std::thread::sleep(std::time::Duration::from_secs(2));
    row("copy", list[0].1, &list[0].2)?;
    println!("200 back-to-back dispatches in one batch: GB/s of the first 20, the last 20 (a rise = clocks ramping)");
    for key in ["copy", "swish", "add", "batch_copy"] {
        let (name, bytes, op) = list.iter().find(|l| l.0 == key).expect("listed");
        let (t, _) = time_each(gpu, 0, 200, op.as_ref())?;
        let k = t.len().min(20);
        println!(
            "  {name:<12} {:>9.1} {:>9.1}",
            bytes / median(t[..k].to_vec()) / 1e9,
            bytes / median(t[t.len() - k..].to_vec()) / 1e9
        );
    }
    // The last copy must still be right: a wrong kernel cannot look fast here either.
    if out.download()? != x.download()? {
        eprintln!("--diag: copy/batch_copy result WRONG");
        std::process::exit(1);
    }
    Ok(())
}
