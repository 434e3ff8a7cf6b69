//! Causal attention for prefill (`shaders/nn_attn_prefill.comp`): tiled,
//! with online softmax, so the tokens × tokens score matrix is never
//! stored.
//!
//! One workgroup per (tile of 16 queries, sequence, query head) walks the
//! key tiles up to its last query (the causal bound, so about half the
//! tiles of a full scan), keeping per query a running max, a running sum
//! and f32 accumulators that are rescaled when the max grows.

use crate::batch::Batch;
use crate::error::Result;

use super::{
    check_disjoint, check_elems, check_heads, check_nonzero, device_for, kernel_name, launch,
    product, shape_err, NnElement, NnOperand,
};

/// Queries per workgroup (`QT` in the shader).
const QUERY_TILE: u32 = 16;
/// Floats of the key (or value) tile in shared memory (`TILE`).
const TILE_FLOATS: u32 = 2048;

/// The shapes of an [`attention_prefill`]: queries and output `[batch,
/// tokens, q_heads, head_dim]`, keys and values `[batch, tokens, kv_heads,
/// head_dim]` (token-major, as the projections write them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefillShape {
    /// Sequences.
    pub batch: u32,
    /// Tokens per sequence.
    pub tokens: u32,
    /// Query heads (a multiple of `kv_heads`).
    pub q_heads: u32,
    /// Key/value heads.
    pub kv_heads: u32,
    /// Elements per head, at most 256.
    pub head_dim: u32,
}

/// Records causal attention over each sequence's own tokens: query `i` of
/// head `h` attends to keys `0..=i` of kv head `h / (q_heads / kv_heads)`,
/// `out = softmax(scale * q · kᵀ) · v`. `scale` is usually
/// `1 / sqrt(head_dim)`. `out` must not overlap `q`, `k` or `v`.
#[allow(clippy::too_many_arguments)]
pub fn attention_prefill<T: NnElement>(
    batch: &mut Batch,
    q: &impl NnOperand<T>,
    k: &impl NnOperand<T>,
    v: &impl NnOperand<T>,
    out: &impl NnOperand<T>,
    shape: PrefillShape,
    scale: f32,
) -> Result<()> {
    const OP: &str = "ops::nn::attention_prefill";
    check_args(shape, scale, [q.elems(), k.elems(), v.elems(), out.elems()])?;
    let PrefillShape {
        batch: b,
        tokens,
        q_heads,
        kv_heads,
        head_dim,
    } = shape;
    check_disjoint(OP, "out", out, "q", q)?;
    check_disjoint(OP, "out", out, "k", k)?;
    check_disjoint(OP, "out", out, "v", v)?;
    let gpu = device_for::<T>(OP, q)?;
    let tiles = tokens.div_ceil(QUERY_TILE);
    let ys = b * q_heads; // <= n_q, so it fits
    let max = gpu.info().max_workgroup_count;
    if tiles > max[0] || ys > max[1] {
        return Err(shape_err(
            OP,
            "q",
            format!("{tiles} query tiles x {ys} heads exceed the adapter's workgroup grid {max:?}"),
        ));
    }
    let name = kernel_name::<T>([
        "nn_attn_prefill",
        "nn_attn_prefill_f16",
        "nn_attn_prefill_bf16",
    ]);
    launch(
        batch,
        &gpu,
        name,
        &[q, k, v, out],
        [tiles, ys, 1],
        &[
            tokens,
            q_heads,
            kv_heads,
            head_dim,
            key_tile(head_dim),
            scale.to_bits(),
        ],
    )
}

/// The checks of [`attention_prefill`] on its shape, scale and the element
/// counts of q, k, v and out (shared with the op batch's recording).
pub(in crate::ops) fn check_args(shape: PrefillShape, scale: f32, elems: [u64; 4]) -> Result<()> {
    const OP: &str = "ops::nn::attention_prefill";
    let PrefillShape {
        batch: b,
        tokens,
        q_heads,
        kv_heads,
        head_dim,
    } = shape;
    check_nonzero(OP, "batch", b)?;
    check_nonzero(OP, "tokens", tokens)?;
    check_heads(OP, q_heads, kv_heads, head_dim)?;
    super::check_scale(OP, scale)?;
    let n_q = product(OP, "q", &[b, tokens, q_heads, head_dim])?;
    let n_kv = product(OP, "k", &[b, tokens, kv_heads, head_dim])?;
    check_elems(OP, "q", elems[0], n_q)?;
    check_elems(OP, "k", elems[1], n_kv)?;
    check_elems(OP, "v", elems[2], n_kv)?;
    check_elems(OP, "out", elems[3], n_q)
}

/// Keys per tile: as many as fit the shared tile, at most 16.
fn key_tile(head_dim: u32) -> u32 {
    (TILE_FLOATS / head_dim).clamp(1, 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_tiles_fill_the_shared_tile() {
        assert_eq!(key_tile(64), 16);
        assert_eq!(key_tile(128), 16);
        assert_eq!(key_tile(160), 12);
        assert_eq!(key_tile(256), 8);
        assert_eq!(key_tile(72), 16);
    }
}
