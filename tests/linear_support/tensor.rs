//! The reference of the tensor-core linear tests (`ops_linear_tensor`,
//! `ops_linear_stream`): the stored weights' values and an f64 check
//! with the error bound of kernels that round x to f16.
//!
//! Error bound, per output: the kernels round each x to f16 (relative
//! 2⁻¹¹, 2⁻¹⁰ allowed for either rounding mode), widen each stored weight
//! to f16 exactly (the weights here lie inside f16's normal range) and sum
//! K products in f32: δ = (2⁻¹⁰ + 2·K·2⁻²⁴)·Σ|x||w|. The residual add
//! rounds once more (2⁻²⁴·|y|); SiLU·mul as in ops_linear:
//! 1.1·δ_g·(|v| + δ_v) + |silu(g)|·δ_v + 8·2⁻²⁴·|y|.

use super::{Dt, Epi};
use vkcompute::ops;

/// The stored weights' values (f16 or bf16 rounding of `w`).
pub fn stored(dt: Dt, w: &[f32]) -> Vec<f32> {
    match dt {
        Dt::F16 => w.iter().map(|&v| ops::F16::from_f32(v).to_f32()).collect(),
        Dt::Bf16 => w.iter().map(|&v| ops::Bf16::from_f32(v).to_f32()).collect(),
        Dt::F32 => w.to_vec(),
    }
}

fn dot(x: &[f32], w: &[f32]) -> (f64, f64) {
    x.iter().zip(w).fold((0.0, 0.0), |(s, a), (&p, &q)| {
        let t = f64::from(p) * f64::from(q);
        (s + t, a + t.abs())
    })
}

/// Checks `got` ([m, outs]) against the reference; panics with the worst.
#[allow(clippy::too_many_arguments)]
pub fn check(
    what: &str,
    x: &[f32],
    w: &[f32],
    r: &[f32],
    (m, k, n): (usize, usize, usize),
    epi: Epi,
    got: &[f32],
) {
    let u = f64::powi(2.0, -24);
    let delta = |abs: f64| (f64::powi(2.0, -10) + 2.0 * k as f64 * u) * abs;
    let outs = if epi == Epi::SiluMul { n / 2 } else { n };
    assert_eq!(got.len(), m * outs, "{what}");
    let mut worst = (0.0f64, 0usize, 0.0f64);
    for i in 0..m {
        let xr = &x[i * k..(i + 1) * k];
        let row = |j: usize| &w[j * k..(j + 1) * k];
        for j in 0..outs {
            let (want, bound) = match epi {
                Epi::None => {
                    let (s, a) = dot(xr, row(j));
                    (s, delta(a))
                }
                Epi::Residual | Epi::ResidualInPlace => {
                    let (s, a) = dot(xr, row(j));
                    let y = s + f64::from(r[i * outs + j]);
                    (y, delta(a) + u * y.abs())
                }
                Epi::SiluMul => {
                    let (g, ga) = dot(xr, row(j));
                    let (v, va) = dot(xr, row(outs + j));
                    let (dg, dv) = (delta(ga), delta(va));
                    let s = g / (1.0 + (-g).exp());
                    let y = s * v;
                    (
                        y,
                        1.1 * dg * (v.abs() + dv) + s.abs() * dv + 8.0 * u * y.abs(),
                    )
                }
            };
            let idx = i * outs + j;
            let ratio = (f64::from(got[idx]) - want).abs() / (bound + 1e-30);
            if ratio > worst.0 || ratio.is_nan() {
                worst = (ratio, idx, want);
            }
        }
    }
    let (ratio, idx, want) = worst;
    assert!(
        ratio <= 1.0,
        "{what}: y[{}][{}] = {} but f64 says {want} (error {ratio:.3}× the bound)",
        idx / outs,
        idx % outs,
        got[idx]
    );
}
