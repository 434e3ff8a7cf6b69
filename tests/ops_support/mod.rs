//! Helpers shared by the `ops_*` tests: lengths, CPU references in f64,
//! error bounds.
#![allow(dead_code)]

/// The lengths every op is tested at.
pub const LENGTHS: [usize; 4] = [1, 7, 1000, (1 << 20) + 3];

/// f64 reference of exact GELU: x * Phi(x), Phi through erfc.
pub fn gelu_ref(x: f64) -> f64 {
    0.5 * x * erfc(-x / std::f64::consts::SQRT_2)
}

/// f64 reference of GELU's tanh form.
pub fn gelu_tanh_ref(x: f64) -> f64 {
    let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
    0.5 * x * (1.0 + u.tanh())
}

pub fn sigmoid_ref(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// erfc in f64 to about 1e-15 (W. J. Cody's rational approximations are
/// overkill here: a continued fraction for large |z|, the series for small).
pub fn erfc(z: f64) -> f64 {
    if z < 0.0 {
        return 2.0 - erfc(-z);
    }
    if z < 3.0 {
        // erf series: 2/sqrt(pi) * sum (-1)^n z^(2n+1) / (n! (2n+1)).
        let mut sum = 0.0;
        let mut term = z;
        let mut n = 0.0;
        loop {
            let t = term / (2.0 * n + 1.0);
            sum += t;
            if t.abs() <= 1e-17 * sum.abs() || n > 200.0 {
                break;
            }
            n += 1.0;
            term *= -z * z / n;
        }
        1.0 - 2.0 / std::f64::consts::PI.sqrt() * sum
    } else {
        // Continued fraction (Lentz), converges fast for z >= 3.
        let mut f = 0.0;
        for k in (1..60).rev() {
            f = (k as f64 / 2.0) / (z + f);
        }
        (-z * z).exp() / std::f64::consts::PI.sqrt() / (z + f)
    }
}

/// Fails unless every `got[i]` is within `rel * |want[i]|` of `want[i]`.
pub fn assert_close(what: &str, got: &[f32], want: &[f64], rel: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(g) - w).abs();
        assert!(
            err <= rel * w.abs() || (g.is_nan() && w.is_nan()),
            "{what}[{i}] of {}: got {g}, want {w} (error {err:e}, bound {:e})",
            got.len(),
            rel * w.abs()
        );
    }
}

/// Fails unless every `got[i]` is within `rel * scale[i]` of `want[i]`
/// (for results that may cancel: `scale` is the sum of the magnitudes of
/// the terms).
pub fn assert_close_scaled(what: &str, got: &[f32], want: &[f64], scale: &[f64], rel: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, ((&g, &w), &s)) in got.iter().zip(want).zip(scale).enumerate() {
        let err = (f64::from(g) - w).abs();
        assert!(
            err <= rel * s,
            "{what}[{i}] of {}: got {g}, want {w} (error {err:e}, bound {:e})",
            got.len(),
            rel * s
        );
    }
}

/// Random floats in [-scale, scale).
pub fn random(rng: &mut super::common::Rng, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|_| rng.f32() * scale).collect()
}

#[test]
fn erfc_reference_matches_known_values() {
    assert!((erfc(0.0) - 1.0).abs() < 1e-15);
    assert!((erfc(1.0) - 0.157_299_207_050_285_13).abs() < 1e-14);
    assert!((erfc(3.5) - 7.430_983_723_414_128e-7).abs() < 1e-19);
    assert!((erfc(-1.0) - 1.842_700_792_949_715).abs() < 1e-14);
}
