//! Causal softmax over attention scores (`shaders/nn_causal_softmax.comp`),
//! for models that materialise the scores (short contexts, debugging);
//! [`attention_prefill`](super::attention_prefill) never does.

use crate::batch::Batch;
use crate::error::Result;

use super::{
    check_elems, check_nonzero, device_for, kernel_name, launch, product, rows_grid, shape_err,
    NnElement, NnOperand,
};

/// Records the causal softmax of `x` (`rows` × `cols`, row-major) into
/// `out` (same shape; may be `x` itself). The rows come in blocks of
/// `q_len` queries (one block per batch and head, so `rows` is a multiple
/// of `q_len`); query `i` of a block sees the first `cols - q_len + i + 1`
/// keys (the queries are the last `q_len` positions, as after a KV cache
/// of `cols - q_len`). Seen entries get `exp(x - max) / sum` over the seen
/// ones; the others 0.
pub fn causal_softmax<T: NnElement>(
    batch: &mut Batch,
    x: &impl NnOperand<T>,
    out: &impl NnOperand<T>,
    rows: u32,
    cols: u32,
    q_len: u32,
) -> Result<()> {
    const OP: &str = "ops::nn::causal_softmax";
    check_nonzero(OP, "rows", rows)?;
    check_nonzero(OP, "cols", cols)?;
    check_nonzero(OP, "q_len", q_len)?;
    if q_len > cols {
        return Err(shape_err(
            OP,
            "q_len",
            format!("{q_len} exceeds cols ({cols}): a query would see no key"),
        ));
    }
    if rows % q_len != 0 {
        return Err(shape_err(
            OP,
            "rows",
            format!("{rows} is not a multiple of q_len ({q_len})"),
        ));
    }
    let n = product(OP, "x", &[rows, cols])?;
    check_elems(OP, "x", x.elems(), n)?;
    check_elems(OP, "out", out.elems(), n)?;
    let gpu = device_for::<T>(OP, x)?;
    let grid = rows_grid(OP, &gpu, rows)?;
    let name = kernel_name::<T>([
        "nn_causal_softmax",
        "nn_causal_softmax_f16",
        "nn_causal_softmax_bf16",
    ]);
    launch(batch, &gpu, name, &[x, out], grid, &[rows, cols, q_len])
}
