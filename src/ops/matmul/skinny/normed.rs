//! Skinny linear layers with an RMSNorm prologue: `y = RMSNorm(x)·Wᵀ`,
//! where `RMSNorm(x)[r, i] = x[r, i] / sqrt(mean(x[r, :]²) + eps) · g[i]`
//! as [`crate::ops::nn::rms_norm`] computes it (f32, eps inside the root),
//! so a norm and the projection that reads its output are one dispatch.
//!
//! Up to [`NORM_FUSED_MAX_ROWS`] rows per pass the norm runs inside the
//! layer (`NORM` in `shaders/linear.glsl`, the `_norm` kernels), with no
//! extra dispatch; at 3 or 4 rows (one pass of 4) too on the subgroup-32
//! kernels where the weights hold at most [`NORM_FUSED_WIDE_MAX_BYTES`]
//! ([`fuses_norm`]). With one K slice the scale comes last: each work item
//! sums the squares of the x values its loop reads anyway (x times g
//! enters the products), the sums are finished with the products' (added
//! over the parts of K where narrower workgroups share a unit), and the
//! finished products are multiplied by each row's `1 / sqrt(mean + eps)`,
//! so the weight loads start with the kernel (H200, Qwen3-4B decode at one
//! row: 3.30 → 3.25 ms per step against the prologue-first form). With
//! split-K, where a slice reads part of K, a prologue shared by the
//! workgroup takes the scale first (one barrier) and x enters scaled.
//!
//! Other plans take two dispatches:
//! [`crate::ops::nn::rms_norm`] into a scratch buffer of x's shape (the
//! batch holds it until its work completes), a barrier, then the layer.
//! There the product's own work dwarfs a launch, while every subgroup
//! summing the squares of many rows of x itself costs more than the launch
//! it saves (H200, Qwen3-4B decode of 16 sequences: 28.2 ms per step with
//! the norm inside 16-row passes, 18.8 ms with it apart).

use super::*;

const OP_NORMED: &str = "ops::linear_normed";

/// The most rows per pass whose layer computes the norm itself (one
/// dispatch); past it the norm is a dispatch of its own. H200, Qwen3-4B
/// decode: at 1 row the fused norm took the step from 5.86 to 5.05 ms.
pub const NORM_FUSED_MAX_ROWS: u32 = 2;

/// The most bytes of weights whose layer computes the norm itself at 3 or
/// 4 rows of x (one pass of 4 rows) on the subgroup-32 kernels. The
/// norm's loads and scale cost the fused kernel time per byte of W, the
/// separate norm a launch: H200, bf16, four rows, `linear_probe --norm
/// --copies 4` (docs/runs/2026-11-27t-h200-t9): Qwen3-4B's q|k|v (31.5
/// MB) 19.5 µs fused against 22.1 with the norm apart, its gate|up (99.6
/// MB) 46.1 against 43.6.
pub const NORM_FUSED_WIDE_MAX_BYTES: u64 = 64 << 20;

/// Whether a layer of `rows_per_pass` rows and `w_bytes` of `dtype`
/// weights computes its norm itself: up to [`NORM_FUSED_MAX_ROWS`] rows
/// always, and a pass of 4 rows on the subgroup-32 kernels (16-bit weights,
/// 32-lane subgroups) up to [`NORM_FUSED_WIDE_MAX_BYTES`]. Pure.
pub(super) fn fuses_norm(
    rows_per_pass: u32,
    w_bytes: u64,
    dtype: DType,
    caps: &MatmulCaps,
) -> bool {
    rows_per_pass <= NORM_FUSED_MAX_ROWS
        || (rows_per_pass == 4
            && super::sg32::uses_sg32(dtype, 4, caps)
            && w_bytes <= NORM_FUSED_WIDE_MAX_BYTES)
}

/// The RMSNorm prologue of the streaming kernels (the `_norm` variants):
/// the norm weight (`[k]` f32) and epsilon.
#[derive(Clone, Copy)]
pub(super) struct Norm<'a> {
    pub(super) weight: &'a Buffer<f32>,
    pub(super) eps: f32,
}

/// Records `y = RMSNorm(x)·Wᵀ` with its epilogue: [`linear`] whose x is
/// first normalised per row with the norm weight `norm_weight` (`[k]` f32)
/// and `eps` (finite, above 0), as [`crate::ops::nn::rms_norm`] does,
/// without a separate dispatch for rows per pass up to
/// [`NORM_FUSED_MAX_ROWS`], and for small layers at 4 (see the module).
/// Shapes, buffers and epilogues as [`linear`]; `y` may not be the norm
/// weight.
///
/// ```
/// # fn main() -> vkcompute::Result<()> {
/// use vkcompute::{ops, Device};
/// use vkcompute::ops::Epilogue;
/// let gpu = Device::new()?;
/// let x = gpu.upload(&[3.0f32, 4.0])?;                // 1×2, mean(x²) = 12.5
/// let g = gpu.upload(&[1.0f32, 2.0])?;                // the norm weight
/// let w = gpu.upload(&[1.0f32, 0.0, 0.0, 1.0])?;      // 2×2, [out, in]
/// let y = gpu.alloc::<f32>(2)?;
/// let mut batch = gpu.batch()?;
/// ops::linear_normed(&mut batch, &x, &g, 1e-6, &w, &y, 1, 2, 2, Epilogue::None)?;
/// batch.submit()?;
/// let s = 1.0 / (12.5f32 + 1e-6).sqrt();
/// let got = y.download()?;
/// assert!((got[0] - 3.0 * s).abs() < 1e-5 && (got[1] - 8.0 * s).abs() < 1e-5);
/// # Ok(())
/// # }
/// ```
#[allow(clippy::too_many_arguments)]
pub fn linear_normed<'w>(
    batch: &mut Batch,
    x: &Buffer<f32>,
    norm_weight: &Buffer<f32>,
    eps: f32,
    w: impl Into<Weights<'w>>,
    y: &Buffer<f32>,
    m: u32,
    k: u32,
    n: u32,
    epilogue: Epilogue<'_>,
) -> Result<()> {
    let w = w.into();
    let plan = default_plan(x, &w, (m, k, n), &epilogue);
    linear_normed_with_plan(batch, x, norm_weight, eps, w, y, m, k, n, epilogue, plan)
}

/// [`linear_normed`] with an explicit plan ([`LinearPlan::is_valid`]):
/// rows per pass up to [`NORM_FUSED_MAX_ROWS`] fuse the norm (the `_norm`
/// kernels exist for 1 to 16), and a pass of 4 rows on the subgroup-32
/// kernels (16-bit weights, 32-lane subgroups) where the weights hold at
/// most [`NORM_FUSED_WIDE_MAX_BYTES`]; others record
/// [`crate::ops::nn::rms_norm`] then the layer.
#[allow(clippy::too_many_arguments)]
pub fn linear_normed_with_plan<'w>(
    batch: &mut Batch,
    x: &Buffer<f32>,
    norm_weight: &Buffer<f32>,
    eps: f32,
    w: impl Into<Weights<'w>>,
    y: &Buffer<f32>,
    m: u32,
    k: u32,
    n: u32,
    epilogue: Epilogue<'_>,
    plan: LinearPlan,
) -> Result<()> {
    let w = w.into();
    let gpu = x.device();
    check(&gpu, x, &w, y, m, k, n, &epilogue, plan)?;
    check_norm(norm_weight, eps, y, k)?;
    let w_bytes = w.len() as u64 * w.dtype().size();
    let caps = MatmulCaps::of(gpu.info());
    if fuses_norm(plan.rows_per_pass, w_bytes, w.dtype(), &caps) {
        let norm = Norm {
            weight: norm_weight,
            eps,
        };
        return record(batch, x, Some(norm), w, y, (m, k, n), epilogue, plan);
    }
    let xn = gpu.alloc::<f32>(x.len())?;
    crate::ops::nn::rms_norm(batch, x, norm_weight, &xn, m, k, eps)?;
    batch.barrier();
    record(batch, &xn, None, w, y, (m, k, n), epilogue, plan)
}

/// The norm's own checks: the weight holds `k` elements and is not `y`,
/// eps is finite and above 0.
fn check_norm(g: &Buffer<f32>, eps: f32, y: &Buffer<f32>, k: u32) -> Result<()> {
    if g.len() as u64 != u64::from(k) {
        return Err(Error::Ops(OpsError::Shape {
            op: OP_NORMED,
            tensor: "norm_weight",
            detail: format!("holds {} elements; k = {k}", g.len()),
        }));
    }
    if !(eps.is_finite() && eps > 0.0) {
        return Err(Error::Ops(OpsError::Param {
            op: OP_NORMED,
            param: "eps",
            detail: format!("{eps} is not a finite number > 0"),
        }));
    }
    if same(g, y) {
        return Err(Error::Ops(OpsError::Shape {
            op: OP_NORMED,
            tensor: "y",
            detail: "is the norm weight; the kernels read it while they write y".into(),
        }));
    }
    Ok(())
}

/// The RMSNorm-prologue kernel for `dtype` weights and `rows` rows per
/// pass (1 to 16).
pub(super) fn kernel_name(dtype: DType, rows: u32) -> &'static str {
    const F32: [&str; 5] = [
        "linear_f32_m1_norm",
        "linear_f32_m2_norm",
        "linear_f32_norm",
        "linear_f32_m8_norm",
        "linear_f32_m16_norm",
    ];
    const F16: [&str; 5] = [
        "linear_f16_m1_norm",
        "linear_f16_m2_norm",
        "linear_f16_norm",
        "linear_f16_m8_norm",
        "linear_f16_m16_norm",
    ];
    const BF16: [&str; 5] = [
        "linear_bf16_m1_norm",
        "linear_bf16_m2_norm",
        "linear_bf16_norm",
        "linear_bf16_m8_norm",
        "linear_bf16_m16_norm",
    ];
    let i = rows.max(1).trailing_zeros().min(4) as usize;
    match dtype {
        DType::F16 => F16[i],
        DType::Bf16 => BF16[i],
        _ => F32[i],
    }
}
