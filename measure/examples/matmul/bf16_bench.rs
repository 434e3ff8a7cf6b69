//! The bf16-weight rows: one product C = A·B with [`Bf16`] B
//! ([`ops::matmul_bf16w`]'s own choice of kernel), B stored N×K (the
//! nn.Linear layout) or K×N, A f16 or f32; warmed for at least
//! `warm_for`, then `rounds` rounds (a barrier before each), min / median
//! / max of the GPU time, the label of the kernel that ran, and the result
//! checked once against an error bound.
//!
//! Inputs have full entropy within the stored types: A's values are f16
//! ones (random 10-bit significands, exponents over [1/8, 2), either sign;
//! held as f32 for the f32-A rows, so that their rounding to f16 in the
//! tensor loads is exact), B's are bf16 with random 7-bit significands over
//! the same range (exact in f16 too). Every product is then exact in f32,
//! and |C − exact| ≤ K·u·max|a|·max|b| with u = 2⁻²³ is the bound of the
//! f16 rows (`f16_bench.rs`).

use std::time::Duration;

use vkcompute::ops::{self, BatchedShape, Bf16, Cm2Tile};
use vkcompute::{Batch, Device, Result};

use crate::f16_bench::{abs_error, error_bound, f16_inputs, profiled_rounds, transposed};
use crate::Report;

/// bf16 values as stored and as f32: random sign, exponent over [2⁻³,
/// 2¹), random 7-bit significand (`probe::stream`).
fn bf16_inputs(seed: u64, len: usize) -> (Vec<Bf16>, Vec<f32>) {
    let mut out = Vec::with_capacity(len);
    let mut vals = Vec::with_capacity(len);
    for r in vkcompute_measure::probe::stream(seed)
        .take(len)
        .map(|r| r >> 32)
    {
        let sign = (r & 1) as u16;
        let exp = 124 + ((r >> 1) & 3) as u16; // biased 124..=127: [1/8, 2)
        let mant = ((r >> 3) & 0x7f) as u16;
        let b = Bf16((sign << 15) | (exp << 7) | mant);
        vals.push(b.to_f32());
        out.push(b);
    }
    (out, vals)
}

/// One bf16-weight product at m×k×n (`b_nk`: B stored N×K; `a_f32`: A
/// held as f32), pushed as one row `bf16w{m}x{k}x{n}_{nk|kn}[_a32]`; with
/// `tile`, that tile's kernel (`ops::matmul_bf16w_with_tile`) and the
/// tile's name at the end of the row's key.
#[allow(clippy::too_many_arguments)]
pub fn bench_bf16w(
    gpu: &Device,
    rep: &mut Report,
    (m, k, n): (u32, u32, u32),
    b_nk: bool,
    a_f32: bool,
    tile: Option<Cm2Tile>,
    rounds: usize,
    warm_for: Duration,
) -> Result<()> {
    let key = format!(
        "bf16w{m}x{k}x{n}_{}{}{}",
        if b_nk { "nk" } else { "kn" },
        if a_f32 { "_a32" } else { "" },
        tile.map_or(String::new(), |t| format!(
            "_{}x{}x{}_g{}",
            t.bm, t.bn, t.bk, t.group
        ))
    );
    let (mu, ku, nu) = (m as usize, k as usize, n as usize);
    let (abits, a) = f16_inputs(u64::from(m) * 3 + 1, mu * ku);
    let (bbits, b) = bf16_inputs(u64::from(n) * 5 + 2, ku * nu);
    let stored = if b_nk {
        transposed(&bbits, ku, nu)
    } else {
        bbits
    };
    let gb = gpu.upload(&stored)?;
    let gc = gpu.alloc::<f32>(mu * nu)?;
    let mut shape = BatchedShape::packed(1, m, k, n);
    if b_nk {
        shape = shape.with_b_transposed();
    }
    let ga16 = gpu.upload(&abits)?;
    let ga32 = gpu.upload(&a)?;
    let record = |batch: &mut Batch| -> Result<()> {
        match (tile, a_f32) {
            (None, true) => ops::matmul_bf16w(batch, &ga32, &gb, &gc, shape),
            (None, false) => ops::matmul_bf16w(batch, &ga16, &gb, &gc, shape),
            (Some(_), true) => ops::matmul_bf16w_with_tile(batch, &ga32, &gb, &gc, shape, tile),
            (Some(_), false) => ops::matmul_bf16w_with_tile(batch, &ga16, &gb, &gc, shape, tile),
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
    let f = |x: f64| {
        let t = tf(x);
        if t < 10.0 {
            format!("{t:.3}")
        } else {
            format!("{t:.1}")
        }
    };
    let (lo, med, hi) = (ns[0], ns[ns.len() / 2], ns[ns.len() - 1]);
    rep.push(
        &key,
        tf(med),
        "TFLOPs",
        Some(err / bound),
        1.0,
        format!(
            " B bf16 stored {}, A {}; min/med/max {}/{}/{} TFLOP/s over {} rounds; \
             ran {}; |err| {err:.2e} (bound {bound:.2e})",
            if b_nk { "N×K" } else { "K×N" },
            if a_f32 { "f32" } else { "f16" },
            f(hi),
            f(med),
            f(lo),
            ns.len(),
            labels.join(" + ")
        ),
    );
    Ok(())
}
