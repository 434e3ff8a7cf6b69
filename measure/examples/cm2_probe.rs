//! Probe of compiled variants of the coopmat2 f16 kernel
//! (`shaders/matmul_f16_cm2.comp`) that are not built in: each argument
//! `FILE.spv:BM:BN[:G]` is a SPIR-V build of the shader (other tile sizes,
//! other workgroup sizes), launched as the built-in is (push constants M,
//! K, N; grid ceil(N/BN) × ceil(M/BM); specialization constant 0 = G,
//! default 8: groups of G block rows, 1 = row-major launch order) at
//! 4096³ and 8192³, or the sizes of `--sizes A,B,...`, beside the built-in default
//! (`ops::matmul_f16`). Every variant's result is compared once with the
//! default's (largest difference over the largest |c|) and 16 entries
//! with an f64 product; then the rows of one shape are interleaved, each
//! warmed for 500 ms first, and 15 rounds give min / median / max.
//!
//! ```text
//! cargo run --release -p vkcompute-measure --example cm2_probe -- a.spv:128:256 b.spv:256:256
//! cargo run --release -p vkcompute-measure --example cm2_probe -- --sizes 1024,2048 a.spv:128:128:1
//! ```

use std::time::Duration;

use vkcompute::ops;
use vkcompute::{BatchOptions, Buffer, Device, Kernel, Profiling, Result};
use vkcompute_measure::probe::{f16_inputs, interleaved_rounds, min_median_max, relative_diff};

struct Row {
    name: String,
    kernel: Option<(Kernel, u32, u32)>,
}

fn record(
    gpu: &Device,
    row: &Row,
    (a, b, c): (&Buffer<u16>, &Buffer<u16>, &Buffer<f32>),
    s: u32,
    reps: usize,
) -> Result<Vec<f64>> {
    let opts = BatchOptions::single_submit().with_profiling(Profiling::Commands);
    let mut batch = gpu.batch_with(opts)?;
    for i in 0..reps {
        if i > 0 {
            batch.barrier();
        }
        match &row.kernel {
            None => ops::matmul_f16(&mut batch, a, b, c, s, s, s)?,
            Some((k, bm, bn)) => {
                let push: Vec<u8> = [s, s, s].iter().flat_map(|v| v.to_le_bytes()).collect();
                batch.run_configured(
                    k,
                    &[a, b, c],
                    [s.div_ceil(*bn), s.div_ceil(*bm), 1],
                    Some(&push),
                )?;
            }
        }
    }
    let t = batch.submit_async()?;
    Ok(t.profile()?.commands.iter().map(|c| c.gpu_ns).collect())
}

fn main() -> Result<()> {
    let gpu = Device::new()?;
    println!("device: {}", gpu.info().name);
    let mut rows = vec![Row {
        name: "built-in default (ops::matmul_f16)".into(),
        kernel: None,
    }];
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut sizes: Vec<u32> = vec![4096, 8192];
    let mut variants = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if arg == "--sizes" {
            let list = it.next().map(String::as_str).unwrap_or("");
            sizes = list
                .split(',')
                .filter_map(|v| v.trim().parse().ok())
                .collect();
            if sizes.is_empty() || sizes.iter().any(|&v| v == 0 || v > 16384) {
                eprintln!(
                    "--sizes {list:?}: expected a comma-separated list of sizes in 1..=16384"
                );
                std::process::exit(2);
            }
        } else {
            variants.push(arg.clone());
        }
    }
    for arg in &variants {
        let parts: Vec<&str> = arg.split(':').collect();
        let (file, bm, bn, group) = match parts[..] {
            [file, bm, bn] => (file, bm, bn, "8"),
            [file, bm, bn, g] => (file, bm, bn, g),
            _ => {
                eprintln!("argument {arg:?}: expected FILE.spv:BM:BN[:G]");
                std::process::exit(2);
            }
        };
        let group: u32 = group.parse().unwrap_or(8).max(1);
        let bytes = std::fs::read(file).unwrap_or_else(|e| {
            eprintln!("{file}: {e}");
            std::process::exit(2)
        });
        let k = Kernel::builder(&gpu)
            .spirv(&bytes[..])
            .label(file)
            .spec_u32(0, group)
            // The buffers hold f16 bits as u16, as ops::matmul_f16 takes them.
            .raw_elements()
            .build()?;
        let dims = (bm.parse().unwrap_or(128), bn.parse().unwrap_or(128));
        println!(
            "{file}: workgroup {:?}, tile {}×{}, groups of {group} block rows",
            k.workgroup_size(),
            dims.0,
            dims.1
        );
        rows.push(Row {
            name: format!("{file} g{group}"),
            kernel: Some((k, dims.0, dims.1)),
        });
    }
    let quick = std::env::var_os("VKCOMPUTE_QUICK").is_some();
    if quick {
        sizes = vec![256];
    }
    for &s in &sizes {
        let n = (s * s) as usize;
        let (ab, av) = f16_inputs(3, n);
        let (bb, bv) = f16_inputs(4, n);
        let (a, b) = (gpu.upload(&ab)?, gpu.upload(&bb)?);
        let c = gpu.alloc::<f32>(n)?;
        // Checks: the default against 16 f64 entries, each variant against
        // the default.
        let mut reference = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            c.write(0, &vec![f32::NAN; n])?;
            record(&gpu, row, (&a, &b, &c), s, 1)?;
            let got = c.download()?;
            if i == 0 {
                let mut worst = 0f64;
                for t in 0..16usize {
                    let (r, col) = ((t * 7919) % s as usize, (t * 104_729) % s as usize);
                    let mut sum = 0f64;
                    for p in 0..s as usize {
                        sum +=
                            f64::from(av[r * s as usize + p]) * f64::from(bv[p * s as usize + col]);
                    }
                    worst = worst.max((f64::from(got[r * s as usize + col]) - sum).abs());
                }
                println!("{s}³ default: 16 entries within {worst:.2e} of f64");
                reference = got;
            } else {
                println!(
                    "{s}³ {}: max |c - default| / max |c| = {:.2e}",
                    row.name,
                    relative_diff(&got, &reference)
                );
            }
        }
        // Warm each row 500 ms, then 15 interleaved rounds of 5 launches.
        let times = interleaved_rounds(rows.len(), Duration::from_millis(500), 15, |i| {
            record(&gpu, &rows[i], (&a, &b, &c), s, 5)
        })?;
        let flops = 2.0 * f64::from(s).powi(3);
        for (row, t) in rows.iter().zip(&times) {
            let (lo, med, hi) = min_median_max(t);
            let tf = |ns: f64| flops / ns / 1e3;
            println!(
                "{s}³ {:<60} TFLOP/s min {:.1} / median {:.1} / max {:.1}",
                row.name,
                tf(hi),
                tf(med),
                tf(lo)
            );
        }
    }
    Ok(())
}
