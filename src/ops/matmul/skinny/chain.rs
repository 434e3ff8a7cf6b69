//! A chain of skinny linear layers in one persistent dispatch: up to
//! [`CHAIN_MAX_STAGES`] layers, each reading what the ones before it wrote
//! (a decoder's o projection with its residual, the RMSNorm-ed gate|up
//! projection with SiLU·mul, and the down projection with its residual,
//! for one).
//!
//! One launch per layer pays a launch, a ramp and a drain each time: at
//! one to four rows a projection of a few tens of MB streams its weights
//! at well under the copy's bandwidth. Here the workgroups of one dispatch
//! (no more than the adapter keeps resident at once) meet at a device-wide
//! barrier between layers, and each loads the first weights of its share
//! of the next layer before it waits there, so the next layer's stream is
//! already in flight while the slowest workgroups finish the current one
//! (`shaders/linear_chain.comp`).
//!
//! ```
//! # fn main() -> vkcompute::Result<()> {
//! use vkcompute::{ops, Device};
//! use vkcompute::ops::{ChainStage, Epilogue};
//! let gpu = Device::new()?;
//! let x = gpu.upload(&[1.0f32, 2.0])?;                     // 1×2
//! let w1 = gpu.upload(&[1.0f32, 0.0, 1.0, 1.0])?;          // 2×2, [out, in]
//! let w2 = gpu.upload(&[2.0f32, 1.0])?;                    // 1×2
//! let (h, y) = (gpu.alloc::<f32>(2)?, gpu.alloc::<f32>(1)?);
//! let mut batch = gpu.batch()?;
//! ops::linear_chain(&mut batch, &[
//!     ChainStage::new(&x, &w1, &h, (1, 2, 2), Epilogue::None),   // h = [1, 3]
//!     ChainStage::new(&h, &w2, &y, (1, 2, 1), Epilogue::None),   // y = 2·1 + 3
//! ], None)?;
//! batch.submit()?;
//! assert_eq!(y.download()?, [5.0]);
//! # Ok(())
//! # }
//! ```
//!
//! Where the one dispatch does not apply ([`choose_chain`]: weights of
//! different types, more than [`CHAIN_MAX_ROWS`] rows, K not a whole
//! number of 16-byte loads, or an adapter whose resident workgroup count
//! the library does not know) the stages are recorded as [`linear`] and
//! [`linear_normed`] layers with a barrier between each, with the same
//! results up to the order of the additions.

use super::*;
use crate::adapter::AdapterInfo;
use crate::buffer::GpuBuf;

const OP_CHAIN: &str = "ops::linear_chain";

/// The most layers one [`linear_chain`] takes.
pub const CHAIN_MAX_STAGES: usize = 4;
/// The most rows of x a stage of the one-dispatch chain takes.
pub const CHAIN_MAX_ROWS: u32 = 4;
/// Invocations per workgroup of `shaders/linear_chain.comp`.
const CHAIN_THREADS: u32 = 512;
/// Shared memory the kernel declares beside x: the parts' 2048 floats and
/// the norm's 4 × 64.
const CHAIN_SHARED_REST: u32 = (2048 + 4 * 64) * 4;
/// The most x floats the kernel stages (its default `XV`, 9728 floats:
/// Qwen3-4B's down projection at one row).
const CHAIN_X_DEFAULT: u32 = 9728;
/// Polls of the barrier's generation before a workgroup gives up waiting
/// (about a second on an H100) and counts a fault.
const SPIN_LIMIT: u32 = 1 << 20;

const NVIDIA: u32 = 0x10de;
const AMD: u32 = 0x1002;

/// One layer of a [`linear_chain`]: `y = epilogue(x̂·Wᵀ)` with x̂ = x, or
/// RMSNorm(x) with `norm` (the norm weight, `[k]` f32, and epsilon), as
/// [`linear`] and [`linear_normed`] compute it. Shapes and buffers as
/// there: `x` `[m, k]` f32, `w` `[n, k]`, `y` `[m, n]` f32 (`[m, n/2]`
/// with [`Epilogue::SiluMul`]).
#[derive(Debug, Clone, Copy)]
pub struct ChainStage<'a> {
    /// The layer's input rows.
    pub x: &'a Buffer<f32>,
    /// The RMSNorm prologue's weight and epsilon, if any.
    pub norm: Option<(&'a Buffer<f32>, f32)>,
    /// The weights, `[n, k]` row-major.
    pub w: Weights<'a>,
    /// The output.
    pub y: &'a Buffer<f32>,
    /// Rows of x, inputs (k) and outputs (n, before SiLU·mul halves it).
    pub mkn: (u32, u32, u32),
    /// What is done with the product before it is stored.
    pub epilogue: Epilogue<'a>,
}

impl<'a> ChainStage<'a> {
    /// A stage without the norm prologue.
    pub fn new(
        x: &'a Buffer<f32>,
        w: impl Into<Weights<'a>>,
        y: &'a Buffer<f32>,
        mkn: (u32, u32, u32),
        epilogue: Epilogue<'a>,
    ) -> Self {
        ChainStage {
            x,
            norm: None,
            w: w.into(),
            y,
            mkn,
            epilogue,
        }
    }

    /// The same stage with x RMSNorm-ed first (weight `[k]` f32, `eps`).
    pub fn normed(mut self, weight: &'a Buffer<f32>, eps: f32) -> Self {
        self.norm = Some((weight, eps));
        self
    }
}

/// How a [`linear_chain`] is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainPlan {
    /// One dispatch of this many workgroups, each at most one per compute
    /// unit of the adapter (they wait for each other: every one must be
    /// resident at once).
    Persistent {
        /// Workgroups of the dispatch.
        workgroups: u32,
    },
    /// One [`linear`] (or [`linear_normed`]) dispatch per stage.
    Separate,
}

/// The most elements of x (m · k) a stage of the one-dispatch chain takes
/// on this adapter: the kernel holds a stage's x in shared memory, beside
/// its own 9 KiB. Pure.
pub fn chain_x_capacity(info: &AdapterInfo) -> u32 {
    // The kernel reads at most five vec4 of x per invocation.
    (info.max_shared_memory.saturating_sub(CHAIN_SHARED_REST) / 16 * 4)
        .min(CHAIN_X_DEFAULT)
        .min(5 * 4 * CHAIN_THREADS)
}

/// The workgroups of the one-dispatch chain this adapter is known to keep
/// resident at once: one per compute unit on NVIDIA (a workgroup of 512
/// invocations fits a streaming multiprocessor at any register count the
/// compiler may choose) and AMD adapters that report their units; `None`
/// elsewhere. Pure.
pub fn chain_residency(info: &AdapterInfo) -> Option<u32> {
    let fits = info.max_workgroup_invocations >= CHAIN_THREADS
        && info.max_workgroup_size[0] >= CHAIN_THREADS
        && info.subgroup_size >= 8
        && info.subgroup_arithmetic;
    let known = match info.vendor_id {
        NVIDIA => info.max_threads_per_compute_unit >= CHAIN_THREADS,
        AMD => true,
        _ => false,
    };
    (fits && known && info.compute_units > 0).then_some(info.compute_units)
}

/// The plan [`linear_chain`] takes for `stages` on an adapter described by
/// `info` (its shapes checked or not): [`ChainPlan::Persistent`] with
/// [`chain_residency`]'s workgroups where [`chain_applies`], else
/// [`ChainPlan::Separate`]. Pure.
pub fn choose_chain(stages: &[ChainStage<'_>], info: &AdapterInfo) -> ChainPlan {
    match chain_residency(info) {
        Some(workgroups) if chain_applies(stages, info) => ChainPlan::Persistent { workgroups },
        _ => ChainPlan::Separate,
    }
}

/// Whether the one dispatch can take `stages`: 1 to [`CHAIN_MAX_STAGES`]
/// of them, weights of one type, at most [`CHAIN_MAX_ROWS`] rows, each K
/// a whole number of 16-byte loads (4 f32 or 8 16-bit weights), each x
/// (m · k) at most [`chain_x_capacity`], and an adapter with subgroup
/// arithmetic, subgroups of at least 8 lanes and workgroups of 512
/// invocations. Pure.
pub fn chain_applies(stages: &[ChainStage<'_>], info: &AdapterInfo) -> bool {
    let Some(first) = stages.first() else {
        return false;
    };
    let dtype = first.w.dtype();
    let cap = u64::from(chain_x_capacity(info));
    stages.len() <= CHAIN_MAX_STAGES
        && info.subgroup_arithmetic
        && info.subgroup_size >= 8
        && info.max_workgroup_invocations >= CHAIN_THREADS
        && info.max_workgroup_size[0] >= CHAIN_THREADS
        && stages.iter().all(|s| {
            let (m, k, _) = s.mkn;
            s.w.dtype() == dtype
                && m <= CHAIN_MAX_ROWS
                && k % per_load(dtype) == 0
                && u64::from(m) * u64::from(k) <= cap
        })
}

/// Records `stages` in order, each reading what the earlier ones wrote:
/// one persistent dispatch where [`choose_chain`] says so, else one layer
/// after another (see the module). With `fault` (a buffer and the index of
/// a word in it), a workgroup that waited at a device-wide barrier past
/// its bound (an adapter that did not keep every workgroup resident) adds
/// 1 to that word: the chain's results are then not to be used. Returns
/// the plan it took.
///
/// Each stage is checked as [`linear`] (and [`linear_normed`]) check their
/// arguments; besides, no stage's weights or norm weight may be any
/// stage's `y`. Errors name the stage.
pub fn linear_chain(
    batch: &mut Batch,
    stages: &[ChainStage<'_>],
    fault: Option<(&Buffer<u32>, u32)>,
) -> Result<ChainPlan> {
    let plan = match stages.first() {
        Some(s) => choose_chain(stages, s.x.device().info()),
        None => ChainPlan::Separate,
    };
    linear_chain_with_plan(batch, stages, fault, plan)?;
    Ok(plan)
}

/// [`linear_chain`] with an explicit plan: `Persistent` needs
/// [`chain_applies`] and at least one workgroup. The caller answers for
/// the workgroups being resident at once (more than the adapter keeps
/// waits on the barrier's bound and counts a fault).
pub fn linear_chain_with_plan(
    batch: &mut Batch,
    stages: &[ChainStage<'_>],
    fault: Option<(&Buffer<u32>, u32)>,
    plan: ChainPlan,
) -> Result<()> {
    check_chain(stages, fault)?;
    let gpu = stages[0].x.device();
    match plan {
        ChainPlan::Separate => {
            for s in stages {
                batch.barrier();
                let (m, k, n) = s.mkn;
                match s.norm {
                    Some((g, eps)) => {
                        linear_normed(batch, s.x, g, eps, s.w, s.y, m, k, n, s.epilogue)?
                    }
                    None => linear(batch, s.x, s.w, s.y, m, k, n, s.epilogue)?,
                }
            }
            Ok(())
        }
        ChainPlan::Persistent { workgroups } => {
            let info = gpu.info();
            if !chain_applies(stages, info) {
                return Err(chain_shape(
                    None,
                    format!(
                        "the one-dispatch plan needs 1 to {CHAIN_MAX_STAGES} stages of one weight \
                         type, at most {CHAIN_MAX_ROWS} rows, k a multiple of {}, m·k at most {} \
                         and an adapter with subgroup arithmetic, subgroups of at least 8 lanes \
                         and workgroups of {CHAIN_THREADS} invocations",
                        per_load(stages[0].w.dtype()),
                        chain_x_capacity(info)
                    ),
                ));
            }
            if workgroups == 0 || workgroups > info.max_workgroup_count[0] {
                return Err(chain_shape(
                    None,
                    format!(
                        "{workgroups} workgroups: the plan needs 1 to {}",
                        info.max_workgroup_count[0]
                    ),
                ));
            }
            record_persistent(batch, &gpu, stages, fault, workgroups)
        }
    }
}

/// Records the one dispatch (after [`check_chain`] and [`chain_applies`]).
fn record_persistent(
    batch: &mut Batch,
    gpu: &Device,
    stages: &[ChainStage<'_>],
    fault: Option<(&Buffer<u32>, u32)>,
    workgroups: u32,
) -> Result<()> {
    let dtype = stages[0].w.dtype();
    let one_row = stages.iter().all(|s| s.mkn.0 == 1);
    let name = match (dtype, one_row) {
        (DType::F16, true) => "linear_chain_f16_m1",
        (DType::F16, false) => "linear_chain_f16",
        (DType::Bf16, true) => "linear_chain_bf16_m1",
        (DType::Bf16, false) => "linear_chain",
        (_, true) => "linear_chain_f32_m1",
        (_, false) => "linear_chain_f32",
    };
    let xv = chain_x_capacity(gpu.info()) / 4;
    let kernel = crate::builtins::get(&gpu.inner, name, &[(0, xv)])?;
    // [arrivals, generation, own fault count, unused]: the kernel leaves
    // the arrivals at zero, so a recorded graph replays it.
    let sync = gpu.upload(&[0u32; 4])?;
    let (fault_buf, fault_at): (&dyn GpuBuf, u32) = match fault {
        Some((f, at)) => (f, at),
        None => (&sync, 2),
    };
    let mut binds: Vec<&dyn GpuBuf> = vec![&sync, fault_buf];
    let mut dims = [0u32; 16];
    let mut eps = [0f32; 4];
    for i in 0..CHAIN_MAX_STAGES {
        let Some(s) = stages.get(i) else {
            binds.extend([&sync as &dyn GpuBuf; 5]);
            continue;
        };
        let res: &dyn GpuBuf = match s.epilogue {
            Epilogue::Residual(r) => r,
            _ => s.y,
        };
        let g: &dyn GpuBuf = match s.norm {
            Some((g, _)) => g,
            None => s.x,
        };
        binds.extend([s.x as &dyn GpuBuf, s.w.bind(), res, s.y, g]);
        let (m, k, n) = s.mkn;
        let flags = s.epilogue.mode() | if s.norm.is_some() { 4 } else { 0 };
        dims[4 * i..4 * i + 4].copy_from_slice(&[m, k, n, flags]);
        eps[i] = s.norm.map_or(0.0, |(_, e)| e);
    }
    let mut pc: Vec<u32> = dims.to_vec();
    pc.extend(eps.map(f32::to_bits));
    pc.extend([stages.len() as u32, fault_at, SPIN_LIMIT]);
    // Nothing may run beside the dispatch that could hold the compute
    // units its waiting workgroups need (another chain, say).
    batch.barrier();
    batch.run_configured(&kernel, &binds, [workgroups, 1, 1], Some(&words(&pc)))?;
    Ok(())
}

/// Every stage checked as its layer would be, then the chain's own rules.
fn check_chain(stages: &[ChainStage<'_>], fault: Option<(&Buffer<u32>, u32)>) -> Result<()> {
    if stages.is_empty() || stages.len() > CHAIN_MAX_STAGES {
        return Err(chain_shape(
            None,
            format!(
                "{} stages: a chain takes 1 to {CHAIN_MAX_STAGES}",
                stages.len()
            ),
        ));
    }
    let gpu = stages[0].x.device();
    for (i, s) in stages.iter().enumerate() {
        let (m, k, n) = s.mkn;
        let plan = default_plan(s.x, &s.w, s.mkn, &s.epilogue);
        check(&gpu, s.x, &s.w, s.y, m, k, n, &s.epilogue, plan).map_err(|e| in_stage(i, e))?;
        if let Some((g, e)) = s.norm {
            normed::check_norm(g, e, s.y, k).map_err(|e| in_stage(i, e))?;
        }
    }
    for (i, s) in stages.iter().enumerate() {
        for (j, t) in stages.iter().enumerate() {
            if s.w.aliases(t.y) {
                return Err(chain_shape(
                    Some(i),
                    format!("its weights are stage {j}'s y; weights are read before the stages that precede them finish"),
                ));
            }
            if s.norm.is_some_and(|(g, _)| same(g, t.y)) {
                return Err(chain_shape(
                    Some(i),
                    format!("its norm weight is stage {j}'s y"),
                ));
            }
        }
    }
    if let Some((f, at)) = fault {
        if at as usize >= f.len() {
            return Err(chain_shape(
                None,
                format!("fault word {at}: the buffer holds {} words", f.len()),
            ));
        }
        if stages.iter().any(|s| same(f, s.y)) {
            return Err(chain_shape(None, "the fault buffer is a stage's y".into()));
        }
    }
    Ok(())
}

fn chain_shape(stage: Option<usize>, detail: String) -> Error {
    let detail = match stage {
        Some(i) => format!("stage {i}: {detail}"),
        None => detail,
    };
    Error::OpShape {
        op: OP_CHAIN,
        detail,
    }
}

/// A stage's check error, renamed to the chain and its stage.
fn in_stage(i: usize, e: Error) -> Error {
    match e {
        Error::OpShape { detail, .. } => chain_shape(Some(i), detail),
        Error::Ops(OpsError::Shape { tensor, detail, .. }) => {
            chain_shape(Some(i), format!("{tensor}: {detail}"))
        }
        Error::Ops(OpsError::Param { param, detail, .. }) => {
            chain_shape(Some(i), format!("{param}: {detail}"))
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::{fake, AdapterType};

    fn nvidia(units: u32, threads: u32) -> AdapterInfo {
        let mut a = fake(0, "NVIDIA H100", AdapterType::Discrete, 1);
        a.vendor_id = NVIDIA;
        a.compute_units = units;
        a.max_threads_per_compute_unit = threads;
        a.max_workgroup_invocations = 1024;
        a.max_workgroup_size = [1024, 1024, 64];
        a.subgroup_size = 32;
        a.subgroup_arithmetic = true;
        a
    }

    #[test]
    fn residency_is_one_workgroup_per_known_compute_unit() {
        assert_eq!(chain_residency(&nvidia(132, 2048)), Some(132));
        // A unit too small for one workgroup, or an unknown unit count.
        assert_eq!(chain_residency(&nvidia(132, 256)), None);
        assert_eq!(chain_residency(&nvidia(0, 2048)), None);
        let mut amd = nvidia(104, 0);
        amd.vendor_id = AMD;
        assert_eq!(chain_residency(&amd), Some(104));
        // Other vendors (lavapipe among them): nothing known.
        let mut lvp = nvidia(8, 2048);
        lvp.vendor_id = 0x10005;
        assert_eq!(chain_residency(&lvp), None);
        // Workgroups of 512 invocations, subgroups of at least 4 lanes and
        // subgroup arithmetic are needed.
        let mut small = nvidia(132, 2048);
        small.max_workgroup_invocations = 256;
        assert_eq!(chain_residency(&small), None);
        let mut narrow = nvidia(132, 2048);
        narrow.subgroup_size = 4;
        assert_eq!(chain_residency(&narrow), None);
        let mut plain = nvidia(132, 2048);
        plain.subgroup_arithmetic = false;
        assert_eq!(chain_residency(&plain), None);
    }

    #[test]
    fn x_capacity_is_what_shared_memory_holds_beside_the_rest() {
        let mut a = nvidia(132, 2048);
        a.max_shared_memory = 49152;
        assert_eq!(chain_x_capacity(&a), 9728);
        a.max_shared_memory = 32768;
        assert_eq!(chain_x_capacity(&a), (32768 - CHAIN_SHARED_REST) / 16 * 4);
        a.max_shared_memory = 4096;
        assert_eq!(chain_x_capacity(&a), 0);
        a.max_shared_memory = 1 << 20;
        assert_eq!(chain_x_capacity(&a), CHAIN_X_DEFAULT);
    }

    #[test]
    fn the_shader_and_the_host_agree_on_the_workgroup() {
        let src = include_str!("../../../../shaders/linear_chain.comp");
        assert!(src.contains(&format!("#define WG_SIZE {CHAIN_THREADS}")));
        assert!(src.contains("#define SLOTS 2048u"));
        assert!(src.contains(&format!("const uint XV = {}u;", CHAIN_X_DEFAULT / 4)));
        assert!(src.contains("uvec4 dims[4];"));
        assert_eq!(CHAIN_MAX_STAGES, 4);
    }
}
