//! The CPU reference of a program: every op in f64, each element carrying
//! an error allowance — how far an f32 GPU result may lie from the exact
//! value and still be right.
//!
//! The allowance rule, per op (`e` the operands' allowances, `ρ` the op's
//! rounding budget):
//!
//! - inputs are exact (`e = 0`: f32 values are f64 values);
//! - an op moves its operands' allowances through its worst-case
//!   sensitivity (a Lipschitz bound: 1 for relu, add, max, transpose;
//!   1/4 for sigmoid; 1.1 for swish; 1.13 for gelu; `|a|` and `|b|` for a
//!   product's other factor; the range of the result caps it: sigmoid 1,
//!   tanh 2, softmax 1), and adds its own rounding `ρ · M + TINY`, with
//!   `M` the magnitude it rounds at (|result| for one element, the sum
//!   of |terms| for a sum, dot or matmul entry, |a| + |b| for an add);
//! - `ρ = REL + n · EPS32` where `n` is the number of terms the op
//!   reduces (1 element-wise; the length for sum and dot; K for a matmul
//!   or matvec; the row length for softmax and the norms): any summation
//!   order of n terms errs by at most (n - 1) f32 roundings of Σ|terms|,
//!   and `REL` = 1e-5 covers the kernels' exp, erfc and inversesqrt (a few
//!   ulp to ~100 ulp of f32 where the spec allows it);
//! - the norms and softmax are bounded over the whole perturbation
//!   interval rather than to first order (the root mean square at its
//!   lowest, `exp(2E)` for a softmax row whose inputs each move by E), and
//!   a norm's rounding counts as a relative `ρ` perturbation of its input
//!   row (sums are backward stable) plus `ρ` of its result;
//! - `TINY` = 1e-30 absorbs results the GPU flushes to zero (f32
//!   subnormals); slot magnitudes stay below 1e4 (the decoder's limit), so
//!   nothing amplifies it past 1e-20;
//! - a value of a 16-bit type (f16 or bf16: an input, the result of an
//!   element-wise op on 16-bit operands, or a cast) is rounded where the
//!   GPU rounds it: the reference rounds its own value to the type (to
//!   nearest even, through f32, as `F16::from_f32` and `Bf16::from_f32`),
//!   and the allowance grows by what rounding a GPU value within `e` of it
//!   can differ by: `u · (2|v| + e) + e` plus the type's smallest spacing,
//!   `u` the type's unit roundoff (2⁻¹¹ for f16, 2⁻⁸ for bf16). An exact
//!   value (`e = 0`, an input or a cast of one) rounds exactly as the GPU
//!   rounds it: its allowance stays 0, so casts are checked bit for bit.

use vkcompute::ops::{Bf16, Binary, DType, Shape, Unary, F16};

use crate::program::{Program, Step};

const REL: f64 = 1e-5;
const EPS32: f64 = f32::EPSILON as f64;
const TINY: f64 = 1e-30;

/// A slot's exact value and, per element, its allowance.
#[derive(Clone, Debug)]
pub struct Val {
    pub v: Vec<f64>,
    pub e: Vec<f64>,
}

/// What the reference computes for each unary op (the correct one is
/// [`unary`]; a test swaps in a wrong one to see the property fail).
pub type UnaryFn = fn(Unary, f64) -> f64;

/// Exact unary ops.
pub fn unary(f: Unary, x: f64) -> f64 {
    match f {
        Unary::Copy => x,
        Unary::Scale(a) => f64::from(a) * x,
        Unary::Relu => x.max(0.0),
        Unary::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        Unary::Tanh => x.tanh(),
        Unary::Swish => x / (1.0 + (-x).exp()),
        Unary::Gelu => 0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2)),
        Unary::GeluTanh => {
            let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            0.5 * x * (1.0 + u.tanh())
        }
        other => unreachable!("the reference has no {other:?}"),
    }
}

/// erf to ~1e-15 (Taylor series below 3, a continued fraction above).
fn erf(x: f64) -> f64 {
    let (s, x) = if x < 0.0 { (-1.0, -x) } else { (1.0, x) };
    if x < 3.0 {
        let (mut term, mut sum, mut n) = (x, x, 0.0);
        while term.abs() > 1e-17 * sum.abs() {
            n += 1.0;
            term *= -x * x / n;
            sum += term / (2.0 * n + 1.0);
        }
        s * sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        let mut f = x;
        for k in (1..60).rev() {
            f = x + f64::from(k) / 2.0 / f;
        }
        s * (1.0 - (-x * x).exp() / (f * std::f64::consts::PI.sqrt()))
    }
}

/// Worst-case slope of a unary op, and the cap on how far its result can
/// move at all.
fn slope(f: Unary) -> (f64, f64) {
    match f {
        Unary::Copy | Unary::Relu => (1.0, f64::INFINITY),
        Unary::Scale(a) => (f64::from(a.abs()), f64::INFINITY),
        Unary::Sigmoid => (0.25, 1.0),
        Unary::Tanh => (1.0, 2.0),
        Unary::Swish => (1.1, f64::INFINITY),
        Unary::Gelu | Unary::GeluTanh => (1.13, f64::INFINITY),
        other => unreachable!("the reference has no {other:?}"),
    }
}

/// The element type a slot-making step gives: a cast its target, an
/// element-wise op its first operand's, every other op f32.
pub fn dtype_of(dtypes: &[DType], step: &Step) -> DType {
    match *step {
        Step::Import(_) => unreachable!("imports take their input's type"),
        Step::Cast { to, .. } => to,
        Step::Unary { x, .. }
        | Step::Reshape { x, .. }
        | Step::SliceRows { x, .. }
        | Step::Permute { x, .. }
        | Step::Select { x, .. }
        | Step::Contiguous(x) => dtypes[x],
        Step::Binary { a, .. } | Step::AddRow { a, .. } => dtypes[a],
        _ => DType::F32,
    }
}

/// `x` rounded to `d` through f32 (what the GPU stores for an f32 result).
pub fn round(d: DType, x: f64) -> f64 {
    let f = x as f32;
    f64::from(match d {
        DType::F16 => F16::from_f32(f).to_f32(),
        DType::Bf16 => Bf16::from_f32(f).to_f32(),
        _ => f,
    })
}

/// A value of type `d`: rounded as the GPU rounds it, the allowance grown
/// by what that rounding can add (see the module's rule).
fn round_val(d: DType, val: Val) -> Val {
    let (u, spacing) = match d {
        DType::F16 => (2f64.powi(-11), 2f64.powi(-24)),
        DType::Bf16 => (2f64.powi(-8), 1e-38),
        _ => return val,
    };
    let (v, e) = val
        .v
        .iter()
        .zip(&val.e)
        .map(|(&v, &e)| {
            let e2 = if e == 0.0 {
                0.0
            } else {
                e + u * (2.0 * v.abs() + e) + spacing
            };
            (round(d, v), e2)
        })
        .unzip();
    Val { v, e }
}

/// The shape a slot-making step gives, from its operands' shapes.
pub fn shape_of(shapes: &[Shape], step: &Step) -> Shape {
    match *step {
        Step::Import(_) => unreachable!("imports take their input's shape"),
        Step::Unary { x, .. }
        | Step::Softmax(x)
        | Step::CausalSoftmax { x, .. }
        | Step::RmsNorm { x, .. }
        | Step::LayerNorm { x, .. }
        | Step::SiluMul { gate: x, .. }
        | Step::Cast { x, .. }
        | Step::Contiguous(x) => shapes[x],
        Step::Reshape { x, .. }
        | Step::SliceRows { x, .. }
        | Step::Permute { x, .. }
        | Step::Select { x, .. } => {
            crate::views::view_of(shapes[x], step)
                .expect("a view step")
                .0
        }
        Step::Binary { a, .. } | Step::AddRow { a, .. } => shapes[a],
        Step::Matmul { a, b } => Shape::Matrix(shapes[a].rows(), shapes[b].cols()),
        Step::Matvec { a, .. } => Shape::Vector(shapes[a].rows()),
        Step::Transpose(x) => Shape::Matrix(shapes[x].cols(), shapes[x].rows()),
        Step::Sum(_) | Step::Max(_) | Step::Dot(..) => Shape::Vector(1),
    }
}

fn rho(n: u32) -> f64 {
    REL + f64::from(n) * EPS32
}

/// Each row's elements (a vector is one row).
fn rows(s: Shape) -> (usize, usize) {
    (s.rows() as usize, s.cols() as usize)
}

/// Σ over k of a[k]·b[k] with its allowance (sum, dot, matmul entries).
fn dot_terms(terms: impl Iterator<Item = ((f64, f64), (f64, f64))>, n: u32) -> (f64, f64) {
    let (mut v, mut e, mut mag) = (0.0, 0.0, 0.0);
    for ((a, ea), (b, eb)) in terms {
        v += a * b;
        mag += (a * b).abs();
        e += a.abs() * eb + b.abs() * ea + ea * eb;
    }
    (v, e + rho(n) * mag + TINY)
}

/// The root-mean-square factor `1/sqrt(ms + eps)` and how far it can move
/// when `ms` moves by `dms`: (factor, its largest value, its largest move).
fn inv_sqrt_range(ms: f64, dms: f64, eps: f64) -> (f64, f64, f64) {
    let r = 1.0 / (ms + eps).sqrt();
    let hi = 1.0 / ((ms - dms).max(0.0) + eps).sqrt();
    let lo = 1.0 / (ms + dms + eps).sqrt();
    (r, hi, (hi - r).max(r - lo))
}

/// Normalises one row: `center` subtracts the mean first (LayerNorm).
/// Returns (value, allowance) of `(x - mean?) · r` per element.
fn norm_row(x: &[f64], ex: &[f64], eps: f64, center: bool) -> Vec<(f64, f64)> {
    let n = x.len() as f64;
    let p = rho(x.len() as u32);
    // The kernel's rounding as a relative perturbation of the row.
    let ex: Vec<f64> = x.iter().zip(ex).map(|(x, e)| e + p * x.abs()).collect();
    let (mean, emean) = if center {
        (x.iter().sum::<f64>() / n, ex.iter().sum::<f64>() / n)
    } else {
        (0.0, 0.0)
    };
    let d: Vec<f64> = x.iter().map(|x| x - mean).collect();
    let ed: Vec<f64> = ex.iter().map(|e| e + emean).collect();
    let ms = d.iter().map(|d| d * d).sum::<f64>() / n;
    let dms = d
        .iter()
        .zip(&ed)
        .map(|(d, e)| 2.0 * d.abs() * e + e * e)
        .sum::<f64>()
        / n;
    let (r, hi, dr) = inv_sqrt_range(ms, dms, eps);
    d.iter()
        .zip(&ed)
        .map(|(d, e)| (d * r, e * hi + d.abs() * dr))
        .collect()
}

/// The final value of every slot after running `p` on `inputs` (one f32
/// vector per input), with `unary` as the unary ops.
pub fn interpret(p: &Program, inputs: &[Vec<f32>], unary: UnaryFn) -> Vec<Val> {
    // Memory as the op batch shares it: per slot the values of the slots
    // that are not views, and per slot the slot whose memory it names and
    // which element of it each of its elements is.
    let mut store: Vec<Val> = Vec::new();
    let mut alias: Vec<(usize, Vec<usize>)> = Vec::new();
    let gather = |store: &[Val], (r, m): &(usize, Vec<usize>)| Val {
        v: m.iter().map(|&i| store[*r].v[i]).collect(),
        e: m.iter().map(|&i| store[*r].e[i]).collect(),
    };
    for step in &p.steps {
        let shape = |s: usize| p.shapes[s];
        // Every slot's value now (a view reads its memory as it is now).
        let slots: Vec<Val> = alias.iter().map(|a| gather(&store, a)).collect();
        // `contiguous` of a slot that is all of its memory in order is
        // that slot (the op batch copies nothing).
        let same = match *step {
            Step::Contiguous(x) => {
                let (r, m) = &alias[x];
                let whole =
                    m.len() == store[*r].v.len() && m.iter().enumerate().all(|(k, &i)| k == i);
                whole.then_some(x)
            }
            _ => None,
        };
        if let Some(x) = step.view_operand().or(same) {
            let n = shape(x).numel() as usize;
            let m = match crate::views::view_of(shape(x), step) {
                Some((_, m)) => m,
                None => (0..n).collect(),
            };
            let (r, mx) = &alias[x];
            alias.push((*r, m.iter().map(|&i| mx[i]).collect()));
            store.push(Val {
                v: Vec::new(),
                e: Vec::new(),
            });
            continue;
        }
        let val: Val = match *step {
            Step::Import(i) => {
                // The inputs hold values of their type already.
                let v: Vec<f64> = inputs[i].iter().map(|&x| f64::from(x)).collect();
                let e = vec![0.0; v.len()];
                Val { v, e }
            }
            Step::Unary { f, x, .. } => {
                let (k, cap) = slope(f);
                let s = &slots[x];
                let v: Vec<f64> = s.v.iter().map(|&x| unary(f, x)).collect();
                let e = v
                    .iter()
                    .zip(&s.e)
                    .map(|(y, e)| (k * e).min(cap) + rho(1) * y.abs() + TINY)
                    .collect();
                Val { v, e }
            }
            Step::Binary { g, a, b, .. } => {
                let (sa, sb) = (&slots[a], &slots[b]);
                let mut out = Val {
                    v: Vec::new(),
                    e: Vec::new(),
                };
                for i in 0..sa.v.len() {
                    let (x, ex, y, ey) = (sa.v[i], sa.e[i], sb.v[i], sb.e[i]);
                    let (v, e, mag) = match g {
                        Binary::Add => (x + y, ex + ey, x.abs() + y.abs()),
                        Binary::Sub => (x - y, ex + ey, x.abs() + y.abs()),
                        Binary::Mul => {
                            (x * y, x.abs() * ey + y.abs() * ex + ex * ey, (x * y).abs())
                        }
                        Binary::Axpy(al) => {
                            let al = f64::from(al);
                            (al * x + y, al.abs() * ex + ey, (al * x).abs() + y.abs())
                        }
                        other => unreachable!("the reference has no {other:?}"),
                    };
                    out.v.push(v);
                    out.e.push(e + rho(1) * mag + TINY);
                }
                out
            }
            Step::AddRow { a, bias, .. } => {
                let (sa, sb) = (&slots[a], &slots[bias]);
                let cols = shape(a).cols() as usize;
                let (v, e) = (0..sa.v.len())
                    .map(|i| {
                        let (x, y) = (sa.v[i], sb.v[i % cols]);
                        let e = sa.e[i] + sb.e[i % cols] + rho(1) * (x.abs() + y.abs()) + TINY;
                        (x + y, e)
                    })
                    .unzip();
                Val { v, e }
            }
            Step::Matmul { a, b } | Step::Matvec { a, x: b } => {
                let (m, k) = rows(shape(a));
                let n = (shape(b).numel() as usize) / k;
                let (sa, sb) = (&slots[a], &slots[b]);
                let (v, e) = (0..m * n)
                    .map(|ij| {
                        let (i, j) = (ij / n, ij % n);
                        let terms = (0..k).map(|p| {
                            let (ia, ib) = (i * k + p, p * n + j);
                            ((sa.v[ia], sa.e[ia]), (sb.v[ib], sb.e[ib]))
                        });
                        dot_terms(terms, k as u32)
                    })
                    .unzip();
                Val { v, e }
            }
            Step::Transpose(x) => {
                let (r, c) = rows(shape(x));
                let s = &slots[x];
                let (v, e) = (0..r * c)
                    .map(|o| {
                        let (j, i) = (o / r, o % r);
                        (s.v[i * c + j], s.e[i * c + j])
                    })
                    .unzip();
                Val { v, e }
            }
            Step::Sum(x) => {
                let s = &slots[x];
                let ones = std::iter::repeat((1.0, 0.0));
                let terms = s.v.iter().copied().zip(s.e.iter().copied()).zip(ones);
                let (v, e) = dot_terms(terms, s.v.len() as u32);
                Val {
                    v: vec![v],
                    e: vec![e],
                }
            }
            Step::Max(x) => {
                let s = &slots[x];
                let v = s.v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let e = s.e.iter().copied().fold(0.0, f64::max) + TINY;
                Val {
                    v: vec![v],
                    e: vec![e],
                }
            }
            Step::Dot(a, b) => {
                let (sa, sb) = (&slots[a], &slots[b]);
                let ta = sa.v.iter().copied().zip(sa.e.iter().copied());
                let tb = sb.v.iter().copied().zip(sb.e.iter().copied());
                let (v, e) = dot_terms(ta.zip(tb), sa.v.len() as u32);
                Val {
                    v: vec![v],
                    e: vec![e],
                }
            }
            Step::Softmax(x) => softmax(&slots[x], shape(x), 0),
            Step::CausalSoftmax { x, q_len } => softmax(&slots[x], shape(x), q_len),
            Step::RmsNorm { x, w, eps } => {
                norm(&slots[x], shape(x), &slots[w], None, f64::from(eps))
            }
            Step::LayerNorm { x, w, b, eps } => norm(
                &slots[x],
                shape(x),
                &slots[w],
                Some(&slots[b]),
                f64::from(eps),
            ),
            Step::SiluMul { gate, up } => {
                let (g, u) = (&slots[gate], &slots[up]);
                let (v, e) = (0..g.v.len())
                    .map(|i| {
                        let s = unary(Unary::Swish, g.v[i]);
                        let v = s * u.v[i];
                        let e = 1.1 * g.e[i] * (u.v[i].abs() + u.e[i])
                            + s.abs() * u.e[i]
                            + rho(1) * v.abs()
                            + TINY;
                        (v, e)
                    })
                    .unzip();
                Val { v, e }
            }
            Step::Cast { x, .. } | Step::Contiguous(x) => slots[x].clone(),
            Step::Reshape { .. }
            | Step::SliceRows { .. }
            | Step::Permute { .. }
            | Step::Select { .. } => unreachable!("views are taken above"),
        };
        // Where the GPU rounds: every value of a 16-bit type (an in-place
        // step's target keeps its slot's type).
        let d = match (step, step.in_place_target()) {
            (Step::Import(_), _) => DType::F32,
            (_, Some(t)) => p.dtypes[t],
            (_, None) => p.dtypes[slots.len()],
        };
        let val = round_val(d, val);
        match step.in_place_target() {
            Some(t) => {
                // Written through the target's view of its memory.
                let (r, m) = &alias[t];
                for (k, &i) in m.iter().enumerate() {
                    store[*r].v[i] = val.v[k];
                    store[*r].e[i] = val.e[k];
                }
            }
            None => {
                alias.push((store.len(), (0..val.v.len()).collect()));
                store.push(val);
            }
        }
    }
    alias.iter().map(|a| gather(&store, a)).collect()
}

/// Softmax of each row; with `q_len` > 0, the causal form (query `i` of a
/// block of `q_len` rows sees the first `cols - q_len + i + 1` entries).
fn softmax(x: &Val, shape: Shape, q_len: u32) -> Val {
    let (r, c) = rows(shape);
    let mut out = Val {
        v: vec![0.0; r * c],
        e: vec![TINY; r * c],
    };
    for row in 0..r {
        let seen = if q_len == 0 {
            c
        } else {
            c - q_len as usize + row % q_len as usize + 1
        };
        let xs = &x.v[row * c..row * c + seen];
        let big = x.e[row * c..row * c + seen]
            .iter()
            .copied()
            .fold(0.0, f64::max);
        let m = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let total: f64 = xs.iter().map(|x| (x - m).exp()).sum();
        for (j, &xj) in xs.iter().enumerate() {
            let s = (xj - m).exp() / total;
            let moved = (s * ((2.0 * big).exp() - 1.0)).min(1.0);
            let round = (rho(seen as u32) + 2.0 * EPS32 * (xj - m).abs()) * s;
            out.v[row * c + j] = s;
            out.e[row * c + j] = moved + round + TINY;
        }
    }
    out
}

/// RMSNorm (`bias` None) or LayerNorm of each row, weights `w` (and
/// `bias`) of one element per column.
fn norm(x: &Val, shape: Shape, w: &Val, bias: Option<&Val>, eps: f64) -> Val {
    let (r, c) = rows(shape);
    let mut out = Val {
        v: Vec::with_capacity(r * c),
        e: Vec::with_capacity(r * c),
    };
    let p = rho(c as u32);
    for row in 0..r {
        let span = row * c..(row + 1) * c;
        let normed = norm_row(&x.v[span.clone()], &x.e[span], eps, bias.is_some());
        for (j, (y, ey)) in normed.into_iter().enumerate() {
            let (wj, ew) = (w.v[j], w.e[j]);
            let (bj, eb) = bias.map_or((0.0, 0.0), |b| (b.v[j], b.e[j]));
            let v = y * wj + bj;
            let e = ey * (wj.abs() + ew) + y.abs() * ew + eb + p * ((y * wj).abs() + bj.abs());
            out.v.push(v);
            out.e.push(e + TINY);
        }
    }
    out
}
