//! Matrix transpose through shared memory: 32 × 32 tiles padded to 33
//! columns so the transposed read hits distinct banks
//! (`shaders/transpose.comp`).

use crate::batch::Batch;
use crate::error::Result;

use super::{check_len, check_matrix, device_of, words, Operand};

/// Records `out = xᵀ`: `x` is `rows` × `cols` row-major, `out` becomes
/// `cols` × `rows` row-major. `out` must not overlap `x`.
pub fn transpose(
    batch: &mut Batch,
    x: &impl Operand<f32>,
    out: &impl Operand<f32>,
    rows: u32,
    cols: u32,
) -> Result<()> {
    const OP: &str = "ops::transpose";
    let total = check_matrix(OP, "rows x cols", rows, cols)?;
    check_len(OP, "x", x.elems(), total)?;
    check_len(OP, "out", out.elems(), total)?;
    let gpu = device_of(&x.view());
    let k = crate::builtins::get(&gpu.inner, "transpose", &[])?;
    let pc = words(&[rows, cols]);
    batch.run_configured(
        &k,
        &[x, out],
        [cols.div_ceil(32), rows.div_ceil(32), 1],
        Some(&pc),
    )?;
    Ok(())
}
