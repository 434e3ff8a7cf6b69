//! Causal attention for prefill (`shaders/nn_attn_prefill.comp`): tiled,
//! with online softmax, so the tokens × tokens score matrix is never
//! stored.
//!
//! One workgroup per (tile of 32 queries, sequence, query head) walks key
//! tiles of as many keys up to its last query (the causal bound, so about
//! half the tiles of a full scan), keeping per query a running max, a
//! running sum and f32 accumulators in registers that are rescaled when the
//! max grows. Each key element staged in shared memory serves the whole
//! query tile, with four barriers per key tile. Where the adapter's shared
//! memory cannot hold 32-row tiles of `head_dim` (past 128 at 48 KiB, past
//! 100 at 32 KiB) the tiles hold 16 rows, and where not even those fit the
//! narrow kernel (`nn_attn_prefill_small.comp`, 16 queries against key
//! tiles of up to 16) runs.

use crate::batch::Batch;
use crate::error::Result;

use super::{
    check_disjoint, check_elems, check_heads, check_nonzero, device_for, kernel_name, product,
    shape_err, NnElement, NnOperand,
};

/// Threads of a workgroup, as `LOCAL` in the shaders.
const LOCAL: u32 = 256;
/// Shared bytes of `nn_attn_prefill.comp` besides its two tiles: the
/// probabilities (a vec4 per thread), the row maxima and sums (a float per
/// thread) and 32 rescale factors.
const SHARED_FIXED: u32 = LOCAL * 16 + LOCAL * 4 + 32 * 4;

/// How a prefill runs on an adapter: the tiled kernel with `qt` queries and
/// keys per tile and `tile4` vec4s per shared tile, or the narrow kernel
/// (16 queries, key tiles of at most 16) where those tiles do not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    Tiled { qt: u32, tile4: u32 },
    Small,
}

/// The widest tile (32, then 16 queries) whose shared memory fits
/// `max_shared` bytes for `head_dim` (the tiled kernel's output threads
/// cover `1024 / qt` vec4 columns, so 32 needs `head_dim <= 128`).
fn plan(head_dim: u32, max_shared: u32) -> Plan {
    let dim4 = head_dim.div_ceil(4);
    for qt in [32, 16] {
        let tile4 = qt * (dim4 + 1);
        if dim4 <= 1024 / qt && 2 * tile4 * 16 + SHARED_FIXED <= max_shared {
            return Plan::Tiled { qt, tile4 };
        }
    }
    Plan::Small
}

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
    let plan = plan(head_dim, gpu.info().max_shared_memory);
    let qt = match plan {
        Plan::Tiled { qt, .. } => qt,
        Plan::Small => 16,
    };
    let tiles = tokens.div_ceil(qt);
    let ys = b * q_heads; // <= n_q, so it fits
    let max = gpu.info().max_workgroup_count;
    if tiles > max[0] || ys > max[1] {
        return Err(shape_err(
            OP,
            "q",
            format!("{tiles} query tiles x {ys} heads exceed the adapter's workgroup grid {max:?}"),
        ));
    }
    let (kernel, pc) = match plan {
        Plan::Tiled { qt, tile4 } => {
            let name = kernel_name::<T>([
                "nn_attn_prefill",
                "nn_attn_prefill_f16",
                "nn_attn_prefill_bf16",
            ]);
            let k = crate::builtins::get(&gpu.inner, name, &[(0, qt), (1, tile4)])?;
            (
                k,
                vec![tokens, q_heads, kv_heads, head_dim, scale.to_bits()],
            )
        }
        Plan::Small => {
            let name = kernel_name::<T>([
                "nn_attn_prefill_small",
                "nn_attn_prefill_small_f16",
                "nn_attn_prefill_small_bf16",
            ]);
            let k = crate::builtins::get(&gpu.inner, name, &[])?;
            let bk = small_key_tile(head_dim);
            (
                k,
                vec![tokens, q_heads, kv_heads, head_dim, bk, scale.to_bits()],
            )
        }
    };
    let pc = crate::ops::words(&pc);
    batch.run_configured(&kernel, &[q, k, v, out], [tiles, ys, 1], Some(&pc))?;
    Ok(())
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

/// Keys per tile of the narrow kernel: as many as fit its 2048-float
/// shared tile, at most 16.
fn small_key_tile(head_dim: u32) -> u32 {
    (2048 / head_dim).clamp(1, 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_fit_the_shared_memory() {
        // 48 KiB (NVIDIA): 32-query tiles through head_dim 128, 16 beyond.
        assert_eq!(
            plan(128, 49152),
            Plan::Tiled {
                qt: 32,
                tile4: 1056
            }
        );
        assert_eq!(plan(129, 49152), Plan::Tiled { qt: 16, tile4: 544 });
        assert_eq!(
            plan(256, 49152),
            Plan::Tiled {
                qt: 16,
                tile4: 1040
            }
        );
        // 32 KiB (lavapipe): narrower tiles, then the narrow kernel.
        assert_eq!(plan(80, 32768), Plan::Tiled { qt: 32, tile4: 672 });
        assert_eq!(plan(128, 32768), Plan::Tiled { qt: 16, tile4: 528 });
        assert_eq!(plan(256, 32768), Plan::Small);
        for max in [16384, 32768, 49152, 65536] {
            for d in 1..=256 {
                if let Plan::Tiled { qt, tile4 } = plan(d, max) {
                    assert!(2 * tile4 * 16 + SHARED_FIXED <= max, "{d} {max}");
                    assert!(d.div_ceil(4) * qt <= 1024, "{d} {max}");
                }
            }
        }
    }

    #[test]
    fn small_key_tiles_fill_the_shared_tile() {
        assert_eq!(small_key_tile(64), 16);
        assert_eq!(small_key_tile(160), 12);
        assert_eq!(small_key_tile(256), 8);
    }
}
