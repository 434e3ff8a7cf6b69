//! Wall-time budgets on the device: calibrating the shader clock (whose unit
//! Vulkan does not specify) and the spin-iteration rate against host time,
//! once per device, and turning a budget into ticks or iterations.
//!
//! The calibration kernel runs one invocation spinning `n` iterations of an
//! atomic (the same kind of iteration a waiting worker spends), reading the
//! clock before and after. Two runs, `n` and `4n` (with `n` grown until a
//! run takes a few milliseconds of host time), give the clock's ticks per
//! nanosecond and the nanoseconds per iteration from their differences, so
//! the submit-and-wait overhead cancels.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::source::ClockKind;
use crate::buffer::Buffer;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::kernel::Kernel;

/// One device's calibration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockCalibration {
    /// The clock calibrated (IterationBudget: none).
    pub clock: ClockKind,
    /// Clock ticks per nanosecond (0 without a clock).
    pub ticks_per_ns: f64,
    /// Spin iterations per nanosecond.
    pub iterations_per_ns: f64,
}

impl ClockCalibration {
    /// The budget in clock ticks, as (low, high) words.
    pub(crate) fn budget_ticks(&self, budget: Duration) -> (u32, u32) {
        let ticks = ticks_for(budget, self.ticks_per_ns);
        (ticks as u32, (ticks >> 32) as u32)
    }

    /// The budget in worker-loop iterations (at least 1).
    pub(crate) fn budget_iterations(&self, budget: Duration) -> u32 {
        let it = budget.as_nanos() as f64 * self.iterations_per_ns;
        it.clamp(1.0, f64::from(u32::MAX)) as u32
    }

    /// A clock reading (ticks) as time.
    pub(crate) fn ticks_to_duration(&self, ticks: u64) -> Option<Duration> {
        (self.ticks_per_ns > 0.0)
            .then(|| Duration::from_nanos((ticks as f64 / self.ticks_per_ns) as u64))
    }
}

/// `budget` in ticks at `ticks_per_ns`, at least 1 (pure).
pub(crate) fn ticks_for(budget: Duration, ticks_per_ns: f64) -> u64 {
    let t = budget.as_nanos() as f64 * ticks_per_ns;
    if t >= u64::MAX as f64 {
        u64::MAX
    } else {
        (t as u64).max(1)
    }
}

/// Rates from two runs (iterations, host time, clock ticks) (pure):
/// `None` when the second run was not longer than the first.
pub(crate) fn rates(a: Run, b: Run) -> Option<(f64, f64)> {
    let dt = b.1.checked_sub(a.1)?.as_nanos() as f64;
    if dt <= 0.0 || b.0 <= a.0 {
        return None;
    }
    let ticks = b.2.saturating_sub(a.2) as f64 / dt;
    let iters = (b.0 - a.0) as f64 / dt;
    Some((ticks, iters))
}

/// `n` spin iterations as nested loops of at most 1,024 (lavapipe ends any
/// one loop after 65,535 iterations); w[4] counts the iterations done.
const GLSL: &str = r#"
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer B { uint w[]; };
void main() {
    uvec2 s = now();
    uint n = w[0];
    uint done = 0u;
    for (uint o = 0u; o < n / 1024u; o++) {
        for (uint i = 0u; i < 1024u; i++) {
            if (atomicAdd(w[3], 0u) == 0xdeadbeefu) break;
            done += 1u;
        }
    }
    uvec2 e = now();
    w[1] = e.x - s.x;
    w[2] = e.y - s.y - (e.x < s.x ? 1u : 0u);
    w[4] = done;
}
"#;

fn source(clock: ClockKind) -> String {
    let head = match clock {
        ClockKind::DeviceClock => {
            "#extension GL_EXT_shader_realtime_clock : require\nuvec2 now() { return clockRealtime2x32EXT(); }\n"
        }
        ClockKind::SubgroupClock => {
            "#extension GL_ARB_shader_clock : require\nuvec2 now() { return clock2x32ARB(); }\n"
        }
        ClockKind::IterationBudget => "uvec2 now() { return uvec2(0u); }\n",
    };
    format!("#version 450\n{head}{GLSL}")
}

/// One run of `n` iterations: host time and clock ticks, or `None` when the
/// driver cut the loop short.
fn run_once(
    gpu: &Device,
    k: &Kernel,
    buf: &Buffer<u32>,
    n: u32,
) -> Result<Option<(Duration, u64)>> {
    buf.write(0, &[n, 0, 0, 0, 0])?;
    let t0 = Instant::now();
    let mut b = gpu.batch()?;
    b.run_configured(k, &[buf], [1, 1, 1], None)?;
    b.submit()?;
    let dt = t0.elapsed();
    let w = buf.download()?;
    if w[4] != n / 1024 * 1024 {
        return Ok(None);
    }
    Ok(Some((dt, u64::from(w[1]) | (u64::from(w[2]) << 32))))
}

/// The fastest of three runs (other work on the machine only adds time).
fn best_of_three(
    gpu: &Device,
    k: &Kernel,
    buf: &Buffer<u32>,
    n: u32,
) -> Result<Option<(Duration, u64)>> {
    let mut best: Option<(Duration, u64)> = None;
    for _ in 0..3 {
        match run_once(gpu, k, buf, n)? {
            None => return Ok(None),
            // A clock that stepped back (a CPU cycle counter read on
            // another core, on lavapipe) gives a "negative" reading: skip it.
            Some(r) if r.1 >= 1 << 63 => {}
            Some(r) if best.map_or(true, |b| r.0 < b.0) => best = Some(r),
            Some(_) => {}
        }
    }
    Ok(best)
}

/// Measures `clock` on `gpu` (uncached): `n` grown ×4 from 1,024 until a
/// run spins for 4 ms, or the driver cuts the loop short (lavapipe ends a
/// shader's loops after 65,535 iterations in all); the last two runs give
/// the rates. A series in which the larger run did not take longer (the
/// host was busy during the smaller one: on lavapipe, whose short runs are
/// mostly submission time, that happens under load) is measured again, up
/// to three times in all.
fn measure(gpu: &Device, clock: ClockKind) -> Result<ClockCalibration> {
    let k = super::runner::compile_glsl(gpu, &source(clock), "megakernel-clock")?;
    let buf = gpu.upload(&[0u32; 5])?;
    run_once(gpu, &k, &buf, 1024)?; // warm-up
    let cannot = |detail: String| Error::MegakernelConfig {
        field: "clock calibration",
        detail,
    };
    let mut attempt = 0;
    loop {
        attempt += 1;
        let (runs, n) = series(gpu, &k, &buf)?;
        let [.., a, b] = runs[..] else {
            return Err(cannot(format!(
                "the driver cut a {n}-iteration loop short; too few runs to calibrate"
            )));
        };
        match rates(a, b) {
            Some((ticks_per_ns, iterations_per_ns)) => {
                return Ok(ClockCalibration {
                    clock,
                    ticks_per_ns: if clock == ClockKind::IterationBudget {
                        0.0
                    } else {
                        ticks_per_ns
                    },
                    iterations_per_ns,
                })
            }
            None if attempt < 3 => {}
            None => {
                return Err(cannot(format!(
                    "4× the iterations did not take longer ({:?} then {:?}), three series in a row",
                    a.1, b.1
                )))
            }
        }
    }
}

/// One timed run: iterations, host time, clock ticks.
type Run = (u64, Duration, u64);

/// One series of [`measure`]: (iterations, host time, ticks) per run, and
/// the last `n` tried.
fn series(gpu: &Device, k: &Kernel, buf: &Buffer<u32>) -> Result<(Vec<Run>, u32)> {
    let target = Duration::from_millis(4);
    let mut runs: Vec<Run> = Vec::new();
    let mut n: u32 = 1 << 10;
    while let Some((dt, ticks)) = best_of_three(gpu, k, buf, n)? {
        runs.push((u64::from(n), dt, ticks));
        if (dt >= target && runs.len() >= 2) || n >= (1 << 26) {
            break;
        }
        n *= 4;
    }
    Ok((runs, n))
}

/// The calibration of `clock` on `gpu`, measured once per device.
pub(crate) fn calibration(gpu: &Device, clock: ClockKind) -> Result<ClockCalibration> {
    type Key = (u64, ClockKind);
    static CACHE: std::sync::OnceLock<Mutex<HashMap<Key, ClockCalibration>>> =
        std::sync::OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let key = (gpu.id(), clock);
    if let Some(c) = cache.lock().ok().and_then(|m| m.get(&key).copied()) {
        return Ok(c);
    }
    let c = measure(gpu, clock)?;
    if let Ok(mut m) = cache.lock() {
        m.insert(key, c);
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_cover_the_budget() {
        assert_eq!(ticks_for(Duration::from_millis(5), 1.0), 5_000_000);
        assert_eq!(ticks_for(Duration::from_millis(5), 1.5), 7_500_000);
        assert_eq!(ticks_for(Duration::from_nanos(1), 0.001), 1);
        assert_eq!(ticks_for(Duration::from_secs(3600), 1e12), u64::MAX);
        let c = ClockCalibration {
            clock: ClockKind::DeviceClock,
            ticks_per_ns: 2.0,
            iterations_per_ns: 0.1,
        };
        assert_eq!(c.budget_ticks(Duration::from_secs(3)), (1_705_032_704, 1));
        assert_eq!(c.budget_iterations(Duration::from_millis(5)), 500_000);
        assert_eq!(c.budget_iterations(Duration::from_nanos(1)), 1);
        assert_eq!(c.budget_iterations(Duration::from_secs(3600)), u32::MAX);
        assert_eq!(
            c.ticks_to_duration(2_000),
            Some(Duration::from_nanos(1_000))
        );
    }

    #[test]
    fn rates_from_differences() {
        let ms = Duration::from_millis;
        let r = rates((1000, ms(5), 4_000_000), (4000, ms(11), 16_000_000)).unwrap();
        assert!(
            (r.0 - 2.0).abs() < 1e-9 && (r.1 - 0.0005).abs() < 1e-12,
            "{r:?}"
        );
        assert_eq!(rates((1000, ms(5), 0), (4000, ms(5), 0)), None);
        assert_eq!(rates((1000, ms(5), 0), (4000, ms(4), 0)), None);
        assert_eq!(rates((4000, ms(5), 0), (4000, ms(9), 0)), None);
    }
}
