//! Rotary position embedding, rotate-half form (`shaders/nn_rope.comp`),
//! with its inverse frequencies computed on the host ([`rope_inv_freq`]:
//! `rope_theta`, and Llama 3's `rope_scaling`).
//!
//! Positions come from a `u32` buffer, one per token, so a recorded graph
//! replays with new positions by rewriting that buffer.

use crate::batch::Batch;
use crate::error::{Error, OpsError, Result};

use super::{
    check_elems, check_nonzero, device_for, items_grid, kernel_name, launch, product, shape_err,
    NnElement, NnOperand,
};

/// Largest head dimension [`rotary`] and [`rope_inv_freq`] take.
pub const MAX_ROTARY_HEAD_DIM: u32 = 256;

/// A model's `rope_scaling`: how the inverse frequencies are stretched for
/// contexts past the length the model was trained at.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum RopeScaling {
    /// Llama 3.1's scaling (`"rope_type": "llama3"`): wavelengths longer
    /// than `original_max_position_embeddings / low_freq_factor` are
    /// divided by `factor`, those shorter than `.. / high_freq_factor` kept,
    /// and those between blended smoothly.
    Llama3 {
        /// `factor`: how much the long wavelengths are stretched (> 0).
        factor: f64,
        /// `low_freq_factor` (> 0).
        low_freq_factor: f64,
        /// `high_freq_factor` (> `low_freq_factor`).
        high_freq_factor: f64,
        /// `original_max_position_embeddings` (> 0).
        original_max_position_embeddings: u32,
    },
}

const CONFIG_OP: &str = "ops::nn::rope_inv_freq";

fn config_err(field: &'static str, detail: String) -> Error {
    Error::Ops(OpsError::Config {
        op: CONFIG_OP,
        field,
        detail,
    })
}

impl RopeScaling {
    /// The scaling a config's `rope_scaling` object describes: `rope_type`
    /// is its `"rope_type"` (or older `"type"`) string, and `field` looks a
    /// numeric field up by name. Only `"llama3"` is implemented; another
    /// type, a missing field or a value out of range is an
    /// [`OpsError::Config`] naming the field.
    pub fn from_config(rope_type: &str, field: impl Fn(&str) -> Option<f64>) -> Result<Self> {
        if rope_type != "llama3" {
            return Err(config_err(
                "rope_scaling.rope_type",
                format!("{rope_type:?} is not supported (only \"llama3\")"),
            ));
        }
        let get = |name: &'static str, full: &'static str| {
            field(name).ok_or_else(|| config_err(full, "is missing".into()))
        };
        let factor = get("factor", "rope_scaling.factor")?;
        let low = get("low_freq_factor", "rope_scaling.low_freq_factor")?;
        let high = get("high_freq_factor", "rope_scaling.high_freq_factor")?;
        let orig = get(
            "original_max_position_embeddings",
            "rope_scaling.original_max_position_embeddings",
        )?;
        if !(orig >= 1.0 && orig <= f64::from(u32::MAX) && orig.fract() == 0.0) {
            return Err(config_err(
                "rope_scaling.original_max_position_embeddings",
                format!("{orig} is not a whole number in 1..={}", u32::MAX),
            ));
        }
        let s = RopeScaling::Llama3 {
            factor,
            low_freq_factor: low,
            high_freq_factor: high,
            original_max_position_embeddings: orig as u32,
        };
        s.check()?;
        Ok(s)
    }

    fn check(&self) -> Result<()> {
        let RopeScaling::Llama3 {
            factor,
            low_freq_factor: low,
            high_freq_factor: high,
            original_max_position_embeddings: orig,
        } = *self;
        if !(factor.is_finite() && factor > 0.0) {
            return Err(config_err(
                "rope_scaling.factor",
                format!("{factor} is not a finite number > 0"),
            ));
        }
        if !(low.is_finite() && low > 0.0) {
            return Err(config_err(
                "rope_scaling.low_freq_factor",
                format!("{low} is not a finite number > 0"),
            ));
        }
        if !(high.is_finite() && high > low) {
            return Err(config_err(
                "rope_scaling.high_freq_factor",
                format!("{high} is not a finite number > low_freq_factor ({low})"),
            ));
        }
        if orig == 0 {
            return Err(config_err(
                "rope_scaling.original_max_position_embeddings",
                "is 0; it must be at least 1".into(),
            ));
        }
        Ok(())
    }

    /// The scaled inverse frequency for an unscaled one.
    fn apply(&self, inv_freq: f64) -> f64 {
        let RopeScaling::Llama3 {
            factor,
            low_freq_factor: low,
            high_freq_factor: high,
            original_max_position_embeddings: orig,
        } = *self;
        let orig = f64::from(orig);
        let wavelen = 2.0 * std::f64::consts::PI / inv_freq;
        if wavelen < orig / high {
            inv_freq
        } else if wavelen > orig / low {
            inv_freq / factor
        } else {
            let smooth = (orig / wavelen - low) / (high - low);
            (1.0 - smooth) * inv_freq / factor + smooth * inv_freq
        }
    }
}

/// The `head_dim / 2` inverse frequencies of rotary embedding:
/// `theta^(-2i / head_dim)` (`theta` is the config's `rope_theta`), then
/// `scaling` applied; computed in f64, rounded to f32 once. Upload them
/// for [`rotary`]. `head_dim` must be even and at most
/// [`MAX_ROTARY_HEAD_DIM`]; `theta` finite and > 1.
pub fn rope_inv_freq(head_dim: u32, theta: f64, scaling: Option<&RopeScaling>) -> Result<Vec<f32>> {
    check_head_dim(CONFIG_OP, head_dim)?;
    if !(theta.is_finite() && theta > 1.0) {
        return Err(config_err(
            "rope_theta",
            format!("{theta} is not a finite number > 1"),
        ));
    }
    if let Some(s) = scaling {
        s.check()?;
    }
    let d = f64::from(head_dim);
    Ok((0..head_dim / 2)
        .map(|i| {
            let f = theta.powf(-2.0 * f64::from(i) / d);
            scaling.map_or(f, |s| s.apply(f)) as f32
        })
        .collect())
}

/// The checks of [`rotary`] on `[tokens, heads, head_dim]` and the
/// element counts of x, out, inv_freq and positions (shared with the op
/// batch's recording); the elements of x.
pub(in crate::ops) fn check_args(dims: [u32; 3], elems: [u64; 4]) -> Result<u64> {
    const OP: &str = "ops::nn::rotary";
    let [tokens, heads, head_dim] = dims;
    check_nonzero(OP, "tokens", tokens)?;
    check_nonzero(OP, "heads", heads)?;
    check_head_dim(OP, head_dim)?;
    let n = product(OP, "x", &[tokens, heads, head_dim])?;
    check_elems(OP, "x", elems[0], n)?;
    check_elems(OP, "out", elems[1], n)?;
    check_elems(OP, "inv_freq", elems[2], u64::from(head_dim / 2))?;
    check_elems(OP, "positions", elems[3], u64::from(tokens))?;
    Ok(n)
}

pub(super) fn check_head_dim(op: &'static str, head_dim: u32) -> Result<()> {
    if head_dim == 0 || head_dim % 2 != 0 || head_dim > MAX_ROTARY_HEAD_DIM {
        return Err(shape_err(
            op,
            "head_dim",
            format!("{head_dim} is not an even number in 2..={MAX_ROTARY_HEAD_DIM}"),
        ));
    }
    Ok(())
}

/// Records rotary embedding of `x` (`[tokens, heads, head_dim]`) into
/// `out` (same shape; may be `x` itself), rotate-half form: for
/// `i < head_dim / 2` and angle `a = positions[token] * inv_freq[i]`
/// (an f32 product, as the reference models compute it),
/// `out[i] = x[i] cos a - x[i + h] sin a` and
/// `out[i + h] = x[i + h] cos a + x[i] sin a` with `h = head_dim / 2`.
/// `inv_freq` holds `head_dim / 2` values ([`rope_inv_freq`]); `positions`
/// one `u32` per token. Call once for the queries and once for the keys.
/// The kernel reduces each angle by 2π before cos and sin (exactly but for
/// one rounding, for angles below 2^20), so drivers whose fast sin and cos
/// are accurate only near [-π, π] stay within about 2^-20 of the result.
#[allow(clippy::too_many_arguments)]
pub fn rotary<T: NnElement>(
    batch: &mut Batch,
    x: &impl NnOperand<T>,
    out: &impl NnOperand<T>,
    inv_freq: &impl NnOperand<f32>,
    positions: &impl NnOperand<u32>,
    tokens: u32,
    heads: u32,
    head_dim: u32,
) -> Result<()> {
    const OP: &str = "ops::nn::rotary";
    let n = check_args(
        [tokens, heads, head_dim],
        [x.elems(), out.elems(), inv_freq.elems(), positions.elems()],
    )?;
    let gpu = device_for::<T>(OP, x)?;
    let name = kernel_name::<T>(["nn_rope", "nn_rope_f16", "nn_rope_bf16"]);
    launch(
        batch,
        &gpu,
        name,
        &[x, out, inv_freq, positions],
        items_grid(&gpu, n / 2),
        &[tokens, heads, head_dim / 2],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn llama31() -> RopeScaling {
        RopeScaling::Llama3 {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 8192,
        }
    }

    #[test]
    fn unscaled_frequencies_are_theta_powers() {
        let f = rope_inv_freq(8, 10000.0, None).unwrap();
        let want = [1.0, 0.1, 0.01, 0.001];
        for (g, w) in f.iter().zip(want) {
            assert!((f64::from(*g) - w).abs() <= 1e-7 * w, "{f:?}");
        }
    }

    #[test]
    fn llama3_scaling_matches_its_three_bands() {
        // Llama 3.1 8B: head_dim 128, rope_theta 500000.
        let base = rope_inv_freq(128, 500_000.0, None).unwrap();
        let scaled = rope_inv_freq(128, 500_000.0, Some(&llama31())).unwrap();
        let (mut kept, mut divided, mut blended) = (0, 0, 0);
        for (&b, &s) in base.iter().zip(&scaled) {
            let wavelen = 2.0 * std::f64::consts::PI / f64::from(b);
            let (b, s) = (f64::from(b), f64::from(s));
            if wavelen < 8192.0 / 4.0 {
                assert!((s - b).abs() <= 1e-7 * b);
                kept += 1;
            } else if wavelen > 8192.0 {
                assert!((s - b / 8.0).abs() <= 1e-6 * b);
                divided += 1;
            } else {
                // Strictly between b / 8 and b, and the formula's value.
                assert!(s < b && s > b / 8.0, "{b} {s}");
                let smooth = (8192.0 / wavelen - 1.0) / 3.0;
                let want = (1.0 - smooth) * b / 8.0 + smooth * b;
                assert!((s - want).abs() <= 1e-6 * want);
                blended += 1;
            }
        }
        // All three bands occur at these settings.
        assert_eq!(kept + divided + blended, 64);
        assert!(
            kept > 0 && divided > 0 && blended > 0,
            "{kept} {divided} {blended}"
        );
        // The first (highest) frequency is kept, the last divided by 8.
        assert_eq!(scaled[0], base[0]);
        assert!((f64::from(scaled[63]) - f64::from(base[63]) / 8.0).abs() < 1e-12);
    }

    #[test]
    fn config_fields_are_read_or_refused_by_name() {
        let fields = |name: &str| match name {
            "factor" => Some(8.0),
            "low_freq_factor" => Some(1.0),
            "high_freq_factor" => Some(4.0),
            "original_max_position_embeddings" => Some(8192.0),
            _ => None,
        };
        assert_eq!(
            RopeScaling::from_config("llama3", fields).unwrap(),
            llama31()
        );
        let e = RopeScaling::from_config("yarn", fields).unwrap_err();
        assert!(
            e.to_string().contains("rope_scaling.rope_type") && e.to_string().contains("yarn"),
            "{e}"
        );
        let e =
            RopeScaling::from_config("llama3", |n| if n == "factor" { None } else { fields(n) })
                .unwrap_err();
        assert!(
            e.to_string().contains("rope_scaling.factor: is missing"),
            "{e}"
        );
        let e = RopeScaling::from_config("llama3", |n| {
            if n == "high_freq_factor" {
                Some(0.5)
            } else {
                fields(n)
            }
        })
        .unwrap_err();
        assert!(
            e.to_string().contains("rope_scaling.high_freq_factor"),
            "{e}"
        );
        let e = RopeScaling::from_config("llama3", |n| {
            if n == "original_max_position_embeddings" {
                Some(81.5)
            } else {
                fields(n)
            }
        })
        .unwrap_err();
        assert!(
            e.to_string().contains("original_max_position_embeddings"),
            "{e}"
        );
    }

    /// `shaders/rope_angle.glsl`'s split of 2 pi (ROPE_C1, ROPE_C2, ROPE_C3) and 1 / 2 pi.
    const TWO_PI_PARTS: [f32; 3] = [6.25, 0.033203125, -1.781782e-5];
    const INV_TWO_PI: f32 = 0.159_154_94;

    /// The kernel's angle reduction, step by step in f32, with the f64
    /// values of its two subtractions (exact when they equal the f32 ones).
    fn reduce(a: f32) -> (f32, f32, [f64; 2], [f32; 2]) {
        let [c1, c2, c3] = TWO_PI_PARTS;
        let k = (a * INV_TWO_PI).round();
        let r1 = a - k * c1;
        let r2 = r1 - k * c2;
        let r = r2 - k * c3;
        let (a64, k64) = (f64::from(a), f64::from(k));
        let exact = [
            a64 - k64 * f64::from(c1),
            f64::from(r1) - k64 * f64::from(c2),
        ];
        (k, r, exact, [r1, r2])
    }

    #[test]
    fn the_kernels_angle_reduction_is_exact_but_for_its_last_step() {
        let shader = include_str!("../../../shaders/rope_angle.glsl");
        for (name, c) in ["ROPE_C1", "ROPE_C2", "ROPE_C3"].iter().zip(TWO_PI_PARTS) {
            assert!(
                shader.contains(&format!("const float {name} = {c:?};")),
                "{name} = {c:?} is not the kernel's"
            );
        }
        let parts: f64 = TWO_PI_PARTS.iter().map(|&c| f64::from(c)).sum();
        assert!((parts - std::f64::consts::TAU).abs() < 2f64.powi(-40));
        // a - k 2pi in f64: a, k C1 and k C2 are exact there, and the
        // remaining product is off by far less than 2^-30.
        let tail = std::f64::consts::TAU - 6.25 - 0.033203125;
        let check = |a: f32| {
            let (k, r, exact, got) = reduce(a);
            assert_eq!(exact, got.map(f64::from), "a = {a}: a subtraction rounds");
            let want = ((f64::from(a) - f64::from(k) * 6.25) - f64::from(k) * 0.033203125)
                - f64::from(k) * tail;
            let err = (f64::from(r) - want).abs();
            assert!(err <= 2f64.powi(-21), "a = {a}: error {err:e}");
            let over = f64::from(r.abs()) - std::f64::consts::PI;
            assert!(over <= 2f64.powi(-22) * f64::from(a), "a = {a}: r = {r}");
        };
        // Every 61st f32 from 0 to 2^20.6, and the products of positions
        // with the largest inverse frequencies (where the angles are largest).
        let top = 2f32.powf(20.6).to_bits();
        (0..top).step_by(61).for_each(|b| check(f32::from_bits(b)));
        for f in rope_inv_freq(128, 500_000.0, None).unwrap().iter().take(4) {
            (0..1u32 << 20).step_by(7).for_each(|p| check(p as f32 * f));
        }
    }

    #[test]
    fn bad_head_dims_and_theta_are_refused() {
        for d in [0, 7, 258] {
            let e = rope_inv_freq(d, 1e4, None).unwrap_err();
            assert!(
                e.to_string().contains("head_dim") && e.to_string().contains("256"),
                "{e}"
            );
        }
        let e = rope_inv_freq(64, 0.5, None).unwrap_err();
        assert!(e.to_string().contains("rope_theta"), "{e}");
        assert_eq!(rope_inv_freq(256, 1e6, None).unwrap().len(), 128);
    }
}
