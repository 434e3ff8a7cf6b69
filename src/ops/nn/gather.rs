//! Embedding gather (`shaders/nn_embed.comp`): a row of the table per
//! token id.

use crate::batch::Batch;
use crate::error::Result;

use super::{
    check_at_least, check_elems, check_nonzero, device_for, kernel_name, launch, product,
    rows_grid, NnElement, NnOperand,
};

/// The checks of [`embedding`] on `[vocab, dim]` and the element counts
/// of table, ids, out and flag (shared with the op batch's recording); the
/// number of tokens.
pub(in crate::ops) fn check_args(dims: [u32; 2], elems: [u64; 4]) -> Result<u32> {
    const OP: &str = "ops::nn::embedding";
    let [vocab, dim] = dims;
    check_nonzero(OP, "vocab", vocab)?;
    check_nonzero(OP, "dim", dim)?;
    let tokens = u32::try_from(elems[1]).unwrap_or(u32::MAX);
    check_nonzero(OP, "ids", tokens)?;
    let n_table = product(OP, "table", &[vocab, dim])?;
    let n_out = product(OP, "out", &[tokens, dim])?;
    check_elems(OP, "table", elems[0], n_table)?;
    check_elems(OP, "out", elems[2], n_out)?;
    check_at_least(OP, "flag", elems[3], 1)?;
    Ok(tokens)
}

/// Records `out[t] = table[ids[t]]` for each token `t`: `table` is
/// `vocab` × `dim` (row-major), `ids` one `u32` per token, `out`
/// `ids.len()` × `dim`.
///
/// Ids are only known on the GPU, so they are guarded there: an id at or
/// past `vocab` writes a row of zeros and adds 1 to `flag[0]`, a `u32` the
/// caller owns (zero it before, read it after: nonzero means that many
/// tokens were out of range). `flag` holds at least one word.
#[allow(clippy::too_many_arguments)]
pub fn embedding<T: NnElement>(
    batch: &mut Batch,
    table: &impl NnOperand<T>,
    ids: &impl NnOperand<u32>,
    out: &impl NnOperand<T>,
    flag: &impl NnOperand<u32>,
    vocab: u32,
    dim: u32,
) -> Result<()> {
    const OP: &str = "ops::nn::embedding";
    let tokens = check_args(
        [vocab, dim],
        [table.elems(), ids.elems(), out.elems(), flag.elems()],
    )?;
    let gpu = device_for::<T>(OP, table)?;
    let grid = rows_grid(OP, &gpu, tokens)?;
    let name = kernel_name::<T>(["nn_embed", "nn_embed_f16", "nn_embed_bf16"]);
    launch(
        batch,
        &gpu,
        name,
        &[table, ids, out, flag],
        grid,
        &[tokens, dim, vocab],
    )
}
