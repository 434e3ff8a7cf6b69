//! Probe of compiled variants of the skinny linear kernel
//! (`shaders/linear.glsl` with the experimental macros of
//! `shaders/linear_exp.glsl`) that are not built in, beside the built-in
//! kernels, on bf16 weights stored [N, K] as `ops::linear` takes them.
//!
//! Each argument `FILE.spv:R:MT` is a SPIR-V build of `shaders/linear_bf16.comp`
//! whose units are R rows of W and whose passes hold MT rows of x; it is
//! launched as `ops::linear` launches its kernels with one K slice (push
//! constants M, K, N, mode, vec, kchunk, upw, mchunks, pairs, ksub; grid
//! ceil(units / 8) × ceil(M / MT); 256 invocations, subgroups of 32). For
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
//! GB/s.
//!
//! ```text
//! cargo run --release -p vkcompute-measure --example linear_probe -- a.spv:4:4 b.spv:8:4
//! ```

use std::time::Duration;

use vkcompute::ops::{self, Bf16, Epilogue, LinearPlan};
use vkcompute::{BatchOptions, Buffer, Device, Kernel, Profiling, Result};
use vkcompute_measure::probe::{interleaved_rounds, min_median_max, relative_diff, values};

/// Invocations of the linear kernels' workgroup.
const THREADS: u32 = 256;

enum Run {
    Default,
    Builtin(u32),
    Variant { kernel: Kernel, r: u32, mt: u32 },
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

fn record(
    gpu: &Device,
    row: &Row,
    s: &Shape,
    (x, w, y): (&Buffer<f32>, &Buffer<Bf16>, &Buffer<f32>),
    reps: usize,
) -> Result<Vec<f64>> {
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
    for i in 0..reps {
        if i > 0 {
            batch.barrier();
        }
        let first = batch.len() as usize;
        match &row.run {
            Run::Default => ops::linear(&mut batch, x, w, y, s.m, s.k, s.n, epi())?,
            Run::Builtin(mt) => {
                let plan = LinearPlan {
                    rows_per_pass: *mt,
                    splits: 1,
                };
                ops::linear_with_plan(&mut batch, x, w, y, s.m, s.k, s.n, epi(), plan)?
            }
            Run::Variant { kernel, r, mt } => {
                let units = if s.silu {
                    (s.n / 2).div_ceil(r / 2)
                } else {
                    s.n.div_ceil(*r)
                };
                let upw = THREADS / 32 / s.ksub;
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
                    s.ksub,
                ];
                let bytes: Vec<u8> = push.iter().flat_map(|v| v.to_le_bytes()).collect();
                batch.run_configured(
                    kernel,
                    &[x, x, w, w, y, y],
                    [groups * mchunks, 1, 1],
                    Some(&bytes),
                )?;
            }
        }
        spans.push((first, batch.len() as usize));
    }
    let t = batch.submit_async()?;
    let profile = t.profile()?;
    let len = profile.commands.len();
    Ok(spans
        .iter()
        .map(|&(a, b)| {
            profile.commands[a.min(len)..b.min(len)]
                .iter()
                .map(|c| c.gpu_ns)
                .sum()
        })
        .collect())
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
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--shapes" {
            shapes = it.next().cloned().unwrap_or_default();
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
        let [file, r, mt] = parts[..] else {
            eprintln!("argument {arg:?}: expected FILE.spv:R:MT");
            std::process::exit(2);
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
        vrows.push(Row {
            name: format!("{file} (R {r}, MT {mt})"),
            run: Run::Variant { kernel, r, mt },
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
            "== {} × {} · [{} × {}]ᵀ bf16{}; variants with {} subgroup(s) per unit",
            s.m,
            s.k,
            s.n,
            s.k,
            if s.silu { ", SiLU·mul" } else { "" },
            s.ksub
        );
        let xv = values(1, (s.m * s.k) as usize);
        let wv: Vec<Bf16> = values(2, (s.n * s.k) as usize)
            .into_iter()
            .map(|v| Bf16::from_f32(v * 0.05))
            .collect();
        let outs = if s.silu { s.n / 2 } else { s.n };
        let (x, w) = (gpu.upload(&xv)?, gpu.upload(&wv)?);
        let y = gpu.alloc::<f32>((s.m * outs) as usize)?;
        let mut reference = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            y.write(0, &vec![f32::NAN; (s.m * outs) as usize])?;
            record(&gpu, row, s, (&x, &w, &y), 1)?;
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
        let times = interleaved_rounds(rows.len(), Duration::from_millis(300), 15, |i| {
            record(&gpu, &rows[i], s, (&x, &w, &y), 5)
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
    }
    Ok(())
}
