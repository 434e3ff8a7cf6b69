//! What one launch did, read from its control words (layout shared with
//! `shaders/megakernel/prelude.glsl`; each hot counter on its own 128-byte
//! line).

use std::time::Duration;

use super::source::ClockKind;

/// Control words: the claim counter.
pub(crate) const HEAD: usize = 0;
/// Control words: entries in the claim order.
pub(crate) const TAIL: usize = 32;
/// Control words: tasks not yet ended in this launch.
pub(crate) const PENDING: usize = 64;
/// Control words: step-barrier arrivals.
pub(crate) const ARRIVE: usize = 96;
/// Control words: step-barrier generation.
pub(crate) const GEN: usize = 128;
const CLAIMED: usize = 160;
const DONE: usize = 161;
const FAULTED: usize = 162;
const REQUEUED: usize = 163;
const YIELDED: usize = 164;
const PAUSED: usize = 165;
const DEADLINE_HIT: usize = 166;
const SPIN_EXHAUSTED: usize = 167;
const DROPPED_REQUEUES: usize = 168;
const USER_COUNTER: usize = 169;
const WORKERS_DONE: usize = 170;
const ELAPSED_LO: usize = 171;
const ELAPSED_HI: usize = 172;
const ITERATIONS: usize = 173;
const LOOP_CUT: usize = 177;
/// Control words in all (six 128-byte lines).
pub(crate) const CONTROL_WORDS: usize = 192;

/// Counters of one megakernel launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MegakernelReport {
    /// Workers launched.
    pub workers: u32,
    /// Schedulable tasks when the launch began (task mode).
    pub scheduled: u32,
    /// Steps asked for (step mode).
    pub steps: u32,
    /// Task runs claimed (a re-queued task counts once per run).
    pub claimed: u32,
    /// Runs that ended Done.
    pub done: u32,
    /// Runs that ended Faulted.
    pub faulted: u32,
    /// Runs that ended Requeued.
    pub requeued: u32,
    /// Runs that ended Yielded.
    pub yielded: u32,
    /// Runs that ended Paused.
    pub paused: u32,
    /// Yields/requeues left for the next launch because the launch's
    /// claim order was full (`max_requeues_per_task`).
    pub dropped_requeues: u32,
    /// Whether the wall-time budget stopped a worker from claiming.
    pub deadline_hit: bool,
    /// Whether any device-side wait ran out of its spin budget (a step
    /// barrier that did so leaves later steps unordered).
    pub spin_exhausted: bool,
    /// Whether a device loop ended early without reaching its condition
    /// (lavapipe ends any loop after 65,535 iterations; the template's loops
    /// are chunked below that, so this flags a loop the driver cut anyway).
    pub loop_cut: bool,
    /// How the budget was measured.
    pub clock: Option<ClockKind>,
    /// Workers that reached the end of the kernel.
    pub workers_finished: u32,
    /// Worker 0's time from start to end by the shader clock, converted
    /// with the calibration (`None` without a clock).
    pub device_elapsed: Option<Duration>,
    /// The most worker-loop iterations one worker counted.
    pub max_iterations: u32,
    /// What the kernel counted with `mk_count_user`.
    pub user_counter: u32,
}

impl MegakernelReport {
    /// The counters in `words` (a control block after a launch), with
    /// worker 0's clock ticks (pure).
    pub(crate) fn from_words(words: &[u32]) -> (MegakernelReport, u64) {
        let w = |i: usize| words.get(i).copied().unwrap_or(0);
        let r = MegakernelReport {
            claimed: w(CLAIMED),
            done: w(DONE),
            faulted: w(FAULTED),
            requeued: w(REQUEUED),
            yielded: w(YIELDED),
            paused: w(PAUSED),
            dropped_requeues: w(DROPPED_REQUEUES),
            deadline_hit: w(DEADLINE_HIT) != 0,
            spin_exhausted: w(SPIN_EXHAUSTED) != 0,
            loop_cut: w(LOOP_CUT) != 0,
            workers_finished: w(WORKERS_DONE),
            max_iterations: w(ITERATIONS),
            user_counter: w(USER_COUNTER),
            ..MegakernelReport::default()
        };
        (
            r,
            u64::from(w(ELAPSED_LO)) | (u64::from(w(ELAPSED_HI)) << 32),
        )
    }
}

/// The control block a launch starts from: claim order of `queued`
/// entries, all of them pending (pure).
pub(crate) fn initial_control(queued: u32) -> Vec<u32> {
    let mut c = vec![0u32; CONTROL_WORDS];
    // Claims, barrier arrivals and the barrier generation start at 0.
    for i in [HEAD, ARRIVE, GEN] {
        c[i] = 0;
    }
    c[TAIL] = queued;
    c[PENDING] = queued;
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hot_counters_are_on_their_own_lines() {
        let hot = [HEAD, TAIL, PENDING, ARRIVE, GEN, CLAIMED];
        for (i, a) in hot.iter().enumerate() {
            for b in &hot[i + 1..] {
                assert!((a * 4).abs_diff(b * 4) >= 128, "{a} {b}");
            }
        }
        const { assert!(ITERATIONS < CONTROL_WORDS) };
    }

    #[test]
    fn parses_counters() {
        let mut w = initial_control(5);
        assert_eq!((w[TAIL], w[PENDING], w[HEAD]), (5, 5, 0));
        w[CLAIMED] = 7;
        w[DONE] = 4;
        w[FAULTED] = 1;
        w[REQUEUED] = 2;
        w[DEADLINE_HIT] = 1;
        w[ELAPSED_LO] = 3;
        w[ELAPSED_HI] = 1;
        w[USER_COUNTER] = 9;
        let (r, ticks) = MegakernelReport::from_words(&w);
        assert_eq!((r.claimed, r.done, r.faulted, r.requeued), (7, 4, 1, 2));
        assert!(r.deadline_hit && !r.spin_exhausted);
        assert_eq!(r.user_counter, 9);
        assert_eq!(ticks, (1 << 32) + 3);
        let (r, _) = MegakernelReport::from_words(&[]);
        assert_eq!(r, MegakernelReport::default());
    }
}
