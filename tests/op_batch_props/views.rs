//! The view steps of the op batch property (reshape, row slice, permute,
//! select) as the reference sees them: the view's shape, and for each of
//! its elements (row-major) the element of the viewed slot it names.

use vkcompute::ops::Shape;

use crate::program::Step;

/// The `k`-th permutation of `0..rank` (any `k`: taken modulo `rank!`),
/// padded with the unused places.
pub fn nth_permutation(rank: usize, k: usize) -> [u8; 4] {
    let mut left: Vec<u8> = (0..rank as u8).collect();
    let mut out = [0u8, 1, 2, 3];
    let mut k = k;
    for slot in out.iter_mut().take(rank) {
        let i = k % left.len();
        k /= left.len();
        *slot = left.remove(i);
    }
    out
}

/// Row-major strides of `dims`.
fn strides(dims: &[u32]) -> Vec<usize> {
    let mut s = vec![1usize; dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * dims[k + 1] as usize;
    }
    s
}

/// The multi-index of element `i` of `dims` (row-major).
fn unravel(dims: &[u32], mut i: usize) -> Vec<usize> {
    let mut idx = vec![0usize; dims.len()];
    for k in (0..dims.len()).rev() {
        idx[k] = i % dims[k] as usize;
        i /= dims[k] as usize;
    }
    idx
}

/// A view step's shape and element map over its operand of shape `of`;
/// `None` for the other steps.
pub fn view_of(of: Shape, step: &Step) -> Option<(Shape, Vec<usize>)> {
    let d = of.dims();
    let st = strides(&d);
    let n = of.numel() as usize;
    match *step {
        Step::Reshape { to, .. } => Some((to, (0..n).collect())),
        Step::SliceRows { start, len, .. } => {
            let mut nd = d.clone();
            nd[0] = len;
            let shape = Shape::from_dims(&nd).expect("rank 1 to 4");
            let row = st[0];
            let m = (0..shape.numel() as usize)
                .map(|i| start as usize * row + i)
                .collect();
            Some((shape, m))
        }
        Step::Permute { axes, .. } => {
            let r = d.len();
            let nd: Vec<u32> = (0..r).map(|k| d[axes[k] as usize]).collect();
            let shape = Shape::from_dims(&nd).expect("rank 1 to 4");
            let m = (0..n)
                .map(|i| {
                    let idx = unravel(&nd, i);
                    (0..r).map(|k| idx[k] * st[axes[k] as usize]).sum()
                })
                .collect();
            Some((shape, m))
        }
        Step::Select { dim, index, .. } => {
            let dim = dim as usize;
            let keep: Vec<usize> = (0..d.len()).filter(|&k| k != dim).collect();
            let nd: Vec<u32> = keep.iter().map(|&k| d[k]).collect();
            let shape = Shape::from_dims(&nd).expect("rank 1 to 3");
            let m = (0..shape.numel() as usize)
                .map(|i| {
                    let idx = unravel(&nd, i);
                    let inner: usize = keep.iter().zip(&idx).map(|(&k, &j)| j * st[k]).sum();
                    inner + index as usize * st[dim]
                })
                .collect();
            Some((shape, m))
        }
        _ => None,
    }
}

/// A reshape target for `n` elements: rank 1 to 4 by `pick`, each
/// dimension a divisor of what is left (chosen by `c`).
pub fn reshape_target(n: u32, pick: u8, c: u16) -> Shape {
    let rank = 1 + usize::from(pick) % 4;
    let mut dims = Vec::new();
    let mut rem = n;
    let mut c = u32::from(c);
    for _ in 1..rank {
        let divs: Vec<u32> = (1..=rem).filter(|d| rem % d == 0).collect();
        let d = divs[(c as usize) % divs.len()];
        c /= 3;
        dims.push(d);
        rem /= d;
    }
    dims.push(rem);
    Shape::from_dims(&dims).expect("rank 1 to 4")
}
