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
//! **Fused** ([`MlpPlan::fused`]), for up to [`MLP_FUSED_MAX_M`] rows,
//! the block is one dispatch (`shaders/mlp.glsl`): the same two layers'
//! work as tasks of one grid, with no launch boundary between them. Each
//! workgroup takes a ticket as it starts; the first tickets are gate|up
//! tasks (a few units of features each, into a scratch `[m, I]` buffer),
//! the rest down tasks (a few rows of the down weight, several subgroups
//! sharing each row's intermediate features, as the skinny kernel's
//! narrower workgroups do). A down subgroup waits, on a counter, for the
//! gate|up tasks that write the features of its part, so the down
//! projection starts while the last gate|up tasks still stream. The
//! workgroup that finishes last sets the counters back to 0 for the next
//! run. Each output is summed in a fixed order: the result is the same
//! from run to run. A waiting workgroup only ever waits on tasks that
//! running workgroups hold (tickets go in start order, gate|up first), so
//! the grid may be any size against the adapter's.
//!
//! Like any command, the block may overlap commands recorded before it:
//! put a [`Batch::barrier`] between a command that writes its inputs and
//! the block.

use super::*;

const OP_MLP: &str = "ops::swiglu_mlp";

/// The most rows of x the fused block takes (in passes of up to 4 rows,
/// the weights read once per pass).
pub const MLP_FUSED_MAX_M: u32 = 4;

/// The most [`MlpPlan::units_per_subgroup`].
pub const MLP_MAX_UNITS_PER_SUBGROUP: u32 = 16;

/// The launch's rule for [`MlpPlan::units_per_subgroup`] 0: the fewest
/// units per subgroup that keep the gate|up tasks within this many per
/// compute unit, so that they all run in one wave beside the first down
/// tasks (128 compute units where the adapter does not say).
pub const MLP_GATE_UP_TASKS_PER_UNIT: u32 = 2;

/// A down task's subgroups each read at least this many chunks (16 bytes
/// or elements) of the intermediate features per lane.
const DOWN_MIN_CHUNKS_PER_LANE: u32 = 4;

/// How a [`swiglu_mlp`] block runs: [`choose_mlp`]'s decision, or one
/// given to [`swiglu_mlp_with_plan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MlpPlan {
    /// One fused dispatch (`true`; at most [`MLP_FUSED_MAX_M`] rows) or
    /// two linear layers.
    pub fused: bool,
    /// Fused: rows of x per pass (1, 2 or 4).
    pub rows_per_pass: u32,
    /// Fused: gate|up units (2 features each) every subgroup of a gate|up
    /// task computes in turn, 1 to [`MLP_MAX_UNITS_PER_SUBGROUP`]; 0: the
    /// launch's rule ([`MLP_GATE_UP_TASKS_PER_UNIT`]).
    pub units_per_subgroup: u32,
}

impl MlpPlan {
    /// The fused plan for `m` rows: the smallest of 1, 2, 4 rows per pass
    /// that holds `m` (4 past that).
    pub fn fused(m: u32) -> MlpPlan {
        MlpPlan {
            fused: true,
            rows_per_pass: [1, 2, 4].into_iter().find(|&r| r >= m).unwrap_or(4),
            units_per_subgroup: 0,
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

/// How a down task splits its rows: `(units, subgroups per unit)` for
/// `units` units (4 rows of the down weight each), `chunks` chunks per
/// row, `subgroups` per workgroup of `lanes` lanes, and `want` workgroups
/// wanted. The widest split (fewest subgroups per unit) whose tasks number
/// at least `want`, while each lane still reads at least
/// [`DOWN_MIN_CHUNKS_PER_LANE`] chunks of its part; the narrowest allowed
/// where none reaches it. Pure.
fn down_split(units: u32, chunks: u32, subgroups: u32, lanes: u32, want: u64) -> (u32, u32) {
    let subgroups = subgroups.max(1);
    let mut best = (subgroups, 1);
    let mut ksub = 1;
    while ksub <= subgroups && subgroups % ksub == 0 {
        let upw = subgroups / ksub;
        if ksub > 1 && chunks / ksub < lanes.max(1) * DOWN_MIN_CHUNKS_PER_LANE {
            break;
        }
        best = (upw, ksub);
        if u64::from(units.div_ceil(upw)) >= want {
            break;
        }
        ksub *= 2;
    }
    best
}

/// The fused kernel's launch for a checked block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct MlpLaunch {
    /// Workgroups: row chunks × (gate|up tasks + down tasks).
    pub wgs: u32,
    /// The words `shaders/mlp.glsl` reads.
    pub words: Vec<u32>,
    /// Counters the kernel keeps: tickets, finished workgroups, and one
    /// per part of each row chunk.
    pub counters: u32,
}

/// The fused kernel's grid and push constants for a checked block. Pure.
pub(super) fn mlp_launch(
    (m, k, inter): (u32, u32, u32),
    dtype: DType,
    eps: Option<f32>,
    plan: MlpPlan,
    caps: &MatmulCaps,
) -> MlpLaunch {
    let lanes = caps.subgroup_size.clamp(1, THREADS);
    let subgroups = (THREADS / lanes).max(1);
    let mchunks = m.div_ceil(plan.rows_per_pass);
    let vec = k % per_load(dtype) == 0;
    let chunks = if vec { k / per_load(dtype) } else { k };
    let dvec = inter % per_load(dtype) == 0;
    let dchunks = if dvec { inter / per_load(dtype) } else { inter };
    // Gate|up: `per` units (2 features each) per subgroup.
    let gunits = inter.div_ceil(ROWS_PER_UNIT / 2);
    let per = match plan.units_per_subgroup {
        0 => {
            let cus = if caps.compute_units > 0 {
                caps.compute_units
            } else {
                128
            };
            let most = u64::from(cus) * u64::from(MLP_GATE_UP_TASKS_PER_UNIT);
            let per = u64::from(gunits).div_ceil(most * u64::from(subgroups));
            per.clamp(1, u64::from(MLP_MAX_UNITS_PER_SUBGROUP)) as u32
        }
        n => n,
    };
    let gtasks = gunits.div_ceil(subgroups * per);
    let dunits = k.div_ceil(ROWS_PER_UNIT);
    let (dupw, dksub) = down_split(dunits, dchunks, subgroups, lanes, wanted_groups(caps));
    let dtasks = dunits.div_ceil(dupw);
    let mut p = vec![
        m,
        k,
        2 * inter,
        2, // mode: unused by the fused kernel
        u32::from(vec),
        chunks,
        subgroups * per,
        mchunks,
        1, // pairs: gate|up units
        1, // ksub
    ];
    p.extend(eps.map(f32::to_bits));
    p.extend([u32::from(dvec), gtasks, dtasks, dupw, dksub]);
    MlpLaunch {
        wgs: mchunks * (gtasks + dtasks),
        words: p,
        counters: 2 + mchunks * dksub,
    }
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
    let caps = MatmulCaps::of(gpu.info());
    let l = mlp_launch((m, k, inter), wgu.dtype(), norm.map(|n| n.1), plan, &caps);
    let (wgs, limit) = (l.wgs, gpu.info().max_workgroup_count[0]);
    if wgs > limit {
        return Err(mlp_shape(format!(
            "needs {wgs} workgroups, over maxComputeWorkGroupCount[0] ({limit})"
        )));
    }
    // h, written whole by the gate|up tasks before any down task reads
    // it (no fill); the counters, zero now and zero again after every run
    // (the last workgroup clears them).
    let len = u64::from(m) * u64::from(inter);
    let h = Buffer::<f32>::create(&gpu, len, crate::memory::Memory::DeviceLocal, OP_MLP)?;
    let counters = gpu.alloc::<u32>(l.counters as usize)?;
    let (gb, db) = (wgu.bind(), wd.bind());
    let g: &[&dyn crate::buffer::GpuBuf] = match &norm {
        Some((g, _)) => &[*g, *g],
        None => &[],
    };
    let binds = [
        &[x as &dyn crate::buffer::GpuBuf, x, gb, gb, x, y][..],
        g,
        &[db, db, &h, &h, &counters],
    ]
    .concat();
    batch.run_configured(&kernel, &binds, [wgs, 1, 1], Some(&words(&l.words)))?;
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
        if plan.units_per_subgroup > MLP_MAX_UNITS_PER_SUBGROUP {
            return Err(mlp_shape(format!(
                "{} gate|up units per subgroup, over the limit of {MLP_MAX_UNITS_PER_SUBGROUP}",
                plan.units_per_subgroup
            )));
        }
        let info = gpu.info();
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
    fn down_tasks_split_rows_until_they_fill_the_adapter() {
        // Qwen3-4B's down projection (2,560 rows: 640 units; I = 9,728 in
        // 1,216 chunks of 8 bf16) on 132 compute units with subgroups of
        // 32: 2 units of 4 parts, 320 tasks, as ops::linear narrows it.
        assert_eq!(down_split(640, 1216, 8, 32, 264), (2, 4));
        // Parts stop at 4 chunks per lane: 256 chunks over 32 lanes allow
        // 2 parts, however few the tasks.
        assert_eq!(down_split(16, 256, 8, 32, 264), (4, 2));
        assert_eq!(down_split(16, 100, 8, 32, 264), (8, 1));
        // Enough tasks at once: no split.
        assert_eq!(down_split(4000, 1216, 8, 32, 264), (8, 1));
        // Subgroups of 8 lanes (32 per workgroup).
        assert_eq!(down_split(16, 256, 32, 8, 128), (4, 8));
    }

    #[test]
    fn the_launch_covers_every_feature_row_and_row_chunk() {
        let caps = MatmulCaps::new(32, 49152, 1024, 132);
        // Qwen3-4B at one row, bf16: 4,864 gate|up units of 2 features;
        // at most 2 tasks per compute unit (264) need 3 units per subgroup
        // (24 per task: 203 tasks); then 320 down tasks.
        let l = mlp_launch(
            (1, 2560, 9728),
            DType::Bf16,
            Some(1e-6),
            MlpPlan::fused(1),
            &caps,
        );
        assert_eq!(l.wgs, 203 + 320);
        // M, K, N = 2·I, mode, vec, chunks of 8, units per gate|up task,
        // row chunks, pairs, ksub, eps, then dvec, gate|up tasks, down
        // tasks, units per down task, subgroups per down unit.
        assert_eq!(l.words[..10], [1, 2560, 19456, 2, 1, 320, 24, 1, 1, 1]);
        assert_eq!(l.words[10], 1e-6f32.to_bits());
        assert_eq!(l.words[11..], [1, 203, 320, 2, 4]);
        assert_eq!(l.counters, 2 + 4);
        // One unit per subgroup, as asked: 608 tasks of 8.
        let one = MlpPlan {
            units_per_subgroup: 1,
            ..MlpPlan::fused(1)
        };
        let l = mlp_launch((1, 2560, 9728), DType::Bf16, None, one, &caps);
        assert_eq!((l.wgs, l.words[6], l.words[11]), (608 + 320, 8, 608));
        // Odd K and I: element loads; a short last task; 3 rows in two
        // passes of 2, each with its own tasks and part counters.
        let plan = MlpPlan {
            rows_per_pass: 2,
            units_per_subgroup: 1,
            ..MlpPlan::fused(2)
        };
        let l = mlp_launch((3, 37, 100), DType::F16, None, plan, &caps);
        // 50 units over 8 per task: 7 gate|up tasks; 10 down units, no
        // split (100 chunks hold no 2 parts of 4 per lane): 2 tasks.
        assert_eq!(l.words[..10], [3, 37, 200, 2, 0, 37, 8, 2, 1, 1]);
        assert_eq!(l.words[10..], [0, 7, 2, 8, 1]);
        assert_eq!(l.wgs, 2 * (7 + 2));
        assert_eq!(l.counters, 2 + 2);
        // f32 weights load 4 to 16 bytes: I = 100 takes the vector path.
        let l = mlp_launch((1, 64, 100), DType::F32, None, MlpPlan::fused(1), &caps);
        assert_eq!(l.words[4..6], [1, 16]);
        assert_eq!(l.words[10], 1);
        // The rule without a unit count: 128 compute units assumed.
        let unknown = MatmulCaps::new(32, 49152, 1024, 0);
        let l = mlp_launch(
            (1, 2560, 9728),
            DType::Bf16,
            None,
            MlpPlan::fused(1),
            &unknown,
        );
        assert_eq!((l.words[6], l.words[11]), (8 * 3, 203));
    }
}
