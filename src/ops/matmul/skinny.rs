//! Skinny linear layers: `y = x·Wᵀ` for a few rows of x (M from 1 to
//! [`LINEAR_MAX_M`]: decode of several sequences, small prefills) with W
//! stored as Hugging Face stores `nn.Linear` weights, `[out, in]` row-major,
//! in f32, [`F16`] or [`Bf16`], used as stored (no transposed copy), and
//! the layer's epilogue fused ([`Epilogue`]).
//!
//! ```
//! # fn main() -> vkcompute::Result<()> {
//! use vkcompute::{ops, Device};
//! use vkcompute::ops::{Bf16, Epilogue};
//! let gpu = Device::new()?;
//! let x = gpu.upload(&[1.0f32, 2.0])?;                          // 1×2
//! let w: Vec<Bf16> = [1.0f32, 0.0, 1.0, 1.0, 0.5, -1.0].map(Bf16::from_f32).to_vec();
//! let w = gpu.upload(&w)?;                                      // 3×2, [out, in]
//! let y = gpu.alloc::<f32>(3)?;                                 // 1×3
//! let mut batch = gpu.batch()?;
//! ops::linear(&mut batch, &x, &w, &y, 1, 2, 3, Epilogue::None)?;
//! batch.submit()?;
//! assert_eq!(y.download()?, [1.0, 3.0, -1.5]);
//! # Ok(())
//! # }
//! ```
//!
//! The kernel (`shaders/linear.glsl`) streams W once per chunk of up to 16
//! rows of x at memory bandwidth: each workgroup owns a slice of W's rows
//! (outputs), each subgroup reads 4 of them with 16-byte loads spread over
//! its lanes along K, multiplies them with the chunk's rows of x (read
//! through the cache: every subgroup reads the same x) and finishes each
//! sum with a subgroup reduction. With 16-bit weights at 4 rows or at 1
//! row, on adapters whose subgroups have 32 lanes, the `_sg32` kernels
//! (`shaders/linear_loops.glsl`) read four (1 row; two under narrower
//! workgroups) or one (4 rows) 16-byte chunks per lane and step and finish
//! the sums by halving exchanges between lanes; at 1 row with the norm
//! prologue only a layer of one to two workgroups per compute unit takes
//! one, its workgroups not narrowed (`skinny/sg32.rs`). When that gives
//! fewer workgroups than twice the compute units, up to 2 rows (4 with the
//! `_sg32` kernels) take narrower workgroups first (fewer units each,
//! several subgroups sharing a unit's K and adding their parts in shared
//! memory); where that cannot reach the count, K is split over workgroups
//! (split-K): each slice writes its partial sums and a second pass adds
//! them in slice order and applies the epilogue.
//!
//! Past 16 rows that kernel is bound by its re-reads of x, not by memory:
//! there a register-tiled kernel (`shaders/linear_tiled.glsl`) takes over,
//! each workgroup computing a 32 × 64 or 64 × 64 tile of the product (all
//! rows of x by 64 rows of W, or 32 gate and the matching 32 up rows for
//! [`Epilogue::SiluMul`]) from 16-deep slices of x and W staged in shared
//! memory, with split-K when its tiles are too few to fill the GPU.
//! [`choose_linear`] is those decisions, pure; [`linear_with_plan`] takes
//! an explicit [`LinearPlan`].
//!
//! With 16-bit weights from 5 to 64 rows, on an adapter with the Khronos
//! cooperative matrices, the tensor-core streaming kernel takes the layer
//! (`skinny/tc_stream.rs`, [`LINEAR_TENSOR_STREAM`]); where it splits K
//! for an in-place residual add on an adapter with f32 atomic adds, the
//! sum over K lands in the atomics' order, so the result may differ in
//! its last bits from run to run.
//!
//! With 16-bit weights past 16 rows, on an adapter with
//! `VK_NV_cooperative_matrix2` and block loads, the tensor-core kernel
//! takes the layer instead, for any number of rows, its epilogue fused
//! (`skinny/cm2.rs`, [`LINEAR_TENSOR_TILES`]; x is rounded to f16 there).
//!
//! [`super::matmul`] (B stored `[K, N]`) keeps its own kernels for every M:
//! this path reads W as `[N, K]`, the layout of model weights. For M ≤ 64
//! its tiled kernel also reads B once (one row of 64- or 128-row blocks),
//! but without split-K.
//!
//! Like any command in a batch, a linear layer may overlap the commands
//! recorded before it: put a [`Batch::barrier`] between a command that
//! writes x, W or the residual and the layer that reads them.
//!
//! Needs subgroup arithmetic, and 16-bit storage
//! (`storageBuffer16BitAccess`) for 16-bit weights ([`Error::Unsupported`]
//! otherwise). Shapes that do not fit are an [`Error::OpShape`] naming the
//! limit; nothing is recorded then.

use crate::batch::Batch;
use crate::buffer::Buffer;
use crate::device::Device;
use crate::error::{Error, OpsError, Result};

use super::super::dtype::DType;
use super::super::words;
use super::same;
use super::MatmulCaps;

/// The most rows of x one [`linear`] takes on the skinny and tiled kernels
/// (the tensor-core plan, [`LINEAR_TENSOR_TILES`], takes any number).
pub const LINEAR_MAX_M: u32 = 64;
/// The most K slices a [`LinearPlan`] may ask for.
pub const LINEAR_MAX_SPLITS: u32 = 64;
/// Rows of W a subgroup reads together (`R` in `shaders/linear.glsl`).
const ROWS_PER_UNIT: u32 = 4;
/// Invocations per workgroup of the linear kernels.
const THREADS: u32 = 256;
/// Each lane reads at least this many 16-byte chunks per K slice.
const MIN_CHUNKS_PER_LANE: u32 = 4;
/// [`LinearPlan::rows_per_pass`] of the register-tiled kernel: all rows
/// of x (up to 64) in one pass.
const LINEAR_TILED_ROWS: u32 = 64;
/// Columns (rows of W) of one tile of the tiled kernel.
const TILE_N: u32 = 64;
/// K depth of the tiled kernel's shared-memory slices (`BK`).
const TILE_K: u32 = 16;
/// The tiled kernel's K slices are at least this deep when split.
const MIN_TILED_SLICE: u32 = 256;
/// Shared memory the tiled kernel with `rows`-row tiles declares: two
/// 16-deep slices each of x and W, rows padded by 4 floats.
const fn tiled_shared_bytes(rows: u32) -> u32 {
    2 * TILE_K * ((rows + 4) + (TILE_N + 4)) * 4
}

const OP: &str = "ops::linear";

/// What a [`linear`] layer does with `x·Wᵀ` before it stores it.
#[derive(Debug, Clone, Copy)]
pub enum Epilogue<'a> {
    /// `y = x·Wᵀ` (`y` is `[m, n]`).
    None,
    /// `y = x·Wᵀ + r` for `r` of `y`'s shape; `r` may be `y` itself (an
    /// in-place residual add; on the tensor-core streaming plan with K
    /// split, its last bits may then differ from run to run: see the
    /// module).
    Residual(&'a Buffer<f32>),
    /// W is a merged `[2·I, k]` gate|up weight (gate rows first, `n` = 2·I):
    /// `y = silu(x·W_gateᵀ) * (x·W_upᵀ)`, `y` is `[m, I]`.
    SiluMul,
}

impl Epilogue<'_> {
    /// The kernels' `mode` (`shaders/linear.glsl`).
    fn mode(&self) -> u32 {
        match self {
            Epilogue::None => 0,
            Epilogue::Residual(_) => 1,
            Epilogue::SiluMul => 2,
        }
    }
}

/// How a [`linear`] layer runs: [`choose_linear`]'s decision, or one given
/// to [`linear_with_plan`] (for tests and tuning).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LinearPlan {
    /// Rows of x each pass holds (1, 2, 4, 8 or 16), W read once per
    /// chunk of this many rows; or 32 or 64: the register-tiled kernel
    /// (`shaders/linear_tiled.glsl`) with tiles of that many rows, all
    /// rows in one pass (32 takes at most 32 rows); or
    /// [`LINEAR_TENSOR_TILES`]: the tensor-core kernel (16-bit weights,
    /// coopmat2 adapters), any number of rows, with `splits` K layers; or
    /// [`LINEAR_TENSOR_STREAM`] or [`LINEAR_TENSOR_WINDOW`]: the
    /// tensor-core streaming kernel (16-bit weights, up to 64 rows,
    /// Khronos cooperative matrices), x held over a span or streamed
    /// through a window.
    pub rows_per_pass: u32,
    /// K slices (1 to [`LINEAR_MAX_SPLITS`]); above 1, each slice writes
    /// partial sums to a scratch buffer and a second pass adds them.
    pub splits: u32,
}

impl LinearPlan {
    /// Whether the kernels have this plan.
    pub fn is_valid(&self) -> bool {
        ([1, 2, 4, 8, 16, 32, LINEAR_TILED_ROWS].contains(&self.rows_per_pass)
            || self.rounds_x_to_f16())
            && (1..=LINEAR_MAX_SPLITS).contains(&self.splits)
    }

    /// Whether the plan runs a tensor-core kernel, which rounds x to f16
    /// before its products ([`LINEAR_TENSOR_TILES`],
    /// [`LINEAR_TENSOR_STREAM`], [`LINEAR_TENSOR_WINDOW`]); the other
    /// plans keep x in f32.
    pub fn rounds_x_to_f16(&self) -> bool {
        self.rows_per_pass == LINEAR_TENSOR_TILES || tc_stream::is_stream_plan(self.rows_per_pass)
    }
}

/// Picks the plan for `y[m×·] = x[m×k]·Wᵀ` with W `[n, k]` of `dtype`
/// (`silu`: a merged gate|up weight, [`Epilogue::SiluMul`]):
///
/// - 5 to 64 rows with f16 or bf16 weights where the adapter has the
///   Khronos cooperative matrices and the layer's K and outputs are whole
///   steps and pieces ([`tc_stream::stream_chosen`]): the tensor-core
///   streaming kernel, [`LINEAR_TENSOR_STREAM`] ([`LINEAR_TENSOR_WINDOW`]
///   from [`WINDOW_MIN_ROWS`] rows), with [`tc_stream::stream_splits`]' (or
///   [`tc_stream::window_splits`]') K layers (x rounded to f16).
/// - Past 16 rows with f16 or bf16 weights where the adapter has the
///   tensor-core kernel ([`cm2::tensor_applies`]): [`LINEAR_TENSOR_TILES`]
///   with [`cm2::tensor_splits`]' K layers.
/// - Past 16 rows, where the adapter has the tiled kernel's shared memory
///   (13 KiB for 32-row tiles, 17 KiB for 64), the register-tiled kernel
///   with the smaller of its 32- and 64-row tiles that holds `m`, with
///   split-K when its tiles number fewer than four times the compute units
///   (256 when the adapter does not say): enough slices to reach that,
///   then as many more as keep the workgroups per compute unit (rounded
///   up) where they are, each at least 256 deep, at most
///   [`LINEAR_MAX_SPLITS`].
/// - Otherwise rows per pass: the smallest of 1, 2, 4, 8, 16 that holds
///   `m`, else 16 (W is then read once per 16 rows, the passes of one
///   slice of W next to each other so the later ones read it from L2).
/// - Up to 2 rows per pass, when the workgroups number fewer than twice
///   the compute units (128 when the adapter does not say): narrower
///   workgroups, halving the units (4 rows of W each) a workgroup holds
///   while the freed subgroups share each unit's K (each lane still reading
///   at least 4 chunks of 16 bytes), until the workgroups reach that count;
///   the parts are added in the workgroup, so this costs no second pass
///   and no barrier. Qwen3-4B's o_proj and down (2,560 outputs: 80 full
///   workgroups) run as 320 workgroups of 2 units on 132 compute units.
/// - Otherwise split-K when the workgroups number fewer than that: enough
///   slices to reach it, while each lane still reads at least 4 chunks of
///   16 bytes per slice, at most [`LINEAR_MAX_SPLITS`].
pub fn choose_linear(
    m: u32,
    k: u32,
    n: u32,
    dtype: DType,
    silu: bool,
    caps: &MatmulCaps,
) -> LinearPlan {
    if tc_stream::stream_chosen(m, k, n, dtype, silu, caps) {
        return tc_stream::plan(m, k, n, silu, caps);
    }
    if cm2::tensor_applies(m, dtype, caps) {
        return cm2::plan(m, k, n, silu, caps);
    }
    let tile_rows = if m <= 32 { 32 } else { LINEAR_TILED_ROWS };
    if m > 16 && caps.max_shared_memory >= tiled_shared_bytes(tile_rows) {
        let (tiles, _) = tiled_launch(k, n, silu, 1);
        let want = if caps.compute_units > 0 {
            4 * caps.compute_units
        } else {
            256
        };
        let most = (k / MIN_TILED_SLICE).clamp(1, LINEAR_MAX_SPLITS);
        let splits = if tiles >= want {
            1
        } else {
            fill_rounds(tiles, want.div_ceil(tiles.max(1)).min(most), most, caps)
        };
        return LinearPlan {
            rows_per_pass: tile_rows,
            splits,
        };
    }
    let rows_per_pass = [1, 2, 4, 8, 16].into_iter().find(|&r| r >= m).unwrap_or(16);
    let single = LinearPlan {
        rows_per_pass,
        splits: 1,
    };
    // Narrower workgroups first (no second pass); `l` is the plain launch
    // when they do not reach the wanted count.
    let l = launch_narrowed(m, k, n, dtype, silu, caps, single);
    let groups = u64::from(l.groups) * u64::from(l.mchunks);
    let want = wanted_groups(caps);
    if groups >= want {
        return single;
    }
    let chunks = if l.vec { k / per_load(dtype) } else { k };
    let per_slice = caps.subgroup_size.max(1) * MIN_CHUNKS_PER_LANE;
    let most = (chunks / per_slice).clamp(1, LINEAR_MAX_SPLITS);
    let splits = (want.div_ceil(groups.max(1)) as u32).min(most);
    LinearPlan {
        rows_per_pass,
        splits,
    }
}

/// Records a linear layer: `x` is `[m, k]` f32 (1 ≤ m ≤ [`LINEAR_MAX_M`],
/// any m where [`choose_linear`] picks [`LINEAR_TENSOR_TILES`]), `w` is
/// `[n, k]` row-major (`nn.Linear`'s `[out, in]`) in f32,
/// [`F16`](crate::ops::F16) or [`Bf16`](crate::ops::Bf16), and `y` is
/// `[m, n]` f32 — `[m, n/2]` with [`Epilogue::SiluMul`], where `n` is
/// even. Each buffer holds exactly its shape. `y` may not be `x` or `w`.
/// f32 accumulation (on the tensor cores, of x rounded to f16).
#[allow(clippy::too_many_arguments)]
pub fn linear<'w>(
    batch: &mut Batch,
    x: &Buffer<f32>,
    w: impl Into<Weights<'w>>,
    y: &Buffer<f32>,
    m: u32,
    k: u32,
    n: u32,
    epilogue: Epilogue<'_>,
) -> Result<()> {
    let w = w.into();
    let plan = default_plan(x, &w, (m, k, n), &epilogue);
    linear_with_plan(batch, x, w, y, m, k, n, epilogue, plan)
}

/// [`choose_linear`]'s plan for this layer on `x`'s adapter.
fn default_plan(
    x: &Buffer<f32>,
    w: &Weights<'_>,
    (m, k, n): (u32, u32, u32),
    e: &Epilogue<'_>,
) -> LinearPlan {
    let caps = MatmulCaps::of(x.device().info());
    choose_linear(m, k, n, w.dtype(), matches!(e, Epilogue::SiluMul), &caps)
}

/// [`linear`] with an explicit plan ([`LinearPlan::is_valid`]), e.g. to
/// force split-K on or off.
#[allow(clippy::too_many_arguments)]
pub fn linear_with_plan<'w>(
    batch: &mut Batch,
    x: &Buffer<f32>,
    w: impl Into<Weights<'w>>,
    y: &Buffer<f32>,
    m: u32,
    k: u32,
    n: u32,
    epilogue: Epilogue<'_>,
    plan: LinearPlan,
) -> Result<()> {
    let w = w.into();
    check(&x.device(), x, &w, y, m, k, n, &epilogue, plan)?;
    record(batch, x, None, w, y, (m, k, n), epilogue, plan)
}

/// Records a checked layer (with `norm`, its prologue; the plan then
/// takes at most 16 rows per pass).
#[allow(clippy::too_many_arguments)]
fn record(
    batch: &mut Batch,
    x: &Buffer<f32>,
    norm: Option<Norm<'_>>,
    w: Weights<'_>,
    y: &Buffer<f32>,
    (m, k, n): (u32, u32, u32),
    epilogue: Epilogue<'_>,
    plan: LinearPlan,
) -> Result<()> {
    let gpu = x.device();
    let silu = matches!(epilogue, Epilogue::SiluMul);
    let info = gpu.info();
    let limit = info.max_workgroup_count;
    if plan.rows_per_pass == LINEAR_TENSOR_TILES {
        return cm2::record(batch, x, w, y, (m, k, n), epilogue, plan.splits);
    }
    if tc_stream::is_stream_plan(plan.rows_per_pass) {
        return tc_stream::record(batch, x, w, y, (m, k, n), epilogue, plan);
    }
    if plan.rows_per_pass >= 32 {
        return tiled(batch, x, w, y, (m, k, n), epilogue, plan);
    }
    let caps = MatmulCaps::of(info);
    let (l, one_wave) = layer_launch((m, k, n), w.dtype(), silu, norm.is_some(), &caps, plan);
    let grid = [l.groups * l.mchunks, plan.splits, 1];
    if u64::from(l.groups) * u64::from(l.mchunks) > u64::from(limit[0]) || plan.splits > limit[1] {
        return Err(shape(format!(
            "needs {} × {} workgroups, over maxComputeWorkGroupCount {limit:?}",
            u64::from(l.groups) * u64::from(l.mchunks),
            plan.splits
        )));
    }
    let sg32 = sg32::kernel_applies(
        w.dtype(),
        plan.rows_per_pass,
        norm.is_some(),
        one_wave,
        &caps,
    );
    let name = kernel_name(w.dtype(), plan.rows_per_pass, norm.is_some(), sg32, l.ksub);
    let kernel = crate::builtins::get(&gpu.inner, name, &[])?;
    let push = |mode: u32| {
        let mut p = vec![
            m,
            k,
            n,
            mode,
            u32::from(l.vec),
            l.kchunk,
            l.upw,
            l.mchunks,
            u32::from(silu),
            l.ksub,
        ];
        p.extend(norm.map(|g| g.eps.to_bits()));
        words(&p)
    };
    let res = match epilogue {
        Epilogue::Residual(r) => r,
        _ => y,
    };
    let wb = w.bind();
    let g: &[&dyn crate::buffer::GpuBuf] = match &norm {
        Some(g) => &[g.weight, g.weight],
        None => &[],
    };
    if plan.splits == 1 {
        let pc = push(epilogue.mode());
        let binds = [&[x as &dyn crate::buffer::GpuBuf, x, wb, wb, res, y][..], g].concat();
        batch.run_configured(&kernel, &binds, grid, Some(&pc))?;
        return Ok(());
    }
    // Split-K: partial sums of every row of W, then the reduction pass.
    let part = scratch(&gpu, plan.splits, m, n)?;
    let pc = push(3);
    let binds = [
        &[x as &dyn crate::buffer::GpuBuf, x, wb, wb, x, &part][..],
        g,
    ]
    .concat();
    batch.run_configured(&kernel, &binds, grid, Some(&pc))?;
    reduce(batch, &part, res, y, (m, n), epilogue, plan.splits)
}

/// Records the register-tiled kernel (`shaders/linear_tiled.glsl`) for a
/// checked layer and a plan of rows per pass 32 or 64.
fn tiled(
    batch: &mut Batch,
    x: &Buffer<f32>,
    w: Weights<'_>,
    y: &Buffer<f32>,
    (m, k, n): (u32, u32, u32),
    epilogue: Epilogue<'_>,
    plan: LinearPlan,
) -> Result<()> {
    let gpu = x.device();
    let info = gpu.info();
    let splits = plan.splits;
    if info.max_shared_memory < tiled_shared_bytes(plan.rows_per_pass) {
        return Err(Error::Unsupported {
            what: "the tiled linear kernel's shared memory (13 KiB for 32-row tiles, 17 KiB \
                   for 64; rows per pass 1 to 16 run without it)",
            adapter: info.name.clone(),
        });
    }
    let silu = matches!(epilogue, Epilogue::SiluMul);
    let (tiles, kslice) = tiled_launch(k, n, silu, splits);
    let limit = info.max_workgroup_count;
    if tiles > limit[0] || splits > limit[1] {
        return Err(shape(format!(
            "needs {tiles} × {splits} workgroups, over maxComputeWorkGroupCount {limit:?}"
        )));
    }
    let name = tiled_kernel_name(w.dtype(), plan.rows_per_pass);
    let kernel = crate::builtins::get(&gpu.inner, name, &[])?;
    let vec = k % per_load(w.dtype()) == 0;
    let push = |mode: u32| words(&[m, k, n, mode, u32::from(vec), kslice, u32::from(silu)]);
    let res = match epilogue {
        Epilogue::Residual(r) => r,
        _ => y,
    };
    let wb = w.bind();
    let grid = [tiles, splits, 1];
    if splits == 1 {
        let pc = push(epilogue.mode());
        batch.run_configured(&kernel, &[x, x, wb, wb, res, y], grid, Some(&pc))?;
        return Ok(());
    }
    let part = scratch(&gpu, splits, m, n)?;
    let pc = push(3);
    batch.run_configured(&kernel, &[x, x, wb, wb, x, &part], grid, Some(&pc))?;
    reduce(batch, &part, res, y, (m, n), epilogue, splits)
}

/// The built-in tiled kernel for `dtype` weights and `rows`-row tiles
/// (32, else 64).
fn tiled_kernel_name(dtype: DType, rows: u32) -> &'static str {
    match (dtype, rows == 32) {
        (DType::F16, false) => "linear_f16_tiled",
        (DType::F16, true) => "linear_f16_tiled_m32",
        (DType::Bf16, false) => "linear_bf16_tiled",
        (DType::Bf16, true) => "linear_bf16_tiled_m32",
        (_, false) => "linear_f32_tiled",
        (_, true) => "linear_f32_tiled_m32",
    }
}

/// The built-in kernel for `dtype` weights and `rows` rows per pass (with
/// `norm`, its RMSNorm-prologue variant; with `sg32`, the `_sg32` kernel
/// where there is one: `sg32::kernel_applies`).
fn kernel_name(dtype: DType, rows: u32, norm: bool, sg32: bool, ksub: u32) -> &'static str {
    if sg32 {
        return sg32::kernel_name(dtype, rows, norm, ksub);
    }
    if norm {
        return normed::kernel_name(dtype, rows);
    }
    const F32: [&str; 5] = [
        "linear_f32_m1",
        "linear_f32_m2",
        "linear_f32",
        "linear_f32_m8",
        "linear_f32_m16",
    ];
    const F16: [&str; 5] = [
        "linear_f16_m1",
        "linear_f16_m2",
        "linear_f16",
        "linear_f16_m8",
        "linear_f16_m16",
    ];
    const BF16: [&str; 5] = [
        "linear_bf16_m1",
        "linear_bf16_m2",
        "linear_bf16",
        "linear_bf16_m8",
        "linear_bf16_m16",
    ];
    let i = rows.max(1).trailing_zeros().min(4) as usize;
    match dtype {
        DType::F16 => F16[i],
        DType::Bf16 => BF16[i],
        _ => F32[i],
    }
}

fn shape(detail: String) -> Error {
    Error::OpShape { op: OP, detail }
}

/// Every check before recording: the plan, the shape, the buffers'
/// lengths and aliasing, the adapter's features and limits.
#[allow(clippy::too_many_arguments)]
fn check(
    gpu: &Device,
    x: &Buffer<f32>,
    w: &Weights<'_>,
    y: &Buffer<f32>,
    m: u32,
    k: u32,
    n: u32,
    epilogue: &Epilogue<'_>,
    plan: LinearPlan,
) -> Result<()> {
    if !plan.is_valid() {
        return Err(shape(format!(
            "plan {plan:?}: rows per pass must be 1, 2, 4, 8, 16, 32, {LINEAR_TILED_ROWS}, \
             LINEAR_TENSOR_TILES, LINEAR_TENSOR_STREAM or LINEAR_TENSOR_WINDOW and splits 1 to \
             {LINEAR_MAX_SPLITS}"
        )));
    }
    if m == 0 || k == 0 || n == 0 {
        return Err(shape(format!(
            "m = {m}, k = {k}, n = {n}: every dimension must be at least 1"
        )));
    }
    let tensor = plan.rows_per_pass == LINEAR_TENSOR_TILES;
    if m > LINEAR_MAX_M && !tensor {
        return Err(shape(format!(
            "m = {m} rows of x, over the skinny kernels' limit of {LINEAR_MAX_M}"
        )));
    }
    if plan.rows_per_pass == 32 && m > 32 {
        return Err(shape(format!(
            "m = {m} rows of x, over the 32 that the tiled kernel's 32-row tiles \
             (rows per pass 32) hold"
        )));
    }
    let silu = matches!(epilogue, Epilogue::SiluMul);
    if silu && n % 2 != 0 {
        return Err(shape(format!(
            "SiluMul needs a merged gate|up weight of 2·I rows; n = {n} is odd"
        )));
    }
    let outs = if silu { n / 2 } else { n };
    let range = gpu.info().max_storage_buffer_range;
    let (m64, k64, n64, o64) = (u64::from(m), u64::from(k), u64::from(n), u64::from(outs));
    let wsize = w.dtype().size();
    let mut want = vec![
        ("x", "m·k", x.len(), m64 * k64, 4),
        ("W", "n·k", w.len(), n64 * k64, wsize),
        (
            "y",
            if silu { "m·n/2" } else { "m·n" },
            y.len(),
            m64 * o64,
            4,
        ),
    ];
    if let Epilogue::Residual(r) = epilogue {
        want.push(("the residual", "m·n", r.len(), m64 * o64, 4));
    }
    check_lengths(&want, range, shape)?;
    if same(x, y) || w.aliases(y) {
        return Err(shape(
            "y is the same buffer as x or W; the kernels read them while they write y".into(),
        ));
    }
    if let Epilogue::Residual(r) = epilogue {
        if same(*r, x) {
            return Err(shape(
                "the residual is x; pass a separate buffer (only y may be the residual)".into(),
            ));
        }
    }
    let info = gpu.info();
    if tensor {
        cm2::check_adapter(&MatmulCaps::of(info), w.dtype(), &info.name)?;
    }
    if tc_stream::is_stream_plan(plan.rows_per_pass) {
        let caps = MatmulCaps::of(info);
        tc_stream::check(&caps, (m, k, n), w.dtype(), silu, plan, &info.name)?;
    }
    if !info.subgroup_arithmetic {
        return Err(Error::Unsupported {
            what: "skinny linear layers (subgroup arithmetic)",
            adapter: info.name.clone(),
        });
    }
    if w.dtype() != DType::F32 && !info.storage_buffer16 {
        return Err(Error::Unsupported {
            what: "16-bit linear weights (storageBuffer16BitAccess)",
            adapter: info.name.clone(),
        });
    }
    Ok(())
}

mod launch;
use launch::{
    fill_rounds, launch_narrowed, layer_launch, per_load, tiled_launch, wanted_groups,
    NARROW_MAX_ROWS,
};
mod lengths;
use lengths::check_lengths;
mod weights;
pub use weights::Weights;
mod cm2;
pub use cm2::{tensor_applies, tensor_splits, tensor_tile, TensorTile, LINEAR_TENSOR_TILES};
mod normed;
use normed::Norm;
mod split_k;
use split_k::{layers, reduce, run_layers, run_layers_added, scratch, Layer};
mod tc_stream;
pub use tc_stream::{
    stream_applies, stream_chosen, stream_rows, stream_span, stream_splits, window_applies,
    window_splits, LINEAR_TENSOR_STREAM, LINEAR_TENSOR_WINDOW, STREAM_MAX_ROWS, STREAM_MIN_ROWS,
    WINDOW_MIN_ROWS,
};
mod mlp;
mod sg32;
pub use mlp::{choose_mlp, swiglu_mlp, swiglu_mlp_with_plan, MlpPlan, MLP_FUSED_MAX_M};
pub use normed::{
    linear_normed, linear_normed_with_plan, NORM_FUSED_MAX_ROWS, NORM_FUSED_WIDE_MAX_BYTES,
};
use sg32::narrow_max_rows;

#[cfg(test)]
mod tests;
