//! Matrix multiplication C = A·B, row-major, any M, K, N, recorded into an
//! ordinary [`Batch`].
//!
//! ```
//! # fn main() -> vkcompute::Result<()> {
//! use vkcompute::{ops, Device};
//! let gpu = Device::new()?;
//! let a = gpu.upload(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?; // 2×3
//! let b = gpu.upload(&[1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0])?; // 3×2
//! let c = gpu.alloc::<f32>(4)?;                            // 2×2
//! let mut batch = gpu.batch()?;
//! ops::matmul(&mut batch, &a, &b, &c, 2, 3, 2)?;
//! batch.submit()?;
//! assert_eq!(c.download()?, [4.0, 5.0, 10.0, 11.0]);
//! # Ok(())
//! # }
//! ```
//!
//! Which kernel runs is [`choose_matmul`]'s pure decision from the shape
//! and the adapter ([`MatmulCaps`]): for f32 the SGEMM
//! ([`MatmulKernel::Sgemm`], `shaders/matmul_f32_big.comp`: 128×128 or
//! 64×64 blocks, 16-byte loads where K and N are multiples of 4, split-K
//! with a deterministic second pass where the blocks are fewer than the
//! compute units; see [`choose_sgemm`]), the older register-blocked kernel
//! ([`MatmulKernel::Tiled`], any [`TileConfig`]) on adapters the SGEMM
//! does not fit and by name, GEMV kernels for M = 1 or N = 1, and for f16 inputs a cooperative-matrix
//! kernel (tensor cores) where the adapter has the shape: the
//! workgroup-scope one (`VK_NV_cooperative_matrix2`, any shape) where it
//! applies, else the subgroup-scope one; else the f16 inputs are widened
//! to f32 first.
//!
//! bf16 B (weights as models ship them, K×N or N×K) with f16 or f32 A:
//! [`matmul_bf16w`], batched like [`matmul_f16_batched`], on the tensor
//! cores where the adapter has `VK_NV_cooperative_matrix2` with block loads.
//!
//! Like any command in a batch, a matmul may overlap the commands recorded
//! before it: put a [`Batch::barrier`] between a command that writes A or B
//! and the matmul that reads them.
//!
//! Errors: a zero dimension, a buffer whose length is not the shape's, C
//! being the same buffer as A or B, a
//! matrix over 2³² − 1 elements (the kernels index in 32 bits) or over
//! `maxStorageBufferRange`, or a grid over `maxComputeWorkGroupCount` is an
//! [`Error::MatmulShape`] naming the limit.

use crate::{Batch, Buffer, Device, Error, GpuBuf, Kernel, Result};

mod batched;
mod bf16w;
mod linear_f16;
mod plan;
mod sgemm;
mod skinny;

pub use batched::{batched_tile, matmul_f16_batched, matmul_f16_batched_with_tile, BatchedShape};
pub use bf16w::{
    bf16w_kernel_name, bf16w_tile, converts_first, matmul_bf16w, matmul_bf16w_with_tile,
    MatmulInput, BF16W_CONVERT_MIN_ROWS,
};

pub use linear_f16::{linear_f16, residual_kernel};

// The op batch's fused epilogues (built from GLSL at run time) use it.
#[cfg(feature = "glsl")]
pub(crate) use plan::choose_tile;
pub use plan::{
    choose_matmul, subgroup_coop_fits, Cm2Tile, CoopTile, MatmulCaps, MatmulDtype, MatmulKernel,
    MatmulPlan, TileConfig, VECMAT4_COLS, VECMAT4_MAX_SPLITS,
};
pub use sgemm::{
    choose_sgemm, sgemm_split, sgemm_vec4_applies, SgemmSplit, SgemmTile, SGEMM_MAX_SPLITS,
    SGEMM_MIN_SLICE, SGEMM_THREADS,
};
pub use skinny::{
    choose_linear, linear, linear_normed, linear_normed_with_plan, linear_with_plan,
    stream_applies, stream_chosen, stream_rows, stream_span, stream_splits, tensor_applies,
    tensor_splits, tensor_tile, window_applies, window_splits, Epilogue, LinearPlan, TensorTile,
    Weights, LINEAR_MAX_M, LINEAR_MAX_SPLITS, LINEAR_TENSOR_STREAM, LINEAR_TENSOR_TILES,
    LINEAR_TENSOR_WINDOW, NORM_FUSED_MAX_ROWS, NORM_FUSED_WIDE_MAX_BYTES, STREAM_MAX_ROWS,
    STREAM_MIN_ROWS, WINDOW_MIN_ROWS,
};
pub use skinny::{choose_mlp, swiglu_mlp, swiglu_mlp_with_plan, MlpPlan, MLP_FUSED_MAX_M};

/// Columns per workgroup of the M = 1 kernel (`vecmat_f32.comp`'s COLS).
const VECMAT_COLS: u32 = 16;
/// Invocations per workgroup of the GEMV and widening kernels.
const GEMV_THREADS: u32 = 256;

/// Records C = A·B: A is `m`×`k`, B is `k`×`n`, C is `m`×`n`, all f32,
/// row-major, each buffer exactly that long.
pub fn matmul(
    batch: &mut Batch,
    a: &Buffer<f32>,
    b: &Buffer<f32>,
    c: &Buffer<f32>,
    m: u32,
    k: u32,
    n: u32,
) -> Result<()> {
    let caps = MatmulCaps::of(a.device().info());
    let plan = choose_matmul(m, k, n, MatmulDtype::F32, &caps);
    matmul_with_plan(batch, a, b, c, m, k, n, plan)
}

/// Records C = A·B for f32 inputs with an explicit plan (for tuning and
/// comparing kernels); [`matmul`] uses [`choose_matmul`]'s. The plan must
/// name an f32 kernel ([`MatmulKernel::Sgemm`] with a tile that
/// [`SgemmTile::fits`] the adapter and 1 to [`SGEMM_MAX_SPLITS`] slices,
/// [`MatmulKernel::Tiled`] with a
/// [`TileConfig::is_valid`] tile that fits the adapter, `MatVec` (or
/// `MatVec4` when K is a multiple of 4) for N = 1, `VecMat` for M = 1 (or
/// `VecMat4` with N a multiple of 4 and 1 to [`VECMAT4_MAX_SPLITS`]
/// layers)) without widening.
#[allow(clippy::too_many_arguments)]
pub fn matmul_with_plan(
    batch: &mut Batch,
    a: &Buffer<f32>,
    b: &Buffer<f32>,
    c: &Buffer<f32>,
    m: u32,
    k: u32,
    n: u32,
    plan: MatmulPlan,
) -> Result<()> {
    let gpu = a.device();
    check_shape(&gpu, m, k, n, [a.len(), b.len(), c.len()], [4, 4, 4])?;
    check_distinct(m, k, n, same(a, c) || same(b, c))?;
    if plan.widen_f16
        || matches!(
            plan.kernel,
            MatmulKernel::CoopMatF16(_)
                | MatmulKernel::CoopMatKhrF16(_)
                | MatmulKernel::CoopMat2F16(_)
        )
    {
        return Err(shape_error(
            m,
            k,
            n,
            format!("plan {plan:?} is for f16 inputs; these are f32"),
        ));
    }
    record_f32(batch, &gpu, a, b, c, m, k, n, plan.kernel)
}

/// [`matmul`] on views of exactly M·K, K·N and M·N elements (an op
/// batch's operands: slices of imported or pooled buffers); C may not
/// overlap A or B.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul_views(
    batch: &mut Batch,
    a: &crate::BufferSlice<'_, f32>,
    b: &crate::BufferSlice<'_, f32>,
    c: &crate::BufferSlice<'_, f32>,
    m: u32,
    k: u32,
    n: u32,
) -> Result<()> {
    use crate::GpuBuf;
    let gpu = a.buffer().device();
    check_shape(&gpu, m, k, n, [a.len(), b.len(), c.len()], [4, 4, 4])?;
    let overlaps = |x: &crate::BufferSlice<'_, f32>| {
        let (xv, cv) = (x.view(), c.view());
        std::sync::Arc::ptr_eq(xv.inner, cv.inner)
            && xv.offset < cv.offset + cv.size
            && cv.offset < xv.offset + xv.size
    };
    check_distinct(m, k, n, overlaps(a) || overlaps(b))?;
    // The default kernel without split-K: one dispatch per matmul, each
    // entry one FMA chain in K order, as in the op batch's fused kernel, so
    // fused and unfused op batches give the same sums.
    let plan = choose_matmul(m, k, n, MatmulDtype::F32, &MatmulCaps::of(gpu.info()));
    let kernel = match plan.kernel {
        MatmulKernel::Sgemm { tile, .. } => MatmulKernel::Sgemm { tile, splits: 1 },
        MatmulKernel::VecMat4 { .. } => MatmulKernel::VecMat4 { splits: 1 },
        other => other,
    };
    record_f32(batch, &gpu, a, b, c, m, k, n, kernel)
}

/// Records C = A·B for f16 inputs (IEEE binary16 bits in `u16`, e.g. from
/// `half::f16::to_bits`) with f32 accumulation and an f32 C. Runs on
/// cooperative matrices where [`choose_matmul`] finds them usable; otherwise
/// widens A and B into f32 scratch buffers (allocated per call) and runs the
/// f32 kernels. Needs `storageBuffer16BitAccess` (else
/// [`Error::Unsupported`]).
pub fn matmul_f16(
    batch: &mut Batch,
    a: &Buffer<u16>,
    b: &Buffer<u16>,
    c: &Buffer<f32>,
    m: u32,
    k: u32,
    n: u32,
) -> Result<()> {
    // The shape is checked once, by `matmul_f16_with_plan`.
    let plan = choose_matmul(
        m,
        k,
        n,
        MatmulDtype::F16,
        &MatmulCaps::of(a.device().info()),
    );
    matmul_f16_with_plan(batch, a, b, c, m, k, n, plan)
}

/// Records C = A·B for f16 inputs with an explicit plan (for tuning);
/// [`matmul_f16`] uses [`choose_matmul`]'s. A [`MatmulKernel::CoopMatF16`]
/// plan needs what [`choose_matmul`] checks for it (a usable shape, K and N
/// multiples of 8) and a valid tile that fits the adapter (a
/// [`MatmulKernel::CoopMatKhrF16`] plan the same, with the shape in the KHR
/// list and a tile of [`CoopTile::khr_kernel`]); a
/// [`MatmulKernel::CoopMat2F16`] plan needs a tile that
/// [`Cm2Tile::fits`] the adapter (any shape); any other plan must widen.
#[allow(clippy::too_many_arguments)]
pub fn matmul_f16_with_plan(
    batch: &mut Batch,
    a: &Buffer<u16>,
    b: &Buffer<u16>,
    c: &Buffer<f32>,
    m: u32,
    k: u32,
    n: u32,
    plan: MatmulPlan,
) -> Result<()> {
    let gpu = a.device();
    check_shape(&gpu, m, k, n, [a.len(), b.len(), c.len()], [2, 2, 4])?;
    check_distinct(m, k, n, same(a, c) || same(b, c))?;
    if let MatmulKernel::CoopMat2F16(tile) = plan.kernel {
        let caps = MatmulCaps::of(gpu.info());
        let name = tile.kernel_name().filter(|_| tile.fits(&caps));
        let Some(name) = name else {
            return Err(shape_error(
                m,
                k,
                n,
                format!(
                    "workgroup-scope cooperative-matrix tile {tile:?} does not apply: it needs \
                     VK_NV_cooperative_matrix2 with workgroup scope, flexible dimensions and \
                     tensor addressing, a 256-invocation f16 shape whose granularity \
                     ({:?}) divides the tile, sides up to {} and one of the compiled tiles \
                     {:?}",
                    caps.coopmat2_granularity,
                    caps.coopmat2_max_dimension,
                    Cm2Tile::ALL
                ),
            ));
        };
        let kernel = crate::builtins::get(&gpu.inner, name, &[(0, tile.group)])?;
        let grid = [n.div_ceil(tile.bn), m.div_ceil(tile.bm), 1];
        check_grid(&gpu, m, k, n, grid)?;
        batch.run_configured(&kernel, &[a, b, c], grid, Some(&push3(m, k, n)))?;
        return Ok(());
    }
    if let MatmulKernel::CoopMatF16(tile) | MatmulKernel::CoopMatKhrF16(tile) = plan.kernel {
        let caps = MatmulCaps::of(gpu.info());
        let khr = matches!(plan.kernel, MatmulKernel::CoopMatKhrF16(_));
        let listed = if khr {
            caps.coopmat_khr_f16 && tile.khr_kernel().is_some()
        } else {
            caps.coopmat_f16
        };
        let fits = plan::subgroup_coop_fits(m, k, n, &caps);
        if fits && !listed {
            // A shape the kernel takes on an adapter lacking what it needs.
            let (features, name) = (&gpu.inner.shader_features, &gpu.info().name);
            crate::requirements::check(crate::Capability::CooperativeMatrix, features, name)?;
        }
        let usable = listed && fits;
        if !usable || !tile.is_valid() || tile.shared_bytes() > caps.max_shared_memory {
            return Err(shape_error(
                m,
                k,
                n,
                format!(
                    "cooperative-matrix tile {tile:?} does not apply: it needs a usable \
                     16×16×16 f16 shape ({}), a 32-lane subgroup, K and N multiples of 8, \
                     M and N ≥ 16, and at most {} bytes of shared memory{}",
                    if khr {
                        "VK_KHR_cooperative_matrix"
                    } else {
                        "VK_NV_cooperative_matrix"
                    },
                    caps.max_shared_memory,
                    if khr {
                        ", and one of the compiled KHR tiles (DEFAULT, WIDE, TALL)"
                    } else {
                        ""
                    }
                ),
            ));
        }
        let kernel = match tile.khr_kernel().filter(|_| khr) {
            Some(name) => crate::builtins::get(&gpu.inner, name, &[])?,
            None => matmul_kernel(&gpu, Variant::CoopMatF16(tile))?,
        };
        let grid = [n.div_ceil(tile.bn()), m.div_ceil(tile.bm()), 1];
        check_grid(&gpu, m, k, n, grid)?;
        let pc = push3(m, k, n);
        batch.run_configured(&kernel, &[a, b, c], grid, Some(&pc))?;
        return Ok(());
    }
    if !plan.widen_f16 {
        return Err(shape_error(
            m,
            k,
            n,
            format!("plan {plan:?} is for f32 inputs; these are f16"),
        ));
    }
    if !gpu.info().storage_buffer16 {
        return Err(Error::Unsupported {
            what: "f16 matmul inputs (storageBuffer16BitAccess)",
            adapter: gpu.info().name.clone(),
        });
    }
    let widen = matmul_kernel(&gpu, Variant::WidenF16)?;
    let a32 = gpu.alloc::<f32>(a.len())?;
    let b32 = gpu.alloc::<f32>(b.len())?;
    for (src, dst) in [(a, &a32), (b, &b32)] {
        let len = src.len() as u32;
        batch.run_with_push_constants(&widen, &[src, dst], len, &len.to_le_bytes())?;
    }
    batch.barrier();
    // The scratch buffers stay alive until the batch's work completes
    // (the batch holds them; a dropped buffer is freed after its last use).
    record_f32(batch, &gpu, &a32, &b32, c, m, k, n, plan.kernel)
}

#[allow(clippy::too_many_arguments)]
fn record_f32(
    batch: &mut Batch,
    gpu: &Device,
    a: &dyn crate::GpuBuf,
    b: &dyn crate::GpuBuf,
    c: &dyn crate::GpuBuf,
    m: u32,
    k: u32,
    n: u32,
    kernel: MatmulKernel,
) -> Result<()> {
    let info = gpu.info();
    match kernel {
        MatmulKernel::Sgemm { tile, splits } => {
            record_sgemm(batch, gpu, [a, b, c], (m, k, n), tile, splits)?;
        }
        MatmulKernel::Tiled(t) => {
            let caps = MatmulCaps::of(info);
            if !t.is_valid()
                || t.threads() > caps.max_workgroup_invocations
                || t.shared_bytes() > caps.max_shared_memory
            {
                return Err(shape_error(
                    m,
                    k,
                    n,
                    format!(
                        "tile {t:?} breaks the kernel's layout rules or the adapter's limits \
                         ({} invocations, {} bytes of shared memory)",
                        caps.max_workgroup_invocations, caps.max_shared_memory
                    ),
                ));
            }
            // The 16-byte kernel only where the shape keeps its vec4s
            // aligned and whole; else the scalar kernel with the same tile.
            let vec4 = t.vec4_applies(k, n);
            let t = TileConfig {
                vec4,
                compact_warps: vec4 && t.compact_warps,
                frag_prefetch: vec4 && t.frag_prefetch,
                ..t
            };
            let kernel = matmul_kernel(gpu, Variant::Tiled(t))?;
            let grid = [n.div_ceil(t.bn), m.div_ceil(t.bm), 1];
            check_grid(gpu, m, k, n, grid)?;
            batch.run_configured(&kernel, &[a, b, c], grid, Some(&push3(m, k, n)))?;
        }
        MatmulKernel::MatVec | MatmulKernel::MatVec4 => {
            if n != 1 {
                return Err(shape_error(m, k, n, "the MatVec kernels need N = 1".into()));
            }
            let variant = if kernel == MatmulKernel::MatVec4 {
                if k % 4 != 0 {
                    return Err(shape_error(
                        m,
                        k,
                        n,
                        "the MatVec4 kernel needs K a multiple of 4".into(),
                    ));
                }
                Variant::MatVec4
            } else {
                Variant::MatVec
            };
            let kernel = matmul_kernel(gpu, variant)?;
            // One subgroup per row; rows are visited grid-stride, so the
            // grid may stop at the limit.
            let rows_per_group = (GEMV_THREADS / info.subgroup_size.max(1)).max(1);
            let groups = m.div_ceil(rows_per_group).min(info.max_workgroup_count[0]);
            let pc = push2(m, k);
            batch.run_configured(&kernel, &[a, b, c], [groups, 1, 1], Some(&pc))?;
        }
        MatmulKernel::VecMat => {
            if m != 1 {
                return Err(shape_error(m, k, n, "the VecMat kernel needs M = 1".into()));
            }
            let kernel = matmul_kernel(gpu, Variant::VecMat)?;
            let grid = [n.div_ceil(VECMAT_COLS), 1, 1];
            check_grid(gpu, m, k, n, grid)?;
            batch.run_configured(&kernel, &[a, b, c], grid, Some(&push2(k, n)))?;
        }
        MatmulKernel::VecMat4 { splits } => {
            if m != 1 || n % 4 != 0 {
                return Err(shape_error(
                    m,
                    k,
                    n,
                    "the VecMat4 kernel needs M = 1 and N a multiple of 4".into(),
                ));
            }
            if !(1..=VECMAT4_MAX_SPLITS).contains(&splits) {
                return Err(shape_error(
                    m,
                    k,
                    n,
                    format!(
                        "the VecMat4 kernel asks for {splits} K slices; 1 to \
                         {VECMAT4_MAX_SPLITS} run"
                    ),
                ));
            }
            let split = sgemm_split(k, splits, 1);
            let grid = [n.div_ceil(VECMAT4_COLS), split.slices, 1];
            check_grid(gpu, m, k, n, grid)?;
            let kernel = crate::builtins::get(&gpu.inner, "vecmat_f32_vec4", &[])?;
            let pc: [u8; 12] = bytemuck::cast([k, n, split.depth]);
            in_slices(batch, gpu, (m, k, n), split.slices, c, |batch, out| {
                batch.run_configured(&kernel, &[a, b, out], grid, Some(&pc))?;
                Ok(())
            })?;
        }
        MatmulKernel::CoopMatF16(_)
        | MatmulKernel::CoopMatKhrF16(_)
        | MatmulKernel::CoopMat2F16(_) => {
            return Err(shape_error(
                m,
                k,
                n,
                "the cooperative-matrix kernels take f16 inputs".into(),
            ))
        }
    }
    Ok(())
}

/// Records the SGEMM with `tile` and `splits` requested K slices: one
/// dispatch into C, or (split-K) [`in_slices`].
fn record_sgemm(
    batch: &mut Batch,
    gpu: &Device,
    [a, b, c]: [&dyn GpuBuf; 3],
    (m, k, n): (u32, u32, u32),
    tile: SgemmTile,
    splits: u32,
) -> Result<()> {
    let info = gpu.info();
    let caps = MatmulCaps::of(info);
    if !tile.fits(&caps) {
        return Err(shape_error(
            m,
            k,
            n,
            format!(
                "SGEMM tile {tile:?} is not one of the compiled tiles {:?} or does not fit the \
                 adapter ({SGEMM_THREADS} invocations and {} bytes of shared memory needed; it \
                 allows {} and {})",
                SgemmTile::ALL,
                tile.shared_bytes(),
                caps.max_workgroup_invocations,
                caps.max_shared_memory
            ),
        ));
    }
    if !(1..=SGEMM_MAX_SPLITS).contains(&splits) {
        return Err(shape_error(
            m,
            k,
            n,
            format!("SGEMM split-K asks for {splits} K slices; 1 to {SGEMM_MAX_SPLITS} run"),
        ));
    }
    let vec4 = sgemm_vec4_applies(k, n);
    let name = tile.kernel_name(vec4).ok_or_else(|| {
        shape_error(
            m,
            k,
            n,
            format!("SGEMM tile {tile:?} has no compiled kernel"),
        )
    })?;
    let split = sgemm_split(k, splits, tile.bk);
    let grid = [n.div_ceil(tile.bn), m.div_ceil(tile.bm), split.slices];
    check_grid(gpu, m, k, n, grid)?;
    let kernel = crate::builtins::get(&gpu.inner, name, &[])?;
    let pc: [u8; 16] = bytemuck::cast([m, k, n, split.depth]);
    in_slices(batch, gpu, (m, k, n), split.slices, c, |batch, out| {
        batch.run_configured(&kernel, &[a, b, out], grid, Some(&pc))?;
        Ok(())
    })
}

/// Records `run` writing C (one slice), or (split-K) writing `slices`
/// partial products of C into a scratch buffer, then after a barrier the
/// pass that adds them in slice order into C
/// (`shaders/linear_reduce.comp`, mode 0).
fn in_slices(
    batch: &mut Batch,
    gpu: &Device,
    (m, k, n): (u32, u32, u32),
    slices: u32,
    c: &dyn GpuBuf,
    run: impl FnOnce(&mut Batch, &dyn GpuBuf) -> Result<()>,
) -> Result<()> {
    if slices <= 1 {
        return run(batch, c);
    }
    let info = gpu.info();
    let parts = u64::from(slices) * u64::from(m) * u64::from(n);
    if parts > u64::from(u32::MAX) || parts * 4 > info.max_storage_buffer_range {
        return Err(shape_error(
            m,
            k,
            n,
            format!(
                "{slices} K slices need {parts} partial sums, over the kernels' 32-bit index or \
                 maxStorageBufferRange ({} bytes); ask for fewer slices",
                info.max_storage_buffer_range
            ),
        ));
    }
    // The batch holds the scratch buffer until its work completes.
    let part = gpu.alloc::<f32>(parts as usize)?;
    run(batch, &part as &dyn GpuBuf)?;
    batch.barrier();
    let reduce = crate::builtins::get(&gpu.inner, "linear_reduce", &[])?;
    let groups =
        super::grid::elementwise_groups(u64::from(m) * u64::from(n), info.max_workgroup_count[0]);
    // Mode 0: c = Σ_s part[s]; its second binding (a residual) is unread.
    let pc: [u8; 16] = bytemuck::cast([m, n, 0, slices]);
    batch.run_configured(&reduce, &[&part, &part, c], [groups, 1, 1], Some(&pc))?;
    Ok(())
}

fn shape_error(m: u32, k: u32, n: u32, detail: String) -> Error {
    Error::MatmulShape { m, k, n, detail }
}

/// Checks dimensions and buffer lengths (`lens` of A, B, C in elements of
/// `sizes` bytes) against the shape and the adapter's limits.
fn check_shape(
    gpu: &Device,
    m: u32,
    k: u32,
    n: u32,
    lens: [usize; 3],
    sizes: [u64; 3],
) -> Result<()> {
    if m == 0 || k == 0 || n == 0 {
        return Err(shape_error(
            m,
            k,
            n,
            "every dimension must be at least 1".into(),
        ));
    }
    let range = gpu.info().max_storage_buffer_range;
    let want = [
        ("A", "M·K", u64::from(m) * u64::from(k)),
        ("B", "K·N", u64::from(k) * u64::from(n)),
        ("C", "M·N", u64::from(m) * u64::from(n)),
    ];
    for (((name, product, elems), len), size) in want.into_iter().zip(lens).zip(sizes) {
        if elems > u64::from(u32::MAX) {
            return Err(shape_error(
                m,
                k,
                n,
                format!(
                    "{name} would hold {product} = {elems} elements, over the kernels' \
                     32-bit index limit of {}",
                    u32::MAX
                ),
            ));
        }
        if len as u64 != elems {
            return Err(shape_error(
                m,
                k,
                n,
                format!("{name} holds {len} elements; {product} = {elems}"),
            ));
        }
        if elems * size > range {
            return Err(shape_error(
                m,
                k,
                n,
                format!(
                    "{name} is {} bytes, over maxStorageBufferRange ({range} bytes)",
                    elems * size
                ),
            ));
        }
    }
    Ok(())
}

/// Whether two buffers share their memory.
fn same<T: bytemuck::Pod, U: bytemuck::Pod>(x: &Buffer<T>, y: &Buffer<U>) -> bool {
    std::ptr::addr_eq(
        std::sync::Arc::as_ptr(&x.inner),
        std::sync::Arc::as_ptr(&y.inner),
    )
}

/// C may not be A or B: the kernels read A and B while writing C.
fn check_distinct(m: u32, k: u32, n: u32, aliased: bool) -> Result<()> {
    if aliased {
        return Err(shape_error(
            m,
            k,
            n,
            "C is the same buffer as A or B; the kernels read A and B while they write C".into(),
        ));
    }
    Ok(())
}

fn check_grid(gpu: &Device, m: u32, k: u32, n: u32, grid: [u32; 3]) -> Result<()> {
    let limit = gpu.info().max_workgroup_count;
    if grid.iter().zip(limit).any(|(g, l)| *g > l) {
        return Err(shape_error(
            m,
            k,
            n,
            format!("needs {grid:?} workgroups, over maxComputeWorkGroupCount {limit:?}"),
        ));
    }
    Ok(())
}

fn push3(x: u32, y: u32, z: u32) -> [u8; 12] {
    bytemuck::cast([x, y, z])
}

fn push2(x: u32, y: u32) -> [u8; 8] {
    bytemuck::cast([x, y])
}

/// A built-in matmul kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Variant {
    Tiled(TileConfig),
    MatVec,
    MatVec4,
    VecMat,
    CoopMatF16(CoopTile),
    WidenF16,
}

/// The one place matmul kernels come from: the build-time registry of
/// embedded SPIR-V ([`super::registry`]), so matmul works with
/// `default-features = false` and builds each (kernel, tile) pipeline once
/// per device.
fn matmul_kernel(gpu: &Device, variant: Variant) -> Result<Kernel> {
    // The built-in tiles come compiled with their shape fixed (their loops
    // unrolled in the SPIR-V); other tiles specialize the general kernel.
    let fixed = match variant {
        Variant::Tiled(t) => t.fixed_kernel(),
        Variant::CoopMatF16(t) => t.fixed_kernel(),
        _ => None,
    };
    if let Some(name) = fixed {
        return crate::builtins::get(&gpu.inner, name, &[]);
    }
    let (name, spec): (&'static str, Vec<(u32, u32)>) = match variant {
        Variant::Tiled(t) => {
            let mut spec = vec![
                (0, t.threads()),
                (1, t.bm),
                (2, t.bn),
                (3, t.bk),
                (4, t.tm),
                (5, t.tn),
            ];
            if t.vec4 {
                spec.push((6, u32::from(t.compact_warps)));
                spec.push((7, u32::from(t.frag_prefetch)));
                ("matmul_f32_vec4", spec)
            } else {
                ("matmul_f32", spec)
            }
        }
        Variant::MatVec => ("matvec_f32", Vec::new()),
        Variant::MatVec4 => ("matvec_f32_vec4", Vec::new()),
        Variant::VecMat => ("vecmat_f32", Vec::new()),
        Variant::CoopMatF16(t) => (
            "matmul_f16_coopmat",
            vec![(0, t.wm), (1, t.wn), (2, t.warps_n), (3, t.bk)],
        ),
        Variant::WidenF16 => ("convert_f16_f32", Vec::new()),
    };
    crate::builtins::get(&gpu.inner, name, &spec)
}
