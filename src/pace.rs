//! Paced waits on repeated launches. A graph learns how long its launches
//! take, from the launch to the completion its waits see, and a wait on
//! one of its launches blocks in the driver until shortly before the
//! expected end, then spins: it returns about when a wait spinning
//! through the whole launch would, while the core sleeps through most of
//! it. A blocking wait alone returns late on some drivers (NVIDIA's on an
//! H200: ~65 µs per 3.5 ms decode step of Qwen3-4B, docs/PERF.md), and a
//! spinning one holds a core for the whole launch. Pure: the rules here,
//! the waiting in `ticket.rs`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The least time kept between the end of a paced sleep and the expected
/// completion: the operating system's timer slack (50 µs by default on
/// Linux) and the wake-up's jitter.
const MARGIN_MIN: Duration = Duration::from_micros(100);
/// The margin grows by the expected duration over 2^this (1/32): launches
/// vary by a few percent from one to the next.
const MARGIN_SHIFT: u32 = 5;

/// The learned duration of a repeated launch (zero until its first
/// completion is seen). Shared by the launches of one graph.
#[derive(Debug, Default)]
pub(crate) struct Pace {
    expected_ns: AtomicU64,
}

/// How one wait on a paced launch goes: block in the driver for at most
/// `sleep`, then spin for at most `spin`, then block until done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    /// How long to block before spinning (zero: spin at once).
    pub sleep: Duration,
    /// How long to spin before blocking.
    pub spin: Duration,
}

/// Where a paced wait saw the launch complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seen {
    /// While it blocked before spinning: the launch ended earlier than
    /// expected, and the driver woke the thread some time after it did.
    Sleeping,
    /// While it spun: the time seen is the launch's own, to the poll.
    Spinning,
    /// After it stopped spinning and blocked (or without any plan: the
    /// first wait): the launch took at least the time seen, less the
    /// wake-up's delay.
    Blocked,
}

impl Pace {
    /// The launch duration the next wait expects (zero: none seen yet).
    pub(crate) fn expected(&self) -> Duration {
        Duration::from_nanos(self.expected_ns.load(Ordering::Relaxed))
    }

    /// The plan of a wait begun `elapsed` after its launch, with the
    /// device's spin `spin`.
    pub(crate) fn plan(&self, elapsed: Duration, spin: Duration) -> Plan {
        plan(self.expected(), elapsed, spin)
    }

    /// Notes a completion seen `observed` after its launch, `seen` where.
    pub(crate) fn observe(&self, observed: Duration, seen: Seen) {
        let next = update(observed, seen);
        self.expected_ns.store(
            u64::try_from(next.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }
}

/// The time kept between a paced sleep's end and the expected completion.
fn margin(expected: Duration) -> Duration {
    MARGIN_MIN + expected / (1 << MARGIN_SHIFT)
}

/// A wait's plan: with no duration learned (or waits that never spin,
/// `spin` zero), no sleep and the device's spin; else a sleep until the
/// expected end less the margin, counted from the launch, then a spin
/// through twice the margin (at least the device's spin).
pub(crate) fn plan(expected: Duration, elapsed: Duration, spin: Duration) -> Plan {
    if expected.is_zero() || spin.is_zero() {
        return Plan {
            sleep: Duration::ZERO,
            spin,
        };
    }
    let m = margin(expected);
    Plan {
        sleep: expected.saturating_sub(m).saturating_sub(elapsed),
        spin: (2 * m).max(spin),
    }
}

/// The next expected duration after a completion seen `observed` after
/// the launch: the time itself when the wait spun or blocked after
/// spinning (a longer launch is learned at once, its wake-up delay
/// included), seven eighths of it when the wait was still asleep (the
/// launch ended before the sleep would have, at some time before it was
/// seen: the next wait starts spinning earlier).
pub(crate) fn update(observed: Duration, seen: Seen) -> Duration {
    match seen {
        Seen::Sleeping => observed - observed / 8,
        Seen::Spinning | Seen::Blocked => observed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(v: u64) -> Duration {
        Duration::from_micros(v)
    }

    #[test]
    fn nothing_learned_or_no_spinning_plans_the_plain_wait() {
        assert_eq!(
            plan(Duration::ZERO, us(10), us(50)),
            Plan {
                sleep: Duration::ZERO,
                spin: us(50)
            }
        );
        assert_eq!(
            plan(us(3200), us(10), Duration::ZERO),
            Plan {
                sleep: Duration::ZERO,
                spin: Duration::ZERO
            }
        );
    }

    #[test]
    fn a_learned_launch_sleeps_to_the_margin_then_spins_through_it() {
        // 3.2 ms: margin 100 + 100 µs.
        let p = plan(us(3200), us(20), us(50));
        assert_eq!(p.sleep, us(3200 - 200 - 20));
        assert_eq!(p.spin, us(400));
        // A wait begun late sleeps less, or not at all.
        assert_eq!(plan(us(3200), us(2900), us(50)).sleep, us(100));
        assert_eq!(plan(us(3200), us(5000), us(50)).sleep, Duration::ZERO);
        // A long device spin is kept.
        assert_eq!(plan(us(3200), us(0), us(1000)).spin, us(1000));
        // A launch shorter than the margin is spun for at once.
        assert_eq!(plan(us(60), us(0), us(50)).sleep, Duration::ZERO);
    }

    #[test]
    fn completions_teach_the_next_wait() {
        assert_eq!(update(us(3400), Seen::Blocked), us(3400));
        assert_eq!(update(us(3400), Seen::Spinning), us(3400));
        assert_eq!(update(us(3200), Seen::Sleeping), us(2800));
        let pace = Pace::default();
        assert_eq!(pace.expected(), Duration::ZERO);
        pace.observe(us(3465), Seen::Blocked);
        assert_eq!(pace.expected(), us(3465));
        // The next wait then spins from about 3.26 ms: a 3.4 ms launch
        // completes within its spin.
        let p = pace.plan(us(15), us(50));
        assert!(p.sleep + us(15) < us(3400) && p.sleep + us(15) + p.spin > us(3400));
    }
}
