//! The recorded program of an op batch (a dataflow graph of ops; not a
//! [`crate::Graph`]): values, the storage they live in, and the ops that
//! produce them. Pure data; planning and execution read it.

use super::strides::Layout;
use crate::ops::dtype::DType;
use crate::ops::tensor::Shape;
use crate::ops::{Binary, Unary};

/// Index of a value.
pub(crate) type V = usize;
/// Index of a storage (one GPU buffer at execution).
pub(crate) type S = usize;

/// One value: a shape, an element type, the storage it is (or would be)
/// written to, and where in it ([`Layout`]; `None`: contiguous from the
/// storage's first element). An in-place op makes a new value in its
/// input's storage with its input's layout (of the storage's element type:
/// a storage holds one type).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Value {
    pub shape: Shape,
    pub dtype: DType,
    pub storage: S,
    pub layout: Option<Layout>,
}

impl Value {
    /// Bytes the value takes in memory.
    pub fn bytes(&self) -> u64 {
        self.shape.numel() * self.dtype.size()
    }
}

/// What an op computes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Op {
    /// `f(x)`.
    Unary(Unary, V),
    /// `g(a, b)`.
    Binary(Binary, V, V),
    /// `a[i] + bias[i % cols]`: a row vector added to every row.
    AddRow(V, V),
    /// `a · b`, row-major.
    Matmul(V, V),
    /// Sum of all elements.
    Sum(V),
    /// Largest element.
    Max(V),
    /// Dot product.
    Dot(V, V),
    /// Softmax of each row.
    Softmax(V),
    /// Transpose.
    Transpose(V),
    /// Every element `value` (rounded to the output's element type).
    Fill(f32),
    /// `x` converted to the output's element type (element-wise).
    Cast(V),
    /// A transformer op ([`crate::ops::nn`]) on f32 tensors.
    Nn(NnOp),
}

/// The transformer ops an op batch records (each one built-in dispatch).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum NnOp {
    /// RMSNorm of each row of `x` with weight `w`.
    RmsNorm { x: V, w: V, eps: f32 },
    /// LayerNorm of each row of `x` with weight `w` and bias `b`.
    LayerNorm { x: V, w: V, b: V, eps: f32 },
    /// `silu(gate) * up`.
    SiluMul { gate: V, up: V },
    /// Causal softmax of rows in blocks of `q_len` queries.
    CausalSoftmax { x: V, q_len: u32 },
    /// Rotary embedding of `x` with inverse frequencies `inv` and the
    /// positions in the op batch's word buffer `pos`.
    Rotary {
        x: V,
        inv: V,
        pos: usize,
        heads: u32,
        head_dim: u32,
    },
    /// Causal prefill attention.
    Prefill {
        q: V,
        k: V,
        v: V,
        shape: crate::ops::nn::PrefillShape,
        scale: f32,
    },
    /// Rows of `table` by the token ids in word buffer `ids`, out-of-range
    /// ids counted in word buffer `flag`.
    Embedding { table: V, ids: usize, flag: usize },
    /// Decode attention of `q` against caches `k` and `v` with the lengths
    /// in word buffer `lens` and the op batch's scratch buffer `scratch`.
    Decode {
        q: V,
        k: V,
        v: V,
        lens: usize,
        scratch: usize,
        shape: crate::ops::nn::DecodeShape,
        scale: f32,
    },
    /// `cache` (one of a KV pair) with `new` appended at the positions in
    /// word buffer `pos`, positions past the end counted in `flag`.
    KvAppend {
        new: V,
        cache: V,
        pos: usize,
        flag: usize,
        shape: crate::ops::nn::KvShape,
    },
}

impl Op {
    /// The values the op reads.
    pub fn inputs(&self) -> Vec<V> {
        match *self {
            Op::Unary(_, x)
            | Op::Sum(x)
            | Op::Max(x)
            | Op::Softmax(x)
            | Op::Transpose(x)
            | Op::Cast(x) => {
                vec![x]
            }
            Op::Binary(_, a, b) | Op::AddRow(a, b) | Op::Matmul(a, b) | Op::Dot(a, b) => {
                vec![a, b]
            }
            Op::Fill(_) => Vec::new(),
            Op::Nn(NnOp::RmsNorm { x, w, .. }) => vec![x, w],
            Op::Nn(NnOp::LayerNorm { x, w, b, .. }) => vec![x, w, b],
            Op::Nn(NnOp::SiluMul { gate, up }) => vec![gate, up],
            Op::Nn(NnOp::CausalSoftmax { x, .. }) => vec![x],
            Op::Nn(NnOp::Rotary { x, inv, .. }) => vec![x, inv],
            Op::Nn(NnOp::Prefill { q, k, v, .. }) => vec![q, k, v],
            Op::Nn(NnOp::Embedding { table, .. }) => vec![table],
            Op::Nn(NnOp::Decode { q, k, v, .. }) => vec![q, k, v],
            Op::Nn(NnOp::KvAppend { new, cache, .. }) => vec![new, cache],
        }
    }

    /// Element-wise (fusable into a chain).
    pub fn is_elementwise(&self) -> bool {
        matches!(
            self,
            Op::Unary(..) | Op::Binary(..) | Op::AddRow(..) | Op::Cast(..)
        )
    }

    /// The op's short name (`add`, `gelu`, `matmul`), as a fused kernel's
    /// label lists it.
    #[cfg_attr(not(feature = "glsl"), allow(dead_code))]
    pub fn name(&self) -> &'static str {
        let short = |n: &'static str| n.strip_prefix("ops::").unwrap_or(n);
        match self {
            Op::Unary(f, _) => short(f.name()),
            Op::Binary(g, _, _) => short(g.name()),
            Op::AddRow(..) => "add_row",
            Op::Matmul(..) => "matmul",
            Op::Sum(_) => "sum",
            Op::Max(_) => "max",
            Op::Dot(..) => "dot",
            Op::Softmax(_) => "softmax",
            Op::Transpose(_) => "transpose",
            Op::Fill(_) => "fill",
            Op::Cast(_) => "cast",
            Op::Nn(NnOp::RmsNorm { .. }) => "rms_norm",
            Op::Nn(NnOp::LayerNorm { .. }) => "layer_norm",
            Op::Nn(NnOp::SiluMul { .. }) => "silu_mul",
            Op::Nn(NnOp::CausalSoftmax { .. }) => "causal_softmax",
            Op::Nn(NnOp::Rotary { .. }) => "rotary",
            Op::Nn(NnOp::Prefill { .. }) => "attention_prefill",
            Op::Nn(NnOp::Embedding { .. }) => "embedding",
            Op::Nn(NnOp::Decode { .. }) => "attention_decode",
            Op::Nn(NnOp::KvAppend { .. }) => "kv_append",
        }
    }

    /// Scalars the op passes to a fused kernel.
    pub fn scalars(&self) -> Vec<f32> {
        match *self {
            Op::Unary(Unary::Scale(a), _) | Op::Binary(Binary::Axpy(a), _, _) | Op::Fill(a) => {
                vec![a]
            }
            _ => Vec::new(),
        }
    }
}

/// One recorded op and the value it produces.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Node {
    pub op: Op,
    pub out: V,
}

/// The whole recording.
#[derive(Debug, Clone, Default)]
pub(crate) struct Program {
    pub values: Vec<Value>,
    pub nodes: Vec<Node>,
    /// Producer node of each value (`None`: an upload or import).
    pub producer: Vec<Option<usize>>,
    /// Number of storages.
    pub storages: usize,
    /// Element type of each storage (of every value in it).
    pub storage_dtype: Vec<DType>,
    /// Elements of each storage (of the value that made it).
    pub storage_numel: Vec<u64>,
    /// Per value: for a view (no producer), the value whose memory it
    /// names (its storage as that value left it); `None` for the others.
    pub alias: Vec<Option<V>>,
}

impl Program {
    /// A new f32 value in a new storage, with no producer.
    #[cfg(test)]
    pub fn leaf(&mut self, shape: Shape) -> V {
        self.leaf_typed(shape, DType::F32)
    }

    /// The 16-bit chain the fusion tests share: `c = cast(relu(x + y))` to
    /// f32 of f16 leaves `x` and `y` (nodes 0–2), returning `(a, r, c)`:
    /// the sum, the relu and the cast.
    #[cfg(test)]
    pub fn f16_chain(&mut self, len: u32) -> (V, V, V) {
        use crate::ops::{Binary, Unary};
        let v = Shape::Vector(len);
        let x = self.leaf_typed(v, DType::F16);
        let y = self.leaf_typed(v, DType::F16);
        let a = self.op_typed(Op::Binary(Binary::Add, x, y), v, DType::F16);
        let r = self.op_typed(Op::Unary(Unary::Relu, a), v, DType::F16);
        (a, r, self.op(Op::Cast(r), v))
    }

    /// A new value of `dtype` in a new storage, with no producer.
    pub fn leaf_typed(&mut self, shape: Shape, dtype: DType) -> V {
        let s = self.new_storage(dtype, shape);
        self.push_value(shape, s, None)
    }

    /// A new leaf value in an existing storage (an import seen before).
    pub fn leaf_in(&mut self, shape: Shape, storage: S) -> V {
        self.push_value(shape, storage, None)
    }

    /// Records `op` writing a new f32 storage.
    pub fn op(&mut self, op: Op, shape: Shape) -> V {
        self.op_typed(op, shape, DType::F32)
    }

    /// Records `op` writing a new storage of `dtype`.
    pub fn op_typed(&mut self, op: Op, shape: Shape, dtype: DType) -> V {
        let s = self.new_storage(dtype, shape);
        self.op_into(op, shape, s)
    }

    fn new_storage(&mut self, dtype: DType, shape: Shape) -> S {
        self.storages += 1;
        self.storage_dtype.push(dtype);
        self.storage_numel.push(shape.numel());
        self.storages - 1
    }

    /// A view of `of`'s storage as `of` left it: `shape` at `layout`
    /// (normalized: `None` where contiguous from element 0). No node
    /// computes it; reading it reads the storage.
    pub fn view(&mut self, of: V, shape: Shape, layout: Layout) -> V {
        let storage = self.values[of].storage;
        let v = self.push_value(shape, storage, None);
        self.values[v].layout = layout.normalized(shape);
        self.alias[v] = Some(of);
        v
    }

    /// The value whose memory `v` names: `v` itself unless it is a view,
    /// else the root of what it views (a producer's output or a leaf).
    pub fn root(&self, mut v: V) -> V {
        while let Some(a) = self.alias.get(v).copied().flatten() {
            v = a;
        }
        v
    }

    /// Whether `v` is its whole storage, contiguous from element 0 (what
    /// the built-in kernels bind).
    pub fn plain(&self, v: V) -> bool {
        let val = &self.values[v];
        val.layout.is_none() && val.shape.numel() == self.storage_numel[val.storage]
    }

    /// Records `op` writing `storage` in place through `layout` (the
    /// layout of the value it overwrites).
    pub fn op_into_layout(
        &mut self,
        op: Op,
        shape: Shape,
        storage: S,
        layout: Option<Layout>,
    ) -> V {
        let v = self.op_into(op, shape, storage);
        self.values[v].layout = layout;
        v
    }

    /// Records `op` writing `storage` (in place).
    pub fn op_into(&mut self, op: Op, shape: Shape, storage: S) -> V {
        let node = self.nodes.len();
        let v = self.push_value(shape, storage, Some(node));
        self.nodes.push(Node { op, out: v });
        v
    }

    fn push_value(&mut self, shape: Shape, storage: S, producer: Option<usize>) -> V {
        let dtype = self.storage_dtype[storage];
        self.values.push(Value {
            shape,
            dtype,
            storage,
            layout: None,
        });
        self.producer.push(producer);
        self.alias.push(None);
        self.values.len() - 1
    }
}
