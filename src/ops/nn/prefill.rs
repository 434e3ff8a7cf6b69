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
//!
//! f16 tensors of head_dim up to 128, on an adapter with
//! `VK_NV_cooperative_matrix2`'s workgroup scope, reductions, conversions
//! and per-element operations, run on the tensor cores instead
//! (`nn_attn_prefill_tc.comp`): 64 queries per workgroup against key tiles
//! of 32, both products as f16 cooperative-matrix products with f32
//! accumulation, flash-attention style. Its probabilities enter the second
//! product rounded to f16 (and the row sums add those rounded values), so
//! each output may differ from the f32-arithmetic kernels by up to about
//! 2^-10 of the largest |v| it mixes, besides the final rounding to f16
//! ([`attention_prefill_on_tensor_cores`] says which kernel runs).

use crate::adapter::AdapterInfo;
use crate::batch::Batch;
use crate::error::Result;

use super::{
    check_disjoint, check_elems, check_heads, check_nonzero, device_for, kernel_name, product,
    shape_err, NnDtype, NnElement, NnOperand,
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

/// Threads of a workgroup of the tensor-core kernel.
const TC_LOCAL: u32 = 128;
/// Queries per workgroup of the tensor-core kernel (`BR`).
const TC_QUERIES: u32 = 64;
/// Keys per step of the tensor-core kernel (`BC`).
const TC_KEYS: u32 = 32;

/// The padded head width (64 or 128) the tensor-core kernel runs
/// `head_dim` at, where the adapter's workgroup-scope f16 granularity
/// `(M, N, K)` divides the kernel's three products (BR×D by D×BC, BR×BC by
/// BC×BC, BR×BC by BC×D, with BR = 64 queries and BC = 32 keys) and no
/// side exceeds the largest flexible dimension; `None` past 128 or where
/// they do not fit. Pure.
fn tc_width(head_dim: u32, granularity: Option<[u32; 3]>, max_dimension: u32) -> Option<u32> {
    let [gm, gn, gk] = granularity?;
    let d = [64, 128].into_iter().find(|&d| head_dim <= d)?;
    let divides = |g: u32, x: u32| g > 0 && x % g == 0;
    let fits = divides(gm, TC_QUERIES)
        && divides(gn, TC_KEYS)
        && divides(gn, d)
        && divides(gk, TC_KEYS)
        && divides(gk, d)
        && d.max(TC_QUERIES) <= max_dimension;
    fits.then_some(d)
}

/// The finest workgroup-scope f16 · f16 + f32 shape (M, N, K granularity)
/// for workgroups of the tensor-core kernel's size, and the largest
/// flexible dimension, where the adapter has every `VK_NV_cooperative_matrix2`
/// feature the kernel uses (workgroup scope, flexible dimensions, tensor
/// addressing, reductions, conversions, per-element operations) and f16
/// arithmetic and storage.
fn tc_granularity(info: &AdapterInfo) -> (Option<[u32; 3]>, u32) {
    let Some(v) = info.cooperative_matrix_features.nv2.as_ref() else {
        return (None, 0);
    };
    let usable = v.workgroup_scope
        && v.flexible_dimensions
        && v.tensor_addressing
        && v.reductions
        && v.conversions
        && v.per_element_operations
        && v.workgroup_scope_max_workgroup_size >= TC_LOCAL
        && info.float16
        && info.storage_buffer16;
    if !usable {
        return (None, 0);
    }
    (
        v.f16_workgroup_granularity(TC_LOCAL),
        v.flexible_dimensions_max_dimension,
    )
}

/// The tensor-core kernel's padded head width for `T` tensors of
/// `head_dim` on the adapter of `info`, or `None` where another kernel runs.
fn tc_plan<T: NnElement>(info: &AdapterInfo, head_dim: u32) -> Option<u32> {
    if T::NN != NnDtype::F16 {
        return None;
    }
    let (g, max_dimension) = tc_granularity(info);
    tc_width(head_dim, g, max_dimension)
}

/// Whether [`attention_prefill`] on `T` tensors with heads of `head_dim`
/// runs on the tensor cores on the adapter of `info`: f16 tensors, a
/// head_dim of at most 128, and `VK_NV_cooperative_matrix2` with workgroup
/// scope, reductions, conversions and per-element operations (see the
/// module docs for what changes in the arithmetic).
pub fn attention_prefill_on_tensor_cores<T: NnElement>(info: &AdapterInfo, head_dim: u32) -> bool {
    tc_plan::<T>(info, head_dim).is_some()
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
///
/// f16 tensors run on the tensor cores where
/// [`attention_prefill_on_tensor_cores`] says so, with probabilities
/// rounded to f16 before they weight the values (the module docs give the
/// bound); elsewhere every kernel computes in f32.
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
    let ys = b * q_heads; // <= n_q, so it fits
    let max = gpu.info().max_workgroup_count;
    if let Some(width) = tc_plan::<T>(gpu.info(), head_dim) {
        let tiles = tokens.div_ceil(TC_QUERIES);
        if tiles > max[0] || ys > max[1] {
            return Err(grid_err(tiles, ys, max));
        }
        let name = if width == 64 {
            "nn_attn_prefill_tc_d64"
        } else {
            "nn_attn_prefill_tc"
        };
        let kernel = crate::builtins::get(&gpu.inner, name, &[])?;
        let pc = [tokens, q_heads, kv_heads, head_dim, scale.to_bits()];
        let pc = crate::ops::words(&pc);
        batch.run_configured(&kernel, &[q, k, v, out], [tiles, ys, 1], Some(&pc))?;
        return Ok(());
    }
    let plan = plan(head_dim, gpu.info().max_shared_memory);
    let qt = match plan {
        Plan::Tiled { qt, .. } => qt,
        Plan::Small => 16,
    };
    let tiles = tokens.div_ceil(qt);
    if tiles > max[0] || ys > max[1] {
        return Err(grid_err(tiles, ys, max));
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

/// The error of a grid of `tiles` query tiles by `ys` heads past the
/// adapter's `max`.
fn grid_err(tiles: u32, ys: u32, max: [u32; 3]) -> crate::error::Error {
    shape_err(
        "ops::nn::attention_prefill",
        "q",
        format!("{tiles} query tiles x {ys} heads exceed the adapter's workgroup grid {max:?}"),
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
    fn tensor_core_widths_pad_to_64_or_128() {
        let g = Some([32, 32, 16]);
        assert_eq!(tc_width(1, g, 256), Some(64));
        assert_eq!(tc_width(64, g, 256), Some(64));
        assert_eq!(tc_width(65, g, 256), Some(128));
        assert_eq!(tc_width(128, g, 256), Some(128));
        assert_eq!(tc_width(129, g, 256), None);
        assert_eq!(tc_width(256, g, 256), None);
        // No workgroup-scope shape, or one that does not divide the tiles.
        assert_eq!(tc_width(128, None, 256), None);
        assert_eq!(tc_width(128, Some([48, 32, 16]), 256), None);
        assert_eq!(tc_width(128, Some([128, 32, 16]), 256), None);
        assert_eq!(tc_width(64, Some([32, 64, 16]), 256), None);
        assert_eq!(tc_width(64, Some([32, 32, 64]), 256), None);
        assert_eq!(tc_width(128, Some([64, 32, 32]), 256), Some(128));
        // Dimensions past the adapter's largest flexible one.
        assert_eq!(tc_width(128, g, 64), None);
        assert_eq!(tc_width(64, g, 64), Some(64));
    }

    #[test]
    fn small_key_tiles_fill_the_shared_tile() {
        assert_eq!(small_key_tile(64), 16);
        assert_eq!(small_key_tile(160), 12);
        assert_eq!(small_key_tile(256), 8);
    }
}
