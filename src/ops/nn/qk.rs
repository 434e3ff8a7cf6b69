//! The q/k side of a layer's rows in one dispatch
//! (`shaders/nn_qk_rope_append.comp`): per-head RMSNorm of the queries and
//! keys (Qwen3's q/k norms; optional), rotary embedding at each token's
//! position, and the append of the rotated keys and the values to the KV
//! caches. It does what [`rms_norm`](super::rms_norm) (per head, twice),
//! [`rotary`](super::rotary) and [`kv_append`](super::kv_append) do, with
//! their formulas, in one command instead of four.

use crate::batch::Batch;
use crate::buffer::GpuBuf;
use crate::error::Result;

use super::{
    check_at_least, check_disjoint, check_elems, check_eps, check_heads, check_nonzero, device_for,
    kernel_name, launch, product, rope, rows_grid, NnElement, NnOperand,
};

const OP: &str = "ops::nn::qk_norm_rope_append";

/// The shapes of a [`qk_norm_rope_append`]: queries `[batch, steps,
/// q_heads, head_dim]`, keys and values `[batch, steps, kv_heads,
/// head_dim]` (token-major, as a projection writes them), each cache
/// `[batch, kv_heads, max_seq, head_dim]` (as [`kv_append`](super::kv_append)
/// and [`attention_decode`](super::attention_decode) take them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QkShape {
    /// Sequences.
    pub batch: u32,
    /// New tokens per sequence (1 in decode, a prompt's rows in prefill).
    pub steps: u32,
    /// Query heads (a multiple of `kv_heads`).
    pub q_heads: u32,
    /// Key/value heads.
    pub kv_heads: u32,
    /// Elements per head: even, at most
    /// [`MAX_ROTARY_HEAD_DIM`](super::MAX_ROTARY_HEAD_DIM).
    pub head_dim: u32,
    /// Positions each sequence's cache holds.
    pub max_seq: u32,
}

/// The per-head RMSNorm of a [`qk_norm_rope_append`]: the weights of the
/// query heads and of the key heads (`head_dim` each, shared by all heads)
/// and epsilon.
#[derive(Clone, Copy)]
pub struct QkNorm<'a> {
    pub(super) q_weight: &'a dyn GpuBuf,
    pub(super) k_weight: &'a dyn GpuBuf,
    pub(super) elems: [u64; 2],
    pub(super) eps: f32,
}

impl<'a> QkNorm<'a> {
    /// The norm with `q_weight` and `k_weight` (`head_dim` f32 elements
    /// each) and `eps` (finite, >= 0); [`qk_norm_rope_append`] checks them.
    pub fn new(
        q_weight: &'a impl NnOperand<f32>,
        k_weight: &'a impl NnOperand<f32>,
        eps: f32,
    ) -> Self {
        QkNorm {
            q_weight,
            k_weight,
            elems: [q_weight.elems(), k_weight.elems()],
            eps,
        }
    }
}

impl std::fmt::Debug for QkNorm<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QkNorm")
            .field("q_weight_elems", &self.elems[0])
            .field("k_weight_elems", &self.elems[1])
            .field("eps", &self.eps)
            .finish()
    }
}

/// The checks of [`qk_norm_rope_append`] on its shape and the element
/// counts of q, k, v, inv_freq, positions, k_cache, v_cache, flag and
/// (with a norm) the two norm weights; the query and key/value elements.
fn check_args(shape: QkShape, elems: [u64; 8], norm: Option<[u64; 2]>) -> Result<(u64, u64)> {
    check_args_of(OP, shape, elems, norm)
}

/// [`check_args`] for `op` (its name in the errors).
pub(super) fn check_args_of(
    op: &'static str,
    shape: QkShape,
    elems: [u64; 8],
    norm: Option<[u64; 2]>,
) -> Result<(u64, u64)> {
    let QkShape {
        batch: b,
        steps,
        q_heads,
        kv_heads,
        head_dim,
        max_seq,
    } = shape;
    check_nonzero(op, "batch", b)?;
    check_nonzero(op, "steps", steps)?;
    check_heads(op, q_heads, kv_heads, head_dim)?;
    rope::check_head_dim(op, head_dim)?;
    check_nonzero(op, "max_seq", max_seq)?;
    let n_q = product(op, "q", &[b, steps, q_heads, head_dim])?;
    let n_kv = product(op, "k", &[b, steps, kv_heads, head_dim])?;
    let n_cache = product(op, "k_cache", &[b, kv_heads, max_seq, head_dim])?;
    check_elems(op, "q", elems[0], n_q)?;
    check_elems(op, "k", elems[1], n_kv)?;
    check_elems(op, "v", elems[2], n_kv)?;
    check_elems(op, "inv_freq", elems[3], u64::from(head_dim / 2))?;
    check_elems(op, "positions", elems[4], u64::from(b))?;
    check_elems(op, "k_cache", elems[5], n_cache)?;
    check_elems(op, "v_cache", elems[6], n_cache)?;
    check_at_least(op, "flag", elems[7], 1)?;
    if let Some([qw, kw]) = norm {
        check_elems(op, "q_weight", qw, u64::from(head_dim))?;
        check_elems(op, "k_weight", kw, u64::from(head_dim))?;
    }
    product(op, "rows", &[b, steps, q_heads + kv_heads])?;
    Ok((n_q, n_kv))
}

/// Records, in one dispatch, for every token `s` of sequence `b` at
/// position `positions[b] + s`:
///
/// 1. with `norm`, RMSNorm of each query head and each key head with the
///    norm's weights, as [`rms_norm`](super::rms_norm) computes it
///    (`x / sqrt(mean(x²) + eps) * w`, f32);
/// 2. rotary embedding of each query and key head at the token's position,
///    as [`rotary`](super::rotary) computes it (rotate-half form,
///    `inv_freq` of [`rope_inv_freq`](super::rope_inv_freq), the same
///    reduction of the angle by 2π);
/// 3. the append of the rotated key and of the value to `k_cache` and
///    `v_cache` at the position, as [`kv_append`](super::kv_append) does.
///
/// The normed and rotated queries and keys are written back to `q` and `k`
/// (in place: prefill attention reads them from there); `v` is only read.
/// `q`, `k` and `v` are f32 (`[batch, steps, heads, head_dim]`); the
/// caches `f32`, [`F16`](crate::ops::F16) or [`Bf16`](crate::ops::Bf16)
/// (`[batch, kv_heads, max_seq, head_dim]`), rounded once to nearest even.
/// `positions` holds one `u32` per sequence, read on the GPU (a graph
/// replays with new positions). Llama-style models pass no `norm`.
///
/// A token whose position is at or past `max_seq` writes no cache entry
/// and adds 1 to `flag[0]` (once per token and key head), a `u32` the
/// caller owns: zero it before, read it after. Its query and key are still
/// normed and rotated.
///
/// Bad shapes and element counts (any of the tensors, the weights, the
/// positions, an empty flag), head counts that do not divide, an odd or
/// too large `head_dim`, a bad `eps`, and `q`, `k`, `v` or the caches
/// sharing bytes are [`OpsError::Shape`](crate::error::OpsError::Shape) or
/// [`OpsError::Param`](crate::error::OpsError::Param) errors; nothing is
/// recorded then.
#[allow(clippy::too_many_arguments)]
pub fn qk_norm_rope_append<C: NnElement>(
    batch: &mut Batch,
    q: &impl NnOperand<f32>,
    k: &impl NnOperand<f32>,
    v: &impl NnOperand<f32>,
    norm: Option<QkNorm<'_>>,
    inv_freq: &impl NnOperand<f32>,
    positions: &impl NnOperand<u32>,
    k_cache: &impl NnOperand<C>,
    v_cache: &impl NnOperand<C>,
    flag: &impl NnOperand<u32>,
    shape: QkShape,
) -> Result<()> {
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
    let weights = norm.map(|n| n.elems);
    check_args(shape, elems, weights)?;
    if let Some(n) = &norm {
        check_eps(OP, n.eps)?;
    }
    check_disjoint(OP, "q", q, "k", k)?;
    check_disjoint(OP, "q", q, "v", v)?;
    check_disjoint(OP, "k", k, "v", v)?;
    check_disjoint(OP, "k_cache", k_cache, "v_cache", v_cache)?;
    for (name, c) in [("k_cache", k_cache as &dyn GpuBuf), ("v_cache", v_cache)] {
        check_disjoint(OP, name, c, "q", q)?;
        check_disjoint(OP, name, c, "k", k)?;
        check_disjoint(OP, name, c, "v", v)?;
    }
    let QkShape {
        batch: b,
        steps,
        q_heads,
        kv_heads,
        head_dim,
        max_seq,
    } = shape;
    let gpu = device_for::<C>(OP, k_cache)?;
    let rows = b * steps * (q_heads + kv_heads); // checked by check_args
    let grid = rows_grid(OP, &gpu, rows)?;
    let name = kernel_name::<C>([
        "nn_qk_rope_append",
        "nn_qk_rope_append_f16",
        "nn_qk_rope_append_bf16",
    ]);
    // Without a norm the weight bindings take inv_freq, which the kernel
    // then does not read.
    let (qw, kw, eps, has_norm): (&dyn GpuBuf, &dyn GpuBuf, f32, u32) = match &norm {
        Some(n) => (n.q_weight, n.k_weight, n.eps, 1),
        None => (inv_freq, inv_freq, 0.0, 0),
    };
    launch(
        batch,
        &gpu,
        name,
        &[q, k, v, qw, kw, inv_freq, positions, k_cache, v_cache, flag],
        grid,
        &[
            b,
            steps,
            q_heads,
            kv_heads,
            head_dim / 2,
            max_seq,
            eps.to_bits(),
            has_norm,
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> QkShape {
        QkShape {
            batch: 2,
            steps: 3,
            q_heads: 4,
            kv_heads: 2,
            head_dim: 8,
            max_seq: 16,
        }
    }

    /// Element counts that fit [`shape`].
    fn fits() -> [u64; 8] {
        [
            2 * 3 * 4 * 8,
            2 * 3 * 2 * 8,
            2 * 3 * 2 * 8,
            4,
            2,
            2 * 2 * 16 * 8,
            2 * 2 * 16 * 8,
            1,
        ]
    }

    #[test]
    fn fitting_shapes_pass_and_count_the_rows() {
        assert_eq!(
            check_args(shape(), fits(), Some([8, 8])).unwrap(),
            (192, 96)
        );
        assert!(check_args(shape(), fits(), None).is_ok());
    }

    #[test]
    fn each_bad_count_names_its_tensor() {
        let names = [
            "q",
            "k",
            "v",
            "inv_freq",
            "positions",
            "k_cache",
            "v_cache",
            "flag",
        ];
        for (i, name) in names.iter().enumerate() {
            let mut e = fits();
            e[i] = if *name == "flag" { 0 } else { e[i] + 1 };
            let err = check_args(shape(), e, None).unwrap_err().to_string();
            assert!(err.contains(&format!("{name}: has")), "{name}: {err}");
        }
        let err = check_args(shape(), fits(), Some([8, 7])).unwrap_err();
        assert!(err.to_string().contains("k_weight: has 7"), "{err}");
    }

    #[test]
    fn bad_dimensions_are_refused_with_their_limit() {
        let odd = QkShape {
            head_dim: 7,
            ..shape()
        };
        let e = check_args(odd, fits(), None).unwrap_err().to_string();
        assert!(e.contains("head_dim") && e.contains("even"), "{e}");
        let gqa = QkShape {
            q_heads: 3,
            ..shape()
        };
        let e = check_args(gqa, fits(), None).unwrap_err().to_string();
        assert!(e.contains("not a multiple of kv_heads"), "{e}");
        for zero in [
            QkShape {
                batch: 0,
                ..shape()
            },
            QkShape {
                steps: 0,
                ..shape()
            },
            QkShape {
                max_seq: 0,
                ..shape()
            },
        ] {
            let e = check_args(zero, fits(), None).unwrap_err().to_string();
            assert!(e.contains("is 0"), "{e}");
        }
    }
}
