//! The batched f16 product at the Qwen3-4B prefill's shapes
//! (`--prefill-shapes`): its four projections at 512 tokens (q|k|v, o,
//! gate|up, down: 512 rows of A, B stored N×K as nn.Linear keeps it)
//! through [`ops::matmul_f16_batched`]'s own choice, as the qwen3
//! example's f16 prefill runs them: warmed, then rounds of the GPU time,
//! min / median / max, the kernel that ran, and each result checked once
//! against an error bound (inputs and bound as the f16 rows',
//! `f16_bench.rs`). `scripts/cuda_reference.py --prefill-linear` times
//! cuBLAS (`F.linear`) at the same shapes, under the same keys with
//! `_cublas_f16` / `_cublas_bf16` in place of `_default`.

use std::time::Duration;

use vkcompute::ops::{self, BatchedShape, Cm2Tile, MatmulCaps};
use vkcompute::{Batch, Device, Result};

use crate::f16_bench::{abs_error, error_bound, f16_inputs, profiled_rounds, transposed};
use crate::Report;

/// The projections of the prefill: name, K, N (M is the prompt's 512).
const PROJECTIONS: [(&str, u32, u32); 4] = [
    ("qkv", 2560, 6144),
    ("o", 4096, 2560),
    ("gate_up", 2560, 19456),
    ("down", 9728, 2560),
];

/// Rows `prefill{m}_{name}_default` for every projection, and with
/// `tiles` one per batched N×K tile the adapter fits
/// (`prefill{m}_{name}_{bm}x{bn}g{group}`); `quick` uses 64 rows and a
/// quarter of K and N.
pub fn bench_prefill_shapes(
    gpu: &Device,
    rep: &mut Report,
    rounds: usize,
    warm_for: Duration,
    quick: bool,
    tiles: bool,
) -> Result<()> {
    let caps = MatmulCaps::of(gpu.info());
    let m = if quick { 64 } else { 512 };
    for (name, k, n) in PROJECTIONS {
        let (k, n) = if quick { (k / 4, n / 4) } else { (k, n) };
        let (mu, ku, nu) = (m as usize, k as usize, n as usize);
        let (abits, a) = f16_inputs(u64::from(k) * 3 + 1, mu * ku);
        let (bbits, b) = f16_inputs(u64::from(n) * 5 + 2, ku * nu);
        // B stored N×K: the bound and the check read it as K×N.
        let (ga, gb) = (
            gpu.upload(&abits)?,
            gpu.upload(&transposed(&bbits, ku, nu))?,
        );
        let gc = gpu.alloc::<f32>(mu * nu)?;
        let shape = BatchedShape::packed(1, m, k, n).with_b_transposed();
        // The default choice, then each batched N×K tile the adapter fits
        // (`--prefill-tiles`).
        let default = ops::batched_tile(&shape, &caps);
        let mut choices = vec![("default".to_string(), default, false)];
        if tiles {
            for t in [Cm2Tile::SQUARE_GROUPED, Cm2Tile::SMALL, Cm2Tile::QUARTER] {
                if t.fits(&caps) && t.batched_kernel_name(true).is_some() {
                    choices.push((format!("{}x{}g{}", t.bm, t.bn, t.group), Some(t), true));
                }
            }
        }
        for (label, tile, explicit) in choices {
            let key = format!("prefill{m}_{name}_{label}");
            let record = |batch: &mut Batch| -> Result<()> {
                if explicit {
                    ops::matmul::matmul_f16_batched_with_tile(batch, &ga, &gb, &gc, shape, tile)
                } else {
                    ops::matmul_f16_batched(batch, &ga, &gb, &gc, shape)
                }
            };
            let mut batch = gpu.batch()?;
            record(&mut batch)?;
            batch.submit()?;
            let err = abs_error(&a, &b, &gc.download()?, (mu, ku, nu), false);
            let bound = error_bound(&a, &b, k);
            let (ns, labels) = profiled_rounds(gpu, rounds, warm_for, record)?;
            let flops = 2.0 * f64::from(m) * f64::from(k) * f64::from(n);
            let tf = |x: f64| flops / x / 1e3;
            let (lo, med, hi) = (ns[0], ns[ns.len() / 2], ns[ns.len() - 1]);
            rep.push(
                &key,
                tf(med),
                "TFLOPs",
                Some(err / bound),
                1.0,
                format!(
                    " {m}×{k}×{n}, B stored N×K; tile {tile:?}; min/med/max {:.1}/{:.1}/{:.1} \
                     TFLOP/s, median {:.1} µs over {} rounds; ran {}; |err| {err:.2e} (bound \
                     {bound:.2e})",
                    tf(hi),
                    tf(med),
                    tf(lo),
                    med / 1e3,
                    ns.len(),
                    labels.join(" + ")
                ),
            );
        }
    }
    Ok(())
}
