//! Layouts of views: where each element of a value lives in its storage
//! (an offset and one stride per dimension, in elements), and the pure
//! rules of the view ops (reshape, row slices, permutes, selects) over
//! them. A value without a layout is contiguous from its storage's first
//! element.

use crate::ops::tensor::{Shape, MAX_RANK};

/// Where a view's elements live: element `(i0, i1, ..)` of the value is
/// element `offset + i0 * strides[0] + i1 * strides[1] + ..` of its
/// storage. Strides past the value's rank are unused (0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Layout {
    pub offset: u32,
    pub strides: [u32; MAX_RANK],
}

/// The row-major strides of `shape` (the last dimension's is 1).
pub(crate) fn contiguous_strides(shape: Shape) -> [u32; MAX_RANK] {
    let (d, r) = shape.dims_array();
    let mut s = [0u32; MAX_RANK];
    let mut acc = 1u32;
    for k in (0..r).rev() {
        s[k] = acc;
        acc = acc.saturating_mul(d[k]);
    }
    s
}

impl Layout {
    /// The layout of a value without one: contiguous from element 0.
    pub fn of(shape: Shape, layout: Option<Layout>) -> Layout {
        layout.unwrap_or(Layout {
            offset: 0,
            strides: contiguous_strides(shape),
        })
    }

    /// Whether `shape`'s elements lie one after another in this layout, in
    /// row-major order (dimensions of size 1 may have any stride).
    pub fn is_contiguous(&self, shape: Shape) -> bool {
        let (d, r) = shape.dims_array();
        let want = contiguous_strides(shape);
        (0..r).all(|k| d[k] == 1 || self.strides[k] == want[k])
    }

    /// The layout of a value as a value records it: `None` where it is
    /// contiguous from element 0.
    pub fn normalized(self, shape: Shape) -> Option<Layout> {
        (!(self.offset == 0 && self.is_contiguous(shape))).then_some(self)
    }

    /// The storage element of the value's element `i` (row-major order).
    pub fn element(&self, shape: Shape, i: u64) -> u64 {
        let (d, r) = shape.dims_array();
        let mut rem = i;
        let mut at = u64::from(self.offset);
        for k in (0..r).rev() {
            let dk = u64::from(d[k].max(1));
            at += (rem % dk) * u64::from(self.strides[k]);
            rem /= dk;
        }
        at
    }

    /// One past the last storage element the value touches.
    pub fn end(&self, shape: Shape) -> u64 {
        let (d, r) = shape.dims_array();
        let last: u64 = (0..r)
            .map(|k| u64::from(d[k].saturating_sub(1)) * u64::from(self.strides[k]))
            .sum();
        u64::from(self.offset) + last + 1
    }

    /// A GLSL expression for the storage element of element `var` (a
    /// `uint` expression) of a value of `shape`.
    #[cfg_attr(not(feature = "glsl"), allow(dead_code))]
    pub fn glsl_index(&self, shape: Shape, var: &str) -> String {
        let (d, r) = shape.dims_array();
        if self.is_contiguous(shape) {
            return format!("({}u + {var})", self.offset);
        }
        let mut terms = vec![format!("{}u", self.offset)];
        let mut inner = 1u64;
        for k in (0..r).rev() {
            if d[k] != 1 {
                let q = if inner == 1 {
                    var.to_string()
                } else {
                    format!("({var} / {inner}u)")
                };
                let idx = if k == 0 {
                    q
                } else {
                    format!("({q} % {}u)", d[k])
                };
                terms.push(format!("{idx} * {}u", self.strides[k]));
            }
            inner *= u64::from(d[k]);
        }
        format!("({})", terms.join(" + "))
    }
}

/// What makes two accesses of one storage in a fused kernel touch the
/// same element for the same invocation: contiguous layouts by their
/// offset alone, others by shape and layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mapping {
    /// Element `offset + idx`.
    Contiguous(u32),
    /// Through strides.
    Strided(Shape, Layout),
}

/// The mapping of a value of `shape` and `layout`.
pub(crate) fn mapping(shape: Shape, layout: Option<Layout>) -> Mapping {
    let l = Layout::of(shape, layout);
    if l.is_contiguous(shape) {
        Mapping::Contiguous(l.offset)
    } else {
        Mapping::Strided(shape, l)
    }
}

/// Why a view op refused its arguments (the op's caller names the op and
/// the tensor).
pub(crate) type ViewResult<T> = std::result::Result<T, String>;

fn with_dims(d: &[u32]) -> Shape {
    Shape::from_dims(d).unwrap_or(Shape::Vector(0))
}

/// `len` entries along the first dimension from `start`.
pub(crate) fn slice_rows(
    shape: Shape,
    l: Layout,
    start: u32,
    len: u32,
) -> ViewResult<(Shape, Layout)> {
    let (mut d, r) = shape.dims_array();
    let end = u64::from(start) + u64::from(len);
    if len == 0 || end > u64::from(d[0]) {
        return Err(format!(
            "rows {start}..{end} are outside its first dimension of {}: 1 to {} rows from a start below {}",
            d[0], d[0], d[0]
        ));
    }
    d[0] = len;
    let offset = u64::from(l.offset) + u64::from(start) * u64::from(l.strides[0]);
    let offset =
        u32::try_from(offset).map_err(|_| "the offset passes 2^32 elements".to_string())?;
    Ok((with_dims(&d[..r]), Layout { offset, ..l }))
}

/// The dimensions reordered: dimension `k` of the result is dimension
/// `axes[k]` of the input.
pub(crate) fn permute(shape: Shape, l: Layout, axes: &[usize]) -> ViewResult<(Shape, Layout)> {
    let (d, r) = shape.dims_array();
    let mut seen = [false; MAX_RANK];
    let ok = axes.len() == r
        && axes
            .iter()
            .all(|&a| a < r && !std::mem::replace(&mut seen[a], true));
    if !ok {
        return Err(format!(
            "axes {axes:?} are not a permutation of 0..{r} (one entry per dimension of rank {r}, each once)"
        ));
    }
    let mut nd = [1u32; MAX_RANK];
    let mut ns = [0u32; MAX_RANK];
    for (k, &a) in axes.iter().enumerate() {
        nd[k] = d[a];
        ns[k] = l.strides[a];
    }
    Ok((
        with_dims(&nd[..r]),
        Layout {
            offset: l.offset,
            strides: ns,
        },
    ))
}

/// Entry `index` of dimension `dim`, that dimension dropped (rank one
/// less; rank 2 or more).
pub(crate) fn select(
    shape: Shape,
    l: Layout,
    dim: usize,
    index: u32,
) -> ViewResult<(Shape, Layout)> {
    let (d, r) = shape.dims_array();
    if r < 2 {
        return Err("a vector has no dimension to drop (rank 2 to 4 is needed)".into());
    }
    if dim >= r {
        return Err(format!("dim {dim} is past its rank {r} (0 to {})", r - 1));
    }
    if index >= d[dim] {
        return Err(format!(
            "index {index} is past dimension {dim} of {} (0 to {})",
            d[dim],
            d[dim] - 1
        ));
    }
    let offset = u64::from(l.offset) + u64::from(index) * u64::from(l.strides[dim]);
    let offset =
        u32::try_from(offset).map_err(|_| "the offset passes 2^32 elements".to_string())?;
    let mut nd = Vec::with_capacity(r - 1);
    let mut ns = [0u32; MAX_RANK];
    for k in (0..r).filter(|&k| k != dim) {
        ns[nd.len()] = l.strides[k];
        nd.push(d[k]);
    }
    Ok((
        with_dims(&nd),
        Layout {
            offset,
            strides: ns,
        },
    ))
}

/// `new` over the same elements: the value must be contiguous.
pub(crate) fn reshape(shape: Shape, l: Layout, new: Shape) -> ViewResult<(Shape, Layout)> {
    if new.numel() != shape.numel() {
        return Err(format!(
            "{new} has {} elements, it has {}: a reshape keeps the element count",
            new.numel(),
            shape.numel()
        ));
    }
    if !l.is_contiguous(shape) {
        return Err(
            "it is a strided view (permuted or selected): only contiguous tensors reshape \
             (OpBatch::contiguous copies it into one)"
                .into(),
        );
    }
    Ok((
        new,
        Layout {
            offset: l.offset,
            strides: contiguous_strides(new),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(shape: Shape, l: Layout) -> Vec<u64> {
        (0..shape.numel()).map(|i| l.element(shape, i)).collect()
    }

    #[test]
    fn contiguous_layouts_and_strides() {
        let s = Shape::Dims3(2, 3, 4);
        assert_eq!(contiguous_strides(s), [12, 4, 1, 0]);
        let l = Layout::of(s, None);
        assert!(l.is_contiguous(s));
        assert_eq!(l.normalized(s), None);
        assert_eq!(all(s, l), (0..24).collect::<Vec<u64>>());
        assert_eq!(l.end(s), 24);
        assert_eq!(mapping(s, None), Mapping::Contiguous(0));
        assert_eq!(mapping(Shape::Vector(24), None), mapping(s, None));
    }

    #[test]
    fn permutes_and_selects_are_strided() {
        let s = Shape::Dims3(2, 3, 4);
        let l = Layout::of(s, None);
        let (ps, pl) = permute(s, l, &[1, 0, 2]).unwrap();
        assert_eq!(ps, Shape::Dims3(3, 2, 4));
        assert_eq!(pl.strides, [4, 12, 1, 0]);
        assert!(!pl.is_contiguous(ps));
        // Element (i, j, k) of the permute is (j, i, k) of the input.
        assert_eq!(pl.element(ps, 4 * 2 + 4 + 3), 12 + 4 + 3);
        assert!(permute(s, l, &[0, 0, 1]).is_err());
        assert!(permute(s, l, &[0, 1]).is_err());
        assert!(permute(s, l, &[0, 1, 3]).is_err());
        // Head 1 of a [T=2, H=3, D=4] tensor: [2×4] with row stride 12.
        let (hs, hl) = select(s, l, 1, 1).unwrap();
        assert_eq!(hs, Shape::Matrix(2, 4));
        assert_eq!((hl.offset, hl.strides), (4, [12, 1, 0, 0]));
        assert_eq!(all(hs, hl), [4, 5, 6, 7, 16, 17, 18, 19]);
        assert_eq!(hl.end(hs), 20);
        assert!(select(s, l, 1, 3).unwrap_err().contains("0 to 2"));
        assert!(select(s, l, 3, 0).is_err());
        assert!(select(Shape::Vector(3), Layout::of(Shape::Vector(3), None), 0, 0).is_err());
        // Index expressions agree with `element`.
        assert_eq!(
            hl.glsl_index(hs, "i"),
            "(4u + (i % 4u) * 1u + (i / 4u) * 12u)"
        );
    }

    #[test]
    fn slices_and_reshapes() {
        let s = Shape::Matrix(4, 3);
        let l = Layout::of(s, None);
        let (ss, sl) = slice_rows(s, l, 1, 2).unwrap();
        assert_eq!(ss, Shape::Matrix(2, 3));
        assert_eq!(sl.offset, 3);
        assert!(sl.is_contiguous(ss));
        assert_eq!(sl.normalized(ss), Some(sl));
        assert_eq!(mapping(ss, Some(sl)), Mapping::Contiguous(3));
        assert_eq!(sl.glsl_index(ss, "idx"), "(3u + idx)");
        assert!(slice_rows(s, l, 3, 2).unwrap_err().contains("outside"));
        assert!(slice_rows(s, l, 0, 0).is_err());
        let (rs, rl) = reshape(ss, sl, Shape::Vector(6)).unwrap();
        assert_eq!((rs, rl.offset, rl.strides[0]), (Shape::Vector(6), 3, 1));
        assert!(reshape(ss, sl, Shape::Vector(5)).is_err());
        let (ps, pl) = permute(s, l, &[1, 0]).unwrap();
        assert!(reshape(ps, pl, Shape::Vector(12))
            .unwrap_err()
            .contains("contiguous"));
        // A permute that keeps a size-1 dimension's place is contiguous.
        let one = Shape::Dims3(1, 4, 3);
        let (os, ol) = permute(one, Layout::of(one, None), &[1, 0, 2]).unwrap();
        assert!(ol.is_contiguous(os));
    }

    #[test]
    fn views_split_groups_where_one_invocation_would_read_what_another_writes() {
        use crate::ops::fusion::plan::{plan, Step};
        use crate::ops::fusion::program::{Op, Program};
        use crate::ops::{Binary, Unary};
        let m = Shape::Matrix(4, 4);
        let mut g = Program::default();
        let x = g.leaf(m);
        let r = g.op(Op::Unary(Unary::Relu, x), m);
        // A view of `r` is read from memory: not in `r`'s group, and `r`
        // is stored for it.
        let (ps, pl) = permute(m, Layout::of(m, None), &[1, 0]).expect("a permute");
        let t = g.view(r, ps, pl);
        let y = g.op(Op::Unary(Unary::Tanh, t), ps);
        let live: Vec<bool> = (0..g.values.len()).map(|v| v == y).collect();
        let p = plan(&g, &live, true, &|_| true, true);
        assert_eq!(p.steps, vec![Step::Single(0), Step::Single(1)]);
        assert!(p.stored[r] && p.barriers[1]);
        // In place on `x` beside a read of its transpose: one mapping per
        // written storage, so the two do not share a kernel.
        let mut g = Program::default();
        let x = g.leaf(m);
        let b = g.leaf(m);
        let t = g.view(x, ps, pl);
        let y = g.op(Op::Unary(Unary::Tanh, t), ps);
        let sx = g.values[x].storage;
        let w = g.op_into(Op::Binary(Binary::Add, x, b), m, sx);
        let live: Vec<bool> = (0..g.values.len()).map(|v| v == y || v == w).collect();
        let p = plan(&g, &live, true, &|_| true, true);
        assert_eq!(p.steps, vec![Step::Single(0), Step::Single(1)]);
        assert!(p.barriers[1], "the write waits for the strided read");
        // Two contiguous views through one mapping do share a kernel.
        let mut g = Program::default();
        let x = g.leaf(Shape::Vector(16));
        let v = g.view(x, m, Layout::of(m, None));
        let sx = g.values[x].storage;
        g.op_into(Op::Unary(Unary::Relu, v), m, sx);
        g.op(Op::Unary(Unary::Tanh, x), Shape::Vector(16));
        let live = vec![true; g.values.len()];
        let p = plan(&g, &live, true, &|_| true, true);
        assert_eq!(p.steps.len(), 1, "{:?}", p.steps);
    }
}
