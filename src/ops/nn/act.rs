//! SwiGLU's gate, `silu(gate) * up` (`shaders/nn_silu_mul.comp`), from two
//! buffers or from the two halves of each row of one.

use crate::batch::Batch;
use crate::error::Result;

use super::{
    check_elems, check_nonzero, device_for, items_grid, kernel_name, launch, product, NnElement,
    NnOperand,
};

const NAMES: [&str; 3] = ["nn_silu_mul", "nn_silu_mul_f16", "nn_silu_mul_bf16"];

/// Records `out = silu(gate) * up` element-wise over `rows` × `cols`
/// (row-major, all three that shape; `out` may be either input), with
/// `silu(g) = g / (1 + exp(-g))`.
pub fn silu_mul<T: NnElement>(
    batch: &mut Batch,
    gate: &impl NnOperand<T>,
    up: &impl NnOperand<T>,
    out: &impl NnOperand<T>,
    rows: u32,
    cols: u32,
) -> Result<()> {
    const OP: &str = "ops::nn::silu_mul";
    check_nonzero(OP, "rows", rows)?;
    check_nonzero(OP, "cols", cols)?;
    let n = product(OP, "out", &[rows, cols])?;
    check_elems(OP, "gate", gate.elems(), n)?;
    check_elems(OP, "up", up.elems(), n)?;
    check_elems(OP, "out", out.elems(), n)?;
    let gpu = device_for::<T>(OP, gate)?;
    let pc = [rows, cols, cols, 0, cols, 0];
    launch(
        batch,
        &gpu,
        kernel_name::<T>(NAMES),
        &[gate, up, out],
        items_grid(&gpu, n),
        &pc,
    )
}

/// Records `out[r] = silu(x[r, ..cols]) * x[r, cols..]`: each row of `x`
/// (`rows` × `2 cols`) holds the gate then the up projection (a fused
/// gate|up matmul's output); `out` is `rows` × `cols` and must not overlap
/// `x`.
pub fn silu_mul_halves<T: NnElement>(
    batch: &mut Batch,
    x: &impl NnOperand<T>,
    out: &impl NnOperand<T>,
    rows: u32,
    cols: u32,
) -> Result<()> {
    const OP: &str = "ops::nn::silu_mul_halves";
    check_nonzero(OP, "rows", rows)?;
    check_nonzero(OP, "cols", cols)?;
    let width = cols
        .checked_mul(2)
        .ok_or_else(|| super::shape_err(OP, "cols", format!("2 x {cols} exceeds {}", u32::MAX)))?;
    let n_in = product(OP, "x", &[rows, width])?;
    check_elems(OP, "x", x.elems(), n_in)?;
    check_elems(OP, "out", out.elems(), n_in / 2)?;
    super::check_disjoint(OP, "out", out, "x", x)?;
    let gpu = device_for::<T>(OP, x)?;
    let pc = [rows, cols, width, 0, width, cols];
    launch(
        batch,
        &gpu,
        kernel_name::<T>(NAMES),
        &[x, x, out],
        items_grid(&gpu, n_in / 2),
        &pc,
    )
}
