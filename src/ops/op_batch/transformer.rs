//! The transformer ops of an [`OpBatch`] on f32 tensors: recorded with
//! their shape checks here, executed through [`crate::ops::nn`] (one
//! built-in dispatch each; fusion leaves them alone).

use super::exec::sbuf;
use super::OpBatch;
use crate::error::OpsError;
use crate::ops::fusion::program::{NnOp, Op};
use crate::ops::nn::{self, DecodeShape, KvShape, PrefillShape};
use crate::ops::tensor::{Shape, Tensor};
use crate::{Batch, Buffer, BufferSlice, Error, Result};

fn shape_err(op: &'static str, tensor: &'static str, detail: String) -> Error {
    Error::Ops(OpsError::Shape { op, tensor, detail })
}

/// `t` must be a vector of `x`'s columns.
fn check_row_vector(op: &'static str, name: &'static str, x: &Tensor, t: &Tensor) -> Result<()> {
    let cols = u64::from(x.shape.cols());
    if t.numel() != cols {
        return Err(shape_err(
            op,
            name,
            format!(
                "has {} elements ({}), expected {cols} (the columns of x, {})",
                t.numel(),
                t.shape,
                x.shape
            ),
        ));
    }
    Ok(())
}

impl OpBatch {
    /// RMSNorm of each row of `x` (a vector is one row) with `weight`, one
    /// element per column (see [`nn::rms_norm`]). For per-head norms, make
    /// `x` a `(tokens × heads)` × `head_dim` matrix.
    pub fn rms_norm(&mut self, x: &Tensor, weight: &Tensor, eps: f32) -> Result<Tensor> {
        const OP: &str = "ops::nn::rms_norm";
        check_row_vector(OP, "weight", x, weight)?;
        nn::check_eps(OP, eps)?;
        let (x_v, w) = (
            self.f32_value(OP, "x", x)?,
            self.f32_value(OP, "weight", weight)?,
        );
        Ok(self.push(Op::Nn(NnOp::RmsNorm { x: x_v, w, eps }), x.shape))
    }

    /// LayerNorm of each row of `x` (a vector is one row) with `weight` and
    /// `bias`, one element per column each (see [`nn::layer_norm`]).
    pub fn layer_norm(
        &mut self,
        x: &Tensor,
        weight: &Tensor,
        bias: &Tensor,
        eps: f32,
    ) -> Result<Tensor> {
        const OP: &str = "ops::nn::layer_norm";
        check_row_vector(OP, "weight", x, weight)?;
        check_row_vector(OP, "bias", x, bias)?;
        nn::check_eps(OP, eps)?;
        let x_v = self.f32_value(OP, "x", x)?;
        let w = self.f32_value(OP, "weight", weight)?;
        let b = self.f32_value(OP, "bias", bias)?;
        let op = Op::Nn(NnOp::LayerNorm { x: x_v, w, b, eps });
        Ok(self.push(op, x.shape))
    }

    /// `silu(gate) * up` element-wise, for tensors of one shape (see
    /// [`nn::silu_mul`]).
    pub fn silu_mul(&mut self, gate: &Tensor, up: &Tensor) -> Result<Tensor> {
        if gate.shape != up.shape {
            return Err(shape_err(
                "ops::nn::silu_mul",
                "up",
                format!("is {}, but gate is {}", up.shape, gate.shape),
            ));
        }
        const OP: &str = "ops::nn::silu_mul";
        let (g, u) = (
            self.f32_value(OP, "gate", gate)?,
            self.f32_value(OP, "up", up)?,
        );
        let op = Op::Nn(NnOp::SiluMul { gate: g, up: u });
        Ok(self.push(op, gate.shape))
    }

    /// Causal softmax of the rows of `x`, in blocks of `q_len` queries
    /// (see [`nn::causal_softmax`]).
    pub fn causal_softmax(&mut self, x: &Tensor, q_len: u32) -> Result<Tensor> {
        const OP: &str = "ops::nn::causal_softmax";
        let (rows, cols) = (x.shape.rows(), x.shape.cols());
        if q_len == 0 || q_len > cols {
            return Err(shape_err(
                OP,
                "q_len",
                format!("{q_len} is not in 1..={cols} (the columns of x)"),
            ));
        }
        if rows % q_len != 0 {
            return Err(shape_err(
                OP,
                "x",
                format!("{rows} rows are not a multiple of q_len ({q_len})"),
            ));
        }
        let v = self.f32_value(OP, "x", x)?;
        Ok(self.push(Op::Nn(NnOp::CausalSoftmax { x: v, q_len }), x.shape))
    }

    /// Rotary embedding of `x` (`tokens × heads × head_dim` elements, in
    /// that order) with `inv_freq` (`head_dim / 2` elements, see
    /// [`nn::rope_inv_freq`]) at the positions in `positions` (one per
    /// token), which the op batch keeps and reads at each execute (write
    /// new positions between executes). See [`nn::rotary`].
    pub fn rotary(
        &mut self,
        x: &Tensor,
        inv_freq: &Tensor,
        positions: &Buffer<u32>,
        heads: u32,
        head_dim: u32,
    ) -> Result<Tensor> {
        let per_token = u64::from(heads) * u64::from(head_dim);
        let tokens = x.numel().checked_div(per_token).unwrap_or(0);
        let tokens = u32::try_from(tokens).unwrap_or(u32::MAX);
        let elems = [
            x.numel(),
            x.numel(),
            inv_freq.numel(),
            positions.len() as u64,
        ];
        nn::rope::check_args([tokens, heads, head_dim], elems)?;
        self.same_device("ops::nn::rotary", "positions", positions)?;
        const OP: &str = "ops::nn::rotary";
        let x_v = self.f32_value(OP, "x", x)?;
        let inv = self.f32_value(OP, "inv_freq", inv_freq)?;
        let pos = self.keep_words(positions);
        let op = Op::Nn(NnOp::Rotary {
            x: x_v,
            inv,
            pos,
            heads,
            head_dim,
        });
        Ok(self.push(op, x.shape))
    }

    /// Causal prefill attention (see [`nn::attention_prefill`]): `q` of
    /// `batch × tokens × q_heads × head_dim` elements, `k` and `v` of
    /// `batch × tokens × kv_heads × head_dim`; the result has `q`'s shape.
    pub fn attention_prefill(
        &mut self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        shape: PrefillShape,
        scale: f32,
    ) -> Result<Tensor> {
        nn::prefill::check_args(shape, scale, [q.numel(), k.numel(), v.numel(), q.numel()])?;
        const OP: &str = "ops::nn::attention_prefill";
        let qv = self.f32_value(OP, "q", q)?;
        let kv = self.f32_value(OP, "k", k)?;
        let vv = self.f32_value(OP, "v", v)?;
        let op = Op::Nn(NnOp::Prefill {
            q: qv,
            k: kv,
            v: vv,
            shape,
            scale,
        });
        Ok(self.push(op, q.shape))
    }

    /// Rows of `table` (a `vocab × dim` matrix) for the token ids in `ids`:
    /// a `tokens × dim` matrix (see [`nn::embedding`]). The op batch keeps
    /// `ids` and `flag` and reads them at each execute; ids past the
    /// vocabulary give zero rows and are counted in `flag[0]`, and the
    /// launch's ticket reports them ([`OpsError::Flagged`]; see the op
    /// batch's notes on launch reports).
    pub fn embedding(
        &mut self,
        table: &Tensor,
        ids: &Buffer<u32>,
        flag: &Buffer<u32>,
    ) -> Result<Tensor> {
        const OP: &str = "ops::nn::embedding";
        let Shape::Matrix(vocab, dim) = table.shape else {
            return Err(shape_err(
                OP,
                "table",
                format!("is {}; it must be a vocab x dim matrix", table.shape),
            ));
        };
        let tokens = ids.len() as u64;
        let out_elems = tokens * u64::from(dim);
        let elems = [table.numel(), tokens, out_elems, flag.len() as u64];
        let tokens = nn::gather::check_args([vocab, dim], elems)?;
        self.same_device(OP, "ids", ids)?;
        self.same_device(OP, "flag", flag)?;
        let t = self.f32_value(OP, "table", table)?;
        self.note_flag(OP, "token ids past the vocabulary", flag)?;
        let (ids, flag) = (self.keep_words(ids), self.keep_words(flag));
        let op = Op::Nn(NnOp::Embedding {
            table: t,
            ids,
            flag,
        });
        Ok(self.push(op, Shape::Matrix(tokens, dim)))
    }

    /// Decode attention (see [`nn::attention_decode`]): `q` of `batch ×
    /// q_heads × head_dim` elements against caches `k_cache` and `v_cache`
    /// of `batch × kv_heads × max_seq × head_dim`, with the lengths in
    /// `lens` (one per sequence), which the op batch keeps and reads at each
    /// execute. The result has `q`'s shape. Its scratch buffer is made here,
    /// once.
    pub fn attention_decode(
        &mut self,
        q: &Tensor,
        k_cache: &Tensor,
        v_cache: &Tensor,
        lens: &Buffer<u32>,
        shape: DecodeShape,
        scale: f32,
    ) -> Result<Tensor> {
        const OP: &str = "ops::nn::attention_decode";
        let elems = [
            q.numel(),
            k_cache.numel(),
            v_cache.numel(),
            lens.len() as u64,
            q.numel(),
        ];
        nn::attention::check_args(shape, scale, elems)?;
        self.same_device(OP, "lens", lens)?;
        let qv = self.f32_value(OP, "q", q)?;
        let kv = self.f32_value(OP, "k_cache", k_cache)?;
        let vv = self.f32_value(OP, "v_cache", v_cache)?;
        let len = nn::attention::scratch_len(OP, &self.gpu, shape)?;
        self.nn_scratch.push(self.gpu.alloc::<f32>(len)?);
        let lens = self.keep_words(lens);
        let op = Op::Nn(NnOp::Decode {
            q: qv,
            k: kv,
            v: vv,
            lens,
            scratch: self.nn_scratch.len() - 1,
            shape,
            scale,
        });
        Ok(self.push(op, q.shape))
    }

    /// Appends `new` (`batch × steps × kv_heads × head_dim` elements) to
    /// `cache` (`batch × kv_heads × max_seq × head_dim`) in place, at the
    /// positions in `positions` (one per sequence), which the op batch
    /// keeps and reads at each execute; see [`nn::kv_append`]. Call once for
    /// the keys and once for the values: a position past `max_seq` writes
    /// nothing and adds 1 to `flag[0]` per token and head in each call,
    /// and the launch's ticket reports it ([`OpsError::Flagged`]).
    pub fn kv_append_(
        &mut self,
        cache: &Tensor,
        new: &Tensor,
        positions: &Buffer<u32>,
        flag: &Buffer<u32>,
        shape: KvShape,
    ) -> Result<()> {
        const OP: &str = "ops::nn::kv_append";
        let (n, c) = (new.numel(), cache.numel());
        let elems = [n, n, c, c, positions.len() as u64, flag.len() as u64];
        nn::kv::check_args(shape, elems)?;
        self.same_device(OP, "positions", positions)?;
        self.same_device(OP, "flag", flag)?;
        let (nv, cv) = (
            self.f32_value(OP, "new", new)?,
            self.f32_value(OP, "cache", cache)?,
        );
        self.note_flag(OP, "positions past the cache (token x kv head)", flag)?;
        let (pos, flag) = (self.keep_words(positions), self.keep_words(flag));
        let op = Op::Nn(NnOp::KvAppend {
            new: nv,
            cache: cv,
            pos,
            flag,
            shape,
        });
        self.push_into(op, cache)
    }

    /// Keeps a `u32` buffer for the ops; its index.
    fn keep_words(&mut self, b: &Buffer<u32>) -> usize {
        self.words.push(b.clone());
        self.words.len() - 1
    }

    /// Has every launch report `flag` (which `op` counts `what` into):
    /// checked before anything of the op is kept.
    fn note_flag(
        &mut self,
        op: &'static str,
        what: &'static str,
        flag: &Buffer<u32>,
    ) -> Result<()> {
        let report = match &self.report {
            Some(r) => r.clone(),
            None => {
                let r = std::sync::Arc::new(super::report::FlagReport::new(&self.gpu)?);
                self.report = Some(r.clone());
                r
            }
        };
        report.note(op, what, flag)
    }

    /// A buffer of another device is refused.
    fn same_device(&self, op: &'static str, name: &'static str, b: &Buffer<u32>) -> Result<()> {
        if b.device().id() != self.gpu.id() {
            return Err(shape_err(
                op,
                name,
                "belongs to another device than the op batch".into(),
            ));
        }
        Ok(())
    }
}

fn words(ob: &OpBatch, i: usize) -> Result<&Buffer<u32>> {
    ob.words.get(i).ok_or_else(|| Error::TensorUnavailable {
        detail: "op batch internal error: a transformer op names no word buffer".into(),
    })
}

/// Records transformer op `op` writing `out` (of `shape`).
pub(super) fn record(
    ob: &OpBatch,
    batch: &mut Batch,
    op: NnOp,
    out: &BufferSlice<'_, f32>,
    shape: Shape,
) -> Result<()> {
    let (rows, cols) = (shape.rows(), shape.cols());
    match op {
        NnOp::RmsNorm { x, w, eps } => {
            nn::rms_norm(batch, &sbuf(ob, x)?, &sbuf(ob, w)?, out, rows, cols, eps)
        }
        NnOp::LayerNorm { x, w, b, eps } => nn::layer_norm(
            batch,
            &sbuf(ob, x)?,
            &sbuf(ob, w)?,
            &sbuf(ob, b)?,
            out,
            rows,
            cols,
            eps,
        ),
        NnOp::SiluMul { gate, up } => {
            nn::silu_mul(batch, &sbuf(ob, gate)?, &sbuf(ob, up)?, out, rows, cols)
        }
        NnOp::CausalSoftmax { x, q_len } => {
            nn::causal_softmax(batch, &sbuf(ob, x)?, out, rows, cols, q_len)
        }
        NnOp::Rotary {
            x,
            inv,
            pos,
            heads,
            head_dim,
        } => {
            let pos = words(ob, pos)?;
            let tokens = pos.len() as u32;
            let (xb, ib) = (sbuf(ob, x)?, sbuf(ob, inv)?);
            nn::rotary(batch, &xb, out, &ib, pos, tokens, heads, head_dim)
        }
        NnOp::Prefill {
            q,
            k,
            v,
            shape,
            scale,
        } => {
            let (qb, kb, vb) = (sbuf(ob, q)?, sbuf(ob, k)?, sbuf(ob, v)?);
            nn::attention_prefill(batch, &qb, &kb, &vb, out, shape, scale)
        }
        NnOp::Embedding { table, ids, flag } => {
            let Shape::Matrix(vocab, dim) = ob.graph.values[table].shape else {
                return Err(Error::TensorUnavailable {
                    detail: "op batch internal error: an embedding table is not a matrix".into(),
                });
            };
            // The flag word may be shared with earlier embeddings, whose
            // counts must land first.
            batch.barrier();
            let (tb, ib, fb) = (sbuf(ob, table)?, words(ob, ids)?, words(ob, flag)?);
            nn::embedding(batch, &tb, ib, out, fb, vocab, dim)
        }
        NnOp::Decode {
            q,
            k,
            v,
            lens,
            scratch,
            shape,
            scale,
        } => {
            let part = ob
                .nn_scratch
                .get(scratch)
                .ok_or_else(|| Error::TensorUnavailable {
                    detail: "op batch internal error: a decode attention has no scratch".into(),
                })?;
            let (qb, kb, vb) = (sbuf(ob, q)?, sbuf(ob, k)?, sbuf(ob, v)?);
            let lb = words(ob, lens)?;
            nn::attention::record(batch, &qb, &kb, &vb, lb, out, part, shape, scale)
        }
        NnOp::KvAppend {
            new,
            cache: _,
            pos,
            flag,
            shape,
        } => {
            // As for embeddings: counts into a shared flag word in order.
            batch.barrier();
            let nb = &sbuf(ob, new)?;
            let (pb, fb) = (words(ob, pos)?, words(ob, flag)?);
            // One cache: the kernel's key and value operands are the same
            // buffers, so each element is written twice with one value by
            // one invocation.
            nn::kv_append(batch, nb, nb, out, out, pb, fb, shape)
        }
    }
}
