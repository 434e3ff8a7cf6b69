//! Argmax over rows (`shaders/nn_argmax.comp`): greedy decoding's token
//! choice, on the GPU.
//!
//! A few wide rows (a vocabulary's logits) would leave one workgroup per
//! row streaming the whole row alone, so such rows are split in chunks:
//! one workgroup per chunk writes its chunk's best (value, column) pair to
//! a scratch buffer, and a second pass picks each row's best pair, the
//! lowest column on ties. [`argmax_chunks`] is that decision, pure.

use crate::batch::Batch;
use crate::error::Result;

use super::{
    check_elems, check_nonzero, device_for, kernel_name, launch, product, rows_grid, shape_err,
    NnElement, NnOperand,
};

/// Columns of one chunk of a split row (four per invocation).
const CHUNK: u32 = 1024;
/// The most chunks a row is split into (the second pass's 256 invocations
/// read at most four pairs each).
const MAX_CHUNKS: u32 = 1024;
/// Rows from which one workgroup per row is enough to fill the GPU.
const SPLIT_BELOW_ROWS: u32 = 64;

/// The chunk width and count for `rows` rows of `cols` columns; one chunk
/// (no split) when the rows are many or narrow. Pure.
fn argmax_chunks(rows: u32, cols: u32) -> (u32, u32) {
    if rows >= SPLIT_BELOW_ROWS || cols <= 2 * CHUNK {
        return (cols, 1);
    }
    let chunk = CHUNK.max(cols.div_ceil(MAX_CHUNKS));
    (chunk, cols.div_ceil(chunk))
}

/// Records the index of the largest element of each row of `x` (`rows` ×
/// `cols`, row-major) into `out` (`rows` `u32`s). Ties give the lowest
/// index. NaN counts as larger than any number (the first NaN's index wins,
/// as in PyTorch); a row of only `-inf` gives 0.
///
/// Fewer than 64 rows wider than 2,048 columns are split over workgroups
/// (two dispatches, a barrier between them; the partial results live in a
/// scratch buffer the batch holds); otherwise one workgroup per row.
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
    let (chunk, chunks) = argmax_chunks(rows, cols);
    if chunks == 1 {
        return launch(
            batch,
            &gpu,
            name,
            &[x, out, out],
            grid,
            &[rows, cols, cols, 1, 0],
        );
    }
    let limit = gpu.info().max_workgroup_count;
    if chunks > limit[0] || rows > limit[1] {
        return Err(shape_err(
            OP,
            "x",
            format!("{chunks} chunks × {rows} rows exceed the adapter's workgroup grid {limit:?}"),
        ));
    }
    let part = gpu.alloc::<u32>(2 * (rows * chunks) as usize)?;
    let pc = [rows, cols, chunk, chunks, 1];
    launch(
        batch,
        &gpu,
        name,
        &[x, &part, &part],
        [chunks, rows, 1],
        &pc,
    )?;
    batch.barrier();
    let pc = [rows, cols, chunk, chunks, 2];
    launch(batch, &gpu, name, &[x, out, &part], grid, &pc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_rows_split_and_many_or_narrow_rows_do_not() {
        // A vocabulary's logits at one sequence: 149 chunks of 1,024.
        assert_eq!(argmax_chunks(1, 151_936), (1024, 149));
        assert_eq!(argmax_chunks(63, 151_936), (1024, 149));
        // Many rows fill the GPU one workgroup each.
        assert_eq!(argmax_chunks(64, 151_936), (151_936, 1));
        // Narrow rows: one workgroup reads them in a few loads per lane.
        assert_eq!(argmax_chunks(1, 2048), (2048, 1));
        assert_eq!(argmax_chunks(1, 2049), (1024, 3));
        // Huge rows: at most 1,024 chunks, every column in one.
        let (chunk, chunks) = argmax_chunks(1, u32::MAX);
        assert!(chunks <= MAX_CHUNKS);
        assert!(u64::from(chunk) * u64::from(chunks) >= u64::from(u32::MAX));
    }
}
