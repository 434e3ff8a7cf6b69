//! A transformer's SwiGLU MLP block for a few rows, residual included:
//! `y = x + (silu(n·W_gateᵀ) * (n·W_upᵀ))·W_downᵀ`, where `n` is x or
//! `RMSNorm(x)`, the weights stored as Hugging Face stores them (a merged
//! `[2·I, k]` gate|up weight, gate rows first, and the `[k, I]` down
//! weight) in f32, [`F16`](crate::ops::F16) or [`Bf16`](crate::ops::Bf16).
//!
//! ```
//! # fn main() -> vkcompute::Result<()> {
//! use vkcompute::{ops, Device};
//! let gpu = Device::new()?;
//! let x = gpu.upload(&[1.0f32, 2.0])?;                    // 1×2
//! // I = 1: the gate row, then the up row, each [k] = 2 wide.
//! let gate_up = gpu.upload(&[1.0f32, 0.0, 0.0, 1.0])?;
//! let down = gpu.upload(&[1.0f32, -1.0])?;                // [k, I] = 2×1
//! let y = gpu.alloc::<f32>(2)?;
//! let mut batch = gpu.batch()?;
//! ops::swiglu_mlp(&mut batch, &x, None, &gate_up, &down, &y, 1, 2, 1)?;
//! batch.submit()?;
//! let h = 1.0 / (1.0 + (-1.0f32).exp()) * 2.0;            // silu(1) · 2
//! let got = y.download()?;
//! assert!((got[0] - (1.0 + h)).abs() < 1e-5 && (got[1] - (2.0 - h)).abs() < 1e-5);
//! # Ok(())
//! # }
//! ```
//!
//! By default ([`choose_mlp`]) the block is two [`super::linear`] layers:
//! gate|up with [`super::Epilogue::SiluMul`] (the norm fused in, as
//! [`super::linear_normed`] takes it) into a scratch `[m, I]` buffer the
//! batch holds, a barrier, then down with a residual epilogue.
//!
//! **Fused** ([`MlpPlan::fused`]), on adapters with f32 atomic adds on
//! storage buffers (`VK_EXT_shader_atomic_float`'s
//! `shaderBufferFloat32AtomicAdd`) for up to [`MLP_FUSED_MAX_M`] rows, the
//! block is one dispatch (`shaders/mlp.glsl`). The intermediate features
//! split the work with no exchange between workgroups: each workgroup owns
//! 32 consecutive features, computes their `silu(gate)·up` with the skinny
//! linear kernel's products (the RMSNorm's scale last), then streams the
//! matching columns of every row of the down weight and adds its part of
//! the down projection into an accumulator with atomic adds. The last
//! workgroup to finish writes `y = x + accumulator` and clears the
//! accumulator for the next run. It saves a launch per block, but on an
//! H200 it streams the weights slower than the two layers do (see
//! [`choose_mlp`]), so it is not the default. The sum over workgroups
//! lands in the order the atomics do: the result may differ in its last
//! bits from run to run.
//!
//! Like any command, the block may overlap commands recorded before it:
//! put a [`Batch::barrier`] between a command that writes its inputs and
//! the block.

use super::*;

const OP_MLP: &str = "ops::swiglu_mlp";

/// The most rows of x the fused block takes (in passes of up to 4 rows,
/// the weights read once per pass).
pub const MLP_FUSED_MAX_M: u32 = 4;

/// Intermediate features per workgroup of the fused kernel (`MLP_J` in
/// `shaders/mlp.glsl`).
const FEATURES: u32 = 32;

/// How a [`swiglu_mlp`] block runs: [`choose_mlp`]'s decision, or one
/// given to [`swiglu_mlp_with_plan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MlpPlan {
    /// One fused dispatch (`true`; needs f32 atomic adds and at most
    /// [`MLP_FUSED_MAX_M`] rows) or two linear layers.
    pub fused: bool,
    /// Fused: rows of x per pass (1, 2 or 4).
    pub rows_per_pass: u32,
}

impl MlpPlan {
    /// The fused plan for `m` rows: the smallest of 1, 2, 4 rows per pass
    /// that holds `m` (4 past that).
    pub fn fused(m: u32) -> MlpPlan {
        MlpPlan {
            fused: true,
            rows_per_pass: [1, 2, 4].into_iter().find(|&r| r >= m).unwrap_or(4),
        }
    }
}

/// Picks the plan for an MLP block of `m` rows: the two linear layers.
/// The fused kernel ([`MlpPlan::fused`]) measured slower than them on an
/// H200 in every build tried (Qwen3-4B's FFN stack with bf16 weights at
/// one token: 2.02–2.51 ms per forward against 1.71–1.75 for the two
/// layers, with 16 to 128 features and 256 to 1024 invocations per
/// workgroup, and three changes to its loads; the build kept 2.05–2.09;
/// a decode step 3.46–3.52 ms against 3.00–3.02): a workgroup's two
/// phases run one after the other, its column slice of the down weight
/// is a short strided read per row, and its parts are hundreds of
/// thousands of atomic adds per block. Pure.
pub fn choose_mlp(m: u32) -> MlpPlan {
    MlpPlan {
        fused: false,
        ..MlpPlan::fused(m)
    }
}

/// Records `y = x + (silu(n·W_gateᵀ) * (n·W_upᵀ))·W_downᵀ` with `n =
/// RMSNorm(x)` under `norm` (its weight, `[k]` f32, and eps, finite and
/// above 0) or `n = x`: `x` and `y` are `[m, k]` f32 (1 ≤ m ≤
/// [`LINEAR_MAX_M`]), `w_gate_up` the merged `[2·inter, k]` gate|up weight
/// (gate rows first), `w_down` the `[k, inter]` down weight, both of one
/// dtype (f32, F16 or Bf16). `y` may be `x` (the residual added in place);
/// it may not be a weight. [`choose_mlp`]'s plan (see the module).
#[allow(clippy::too_many_arguments)]
pub fn swiglu_mlp<'w>(
    batch: &mut Batch,
    x: &Buffer<f32>,
    norm: Option<(&Buffer<f32>, f32)>,
    w_gate_up: impl Into<Weights<'w>>,
    w_down: impl Into<Weights<'w>>,
    y: &Buffer<f32>,
    m: u32,
    k: u32,
    inter: u32,
) -> Result<()> {
    swiglu_mlp_with_plan(
        batch,
        x,
        norm,
        w_gate_up,
        w_down,
        y,
        (m, k, inter),
        choose_mlp(m),
    )
}

/// [`swiglu_mlp`] with an explicit plan (`shape` is `(m, k, inter)`).
#[allow(clippy::too_many_arguments)]
pub fn swiglu_mlp_with_plan<'w>(
    batch: &mut Batch,
    x: &Buffer<f32>,
    norm: Option<(&Buffer<f32>, f32)>,
    w_gate_up: impl Into<Weights<'w>>,
    w_down: impl Into<Weights<'w>>,
    y: &Buffer<f32>,
    (m, k, inter): (u32, u32, u32),
    plan: MlpPlan,
) -> Result<()> {
    let (wgu, wd) = (w_gate_up.into(), w_down.into());
    let gpu = x.device();
    match check_mlp(&gpu, x, norm, &wgu, &wd, y, (m, k, inter), plan)? {
        Some(kernel) => fused(batch, kernel, x, norm, wgu, wd, y, (m, k, inter), plan),
        None => unfused(batch, x, norm, wgu, wd, y, (m, k, inter)),
    }
}

/// The two linear layers.
fn unfused(
    batch: &mut Batch,
    x: &Buffer<f32>,
    norm: Option<(&Buffer<f32>, f32)>,
    wgu: Weights<'_>,
    wd: Weights<'_>,
    y: &Buffer<f32>,
    (m, k, inter): (u32, u32, u32),
) -> Result<()> {
    let gpu = x.device();
    // Every element is written by gate|up before down reads it: no fill
    // (a zero-filled allocation would wait for a transfer here).
    let len = u64::from(m) * u64::from(inter);
    let h = Buffer::<f32>::create(&gpu, len, crate::memory::Memory::DeviceLocal, OP_MLP)?;
    match norm {
        Some((g, eps)) => linear_normed(
            batch,
            x,
            g,
            eps,
            wgu,
            &h,
            m,
            k,
            2 * inter,
            Epilogue::SiluMul,
        )?,
        None => linear(batch, x, wgu, &h, m, k, 2 * inter, Epilogue::SiluMul)?,
    }
    batch.barrier();
    linear(batch, &h, wd, y, m, inter, k, Epilogue::Residual(x))
}

/// The fused kernel's name for `dtype` weights, rows per pass and the
/// norm; `None` where no such build exists.
fn mlp_kernel_name(dtype: DType, rows: u32, norm: bool) -> Option<&'static str> {
    use DType::{Bf16, F16, F32};
    Some(match (dtype, rows, norm) {
        (F32, 1, false) => "mlp_f32_m1",
        (F32, 2, false) => "mlp_f32_m2",
        (F32, 4, false) => "mlp_f32",
        (F32, 1, true) => "mlp_f32_m1_norm",
        (F32, 2, true) => "mlp_f32_m2_norm",
        (F32, 4, true) => "mlp_f32_norm",
        (F16, 1, false) => "mlp_f16_m1",
        (F16, 2, false) => "mlp_f16_m2",
        (F16, 4, false) => "mlp_f16",
        (F16, 1, true) => "mlp_f16_m1_norm",
        (F16, 2, true) => "mlp_f16_m2_norm",
        (F16, 4, true) => "mlp_f16_norm",
        (Bf16, 1, false) => "mlp_bf16_m1",
        (Bf16, 2, false) => "mlp_bf16_m2",
        (Bf16, 4, false) => "mlp_bf16",
        (Bf16, 1, true) => "mlp_bf16_m1_norm",
        (Bf16, 2, true) => "mlp_bf16_m2_norm",
        (Bf16, 4, true) => "mlp_bf16_norm",
        _ => return None,
    })
}

/// The fused kernel's grid and push constants for a checked block: its
/// workgroups (features groups × row chunks) and the words
/// `shaders/mlp.glsl` reads. Pure.
pub(super) fn mlp_launch(
    (m, k, inter): (u32, u32, u32),
    dtype: DType,
    eps: Option<f32>,
    plan: MlpPlan,
) -> (u32, Vec<u32>) {
    let groups = inter.div_ceil(FEATURES);
    let mchunks = m.div_ceil(plan.rows_per_pass);
    let vec = k % per_load(dtype) == 0;
    let chunks = if vec { k / per_load(dtype) } else { k };
    let dvec = inter % per_load(dtype) == 0;
    let wgs = groups * mchunks;
    let mut p = vec![
        m,
        k,
        2 * inter,
        2, // mode: unused by the fused kernel
        u32::from(vec),
        chunks,
        FEATURES / 2,
        mchunks,
        1, // pairs: gate|up units
        1, // ksub
    ];
    p.extend(eps.map(f32::to_bits));
    p.extend([u32::from(dvec), wgs]);
    (wgs, p)
}

/// Records the fused kernel `name` ([`check_mlp`]'s) for a checked block.
#[allow(clippy::too_many_arguments)]
fn fused(
    batch: &mut Batch,
    name: &'static str,
    x: &Buffer<f32>,
    norm: Option<(&Buffer<f32>, f32)>,
    wgu: Weights<'_>,
    wd: Weights<'_>,
    y: &Buffer<f32>,
    (m, k, inter): (u32, u32, u32),
    plan: MlpPlan,
) -> Result<()> {
    let gpu = x.device();
    let kernel = crate::builtins::get(&gpu.inner, name, &[])?;
    let (wgs, pc) = mlp_launch((m, k, inter), wgu.dtype(), norm.map(|n| n.1), plan);
    let limit = gpu.info().max_workgroup_count[0];
    if wgs > limit {
        return Err(mlp_shape(format!(
            "needs {wgs} workgroups, over maxComputeWorkGroupCount[0] ({limit})"
        )));
    }
    // The accumulator and the arrival counter: zero now, and zero again
    // after every run (the last workgroup clears them).
    let acc = gpu.alloc::<f32>((m as usize) * (k as usize))?;
    let counter = gpu.alloc::<u32>(1)?;
    let (gb, db) = (wgu.bind(), wd.bind());
    let g: &[&dyn crate::buffer::GpuBuf] = match &norm {
        Some((g, _)) => &[*g, *g],
        None => &[],
    };
    let binds = [
        &[x as &dyn crate::buffer::GpuBuf, x, gb, gb, x, y][..],
        g,
        &[db, db, &acc, &counter],
    ]
    .concat();
    batch.run_configured(&kernel, &binds, [wgs, 1, 1], Some(&words(&pc)))?;
    Ok(())
}

fn mlp_shape(detail: String) -> Error {
    Error::OpShape { op: OP_MLP, detail }
}

/// Every check before recording: shapes, lengths, dtypes, aliasing, the
/// norm, the plan and the adapter's features. Returns the fused kernel's
/// name for a fused plan, `None` for the two linear layers.
#[allow(clippy::too_many_arguments)]
fn check_mlp(
    gpu: &Device,
    x: &Buffer<f32>,
    norm: Option<(&Buffer<f32>, f32)>,
    wgu: &Weights<'_>,
    wd: &Weights<'_>,
    y: &Buffer<f32>,
    (m, k, inter): (u32, u32, u32),
    plan: MlpPlan,
) -> Result<Option<&'static str>> {
    if m == 0 || k == 0 || inter == 0 {
        return Err(mlp_shape(format!(
            "m = {m}, k = {k}, inter = {inter}: every dimension must be at least 1"
        )));
    }
    if m > LINEAR_MAX_M {
        return Err(mlp_shape(format!(
            "m = {m} rows of x, over the limit of {LINEAR_MAX_M}"
        )));
    }
    if wgu.dtype() != wd.dtype() {
        return Err(mlp_shape(format!(
            "the gate|up weight is {} and the down weight {}: one dtype for both",
            wgu.dtype(),
            wd.dtype()
        )));
    }
    let (m64, k64, i64_) = (u64::from(m), u64::from(k), u64::from(inter));
    let wsize = wgu.dtype().size();
    let want = [
        ("x", "m·k", x.len(), m64 * k64, 4),
        ("y", "m·k", y.len(), m64 * k64, 4),
        ("w_gate_up", "2·inter·k", wgu.len(), 2 * i64_ * k64, wsize),
        ("w_down", "k·inter", wd.len(), k64 * i64_, wsize),
    ];
    check_lengths(&want, gpu.info().max_storage_buffer_range, mlp_shape)?;
    if wgu.aliases(y) || wd.aliases(y) {
        return Err(mlp_shape(
            "y is a weight; the kernels read the weights while they write y".into(),
        ));
    }
    if let Some((g, eps)) = norm {
        if g.len() as u64 != k64 {
            return Err(mlp_shape(format!(
                "the norm weight holds {} elements; k = {k}",
                g.len()
            )));
        }
        if !(eps.is_finite() && eps > 0.0) {
            return Err(Error::Ops(OpsError::Param {
                op: OP_MLP,
                param: "eps",
                detail: format!("{eps} is not a finite number > 0"),
            }));
        }
        if same(g, y) {
            return Err(mlp_shape(
                "y is the norm weight; the kernels read it while they write y".into(),
            ));
        }
    }
    if plan.fused {
        if m > MLP_FUSED_MAX_M {
            return Err(mlp_shape(format!(
                "m = {m} rows, over the fused kernel's limit of {MLP_FUSED_MAX_M}"
            )));
        }
        let info = gpu.info();
        if !info.float32_atomic_add {
            return Err(Error::Unsupported {
                what: "the fused MLP kernel (f32 atomic adds on storage buffers: \
                       VK_EXT_shader_atomic_float's shaderBufferFloat32AtomicAdd)",
                adapter: info.name.clone(),
            });
        }
        if !info.subgroup_arithmetic {
            return Err(Error::Unsupported {
                what: "the fused MLP kernel (subgroup arithmetic)",
                adapter: info.name.clone(),
            });
        }
        if wgu.dtype() != DType::F32 && !info.storage_buffer16 {
            return Err(Error::Unsupported {
                what: "16-bit MLP weights (storageBuffer16BitAccess)",
                adapter: info.name.clone(),
            });
        }
        let name = mlp_kernel_name(wgu.dtype(), plan.rows_per_pass, norm.is_some());
        return name.map(Some).ok_or_else(|| {
            mlp_shape(format!(
                "no fused kernel for {plan:?} with {} weights: rows per pass 1, 2 or 4",
                wgu.dtype()
            ))
        });
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::super::lengths::Want;
    use super::*;

    #[test]
    fn the_default_is_two_layers_and_the_fused_plan_holds_the_rows() {
        for m in 1..=64 {
            assert!(!choose_mlp(m).fused);
        }
        let rows: Vec<u32> = (1..=6).map(|m| MlpPlan::fused(m).rows_per_pass).collect();
        assert_eq!(rows, [1, 2, 4, 4, 4, 4]);
    }

    #[test]
    fn lengths_are_checked_against_the_shape_the_index_and_the_range() {
        let check = |want: &[Want<'_>], range| match check_lengths(want, range, mlp_shape) {
            Err(Error::OpShape { detail, .. }) => Some(detail),
            Err(e) => panic!("{e:?}"),
            Ok(()) => None,
        };
        let ok: Want<'_> = ("x", "m·k", 8, 8, 4);
        assert_eq!(check(&[ok], 32), None);
        let short = check(&[ok, ("y", "m·k", 7, 8, 4)], 32).unwrap();
        assert_eq!(short, "y holds 7 elements; m·k = 8");
        let over = check(&[("w_down", "k·inter", 16, 16, 2)], 31).unwrap();
        assert_eq!(
            over,
            "w_down is 32 bytes, over maxStorageBufferRange (31 bytes)"
        );
        let huge = 1u64 << 32;
        let index = check(&[("w_gate_up", "2·inter·k", 0, huge, 2)], u64::MAX).unwrap();
        assert!(
            index.contains("over the kernels' 32-bit index limit"),
            "{index}"
        );
    }

    #[test]
    fn the_launch_covers_every_feature_and_row_chunk() {
        // Qwen3-4B at one row, bf16: 9,728 features in groups of 32.
        let (wgs, p) = mlp_launch((1, 2560, 9728), DType::Bf16, Some(1e-6), MlpPlan::fused(1));
        assert_eq!(wgs, 304);
        // M, K, N = 2·I, mode, vec, chunks of 8, units (2 features) per
        // workgroup, row chunks, pairs, ksub, eps, dvec, workgroups.
        assert_eq!(p[..10], [1, 2560, 19456, 2, 1, 320, 16, 1, 1, 1]);
        assert_eq!(p[10], 1e-6f32.to_bits());
        assert_eq!(p[11..], [1, 304]);
        // Odd K and I: element loads of x and of the down weight; a short
        // last group; 3 rows in two passes of 2.
        let plan = MlpPlan {
            fused: true,
            rows_per_pass: 2,
        };
        let (wgs, p) = mlp_launch((3, 37, 100), DType::F16, None, plan);
        assert_eq!(wgs, 4 * 2);
        assert_eq!(p[..10], [3, 37, 200, 2, 0, 37, 16, 2, 1, 1]);
        assert_eq!(p[10..], [0, 8]);
        // f32 weights load 4 to 16 bytes: I = 100 takes the vector path.
        let (_, p) = mlp_launch((1, 64, 100), DType::F32, None, MlpPlan::fused(1));
        assert_eq!(p[4..6], [1, 16]);
        assert_eq!(p[10..], [1, 4]);
    }
}
