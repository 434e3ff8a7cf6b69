//! Decode attention and the attention block's output projection in one
//! dispatch (`shaders/nn_attn_decode.comp` with `OPROJ`, the
//! `nn_attn_decode1_qko` kernels; the projection's part is
//! `shaders/nn_attn_oproj.glsl`): what
//! [`attention_decode_qkv`](super::attention_decode_qkv) followed by
//! [`ops::linear`](crate::ops::linear) with an in-place residual do, in one
//! command instead of two.
//!
//! The projection's workgroups follow the attention's in the grid. Each
//! loads the first part of its rows of W while the attention runs (those
//! loads do not depend on it), waits until every head group's output is
//! written (a counter the attention's writers add to after a release
//! fence), and then multiplies. So a decode step loses one launch and its
//! drain, and the o weights' first bytes are read under the attention's
//! latency rather than after it. The waits end because the attention's
//! workgroups start first (in grid order) and never wait.
//!
//! Where the one dispatch does not apply (a software adapter, more than
//! [`DECODE_PROJECT_MAX_BATCH`] sequences, or a width of W's rows that its
//! 16-byte loads cannot take: [`attention_decode_project_fuses`]), the op
//! records the two ops, with the same results but for the sums' order.

use crate::adapter::{AdapterInfo, AdapterType};
use crate::batch::Batch;
use crate::buffer::{Buffer, GpuBuf};
use crate::error::Result;
use crate::ops::matmul::{Epilogue, Weights};
use crate::ops::DType;

use super::attention::DecodeShape;
use super::decode_qk::{self, Proj, Rest, Source};
use super::qk::QkNorm;
use super::{check_disjoint, check_elems, product, NnOperand};

const OP: &str = "ops::nn::attention_decode_project";

/// The most sequences [`attention_decode_project`] runs in one dispatch
/// (the rows of the attention output its sums hold); more take the two
/// ops.
pub const DECODE_PROJECT_MAX_BATCH: u32 = 4;

/// Rows of W per unit (`PR` in `shaders/nn_attn_oproj.glsl`).
const UNIT_ROWS: u32 = 4;
/// 16-byte chunks per lane and row a part of K takes: two of the kernel's
/// steps (`STEP`), the first loaded before the wait.
const STEP_CHUNKS: u32 = 4;
/// Work items (unit parts) per workgroup at most (its shared sums).
const MAX_ITEMS: u32 = 64;
/// Invocations per workgroup (`LOCAL`).
const THREADS: u32 = 256;

/// The attention block's output projection for [`attention_decode_project`]:
/// `y[b] += out[b] · Wᵀ`.
#[derive(Debug, Clone, Copy)]
pub struct OutProjection<'a> {
    /// W, `[hidden, q_heads · head_dim]` row-major (`nn.Linear`'s
    /// `[out, in]`), in f32, [`F16`](crate::ops::F16) or
    /// [`Bf16`](crate::ops::Bf16).
    pub weight: Weights<'a>,
    /// `[batch, hidden]` f32, added into in place (the residual stream).
    pub y: &'a Buffer<f32>,
    /// W's rows: the width of `y`.
    pub hidden: u32,
}

/// How the projection's workgroups split W. Pure data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ProjPlan {
    /// Workgroups.
    wgs: u32,
    /// Units (4 rows of W) per workgroup.
    upw: u32,
    /// Parts of K per unit.
    ksub: u32,
    /// 16-byte chunks per part.
    kspan: u32,
}

/// The split of W (`n` rows of `k` elements, `per_load` of them per 16
/// bytes) over workgroups of subgroups of `subgroup` lanes: K in parts
/// that each take one step of a subgroup's loads (at most 64 parts), as
/// many units per workgroup as its subgroups take one part each. `None`
/// where the 16-byte loads do not fit the rows or the subgroup size does
/// not divide the workgroup. Pure.
fn proj_plan(k: u32, n: u32, per_load: u32, subgroup: u32) -> Option<ProjPlan> {
    if subgroup == 0 || THREADS % subgroup != 0 || k == 0 || n == 0 || k % per_load != 0 {
        return None;
    }
    let subgroups = THREADS / subgroup;
    let chunks = k / per_load;
    let ksub = chunks.div_ceil(subgroup * STEP_CHUNKS).clamp(1, MAX_ITEMS);
    let kspan = chunks.div_ceil(ksub);
    let upw = (subgroups / ksub).clamp(1, MAX_ITEMS / ksub);
    let wgs = n.div_ceil(UNIT_ROWS).div_ceil(upw);
    Some(ProjPlan {
        wgs,
        upw,
        ksub,
        kspan,
    })
}

/// Elements of W per 16-byte load.
fn per_load(dtype: DType) -> u32 {
    if dtype == DType::F32 {
        4
    } else {
        8
    }
}

/// The kernel for W's element type.
fn kernel(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "nn_attn_decode1_qko_f32w",
        DType::F16 => "nn_attn_decode1_qko_f16w",
        _ => "nn_attn_decode1_qko_bf16w",
    }
}

/// Whether [`attention_decode_project`] runs as one dispatch for `shape`
/// and W's element type `weights` (`hidden` rows) on adapter `info`: a GPU
/// (its workgroups start in grid order and a spin-wait ends when the
/// counter moves; lavapipe ends every loop after a fixed count of
/// iterations, so a wait there can end early), subgroup arithmetic, at
/// most [`DECODE_PROJECT_MAX_BATCH`] sequences, and `q_heads · head_dim` a
/// multiple of the elements in 16 bytes of W (4 for f32, 8 for 16-bit
/// weights).
pub fn attention_decode_project_fuses(
    info: &AdapterInfo,
    shape: DecodeShape,
    weights: DType,
    hidden: u32,
) -> bool {
    info.adapter_type != AdapterType::Cpu
        && info.subgroup_arithmetic
        && fuses(shape, weights, hidden, info.subgroup_size)
}

/// [`attention_decode_project_fuses`] but for the adapter's kind and
/// subgroup arithmetic. Pure.
fn fuses(shape: DecodeShape, weights: DType, hidden: u32, subgroup_size: u32) -> bool {
    let k = shape.q_heads.saturating_mul(shape.head_dim);
    shape.batch <= DECODE_PROJECT_MAX_BATCH
        && matches!(weights, DType::F32 | DType::F16 | DType::Bf16)
        && proj_plan(k, hidden, per_load(weights), subgroup_size).is_some()
}

/// Records, for the one new token of each sequence, what
/// [`attention_decode_qkv`](super::attention_decode_qkv) records (the q/k
/// norms, rotary, the KV append and decode attention into `out`, f32
/// caches), and then the attention block's output projection added into
/// the residual: `proj.y[b] += out[b] · Wᵀ` for each sequence `b`.
///
/// With at most [`DECODE_PROJECT_MAX_BATCH`] sequences (and `q_heads ·
/// head_dim` a multiple of 4, or of 8 for 16-bit weights) both run in
/// one dispatch; [`attention_decode_project_fuses`] says when. Otherwise
/// the two ops are recorded. Either way `out` holds the attention's
/// output afterwards, the same bits as `attention_decode_qkv` writes, and
/// `y` the projection added with f32 sums (the one dispatch adds each
/// row's products per lane, then across a subgroup and across K's parts
/// in order, so its last bits may differ from `ops::linear`'s).
///
/// Allocates what `attention_decode_qkv` does, and two more counters
/// (zero, and left at zero for a graph's next launch).
///
/// Errors: those of `attention_decode_qkv` (naming this op), and
/// [`OpsError::Shape`](crate::error::OpsError::Shape) errors naming `w`
/// or `y` when W does not hold `hidden · q_heads · head_dim` elements,
/// `y` does not hold `batch · hidden`, `hidden` is 0, or `y` shares bytes
/// with W, qkv, the caches or `out`; nothing is recorded then.
///
/// ```no_run
/// # use vkcompute::{Device, ops::{nn::{self, DecodeShape, OutProjection}, Bf16}};
/// # fn main() -> vkcompute::Result<()> {
/// let gpu = Device::new()?;
/// let (qh, kvh, d, max_seq, hidden) = (8u32, 2u32, 64u32, 128u32, 256u32);
/// let qkv = gpu.alloc::<f32>(((qh + 2 * kvh) * d) as usize)?;
/// let inv_freq = gpu.upload(&vec![1.0f32; (d / 2) as usize])?;
/// let positions = gpu.upload(&[5u32])?;
/// let lens = gpu.upload(&[6u32])?;
/// let k_cache = gpu.alloc::<f32>((kvh * max_seq * d) as usize)?;
/// let v_cache = gpu.alloc::<f32>((kvh * max_seq * d) as usize)?;
/// let flag = gpu.alloc::<u32>(1)?;
/// let out = gpu.alloc::<f32>((qh * d) as usize)?;
/// let w = gpu.alloc::<Bf16>((hidden * qh * d) as usize)?;
/// let h = gpu.alloc::<f32>(hidden as usize)?;
/// let shape = DecodeShape { batch: 1, q_heads: qh, kv_heads: kvh, head_dim: d, max_seq };
/// let proj = OutProjection { weight: (&w).into(), y: &h, hidden };
/// let mut batch = gpu.batch()?;
/// nn::attention_decode_project(
///     &mut batch, &qkv, None, &inv_freq, &positions, &k_cache, &v_cache, &lens, &flag, &out,
///     proj, shape, 0.125,
/// )?;
/// batch.submit()?;
/// # Ok(())
/// # }
/// ```
#[allow(clippy::too_many_arguments)]
pub fn attention_decode_project(
    batch: &mut Batch,
    qkv: &impl NnOperand<f32>,
    norm: Option<QkNorm<'_>>,
    inv_freq: &impl NnOperand<f32>,
    positions: &impl NnOperand<u32>,
    k_cache: &impl NnOperand<f32>,
    v_cache: &impl NnOperand<f32>,
    lens: &impl NnOperand<u32>,
    flag: &impl NnOperand<u32>,
    out: &Buffer<f32>,
    proj: OutProjection<'_>,
    shape: DecodeShape,
    scale: f32,
) -> Result<()> {
    let OutProjection { weight, y, hidden } = proj;
    let k = product(OP, "w", &[shape.q_heads, shape.head_dim])?;
    if hidden == 0 {
        return Err(super::shape_err(OP, "y", "hidden is 0".into()));
    }
    check_elems(
        OP,
        "w",
        weight.len() as u64,
        product(OP, "w", &[hidden, k as u32])?,
    )?;
    check_elems(
        OP,
        "y",
        y.len() as u64,
        product(OP, "y", &[shape.batch, hidden])?,
    )?;
    let others: [(&str, &dyn GpuBuf); 5] = [
        ("w", weight.bind()),
        ("qkv", qkv),
        ("k_cache", k_cache),
        ("v_cache", v_cache),
        ("out", out),
    ];
    for (name, b) in others {
        check_disjoint(OP, "y", y, name, b)?;
    }
    let rest = Rest {
        norm,
        inv_freq: (inv_freq, inv_freq.elems()),
        positions: (positions, positions.elems()),
        lens: (lens, lens.elems()),
        flag: (flag, flag.elems()),
        shape,
        scale,
    };
    let src = Source::Merged((qkv, qkv.elems()));
    let dtype = weight.dtype();
    let gpu = y.device();
    let info = gpu.info();
    let plan = proj_plan(k as u32, hidden, per_load(dtype), info.subgroup_size);
    match plan {
        Some(p) if attention_decode_project_fuses(info, shape, dtype, hidden) => {
            let fused = Proj {
                kernel: kernel(dtype),
                w: weight.bind(),
                y,
                o: out,
                push: [p.wgs, hidden, k as u32, shape.batch, p.upw, p.ksub, p.kspan],
                rows: shape.batch,
            };
            decode_qk::record_named(OP, batch, src, k_cache, v_cache, out, rest, Some(fused))
        }
        _ => {
            decode_qk::record_named(OP, batch, src, k_cache, v_cache, out, rest, None)?;
            crate::ops::linear(
                batch,
                out,
                weight,
                y,
                shape.batch,
                k as u32,
                hidden,
                Epilogue::Residual(y),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qwen3_4b_splits_into_320_workgroups_of_two_units() {
        // bf16 W [2560, 4096], subgroups of 32: 512 chunks per row in 4
        // parts of 128 (one step of 4 chunks per lane).
        let p = proj_plan(4096, 2560, 8, 32).unwrap();
        assert_eq!(
            p,
            ProjPlan {
                wgs: 320,
                upw: 2,
                ksub: 4,
                kspan: 128
            }
        );
        // f32 W: twice the chunks, twice the parts, one unit a workgroup.
        let p = proj_plan(4096, 2560, 4, 32).unwrap();
        assert_eq!((p.wgs, p.upw, p.ksub, p.kspan), (640, 1, 8, 128));
    }

    #[test]
    fn every_part_and_unit_is_covered() {
        for (k, n, per, sg) in [
            (4096u32, 2560u32, 8u32, 32u32),
            (512, 48, 8, 8),
            (1000, 7, 4, 4),
            (64 * 8 * 4 * 70, 5, 8, 4),
            (8, 1, 8, 64),
        ] {
            let p = proj_plan(k, n, per, sg).unwrap();
            let chunks = k / per;
            assert!(p.ksub * p.kspan >= chunks, "{k} {n}: {p:?}");
            assert!(
                (p.ksub - 1) * p.kspan < chunks,
                "{k} {n}: an empty part: {p:?}"
            );
            assert!(p.upw * p.ksub <= MAX_ITEMS, "{p:?}");
            assert!(p.wgs * p.upw * UNIT_ROWS >= n, "{p:?}");
            assert!((p.wgs - 1) * p.upw * UNIT_ROWS < n, "{p:?}");
        }
    }

    #[test]
    fn loads_that_do_not_fit_the_rows_take_the_two_ops() {
        assert_eq!(proj_plan(4100, 2560, 8, 32), None);
        assert_eq!(proj_plan(4096, 2560, 8, 0), None);
        assert_eq!(proj_plan(4096, 2560, 8, 48), None);
        let shape = |batch| DecodeShape {
            batch,
            q_heads: 32,
            kv_heads: 8,
            head_dim: 128,
            max_seq: 4096,
        };
        assert!(fuses(shape(4), DType::Bf16, 2560, 32));
        assert!(!fuses(shape(5), DType::Bf16, 2560, 32));
        assert!(!fuses(shape(1), DType::U32, 2560, 32));
    }
}
