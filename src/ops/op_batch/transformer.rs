//! The transformer ops of an [`OpBatch`] on f32 tensors: recorded with
//! their shape checks here, executed through [`crate::ops::nn`] (one
//! built-in dispatch each; fusion leaves them alone).

use super::exec::sbuf;
use super::OpBatch;
use crate::error::OpsError;
use crate::ops::fusion::graph::{NnOp, Op};
use crate::ops::nn;
use crate::ops::tensor::{Shape, Tensor};
use crate::{Batch, Buffer, Error, Result};

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
        let (x_v, w) = (self.value(x)?, self.value(weight)?);
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
        let (x_v, w, b) = (self.value(x)?, self.value(weight)?, self.value(bias)?);
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
        let (g, u) = (self.value(gate)?, self.value(up)?);
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
        let v = self.value(x)?;
        Ok(self.push(Op::Nn(NnOp::CausalSoftmax { x: v, q_len }), x.shape))
    }
}

/// Records transformer op `op` writing `out` (of `shape`).
pub(super) fn record(
    ob: &OpBatch,
    batch: &mut Batch,
    op: NnOp,
    out: &Buffer<f32>,
    shape: Shape,
) -> Result<()> {
    let (rows, cols) = (shape.rows(), shape.cols());
    match op {
        NnOp::RmsNorm { x, w, eps } => {
            nn::rms_norm(batch, sbuf(ob, x)?, sbuf(ob, w)?, out, rows, cols, eps)
        }
        NnOp::LayerNorm { x, w, b, eps } => nn::layer_norm(
            batch,
            sbuf(ob, x)?,
            sbuf(ob, w)?,
            sbuf(ob, b)?,
            out,
            rows,
            cols,
            eps,
        ),
        NnOp::SiluMul { gate, up } => {
            nn::silu_mul(batch, sbuf(ob, gate)?, sbuf(ob, up)?, out, rows, cols)
        }
        NnOp::CausalSoftmax { x, q_len } => {
            nn::causal_softmax(batch, sbuf(ob, x)?, out, rows, cols, q_len)
        }
    }
}
