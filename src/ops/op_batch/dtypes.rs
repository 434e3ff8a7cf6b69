//! Element types of an op batch's tensors: the rules each op applies when
//! it is recorded (which types it takes, operands of one type), casts,
//! typed fills and typed reads.
//!
//! Element-wise ops take f32, f16 and bf16 tensors, compute in f32 and
//! round each result to its tensor's type (round to nearest even, as
//! [`F16::from_f32`](crate::ops::F16::from_f32) and
//! [`Bf16::from_f32`](crate::ops::Bf16::from_f32) do); 16-bit tensors run
//! through generated kernels (the `glsl` feature), fused or not. Every
//! other op takes f32 tensors only. `u32` tensors are uploaded, imported,
//! read and cast to and from f32.

use super::{shape_err, OpBatch};
use crate::ops::dtype::{DType, TensorElement};
use crate::ops::fusion::program::{Op, V};
use crate::ops::tensor::{Shape, Tensor};
use crate::{Error, Result};

/// The error for an operand of the wrong element type.
pub(super) fn dtype_err(op: &'static str, t: &Tensor, what: &str, detail: String) -> Error {
    Error::Ops(crate::error::OpsError::Dtype {
        op,
        operand: t.describe(what),
        dtype: t.dtype.name(),
        detail,
    })
}

/// Whether a cast from `from` to `to` is defined: among f32, f16 and
/// bf16 (narrowing rounds to nearest even), u32 to f32 (rounds to nearest
/// even above 2^24), f32 to u32 (truncates toward zero, saturating: NaN
/// and negatives give 0, values from 2^32 give `u32::MAX`).
pub(crate) fn cast_defined(from: DType, to: DType) -> bool {
    (from.is_float() && to.is_float())
        || matches!(
            (from, to),
            (DType::U32, DType::F32) | (DType::F32, DType::U32)
        )
}

/// Whether a node runs as a generated kernel when it is not fused: an
/// element-wise op, fill or cast that touches a type other than f32
/// (there is no built-in kernel for it), and every cast.
pub(crate) fn generated_single(g: &crate::ops::fusion::program::Program, n: usize) -> bool {
    let node = &g.nodes[n];
    let typed = || {
        node.op
            .inputs()
            .into_iter()
            .chain(std::iter::once(node.out))
            .any(|v| g.values[v].dtype != DType::F32)
    };
    match node.op {
        Op::Cast(_) => true,
        Op::Unary(..) | Op::Binary(..) | Op::AddRow(..) | Op::Fill(_) => {
            typed() || super::views::touches_views(g, n)
        }
        _ => false,
    }
}

/// Why this build cannot run element-wise ops of a type other than f32:
/// no built-in kernel covers them, and generated kernels need the `glsl`
/// feature (`None` when it can).
fn generated_missing(d: DType) -> Option<String> {
    (d != DType::F32 && !cfg!(feature = "glsl")).then(|| {
        "element-wise ops on types other than f32 run as generated kernels, \
         which need the `glsl` feature"
            .into()
    })
}

impl OpBatch {
    /// The value of `t`, an operand of an element-wise op: f32, f16 or
    /// bf16, and a type this device and build can compute on.
    pub(super) fn float_value(&self, op: &'static str, what: &str, t: &Tensor) -> Result<V> {
        let v = self.value(t)?;
        if !t.dtype.is_float() {
            return Err(dtype_err(
                op,
                t,
                what,
                "element-wise ops take f32, f16 and bf16 tensors (cast u32 tensors to f32 first)"
                    .into(),
            ));
        }
        t.dtype.check(&self.gpu)?;
        if let Some(why) = generated_missing(t.dtype) {
            return Err(dtype_err(op, t, what, why));
        }
        self.check_view_kernels(op, what, t, v)?;
        Ok(v)
    }

    /// The value of `t`, an operand of an op that takes f32 only.
    pub(crate) fn f32_value(&self, op: &'static str, what: &str, t: &Tensor) -> Result<V> {
        let v = self.value(t)?;
        if t.dtype != DType::F32 {
            return Err(dtype_err(
                op,
                t,
                what,
                "the op takes f32 tensors only (cast it with OpBatch::cast first)".into(),
            ));
        }
        self.check_plain(op, what, t, v)?;
        Ok(v)
    }

    /// `b` (named `what`) must have `a`'s element type.
    pub(super) fn same_dtype(
        &self,
        op: &'static str,
        a: &Tensor,
        what: &str,
        b: &Tensor,
    ) -> Result<()> {
        if a.dtype != b.dtype {
            return Err(dtype_err(
                op,
                b,
                what,
                format!(
                    "{} is {}: both operands must have one element type (cast one first)",
                    a.describe("the first operand"),
                    a.dtype
                ),
            ));
        }
        Ok(())
    }

    /// `x` converted to `dtype`, element-wise, as a new tensor: among f32,
    /// f16 and bf16 (widening exact, narrowing rounded to nearest even,
    /// overflow to infinity, NaN stays NaN, as
    /// [`F16::from_f32`](crate::ops::F16::from_f32) and
    /// [`Bf16::from_f32`](crate::ops::Bf16::from_f32) do), `u32` to f32
    /// (exact below 2^24, else rounded to nearest even, as Rust's `as f32`)
    /// and f32 to `u32` (toward zero, saturating: NaN and negatives give 0,
    /// 2^32 and above `u32::MAX`, as Rust's `as u32`). Other pairs are an
    /// [`OpsError::Dtype`](crate::ops::OpsError::Dtype). A cast fuses with the element-wise ops around
    /// it: `cast(relu(x + y), F32)` of f16 `x` and `y` is one kernel.
    /// Casts that touch `u32` need the `glsl` feature (without it, casts
    /// among the float types run on the built-in conversion kernels).
    ///
    /// ```
    /// # fn main() -> vkcompute::Result<()> {
    /// use vkcompute::ops::{DType, F16};
    /// let gpu = vkcompute::Device::new()?;
    /// let mut ops = gpu.ops();
    /// // 1 + 2^-11 lies halfway between two halves: it rounds to even.
    /// let x = ops.upload(&[1.0f32, 1.00048828125, -3.0])?;
    /// let h = ops.cast(&x, DType::F16)?;
    /// ops.execute_blocking()?;
    /// assert_eq!(h.dtype(), DType::F16);
    /// assert_eq!(ops.read_as::<F16>(&h)?, [1.0f32, 1.0, -3.0].map(F16::from_f32));
    /// assert_eq!(ops.read(&h)?, [1.0, 1.0, -3.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn cast(&mut self, x: &Tensor, dtype: DType) -> Result<Tensor> {
        const OP: &str = "ops::cast";
        let v = self.value(x)?;
        if !cast_defined(x.dtype, dtype) {
            return Err(dtype_err(
                OP,
                x,
                "x",
                format!(
                    "it cannot be cast to {dtype}: casts go among f32, f16 and bf16, \
                     and between u32 and f32"
                ),
            ));
        }
        x.dtype.check(&self.gpu)?;
        dtype.check(&self.gpu)?;
        self.check_view_kernels(OP, "x", x, v)?;
        if !cfg!(feature = "glsl") && (x.dtype == DType::U32 || dtype == DType::U32) {
            return Err(dtype_err(
                OP,
                x,
                "x",
                format!("the cast to {dtype} runs as a generated kernel, which needs the `glsl` feature"),
            ));
        }
        Ok(self.push_typed(Op::Cast(v), x.shape, dtype))
    }

    /// A tensor of `shape` and `dtype` (f32, f16 or bf16) with every
    /// element `value` rounded to `dtype`.
    pub fn full_as(&mut self, shape: Shape, value: f32, dtype: DType) -> Result<Tensor> {
        const OP: &str = "ops::fill";
        Self::check_shape(OP, "the shape", shape)?;
        if !dtype.is_float() {
            return Err(Error::Ops(crate::error::OpsError::Dtype {
                op: OP,
                operand: format!("the fill {shape}"),
                dtype: dtype.name(),
                detail: "fills make f32, f16 and bf16 tensors".into(),
            }));
        }
        dtype.check(&self.gpu)?;
        if let Some(detail) = generated_missing(dtype) {
            return Err(Error::Ops(crate::error::OpsError::Dtype {
                op: OP,
                operand: format!("the fill {shape}"),
                dtype: dtype.name(),
                detail,
            }));
        }
        Ok(self.push_typed(Op::Fill(value), shape, dtype))
    }

    /// The value of `t` after the last execute or graph launch, downloaded
    /// as its own element type `T` (exact: the bits the GPU holds). Errors
    /// as [`OpBatch::read`], and [`OpsError::Dtype`](crate::ops::OpsError::Dtype) when `T` is not `t`'s
    /// element type.
    pub fn read_as<T: TensorElement>(&self, t: &Tensor) -> Result<Vec<T>> {
        if T::DTYPE != t.dtype {
            return Err(dtype_err(
                "OpBatch::read_as",
                t,
                "t",
                format!("read_as::<{}> reads {} tensors", T::DTYPE, T::DTYPE),
            ));
        }
        let bytes = self.read_elements(t)?;
        if bytes.len() as u64 != t.byte_size() {
            return Err(shape_err(
                "OpBatch::read_as",
                format!("{} bytes read, {} expected", bytes.len(), t.byte_size()),
            ));
        }
        let mut out = vec![T::zeroed(); t.numel() as usize];
        bytemuck::cast_slice_mut::<T, u8>(&mut out).copy_from_slice(&bytes);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::fusion::program::Program;
    use crate::ops::Unary;

    #[test]
    fn casts_defined() {
        use DType::*;
        for a in [F32, F16, Bf16] {
            for b in [F32, F16, Bf16] {
                assert!(cast_defined(a, b), "{a} -> {b}");
            }
        }
        assert!(cast_defined(U32, F32) && cast_defined(F32, U32));
        assert!(!cast_defined(U32, F16) && !cast_defined(Bf16, U32) && !cast_defined(U32, U32));
    }

    #[test]
    fn which_nodes_need_generated_kernels() {
        let v = Shape::Vector(4);
        let mut g = Program::default();
        let x = g.leaf_typed(v, DType::F32);
        let h = g.leaf_typed(v, DType::F16);
        g.op(Op::Unary(Unary::Relu, x), v);
        g.op_typed(Op::Unary(Unary::Relu, h), v, DType::F16);
        g.op_typed(Op::Cast(x), v, DType::F32);
        g.op(Op::Fill(1.0), v);
        g.op_typed(Op::Fill(1.0), v, DType::Bf16);
        g.op(Op::Sum(x), Shape::Vector(1));
        let got: Vec<bool> = (0..g.nodes.len())
            .map(|n| generated_single(&g, n))
            .collect();
        assert_eq!(got, [false, true, true, false, true, false]);
        assert_eq!(g.values[h].bytes(), 8);
        assert_eq!(g.values[x].bytes(), 16);
    }
}
