//! The programs the op batch property runs: a list of steps over numbered
//! slots (one per tensor the test records), decoded from raw random
//! choices so that every program is valid by construction and shrinks by
//! dropping or simplifying choices.

use std::fmt;

use proptest::prelude::*;
use vkcompute::ops::{Binary, DType, Shape, Unary};

/// An input the program imports: a buffer of its own, or a view (a slice
/// at a 16-byte-aligned offset) of one buffer shared by every view (f32
/// inputs only); of f32, f16 or bf16.
#[derive(Clone, Copy, PartialEq)]
pub struct Input {
    pub shape: Shape,
    pub view: bool,
    pub dtype: DType,
}

/// One recorded op. `usize` fields name slots; a step that makes a tensor
/// takes the next slot, an in-place step changes the value its slot holds.
#[derive(Clone, Copy, PartialEq)]
pub enum Step {
    /// Imports input `0` (the next slot).
    Import(usize),
    Unary {
        f: Unary,
        x: usize,
        in_place: bool,
    },
    Binary {
        g: Binary,
        a: usize,
        b: usize,
        in_place: bool,
    },
    AddRow {
        a: usize,
        bias: usize,
        in_place: bool,
    },
    Matmul {
        a: usize,
        b: usize,
    },
    Matvec {
        a: usize,
        x: usize,
    },
    Transpose(usize),
    Sum(usize),
    Max(usize),
    Dot(usize, usize),
    Softmax(usize),
    CausalSoftmax {
        x: usize,
        q_len: u32,
    },
    RmsNorm {
        x: usize,
        w: usize,
        eps: f32,
    },
    LayerNorm {
        x: usize,
        w: usize,
        b: usize,
        eps: f32,
    },
    SiluMul {
        gate: usize,
        up: usize,
    },
    /// `x` converted to `to` (f32, f16 or bf16).
    Cast {
        x: usize,
        to: DType,
    },
    /// `x` as `to` (a view: no copy).
    Reshape {
        x: usize,
        to: Shape,
    },
    /// Rows `start..start + len` of `x`'s first dimension (a view).
    SliceRows {
        x: usize,
        start: u32,
        len: u32,
    },
    /// `x`'s dimensions reordered (a view; the first rank entries).
    Permute {
        x: usize,
        axes: [u8; 4],
    },
    /// Entry `index` of `x`'s dimension `dim` (a view).
    Select {
        x: usize,
        dim: u8,
        index: u32,
    },
    /// `x` made contiguous (a copy where it is a view).
    Contiguous(usize),
}

impl Step {
    /// The slot a view step views (reshape, row slice, permute, select).
    pub fn view_operand(&self) -> Option<usize> {
        match *self {
            Step::Reshape { x, .. }
            | Step::SliceRows { x, .. }
            | Step::Permute { x, .. }
            | Step::Select { x, .. } => Some(x),
            _ => None,
        }
    }

    /// Whether the step makes a new slot (else it changes one in place).
    pub fn makes_slot(&self) -> bool {
        self.in_place_target().is_none()
    }

    /// The slot an in-place step writes; `None` for a step that makes a
    /// new slot.
    pub fn in_place_target(&self) -> Option<usize> {
        match *self {
            Step::Unary {
                x: t,
                in_place: true,
                ..
            }
            | Step::Binary {
                a: t,
                in_place: true,
                ..
            }
            | Step::AddRow {
                a: t,
                in_place: true,
                ..
            } => Some(t),
            _ => None,
        }
    }
}

/// A random program: its inputs, its steps, which slots the test still
/// holds when it executes, and the seed of the input values.
#[derive(Clone)]
pub struct Program {
    pub inputs: Vec<Input>,
    pub steps: Vec<Step>,
    /// Per slot: its shape.
    pub shapes: Vec<Shape>,
    /// Per slot: its element type.
    pub dtypes: Vec<DType>,
    /// Per slot: held at execute (else dropped after recording).
    pub keep: Vec<bool>,
    /// Per slot: the input it imports, if it is an import.
    pub input_of: Vec<Option<usize>>,
    pub seed: u64,
}

pub fn unary_name(f: Unary) -> String {
    match f {
        Unary::Scale(a) => format!("scale[{a}]"),
        other => format!("{other:?}").to_lowercase(),
    }
}

fn binary_name(g: Binary) -> String {
    match g {
        Binary::Axpy(a) => format!("axpy[{a}]"),
        other => format!("{other:?}").to_lowercase(),
    }
}

/// The listing a failure prints: one line per step, `sN` naming slots.
impl fmt::Debug for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "program (input seed {}):", self.seed)?;
        let mut slot = 0;
        for step in &self.steps {
            let s = |i: &usize| format!("s{i}");
            let (name, args, in_place_on) = match *step {
                Step::Import(i) => {
                    let inp = self.inputs[i];
                    let how = if inp.view {
                        "a view of the shared buffer"
                    } else {
                        "a buffer of its own"
                    };
                    let how = format!("{how}, {}", inp.dtype);
                    (format!("import in{i}"), format!(" ({how})"), None)
                }
                Step::Unary { f: u, x, in_place } => {
                    (unary_name(u), format!("({})", s(&x)), in_place.then_some(x))
                }
                Step::Binary { g, a, b, in_place } => (
                    binary_name(g),
                    format!("({}, {})", s(&a), s(&b)),
                    in_place.then_some(a),
                ),
                Step::AddRow { a, bias, in_place } => (
                    "add_row".into(),
                    format!("({}, {})", s(&a), s(&bias)),
                    in_place.then_some(a),
                ),
                Step::Matmul { a, b } => ("matmul".into(), format!("({}, {})", s(&a), s(&b)), None),
                Step::Matvec { a, x } => ("matvec".into(), format!("({}, {})", s(&a), s(&x)), None),
                Step::Transpose(x) => ("transpose".into(), format!("({})", s(&x)), None),
                Step::Sum(x) => ("sum".into(), format!("({})", s(&x)), None),
                Step::Max(x) => ("max".into(), format!("({})", s(&x)), None),
                Step::Dot(a, b) => ("dot".into(), format!("({}, {})", s(&a), s(&b)), None),
                Step::Softmax(x) => ("softmax".into(), format!("({})", s(&x)), None),
                Step::CausalSoftmax { x, q_len } => (
                    "causal_softmax".into(),
                    format!("({}, q_len {q_len})", s(&x)),
                    None,
                ),
                Step::RmsNorm { x, w, eps } => (
                    "rms_norm".into(),
                    format!("({}, {}, eps {eps})", s(&x), s(&w)),
                    None,
                ),
                Step::LayerNorm { x, w, b, eps } => (
                    "layer_norm".into(),
                    format!("({}, {}, {}, eps {eps})", s(&x), s(&w), s(&b)),
                    None,
                ),
                Step::SiluMul { gate, up } => (
                    "silu_mul".into(),
                    format!("({}, {})", s(&gate), s(&up)),
                    None,
                ),
                Step::Cast { x, to } => ("cast".into(), format!("({}, {to})", s(&x)), None),
                Step::Reshape { x, to } => ("reshape".into(), format!("({}, {to})", s(&x)), None),
                Step::SliceRows { x, start, len } => (
                    "slice_rows".into(),
                    format!("({}, {start}, {len})", s(&x)),
                    None,
                ),
                Step::Permute { x, axes } => {
                    let r = self.shapes[x].rank();
                    let axes = &axes[..r];
                    ("permute".into(), format!("({}, {axes:?})", s(&x)), None)
                }
                Step::Select { x, dim, index } => (
                    "select".into(),
                    format!("({}, dim {dim}, {index})", s(&x)),
                    None,
                ),
                Step::Contiguous(x) => ("contiguous".into(), format!("({})", s(&x)), None),
            };
            match in_place_on {
                Some(t) => writeln!(f, "  {name}_{args}   in place, {}", self.shapes[t])?,
                None => {
                    let held = if self.keep[slot] { "held" } else { "dropped" };
                    writeln!(
                        f,
                        "  s{slot} = {name}{args}   {} {}, {held}",
                        self.shapes[slot], self.dtypes[slot]
                    )?;
                    slot += 1;
                }
            }
        }
        Ok(())
    }
}

/// Raw choices of one input.
#[derive(Debug, Clone)]
pub struct RawInput {
    view: bool,
    matrix: bool,
    rows: u32,
    len: u32,
    dtype: u8,
}

/// Raw choices of one step: the op, three operand picks, flags and a
/// parameter (decoded modulo what fits, so any value is valid).
#[derive(Debug, Clone)]
pub struct RawStep {
    op: u8,
    a: u16,
    b: u16,
    c: u16,
    in_place: bool,
    keep: bool,
    param: u8,
}

/// Slot values stay within this magnitude for inputs in [-1, 1] (a step
/// whose bound would pass it becomes a tanh): no overflow, and the error
/// allowances stay meaningful.
const LIMIT: f64 = 1e4;

const ALPHAS: [f32; 4] = [2.0, -0.5, 0.25, -1.5];
const EPS: [f32; 3] = [1e-5, 1e-3, 0.1];

#[derive(Clone, Copy)]
enum Kind {
    Unary,
    Binary,
    AddRow,
    Matmul,
    Matvec,
    Transpose,
    Sum,
    Max,
    Dot,
    Softmax,
    CausalSoftmax,
    RmsNorm,
    LayerNorm,
    SiluMul,
    Cast,
    View,
    Contiguous,
}

/// The element types inputs and casts take (f32 half the time).
const DTYPES: [DType; 4] = [DType::F32, DType::F32, DType::F16, DType::Bf16];

/// Element-wise ops come up most (they are what fusion chains).
const KINDS: [Kind; 25] = [
    Kind::View,
    Kind::View,
    Kind::View,
    Kind::Contiguous,
    Kind::Cast,
    Kind::Cast,
    Kind::Unary,
    Kind::Binary,
    Kind::Unary,
    Kind::Binary,
    Kind::Unary,
    Kind::Binary,
    Kind::AddRow,
    Kind::Matmul,
    Kind::Matvec,
    Kind::Transpose,
    Kind::Sum,
    Kind::Max,
    Kind::Dot,
    Kind::Softmax,
    Kind::CausalSoftmax,
    Kind::RmsNorm,
    Kind::LayerNorm,
    Kind::SiluMul,
    Kind::Matmul,
];

struct Decoder {
    p: Program,
    /// Per slot: a bound on the magnitude of its elements.
    bound: Vec<f64>,
    /// The step being decoded is element-wise (its operands may be views).
    elementwise: bool,
    /// Per slot: the slot whose memory it names (itself unless a view).
    root: Vec<usize>,
    /// Per slot: the root's element of each of its elements.
    map: Vec<Vec<usize>>,
}

impl Decoder {
    fn slot(
        &mut self,
        shape: Shape,
        dtype: DType,
        bound: f64,
        keep: bool,
        input: Option<usize>,
    ) -> usize {
        self.p.shapes.push(shape);
        self.p.dtypes.push(dtype);
        self.p.keep.push(keep);
        self.p.input_of.push(input);
        self.bound.push(bound);
        let s = self.p.shapes.len() - 1;
        self.root.push(s);
        self.map.push((0..shape.numel() as usize).collect());
        s
    }

    /// Whether slot `s` is its memory's elements in order from the first
    /// (a reshape of it is allowed).
    fn contiguous(&self, s: usize) -> bool {
        let m = &self.map[s];
        m.windows(2).all(|w| w[1] == w[0] + 1)
    }

    /// Whether slot `s` is all of its memory in order (the ops other than
    /// element-wise ones take only such slots).
    fn plain(&self, s: usize) -> bool {
        let r = self.root[s];
        self.contiguous(s)
            && self.map[s].first() == Some(&0)
            && self.map[s].len() == self.map[r].len()
    }

    fn import(&mut self, shape: Shape, view: bool, keep: bool, dtype: DType) -> usize {
        let i = self.p.inputs.len();
        // Views of the shared buffer are f32 (16-bit inputs have buffers
        // of their own).
        let view = view && dtype == DType::F32;
        self.p.inputs.push(Input { shape, view, dtype });
        self.p.steps.push(Step::Import(i));
        self.slot(shape, dtype, 1.0, keep, Some(i))
    }

    /// A slot of `dtype` that `fits`, chosen by `pick` among them and a new
    /// input of shape `make` (a weight: a view of the shared buffer when
    /// `view`).
    fn operand(
        &mut self,
        pick: u16,
        fits: impl Fn(Shape) -> bool,
        make: Shape,
        view: bool,
        dtype: DType,
    ) -> usize {
        // Only element-wise ops (which take 16-bit operands) take views.
        let whole = dtype == DType::F32 && !self.elementwise;
        let cands: Vec<usize> = (0..self.p.shapes.len())
            .filter(|&s| fits(self.p.shapes[s]) && self.p.dtypes[s] == dtype)
            .filter(|&s| !whole || self.plain(s))
            .collect();
        let i = pick as usize % (cands.len() + 1);
        match cands.get(i) {
            Some(&s) => s,
            None => self.import(make, view, pick % 3 == 0, dtype),
        }
    }

    fn matrix(&mut self, pick: u16, dims: u16, view: bool) -> usize {
        let make = Shape::Matrix(1 + u32::from(dims) % 17, 1 + u32::from(dims / 17) % 19);
        self.operand(
            pick,
            |s| matches!(s, Shape::Matrix(..)),
            make,
            view,
            DType::F32,
        )
    }

    fn step(&mut self, r: &RawStep) {
        let n = self.p.shapes.len();
        // Half the steps take the newest slot (chains, which fusion
        // groups), the rest any slot.
        let x = if r.a % 2 == 0 {
            n - 1
        } else {
            usize::from(r.a / 2) % n
        };
        let sx = self.p.shapes[x];
        let bx = self.bound[x];
        let numel = sx.numel();
        let cols = sx.cols();
        let view = r.param & 0x80 != 0;
        let alpha = ALPHAS[usize::from(r.param >> 2) % ALPHAS.len()];
        let same_numel = move |s: Shape| s.numel() == numel;
        let row_vec = Shape::Vector(cols);
        let fits_row = move |s: Shape| s.numel() == u64::from(cols);
        let eps = EPS[usize::from(r.param) % EPS.len()];
        let dx = self.p.dtypes[x];
        let f32 = DType::F32;
        let mut kind = KINDS[usize::from(r.op) % KINDS.len()];
        let elementwise = matches!(kind, Kind::Unary | Kind::Binary | Kind::AddRow | Kind::Cast);
        // Only element-wise ops take 16-bit operands: other ops of a 16-bit
        // slot become a cast of it to f32.
        let to_f32 = dx != f32 && !elementwise;
        if to_f32 {
            kind = Kind::Cast;
        }
        // Other ops take whole tensors: a view becomes a copy first, and
        // a reshape of a strided view a copy.
        let viewish = matches!(kind, Kind::View | Kind::Contiguous);
        if (!elementwise && !to_f32 && !viewish && !self.plain(x))
            || (matches!(kind, Kind::Transpose) && sx.rank() > 2)
        {
            kind = Kind::Contiguous;
        }
        self.elementwise = elementwise;
        let (step, shape, bound) = match kind {
            Kind::Unary => {
                let f = [
                    Unary::Relu,
                    Unary::Sigmoid,
                    Unary::Tanh,
                    Unary::Swish,
                    Unary::Gelu,
                    Unary::Scale(alpha),
                    Unary::GeluTanh,
                    Unary::Copy,
                ][usize::from(r.param) % 8];
                let b = match f {
                    Unary::Sigmoid | Unary::Tanh => 1.0,
                    Unary::Scale(a) => f64::from(a.abs()) * bx,
                    _ => bx,
                };
                let in_place = r.in_place && f != Unary::Copy;
                (Step::Unary { f, x, in_place }, sx, b)
            }
            Kind::Binary => {
                let g = [Binary::Add, Binary::Sub, Binary::Mul, Binary::Axpy(alpha)]
                    [usize::from(r.param) % 4];
                let b = self.operand(r.b, same_numel, sx, view, dx);
                let bb = self.bound[b];
                let bound = match g {
                    Binary::Add | Binary::Sub => bx + bb,
                    Binary::Mul => bx * bb,
                    Binary::Axpy(a) => f64::from(a.abs()) * bx + bb,
                    other => unreachable!("the decoder makes no {other:?}"),
                };
                // In place, the other operand may not be another view of
                // the memory written (the op batch refuses it).
                let step = Step::Binary {
                    g,
                    a: x,
                    b,
                    in_place: r.in_place && (b == x || self.root[b] != self.root[x]),
                };
                (step, sx, bound)
            }
            Kind::AddRow => {
                let bias = self.operand(r.b, fits_row, row_vec, view, dx);
                let step = Step::AddRow {
                    a: x,
                    bias,
                    in_place: r.in_place && (bias == x || self.root[bias] != self.root[x]),
                };
                (step, sx, bx + self.bound[bias])
            }
            Kind::Matmul | Kind::Matvec => {
                let a = self.matrix(r.a, r.c, view);
                let Shape::Matrix(m, k) = self.p.shapes[a] else {
                    unreachable!("a matrix operand")
                };
                let ba = self.bound[a];
                if matches!(KINDS[usize::from(r.op) % KINDS.len()], Kind::Matmul) {
                    let make = Shape::Matrix(k, 1 + u32::from(r.c / 7) % 19);
                    let fits = move |s: Shape| matches!(s, Shape::Matrix(rows, _) if rows == k);
                    let b = self.operand(r.b, fits, make, view, f32);
                    let nn = self.p.shapes[b].cols();
                    let bound = f64::from(k) * ba * self.bound[b];
                    (Step::Matmul { a, b }, Shape::Matrix(m, nn), bound)
                } else {
                    let fits = move |s: Shape| s.numel() == u64::from(k);
                    let v = self.operand(r.b, fits, Shape::Vector(k), view, f32);
                    let bound = f64::from(k) * ba * self.bound[v];
                    (Step::Matvec { a, x: v }, Shape::Vector(m), bound)
                }
            }
            Kind::Transpose => (Step::Transpose(x), Shape::Matrix(cols, sx.rows()), bx),
            Kind::Sum => (Step::Sum(x), Shape::Vector(1), numel as f64 * bx),
            Kind::Max => (Step::Max(x), Shape::Vector(1), bx),
            Kind::Dot => {
                let b = self.operand(r.b, same_numel, sx, view, f32);
                let bound = numel as f64 * bx * self.bound[b];
                (Step::Dot(x, b), Shape::Vector(1), bound)
            }
            Kind::Softmax => (Step::Softmax(x), sx, 1.0),
            Kind::CausalSoftmax => {
                let rows = sx.rows();
                let q: Vec<u32> = (1..=rows.min(cols)).filter(|q| rows % q == 0).collect();
                let q_len = q[usize::from(r.param) % q.len()];
                (Step::CausalSoftmax { x, q_len }, sx, 1.0)
            }
            Kind::RmsNorm => {
                let w = self.operand(r.b, fits_row, row_vec, view, f32);
                let bound = f64::from(cols).sqrt() * self.bound[w];
                (Step::RmsNorm { x, w, eps }, sx, bound)
            }
            Kind::LayerNorm => {
                let w = self.operand(r.b, fits_row, row_vec, view, f32);
                let b = self.operand(r.c, fits_row, row_vec, !view, f32);
                let bound = f64::from(cols).sqrt() * self.bound[w] + self.bound[b];
                (Step::LayerNorm { x, w, b, eps }, sx, bound)
            }
            Kind::SiluMul => {
                let up = self.operand(r.b, move |s| s == sx, sx, view, f32);
                let bound = bx * self.bound[up];
                (Step::SiluMul { gate: x, up }, sx, bound)
            }
            Kind::Contiguous => (Step::Contiguous(x), sx, bx),
            Kind::View => {
                let rank = sx.rank();
                let d = sx.dims();
                let step = match r.param % 4 {
                    0 if self.contiguous(x) => Step::Reshape {
                        x,
                        to: crate::views::reshape_target(numel as u32, r.param >> 2, r.c),
                    },
                    1 if rank >= 2 => Step::Permute {
                        x,
                        axes: crate::views::nth_permutation(rank, usize::from(r.c)),
                    },
                    2 if rank >= 2 => {
                        let dim = usize::from(r.c) % rank;
                        Step::Select {
                            x,
                            dim: dim as u8,
                            index: u32::from(r.b) % d[dim],
                        }
                    }
                    _ => {
                        let start = u32::from(r.b) % d[0];
                        let len = 1 + u32::from(r.c) % (d[0] - start);
                        Step::SliceRows { x, start, len }
                    }
                };
                let (shape, _) = crate::views::view_of(sx, &step).expect("a view step");
                (step, shape, bx)
            }
            Kind::Cast => {
                let to = if to_f32 {
                    f32
                } else {
                    DTYPES[usize::from(r.param) % DTYPES.len()]
                };
                (Step::Cast { x, to }, sx, bx)
            }
        };
        let (step, shape, bound) = if bound > LIMIT {
            let f = Unary::Tanh;
            (
                Step::Unary {
                    f,
                    x,
                    in_place: false,
                },
                sx,
                1.0,
            )
        } else {
            (step, shape, bound)
        };
        self.p.steps.push(step);
        match step.in_place_target() {
            Some(t) => {
                // Every view of the memory written may see the new values.
                for o in 0..self.root.len() {
                    if self.root[o] == self.root[t] {
                        self.bound[o] = self.bound[o].max(bound);
                    }
                }
                self.bound[t] = bound;
            }
            None => {
                let dtype = crate::reference::dtype_of(&self.p.dtypes, &step);
                let s = self.slot(shape, dtype, bound, r.keep, None);
                if let Some((_, m)) = crate::views::view_of(sx, &step) {
                    self.root[s] = self.root[x];
                    self.map[s] = m.iter().map(|&i| self.map[x][i]).collect();
                }
                // `contiguous` of a whole slot is that slot (no copy).
                if matches!(step, Step::Contiguous(_)) && self.plain(x) {
                    self.root[s] = self.root[x];
                    self.map[s] = self.map[x].clone();
                }
            }
        }
    }
}

fn decode(inputs: &[RawInput], steps: &[RawStep], seed: u64) -> Program {
    let mut d = Decoder {
        p: Program {
            inputs: Vec::new(),
            steps: Vec::new(),
            shapes: Vec::new(),
            dtypes: Vec::new(),
            keep: Vec::new(),
            input_of: Vec::new(),
            seed,
        },
        bound: Vec::new(),
        elementwise: false,
        root: Vec::new(),
        map: Vec::new(),
    };
    let mut first = None;
    for (i, r) in inputs.iter().enumerate() {
        let shape = if r.matrix {
            Shape::Matrix(r.rows, 1 + (r.len - 1) % 19)
        } else {
            Shape::Vector(r.len)
        };
        // Half the later inputs share the first one's shape, so binary ops
        // between inputs come up.
        let shape = match first {
            Some(s) if r.rows % 2 == 0 => s,
            _ => shape,
        };
        first.get_or_insert(shape);
        let dtype = DTYPES[usize::from(r.dtype) % DTYPES.len()];
        d.import(shape, r.view, i % 2 == 0 || r.rows > 8, dtype);
    }
    for r in steps {
        d.step(r);
    }
    d.p
}

/// Programs of 1 to 12 steps over 1 to 3 inputs (plus the weights steps
/// import): vectors of 1..=67, matrices up to 17×19.
pub fn programs() -> impl Strategy<Value = Program> {
    let input = (
        any::<bool>(),
        any::<bool>(),
        1u32..=17,
        1u32..=67,
        any::<u8>(),
    )
        .prop_map(|(view, matrix, rows, len, dtype)| RawInput {
            view,
            matrix,
            rows,
            len,
            dtype,
        });
    let step = (
        0u8..KINDS.len() as u8,
        any::<u16>(),
        any::<u16>(),
        any::<u16>(),
        any::<bool>(),
        any::<bool>(),
        any::<u8>(),
    )
        .prop_map(|(op, a, b, c, in_place, keep, param)| RawStep {
            op,
            a,
            b,
            c,
            in_place,
            keep,
            param,
        });
    (
        proptest::collection::vec(input, 1..=3),
        proptest::collection::vec(step, 1..=12),
        any::<u64>(),
    )
        .prop_map(|(i, s, seed)| decode(&i, &s, seed))
}

/// A program written out by hand (for fixed regression programs): the
/// inputs imported first, then `steps`, every slot held.
pub fn fixed(inputs: &[Input], steps: &[Step], seed: u64) -> Program {
    let mut p = Program {
        inputs: inputs.to_vec(),
        steps: Vec::new(),
        shapes: Vec::new(),
        dtypes: Vec::new(),
        keep: Vec::new(),
        input_of: Vec::new(),
        seed,
    };
    for (i, inp) in inputs.iter().enumerate() {
        p.steps.push(Step::Import(i));
        p.shapes.push(inp.shape);
        p.dtypes.push(inp.dtype);
        p.input_of.push(Some(i));
        p.keep.push(true);
    }
    for &s in steps {
        p.steps.push(s);
        if s.makes_slot() {
            p.shapes.push(crate::reference::shape_of(&p.shapes, &s));
            p.dtypes.push(crate::reference::dtype_of(&p.dtypes, &s));
            p.input_of.push(None);
            p.keep.push(true);
        }
    }
    p
}
