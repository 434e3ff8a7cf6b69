//! Argmax over rows (`shaders/nn_argmax.comp`): greedy decoding's token
//! choice, on the GPU.

use crate::batch::Batch;
use crate::error::Result;

use super::{
    check_elems, check_nonzero, device_for, kernel_name, launch, product, rows_grid, NnElement,
    NnOperand,
};

/// Records the index of the largest element of each row of `x` (`rows` ×
/// `cols`, row-major) into `out` (`rows` `u32`s). Ties give the lowest
/// index. NaN counts as larger than any number (the first NaN's index wins,
/// as in PyTorch); a row of only `-inf` gives 0.
pub fn argmax<T: NnElement>(
    batch: &mut Batch,
    x: &impl NnOperand<T>,
    out: &impl NnOperand<u32>,
    rows: u32,
    cols: u32,
) -> Result<()> {
    const OP: &str = "ops::nn::argmax";
    check_nonzero(OP, "rows", rows)?;
    check_nonzero(OP, "cols", cols)?;
    let n = product(OP, "x", &[rows, cols])?;
    check_elems(OP, "x", x.elems(), n)?;
    check_elems(OP, "out", out.elems(), u64::from(rows))?;
    let gpu = device_for::<T>(OP, x)?;
    let grid = rows_grid(OP, &gpu, rows)?;
    let name = kernel_name::<T>(["nn_argmax", "nn_argmax_f16", "nn_argmax_bf16"]);
    launch(batch, &gpu, name, &[x, out], grid, &[rows, cols])
}
