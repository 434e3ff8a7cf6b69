//! Row normalisations: RMSNorm (`shaders/nn_rmsnorm.comp`, a group of
//! invocations per row, several narrow rows per workgroup) and LayerNorm
//! (`shaders/nn_layernorm.comp`, one workgroup per row).

use crate::batch::Batch;
use crate::error::Result;

use super::{
    check_elems, check_eps, check_nonzero, device_for, kernel_name, launch, product, rows_grid,
    NnElement, NnOperand,
};

/// Records RMSNorm of each row of `x` (`rows` × `cols`, row-major) into
/// `out` (same shape; may be `x` itself):
/// `out = x / sqrt(mean(x²) + eps) * weight`, `weight` of `cols` elements.
///
/// Per-head norms (Qwen3's q and k norms over `[tokens, heads, head_dim]`)
/// are the same call with `rows = tokens × heads` and `cols = head_dim`.
/// The normalised value is not rounded to `T` before the weight multiplies
/// it (one rounding, at the end).
pub fn rms_norm<T: NnElement>(
    batch: &mut Batch,
    x: &impl NnOperand<T>,
    weight: &impl NnOperand<T>,
    out: &impl NnOperand<T>,
    rows: u32,
    cols: u32,
    eps: f32,
) -> Result<()> {
    const OP: &str = "ops::nn::rms_norm";
    check_nonzero(OP, "rows", rows)?;
    check_nonzero(OP, "cols", cols)?;
    let n = product(OP, "x", &[rows, cols])?;
    check_elems(OP, "x", x.elems(), n)?;
    check_elems(OP, "weight", weight.elems(), u64::from(cols))?;
    check_elems(OP, "out", out.elems(), n)?;
    check_eps(OP, eps)?;
    let gpu = device_for::<T>(OP, x)?;
    let tpr = rms_threads_per_row(cols);
    let grid = rows_grid(OP, &gpu, rows.div_ceil(WORKGROUP / tpr))?;
    let name = kernel_name::<T>(["nn_rmsnorm", "nn_rmsnorm_f16", "nn_rmsnorm_bf16"]);
    launch(
        batch,
        &gpu,
        name,
        &[x, weight, out],
        grid,
        &[rows, cols, eps.to_bits(), tpr],
    )
}

/// Invocations of a workgroup of the row kernels.
const WORKGROUP: u32 = 256;

/// Invocations [`rms_norm`] gives one row of `cols` elements: a power of
/// two near a quarter of the row, at most a workgroup, so that a per-head
/// row of 128 takes 32 invocations (8 rows per workgroup) and a hidden row
/// of thousands a whole workgroup. Pure.
fn rms_threads_per_row(cols: u32) -> u32 {
    cols.div_ceil(4).clamp(1, WORKGROUP).next_power_of_two()
}

/// Records LayerNorm of each row of `x` (`rows` × `cols`, row-major) into
/// `out` (same shape; may be `x` itself):
/// `out = (x - mean) / sqrt(var + eps) * weight + bias`, the (biased)
/// variance taken about the mean in a second pass; `weight` and `bias` of
/// `cols` elements.
#[allow(clippy::too_many_arguments)]
pub fn layer_norm<T: NnElement>(
    batch: &mut Batch,
    x: &impl NnOperand<T>,
    weight: &impl NnOperand<T>,
    bias: &impl NnOperand<T>,
    out: &impl NnOperand<T>,
    rows: u32,
    cols: u32,
    eps: f32,
) -> Result<()> {
    const OP: &str = "ops::nn::layer_norm";
    check_nonzero(OP, "rows", rows)?;
    check_nonzero(OP, "cols", cols)?;
    let n = product(OP, "x", &[rows, cols])?;
    check_elems(OP, "x", x.elems(), n)?;
    check_elems(OP, "weight", weight.elems(), u64::from(cols))?;
    check_elems(OP, "bias", bias.elems(), u64::from(cols))?;
    check_elems(OP, "out", out.elems(), n)?;
    check_eps(OP, eps)?;
    let gpu = device_for::<T>(OP, x)?;
    let grid = rows_grid(OP, &gpu, rows)?;
    let name = kernel_name::<T>(["nn_layernorm", "nn_layernorm_f16", "nn_layernorm_bf16"]);
    launch(
        batch,
        &gpu,
        name,
        &[x, weight, bias, out],
        grid,
        &[rows, cols, eps.to_bits()],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_rows_share_a_workgroup() {
        // A head of 128: 32 invocations, 8 heads per workgroup.
        assert_eq!(rms_threads_per_row(128), 32);
        assert_eq!(rms_threads_per_row(72), 32);
        assert_eq!(rms_threads_per_row(1), 1);
        assert_eq!(rms_threads_per_row(7), 2);
        // Hidden rows: a whole workgroup.
        assert_eq!(rms_threads_per_row(2560), WORKGROUP);
        assert_eq!(rms_threads_per_row(u32::MAX), WORKGROUP);
    }
}
