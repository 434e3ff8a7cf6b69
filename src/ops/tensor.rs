//! Tensors of an [`OpBatch`](super::OpBatch): handles to values recorded in
//! it, shaped as vectors or row-major matrices.

use std::sync::Arc;

use super::dtype::DType;

/// The shape of a tensor: a vector of `len` elements or a row-major
/// `rows`×`cols` matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shape {
    /// A vector.
    Vector(u32),
    /// A row-major matrix (rows, cols).
    Matrix(u32, u32),
}

impl Shape {
    /// Number of elements.
    pub fn numel(self) -> u64 {
        match self {
            Shape::Vector(n) => u64::from(n),
            Shape::Matrix(r, c) => u64::from(r) * u64::from(c),
        }
    }

    /// Columns: the row length of a matrix, the length of a vector.
    pub fn cols(self) -> u32 {
        match self {
            Shape::Vector(n) => n,
            Shape::Matrix(_, c) => c,
        }
    }

    /// Rows: a matrix's rows, 1 for a vector.
    pub fn rows(self) -> u32 {
        match self {
            Shape::Vector(_) => 1,
            Shape::Matrix(r, _) => r,
        }
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shape::Vector(n) => write!(f, "[{n}]"),
            Shape::Matrix(r, c) => write!(f, "[{r}×{c}]"),
        }
    }
}

/// Identity of a tensor: which op batch, which slot. Held in an `Arc` so
/// the op batch can see whether the user still holds the tensor (a tensor
/// nobody holds need not be materialised by fusion).
#[derive(Debug)]
pub(crate) struct TensorId {
    pub(crate) batch: u64,
    pub(crate) slot: usize,
}

/// A value in an [`OpBatch`](super::OpBatch): an upload, an import, or the
/// result of an op. Cheap to clone (clones name the same tensor). An
/// in-place op (`relu_`, `add_`, ...) changes the value a tensor names.
/// While any clone is held, [`OpBatch::execute`](super::OpBatch::execute)
/// materialises it so [`OpBatch::read`](super::OpBatch::read) can return it.
#[derive(Debug, Clone)]
pub struct Tensor {
    pub(crate) id: Arc<TensorId>,
    pub(crate) shape: Shape,
    pub(crate) dtype: DType,
}

impl Tensor {
    /// The tensor's shape.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// Number of elements.
    pub fn numel(&self) -> u64 {
        self.shape.numel()
    }

    /// The element type (f32 for what the f32 uploads, imports and ops
    /// make; see [`OpBatch::cast`](super::OpBatch::cast)).
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Bytes its elements take in memory.
    pub fn byte_size(&self) -> u64 {
        self.shape.numel() * self.dtype.size()
    }

    /// How errors name the tensor: `what` and its shape (`b [4]`).
    pub(crate) fn describe(&self, what: &str) -> String {
        format!("{what} {}", self.shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        assert_eq!(Shape::Vector(7).numel(), 7);
        assert_eq!(Shape::Matrix(3, 5).numel(), 15);
        assert_eq!(Shape::Matrix(3, 5).cols(), 5);
        assert_eq!(Shape::Vector(7).rows(), 1);
        assert_eq!(Shape::Matrix(3, 5).to_string(), "[3×5]");
    }
}
