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
/// kernel (`shaders/linear_loops.glsl`: four or one 16-byte chunks per
/// lane and step and the butterfly finish of the lanes' sums, which needs
/// subgroups of exactly 32 lanes): 16-bit weights, 1 or 4 rows. Pure.
pub(in crate::ops::matmul) fn uses_sg32(dtype: DType, rows: u32, caps: &MatmulCaps) -> bool {
    caps.subgroup_size == 32 && matches!(dtype, DType::F16 | DType::Bf16) && matches!(rows, 1 | 4)
}

/// Whether a layer takes its `_sg32` kernel: [`uses_sg32`], and at 1 row
/// only without the RMSNorm prologue and without narrowing (`ksub` 1).
/// H200, Qwen3-4B decode (one row; docs/runs/2026-11-26c-h200-c8): the
/// normed 1-row kernel took 2222 µs per step against 1877 for the
/// subgroupAdd one, the narrowed o and down projections 1127 against 1091;
/// the unnarrowed 1-row gate|up of the FFN stack gained (c6). Pure.
pub(super) fn kernel_applies(
    dtype: DType,
    rows: u32,
    norm: bool,
    ksub: u32,
    caps: &MatmulCaps,
) -> bool {
    uses_sg32(dtype, rows, caps) && (rows == 4 || (!norm && ksub == 1))
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
/// with `norm`, the 4-row RMSNorm-prologue variant), where
/// [`kernel_applies`] allows one.
pub(super) fn kernel_name(dtype: DType, rows: u32, norm: bool) -> Option<&'static str> {
    let four = rows >= 4;
    Some(match (dtype, norm, four) {
        (_, true, false) => return None,
        (DType::F16, false, false) => "linear_f16_m1_sg32",
        (DType::F16, false, true) => "linear_f16_sg32",
        (DType::F16, true, true) => "linear_f16_norm_sg32",
        (_, false, false) => "linear_bf16_m1_sg32",
        (_, false, true) => "linear_bf16_sg32",
        (_, true, true) => "linear_bf16_norm_sg32",
    })
}
