//! KV-cache append (`shaders/nn_kv_append.comp`): new keys and values go
//! into per-sequence caches at per-sequence positions read on the GPU.

use crate::batch::Batch;
use crate::error::Result;

use super::{
    check_at_least, check_elems, check_nonzero, device_for, items_grid, kernel_name, launch,
    product, NnElement, NnOperand,
};

/// The shapes of a [`kv_append`]: new keys and values are
/// `[batch, steps, kv_heads, head_dim]` (token-major, as a projection
/// writes them), each cache `[batch, kv_heads, max_seq, head_dim]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvShape {
    /// Sequences.
    pub batch: u32,
    /// New tokens per sequence (1 in decode).
    pub steps: u32,
    /// Key/value heads.
    pub kv_heads: u32,
    /// Elements per head.
    pub head_dim: u32,
    /// Positions each sequence's cache holds.
    pub max_seq: u32,
}

/// The checks of [`kv_append`] on its shape and the element counts of
/// k_new, v_new, k_cache, v_cache, positions and flag (shared with the op
/// batch's recording); the elements of k_new.
pub(in crate::ops) fn check_args(shape: KvShape, elems: [u64; 6]) -> Result<u64> {
    const OP: &str = "ops::nn::kv_append";
    let KvShape {
        batch: b,
        steps,
        kv_heads,
        head_dim,
        max_seq,
    } = shape;
    check_nonzero(OP, "batch", b)?;
    check_nonzero(OP, "steps", steps)?;
    check_nonzero(OP, "kv_heads", kv_heads)?;
    check_nonzero(OP, "head_dim", head_dim)?;
    check_nonzero(OP, "max_seq", max_seq)?;
    let n_new = product(OP, "k_new", &[b, steps, kv_heads, head_dim])?;
    let n_cache = product(OP, "k_cache", &[b, kv_heads, max_seq, head_dim])?;
    check_elems(OP, "k_new", elems[0], n_new)?;
    check_elems(OP, "v_new", elems[1], n_new)?;
    check_elems(OP, "k_cache", elems[2], n_cache)?;
    check_elems(OP, "v_cache", elems[3], n_cache)?;
    check_elems(OP, "positions", elems[4], u64::from(b))?;
    check_at_least(OP, "flag", elems[5], 1)?;
    Ok(n_new)
}

/// Records the append of `k_new` and `v_new` (`[batch, steps, kv_heads,
/// head_dim]`) to `k_cache` and `v_cache` (`[batch, kv_heads, max_seq,
/// head_dim]`): token `s` of sequence `b` goes to position
/// `positions[b] + s`. `positions` holds one `u32` per sequence, read on
/// the GPU (a graph replays with new positions).
///
/// A position at or past `max_seq` writes nothing and adds 1 to `flag[0]`
/// (once per token and head), a `u32` the caller owns: zero it before,
/// read it after.
#[allow(clippy::too_many_arguments)]
pub fn kv_append<T: NnElement>(
    batch: &mut Batch,
    k_new: &impl NnOperand<T>,
    v_new: &impl NnOperand<T>,
    k_cache: &impl NnOperand<T>,
    v_cache: &impl NnOperand<T>,
    positions: &impl NnOperand<u32>,
    flag: &impl NnOperand<u32>,
    shape: KvShape,
) -> Result<()> {
    const OP: &str = "ops::nn::kv_append";
    let elems = [
        k_new.elems(),
        v_new.elems(),
        k_cache.elems(),
        v_cache.elems(),
        positions.elems(),
        flag.elems(),
    ];
    let n_new = check_args(shape, elems)?;
    let KvShape {
        batch: b,
        steps,
        kv_heads,
        head_dim,
        max_seq,
    } = shape;
    let gpu = device_for::<T>(OP, k_new)?;
    let name = kernel_name::<T>(["nn_kv_append", "nn_kv_append_f16", "nn_kv_append_bf16"]);
    launch(
        batch,
        &gpu,
        name,
        &[k_new, v_new, k_cache, v_cache, positions, flag],
        items_grid(&gpu, n_new),
        &[b, steps, kv_heads, head_dim, max_seq],
    )
}
