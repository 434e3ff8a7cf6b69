//! Executing an op batch: planning once per set of held tensors, buffers
//! and kernels made once, then one batch per execute.

use std::sync::Arc;

use super::dtypes::generated_single;
use super::inputs::Bound;
use super::liveness::{self, Existing, StorageInfo};
use super::OpBatch;
use crate::batch::BatchOptions;
use crate::ops::fusion::plan::{barriers, plan, step_access, Group, Plan, Step};
use crate::ops::fusion::program::{Op, V};
use crate::ops::matmul::{choose_matmul, matmul_views, MatmulCaps, MatmulDtype, MatmulKernel};
use crate::ops::reduce::{self, Kind};
use crate::ops::{self as o};
use crate::{Batch, BufferSlice, Error, GpuBuf, Kernel, Result, Ticket};

/// A fused step's kernel and how to launch it.
pub(crate) struct FusedKernel {
    kernel: Kernel,
    /// Storages bound after the fixed bindings.
    bindings: Vec<usize>,
    /// Push constants, complete.
    push: Vec<u8>,
    launch: Launch,
}

// Without `glsl` nothing is fused, so no launch is ever built.
#[cfg_attr(not(feature = "glsl"), allow(dead_code))]
enum Launch {
    /// `invocations` along x (spread into y, z past the limit).
    Invocations(u32),
    /// A matmul grid, A and B bound first.
    Grid([u32; 3], V, V),
    /// A reduction over `groups` workgroups: each storage bound twice,
    /// then the tail node's scratch and its output.
    Reduce(u32, usize),
}

/// What an execute reuses while the held tensors stay the same.
pub(crate) struct Prepared {
    live: Vec<bool>,
    nodes: usize,
    plan: Plan,
    fused: Vec<Option<FusedKernel>>,
}

impl Prepared {
    /// Dispatches one execute records.
    pub(crate) fn dispatches(&self) -> usize {
        self.plan.steps.len()
    }
}

/// Values that must be readable after execution: those held tensors name,
/// and the last value of each imported storage (the user's buffer).
fn live_values(ob: &OpBatch) -> Vec<bool> {
    let g = &ob.graph;
    let mut live = vec![false; g.values.len()];
    for (w, v) in &ob.tensors {
        if w.strong_count() > 0 {
            live[*v] = true;
        }
    }
    let mut last = vec![None; g.storages];
    for (v, val) in g.values.iter().enumerate() {
        last[val.storage] = Some(v);
    }
    for (s, v) in last.iter().enumerate() {
        if let (Some(v), true) = (v, ob.imported[s]) {
            live[*v] = true;
        }
    }
    live
}

fn m_k_n(ob: &OpBatch, a: V, out: V) -> (u32, u32, u32) {
    let sa = ob.graph.values[a].shape;
    let m = sa.rows();
    let n = (ob.graph.values[out].shape.numel() / u64::from(m.max(1))) as u32;
    (m, sa.cols(), n)
}

pub(crate) fn execute(ob: &mut OpBatch) -> Result<Ticket> {
    plan_current(ob)?;
    let ticket = record(ob)?;
    ob.executed_nodes = Some(ob.graph.nodes.len());
    Ok(ticket)
}

/// Plans the recording unless the plan in hand still fits it (same nodes,
/// same held tensors): what an execute and a graph record.
pub(super) fn plan_current(ob: &mut OpBatch) -> Result<()> {
    let live = live_values(ob);
    let reuse = ob
        .prepared
        .as_ref()
        .is_some_and(|p| p.live == live && p.nodes == ob.graph.nodes.len());
    if !reuse {
        ob.prepared = None;
        let p = prepare(ob, live)?;
        ob.prepared = Some(p);
    }
    Ok(())
}

fn prepare(ob: &mut OpBatch, live: Vec<bool>) -> Result<Prepared> {
    let caps = MatmulCaps::of(ob.gpu.info());
    let fuse = ob.fusion_active();
    let epilogue_ok = |n: usize| {
        let node = &ob.graph.nodes[n];
        match node.op {
            Op::Matmul(a, _) => {
                let (m, k, nn) = m_k_n(ob, a, node.out);
                // Not a GEMV shape: the fused kernel is the tiled one
                // (`choose_tile`), whatever the unfused default is.
                let p = choose_matmul(m, k, nn, MatmulDtype::F32, &caps);
                matches!(
                    p.kernel,
                    MatmulKernel::Tiled(_) | MatmulKernel::Sgemm { .. }
                ) && !p.widen_f16
            }
            _ => false,
        }
    };
    let mut plan = plan(&ob.graph, &live, fuse, &epilogue_ok, fuse);
    assign_buffers(ob, &mut plan, &live)?;
    // Scratch for reductions, zeroed once and reused by every execute.
    for s in &plan.steps {
        let n = match s {
            Step::Single(n) => n,
            Step::Fused(gr) => match &gr.tail {
                Some(n) => n,
                None => continue,
            },
        };
        let node = ob.graph.nodes[*n];
        let x = match node.op {
            Op::Sum(x) | Op::Max(x) | Op::Dot(x, _) => x,
            _ => continue,
        };
        if !ob.scratch.contains_key(n) {
            // Op-batch bindings start 16-byte aligned (pooled buffers at 0,
            // slice imports checked): vec4 loads throughout.
            let numel = ob.graph.values[x].shape.numel();
            let words = reduce::scratch_words(ob.gpu.info(), numel, true);
            let buf = ob.gpu.upload(&vec![0u32; words as usize])?;
            ob.scratch.insert(*n, buf);
        }
    }
    // Equal chains (say, one per layer) share one kernel lookup.
    let mut memo = std::mem::take(&mut ob.kernel_memo);
    let mut fused = Vec::with_capacity(plan.steps.len());
    for s in &plan.steps {
        let lone;
        let gr = match s {
            // An element-wise node of a type no built-in kernel covers runs
            // as a generated kernel of its own.
            Step::Single(n) if cfg!(feature = "glsl") && generated_single(&ob.graph, *n) => {
                lone = Group {
                    head: None,
                    nodes: vec![*n],
                    tail: None,
                };
                Some(&lone)
            }
            Step::Single(_) => None,
            Step::Fused(gr) => Some(gr),
        };
        let k = match gr {
            None => None,
            Some(gr) => match fused_kernel(ob, gr, &plan, &caps, &mut memo) {
                Ok(k) => Some(k),
                Err(e) => {
                    ob.kernel_memo = memo;
                    return Err(e);
                }
            },
        };
        fused.push(k);
    }
    ob.kernel_memo = memo;
    Ok(Prepared {
        live,
        nodes: ob.graph.nodes.len(),
        plan,
        fused,
    })
}

#[cfg(feature = "glsl")]
fn fused_kernel(
    ob: &OpBatch,
    gr: &crate::ops::fusion::plan::Group,
    plan: &Plan,
    caps: &MatmulCaps,
    memo: &mut super::KernelMemo,
) -> Result<FusedKernel> {
    use crate::ops::fusion::codegen;
    let g = &ob.graph;
    let words = |w: &[u32], s: &[f32]| -> Vec<u8> {
        w.iter()
            .flat_map(|x| x.to_le_bytes())
            .chain(s.iter().flat_map(|x| x.to_le_bytes()))
            .collect()
    };
    if let Some(h) = gr.head {
        let Op::Matmul(a, b) = g.nodes[h].op else {
            unreachable!("a group's head is a matmul")
        };
        let (m, k, n) = m_k_n(ob, a, g.nodes[h].out);
        let t = crate::ops::matmul::choose_tile(m, n, caps);
        let gen =
            codegen::matmul_epilogue(g, gr, &plan.stored).ok_or_else(|| crate::Error::Glsl {
                message:
                    "shaders/matmul_f32.comp changed shape; the epilogue rewrite no longer applies"
                        .into(),
            })?;
        let spec = [t.threads(), t.bm, t.bn, t.bk, t.tm, t.tn];
        let key = (gen.source.clone(), spec.to_vec());
        let kernel = match memo.get(&key) {
            Some(k) => k.clone(),
            None => {
                let mut b = Kernel::builder(&ob.gpu)
                    .glsl(&gen.source)
                    .label(&gr.label(g))
                    .local_size_x(spec[0]);
                for (id, &v) in spec.iter().enumerate().skip(1) {
                    b = b.spec_u32(id as u32, v);
                }
                let k = b.build()?;
                memo.insert(key, k.clone());
                k
            }
        };
        return Ok(FusedKernel {
            kernel,
            bindings: gen.bindings,
            push: words(&[m, k, n], &gen.scalars),
            launch: Launch::Grid([n.div_ceil(t.bn), m.div_ceil(t.bm), 1], a, b),
        });
    }
    if let Some(tail) = gr.tail {
        let subgroups = ob.gpu.info().subgroup_arithmetic;
        let gen = codegen::reduction_prologue(g, gr, &plan.stored, subgroups).ok_or_else(|| {
            crate::Error::Glsl {
                message:
                    "shaders/reduce.glsl changed shape; the prologue rewrite no longer applies"
                        .into(),
            }
        })?;
        let op = u32::from(matches!(g.nodes[tail].op, Op::Max(_)));
        let key = (gen.source.clone(), vec![op]);
        let kernel = match memo.get(&key) {
            Some(k) => k.clone(),
            None => {
                let k = Kernel::builder(&ob.gpu)
                    .glsl(&gen.source)
                    .label(&gr.label(g))
                    .spec_u32(0, op)
                    .build()?;
                memo.insert(key, k.clone());
                k
            }
        };
        let numel = g.values[g.nodes[gr.nodes[0]].out].shape.numel();
        let (n, n4) = (numel as u32, (numel / 4) as u32);
        let info = ob.gpu.info();
        let groups = crate::ops::grid::reduce_groups(
            u64::from(n4.max(n - 4 * n4)),
            info.compute_units,
            info.max_threads_per_compute_unit,
            info.max_workgroup_count[0],
        );
        return Ok(FusedKernel {
            kernel,
            bindings: gen.bindings,
            push: words(&[n, n4], &gen.scalars),
            launch: Launch::Reduce(groups, tail),
        });
    }
    let out = g.nodes[gr.nodes[0]].out;
    let shape = g.values[out].shape;
    let numel = shape.numel();
    let gen = codegen::elementwise(g, gr, &plan.stored, numel);
    let items = if gen.vec4 { numel / 4 } else { numel } as u32;
    let key = (gen.source.clone(), Vec::new());
    let kernel = match memo.get(&key) {
        Some(k) => k.clone(),
        None => {
            // Bound as bytes (any element type; the source declares each).
            let k = Kernel::builder(&ob.gpu)
                .glsl(&gen.source)
                .label(&gr.label(g))
                .raw_elements()
                .build()?;
            memo.insert(key, k.clone());
            k
        }
    };
    Ok(FusedKernel {
        kernel,
        bindings: gen.bindings,
        push: words(&[items, shape.cols()], &gen.scalars),
        launch: Launch::Invocations(items),
    })
}

#[cfg(not(feature = "glsl"))]
fn fused_kernel(
    _ob: &OpBatch,
    _gr: &crate::ops::fusion::plan::Group,
    _plan: &Plan,
    _caps: &MatmulCaps,
    _memo: &mut super::KernelMemo,
) -> Result<FusedKernel> {
    unreachable!("fusion is planned only with the `glsl` feature")
}

/// Gives the op batch's own storages their memory for `plan`: pooled
/// buffers shared by storages whose lives do not overlap (see
/// [`liveness`]), then the plan's barriers recomputed over that memory
/// (reuse adds hazards the storages alone do not show).
fn assign_buffers(ob: &mut OpBatch, plan: &mut Plan, live: &[bool]) -> Result<()> {
    let g = &ob.graph;
    let access: Vec<_> = plan
        .steps
        .iter()
        .map(|s| step_access(g, s, &plan.stored))
        .collect();
    // Sizes in bytes, rounded up to whole f32 words (pooled buffers are
    // made of them), so storages of any element types share buffers.
    let mut bytes = vec![0u64; g.storages];
    let mut pinned = vec![false; g.storages];
    for (v, val) in g.values.iter().enumerate() {
        bytes[val.storage] = bytes[val.storage].max(val.bytes());
        pinned[val.storage] |= live.get(v).copied().unwrap_or(false);
    }
    if ob.graphed {
        // A graph holds these buffers with the roles of its own plan: the
        // new plan gets buffers of its own.
        ob.pool.clear();
        ob.pool_of.iter_mut().for_each(|p| *p = None);
        ob.given.lock().unwrap_or_else(|p| p.into_inner()).clear();
        ob.graphed = false;
    }
    let infos: Vec<StorageInfo> = (0..g.storages)
        .map(|s| StorageInfo {
            fixed: ob.fixed[s],
            pinned: pinned[s],
            bytes: bytes[s].next_multiple_of(4),
            prev: ob.pool_of[s],
        })
        .collect();
    let mut given = ob.given.lock().unwrap_or_else(|p| p.into_inner());
    let existing: Vec<Existing> = ob
        .pool
        .iter()
        .map(|b| Existing {
            bytes: b.byte_size(),
            only: given
                .iter()
                .find(|(k, _)| *k == Arc::as_ptr(&b.inner) as usize)
                .map(|&(_, s)| s),
        })
        .collect();
    let a = liveness::assign(&infos, &access, &existing);
    let mut pool = Vec::with_capacity(a.bytes.len());
    for (&len, kept) in a.bytes.iter().zip(&a.kept) {
        pool.push(match kept {
            Some(i) => ob.pool[*i].clone(),
            None => ob.gpu.alloc::<f32>(len.div_ceil(4) as usize)?,
        });
    }
    for (s, &n) in bytes.iter().enumerate() {
        if !ob.fixed[s] {
            ob.buffers[s] = a.of[s].map(|p| {
                let mut b = Bound::of(&pool[p], 0, 0);
                b.bytes = n;
                b
            });
        }
    }
    // Keys of buffers no longer pooled may name new buffers later.
    given.retain(|(k, _)| pool.iter().any(|b| Arc::as_ptr(&b.inner) as usize == *k));
    drop(given);
    ob.pool = pool;
    ob.pool_of = a.of;
    let fixed: Vec<_> = (0..ob.graph.storages)
        .map(|s| {
            ob.buffers[s]
                .as_ref()
                .filter(|_| ob.fixed[s])
                .map(Bound::range)
        })
        .collect();
    let res = liveness::resources(&ob.pool_of, &fixed);
    plan.barriers = barriers(&liveness::map_access(&access, &res));
    Ok(())
}

/// One execute: the `Params` values written, then the plan, submitted.
fn record(ob: &OpBatch) -> Result<Ticket> {
    // The plan's barriers come from the graph, which knows what each step
    // reads and writes; reflection would not (a fused kernel declares every
    // buffer it binds read-write, and the plan knows which it only reads),
    // so automatic barriers would add barriers between steps the plan
    // knows to be independent. The plan is the batch's only ordering.
    let options = BatchOptions::single_submit()
        .with_profiling(ob.options.profiling)
        .with_auto_barriers(false);
    let mut batch = ob.gpu.batch_with(options)?;
    for (s, value) in &ob.params {
        let (b, start) = buf(ob, *s)?.f32_buffer()?;
        // Ordered as if a barrier stood on both sides (auto barriers off).
        batch.write(b, start, &value())?;
    }
    record_steps(ob, &mut batch)?;
    let ticket = batch.submit_async()?;
    Ok(match &ob.report {
        Some(r) if !r.is_empty() => ticket.with_report(r.clone()),
        _ => ticket,
    })
}

/// Records the prepared plan's steps and barriers into `batch`: an
/// execute's batch or a graph's recording (automatic barriers off).
pub(super) fn record_steps(ob: &OpBatch, batch: &mut Batch) -> Result<()> {
    let p = ob
        .prepared
        .as_ref()
        .ok_or_else(|| internal("recorded before it was prepared"))?;
    for (i, step) in p.plan.steps.iter().enumerate() {
        if p.plan.barriers[i] {
            batch.barrier();
        }
        match (step, &p.fused[i]) {
            (Step::Single(n), None) => single(ob, batch, *n)?,
            (_, Some(f)) => {
                if let Launch::Invocations(items) = f.launch {
                    let bufs = f
                        .bindings
                        .iter()
                        .map(|&s| buf(ob, s).and_then(Bound::raw_slice))
                        .collect::<Result<Vec<BufferSlice<'_, u8>>>>()?;
                    let b: Vec<&dyn GpuBuf> = bufs.iter().map(|b| b as &dyn GpuBuf).collect();
                    let b = declared(&f.kernel, b);
                    batch.run_with_push_constants(&f.kernel, &b, items, &f.push)?;
                    continue;
                }
                let bufs = f
                    .bindings
                    .iter()
                    .map(|&s| buf(ob, s).and_then(Bound::slice))
                    .collect::<Result<Vec<BufferSlice<'_, f32>>>>()?;
                match f.launch {
                    Launch::Invocations(_) => {}
                    Launch::Reduce(groups, tail) => {
                        let scratch = ob
                            .scratch
                            .get(&tail)
                            .ok_or_else(|| internal("a fused reduction has no scratch buffer"))?;
                        let out = sbuf(ob, ob.graph.nodes[tail].out)?;
                        let mut b: Vec<&dyn GpuBuf> = Vec::new();
                        for x in &bufs {
                            b.push(x);
                            b.push(x);
                        }
                        b.push(scratch);
                        b.push(&out);
                        let b = declared(&f.kernel, b);
                        batch.run_configured(&f.kernel, &b, [groups, 1, 1], Some(&f.push))?;
                    }
                    Launch::Grid(grid, a, bm) => {
                        let (a, bm) = (sbuf(ob, a)?, sbuf(ob, bm)?);
                        let mut b: Vec<&dyn GpuBuf> = vec![&a, &bm];
                        b.extend(bufs.iter().map(|b| b as &dyn GpuBuf));
                        let b = declared(&f.kernel, b);
                        batch.run_configured(&f.kernel, &b, grid, Some(&f.push))?;
                    }
                }
            }
            (Step::Fused(_), None) => return Err(internal("a fused step has no kernel")),
        }
    }
    // The launch's report of its flags, after everything that counts.
    if let Some(r) = ob.report.as_ref().filter(|r| !r.is_empty()) {
        r.record(batch)?;
    }
    Ok(())
}

/// The buffers of `b` (one per binding number, from 0) that a generated
/// `kernel` still declares: the GLSL optimizer strips a binding whose every
/// use it folded away (`b + (a - b)` becomes `a`), and a dispatch passes
/// one buffer per declared binding.
fn declared<'a>(kernel: &Kernel, b: Vec<&'a dyn GpuBuf>) -> Vec<&'a dyn GpuBuf> {
    let kept = kernel.bindings();
    if kept.len() == b.len() {
        return b;
    }
    b.into_iter()
        .enumerate()
        .filter(|(i, _)| kept.iter().any(|k| k.binding as usize == *i))
        .map(|(_, x)| x)
        .collect()
}

/// The error for a broken invariant of the prepared plan (a bug of the op
/// batch, reported rather than panicking in the user's process).
fn internal(what: &str) -> Error {
    Error::TensorUnavailable {
        detail: format!("op batch internal error: {what}"),
    }
}

fn buf(ob: &OpBatch, s: usize) -> Result<&Bound> {
    ob.buffers
        .get(s)
        .and_then(Option::as_ref)
        .ok_or_else(|| internal("a bound storage has no buffer"))
}

/// The binding of value `v`: exactly its storage's elements.
pub(super) fn sbuf(ob: &OpBatch, v: V) -> Result<BufferSlice<'_, f32>> {
    buf(ob, ob.graph.values[v].storage)?.slice()
}

/// One node through its built-in kernel.
fn single(ob: &OpBatch, batch: &mut Batch, n: usize) -> Result<()> {
    let node = &ob.graph.nodes[n];
    let out = sbuf(ob, node.out)?;
    let shape = ob.graph.values[node.out].shape;
    match node.op {
        Op::Unary(f, x) => o::unary::<f32>(batch, f, &sbuf(ob, x)?, &out),
        Op::Binary(g, a, b) => o::binary::<f32>(batch, g, &sbuf(ob, a)?, &sbuf(ob, b)?, &out),
        Op::AddRow(a, bias) => {
            let gpu = &ob.gpu;
            let k = crate::builtins::get(&gpu.inner, "add_rows_f32", &[])?;
            let numel = shape.numel() as u32;
            let pc: Vec<u8> = [numel, shape.cols()]
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect();
            let (a, bias) = (sbuf(ob, a)?, sbuf(ob, bias)?);
            batch.run_with_push_constants(&k, &[&a, &bias, &out], numel, &pc)?;
            Ok(())
        }
        Op::Matmul(a, b) => {
            let (m, k, nn) = m_k_n(ob, a, node.out);
            matmul_views(batch, &sbuf(ob, a)?, &sbuf(ob, b)?, &out, m, k, nn)
        }
        Op::Sum(x) => reduction(ob, batch, n, Kind::Sum, x, x),
        Op::Max(x) => reduction(ob, batch, n, Kind::Max, x, x),
        Op::Dot(a, b) => reduction(ob, batch, n, Kind::Dot, a, b),
        Op::Softmax(x) => o::softmax(batch, &sbuf(ob, x)?, &out, shape.rows(), shape.cols()),
        Op::Transpose(x) => {
            let s = ob.graph.values[x].shape;
            o::transpose(batch, &sbuf(ob, x)?, &out, s.rows(), s.cols())
        }
        Op::Fill(value) => o::fill::<f32>(batch, value, &out),
        Op::Cast(x) => cast(ob, batch, x, node.out),
        Op::Nn(op) => super::transformer::record(ob, batch, op, &out, shape),
    }
}

/// A cast run by the built-in conversion kernels (without generated
/// kernels; the op batch records casts between f32, f16 and bf16 only
/// then).
fn cast(ob: &OpBatch, batch: &mut Batch, x: V, out: V) -> Result<()> {
    use crate::ops::{Bf16, DType, F16};
    let (vx, vo) = (ob.graph.values[x], ob.graph.values[out]);
    let (bx, bo) = (buf(ob, vx.storage)?, buf(ob, vo.storage)?);
    let n = vx.shape.numel() as usize;
    macro_rules! run {
        ($s:ty, $d:ty) => {{
            let (tx, sx) = typed::<$s>(bx)?;
            let (to, so) = typed::<$d>(bo)?;
            o::convert::<$s, $d>(batch, &tx.slice(sx..sx + n)?, &to.slice(so..so + n)?)
        }};
    }
    match (vx.dtype, vo.dtype) {
        (DType::F32, DType::F32) => o::copy::<f32>(batch, &bx.slice()?, &bo.slice()?),
        (DType::F32, DType::F16) => run!(f32, F16),
        (DType::F32, DType::Bf16) => run!(f32, Bf16),
        (DType::F16, DType::F32) => run!(F16, f32),
        (DType::F16, DType::F16) => run!(F16, F16),
        (DType::F16, DType::Bf16) => run!(F16, Bf16),
        (DType::Bf16, DType::F32) => run!(Bf16, f32),
        (DType::Bf16, DType::F16) => run!(Bf16, F16),
        (DType::Bf16, DType::Bf16) => run!(Bf16, Bf16),
        _ => Err(internal("a cast without a built-in kernel")),
    }
}

/// A storage's buffer as `T`s, and the storage's first element in it.
fn typed<T: bytemuck::Pod>(b: &Bound) -> Result<(crate::Buffer<T>, usize)> {
    let size = std::mem::size_of::<T>() as u64;
    let buf = b
        .raw
        .reinterpret::<T>()
        .filter(|_| b.start % size == 0)
        .ok_or_else(|| internal("a storage is not a whole number of its elements"))?;
    Ok((buf, (b.start / size) as usize))
}

/// A sum, max or dot with the node's own scratch.
fn reduction(ob: &OpBatch, batch: &mut Batch, n: usize, kind: Kind, x: V, y: V) -> Result<()> {
    let name = match kind {
        Kind::Sum => "ops::sum",
        Kind::Max => "ops::max",
        Kind::Dot => "ops::dot",
    };
    let out = sbuf(ob, ob.graph.nodes[n].out)?;
    reduce::record_with(
        batch,
        name,
        kind,
        &sbuf(ob, x)?,
        &sbuf(ob, y)?,
        &out,
        1,
        ob.scratch.get(&n),
    )
}
