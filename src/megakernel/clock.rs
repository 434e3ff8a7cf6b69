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
pub(crate) fn rates(a: (u64, Duration, u64), b: (u64, Duration, u64)) -> Option<(f64, f64)> {
    let dt = b.1.checked_sub(a.1)?.as_nanos() as f64;
    if dt <= 0.0 || b.0 <= a.0 {
        return None;
    }
    let ticks = b.2.saturating_sub(a.2) as f64 / dt;
    let iters = (b.0 - a.0) as f64 / dt;
    Some((ticks, iters))
}

const GLSL: &str = r#"
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer B { uint w[]; };
void main() {
    uvec2 s = now();
    uint n = w[0];
    for (uint i = 0u; i < n; i++) {
        if (atomicAdd(w[3], 0u) == 0xdeadbeefu) break;
    }
    uvec2 e = now();
    w[1] = e.x - s.x;
    w[2] = e.y - s.y - (e.x < s.x ? 1u : 0u);
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

fn run_once(gpu: &Device, k: &Kernel, buf: &Buffer<u32>, n: u32) -> Result<(Duration, u64)> {
    buf.write(0, &[n, 0, 0, 0])?;
    let t0 = Instant::now();
    let mut b = gpu.batch()?;
    b.run_configured(k, &[buf], [1, 1, 1], None)?;
    b.submit()?;
    let dt = t0.elapsed();
    let w = buf.download()?;
    Ok((dt, u64::from(w[1]) | (u64::from(w[2]) << 32)))
}

/// Measures `clock` on `gpu` (uncached).
fn measure(gpu: &Device, clock: ClockKind) -> Result<ClockCalibration> {
    let k = gpu.kernel_glsl(&source(clock))?;
    let buf = gpu.upload(&[0u32; 4])?;
    run_once(gpu, &k, &buf, 1)?; // warm-up
    let target = Duration::from_millis(4);
    let mut n: u32 = 1 << 10;
    let mut first = run_once(gpu, &k, &buf, n)?;
    while first.0 < target && n < (1 << 28) {
        n *= 4;
        first = run_once(gpu, &k, &buf, n)?;
    }
    let second = run_once(gpu, &k, &buf, n * 4)?;
    let (ticks_per_ns, iterations_per_ns) = rates(
        (u64::from(n), first.0, first.1),
        (u64::from(n) * 4, second.0, second.1),
    )
    .ok_or_else(|| Error::MegakernelConfig {
        field: "clock calibration",
        detail: format!(
            "4× the iterations did not take longer ({:?} then {:?}); the device clock cannot be calibrated",
            first.0, second.0
        ),
    })?;
    Ok(ClockCalibration {
        clock,
        ticks_per_ns: if clock == ClockKind::IterationBudget {
            0.0
        } else {
            ticks_per_ns
        },
        iterations_per_ns,
    })
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
