//! Token sampling on the GPU (`shaders/nn_sample.comp`): temperature,
//! top-k, top-p and a seeded counter-based draw, so a decode step chooses
//! its token without a host round trip.
//!
//! The draw for row `r` is a pure function of `(seed, counters[r], r)`
//! ([`sample_uniform`], the same hash on the host): the same logits,
//! parameters and counter give the same token on every run. Pass a
//! different counter per step (the sequence's position buffer does).

use crate::batch::Batch;
use crate::error::{Error, OpsError, Result};

use super::{
    check_elems, check_nonzero, device_for, kernel_name, launch, product, rows_grid, NnElement,
    NnOperand,
};

/// Largest vocabulary [`sample`] takes: the kernel counts kept tokens in
/// f32, exact up to 2^24.
pub const MAX_VOCAB: u32 = 1 << 24;

/// How [`sample`] picks a token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampleParams {
    /// Logits are divided by it (multiplied by its f32 reciprocal); 0
    /// means greedy ([`argmax`](super::argmax)). Finite, >= 0.
    pub temperature: f32,
    /// Keep only the `top_k` largest logits (ties with the k-th kept); 0
    /// keeps all.
    pub top_k: u32,
    /// Keep the smallest set of the largest logits whose probability
    /// reaches `top_p` of what top-k kept (ties kept); 1 keeps all. In
    /// (0, 1].
    pub top_p: f32,
    /// The seed of the draws.
    pub seed: u64,
}

impl Default for SampleParams {
    /// Plain sampling at temperature 1, seed 0.
    fn default() -> Self {
        SampleParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            seed: 0,
        }
    }
}

impl SampleParams {
    /// `Ok` when every field is in its range, else an
    /// [`OpsError::Param`] naming it.
    pub fn check(&self) -> Result<()> {
        let bad = |param: &'static str, detail: String| {
            Err(Error::Ops(OpsError::Param {
                op: "ops::nn::sample",
                param,
                detail,
            }))
        };
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return bad(
                "temperature",
                format!("{} is not a finite number >= 0", self.temperature),
            );
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad("top_p", format!("{} is outside (0, 1]", self.top_p));
        }
        Ok(())
    }
}

/// One round of PCG's output permutation (the kernel's `pcg`).
fn pcg(v: u32) -> u32 {
    let s = v.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
    let w = ((s >> ((s >> 28) + 4)) ^ s).wrapping_mul(277_803_737);
    (w >> 22) ^ w
}

/// The uniform number in [0, 1) that [`sample`] draws for row `row` with
/// `seed` and counter `counter` (24 random bits): the kernel's hash, on the
/// host, to reproduce or check a draw.
pub fn sample_uniform(seed: u64, counter: u32, row: u32) -> f32 {
    let h = pcg(seed as u32 ^ pcg((seed >> 32) as u32 ^ pcg(counter ^ pcg(row))));
    (h >> 8) as f32 / (1u32 << 24) as f32
}

/// Records the choice of one token per row of `logits` (`rows` × `vocab`,
/// row-major) into `out` (`rows` `u32`s), per `params`; `counters` holds
/// one `u32` per row, read on the GPU (see the module). Temperature 0
/// records [`argmax`](super::argmax) instead.
///
/// NaN logits are never drawn; a row whose kept probability mass is 0 or
/// not finite (only `-inf`, or a `+inf` logit) gives its argmax.
/// Each row is one workgroup that reads its logits about 3 times, plus 32
/// times with top-k and 33 times with top-p (threshold searches).
#[allow(clippy::too_many_arguments)]
pub fn sample<T: NnElement>(
    batch: &mut Batch,
    logits: &impl NnOperand<T>,
    counters: &impl NnOperand<u32>,
    out: &impl NnOperand<u32>,
    rows: u32,
    vocab: u32,
    params: SampleParams,
) -> Result<()> {
    const OP: &str = "ops::nn::sample";
    params.check()?;
    check_nonzero(OP, "rows", rows)?;
    check_nonzero(OP, "vocab", vocab)?;
    let n = product(OP, "logits", &[rows, vocab])?;
    if vocab > MAX_VOCAB {
        return Err(super::shape_err(
            OP,
            "vocab",
            format!("{vocab} exceeds {MAX_VOCAB} (the kernel counts in f32)"),
        ));
    }
    check_elems(OP, "logits", logits.elems(), n)?;
    check_elems(OP, "counters", counters.elems(), u64::from(rows))?;
    check_elems(OP, "out", out.elems(), u64::from(rows))?;
    if params.temperature == 0.0 {
        return super::argmax(batch, logits, out, rows, vocab);
    }
    let gpu = device_for::<T>(OP, logits)?;
    let grid = rows_grid(OP, &gpu, rows)?;
    let name = kernel_name::<T>(["nn_sample", "nn_sample_f16", "nn_sample_bf16"]);
    let inv_temp = 1.0 / params.temperature;
    launch(
        batch,
        &gpu,
        name,
        &[logits, counters, out],
        grid,
        &[
            rows,
            vocab,
            params.top_k,
            params.top_p.to_bits(),
            inv_temp.to_bits(),
            params.seed as u32,
            (params.seed >> 32) as u32,
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_deterministic_and_spread() {
        assert_eq!(sample_uniform(7, 3, 1), sample_uniform(7, 3, 1));
        let mut buckets = [0u32; 16];
        let mut seen = std::collections::HashSet::new();
        for c in 0..16_000u32 {
            let u = sample_uniform(42, c, 0);
            assert!((0.0..1.0).contains(&u), "{u}");
            buckets[(u * 16.0) as usize] += 1;
            seen.insert(u.to_bits());
        }
        // 1,000 expected per bucket; sd about 31.
        assert!(
            buckets.iter().all(|&b| (850..1150).contains(&b)),
            "{buckets:?}"
        );
        assert!(seen.len() > 15_900, "{}", seen.len());
        // Every part of the key changes the draw.
        let u = sample_uniform(1, 2, 3);
        assert_ne!(u, sample_uniform(1 << 32 | 1, 2, 3), "seed high word");
        assert_ne!(u, sample_uniform(2, 2, 3), "seed low word");
        assert_ne!(u, sample_uniform(1, 3, 3), "counter");
        assert_ne!(u, sample_uniform(1, 2, 4), "row");
    }

    #[test]
    fn parameters_out_of_range_are_named() {
        assert!(SampleParams::default().check().is_ok());
        for (p, name) in [
            (
                SampleParams {
                    temperature: -1.0,
                    ..Default::default()
                },
                "temperature",
            ),
            (
                SampleParams {
                    temperature: f32::INFINITY,
                    ..Default::default()
                },
                "temperature",
            ),
            (
                SampleParams {
                    top_p: 0.0,
                    ..Default::default()
                },
                "top_p",
            ),
            (
                SampleParams {
                    top_p: 1.5,
                    ..Default::default()
                },
                "top_p",
            ),
        ] {
            let e = p.check().unwrap_err();
            assert!(
                matches!(&e, Error::Ops(OpsError::Param { param, .. }) if *param == name),
                "{e:?}"
            );
            assert!(e.to_string().contains("ops::nn::sample"), "{e}");
        }
    }
}
