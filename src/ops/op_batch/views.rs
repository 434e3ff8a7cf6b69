//! Views of an op batch's tensors that copy nothing: reshapes, row slices,
//! permutes and selects name the storage of the tensor they view, at an
//! offset and with strides ([`Layout`]); [`OpBatch::contiguous`]
//! materialises one where an op needs contiguous rows.
//!
//! **Aliasing.** A view and the tensor it views share memory: an in-place
//! op on either changes what the other reads from then on (in recording
//! order), within one execute and across graph launches. Every op that
//! reads a view reads its storage, ordered after every earlier write to
//! it; an in-place op through a view writes the viewed elements of the
//! storage and nothing else. The barrier planning sees a write through a
//! view as a write to its storage, and a storage lives (its pooled buffer
//! is not reused) while any held view of it is.
//!
//! **Which ops take views.** Element-wise ops (unary, binary, in place,
//! [`OpBatch::add_row`], [`OpBatch::cast`], [`OpBatch::copy`]) read and
//! write any view in place, fused or not, through generated kernels (the
//! `glsl` feature). Every other op (matmul, reductions, softmax,
//! transpose, the transformer ops) binds whole storages: it takes a view
//! only where the view is its whole storage in order (a reshape of a
//! whole tensor), and refuses any other with [`Error::OpShape`] naming the
//! op and the tensor; [`OpBatch::contiguous`] makes the copy it needs.

use super::{shape_err, OpBatch};
use crate::ops::fusion::program::{Op, V};
use crate::ops::fusion::strides::{self, mapping, Layout};
use crate::ops::tensor::{Shape, Tensor};
use crate::ops::Unary;
use crate::{Error, Result};

impl OpBatch {
    /// The layout of the value `v` (its own, or contiguous from 0).
    fn layout_of(&self, v: V) -> Layout {
        let val = &self.graph.values[v];
        Layout::of(val.shape, val.layout)
    }

    /// A new tensor viewing `x`'s storage as `shape` at `layout`.
    fn view_tensor(&mut self, x: V, shape: Shape, layout: Layout) -> Tensor {
        let of = self.graph.root(x);
        let v = self.graph.view(of, shape, layout);
        self.new_tensor(v)
    }

    /// `x` as `shape` (as many elements), naming the same memory: no copy
    /// and no dispatch. `x` must be contiguous (a tensor, a reshape or a
    /// row slice of one; not a permute or select: [`OpBatch::contiguous`]
    /// first). In-place ops on either change both.
    ///
    /// ```
    /// # fn main() -> vkcompute::Result<()> {
    /// use vkcompute::ops::Shape;
    /// let gpu = vkcompute::Device::new()?;
    /// let mut ops = gpu.ops();
    /// let x = ops.upload(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?;
    /// let m = ops.reshape(&x, Shape::Matrix(2, 3))?;
    /// let s = ops.softmax(&m)?; // per row of 3
    /// ops.execute_blocking()?;
    /// assert_eq!(ops.read(&m)?, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    /// assert_eq!(ops.read(&s)?.len(), 6);
    /// # Ok(())
    /// # }
    /// ```
    pub fn reshape(&mut self, x: &Tensor, shape: Shape) -> Result<Tensor> {
        const OP: &str = "ops::reshape";
        let v = self.value(x)?;
        Self::check_shape(OP, "the new shape", shape)?;
        let (s, l) = strides::reshape(x.shape, self.layout_of(v), shape)
            .map_err(|why| view_err(OP, x, why))?;
        Ok(self.view_tensor(v, s, l))
    }

    /// Rows `start..start + len` of `x` along its first dimension (elements
    /// of a vector, rows of a matrix, the outermost entries of a rank-3 or
    /// rank-4 tensor), naming the same memory at an offset: no copy.
    pub fn slice_rows(&mut self, x: &Tensor, start: u32, len: u32) -> Result<Tensor> {
        const OP: &str = "ops::slice_rows";
        let v = self.value(x)?;
        let (s, l) = strides::slice_rows(x.shape, self.layout_of(v), start, len)
            .map_err(|why| view_err(OP, x, why))?;
        Ok(self.view_tensor(v, s, l))
    }

    /// `x` with its dimensions reordered: dimension `k` of the result is
    /// dimension `axes[k]` of `x` (`axes` a permutation of `0..rank`), a
    /// strided view of the same memory (no copy). `permute(&m, &[1, 0])`
    /// is a matrix's transpose as a view.
    pub fn permute(&mut self, x: &Tensor, axes: &[usize]) -> Result<Tensor> {
        const OP: &str = "ops::permute";
        let v = self.value(x)?;
        let (s, l) = strides::permute(x.shape, self.layout_of(v), axes)
            .map_err(|why| view_err(OP, x, why))?;
        Ok(self.view_tensor(v, s, l))
    }

    /// Entry `index` of dimension `dim` of `x` (rank 2 to 4), that
    /// dimension dropped: a strided view of the same memory (no copy).
    /// Head `h` of a `[T×H×D]` tensor is `select(&x, 1, h)`, a `[T×D]`
    /// matrix whose rows lie `H·D` elements apart.
    pub fn select(&mut self, x: &Tensor, dim: usize, index: u32) -> Result<Tensor> {
        const OP: &str = "ops::select";
        let v = self.value(x)?;
        let (s, l) = strides::select(x.shape, self.layout_of(v), dim, index)
            .map_err(|why| view_err(OP, x, why))?;
        Ok(self.view_tensor(v, s, l))
    }

    /// `x` as a tensor of its own that is its whole storage in row-major
    /// order, what matmul, reductions, softmax, transpose and the
    /// transformer ops take: `x` itself (a clone, no op) where it already
    /// is, else a copy (an element-wise op, fused with its neighbours;
    /// f32, f16 and bf16 tensors).
    pub fn contiguous(&mut self, x: &Tensor) -> Result<Tensor> {
        let v = self.value(x)?;
        if self.graph.plain(v) {
            return Ok(x.clone());
        }
        self.unary(Unary::Copy, x)
    }

    /// Whether `x` is its whole storage in row-major order (not a view
    /// that the ops binding whole storages refuse; see
    /// [`OpBatch::contiguous`]).
    pub fn is_contiguous(&self, x: &Tensor) -> Result<bool> {
        let v = self.value(x)?;
        Ok(self.graph.plain(v))
    }

    /// `t`, an operand of an op that binds whole storages, must be one.
    pub(super) fn check_plain(&self, op: &'static str, what: &str, t: &Tensor, v: V) -> Result<()> {
        if self.graph.plain(v) {
            return Ok(());
        }
        Err(shape_err(
            op,
            format!(
                "{} is a view (an offset, a part or a reordering of a tensor's memory); \
                 the op takes tensors whose memory is theirs in row-major order: \
                 pass OpBatch::contiguous of it",
                t.describe(what)
            ),
        ))
    }

    /// Without generated kernels, element-wise ops take only tensors the
    /// built-in kernels bind.
    pub(super) fn check_view_kernels(
        &self,
        op: &'static str,
        what: &str,
        t: &Tensor,
        v: V,
    ) -> Result<()> {
        if cfg!(feature = "glsl") || self.graph.plain(v) {
            return Ok(());
        }
        Err(shape_err(
            op,
            format!(
                "{} is a view; element-wise ops read views through generated kernels, \
                 which need the `glsl` feature",
                t.describe(what)
            ),
        ))
    }

    /// An in-place op writing `target`'s storage may read no other view of
    /// that storage through another mapping (one invocation would read
    /// what another writes).
    /// A broadcast operand (a row bias) may not live in that storage at
    /// all (every invocation reads it).
    pub(super) fn check_overlap(&self, op: &Op, target: V) -> Result<()> {
        let g = &self.graph;
        let t = g.values[target];
        let m = mapping(t.shape, t.layout);
        let bias = match *op {
            Op::AddRow(_, b) => Some(b),
            _ => None,
        };
        for v in op.inputs() {
            let val = g.values[v];
            let differs = mapping(val.shape, val.layout) != m || Some(v) == bias;
            if v != target && val.storage == t.storage && differs {
                let op = op.name();
                return Err(shape_err(
                    op,
                    format!(
                        "the operand {} views the memory the op writes in place ({}) \
                         element by element differently; copy one of them first",
                        val.shape, t.shape
                    ),
                ));
            }
        }
        Ok(())
    }

    /// After an in-place write made `written` the newest value of its
    /// storage: every other held tensor viewing that storage (or viewed by
    /// the written tensor) now names the storage as the write left it.
    pub(super) fn rebase_views(&mut self, slot: usize, old: V, written: V) {
        let s = self.graph.values[written].storage;
        let through_view =
            self.graph.alias[old].is_some() || self.graph.values[old].layout.is_some();
        for k in 0..self.tensors.len() {
            let (ref w, v) = self.tensors[k];
            if k == slot || w.strong_count() == 0 || self.graph.values[v].storage != s {
                continue;
            }
            let is_view = self.graph.alias[v].is_some() || self.graph.values[v].layout.is_some();
            if !(through_view || is_view) {
                continue;
            }
            let val = self.graph.values[v];
            let nv = self
                .graph
                .view(written, val.shape, Layout::of(val.shape, val.layout));
            self.tensors[k].1 = nv;
        }
    }

    /// The bytes of `t`'s elements in row-major order, gathered through its
    /// layout where it is a strided view.
    pub(super) fn read_elements(&self, t: &Tensor) -> Result<Vec<u8>> {
        let v = self.value(t)?;
        let b = self.bound(t)?;
        let val = self.graph.values[v];
        let size = val.dtype.size();
        let Some(l) = val.layout else {
            return b.read_bytes(t.byte_size());
        };
        let all = b.read_bytes(l.end(val.shape) * size)?;
        let size = size as usize;
        let mut out = Vec::with_capacity(t.byte_size() as usize);
        for i in 0..val.shape.numel() {
            let at = l.element(val.shape, i) as usize * size;
            let e = all
                .get(at..at + size)
                .ok_or_else(|| Error::TensorUnavailable {
                    detail: format!(
                        "op batch internal error: the view {} reads past its storage",
                        t.shape
                    ),
                })?;
            out.extend_from_slice(e);
        }
        Ok(out)
    }
}

/// The error of a view op that refused its arguments.
fn view_err(op: &'static str, x: &Tensor, why: String) -> Error {
    shape_err(op, format!("{}: {why}", x.describe("x")))
}

/// Whether node `n` touches a value the built-in kernels cannot bind (a
/// view with an offset, strides or fewer elements than its storage).
pub(crate) fn touches_views(g: &crate::ops::fusion::program::Program, n: usize) -> bool {
    let node = &g.nodes[n];
    matches!(
        node.op,
        Op::Unary(..) | Op::Binary(..) | Op::AddRow(..) | Op::Cast(_)
    ) && node
        .op
        .inputs()
        .into_iter()
        .chain(std::iter::once(node.out))
        .any(|v| !g.plain(v))
}
