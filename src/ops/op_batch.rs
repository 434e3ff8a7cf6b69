//! The op batch: built-in ops on tensors, one submission, fusion (see
//! [`OpBatch`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use super::dtype::DType;
use super::fusion::program::{Op, Program, V};
use super::tensor::{Shape, Tensor, TensorId};
use super::{Binary, Unary};
use crate::{Buffer, Device, Error, Result, Ticket};
use inputs::{Bound, ParamsValue};

mod dtypes;
mod exec;
mod graph;
mod inputs;
mod liveness;
mod report;
mod transformer;
mod views;

/// Generated kernels by (source, specialization), kept across replans.
type KernelMemo = std::collections::HashMap<(String, Vec<u32>), crate::Kernel>;

/// Options of an [`OpBatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpBatchOptions {
    /// Fuse element-wise runs and matmul epilogues (needs the `glsl`
    /// feature; without it ops always run unfused). Default: true.
    pub fusion: bool,
    /// GPU timestamps on each execute's batch, read with
    /// [`Ticket::profile`], and on graphs made by [`OpBatch::graph`] and
    /// [`OpBatch::graph_on`], read with
    /// [`Graph::last_profile`](crate::Graph::last_profile) (default: off).
    pub profiling: crate::Profiling,
}

impl Default for OpBatchOptions {
    fn default() -> Self {
        OpBatchOptions {
            fusion: true,
            profiling: crate::Profiling::Off,
        }
    }
}

impl OpBatchOptions {
    /// These options with fusion on or off.
    pub fn with_fusion(mut self, fusion: bool) -> Self {
        self.fusion = fusion;
        self
    }

    /// These options with `profiling` on each execute.
    pub fn with_profiling(mut self, profiling: crate::Profiling) -> Self {
        self.profiling = profiling;
        self
    }
}

static NEXT_BATCH: AtomicU64 = AtomicU64::new(1);

/// A recorder of built-in ops, made by [`Device::ops`]: record built-in ops on [`Tensor`]s, then run them all in
/// one submission, with element-wise runs fused into generated kernels.
///
/// ```
/// # fn main() -> vkcompute::Result<()> {
/// use vkcompute::Device;
/// let gpu = Device::new()?;
/// let mut ops = gpu.ops();
/// let x = ops.upload(&[1.0f32, -2.0, 3.0, -4.0])?;
/// let b = ops.upload(&[0.5f32; 4])?;
/// let y = ops.scale(&x, 2.0)?;
/// let y = ops.add(&y, &b)?;
/// ops.relu_(&y)?;                    // in place
/// let total = ops.sum(&y)?;
/// ops.execute_blocking()?;           // one submission
/// assert_eq!(ops.read(&y)?, [2.5, 0.0, 6.5, 0.0]);
/// assert_eq!(ops.read(&total)?, [9.0]);
/// # Ok(())
/// # }
/// ```
///
/// **Recording** checks shapes at once: sizes that do not fit are an
/// [`Error::OpShape`] (a matmul's, an [`Error::MatmulShape`]) and nothing is
/// recorded. A tensor is row-major of rank 1 to 4 ([`Shape`]: a vector, a
/// matrix, [`Shape::Dims3`], [`Shape::Dims4`]; [`OpBatch::upload_shaped`],
/// [`OpBatch::import_shaped`]). Element-wise ops take any rank (operands
/// of as many elements; [`OpBatch::add_row`] adds along the last
/// dimension); softmax, the norms and the other per-row ops see rows ×
/// the last dimension; matmul and matvec take matrices, transpose rank 1
/// or 2 (else an error naming the op and the rank).
///
/// **Views** copy nothing: [`OpBatch::reshape`], [`OpBatch::slice_rows`]
/// (an offset into the same memory), [`OpBatch::permute`] and
/// [`OpBatch::select`] (strided views: head `h` of a `[T×H×D]` tensor is
/// a `[T×D]` view whose rows lie `H·D` apart) name the memory of the
/// tensor they view. Element-wise ops read and write views in place,
/// fused or not; an in-place op on a view writes the tensor viewed, and
/// one on the tensor changes its views (in recording order). Ops that bind
/// whole buffers (matmul, reductions, softmax, transpose, the transformer
/// ops) take a view only where it is its whole memory in order (a
/// reshape), and refuse others with [`Error::OpShape`]: pass
/// [`OpBatch::contiguous`] of it, which copies only where needed. Bad
/// views (axes that are no permutation, rows past the end, a reshape of a
/// strided view or of another element count) are [`Error::OpShape`]s
/// naming the op, the tensor and the limit. See the `views` module of the
/// op batch for the aliasing rules.
/// [`OpBatch::upload`] copies data to the GPU at once;
/// [`OpBatch::import`] uses a [`Buffer`] in place (no copy) and keeps it
/// alive; [`OpBatch::import_slice`] uses a [`BufferSlice`](crate::BufferSlice)
/// in place (one buffer holding many weights; its byte offset a multiple
/// of the adapter's `minStorageBufferOffsetAlignment` and of 16, else an
/// [`Error::OpShape`] naming both); [`OpBatch::import_params`] reads a
/// [`Params`](crate::Params) value. In-place ops on an imported tensor
/// write the user's memory.
///
/// **Execution** ([`OpBatch::execute`]) submits every recorded op once, in
/// recording order, with a barrier only where a step reads or overwrites
/// memory an earlier step wrote (or overwrites memory it read). Executing
/// again runs the whole recording again (in-place ops apply again) with the
/// same buffers and kernels: nothing is compiled, allocated or re-planned
/// unless the recording or the set of tensors the user holds changed.
///
/// **Element types** ([`Tensor::dtype`]): f32 (what [`OpBatch::upload`],
/// [`OpBatch::import`] and the ops on f32 tensors make), f16 ([`F16`](super::F16)),
/// bf16 ([`Bf16`](super::Bf16)) and `u32`, uploaded and imported with
/// [`OpBatch::upload_as`], [`OpBatch::import_as`] and
/// [`OpBatch::import_slice_as`] (same checks as the f32 forms), read
/// exactly with [`OpBatch::read_as`] ([`OpBatch::read`] widens f16 and bf16
/// to f32). [`OpBatch::cast`] converts among f32, f16 and bf16 (rounding
/// to nearest even, as the host's [`F16::from_f32`](super::F16::from_f32)
/// and [`Bf16::from_f32`](super::Bf16::from_f32)) and between `u32` and
/// f32; it is an element-wise op, fused with its neighbours. The
/// element-wise ops (unary, binary, in place, [`OpBatch::add_row`],
/// [`OpBatch::full_as`]) take f32, f16 and bf16 tensors, compute in f32 and
/// round each result to the tensor's type, fused or not (16-bit tensors
/// need `shaderFloat16` and 16-bit storage for f16, 16-bit storage for
/// bf16, else [`Error::Unsupported`], and the `glsl` feature, else
/// [`OpsError::Dtype`](crate::ops::OpsError::Dtype)); operands of two types are an [`OpsError::Dtype`](crate::ops::OpsError::Dtype)
/// naming both. Every other op (matmul, reductions, softmax, transpose,
/// the transformer ops) takes f32 tensors only and refuses others with
/// [`OpsError::Dtype`](crate::ops::OpsError::Dtype): cast first.
///
/// **Memory**: the op batch's own values (results and intermediates, not
/// uploads or imports) live in pooled buffers reused by liveness: a value
/// no held tensor names needs memory only from the step that writes it to
/// the last step that reads it, after which its buffer serves a later
/// value of a similar size (at least as many bytes, at most twice as
/// many: a 16-bit value takes half an f32's, and values of any types share
/// buffers). A long chain of steps thus takes a few buffers, not one per
/// value ([`OpBatch::num_buffers`]). A held tensor's buffer is never
/// given to a value after it, nor is a buffer handed out by
/// [`OpBatch::buffer`] ever given to another value. The barriers are
/// planned over the buffers, so a reused buffer is written only after the
/// steps that read its previous value.
///
/// **Launch reports**: the transformer ops that meet values only known at
/// launch (the embedding's token ids, the KV append's positions) guard
/// their bounds and count what falls outside into their `flag` buffer.
/// Every execute and graph launch of an op batch with such ops ends with
/// one small kernel that notes how much each flag grew in that launch, and
/// the launch's ticket returns [`OpsError::Flagged`](crate::ops::OpsError::Flagged)
/// from [`Ticket::wait`] when one did, with that launch's count, also
/// while later launches are in flight. The flags keep their running
/// counts (a flag the user resets counts from zero again). At most 4
/// distinct flag buffers per op batch (ops may share one; a fifth is an
/// [`Error::OpShape`]); launches are numbered in submission order, so an
/// op batch whose executes and graph launches go to different queues at
/// once may see a count reported by its neighbour; a ticket waited after
/// 1024 later launches of its op batch completed reports nothing.
///
/// **Graphs** ([`OpBatch::graph`], [`OpBatch::graph_on`],
/// [`OpBatch::graph_in`]): the same plan recorded once into a
/// [`Graph`](crate::Graph) and launched any number of times, with new
/// inputs per launch through imported buffers written between launches,
/// imported `Params` (each launch keeps the value it was launched with)
/// and the transformer ops' `u32` buffers. The graph binds the op batch's
/// buffers, so [`OpBatch::read`] after a launch gives its results;
/// [`OpBatch::graph`] says what a graph sees once the op batch replans.
///
/// **Fusion** (with the `glsl` feature, on by default
/// ([`OpBatchOptions::fusion`])): consecutive element-wise ops over one
/// shape run as one generated kernel (vec4 loads where the length is a
/// multiple of 4 and no row bias is involved), compiled once per chain
/// through the device's kernel cache and on-disk cache; a run right after
/// a matmul whose output it consumes becomes that matmul's epilogue (e.g.
/// matmul + bias + gelu in one pass) when the tiled matmul kernel runs; a
/// sum or max of a value of a run takes the run as its prologue. A group
/// touches at most 12 buffers and 16 scalars; past that a new group starts.
/// Values no held tensor names and no later step reads never reach memory.
/// Every tensor the user holds when `execute` (or `graph`) is called is
/// materialised, so [`OpBatch::read`] returns it; the only tensors it
/// refuses ([`Error::TensorUnavailable`]) are those of another op batch and
/// those recorded or changed in place after the last `execute` or `graph`
/// (a tensor dropped before `execute` cannot be asked for).
///
/// **Transformer ops** ([`OpBatch::rms_norm`], [`OpBatch::layer_norm`],
/// [`OpBatch::silu_mul`], [`OpBatch::causal_softmax`], [`OpBatch::rotary`],
/// [`OpBatch::embedding`], [`OpBatch::kv_append_`],
/// [`OpBatch::attention_decode`], [`OpBatch::attention_prefill`]) run the
/// kernels of [`crate::ops::nn`] on f32 tensors, one step each; the `u32`
/// buffers they take (positions, token ids, lengths, flag words) are kept
/// and read at every execute and graph launch, so writing them between
/// executes or launches replays the recording with new values. Argmax and
/// sampling (`u32` results) are free ops only.
///
/// Not yet: dot products with a prologue, 16-bit operands of the
/// matmul, reduction and transformer ops, views read in place by those
/// ops, vec4 loads in kernels that read views.
pub struct OpBatch {
    gpu: Device,
    id: u64,
    options: OpBatchOptions,
    graph: Program,
    /// Per tensor slot: who holds it, and the value it names now.
    tensors: Vec<(Weak<TensorId>, V)>,
    /// Per storage: the memory it binds, once there is some.
    buffers: Vec<Option<Bound>>,
    /// Per storage: whether it is a user's memory (an import of a buffer,
    /// a slice or a `Params`).
    imported: Vec<bool>,
    /// Per storage: whether its memory was given when it was recorded (an
    /// upload or an import); the others draw on the pool.
    fixed: Vec<bool>,
    /// Imports seen: (buffer identity, first byte, end byte, storage).
    import_keys: Vec<(usize, u64, u64, usize)>,
    /// Pooled buffers of the op batch's own storages (liveness reuse).
    pool: Vec<Buffer<f32>>,
    /// Per storage: its pooled buffer under the current plan.
    pool_of: Vec<Option<usize>>,
    /// A graph was made from the current buffers: the next replan starts
    /// a new pool and leaves the graph's buffers to it.
    graphed: bool,
    /// Pooled buffers handed out by [`OpBatch::buffer`] (buffer identity,
    /// storage): later plans give each only to its storage.
    given: std::sync::Mutex<Vec<(usize, usize)>>,
    /// Imported `Params` (storage, value): each execute writes the value.
    params: Vec<(usize, ParamsValue)>,
    prepared: Option<exec::Prepared>,
    kernel_memo: KernelMemo,
    /// Scratch of each reduction node (counter and partials), made once.
    scratch: std::collections::HashMap<usize, Buffer<u32>>,
    /// The `u32` buffers transformer ops read or count into (positions,
    /// token ids, flag words), by the index their op names.
    words: Vec<Buffer<u32>>,
    /// The launch reports of the flags its transformer ops count into
    /// (made with the first such op).
    report: Option<Arc<report::FlagReport>>,
    /// Scratch of each decode attention op, made when it is recorded.
    nn_scratch: Vec<Buffer<f32>>,
    /// Nodes covered by the last successful execute.
    executed_nodes: Option<usize>,
}

impl std::fmt::Debug for OpBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpBatch")
            .field("operations", &self.graph.nodes.len())
            .field("buffers", &self.num_buffers())
            .field("options", &self.options)
            .finish()
    }
}

impl Device {
    /// A new, empty [`OpBatch`] with default options (fusion on).
    pub fn ops(&self) -> OpBatch {
        self.ops_with(OpBatchOptions::default())
    }

    /// A new, empty [`OpBatch`] with `options`.
    pub fn ops_with(&self, options: OpBatchOptions) -> OpBatch {
        OpBatch {
            gpu: self.clone(),
            id: NEXT_BATCH.fetch_add(1, Ordering::Relaxed),
            options,
            graph: Program::default(),
            tensors: Vec::new(),
            buffers: Vec::new(),
            imported: Vec::new(),
            fixed: Vec::new(),
            import_keys: Vec::new(),
            pool: Vec::new(),
            pool_of: Vec::new(),
            graphed: false,
            given: std::sync::Mutex::new(Vec::new()),
            params: Vec::new(),
            prepared: None,
            kernel_memo: KernelMemo::new(),
            scratch: std::collections::HashMap::new(),
            words: Vec::new(),
            report: None,
            nn_scratch: Vec::new(),
            executed_nodes: None,
        }
    }
}

fn shape_err(op: &'static str, detail: String) -> Error {
    Error::OpShape { op, detail }
}

impl OpBatch {
    /// Ops recorded.
    pub fn num_operations(&self) -> usize {
        self.graph.nodes.len()
    }

    /// Distinct GPU buffers the op batch binds: uploads, imported buffers
    /// (slices of one buffer count once), and (after an execute) the pooled
    /// buffers of the values fusion could not keep in registers, each
    /// shared by every value whose life does not overlap another's.
    pub fn num_buffers(&self) -> usize {
        let keys: std::collections::BTreeSet<usize> =
            self.buffers.iter().flatten().map(Bound::key).collect();
        keys.len()
    }

    /// The options this op batch was made with.
    pub fn options(&self) -> OpBatchOptions {
        self.options
    }

    /// Whether fusion actually runs (the option, and the `glsl` feature).
    pub fn fusion_active(&self) -> bool {
        self.options.fusion && cfg!(feature = "glsl")
    }

    fn new_tensor(&mut self, v: V) -> Tensor {
        let id = Arc::new(TensorId {
            batch: self.id,
            slot: self.tensors.len(),
        });
        self.tensors.push((Arc::downgrade(&id), v));
        Tensor {
            id,
            shape: self.graph.values[v].shape,
            dtype: self.graph.values[v].dtype,
        }
    }

    fn grow_storages(&mut self) {
        let n = self.graph.storages;
        self.buffers.resize_with(n, || None);
        self.imported.resize(n, false);
        self.fixed.resize(n, false);
        self.pool_of.resize(n, None);
    }

    /// The value `t` names, if it belongs here.
    fn value(&self, t: &Tensor) -> Result<V> {
        if t.id.batch != self.id {
            return Err(Error::TensorUnavailable {
                detail: format!(
                    "the tensor {} belongs to another op batch; import its data instead",
                    t.shape
                ),
            });
        }
        Ok(self.tensors[t.id.slot].1)
    }

    fn check_shape(op: &'static str, what: &str, s: Shape) -> Result<()> {
        if s.numel() == 0 || s.numel() > u64::from(u32::MAX) {
            return Err(shape_err(
                op,
                format!(
                    "{what} {s} has {} elements; 1 to {} are allowed",
                    s.numel(),
                    u32::MAX
                ),
            ));
        }
        Ok(())
    }

    /// Records `op` producing a new f32 tensor of `shape`.
    fn push(&mut self, op: Op, shape: Shape) -> Tensor {
        self.push_typed(op, shape, DType::F32)
    }

    /// Records `op` producing a new tensor of `shape` and `dtype`.
    fn push_typed(&mut self, op: Op, shape: Shape, dtype: DType) -> Tensor {
        let v = self.graph.op_typed(op, shape, dtype);
        self.grow_storages();
        self.new_tensor(v)
    }

    /// Records `op` overwriting `t` (in place; through its layout where it
    /// is a view), then points the other views of its storage at the
    /// result.
    fn push_into(&mut self, op: Op, t: &Tensor) -> Result<()> {
        let old = self.value(t)?;
        self.check_overlap(&op, old)?;
        let val = self.graph.values[old];
        let v = self
            .graph
            .op_into_layout(op, val.shape, val.storage, val.layout);
        self.tensors[t.id.slot].1 = v;
        self.rebase_views(t.id.slot, old, v);
        Ok(())
    }

    fn same_numel(&self, op: &'static str, a: &Tensor, b: &Tensor) -> Result<()> {
        if a.numel() != b.numel() {
            return Err(shape_err(
                op,
                format!("operands {} and {} differ in size", a.shape, b.shape),
            ));
        }
        Ok(())
    }

    /// `f(x)` as a new tensor of `x`'s element type (f32, f16 or bf16;
    /// computed in f32).
    pub fn unary(&mut self, f: Unary, x: &Tensor) -> Result<Tensor> {
        let v = self.float_value(f.name(), "x", x)?;
        Ok(self.push_typed(Op::Unary(f, v), x.shape, x.dtype))
    }

    /// `x = f(x)` in place.
    pub fn unary_(&mut self, f: Unary, x: &Tensor) -> Result<()> {
        let v = self.float_value(f.name(), "x", x)?;
        self.push_into(Op::Unary(f, v), x)
    }

    /// `g(a, b)` as a new tensor of `a`'s shape and element type (`b` must
    /// have as many elements, of the same type: else [`OpsError::Dtype`](crate::ops::OpsError::Dtype)).
    pub fn binary(&mut self, g: Binary, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let (va, vb) = self.binary_operands(binary_name(g), a, b)?;
        Ok(self.push_typed(Op::Binary(g, va, vb), a.shape, a.dtype))
    }

    /// `a = g(a, b)` in place.
    pub fn binary_(&mut self, g: Binary, a: &Tensor, b: &Tensor) -> Result<()> {
        let (va, vb) = self.binary_operands(binary_name(g), a, b)?;
        self.push_into(Op::Binary(g, va, vb), a)
    }

    fn binary_operands(&self, op: &'static str, a: &Tensor, b: &Tensor) -> Result<(V, V)> {
        self.same_numel(op, a, b)?;
        self.same_dtype(op, a, "b", b)?;
        let va = self.float_value(op, "a", a)?;
        Ok((va, self.value(b)?))
    }

    /// `a + b`.
    pub fn add(&mut self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.binary(Binary::Add, a, b)
    }
    /// `a - b`.
    pub fn sub(&mut self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.binary(Binary::Sub, a, b)
    }
    /// `a * b` element-wise.
    pub fn mul(&mut self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.binary(Binary::Mul, a, b)
    }
    /// `alpha * x + y` as a new tensor.
    pub fn axpy(&mut self, alpha: f32, x: &Tensor, y: &Tensor) -> Result<Tensor> {
        self.binary(Binary::Axpy(alpha), x, y)
    }
    /// `a += b`.
    pub fn add_(&mut self, a: &Tensor, b: &Tensor) -> Result<()> {
        self.binary_(Binary::Add, a, b)
    }
    /// `a -= b`.
    pub fn sub_(&mut self, a: &Tensor, b: &Tensor) -> Result<()> {
        self.binary_(Binary::Sub, a, b)
    }
    /// `a *= b` element-wise.
    pub fn mul_(&mut self, a: &Tensor, b: &Tensor) -> Result<()> {
        self.binary_(Binary::Mul, a, b)
    }
    /// `y = alpha * x + y` in place on `y` (saxpy).
    pub fn saxpy_(&mut self, alpha: f32, x: &Tensor, y: &Tensor) -> Result<()> {
        let (vx, vy) = self.binary_operands("ops::saxpy", x, y)?;
        self.push_into(Op::Binary(Binary::Axpy(alpha), vx, vy), y)
    }
    /// `alpha * x`.
    pub fn scale(&mut self, x: &Tensor, alpha: f32) -> Result<Tensor> {
        self.unary(Unary::Scale(alpha), x)
    }
    /// `x *= alpha`.
    pub fn scale_(&mut self, x: &Tensor, alpha: f32) -> Result<()> {
        self.unary_(Unary::Scale(alpha), x)
    }
    /// A copy of `x` (its own storage).
    pub fn copy(&mut self, x: &Tensor) -> Result<Tensor> {
        self.unary(Unary::Copy, x)
    }
    /// `max(x, 0)`.
    pub fn relu(&mut self, x: &Tensor) -> Result<Tensor> {
        self.unary(Unary::Relu, x)
    }
    /// `x = max(x, 0)` in place.
    pub fn relu_(&mut self, x: &Tensor) -> Result<()> {
        self.unary_(Unary::Relu, x)
    }
    /// `1 / (1 + exp(-x))`.
    pub fn sigmoid(&mut self, x: &Tensor) -> Result<Tensor> {
        self.unary(Unary::Sigmoid, x)
    }
    /// Sigmoid in place.
    pub fn sigmoid_(&mut self, x: &Tensor) -> Result<()> {
        self.unary_(Unary::Sigmoid, x)
    }
    /// `tanh(x)`.
    pub fn tanh(&mut self, x: &Tensor) -> Result<Tensor> {
        self.unary(Unary::Tanh, x)
    }
    /// tanh in place.
    pub fn tanh_(&mut self, x: &Tensor) -> Result<()> {
        self.unary_(Unary::Tanh, x)
    }
    /// `x * sigmoid(x)` (SiLU).
    pub fn swish(&mut self, x: &Tensor) -> Result<Tensor> {
        self.unary(Unary::Swish, x)
    }
    /// Swish in place.
    pub fn swish_(&mut self, x: &Tensor) -> Result<()> {
        self.unary_(Unary::Swish, x)
    }
    /// GELU, exact (erf) form.
    pub fn gelu(&mut self, x: &Tensor) -> Result<Tensor> {
        self.unary(Unary::Gelu, x)
    }
    /// GELU in place.
    pub fn gelu_(&mut self, x: &Tensor) -> Result<()> {
        self.unary_(Unary::Gelu, x)
    }
    /// GELU, tanh approximation.
    pub fn gelu_tanh(&mut self, x: &Tensor) -> Result<Tensor> {
        self.unary(Unary::GeluTanh, x)
    }

    /// `a` (a `rows`×`cols` matrix) plus the row vector `bias` (`cols`
    /// elements) added to every row: a bias.
    pub fn add_row(&mut self, a: &Tensor, bias: &Tensor) -> Result<Tensor> {
        let (va, vb) = self.row_operands(a, bias)?;
        Ok(self.push_typed(Op::AddRow(va, vb), a.shape, a.dtype))
    }

    /// `a += bias` per row, in place.
    pub fn add_row_(&mut self, a: &Tensor, bias: &Tensor) -> Result<()> {
        let (va, vb) = self.row_operands(a, bias)?;
        self.push_into(Op::AddRow(va, vb), a)
    }

    fn row_operands(&self, a: &Tensor, bias: &Tensor) -> Result<(V, V)> {
        if bias.numel() != u64::from(a.shape.cols()) {
            return Err(shape_err(
                "ops::add_row",
                format!(
                    "the bias {} must have one element per column of {} ({})",
                    bias.shape,
                    a.shape,
                    a.shape.cols()
                ),
            ));
        }
        self.same_dtype("ops::add_row", a, "bias", bias)?;
        let va = self.float_value("ops::add_row", "a", a)?;
        Ok((va, self.value(bias)?))
    }

    /// An f32 tensor of `shape` with every element `value` (see
    /// [`OpBatch::full_as`] for other types).
    pub fn full(&mut self, shape: Shape, value: f32) -> Result<Tensor> {
        self.full_as(shape, value, DType::F32)
    }

    /// `a · b`: `a` is M×K, `b` is K×N (matrices), the result M×N.
    pub fn matmul(&mut self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let (m, k) = (a.shape.rows(), a.shape.cols());
        let (k2, n) = (b.shape.rows(), b.shape.cols());
        let bad = |detail: String| Error::MatmulShape { m, k, n, detail };
        if !matches!(a.shape, Shape::Matrix(..)) || !matches!(b.shape, Shape::Matrix(..)) {
            return Err(bad(format!(
                "operands {} and {} must be matrices (upload_matrix / import_matrix)",
                a.shape, b.shape
            )));
        }
        if k != k2 {
            return Err(bad(format!(
                "A is {m}×{k} but B is {k2}×{n}: A's columns must equal B's rows"
            )));
        }
        let out = Shape::Matrix(m, n);
        Self::check_shape("ops::matmul", "the product", out)?;
        let va = self.f32_value("ops::matmul", "a", a)?;
        let vb = self.f32_value("ops::matmul", "b", b)?;
        Ok(self.push(Op::Matmul(va, vb), out))
    }

    /// Sum of all elements (a 1-element tensor).
    pub fn sum(&mut self, x: &Tensor) -> Result<Tensor> {
        let v = self.f32_value("ops::sum", "x", x)?;
        Ok(self.push(Op::Sum(v), Shape::Vector(1)))
    }

    /// Largest element (a 1-element tensor).
    pub fn max(&mut self, x: &Tensor) -> Result<Tensor> {
        let v = self.f32_value("ops::max", "x", x)?;
        Ok(self.push(Op::Max(v), Shape::Vector(1)))
    }

    /// Dot product of two tensors of equal size (a 1-element tensor).
    pub fn dot(&mut self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.same_numel("ops::dot", a, b)?;
        let va = self.f32_value("ops::dot", "a", a)?;
        let vb = self.f32_value("ops::dot", "b", b)?;
        Ok(self.push(Op::Dot(va, vb), Shape::Vector(1)))
    }

    /// Softmax of each row (a vector is one row).
    pub fn softmax(&mut self, x: &Tensor) -> Result<Tensor> {
        let v = self.f32_value("ops::softmax", "x", x)?;
        Ok(self.push(Op::Softmax(v), x.shape))
    }

    /// The transpose of a matrix (a vector of n becomes an n×1 matrix),
    /// copied; tensors of rank 3 and 4 are an [`Error::OpShape`] (reorder
    /// their dimensions with [`OpBatch::permute`], a view).
    pub fn transpose(&mut self, x: &Tensor) -> Result<Tensor> {
        if x.shape.rank() > 2 {
            return Err(shape_err(
                "ops::transpose",
                format!(
                    "{} has rank {}; transpose takes rank 1 or 2 (OpBatch::permute reorders any rank)",
                    x.describe("x"),
                    x.shape.rank()
                ),
            ));
        }
        let v = self.f32_value("ops::transpose", "x", x)?;
        let out = Shape::Matrix(x.shape.cols(), x.shape.rows());
        Ok(self.push(Op::Transpose(v), out))
    }

    /// `a · x` for a matrix `a` (M×N) and a vector `x` of N: a vector of M
    /// (GEMV; runs as the matmul's matrix-vector kernel).
    pub fn matvec(&mut self, a: &Tensor, x: &Tensor) -> Result<Tensor> {
        let (m, n) = (a.shape.rows(), a.shape.cols());
        if !matches!(a.shape, Shape::Matrix(..)) || x.numel() != u64::from(n) {
            return Err(Error::MatmulShape {
                m,
                k: n,
                n: 1,
                detail: format!(
                    "matvec needs a matrix and a vector of its columns; got {} and {}",
                    a.shape, x.shape
                ),
            });
        }
        let va = self.f32_value("ops::matvec", "a", a)?;
        let vx = self.f32_value("ops::matvec", "x", x)?;
        let v = self.graph.op(Op::Matmul(va, vx), Shape::Vector(m));
        self.grow_storages();
        Ok(self.new_tensor(v))
    }

    /// Submits every recorded op in one submission and returns its ticket.
    /// Read results with [`OpBatch::read`] (which waits for them).
    pub fn execute(&mut self) -> Result<Ticket> {
        exec::execute(self)
    }

    /// [`OpBatch::execute`] and wait for it.
    pub fn execute_blocking(&mut self) -> Result<()> {
        self.execute()?.wait()
    }

    /// Dispatches of the current plan, what the last execute or graph
    /// recorded (fused kernels count once); `None` before the first.
    pub fn num_dispatches(&self) -> Option<usize> {
        self.prepared.as_ref().map(exec::Prepared::dispatches)
    }

    /// The GPU buffer holding `t` after the last execute or graph launch
    /// (no copy), to import into another op batch or bind in a
    /// [`Batch`](crate::Batch). `t` starts at its first element; it may be
    /// longer than `t` and is rewritten by later executes and launches
    /// with `t`'s value (the op batch never reuses a buffer it handed out
    /// for another value, though it reuses pooled buffers otherwise).
    /// Same errors as [`OpBatch::read`], and [`Error::TensorUnavailable`]
    /// for a tensor imported from a slice that does not start the buffer
    /// (bind that slice of your buffer instead); [`OpsError::Dtype`](crate::ops::OpsError::Dtype) for a
    /// tensor that is not f32.
    pub fn buffer(&self, t: &Tensor) -> Result<Buffer<f32>> {
        if t.dtype != DType::F32 {
            return Err(dtypes::dtype_err(
                "OpBatch::buffer",
                t,
                "t",
                "only f32 tensors are handed out as buffers".into(),
            ));
        }
        let b = self.bound(t)?;
        let val = self.graph.values[self.value(t)?];
        if val.layout.is_some() {
            return Err(Error::TensorUnavailable {
                detail: format!(
                    "the tensor {} is a view at an offset or with strides; hand out OpBatch::contiguous of it",
                    t.shape
                ),
            });
        }
        let s = val.storage;
        if !self.fixed[s] {
            // Pooled: from now on it serves only this tensor's storage.
            let mut given = self.given.lock().unwrap_or_else(|p| p.into_inner());
            if !given.iter().any(|&(k, _)| k == b.key()) {
                given.push((b.key(), s));
            }
        }
        let (buf, start) = b.f32_buffer()?;
        if start != 0 {
            return Err(Error::TensorUnavailable {
                detail: format!(
                    "the tensor {} lives at element {start} of an imported buffer; bind that slice of it",
                    t.shape
                ),
            });
        }
        Ok(buf.clone())
    }

    /// The memory holding `t`.
    fn bound(&self, t: &Tensor) -> Result<&Bound> {
        let v = self.readable(t)?;
        let s = self.graph.values[v].storage;
        self.buffers[s]
            .as_ref()
            .ok_or_else(|| Error::TensorUnavailable {
                detail: format!(
                    "the tensor {} was fused away: it was not held when execute() ran",
                    t.shape
                ),
            })
    }

    fn readable(&self, t: &Tensor) -> Result<V> {
        let v = self.value(t)?;
        if let Some(p) = self.graph.producer[self.graph.root(v)] {
            if self.executed_nodes.map_or(true, |n| p >= n) {
                return Err(Error::TensorUnavailable {
                    detail: format!(
                        "the tensor {} was recorded or changed after the last execute() or graph(); execute first",
                        t.shape
                    ),
                });
            }
        }
        Ok(v)
    }

    /// The value of `t` after the last execute or graph launch,
    /// downloaded (waits for the GPU work submitted that uses it), as f32s:
    /// f16 and bf16 tensors are widened (exactly). [`Error::TensorUnavailable`]
    /// for a tensor of another op batch, or one recorded or changed in
    /// place after the last execute or [`OpBatch::graph`];
    /// [`OpsError::Dtype`](crate::ops::OpsError::Dtype) for a `u32` tensor (read it with
    /// [`OpBatch::read_as`]).
    pub fn read(&self, t: &Tensor) -> Result<Vec<f32>> {
        match t.dtype {
            DType::F32 => self.read_as::<f32>(t),
            DType::F16 => Ok(self
                .read_as::<super::F16>(t)?
                .into_iter()
                .map(super::F16::to_f32)
                .collect()),
            DType::Bf16 => Ok(self
                .read_as::<super::Bf16>(t)?
                .into_iter()
                .map(super::Bf16::to_f32)
                .collect()),
            DType::U32 => Err(dtypes::dtype_err(
                "OpBatch::read",
                t,
                "t",
                "read u32 tensors with read_as::<u32>".into(),
            )),
        }
    }
}

fn binary_name(g: Binary) -> &'static str {
    match g {
        Binary::Add => "ops::add",
        Binary::Sub => "ops::sub",
        Binary::Mul => "ops::mul",
        Binary::Axpy(_) => "ops::saxpy",
    }
}
