//! The skinny linear layer's subgroup-32 kernels (`_sg32`,
//! `shaders/linear_loops.glsl`): which layers take them and their names.

use super::super::super::dtype::DType;
use super::super::MatmulCaps;
use super::NARROW_MAX_ROWS;

/// The most rows per pass that narrow with the subgroup-32 kernels of 16-bit weights
/// ([`uses_sg32`]): H200, bf16, 4 rows of the Qwen3-4B FFN's down
/// projection (9728 → 2560), 22.5 µs with 4 subgroups per unit against
/// 32.2 µs split over K (docs/runs/2026-11-26c-h200-c5).
pub(super) const SG32_NARROW_MAX_ROWS: u32 = 4;

/// Whether `dtype` weights at `rows` rows per pass can take an `_sg32`
/// kernel (`shaders/linear_loops.glsl`: four (two in the `_c2` builds) or
/// one 16-byte chunks per lane and step and the butterfly finish of the lanes' sums, which needs
/// subgroups of exactly 32 lanes): 16-bit weights, 1 or 4 rows. Pure.
pub(in crate::ops::matmul) fn uses_sg32(dtype: DType, rows: u32, caps: &MatmulCaps) -> bool {
    caps.subgroup_size == 32 && matches!(dtype, DType::F16 | DType::Bf16) && matches!(rows, 1 | 4)
}

/// Whether a layer takes its `_sg32` kernel: [`uses_sg32`]; at 1 row with
/// the RMSNorm prologue only unnarrowed (`ksub` 1) and where `one_wave`
/// ([`normed_one_wave`] chose the launch). H200, one row, bf16,
/// `linear_probe --copies 4` (docs/runs/2026-11-27t-h200-t1, t4): the
/// normed subgroup-32 kernel (100 registers: two workgroups per compute
/// unit) took Qwen3-4B's q|k|v (192 workgroups) in 12.6 µs against 13.6
/// narrowed on the subgroupAdd kernel (48 registers), but its gate|up (608
/// workgroups) in 32.3 against 27.3 and its LM head in 196.2 against 180.0.
/// Pure.
pub(super) fn kernel_applies(
    dtype: DType,
    rows: u32,
    norm: bool,
    one_wave: bool,
    caps: &MatmulCaps,
) -> bool {
    uses_sg32(dtype, rows, caps) && (rows == 4 || !norm || one_wave)
}

/// Whether a normed 1-row layer of `groups` unnarrowed workgroups runs
/// them as they are on the normed subgroup-32 kernel, in place of
/// narrower workgroups on the subgroupAdd one: from one to two
/// workgroups per compute unit (one wave at that kernel's registers).
/// Fewer narrow as other layers do; more stay on the subgroupAdd kernel
/// (see [`kernel_applies`]). Never where the adapter does not say its
/// compute units. Pure.
pub(super) fn normed_one_wave(dtype: DType, rows: u32, groups: u64, caps: &MatmulCaps) -> bool {
    let units = u64::from(caps.compute_units);
    uses_sg32(dtype, rows, caps) && rows == 1 && units > 0 && (units..=2 * units).contains(&groups)
}

/// The most rows per pass that narrow for `dtype` on `caps`.
pub(super) fn narrow_max_rows(dtype: DType, caps: &MatmulCaps) -> u32 {
    if uses_sg32(dtype, SG32_NARROW_MAX_ROWS, caps) {
        SG32_NARROW_MAX_ROWS
    } else {
        NARROW_MAX_ROWS
    }
}

/// The `_sg32` kernel for `dtype` weights at `rows` rows per pass (1 or 4;
/// with `norm`, the RMSNorm-prologue variant), where [`kernel_applies`]
/// allows one. At 1 row without the norm, narrower workgroups (`ksub`
/// over 1) take the build of two 16-byte chunks per lane and step (`_c2`):
/// H200, bf16, `linear_probe --copies 4` (docs/runs/2026-11-27t-h200-t4),
/// Qwen3-4B's o projection 10.0 µs against 10.2 with four chunks and 10.3
/// on the subgroupAdd kernel, its down projection 16.9 against 17.3 and
/// 17.4 (two units per workgroup, four subgroups sharing each).
pub(super) fn kernel_name(dtype: DType, rows: u32, norm: bool, ksub: u32) -> &'static str {
    let four = rows >= 4;
    let c2 = ksub > 1;
    match (dtype, norm, four) {
        (DType::F16, false, false) if c2 => "linear_f16_m1_sg32_c2",
        (DType::F16, false, false) => "linear_f16_m1_sg32",
        (DType::F16, true, false) => "linear_f16_m1_norm_sg32",
        (DType::F16, false, true) => "linear_f16_sg32",
        (DType::F16, true, true) => "linear_f16_norm_sg32",
        (_, false, false) if c2 => "linear_bf16_m1_sg32_c2",
        (_, false, false) => "linear_bf16_m1_sg32",
        (_, true, false) => "linear_bf16_m1_norm_sg32",
        (_, false, true) => "linear_bf16_sg32",
        (_, true, true) => "linear_bf16_norm_sg32",
    }
}
