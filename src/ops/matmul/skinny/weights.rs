//! The weights of [`super::linear`]: f32, f16 or bf16 `[n, k]` matrices.

use crate::buffer::Buffer;

use super::super::super::dtype::{Bf16, DType, F16};
use super::same;

/// The weights of a [`linear`] layer: an `[n, k]` row-major matrix (row i
/// is output i's weights, as `nn.Linear` stores them) of f32, [`F16`] or
/// [`Bf16`]. Made from a buffer reference with `.into()`, or implicitly by
/// [`linear`].
///
/// [`linear`]: super::linear
#[derive(Debug, Clone, Copy)]
pub enum Weights<'a> {
    /// f32 weights.
    F32(&'a Buffer<f32>),
    /// IEEE half weights, widened in the kernel.
    F16(&'a Buffer<F16>),
    /// bfloat16 weights, widened in the kernel.
    Bf16(&'a Buffer<Bf16>),
}

impl<'a> From<&'a Buffer<f32>> for Weights<'a> {
    fn from(b: &'a Buffer<f32>) -> Self {
        Weights::F32(b)
    }
}

impl<'a> From<&'a Buffer<F16>> for Weights<'a> {
    fn from(b: &'a Buffer<F16>) -> Self {
        Weights::F16(b)
    }
}

impl<'a> From<&'a Buffer<Bf16>> for Weights<'a> {
    fn from(b: &'a Buffer<Bf16>) -> Self {
        Weights::Bf16(b)
    }
}

impl Weights<'_> {
    /// The stored element type.
    pub fn dtype(&self) -> DType {
        match self {
            Weights::F32(_) => DType::F32,
            Weights::F16(_) => DType::F16,
            Weights::Bf16(_) => DType::Bf16,
        }
    }

    /// Elements held.
    pub fn len(&self) -> usize {
        match self {
            Weights::F32(b) => b.len(),
            Weights::F16(b) => b.len(),
            Weights::Bf16(b) => b.len(),
        }
    }

    /// Whether no element is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(super) fn aliases(&self, y: &Buffer<f32>) -> bool {
        match self {
            Weights::F32(b) => same(*b, y),
            Weights::F16(b) => same(*b, y),
            Weights::Bf16(b) => same(*b, y),
        }
    }

    pub(super) fn bind(&self) -> &dyn crate::buffer::GpuBuf {
        match self {
            Weights::F32(b) => *b,
            Weights::F16(b) => *b,
            Weights::Bf16(b) => *b,
        }
    }
}
