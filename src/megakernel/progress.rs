//! Forward progress: how many persistent workers an adapter keeps resident
//! at once.
//!
//! Vulkan promises no forward progress between workgroups: a worker that
//! waits for another that has not started (because the GPU runs it only
//! after the waiter ends) waits forever, or, on lavapipe, the dispatch
//! returns at once with wrong results (`notes/persistent-kernels.md`). So
//! every persistent launch stays within a cap, found in this order:
//!
//! 1. **NVIDIA** (VK_NV_shader_sm_builtins): `shaderSMCount ×` workers per
//!    SM, where workers per SM is the smaller of what the SM's warp slots
//!    hold (`shaderWarpsPerSM × 32 / workgroup size`) and what its 64 Ki
//!    register file holds if every invocation used the most registers a
//!    thread may have (255), at least 1. A kernel may use fewer registers
//!    and fit more; this rule never counts on it.
//! 2. **AMD** (VK_AMD_shader_core_properties): one worker per compute unit.
//! 3. **Anything else** (lavapipe, unknown drivers): probed once per device,
//!    workgroup size and barrier flavour, and cached: a step-barrier kernel
//!    runs 64 dependent steps three times at 1, 2, 3, … workers (up to
//!    [`PROBE_MAX_WORKERS`]), each step checking that every worker's value
//!    from the previous step is there; the cap is the largest count for
//!    which it and every smaller count were exact, with no spin budget
//!    spent. Bounded spins make a probe past the cap return, never hang.
//!
//! On lavapipe (Mesa 22.3.6, 2 cores, validation on) this probe measures 1.
//! The cause, found here: llvmpipe ends a shader invocation's loops after
//! 65,535 iterations (counted over all its loops) as if their conditions had
//! failed, silently. A worker spinning on a barrier spends that in
//! milliseconds, so with 2 workers the dispatch ended with steps missing
//! and no barrier reporting failure (at local sizes 1 to 256, either
//! barrier flavour, `LP_NUM_THREADS` 2 or 4). This is also why the notes
//! saw grids past the cap "return at once with wrong results". The template
//! therefore re-checks every wait's condition after its loop and flags a
//! loop cut short ([`MegakernelReport::loop_cut`](super::MegakernelReport));
//! the probe counts such a run as not exact.
//!
//! A probe decides from a few short runs; a longer launch can still be cut
//! (on lavapipe the probe passes 2 workers in some processes, and 1,000-step
//! launches at 2 workers were then cut in most tries). So a step launch that
//! reports an exhausted spin or a cut loop is an error, never a result
//! ([`MegakernelError::LaunchCut`](crate::megakernel::MegakernelError)), and
//! lowers the cached cap below its worker count ([`lower_cap`]): the next
//! launch at that count is refused, and one within the lowered cap runs.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::adapter::AdapterInfo;
use crate::error::{Error, Result};

/// The most workers the probe tries.
pub const PROBE_MAX_WORKERS: u32 = 64;
/// Dependent steps each probe run checks.
pub(crate) const PROBE_STEPS: u32 = 64;
/// Runs per worker count; every one must be exact (a count over the cap
/// can pass by chance).
pub(crate) const PROBE_REPEATS: u32 = 3;

/// Where a residency cap came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResidencySource {
    /// NVIDIA SM count (VK_NV_shader_sm_builtins) × workers per SM.
    SmBuiltins {
        /// shaderSMCount.
        sms: u32,
        /// Workers counted per SM.
        per_sm: u32,
    },
    /// AMD compute units (VK_AMD_shader_core_properties), one worker each.
    ComputeUnits {
        /// Compute units.
        units: u32,
    },
    /// Measured on this device by the barrier probe.
    Probed,
    /// Set by the caller
    /// ([`Megakernel::assume_residency_cap`](crate::megakernel::Megakernel::assume_residency_cap)).
    Assumed,
    /// Lowered after a step launch of `cut_at` workers was cut short (a
    /// spin budget ran out or the driver ended a loop).
    Lowered {
        /// Workers of the launch that was cut.
        cut_at: u32,
    },
}

/// How many persistent workers may run at once, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResidencyCap {
    /// The most workers a persistent launch may have.
    pub workers: u32,
    /// Where the number came from.
    pub source: ResidencySource,
}

impl std::fmt::Display for ResidencyCap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.source {
            ResidencySource::SmBuiltins { sms, per_sm } => {
                write!(f, "{sms} SMs × {per_sm} workers per SM")
            }
            ResidencySource::ComputeUnits { units } => write!(f, "{units} compute units × 1"),
            ResidencySource::Probed => write!(
                f,
                "measured by the step-barrier probe on this device (up to {PROBE_MAX_WORKERS})"
            ),
            ResidencySource::Assumed => write!(f, "set by the caller"),
            ResidencySource::Lowered { cut_at } => {
                write!(
                    f,
                    "lowered after a launch of {cut_at} workers was cut short"
                )
            }
        }
    }
}

const NVIDIA: u32 = 0x10de;
const AMD: u32 = 0x1002;
const REGISTERS_PER_SM: u32 = 65536;
const MAX_REGISTERS_PER_THREAD: u32 = 255;

/// The cap an adapter's properties give, or `None` where only a probe can
/// tell (pure).
pub fn residency_rule(info: &AdapterInfo, workgroup_size: u32) -> Option<ResidencyCap> {
    let ws = workgroup_size.max(1);
    if info.compute_units == 0 {
        return None;
    }
    match info.vendor_id {
        NVIDIA if info.max_threads_per_compute_unit > 0 => {
            let by_threads = info.max_threads_per_compute_unit / ws;
            let by_registers = REGISTERS_PER_SM / MAX_REGISTERS_PER_THREAD.saturating_mul(ws);
            let per_sm = by_threads.min(by_registers).max(1);
            Some(ResidencyCap {
                workers: info.compute_units.saturating_mul(per_sm),
                source: ResidencySource::SmBuiltins {
                    sms: info.compute_units,
                    per_sm,
                },
            })
        }
        AMD => Some(ResidencyCap {
            workers: info.compute_units,
            source: ResidencySource::ComputeUnits {
                units: info.compute_units,
            },
        }),
        _ => None,
    }
}

/// The probe's verdict from its runs at 1, 2, 3, … workers (`true`:
/// exact): the largest count whose run and every smaller one were exact.
pub(crate) fn cap_from_runs(exact: &[bool]) -> Option<u32> {
    let n = exact.iter().take_while(|&&ok| ok).count() as u32;
    (n > 0).then_some(n)
}

/// What a probe run's results must look like to count as exact (pure):
/// no worker read a stale value, no spin ran out of budget, every worker
/// finished, and the final values are all `steps`.
pub(crate) fn probe_run_exact(
    stale_reads: u32,
    spin_exhausted: bool,
    workers_done: u32,
    workers: u32,
    finals: &[f32],
    steps: u32,
) -> bool {
    stale_reads == 0
        && !spin_exhausted
        && workers_done == workers
        && finals.len() == workers as usize
        && finals.iter().all(|&v| v == steps as f32)
}

/// What a cached cap is kept under: (device id, workgroup size, whether
/// the atomics use the Vulkan memory model).
pub(crate) type CapKey = (u64, u32, bool);

fn cache() -> &'static Mutex<HashMap<CapKey, ResidencyCap>> {
    static CACHE: std::sync::OnceLock<Mutex<HashMap<CapKey, ResidencyCap>>> =
        std::sync::OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The cap cached under `key`, if any (a probed, assumed or lowered one).
pub(crate) fn cached(key: CapKey) -> Result<Option<ResidencyCap>> {
    Ok(cache().lock().map_err(|_| poisoned())?.get(&key).copied())
}

/// The cached cap for `key`, computed by `probe` the first time.
pub(crate) fn cached_cap(
    key: CapKey,
    probe: impl FnOnce() -> Result<ResidencyCap>,
) -> Result<ResidencyCap> {
    if let Some(c) = cached(key)? {
        return Ok(c);
    }
    let cap = probe()?;
    cache().lock().map_err(|_| poisoned())?.insert(key, cap);
    Ok(cap)
}

/// Replaces the cap cached under `key`.
pub(crate) fn set_cap(key: CapKey, cap: ResidencyCap) -> Result<()> {
    cache().lock().map_err(|_| poisoned())?.insert(key, cap);
    Ok(())
}

/// The cap after a launch of `cut_at` workers was cut short, from `current`
/// (pure): below `cut_at`, never above `current`, never under 1 (a cut at
/// one worker leaves 1: no fewer workers can run a step launch).
pub(crate) fn lowered(current: ResidencyCap, cut_at: u32) -> ResidencyCap {
    let workers = current.workers.min(cut_at.saturating_sub(1)).max(1);
    if workers == current.workers {
        current
    } else {
        ResidencyCap {
            workers,
            source: ResidencySource::Lowered { cut_at },
        }
    }
}

/// Lowers the cap cached under `key` (or `current`, where none is cached)
/// after a launch of `cut_at` workers was cut short, and returns it.
pub(crate) fn lower_cap(key: CapKey, current: ResidencyCap, cut_at: u32) -> Result<ResidencyCap> {
    let mut map = cache().lock().map_err(|_| poisoned())?;
    let now = lowered(map.get(&key).copied().unwrap_or(current), cut_at);
    map.insert(key, now);
    Ok(now)
}

fn poisoned() -> Error {
    Error::MegakernelConfig {
        field: "residency cache",
        detail: "a thread panicked while probing; recreate the Device".into(),
    }
}

/// The probe's user code: each step, lane 0 of every worker checks that
/// every worker wrote `step` in the previous step (double-buffered by step
/// parity), counting stale reads, then writes `step + 1`.
pub(crate) const PROBE_GLSL: &str = r#"
void run_step(uint step, uint worker, uint workers, uint lane) {
    if (lane == 0u) {
        uint src = (step & 1u) * workers;
        uint dst = ((step + 1u) & 1u) * workers;
        uint stale = 0u;
        for (uint i = 0u; i < workers; i++) {
            if (mk_data[src + i] != float(step)) stale += 1u;
        }
        if (stale != 0u) mk_count_user(stale);
        mk_data[dst + worker] = float(step + 1u);
    }
}
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::AdapterType;

    fn info(vendor: u32, cus: u32, threads: u32) -> AdapterInfo {
        let mut i = crate::adapter::fake(0, "x", AdapterType::Discrete, 1);
        i.vendor_id = vendor;
        i.compute_units = cus;
        i.max_threads_per_compute_unit = threads;
        i
    }

    #[test]
    fn nvidia_rule_counts_sms_and_what_fits() {
        // H200: 132 SMs, 64 warps × 32.
        let h = info(NVIDIA, 132, 2048);
        let c = residency_rule(&h, 256).unwrap();
        assert_eq!(c.workers, 132);
        assert_eq!(
            c.source,
            ResidencySource::SmBuiltins {
                sms: 132,
                per_sm: 1
            }
        );
        assert_eq!(residency_rule(&h, 64).unwrap().workers, 132 * 4);
        assert_eq!(residency_rule(&h, 1024).unwrap().workers, 132);
        assert_eq!(residency_rule(&h, 1).unwrap().workers, 132 * 257);
        assert_eq!(residency_rule(&h, u32::MAX).unwrap().workers, 132);
        assert_eq!(
            residency_rule(&info(NVIDIA, u32::MAX, 2048), 256)
                .unwrap()
                .workers,
            u32::MAX
        );
    }

    #[test]
    fn amd_and_unknown() {
        assert_eq!(
            residency_rule(&info(AMD, 96, 2560), 256).unwrap().workers,
            96
        );
        assert_eq!(residency_rule(&info(0x10005, 0, 0), 64), None);
        assert_eq!(residency_rule(&info(NVIDIA, 0, 0), 64), None);
        assert_eq!(residency_rule(&info(0x8086, 32, 0), 64), None);
    }

    #[test]
    fn cap_is_the_exact_prefix() {
        assert_eq!(cap_from_runs(&[true, true, false]), Some(2));
        assert_eq!(cap_from_runs(&[true, false, true]), Some(1));
        assert_eq!(cap_from_runs(&[false, true]), None);
        assert_eq!(cap_from_runs(&[]), None);
        assert_eq!(cap_from_runs(&[true; 64]), Some(64));
    }

    #[test]
    fn a_cut_lowers_the_cap_below_its_workers() {
        let cap = |workers, source| ResidencyCap { workers, source };
        let probed = cap(2, ResidencySource::Probed);
        // (current, cut at) -> workers after
        for (current, cut_at, want) in [(2, 2, 1), (8, 5, 4), (8, 9, 8), (1, 1, 1), (4, 0, 1)] {
            let got = lowered(cap(current, ResidencySource::Probed), cut_at);
            assert_eq!(got.workers, want, "cap {current}, cut at {cut_at}");
        }
        assert_eq!(
            lowered(probed, 2).source,
            ResidencySource::Lowered { cut_at: 2 }
        );
        // A cut at or over what the cap already refuses changes nothing.
        assert_eq!(lowered(probed, 3), probed);
        assert_eq!(
            lowered(cap(1, ResidencySource::Assumed), 1).source,
            ResidencySource::Assumed
        );
    }

    #[test]
    fn lowering_keeps_to_its_key() {
        let id = u64::MAX - 7; // no device gets this id in a unit test
        let a = (id, 64, false);
        let b = (id, 64, true);
        set_cap(
            a,
            ResidencyCap {
                workers: 2,
                source: ResidencySource::Assumed,
            },
        )
        .unwrap();
        let probed = ResidencyCap {
            workers: 6,
            source: ResidencySource::Probed,
        };
        assert_eq!(lower_cap(a, probed, 2).unwrap().workers, 1);
        assert_eq!(cached(a).unwrap().map(|c| c.workers), Some(1));
        assert_eq!(cached(b).unwrap(), None);
        assert_eq!(lower_cap(b, probed, 4).unwrap().workers, 3);
        assert_eq!(
            cached_cap(b, || panic!("cached: no probe"))
                .unwrap()
                .workers,
            3
        );
    }

    #[test]
    fn probe_run_checks_everything() {
        let ok = [64.0f32, 64.0];
        assert!(probe_run_exact(0, false, 2, 2, &ok, 64));
        assert!(!probe_run_exact(1, false, 2, 2, &ok, 64));
        assert!(!probe_run_exact(0, true, 2, 2, &ok, 64));
        assert!(!probe_run_exact(0, false, 1, 2, &ok, 64));
        assert!(!probe_run_exact(0, false, 2, 2, &[64.0, 63.0], 64));
        assert!(!probe_run_exact(0, false, 2, 2, &ok[..1], 64));
    }
}
