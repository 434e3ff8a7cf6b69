//! Decode attention and the attention block's output projection in one
//! dispatch (`shaders/nn_attn_decode.comp` with `OPROJ`, the
//! `nn_attn_decode1_qko` kernels; the projection's part is
//! `shaders/nn_attn_oproj.glsl`): what
//! [`attention_decode_qkv`](super::attention_decode_qkv) followed by
//! [`ops::linear`](crate::ops::linear) with an in-place residual do, in one
//! command instead of two.
//!
//! At one sequence, decode attention is a chain of dependent round trips
//! on a few workgroups: the memory bus idles while it runs. The
//! projection's workgroups follow the attention's in the grid and read all
//! of W onto the chip in that time (each its rows, into registers and
//! shared memory; those loads do not depend on the attention), wait until
//! every head group's output is written (a counter the attention's writers
//! add to after a release fence), and then multiply from the chip. So a
//! decode step loses one launch and its drain, and the o weights stream
//! under the attention's latency rather than after it. The waits end
//! because the attention's workgroups start first (in grid order) and
//! never wait.
//!
//! Where the one dispatch does not apply (a software adapter, more than
//! one sequence, f32 weights, or rows of W that the workgroups' slots do
//! not hold: [`attention_decode_project_fuses`]), the op records the two
//! ops, with the same results but for the sums' order.

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

/// The most sequences [`attention_decode_project`] runs in one dispatch;
/// more take the two ops.
pub const DECODE_PROJECT_MAX_BATCH: u32 = 1;

/// The attention block's output projection for [`attention_decode_project`]:
/// `y[b] += out[b] · Wᵀ`.
#[derive(Debug, Clone, Copy)]
pub struct OutProjection<'a> {
    /// W, `[hidden, q_heads · head_dim]` row-major (`nn.Linear`'s
    /// `[out, in]`), in f32, [`F16`](crate::ops::F16) or
    /// [`Bf16`](crate::ops::Bf16) (the one dispatch takes the 16-bit
    /// types).
    pub weight: Weights<'a>,
    /// `[batch, hidden]` f32, added into in place (the residual stream).
    pub y: &'a Buffer<f32>,
    /// W's rows: the width of `y`.
    pub hidden: u32,
}

/// 16-byte chunks of W an invocation holds (`SLOTS` in
/// `shaders/nn_attn_oproj.glsl`: 8 in registers, 6 in shared memory).
const SLOTS: u32 = 11;
/// Chunks of one row an invocation takes at most (`CPT_MAX`).
const CPT_MAX: u32 = 2;
/// Invocations per workgroup (`LOCAL`).
const THREADS: u32 = 256;
/// The smallest subgroup the shader's shared sums hold (`PROJ_SGS`).
const MIN_SUBGROUP: u32 = 8;
/// Shared memory the one dispatch declares, rounded up: the attention's
/// arrays (17.8 KiB) and the projection's slots and sums (25.8 KiB).
const SHARED_BYTES: u32 = 48 * 1024;

/// How the projection's workgroups split W. Pure data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ProjPlan {
    /// Workgroups.
    wgs: u32,
    /// Rows of W per workgroup.
    rw: u32,
    /// 16-byte chunks of a row per invocation.
    cpt: u32,
}

/// The split of W (`n` rows of `k` 16-bit elements, 8 per 16 bytes) over
/// workgroups of [`THREADS`] whose invocations hold [`SLOTS`] chunks each:
/// each invocation takes `cpt` chunks of every row of its workgroup, so a
/// workgroup holds `SLOTS / cpt` rows. `None` where the rows do not split
/// into 16-byte chunks or a row needs more than [`CPT_MAX`] chunks an
/// invocation (K past 4096). Pure.
fn proj_plan(k: u32, n: u32) -> Option<ProjPlan> {
    if k == 0 || n == 0 || k % 8 != 0 {
        return None;
    }
    let cpt = (k / 8).div_ceil(THREADS);
    if cpt > CPT_MAX {
        return None;
    }
    let rw = SLOTS / cpt;
    Some(ProjPlan {
        wgs: n.div_ceil(rw),
        rw,
        cpt,
    })
}

/// The kernel for W's element type (16-bit).
fn kernel(dtype: DType) -> &'static str {
    match dtype {
        DType::F16 => "nn_attn_decode1_qko_f16w",
        _ => "nn_attn_decode1_qko_bf16w",
    }
}

/// Whether [`attention_decode_project`] runs as one dispatch for `shape`
/// and W's element type `weights` (`hidden` rows) on adapter `info`: a GPU
/// (its workgroups start in grid order and a spin-wait ends when the
/// counter moves; lavapipe ends every loop after a fixed count of
/// iterations, so a wait there can end early) with subgroup arithmetic,
/// subgroups of 8 lanes or more that divide 256, at least 44 KiB of
/// shared memory a workgroup, one sequence, 16-bit weights
/// ([`F16`](crate::ops::F16) or [`Bf16`](crate::ops::Bf16)) and
/// `q_heads · head_dim` a multiple of 8 of at most 4096.
pub fn attention_decode_project_fuses(
    info: &AdapterInfo,
    shape: DecodeShape,
    weights: DType,
    hidden: u32,
) -> bool {
    info.adapter_type != AdapterType::Cpu
        && info.subgroup_arithmetic
        && info.max_shared_memory >= SHARED_BYTES
        && fuses(shape, weights, hidden, info.subgroup_size)
}

/// [`attention_decode_project_fuses`] but for the adapter's kind, subgroup
/// arithmetic and shared memory. Pure.
fn fuses(shape: DecodeShape, weights: DType, hidden: u32, subgroup_size: u32) -> bool {
    let k = shape.q_heads.saturating_mul(shape.head_dim);
    shape.batch <= DECODE_PROJECT_MAX_BATCH
        && subgroup_size >= MIN_SUBGROUP
        && THREADS % subgroup_size == 0
        && matches!(weights, DType::F16 | DType::Bf16)
        && proj_plan(k, hidden).is_some()
}

/// Records, for the one new token of each sequence, what
/// [`attention_decode_qkv`](super::attention_decode_qkv) records (the q/k
/// norms, rotary, the KV append and decode attention into `out`, f32
/// caches), and then the attention block's output projection added into
/// the residual: `proj.y[b] += out[b] · Wᵀ` for each sequence `b`.
///
/// At one sequence with 16-bit weights (and `q_heads · head_dim` a
/// multiple of 8, at most 4096) both run in one dispatch on a GPU;
/// [`attention_decode_project_fuses`] says when. Otherwise the two ops are
/// recorded. Either way `out` holds the attention's output afterwards, the
/// same bits as `attention_decode_qkv` writes, and `y` the projection
/// added with f32 sums (the one dispatch adds each invocation's chunk
/// products across a subgroup, then the subgroups' and chunks' sums in
/// order, so its last bits may differ from `ops::linear`'s).
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
    let plan = proj_plan(k as u32, hidden);
    match plan {
        Some(p) if attention_decode_project_fuses(info, shape, dtype, hidden) => {
            let fused = Proj {
                kernel: match std::env::var("VKCOMPUTE_QKO_KERNEL").as_deref() {
                    Ok("r11") => "nn_attn_decode1_qko_bf16w_r11",
                    Ok("tf") => "nn_attn_decode1_qko_bf16w_tf",
                    _ => kernel(dtype),
                },
                w: weight.bind(),
                y,
                o: out,
                push: [p.wgs, hidden, k as u32, p.rw, p.cpt, 0],
                pgroup: std::env::var("VKCOMPUTE_QKO_PGROUP")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(SLOTS),
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
    fn qwen3_4b_holds_seven_rows_a_workgroup() {
        // bf16 W [2560, 4096]: 512 chunks a row, 2 an invocation, so 7
        // rows in 14 slots: 366 workgroups (the last holds 5 rows).
        let p = proj_plan(4096, 2560).unwrap();
        assert_eq!(
            p,
            ProjPlan {
                wgs: 366,
                rw: 7,
                cpt: 2
            }
        );
        // Rows of 2048 elements fit one chunk an invocation: 14 rows.
        assert_eq!(
            proj_plan(2048, 1024).unwrap(),
            ProjPlan {
                wgs: 74,
                rw: 14,
                cpt: 1
            }
        );
    }

    #[test]
    fn every_row_and_chunk_is_held() {
        for (k, n) in [
            (4096u32, 2560u32),
            (2560, 30),
            (1152, 20),
            (8, 1),
            (2056, 13),
            (1024, 256),
        ] {
            let p = proj_plan(k, n).unwrap();
            assert!(p.rw * p.cpt <= SLOTS, "{k} {n}: {p:?}");
            assert!(p.cpt <= CPT_MAX, "{k} {n}: {p:?}");
            assert!(p.cpt * THREADS * 8 >= k, "{k} {n}: a row's chunks: {p:?}");
            assert!(p.wgs * p.rw >= n, "{k} {n}: {p:?}");
            assert!((p.wgs - 1) * p.rw < n, "{k} {n}: an empty workgroup: {p:?}");
        }
    }

    #[test]
    fn what_the_slots_cannot_hold_takes_the_two_ops() {
        assert_eq!(proj_plan(4100, 2560), None);
        assert_eq!(
            proj_plan(4104, 2560),
            None,
            "past 4096: 3 chunks an invocation"
        );
        assert_eq!(proj_plan(0, 2560), None);
        assert_eq!(proj_plan(4096, 0), None);
        let shape = |batch| DecodeShape {
            batch,
            q_heads: 32,
            kv_heads: 8,
            head_dim: 128,
            max_seq: 4096,
        };
        assert!(fuses(shape(1), DType::Bf16, 2560, 32));
        assert!(fuses(shape(1), DType::F16, 2560, 64));
        assert!(!fuses(shape(2), DType::Bf16, 2560, 32));
        assert!(!fuses(shape(1), DType::F32, 2560, 32));
        assert!(!fuses(shape(1), DType::U32, 2560, 32));
        assert!(
            !fuses(shape(1), DType::Bf16, 2560, 4),
            "subgroups under 8 lanes"
        );
        assert!(
            !fuses(shape(1), DType::Bf16, 2560, 48),
            "subgroups that do not divide 256"
        );
    }
}
