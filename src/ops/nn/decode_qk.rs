//! Decode attention with the new token's q/k side in the same dispatch
//! (`shaders/nn_attn_decode.comp` with `QK`, the `nn_attn_decode1_qk`
//! kernels): what [`qk_norm_rope_append`](super::qk_norm_rope_append)
//! followed by [`attention_decode`](super::attention_decode) do for one new
//! token per sequence, in one command instead of two.
//!
//! Every workgroup of the attention normalises and rotates the queries of
//! its heads and the key of its kv head itself (a few hundred values), so
//! no workgroup waits for another: the new position's key and value are
//! taken from shared memory where the attention reaches that position,
//! and one workgroup per sequence and kv head writes them to the caches
//! for the steps after. A decode step saves the q/k launch and the drain
//! between the two.

use crate::batch::Batch;
use crate::buffer::GpuBuf;
use crate::error::{Error, Result};

use super::attention::{self, DecodeShape};
use super::qk::{self, QkNorm, QkShape};
use super::{check_disjoint, check_eps, device_for, kernel_name, NnElement, NnOperand};

const OP: &str = "ops::nn::attention_decode_qk";

/// Records, in one dispatch, for the one new token of each sequence `b` at
/// position `p = positions[b]`:
///
/// 1. the work of [`qk_norm_rope_append`](super::qk_norm_rope_append) for
///    that token: with `norm`, RMSNorm of each query head and of each key
///    head (`x / sqrt(mean(x²) + eps) * w`, f32); rotary embedding at `p`
///    (the same rotate-half form and reduction of the angle); the append of
///    the rotated key and of the value to `k_cache` and `v_cache` at `p`
///    (rounded once to the caches' type); a position at or past `max_seq`
///    writes no cache entry and adds 1 to `flag[0]` once per sequence and
///    kv head;
/// 2. [`attention_decode`](super::attention_decode) of the rotated queries
///    (rounded to the caches' type, as that op reads them) over positions
///    `..min(lens[b], max_seq)` of the caches, position `p` (when in range)
///    taking the new key and value: `out[b, h] = softmax(scale * q[b, h] ·
///    k[b, kvh, ..n]) · v[b, kvh, ..n]`.
///
/// `q` (`[batch, q_heads, head_dim]`), `k` and `v` (`[batch, kv_heads,
/// head_dim]`) are f32 as the projection wrote them and are only read (the
/// two-op path writes the normed q and k back; this one does not). The
/// caches and `out` are `f32`, [`F16`](crate::ops::F16) or
/// [`Bf16`](crate::ops::Bf16). Results equal the two ops' but for the
/// norm's sum of squares, added in another order (a few ulps).
///
/// Needs subgroup arithmetic (`DeviceInfo::subgroup_arithmetic`), else
/// [`Error::Unsupported`]: record the two ops there. Allocates what
/// [`attention_decode`](super::attention_decode) does (a scratch buffer and
/// zeroed counters, left at zero for a graph's next launch).
///
/// Bad shapes and element counts, head counts that do not divide, an odd
/// or too large `head_dim`, a bad `eps` or `scale`, and `q`, `k`, `v`,
/// the caches or `out` sharing bytes are
/// [`OpsError::Shape`](crate::error::OpsError::Shape) or
/// [`OpsError::Param`](crate::error::OpsError::Param) errors naming this
/// op; nothing is recorded then.
#[allow(clippy::too_many_arguments)]
pub fn attention_decode_qk<C: NnElement>(
    batch: &mut Batch,
    q: &impl NnOperand<f32>,
    k: &impl NnOperand<f32>,
    v: &impl NnOperand<f32>,
    norm: Option<QkNorm<'_>>,
    inv_freq: &impl NnOperand<f32>,
    positions: &impl NnOperand<u32>,
    k_cache: &impl NnOperand<C>,
    v_cache: &impl NnOperand<C>,
    lens: &impl NnOperand<u32>,
    flag: &impl NnOperand<u32>,
    out: &impl NnOperand<C>,
    shape: DecodeShape,
    scale: f32,
) -> Result<()> {
    let qs = QkShape {
        batch: shape.batch,
        steps: 1,
        q_heads: shape.q_heads,
        kv_heads: shape.kv_heads,
        head_dim: shape.head_dim,
        max_seq: shape.max_seq,
    };
    let elems = [
        q.elems(),
        k.elems(),
        v.elems(),
        inv_freq.elems(),
        positions.elems(),
        k_cache.elems(),
        v_cache.elems(),
        flag.elems(),
    ];
    qk::check_args_of(OP, qs, elems, norm.map(|n| n.elems))?;
    if let Some(n) = &norm {
        check_eps(OP, n.eps)?;
    }
    let attn = [
        q.elems(),
        k_cache.elems(),
        v_cache.elems(),
        lens.elems(),
        out.elems(),
    ];
    attention::check_args_of(OP, shape, scale, attn)?;
    let inputs: [(&'static str, &dyn GpuBuf); 3] = [("q", q), ("k", k), ("v", v)];
    let writes: [(&'static str, &dyn GpuBuf); 3] =
        [("k_cache", k_cache), ("v_cache", v_cache), ("out", out)];
    for (i, (na, a)) in inputs.iter().chain(&writes).enumerate() {
        for (nb, b) in inputs.iter().chain(&writes).skip(i + 1) {
            check_disjoint(OP, na, *a, nb, *b)?;
        }
    }
    let gpu = device_for::<C>(OP, k_cache)?;
    if !gpu.info().subgroup_arithmetic {
        return Err(Error::Unsupported {
            what: "ops::nn::attention_decode_qk needs subgroup arithmetic (record \
                   qk_norm_rope_append and attention_decode instead)",
            adapter: gpu.info().name.clone(),
        });
    }
    let f = attention::Fused::new(&gpu, shape)?;
    // Without a norm the weight bindings take inv_freq, which the kernel
    // then does not read.
    let (qw, kw, eps, has_norm): (&dyn GpuBuf, &dyn GpuBuf, f32, u32) = match &norm {
        Some(n) => (n.q_weight, n.k_weight, n.eps, 1),
        None => (inv_freq, inv_freq, 0.0, 0),
    };
    let base = attention::pass1_push(shape, f.plan, scale, k_cache, v_cache);
    let mut pc = [0u32; 10];
    pc[..8].copy_from_slice(&base);
    pc[8] = eps.to_bits();
    pc[9] = has_norm;
    let name = kernel_name::<C>([
        "nn_attn_decode1_qk",
        "nn_attn_decode1_qk_f16",
        "nn_attn_decode1_qk_bf16",
    ]);
    attention::launch_pass1(
        batch,
        &gpu,
        name,
        f.plan,
        &[
            q,
            k_cache,
            v_cache,
            lens,
            &f.part,
            out,
            &f.counters,
            k_cache,
            v_cache,
            k,
            v,
            qw,
            kw,
            inv_freq,
            positions,
            flag,
        ],
        f.grid,
        &pc,
    )
}
