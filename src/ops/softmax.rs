//! Softmax over the rows of a row-major matrix, numerically stable:
//! `y = exp(x - max(row)) / sum(exp(x - max(row)))`.
//!
//! One workgroup per row (`shaders/softmax.glsl`). Rows of up to
//! [`SOFTMAX_ONE_READ_MAX_COLS`] elements are read once (kept in registers
//! through the max, the sum and the write); longer rows are read twice (an
//! online max-and-sum pass, then the write).
//!
//! NaN anywhere in a row makes the whole output row NaN; `-inf` entries give
//! 0; a row of only `-inf` gives NaN everywhere (as PyTorch does); `+inf`
//! gives NaN (inf - inf).

use crate::batch::Batch;
use crate::error::{Error, Result};

use super::grid::row_grid;
use super::{aligned16, check_len, check_matrix, device_of, reduction_variant, words, Operand};

/// Longest row softmax reads only once (256 invocations × 32 floats).
pub const SOFTMAX_ONE_READ_MAX_COLS: u32 = 8192;

/// Records the softmax of each row of `x` (`rows` × `cols`, row-major)
/// into `out` (same shape; may be `x` itself).
pub fn softmax(
    batch: &mut Batch,
    x: &impl Operand<f32>,
    out: &impl Operand<f32>,
    rows: u32,
    cols: u32,
) -> Result<()> {
    const OP: &str = "ops::softmax";
    let total = check_matrix(OP, "rows x cols", rows, cols)?;
    check_len(OP, "x", x.elems(), total)?;
    check_len(OP, "out", out.elems(), total)?;
    let (xv, ov) = (x.view(), out.view());
    let gpu = device_of(&xv);
    let vec = cols % 4 == 0 && aligned16(&[xv, ov]);
    let grid = row_grid(rows, gpu.info().max_workgroup_count).ok_or_else(|| Error::OpShape {
        op: OP,
        detail: format!("{rows} rows exceed the adapter's workgroup grid"),
    })?;
    let name = reduction_variant(&gpu, "softmax_sg", "softmax_wg");
    let k = crate::builtins::get(&gpu.inner, name, &[])?;
    let pc = words(&[rows, cols, u32::from(vec)]);
    batch.run_configured(&k, &[x, x, out, out], grid, Some(&pc))?;
    Ok(())
}
