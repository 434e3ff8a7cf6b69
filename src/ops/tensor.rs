//! Tensors of an [`OpBatch`](super::OpBatch): handles to values recorded in
//! it, shaped as row-major tensors of rank 1 to 4 (vectors, matrices,
//! [`Shape::Dims3`], [`Shape::Dims4`]).

use std::sync::Arc;

use super::dtype::DType;

/// The shape of a tensor: a vector of `len` elements, a row-major
/// `rows`×`cols` matrix, or a row-major tensor of rank 3 or 4 (the last
/// dimension varies fastest). Ops that work per row see a tensor of any
/// rank as [`Shape::rows`] rows of [`Shape::cols`] elements (the product of
/// the leading dimensions by the last one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shape {
    /// A vector.
    Vector(u32),
    /// A row-major matrix (rows, cols).
    Matrix(u32, u32),
    /// A row-major rank-3 tensor (d0, d1, d2), e.g. tokens × heads × head_dim.
    Dims3(u32, u32, u32),
    /// A row-major rank-4 tensor (d0, d1, d2, d3).
    Dims4(u32, u32, u32, u32),
}

/// The largest rank a [`Shape`] has.
pub const MAX_RANK: usize = 4;

impl Shape {
    /// The shape of rank `dims.len()` (1 to [`MAX_RANK`]) with these
    /// dimensions; an [`Error::OpShape`](crate::Error::OpShape) for rank 0
    /// or a rank above 4.
    pub fn from_dims(dims: &[u32]) -> crate::Result<Shape> {
        Ok(match *dims {
            [a] => Shape::Vector(a),
            [a, b] => Shape::Matrix(a, b),
            [a, b, c] => Shape::Dims3(a, b, c),
            [a, b, c, d] => Shape::Dims4(a, b, c, d),
            _ => {
                return Err(crate::Error::OpShape {
                    op: "Shape::from_dims",
                    detail: format!(
                        "dims {dims:?} have rank {}; ranks 1 to {MAX_RANK} are allowed",
                        dims.len()
                    ),
                })
            }
        })
    }

    /// The dimensions, outermost first (as many as the rank).
    pub fn dims(self) -> Vec<u32> {
        let (d, r) = self.dims_array();
        d[..r].to_vec()
    }

    /// The dimensions padded with 1s to four, and the rank.
    pub(crate) fn dims_array(self) -> ([u32; MAX_RANK], usize) {
        match self {
            Shape::Vector(n) => ([n, 1, 1, 1], 1),
            Shape::Matrix(r, c) => ([r, c, 1, 1], 2),
            Shape::Dims3(a, b, c) => ([a, b, c, 1], 3),
            Shape::Dims4(a, b, c, d) => ([a, b, c, d], 4),
        }
    }

    /// Number of dimensions: 1 for a vector, 2 for a matrix, 3 or 4.
    pub fn rank(self) -> usize {
        self.dims_array().1
    }

    /// Number of elements.
    pub fn numel(self) -> u64 {
        let (d, r) = self.dims_array();
        d[..r].iter().map(|&x| u64::from(x)).product()
    }

    /// Columns: the last dimension (the row length of a matrix, the length
    /// of a vector).
    pub fn cols(self) -> u32 {
        let (d, r) = self.dims_array();
        d[r - 1]
    }

    /// Rows: the product of every dimension but the last (1 for a vector),
    /// saturating at `u32::MAX`.
    pub fn rows(self) -> u32 {
        let (d, r) = self.dims_array();
        let rows: u64 = d[..r - 1].iter().map(|&x| u64::from(x)).product();
        u32::try_from(rows).unwrap_or(u32::MAX)
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dims: Vec<String> = self.dims().iter().map(u32::to_string).collect();
        write!(f, "[{}]", dims.join("×"))
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
        assert_eq!(Shape::Vector(7).to_string(), "[7]");
        let s = Shape::Dims4(2, 3, 4, 5);
        assert_eq!((s.rank(), s.numel(), s.rows(), s.cols()), (4, 120, 24, 5));
        assert_eq!(s.to_string(), "[2×3×4×5]");
        assert_eq!(Shape::from_dims(&[2, 3, 4]).unwrap(), Shape::Dims3(2, 3, 4));
        assert_eq!(Shape::from_dims(&[6]).unwrap().dims(), [6]);
        assert!(Shape::from_dims(&[]).is_err());
        let e = Shape::from_dims(&[1, 2, 3, 4, 5]).unwrap_err().to_string();
        assert!(e.contains("rank 5") && e.contains("1 to 4"), "{e}");
    }
}
