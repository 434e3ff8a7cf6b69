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
use super::{
    check_disjoint, check_elems, check_eps, check_heads, check_nonzero, device_for, kernel_name,
    shape_err, NnElement, NnOperand,
};

const OP: &str = "ops::nn::attention_decode_qk";
const OP_QKV: &str = "ops::nn::attention_decode_qkv";

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
    let src = Source::Split {
        q: (q, q.elems()),
        k: (k, k.elems()),
        v: (v, v.elems()),
    };
    let rest = Rest {
        norm,
        inv_freq: (inv_freq, inv_freq.elems()),
        positions: (positions, positions.elems()),
        lens: (lens, lens.elems()),
        flag: (flag, flag.elems()),
        shape,
        scale,
    };
    record(batch, src, k_cache, v_cache, out, rest)
}

/// [`attention_decode_qk`] reading q, k and v where a merged q|k|v
/// projection wrote them: `qkv` is `[batch, (q_heads + 2 · kv_heads) ·
/// head_dim]` f32, each sequence's row its query heads, then its key
/// heads, then its value heads (a Qwen3 or Llama layer's fused `q_proj`,
/// `k_proj` and `v_proj` output). The rows are read in place, so several
/// sequences need no split of that output into three tensors first (one
/// copy or transpose per part). Everything else, the results included, is
/// as [`attention_decode_qk`]'s; `qkv` of another element count, or
/// sharing bytes with the caches or `out`, is an
/// [`OpsError::Shape`](crate::error::OpsError::Shape) error naming `qkv`.
///
/// ```no_run
/// # use vkcompute::{Device, ops::nn::{self, DecodeShape}};
/// # fn main() -> vkcompute::Result<()> {
/// let gpu = Device::new()?;
/// let (b, qh, kvh, d, max_seq) = (4u32, 8u32, 2u32, 64u32, 128u32);
/// let qkv = gpu.alloc::<f32>((b * (qh + 2 * kvh) * d) as usize)?;
/// let inv_freq = gpu.upload(&vec![1.0f32; (d / 2) as usize])?;
/// let positions = gpu.upload(&[0u32, 5, 9, 2])?;
/// let lens = gpu.upload(&[1u32, 6, 10, 3])?;
/// let k_cache = gpu.alloc::<f32>((b * kvh * max_seq * d) as usize)?;
/// let v_cache = gpu.alloc::<f32>((b * kvh * max_seq * d) as usize)?;
/// let flag = gpu.alloc::<u32>(1)?;
/// let out = gpu.alloc::<f32>((b * qh * d) as usize)?;
/// let shape = DecodeShape { batch: b, q_heads: qh, kv_heads: kvh, head_dim: d, max_seq };
/// let mut batch = gpu.batch()?;
/// nn::attention_decode_qkv(
///     &mut batch, &qkv, None, &inv_freq, &positions, &k_cache, &v_cache, &lens, &flag, &out,
///     shape, 0.125,
/// )?;
/// batch.submit()?;
/// # Ok(())
/// # }
/// ```
#[allow(clippy::too_many_arguments)]
pub fn attention_decode_qkv<C: NnElement>(
    batch: &mut Batch,
    qkv: &impl NnOperand<f32>,
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
    let src = Source::Merged((qkv, qkv.elems()));
    let rest = Rest {
        norm,
        inv_freq: (inv_freq, inv_freq.elems()),
        positions: (positions, positions.elems()),
        lens: (lens, lens.elems()),
        flag: (flag, flag.elems()),
        shape,
        scale,
    };
    record(batch, src, k_cache, v_cache, out, rest)
}

/// A tensor the recording reads, with its element count.
type Operand<'a> = (&'a dyn GpuBuf, u64);

/// Where the new token's q, k and v are.
enum Source<'a> {
    /// Three tensors: q `[batch, q_heads, head_dim]`, k and v `[batch,
    /// kv_heads, head_dim]`.
    Split {
        q: Operand<'a>,
        k: Operand<'a>,
        v: Operand<'a>,
    },
    /// One merged q|k|v output, `[batch, (q_heads + 2 · kv_heads) ·
    /// head_dim]`.
    Merged(Operand<'a>),
}

/// [`Source`]'s element counts: q, k and v apart, or the merged tensor.
#[derive(Debug, Clone, Copy)]
enum Layout {
    Split([u64; 3]),
    Merged(u64),
}

impl Source<'_> {
    fn layout(&self) -> Layout {
        match self {
            Source::Split { q, k, v } => Layout::Split([q.1, k.1, v.1]),
            Source::Merged((_, n)) => Layout::Merged(*n),
        }
    }
}

/// The arguments both forms share, but the caches and `out`.
struct Rest<'a> {
    norm: Option<QkNorm<'a>>,
    inv_freq: Operand<'a>,
    positions: Operand<'a>,
    lens: Operand<'a>,
    flag: Operand<'a>,
    shape: DecodeShape,
    scale: f32,
}

/// The push constants that place q, k and v (the shader's q_row, kv_row,
/// k_off, v_off) for `src` of `shape`, and the element counts the checks
/// take for q, k and v; an error naming the tensor when the merged one
/// has another element count or an offset past the shader's 32-bit
/// indices. Pure.
fn placement(layout: Layout, shape: DecodeShape) -> Result<([u32; 4], [u64; 3])> {
    let d = u64::from(shape.head_dim);
    let b = u64::from(shape.batch);
    let q_w = u64::from(shape.q_heads) * d;
    let kv_w = u64::from(shape.kv_heads) * d;
    let (op, tensor) = match layout {
        Layout::Split(_) => (OP, "q"),
        Layout::Merged(_) => (OP_QKV, "qkv"),
    };
    let fits = |x: u64| {
        u32::try_from(x).map_err(|_| {
            shape_err(
                op,
                tensor,
                format!("a row offset of {x} elements: past 2^32 - 1"),
            )
        })
    };
    match layout {
        Layout::Split(elems) => Ok(([fits(q_w)?, fits(kv_w)?, 0, 0], elems)),
        Layout::Merged(n) => {
            let row = q_w + 2 * kv_w;
            check_elems(op, tensor, n, b * row)?;
            Ok((
                [fits(row)?, fits(row)?, fits(q_w)?, fits(q_w + kv_w)?],
                [b * q_w, b * kv_w, b * kv_w],
            ))
        }
    }
}

fn record<C: NnElement>(
    batch: &mut Batch,
    src: Source<'_>,
    k_cache: &impl NnOperand<C>,
    v_cache: &impl NnOperand<C>,
    out: &impl NnOperand<C>,
    r: Rest<'_>,
) -> Result<()> {
    let (op, shape) = match src {
        Source::Split { .. } => (OP, r.shape),
        Source::Merged(_) => (OP_QKV, r.shape),
    };
    let qs = QkShape {
        batch: shape.batch,
        steps: 1,
        q_heads: shape.q_heads,
        kv_heads: shape.kv_heads,
        head_dim: shape.head_dim,
        max_seq: shape.max_seq,
    };
    // The heads first, so that a merged tensor's size is judged against a
    // valid shape (check_args_of repeats these).
    check_nonzero(op, "batch", shape.batch)?;
    check_heads(op, shape.q_heads, shape.kv_heads, shape.head_dim)?;
    let (place, [nq, nk, nv]) = placement(src.layout(), shape)?;
    let elems = [
        nq,
        nk,
        nv,
        r.inv_freq.1,
        r.positions.1,
        k_cache.elems(),
        v_cache.elems(),
        r.flag.1,
    ];
    qk::check_args_of(op, qs, elems, r.norm.map(|n| n.elems))?;
    if let Some(n) = &r.norm {
        check_eps(op, n.eps)?;
    }
    let attn = [nq, k_cache.elems(), v_cache.elems(), r.lens.1, out.elems()];
    attention::check_args_of(op, shape, r.scale, attn)?;
    let (q, k, v): (&dyn GpuBuf, &dyn GpuBuf, &dyn GpuBuf) = match &src {
        Source::Split { q, k, v } => (q.0, k.0, v.0),
        Source::Merged((qkv, _)) => (*qkv, *qkv, *qkv),
    };
    let inputs: Vec<(&'static str, &dyn GpuBuf)> = match &src {
        Source::Split { .. } => vec![("q", q), ("k", k), ("v", v)],
        Source::Merged(_) => vec![("qkv", q)],
    };
    let writes: [(&'static str, &dyn GpuBuf); 3] =
        [("k_cache", k_cache), ("v_cache", v_cache), ("out", out)];
    for (i, (na, a)) in inputs.iter().chain(&writes).enumerate() {
        for (nb, b) in inputs.iter().chain(&writes).skip(i + 1) {
            check_disjoint(op, na, *a, nb, *b)?;
        }
    }
    let gpu = device_for::<C>(op, k_cache)?;
    if !gpu.info().subgroup_arithmetic {
        return Err(Error::Unsupported {
            what: match src {
                Source::Split { .. } => {
                    "ops::nn::attention_decode_qk needs subgroup arithmetic (record \
                     qk_norm_rope_append and attention_decode instead)"
                }
                Source::Merged(_) => {
                    "ops::nn::attention_decode_qkv needs subgroup arithmetic (split qkv, \
                     then record qk_norm_rope_append and attention_decode)"
                }
            },
            adapter: gpu.info().name.clone(),
        });
    }
    let f = attention::Fused::new(op, &gpu, shape)?;
    // Without a norm the weight bindings take inv_freq, which the kernel
    // then does not read.
    let inv_freq = r.inv_freq.0;
    let (qw, kw, eps, has_norm): (&dyn GpuBuf, &dyn GpuBuf, f32, u32) = match &r.norm {
        Some(n) => (n.q_weight, n.k_weight, n.eps, 1),
        None => (inv_freq, inv_freq, 0.0, 0),
    };
    let base = attention::pass1_push(shape, f.plan, r.scale, k_cache, v_cache);
    let mut pc = [0u32; 14];
    pc[..8].copy_from_slice(&base);
    pc[8] = eps.to_bits();
    pc[9] = has_norm;
    pc[10..].copy_from_slice(&place);
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
            r.lens.0,
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
            r.positions.0,
            r.flag.0,
        ],
        f.grid,
        &pc,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::OpsError;

    /// Qwen3-4B's attention shape at `batch` sequences.
    fn shape(batch: u32) -> DecodeShape {
        DecodeShape {
            batch,
            q_heads: 32,
            kv_heads: 8,
            head_dim: 128,
            max_seq: 4096,
        }
    }

    #[test]
    fn the_split_form_keeps_its_layout() {
        let split = Layout::Split([3 * 4096, 3 * 1024, 3 * 1024]);
        let (pc, elems) = placement(split, shape(3)).unwrap();
        assert_eq!(pc, [4096, 1024, 0, 0]);
        assert_eq!(elems, [3 * 4096, 3 * 1024, 3 * 1024]);
    }

    #[test]
    fn the_merged_form_strides_by_the_projection_row() {
        let (pc, elems) = placement(Layout::Merged(16 * 6144), shape(16)).unwrap();
        assert_eq!(pc, [6144, 6144, 4096, 5120]);
        assert_eq!(elems, [16 * 4096, 16 * 1024, 16 * 1024]);
        let e = placement(Layout::Merged(16 * 6144 - 1), shape(16)).unwrap_err();
        assert!(
            matches!(&e, Error::Ops(OpsError::Shape { op, tensor, .. })
                if *op == OP_QKV && *tensor == "qkv"),
            "{e:?}"
        );
    }
}
