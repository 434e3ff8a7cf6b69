//! Grouped-query attention for decode (`shaders/nn_attn_decode.comp`, then
//! `shaders/nn_attn_combine.comp`): one query per head against a KV cache,
//! split over the sequence so that few heads still fill the GPU.
//!
//! Pass 1 launches one workgroup per (chunk of the sequence, sequence, kv
//! head, slice of the query heads sharing it), as `plan` splits them. A
//! chunk spans `max(ceil(len / chunks), 64)` positions of the sequence's
//! current length `len` (read on the GPU, see `span`), so a long
//! sequence keeps every chunk busy and a short one runs on
//! `ceil(len / 64)` of them (one tile: up to 64 positions take one
//! workgroup, which then writes the result itself, with no merge); a workgroup whose chunk starts at or past
//! `len` returns at once, so the work grows with the length, not with the
//! cache's capacity. Each active workgroup reads its keys and values once
//! for all its query heads, coalesced (a subgroup per key row, its lanes
//! over the head's elements; invocations over the elements of value rows;
//! 4 elements per load where `head_dim` is a multiple of 4 and the caches
//! are 16-byte aligned), with the online softmax over tiles of 64
//! positions and per-head registers sized by the plan's group (a
//! specialization constant), and writes, per
//! head, the chunk's max score, its sum of exponentials and its weighted
//! sum of values (f32). Pass 2 merges the chunks of each (sequence, head)
//! with the usual rescaling of online softmax. Adapters without subgroup
//! arithmetic run the `_wg` variants: the same kernel with one invocation
//! per key row.
//!
//! [`attention_decode`] records both passes as one dispatch
//! (`nn_attn_decode1`): the last workgroup of each head group to finish,
//! found by a counter per group that every workgroup increments after a
//! device-scope release fence, merges the group's chunks (after the
//! matching acquire fence) and sets the counter back to zero for the next
//! launch. Its arithmetic is pass 2's, in the same order. The op batch
//! records the two passes.

use crate::batch::Batch;
use crate::buffer::{Buffer, GpuBuf};
use crate::error::Result;
use crate::ops::aligned16;

use super::{
    check_elems, check_heads, check_nonzero, device_for, kernel_name, launch, product, rows_grid,
    shape_err, NnElement, NnOperand,
};

/// Positions per tile of decode attention's first pass (`TILE` in
/// `shaders/nn_attn_decode.comp`), a multiple of the smallest span of a
/// chunk: a cache capacity rounded to it wastes no partial tile.
pub const DECODE_CHUNK: u32 = 64;

/// The fewest positions a chunk of the first pass spans (`MIN_SPAN` in
/// `shaders/nn_attn_span.glsl`).
const MIN_SPAN: u32 = 64;

/// Workgroups of the first pass a compute unit holds at once, by the
/// query heads each takes (`GROUP`), from the specialized kernels'
/// registers per invocation on NVIDIA's driver (pipeline statistics, H200:
/// 53-74 with one or two heads, 80-118 with four or eight, 192-210 with
/// sixteen): three, two or one workgroup of 256 in a unit's 65,536. The
/// split aims at one such wave: fewer, longer workgroups pay the q/k
/// prologue, the partials and the merge less often, and a second wave
/// costs a whole workgroup's latency (H200, Qwen3-4B, four heads a
/// workgroup: after 4000 tokens 35.8 µs per layer at 264 workgroups
/// against 44.4 at 504, after 1500 21.4 against 32.0).
fn resident_per_unit(group: u32) -> u32 {
    match group {
        0..=2 => 3,
        3..=8 => 2,
        _ => 1,
    }
}

/// The workgroup target where the adapter does not report its compute
/// units.
const FALLBACK_WORKGROUPS: u32 = 512;

/// The first pass's workgroup target for workgroups of `group` heads on an
/// adapter with `compute_units` (0: unknown).
fn target_workgroups(compute_units: u32, group: u32) -> u32 {
    if compute_units == 0 {
        FALLBACK_WORKGROUPS
    } else {
        compute_units.saturating_mul(resident_per_unit(group))
    }
}

/// Query heads one workgroup takes (`MAX_GROUP` in the shader) and the
/// floats of their queries it keeps (`MAX_QS`).
const MAX_GROUP: u32 = 16;
const MAX_QS: u32 = 2048;

/// The shapes of an [`attention_decode`]: queries `[batch, q_heads,
/// head_dim]`, caches `[batch, kv_heads, max_seq, head_dim]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeShape {
    /// Sequences.
    pub batch: u32,
    /// Query heads (a multiple of `kv_heads`).
    pub q_heads: u32,
    /// Key/value heads.
    pub kv_heads: u32,
    /// Elements per head, at most 256.
    pub head_dim: u32,
    /// Positions each cache holds.
    pub max_seq: u32,
}

/// Records decode attention: for each sequence `b` and query head `h`
/// (kv head `h / (q_heads / kv_heads)`), with `n = min(lens[b], max_seq)`,
/// `out[b, h] = softmax(scale * q[b, h] · k[b, kvh, ..n]) · v[b, kvh, ..n]`.
/// `lens` holds one `u32` per sequence, read on the GPU (a graph replays
/// with new lengths); a length of 0 gives zeros. `scale` is usually
/// `1 / sqrt(head_dim)`.
///
/// Allocates an f32 scratch buffer of `batch × q_heads × chunks ×
/// (head_dim + 2)` elements (chunks: enough for one wave of workgroups, two
/// or three per compute unit, 512 where the adapter does not say its units;
/// at most `ceil(max_seq / 64)`) and a zeroed `u32` counter per sequence, kv
/// head and slice of its query heads per call; records one dispatch, which
/// leaves the counters at zero, so a recorded graph replays it.
#[allow(clippy::too_many_arguments)]
pub fn attention_decode<T: NnElement>(
    batch: &mut Batch,
    q: &impl NnOperand<T>,
    k_cache: &impl NnOperand<T>,
    v_cache: &impl NnOperand<T>,
    lens: &impl NnOperand<u32>,
    out: &impl NnOperand<T>,
    shape: DecodeShape,
    scale: f32,
) -> Result<()> {
    const OP: &str = "ops::nn::attention_decode";
    let elems = [
        q.elems(),
        k_cache.elems(),
        v_cache.elems(),
        lens.elems(),
        out.elems(),
    ];
    check_args(shape, scale, elems)?;
    let gpu = device_for::<T>(OP, q)?;
    let f = Fused::new(OP, &gpu, shape)?;
    launch_pass1(
        batch,
        &gpu,
        pass1_name::<T>(&gpu, true),
        f.plan,
        &[
            q,
            k_cache,
            v_cache,
            lens,
            &f.part,
            out,
            &f.counters,
            k_cache,
            v_cache,
        ],
        f.grid,
        &pass1_push(shape, f.plan, scale, k_cache, v_cache),
    )
}

/// What a one-dispatch decode attention (`nn_attn_decode1*`) launches
/// with: its plan and grid, the partials' scratch buffer and a zeroed
/// counter per head group (the kernel leaves them at zero).
pub(super) struct Fused {
    pub(super) plan: Plan,
    pub(super) grid: [u32; 3],
    pub(super) part: Buffer<f32>,
    pub(super) counters: Buffer<u32>,
}

impl Fused {
    /// Allocates for `shape` (after [`check_args`]; `op` names the errors).
    pub(super) fn new(
        op: &'static str,
        gpu: &crate::device::Device,
        shape: DecodeShape,
    ) -> Result<Fused> {
        let part = gpu.alloc::<f32>(scratch_len(op, gpu, shape)?)?;
        let plan = plan_for(gpu, shape);
        let ys = grid(gpu, plan, shape.batch, shape.kv_heads)?;
        let counters = gpu.upload(&vec![0u32; ys as usize])?;
        Ok(Fused {
            plan,
            grid: [plan.chunks, ys, 1],
            part,
            counters,
        })
    }
}

/// The first pass's kernel for `T`: fused with the merge
/// (`nn_attn_decode1*`) or not, the `_wg` variant where the adapter has no
/// subgroup arithmetic.
fn pass1_name<T: NnElement>(gpu: &crate::device::Device, fused: bool) -> &'static str {
    match (fused, gpu.info().subgroup_arithmetic) {
        (true, true) => kernel_name::<T>([
            "nn_attn_decode1",
            "nn_attn_decode1_f16",
            "nn_attn_decode1_bf16",
        ]),
        (true, false) => kernel_name::<T>([
            "nn_attn_decode1_wg",
            "nn_attn_decode1_wg_f16",
            "nn_attn_decode1_wg_bf16",
        ]),
        (false, true) => kernel_name::<T>([
            "nn_attn_decode",
            "nn_attn_decode_f16",
            "nn_attn_decode_bf16",
        ]),
        (false, false) => kernel_name::<T>([
            "nn_attn_decode_wg",
            "nn_attn_decode_wg_f16",
            "nn_attn_decode_wg_bf16",
        ]),
    }
}

/// The first pass's push constants (`shaders/nn_attn_decode.comp`).
pub(super) fn pass1_push(
    shape: DecodeShape,
    plan: Plan,
    scale: f32,
    k_cache: &dyn GpuBuf,
    v_cache: &dyn GpuBuf,
) -> [u32; 8] {
    [
        shape.q_heads,
        shape.kv_heads,
        shape.head_dim,
        shape.max_seq,
        plan.chunks,
        plan.group,
        scale.to_bits(),
        u32::from(vector_rows(shape.head_dim, k_cache, v_cache)),
    ]
}

/// Records the first pass (fused or not) with specialization constant 0
/// (`GROUP`, the size of its per-head registers) set to the plan's group.
pub(super) fn launch_pass1(
    batch: &mut Batch,
    gpu: &crate::device::Device,
    name: &'static str,
    plan: Plan,
    bufs: &[&dyn GpuBuf],
    grid: [u32; 3],
    pc: &[u32],
) -> Result<()> {
    let k = crate::builtins::get(&gpu.inner, name, &[(0, plan.group)])?;
    batch.run_configured(&k, bufs, grid, Some(&crate::ops::words(pc)))?;
    Ok(())
}

/// Whether the first pass reads key and value rows 4 elements at a time
/// (its `vec` flag): `head_dim` a multiple of 4 and both caches starting
/// on a 16-byte boundary.
fn vector_rows(head_dim: u32, k_cache: &dyn GpuBuf, v_cache: &dyn GpuBuf) -> bool {
    head_dim % 4 == 0 && aligned16(&[k_cache.view(), v_cache.view()])
}

/// The y extent of pass 1's grid (sequences × kv heads × head slices),
/// or an error when the grid exceeds the adapter's.
fn grid(gpu: &crate::device::Device, plan: Plan, b: u32, kv_heads: u32) -> Result<u32> {
    let ys = u64::from(b) * u64::from(kv_heads) * u64::from(plan.slices);
    let max = gpu.info().max_workgroup_count;
    if plan.chunks > max[0] || ys > u64::from(max[1]) {
        return Err(shape_err(
            "ops::nn::attention_decode",
            "k_cache",
            format!(
                "{} chunks x {ys} head groups exceed the adapter's workgroup grid {max:?}",
                plan.chunks
            ),
        ));
    }
    Ok(ys as u32)
}

/// The checks of [`attention_decode`] on its shape, scale and the element
/// counts of q, k_cache, v_cache, lens and out (shared with the op batch's
/// recording).
pub(in crate::ops) fn check_args(shape: DecodeShape, scale: f32, elems: [u64; 5]) -> Result<()> {
    check_args_of("ops::nn::attention_decode", shape, scale, elems)
}

/// [`check_args`] for `op` (its name in the errors).
pub(super) fn check_args_of(
    op: &'static str,
    shape: DecodeShape,
    scale: f32,
    elems: [u64; 5],
) -> Result<()> {
    let DecodeShape {
        batch: b,
        q_heads,
        kv_heads,
        head_dim,
        max_seq,
    } = shape;
    check_nonzero(op, "batch", b)?;
    check_heads(op, q_heads, kv_heads, head_dim)?;
    check_nonzero(op, "max_seq", max_seq)?;
    super::check_scale(op, scale)?;
    let n_q = product(op, "q", &[b, q_heads, head_dim])?;
    let n_cache = product(op, "k_cache", &[b, kv_heads, max_seq, head_dim])?;
    check_elems(op, "q", elems[0], n_q)?;
    check_elems(op, "k_cache", elems[1], n_cache)?;
    check_elems(op, "v_cache", elems[2], n_cache)?;
    check_elems(op, "lens", elems[3], u64::from(b))?;
    check_elems(op, "out", elems[4], n_q)?;
    Ok(())
}

/// Floats of the scratch buffer [`record`] needs on `gpu` (after
/// [`check_args`]): a typed error of `op` past the kernels' 32-bit indices or the
/// host's `usize`.
pub(in crate::ops) fn scratch_len(
    op: &'static str,
    gpu: &crate::device::Device,
    shape: DecodeShape,
) -> Result<usize> {
    let p = plan_for(gpu, shape);
    let n = product(
        op,
        "scratch",
        &[shape.batch * shape.q_heads, p.chunks, shape.head_dim + 2],
    )?;
    usize::try_from(n)
        .map_err(|_| shape_err(op, "scratch", format!("{n} floats exceed the host's usize")))
}

/// Records both passes of decode attention with scratch `part` of
/// [`scratch_len`] floats (after [`check_args`]).
#[allow(clippy::too_many_arguments)]
pub(in crate::ops) fn record<T: NnElement>(
    batch: &mut Batch,
    q: &impl NnOperand<T>,
    k_cache: &impl NnOperand<T>,
    v_cache: &impl NnOperand<T>,
    lens: &impl NnOperand<u32>,
    out: &impl NnOperand<T>,
    part: &Buffer<f32>,
    shape: DecodeShape,
    scale: f32,
) -> Result<()> {
    const OP: &str = "ops::nn::attention_decode";
    let DecodeShape {
        batch: b,
        q_heads,
        kv_heads,
        head_dim,
        max_seq,
    } = shape;
    let gpu = device_for::<T>(OP, q)?;
    let plan = plan_for(&gpu, shape);
    let rows = b * q_heads; // <= n_q, so it fits
    let ys = grid(&gpu, plan, b, kv_heads)?;
    launch_pass1(
        batch,
        &gpu,
        pass1_name::<T>(&gpu, false),
        plan,
        &[q, k_cache, v_cache, lens, part, k_cache, v_cache],
        [plan.chunks, ys, 1],
        &pass1_push(shape, plan, scale, k_cache, v_cache),
    )?;
    batch.barrier();
    let pass2 = kernel_name::<T>([
        "nn_attn_combine",
        "nn_attn_combine_f16",
        "nn_attn_combine_bf16",
    ]);
    let grid = rows_grid(OP, &gpu, rows)?;
    launch(
        batch,
        &gpu,
        pass2,
        &[part, lens, out],
        grid,
        &[rows, q_heads, head_dim, max_seq, plan.chunks],
    )
}

/// How decode attention splits its work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Plan {
    /// Query heads per workgroup.
    group: u32,
    /// Workgroups per kv head (slices of its query heads).
    slices: u32,
    /// Sequence chunks (the grid's x extent).
    chunks: u32,
}

/// [`plan`] on `gpu`.
fn plan_for(gpu: &crate::device::Device, shape: DecodeShape) -> Plan {
    plan(shape, gpu.info().compute_units)
}

/// The split of a decode attention of `shape` on an adapter with
/// `compute_units` (0: unknown), a pure function of them (a recorded
/// graph replays with other lengths); `target(g)` is
/// [`target_workgroups`] for workgroups of `g` heads:
/// - `group`: all the query heads sharing a kv head (each key and value is
///   then read once), at most 16 and at most 2048 floats of queries; while
///   even one chunk per 64 positions of the capacity leaves fewer than
///   `target(group)` workgroups, halved (rounding up) down to 1;
/// - `chunks`: enough for `target(group)` workgroups over the sequences,
///   kv heads and head slices, at least 1 and at most one per 64 positions
///   of the capacity.
fn plan(shape: DecodeShape, compute_units: u32) -> Plan {
    let ratio = shape.q_heads / shape.kv_heads;
    let heads = u64::from(shape.batch) * u64::from(shape.kv_heads);
    let max_chunks = shape.max_seq.div_ceil(MIN_SPAN);
    let target = |g| u64::from(target_workgroups(compute_units, g).max(1));
    let mut group = ratio.min(MAX_GROUP).min(MAX_QS / shape.head_dim).max(1);
    while group > 1
        && heads * u64::from(ratio.div_ceil(group)) * u64::from(max_chunks) < target(group)
    {
        group = group.div_ceil(2);
    }
    let slices = ratio.div_ceil(group);
    let per_chunk = heads * u64::from(slices);
    let chunks = target(group)
        .div_ceil(per_chunk)
        .clamp(1, u64::from(max_chunks)) as u32;
    Plan {
        group,
        slices,
        chunks,
    }
}

/// Positions per chunk for a sequence of `len` positions over `chunks`
/// chunks (`attn_span` in `shaders/nn_attn_span.glsl`): `max(ceil(len /
/// chunks), 64)`.
#[cfg(test)]
fn span(len: u32, chunks: u32) -> u32 {
    len.div_ceil(chunks).max(MIN_SPAN)
}

/// Chunks with positions below `len` (`attn_active`): the workgroups per
/// head slice that do work.
#[cfg(test)]
fn active_chunks(len: u32, chunks: u32) -> u32 {
    len.div_ceil(span(len, chunks))
}

#[cfg(test)]
mod tests;
