//! Probe of compiled variants of the skinny linear kernel
//! (`shaders/linear.glsl` with the measurement macros of
//! `shaders/linear_loops.glsl`, or a scratch copy with macros of its own)
//! that are not built in, beside the built-in kernels, on bf16 weights
//! stored [N, K] as `ops::linear` takes them. `kernel_statistics --spv`
//! prints what the driver made of the same builds (registers, shared
//! memory).
//!
//! Each argument `FILE.spv:R:MT[:UPW]` is a SPIR-V build of `shaders/linear_bf16.comp`
//! whose units are R rows of W and whose passes hold MT rows of x; it is
//! launched as `ops::linear` launches its kernels with one K slice (push
//! constants M, K, N, mode, vec, kchunk, upw, mchunks, pairs, ksub; grid
//! ceil(units / upw) × ceil(M / MT); subgroups of 32). The build's
//! workgroup size (`WG_SIZE`, 256 unless the build says) gives its
//! subgroups S: with UPW, a workgroup holds UPW units and S / UPW
//! subgroups share each (the shape's ksub is ignored); without, it holds
//! S / ksub units. For
//! each shape (`--shapes M,K,N,silu[,ksub];...`: ksub subgroups share a
//! unit in the variants' launches, the narrower workgroups of
//! `ops::linear`; default the Qwen3-4B FFN's
//! gate|up at 1 and 4 rows and its LM head at 1 row) the rows are: the
//! default (`ops::linear`), the built-in kernel of each MT the variants
//! name with one K slice (`ops::linear_with_plan`), and the variants. Every
//! row's output is compared once with the default's (largest difference
//! over the largest |y|); then each row is warmed for 300 ms and 15
//! interleaved rounds time 5 launches back to back each (GPU timestamps,
//! the median launch of a round): min / median / max µs and the weights'
//! GB/s. `--norm` makes every row an RMSNorm-prologue layer: the default
//! is `ops::linear_normed`, the built-in rows `ops::linear_normed_with_plan`,
//! and the variants (builds with `NORM`) bind the norm weight and take eps
//! (1e-6). `--copies C` (default 1) uploads C copies of W and has launch i
//! read copy i mod C: with C × |W| well past the L2 cache, a launch reads
//! its weights from memory, as each layer of a model does.
//!
//! `--before KIND` puts a command before every launch (a barrier on each
//! side), as a model's layer has one before it, to see what the layer
//! costs after it: `none` (the default), `copy` (the element-wise copy
//! kernel writes x from a constant copy of it: x is written by the
//! command before, as in a model), `o` (a skinny linear layer of
//! Qwen3-4B's o projection shape, [K × 4096] bf16 weights with C copies,
//! writes x = a·Woᵀ + x₀ through its residual epilogue, x₀ a constant
//! buffer: the command a model's gate|up follows) or `o-other` (the same
//! layer writing another buffer: no read of its output). The command
//! before is the same for every row, so the rows' outputs still compare;
//! its own median time per row is printed beside the layer's.
//!
//! ```text
//! cargo run --release -p vkcompute-measure --example linear_probe -- [--copies 4] [--norm]
//!     [--before none|copy|o|o-other] a.spv:4:4 b.spv:8:4:5
//! ```

use std::time::Duration;

use vkcompute::ops::{self, Bf16, Epilogue, LinearPlan};
use vkcompute::{BatchOptions, Buffer, Device, Kernel, Profiling, Result};
use vkcompute_measure::probe::{interleaved_rounds, min_median_max, relative_diff, values};

/// Lanes of the subgroups the variants are built for.
const LANES: u32 = 32;

enum Run {
    Default,
    Builtin(u32),
    Variant {
        kernel: Kernel,
        r: u32,
        mt: u32,
        /// Units per workgroup when the argument names them.
        upw: Option<u32>,
    },
}

struct Row {
    name: String,
    run: Run,
}

struct Shape {
    m: u32,
    k: u32,
    n: u32,
    silu: bool,
    /// Subgroups sharing a unit in the variants' launches (1, 2, 4 or 8:
    /// `ops::linear`'s narrower workgroups; the built-in rows narrow by
    /// their own rule).
    ksub: u32,
}

/// The RMSNorm's epsilon of `--norm` runs.
const EPS: f32 = 1e-6;

/// Timed rounds per row (each the median of 5 launches).
const ROUNDS: usize = 15;

/// The K of `--before o`'s layer (Qwen3-4B's o projection: 32 heads of 128).
const O_K: u32 = 4096;

/// The command `--before` puts ahead of each launch.
#[derive(Clone, Copy, PartialEq)]
enum Before {
    None,
    Copy,
    O,
    OOther,
}

/// What the command before each launch reads and writes.
struct Pre<'a> {
    kind: Before,
    /// The constant x₀ (copied into x, or the o layer's residual).
    x0: &'a Buffer<f32>,
    /// The o layer's input `[M, O_K]` and its weight copies `[K, O_K]`.
    a: &'a Buffer<f32>,
    wo: &'a [Buffer<Bf16>],
    /// `o-other`'s output `[M, K]`.
    other: &'a Buffer<f32>,
}

impl Pre<'_> {
    /// Records the command before launch `i` (nothing for `none`).
    fn record(
        &self,
        batch: &mut vkcompute::Batch,
        s: &Shape,
        x: &Buffer<f32>,
        i: usize,
    ) -> Result<()> {
        let out = match self.kind {
            Before::None => return Ok(()),
            Before::Copy => return ops::copy(batch, self.x0, x),
            Before::O => x,
            Before::OOther => self.other,
        };
        let wo = &self.wo[i % self.wo.len()];
        let res = Epilogue::Residual(self.x0);
        ops::linear(batch, self.a, wo, out, s.m, O_K, s.k, res)
    }
}

/// Records `reps` launches of `row`'s layer, each after `pre`'s command;
/// the GPU time of each launch and of each command before it.
fn record(
    gpu: &Device,
    row: &Row,
    s: &Shape,
    (x, ws, y): (&Buffer<f32>, &[Buffer<Bf16>], &Buffer<f32>),
    g: Option<&Buffer<f32>>,
    pre: &Pre<'_>,
    reps: usize,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let opts = BatchOptions::single_submit().with_profiling(Profiling::Commands);
    let mut batch = gpu.batch_with(opts)?;
    let epi = || {
        if s.silu {
            Epilogue::SiluMul
        } else {
            Epilogue::None
        }
    };
    let mut spans = Vec::new();
    let mut pre_spans = Vec::new();
    for i in 0..reps {
        if pre.kind != Before::None {
            if i > 0 {
                batch.barrier();
            }
            let first = batch.len() as usize;
            pre.record(&mut batch, s, x, i)?;
            pre_spans.push((first, batch.len() as usize));
        }
        if i > 0 || pre.kind != Before::None {
            batch.barrier();
        }
        let first = batch.len() as usize;
        let w = &ws[i % ws.len()];
        match (&row.run, g) {
            (Run::Default, None) => ops::linear(&mut batch, x, w, y, s.m, s.k, s.n, epi())?,
            (Run::Default, Some(g)) => {
                ops::linear_normed(&mut batch, x, g, EPS, w, y, s.m, s.k, s.n, epi())?
            }
            (Run::Builtin(mt), g) => {
                let plan = LinearPlan {
                    rows_per_pass: *mt,
                    splits: 1,
                };
                match g {
                    None => ops::linear_with_plan(&mut batch, x, w, y, s.m, s.k, s.n, epi(), plan)?,
                    Some(g) => ops::linear_normed_with_plan(
                        &mut batch,
                        x,
                        g,
                        EPS,
                        w,
                        y,
                        s.m,
                        s.k,
                        s.n,
                        epi(),
                        plan,
                    )?,
                }
            }
            (Run::Variant { kernel, r, mt, upw }, g) => {
                let units = if s.silu {
                    (s.n / 2).div_ceil(r / 2)
                } else {
                    s.n.div_ceil(*r)
                };
                let subgroups = (kernel.workgroup_size()[0] / LANES).max(1);
                let (upw, ksub) = match upw {
                    Some(u) => (*u, (subgroups / u).max(1)),
                    None => ((subgroups / s.ksub).max(1), s.ksub),
                };
                let groups = units.div_ceil(upw);
                let mchunks = s.m.div_ceil(*mt);
                let vec = s.k % 8 == 0;
                let kchunk = if vec { s.k / 8 } else { s.k };
                let mode = if s.silu { 2 } else { 0 };
                let push = [
                    s.m,
                    s.k,
                    s.n,
                    mode,
                    u32::from(vec),
                    kchunk,
                    upw,
                    mchunks,
                    u32::from(s.silu),
                    ksub,
                ];
                let mut bytes: Vec<u8> = push.iter().flat_map(|v| v.to_le_bytes()).collect();
                let groups = [groups * mchunks, 1, 1];
                match g {
                    None => {
                        batch.run_configured(kernel, &[x, x, w, w, y, y], groups, Some(&bytes))?;
                    }
                    Some(g) => {
                        bytes.extend_from_slice(&EPS.to_le_bytes());
                        batch.run_configured(
                            kernel,
                            &[x, x, w, w, y, y, g, g],
                            groups,
                            Some(&bytes),
                        )?;
                    }
                }
            }
        }
        spans.push((first, batch.len() as usize));
    }
    let t = batch.submit_async()?;
    let profile = t.profile()?;
    let len = profile.commands.len();
    let sum = |spans: &[(usize, usize)]| -> Vec<f64> {
        spans
            .iter()
            .map(|&(a, b)| {
                profile.commands[a.min(len)..b.min(len)]
                    .iter()
                    .map(|c| c.gpu_ns)
                    .sum()
            })
            .collect()
    };
    Ok((sum(&spans), sum(&pre_spans)))
}

fn parse_shapes(list: &str) -> Vec<Shape> {
    list.split(';')
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            let f: Vec<u32> = s.split(',').filter_map(|v| v.trim().parse().ok()).collect();
            let (m, k, n, silu, ksub) = match f[..] {
                [m, k, n, silu] => (m, k, n, silu, 1),
                [m, k, n, silu, ksub] => (m, k, n, silu, ksub),
                _ => {
                    eprintln!("--shapes: expected M,K,N,silu[,ksub] (silu 0 or 1), got {s:?}");
                    std::process::exit(2);
                }
            };
            if m == 0
                || k == 0
                || n == 0
                || (silu == 1 && n % 2 == 1)
                || ![1, 2, 4, 8].contains(&ksub)
            {
                eprintln!("--shapes {s:?}: M, K, N ≥ 1 (N even with silu), ksub 1, 2, 4 or 8");
                std::process::exit(2);
            }
            Shape {
                m,
                k,
                n,
                silu: silu == 1,
                ksub,
            }
        })
        .collect()
}

fn main() -> Result<()> {
    let gpu = Device::new()?;
    println!("device: {}", gpu.info().name);
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut shapes = "1,2560,19456,1;4,2560,19456,1;1,2560,151936,0".to_string();
    let mut variants = Vec::new();
    let mut copies = 1usize;
    let mut norm = false;
    let mut before = Before::None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--shapes" {
            shapes = it.next().cloned().unwrap_or_default();
        } else if a == "--norm" {
            norm = true;
        } else if a == "--before" {
            before = match it.next().map(String::as_str) {
                Some("none") => Before::None,
                Some("copy") => Before::Copy,
                Some("o") => Before::O,
                Some("o-other") => Before::OOther,
                v => {
                    eprintln!("--before: expected none, copy, o or o-other, got {v:?}");
                    std::process::exit(2);
                }
            };
        } else if a == "--copies" {
            copies = match it.next().and_then(|v| v.parse().ok()) {
                Some(c) if c >= 1 => c,
                _ => {
                    eprintln!("--copies: expected a count of at least 1");
                    std::process::exit(2);
                }
            };
        } else {
            variants.push(a.clone());
        }
    }
    let quick = std::env::var_os("VKCOMPUTE_QUICK").is_some();
    let shapes = if quick {
        parse_shapes("1,64,40,1;3,72,24,0;1,512,24,0,4")
    } else {
        parse_shapes(&shapes)
    };
    let mut rows = vec![Row {
        name: "default (ops::linear)".into(),
        run: Run::Default,
    }];
    let mut mts = Vec::new();
    let mut vrows = Vec::new();
    for arg in &variants {
        let parts: Vec<&str> = arg.split(':').collect();
        let (file, r, mt, upw) = match parts[..] {
            [file, r, mt] => (file, r, mt, None),
            [file, r, mt, upw] => (file, r, mt, upw.parse::<u32>().ok().filter(|&u| u >= 1)),
            _ => {
                eprintln!("argument {arg:?}: expected FILE.spv:R:MT[:UPW]");
                std::process::exit(2);
            }
        };
        let (r, mt): (u32, u32) = (r.parse().unwrap_or(4), mt.parse().unwrap_or(4));
        let bytes = std::fs::read(file).unwrap_or_else(|e| {
            eprintln!("{file}: {e}");
            std::process::exit(2)
        });
        // The weights are bf16 bits bound as uvec4 / uint16_t words.
        let kernel = Kernel::builder(&gpu)
            .spirv(&bytes[..])
            .label(file)
            .raw_elements()
            .build()?;
        if !mts.contains(&mt) {
            mts.push(mt);
        }
        let wg = kernel.workgroup_size()[0];
        let name = match upw {
            Some(u) => format!("{file} (R {r}, MT {mt}, {wg} invocations, {u} units each)"),
            None => format!("{file} (R {r}, MT {mt}, {wg} invocations)"),
        };
        vrows.push(Row {
            name,
            run: Run::Variant { kernel, r, mt, upw },
        });
    }
    for mt in mts {
        rows.push(Row {
            name: format!("built-in, {mt} rows per pass, one K slice"),
            run: Run::Builtin(mt),
        });
    }
    rows.extend(vrows);
    for s in &shapes {
        println!(
            "== {}{} × {} · [{} × {}]ᵀ bf16{}; variants with {} subgroup(s) per unit; {} cop{} of W",
            if norm { "RMSNorm, " } else { "" },
            s.m,
            s.k,
            s.n,
            s.k,
            if s.silu { ", SiLU·mul" } else { "" },
            s.ksub,
            copies,
            if copies == 1 { "y" } else { "ies" }
        );
        let xv = values(1, (s.m * s.k) as usize);
        let wv: Vec<Bf16> = values(2, (s.n * s.k) as usize)
            .into_iter()
            .map(|v| Bf16::from_f32(v * 0.05))
            .collect();
        let outs = if s.silu { s.n / 2 } else { s.n };
        let gv: Vec<f32> = values(3, s.k as usize).iter().map(|v| 1.0 + v).collect();
        let g = if norm { Some(gpu.upload(&gv)?) } else { None };
        let x = gpu.upload(&xv)?;
        let ws = (0..copies)
            .map(|_| gpu.upload(&wv))
            .collect::<Result<Vec<_>>>()?;
        let y = gpu.alloc::<f32>((s.m * outs) as usize)?;
        let x0 = gpu.upload(&xv)?;
        let (a, wo) = if matches!(before, Before::O | Before::OOther) {
            let av: Vec<f32> = values(4, (s.m * O_K) as usize)
                .iter()
                .map(|v| v * 0.1)
                .collect();
            let wov: Vec<Bf16> = values(5, (s.k * O_K) as usize)
                .into_iter()
                .map(|v| Bf16::from_f32(v * 0.05))
                .collect();
            let wo = (0..copies)
                .map(|_| gpu.upload(&wov))
                .collect::<Result<Vec<_>>>()?;
            (gpu.upload(&av)?, wo)
        } else {
            (gpu.alloc::<f32>(1)?, Vec::new())
        };
        let other = gpu.alloc::<f32>((s.m * s.k) as usize)?;
        let pre = Pre {
            kind: before,
            x0: &x0,
            a: &a,
            wo: &wo,
            other: &other,
        };
        let mut reference = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            y.write(0, &vec![f32::NAN; (s.m * outs) as usize])?;
            record(&gpu, row, s, (&x, &ws, &y), g.as_ref(), &pre, 1)?;
            let got = y.download()?;
            if i == 0 {
                reference = got;
                continue;
            }
            let d = relative_diff(&got, &reference);
            println!(
                "  {}: max |y - default| / max |y| = {:.2e}{}",
                row.name,
                d,
                if d > 1e-5 { "  FAIL" } else { "" }
            );
        }
        // The command before: its median per call, kept from the timed
        // rounds only (`interleaved_rounds` warms every row first, so those
        // are each row's last ROUNDS calls).
        let mut pre_times = vec![Vec::new(); rows.len()];
        let times = interleaved_rounds(rows.len(), Duration::from_millis(300), ROUNDS, |i| {
            let (t, mut p) = record(&gpu, &rows[i], s, (&x, &ws, &y), g.as_ref(), &pre, 5)?;
            p.sort_by(f64::total_cmp);
            if let Some(&m) = p.get(p.len() / 2) {
                pre_times[i].push(m);
            }
            Ok::<_, vkcompute::Error>(t)
        })?;
        let bytes = f64::from(s.n) * f64::from(s.k) * 2.0;
        for (row, t) in rows.iter().zip(&times) {
            let (lo, med, hi) = min_median_max(t);
            println!(
                "  {:<64} µs min {:.1} / median {:.1} / max {:.1}; weights {:.0} GB/s (median)",
                row.name,
                lo / 1e3,
                med / 1e3,
                hi / 1e3,
                bytes / med
            );
        }
        if before != Before::None {
            for (row, p) in rows.iter().zip(&pre_times) {
                let mut p = p[p.len().saturating_sub(ROUNDS)..].to_vec();
                p.sort_by(f64::total_cmp);
                let (lo, med, hi) = min_median_max(&p);
                println!(
                    "  the command before, with {:<46} µs min {:.1} / median {:.1} / max {:.1}",
                    row.name,
                    lo / 1e3,
                    med / 1e3,
                    hi / 1e3
                );
            }
        }
    }
    Ok(())
}
