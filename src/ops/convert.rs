//! Element-type conversion (`shaders/cast.comp`): f32, [`F16`] and
//! [`Bf16`] tensors to any of the three, element-wise, so that a model can
//! keep activations in f32 beside 16-bit weights or caches (a gathered
//! bf16 embedding row widened to f32, f32 keys narrowed for a bf16 cache).
//!
//! ```
//! # fn main() -> vkcompute::Result<()> {
//! use vkcompute::ops::{self, Bf16};
//! let gpu = vkcompute::Device::new()?;
//! // 1 + 2^-8 lies halfway between two bf16 values: it rounds to even.
//! let x = gpu.upload(&[1.0f32, 1.00390625, -3.0])?;
//! let y = gpu.alloc::<Bf16>(3)?;
//! let mut batch = gpu.batch()?;
//! ops::convert(&mut batch, &x, &y)?;
//! batch.submit()?;
//! assert_eq!(y.download()?, [1.0f32, 1.0, -3.0].map(Bf16::from_f32));
//! # Ok(())
//! # }
//! ```

use crate::batch::Batch;
use crate::error::{Error, Result};

use super::grid::elementwise_groups;
use super::nn::{NnDtype, NnElement, NnOperand};
use super::{aligned16, device_of, words};
#[cfg(doc)]
use super::{Bf16, F16};

const OP: &str = "ops::convert";

/// The built-in kernel converting `src` to `dst` (`shaders/cast.comp`).
fn kernel_name(src: NnDtype, dst: NnDtype) -> &'static str {
    use NnDtype::{Bf16 as B, F16 as H, F32 as F};
    match (src, dst) {
        (F, F) => "cast",
        (F, H) => "cast_f32_f16",
        (F, B) => "cast_f32_bf16",
        (H, F) => "cast_f16_f32",
        (H, H) => "cast_f16_f16",
        (H, B) => "cast_f16_bf16",
        (B, F) => "cast_bf16_f32",
        (B, H) => "cast_bf16_f16",
        (B, B) => "cast_bf16_bf16",
    }
}

/// Records `y[i] = x[i]` converted from `S` to `D` (each f32, [`F16`] or
/// [`Bf16`]): widening is exact, narrowing rounds once to nearest even
/// (overflow to infinity, NaN stays NaN), as [`F16::from_f32`] and
/// [`Bf16::from_f32`] do on the host. `x` and `y` hold the same number of
/// elements (at least 1) and must not share bytes. 16-bit types need the
/// adapter's 16-bit storage (`storageBuffer16BitAccess`); no 16-bit
/// arithmetic is used.
pub fn convert<S: NnElement, D: NnElement>(
    batch: &mut Batch,
    x: &impl NnOperand<S>,
    y: &impl NnOperand<D>,
) -> Result<()> {
    let n = x.elems();
    if n == 0 || y.elems() != n {
        return Err(Error::OpShape {
            op: OP,
            detail: format!(
                "x has {n} elements and y {}; they must be equal and at least 1",
                y.elems()
            ),
        });
    }
    let n = super::as_u32(OP, "x", n)?;
    let (xv, yv) = (x.view(), y.view());
    if std::sync::Arc::ptr_eq(xv.inner, yv.inner)
        && xv.offset < yv.offset + yv.size
        && yv.offset < xv.offset + xv.size
    {
        return Err(Error::OpShape {
            op: OP,
            detail: "y overlaps x; the conversion cannot work in place".into(),
        });
    }
    let gpu = device_of(&xv);
    let info = gpu.info();
    if (S::NN != NnDtype::F32 || D::NN != NnDtype::F32) && !info.storage_buffer16 {
        return Err(Error::Unsupported {
            what: "16-bit tensors (storageBuffer16BitAccess)",
            adapter: format!("{} (in {OP})", info.name),
        });
    }
    let k = crate::builtins::get(&gpu.inner, kernel_name(S::NN, D::NN), &[])?;
    let grouped = aligned16(&[xv, yv]) && more_than_a_wave(n, info);
    let (n8, items) = groups_of_eight(n, grouped);
    let groups = elementwise_groups(items, info.max_workgroup_count[0]);
    batch.run_configured(&k, &[x, x, y, y], [groups, 1, 1], Some(&words(&[n, n8])))?;
    Ok(())
}

/// Whether `n` elements, one per invocation, fill more than the invocations
/// the adapter holds at once (compute units × invocations per unit; when
/// the adapter does not say, 65,536): only then does the conversion take
/// 16-byte groups. A smaller one finishes in one wave either way, and on
/// an H200 the groups' path cost the Qwen3-4B decode step 0.2 ms when it
/// converted the step's 2,560-element embedding row (3.21-3.23 against
/// 3.01-3.02 ms, calls s6 and s7, 2026-11-27), though its own GPU time was
/// the same 3.6 µs; why was not found. Pure.
fn more_than_a_wave(n: u32, info: &crate::adapter::AdapterInfo) -> bool {
    let wave = u64::from(info.compute_units) * u64::from(info.max_threads_per_compute_unit);
    let wave = if wave == 0 { 65_536 } else { wave };
    u64::from(n) > wave
}

/// The groups of 8 elements the kernel converts with 16-byte accesses (none
/// where `grouped` is false: a range not 16-byte aligned, or a conversion
/// within one wave), and the work items: one per group,
/// or per element of the tail past them, whichever is more.
fn groups_of_eight(n: u32, grouped: bool) -> (u32, u64) {
    let n8 = if grouped { n / 8 } else { 0 };
    (n8, u64::from(n8).max(u64::from(n - 8 * n8)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_of_eight_cover_every_element() {
        assert_eq!(groups_of_eight(1, true), (0, 1));
        assert_eq!(groups_of_eight(8, true), (1, 1));
        assert_eq!(groups_of_eight(21, true), (2, 5));
        assert_eq!(groups_of_eight(800, true), (100, 100));
        assert_eq!(groups_of_eight(800, false), (0, 800));
        for n in 1..100u32 {
            for aligned in [false, true] {
                let (n8, items) = groups_of_eight(n, aligned);
                let tail = u64::from(n - 8 * n8);
                assert!(tail < 8 || !aligned, "n {n}: tail {tail}");
                assert!(items >= u64::from(n8) && items >= tail, "n {n}");
            }
        }
    }

    #[test]
    fn only_conversions_past_a_wave_take_groups_of_eight() {
        let mut info = crate::adapter::fake(0, "gpu", crate::adapter::AdapterType::Discrete, 1);
        info.compute_units = 132;
        info.max_threads_per_compute_unit = 2048;
        // A decode step's embedding row, and 16 of them: one wave.
        assert!(!more_than_a_wave(2560, &info));
        assert!(!more_than_a_wave(16 * 2560, &info));
        assert!(!more_than_a_wave(132 * 2048, &info));
        // A prefill's activations and a layer's weight.
        assert!(more_than_a_wave(132 * 2048 + 1, &info));
        assert!(more_than_a_wave(2560 * 9728, &info));
        // An adapter that does not say: 65,536.
        info.compute_units = 0;
        assert!(!more_than_a_wave(65_536, &info));
        assert!(more_than_a_wave(65_537, &info));
    }

    #[test]
    fn every_pair_has_its_kernel() {
        use NnDtype::*;
        let all = [F32, F16, Bf16];
        let mut names: Vec<_> = all
            .iter()
            .flat_map(|&s| all.iter().map(move |&d| kernel_name(s, d)))
            .collect();
        assert_eq!(kernel_name(Bf16, F32), "cast_bf16_f32");
        assert_eq!(kernel_name(F32, F32), "cast");
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 9);
        for n in names {
            assert!(crate::builtins::spirv(n).is_some(), "no SPIR-V for {n}");
        }
    }
}
