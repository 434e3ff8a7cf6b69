//! The resident ring's layout and the template's defines: word positions
//! shared with `shaders/megakernel/resident.glsl`, when a slot may be
//! reused, why a kernel ended, and what llvmpipe's loop limit asks of the
//! workers. Pure, tested without a GPU.

use super::super::source::ClockKind;
use crate::error::{Error, Result};

/// The resident template (`shaders/megakernel/resident.glsl`).
pub(crate) const TEMPLATE: &str = include_str!("../../../shaders/megakernel/resident.glsl");
const USER_MARK: &str = "//@@USER@@";

/// Ring word: the host's stop request.
pub(crate) const RING_STOP: usize = 0;
/// Ring word: the next ticket the device claims.
pub(crate) const RING_CLAIM: usize = 32;
/// Ring words: tasks served (Done), faulted, the user's counter.
pub(crate) const RING_SERVED: usize = 64;
pub(crate) const RING_FAULTED: usize = 65;
pub(crate) const RING_USER: usize = 66;
/// Ring word where slot 0 begins; each slot is 16 words.
pub(crate) const RING_SLOT_BASE: usize = 128;
pub(crate) const SLOT_WORDS: usize = 16;
/// Ring words: the exit reason (the first worker to end sets it), workers
/// finished, workers started. Read-modify-writes stay in the ring (device
/// memory); the completion words only ever get stores.
pub(crate) const RING_EXIT: usize = 96;
pub(crate) const RING_WORKERS_DONE: usize = 97;
pub(crate) const RING_STARTED: usize = 98;
/// Completion word: a copy of the exit reason, stored by the worker that
/// set it (the host reads it on every push, from its own cache).
pub(crate) const DONE_EXIT: usize = 0;
/// Completion word where slot 0's record begins; each record is 16 words.
pub(crate) const DONE_BASE: usize = 32;
pub(crate) const DONE_WORDS: usize = 16;
/// Completion word holding the record's tag.
pub(crate) const DONE_TAG: usize = 8;
/// Ring slot word holding the slot's tag (the task's `fault` word, which
/// the device does not read).
pub(crate) const SLOT_TAG: usize = 11;

/// The tag of a record published with `seq` (pure; the template's
/// `mkr_seed`/`mkr_term` compute the same): a hash of the sequence word and
/// the record's words. A reader that sees the sequence word checks the tag
/// before trusting the words, so words still in flight (stores to memory
/// across the bus need not arrive in order) are never taken for the
/// record; words that equal the new ones are the record anyway.
///
/// Each word is hashed on its own with its position, and the hashes are
/// combined with XOR: the device computes the terms in parallel instead of
/// as one dependent chain of 15 multiply-xorshift steps, which sat on the
/// round trip's critical path twice (claim and completion).
pub(crate) fn tag(seq: u32, words: impl IntoIterator<Item = u32>) -> u32 {
    let s = seq.wrapping_mul(0x9E37_79B1);
    let mut h = s ^ (s >> 13);
    for (k, w) in (1u32..).zip(words) {
        h ^= term(w, k);
    }
    h
}

/// Word `w` at position `k` (from 1) of a tagged record.
fn term(w: u32, k: u32) -> u32 {
    let x = w
        .wrapping_add(k.wrapping_mul(0x7F4A_7C15))
        .wrapping_mul(0x85EB_CA77);
    x ^ (x >> 15)
}

/// The most ring slots a resident kernel may have.
pub const MAX_RING_SLOTS: u32 = 1 << 20;

/// Words of the request ring and of the completion words for `slots`.
pub(crate) fn ring_words(slots: u32) -> (usize, usize) {
    (
        RING_SLOT_BASE + slots as usize * SLOT_WORDS,
        DONE_BASE + slots as usize * DONE_WORDS,
    )
}

/// Whether ticket `ticket` may take its slot (pure): the first lap always;
/// later, once the previous occupant's handle was dropped (`consumed`: the
/// highest ticket + 1 released in the slot) and the device finished it
/// (`done_seq`: the slot's completion sequence word).
pub(crate) fn slot_free(ticket: u64, slots: u32, consumed: u64, done_seq: u32) -> bool {
    let n = u64::from(slots);
    if ticket < n {
        return true;
    }
    let prev = ticket - n;
    consumed > prev && done_seq == (prev + 1) as u32
}

/// Why a resident kernel ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitReason {
    /// Still running (no worker has ended).
    Running,
    /// The host asked it to stop.
    StopRequested,
    /// The wall-time budget ran out.
    WallTime,
    /// No task arrived for `idle_timeout`.
    Idle,
    /// A loop bound ran out (on lavapipe: the driver's limit of 65,535 loop
    /// iterations per invocation).
    LoopBound,
}

impl ExitReason {
    /// The reason a device word names (pure); unknown words are `LoopBound`.
    pub fn from_word(w: u32) -> ExitReason {
        match w {
            0 => ExitReason::Running,
            1 => ExitReason::StopRequested,
            2 => ExitReason::WallTime,
            3 => ExitReason::Idle,
            _ => ExitReason::LoopBound,
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            ExitReason::Running => "running",
            ExitReason::StopRequested => "stop requested",
            ExitReason::WallTime => "wall-time budget",
            ExitReason::Idle => "idle",
            ExitReason::LoopBound => "loop bound",
        }
    }
}

/// What one compiled resident kernel is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Variant {
    /// Invocations per worker.
    pub local: u32,
    /// Ring slots.
    pub slots: u32,
    /// How the device measures time.
    pub clock: ClockKind,
    /// Acquire/release atomics under the Vulkan memory model.
    pub memory_model: bool,
    /// One worker: it keeps the claim counter in a register and claims
    /// with a store (no compare-and-swap on the critical path).
    pub single_worker: bool,
    /// Check after every task that no lane's loops were cut (llvmpipe).
    pub loop_check: bool,
    /// A release fence between a task's data writes and its completion
    /// ([`super::ResidentConfig::ordered_data`]).
    pub ordered_data: bool,
}

/// The whole kernel source (pure): defines, the template with the user's
/// code at its marker.
pub(crate) fn assemble(user: &str, v: &Variant) -> String {
    let (local, slots) = (v.local, v.slots);
    let clock = match v.clock {
        ClockKind::IterationBudget => 0,
        ClockKind::DeviceClock => 1,
        ClockKind::SubgroupClock => 2,
    };
    let (head, tail) = TEMPLATE.split_once(USER_MARK).unwrap_or((TEMPLATE, ""));
    let tail_line = head.lines().count() + 1;
    format!(
        "#version 450\n#define MKR_LOCAL_SIZE {local}\n#define MKR_SLOTS {slots}u\n\
         #define MKR_CLOCK {clock}\n#define MKR_MEMORY_MODEL {}\n#define MKR_SINGLE {}\n\
         #define MKR_LOOP_CHECK {}\n#define MKR_ORDERED_DATA {}\n#line 1\n{head}\n#line 1\n{user}\n#line {tail_line}\n{tail}",
        u32::from(v.memory_model),
        u32::from(v.single_worker),
        u32::from(v.loop_check),
        u32::from(v.ordered_data),
    )
}

/// Whether the host starts the workers again after every one of them
/// ended for `exit` (pure). Host time is the authority: the device's
/// budgets (measured with a clock whose rate was calibrated, or with
/// iterations) only make sure the GPU never spins on. So the workers run
/// again when no stop was asked, wall time is left by host time, and they
/// ended at a loop bound, at the device's wall-time budget, or idle while
/// the host pushed within `idle_timeout`.
pub(crate) fn should_relaunch(
    exit: ExitReason,
    stop_requested: bool,
    wall_left: std::time::Duration,
    host_idle: std::time::Duration,
    idle_timeout: std::time::Duration,
) -> bool {
    if stop_requested || wall_left < std::time::Duration::from_millis(1) {
        return false;
    }
    match exit {
        ExitReason::LoopBound | ExitReason::WallTime => true,
        ExitReason::Idle => host_idle < idle_timeout,
        ExitReason::StopRequested | ExitReason::Running => false,
    }
}

/// Environment variable overriding the loop budget (a number of loop
/// iterations per worker and launch), for experiments with drivers that
/// cut loops short.
pub const ENV_LOOP_BUDGET: &str = "VKCOMPUTE_RESIDENT_LOOP_BUDGET";

/// Loop iterations a worker may spend in one launch (pure): llvmpipe ends
/// an invocation's loops after 65,535 iterations in all, silently, so
/// workers there end a launch (and the host starts the next) well before;
/// elsewhere there is no such limit.
pub(crate) fn loop_budget(driver_name: &str) -> u32 {
    if driver_name == "llvmpipe" {
        48_000
    } else {
        u32::MAX
    }
}

/// Refuses workers wider than one SIMD chunk on llvmpipe (pure): there a
/// loop inside the waiting lane's branch also runs, masked off, in the
/// worker's other chunks, which spend the driver's 65,535-iteration limit
/// in a few dozen tasks and then leave the worker silently (measured: with
/// 64 lanes, 7 of 8 chunks gone after about 35 tasks).
pub(crate) fn check_lanes(driver_name: &str, workgroup_size: u32, subgroup: u32) -> Result<()> {
    let chunk = subgroup.max(1);
    if driver_name == "llvmpipe" && workgroup_size > chunk {
        return Err(Error::MegakernelConfig {
            field: "workgroup_size",
            detail: format!(
                "{workgroup_size} lanes: on llvmpipe a resident worker may be at most one SIMD chunk \
                 ({chunk} lanes), or the driver's loop limit ends its other chunks part-way"
            ),
        });
    }
    Ok(())
}

/// The fault code of a task during which the driver cut the worker's loops
/// short (llvmpipe's loop limit; only when a task's own loops run more
/// than about 64 iterations per lane): its results are not to be trusted.
/// Its completion's `params[2]` holds the lanes that checked in after the
/// task and `params[3]` twice the worker's tasks in the launch, plus 1 if a
/// lane saw its loops cut.
pub const FAULT_LOOP_CUT: u32 = 6;

/// Looks per wait-loop iteration in the template (iteration budgets count
/// loop iterations, the calibration counts looks).
pub(crate) const LOOKS_PER_ITERATION: u32 = 8;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::megakernel::TaskWorkItem;

    /// Every variant of the template compiles: drivers take different
    /// ones (lavapipe: no memory model, a loop check; NVIDIA: the memory
    /// model and a device clock), so one that CI's driver never builds
    /// must still be valid GLSL.
    #[cfg(feature = "glsl")]
    #[test]
    fn every_template_variant_compiles() {
        let user = "#define MK_OP_COUNT 1\n\
            uint run_task(inout MkTask t, uint lane, uint lanes) { return MK_DONE; }\n";
        let clocks = [
            ClockKind::IterationBudget,
            ClockKind::DeviceClock,
            ClockKind::SubgroupClock,
        ];
        for clock in clocks {
            for bits in 0..16u32 {
                let v = Variant {
                    local: 32,
                    slots: 64,
                    clock,
                    memory_model: bits & 1 != 0,
                    single_worker: bits & 2 != 0,
                    loop_check: bits & 4 != 0,
                    ordered_data: bits & 8 != 0,
                };
                if let Err(e) = crate::glsl::compile_glsl(&assemble(user, &v)) {
                    panic!("{v:?}: {e}");
                }
            }
        }
    }

    #[test]
    fn slots_are_reused_only_when_finished_and_released() {
        // First lap: always free.
        assert!(slot_free(0, 4, 0, 0));
        assert!(slot_free(3, 4, 0, 0));
        // Ticket 5 needs ticket 1's slot: released (consumed 2) and done (seq 2).
        assert!(slot_free(5, 4, 2, 2));
        assert!(!slot_free(5, 4, 1, 2), "handle still held");
        assert!(!slot_free(5, 4, 2, 1), "device not finished");
        assert!(!slot_free(5, 4, 0, 0));
        // Sequence words wrap at 2^32 with the ticket.
        let t = (1u64 << 32) + 7;
        let prev = t - 4;
        assert!(slot_free(t, 4, prev + 1, (prev + 1) as u32));
        assert!(!slot_free(t, 4, prev, (prev + 1) as u32));
    }

    #[test]
    fn layout_keeps_hot_words_apart_and_fits() {
        assert_eq!(RING_CLAIM - RING_STOP, 32);
        assert_eq!(RING_SERVED - RING_CLAIM, 32);
        assert_eq!(RING_SLOT_BASE % 32, 0);
        assert_eq!(ring_words(2), (128 + 32, 32 + 32));
        let (r, d) = ring_words(MAX_RING_SLOTS);
        assert_eq!((r, d), (128 + (16 << 20), 32 + (16 << 20)));
        assert_eq!(std::mem::size_of::<TaskWorkItem>(), SLOT_WORDS * 4);
        // The template's words match.
        for (name, v) in [
            ("MKR_CLAIM 32u", RING_CLAIM),
            ("MKR_SLOT_BASE 128u", RING_SLOT_BASE),
            ("MKR_DONE_BASE 32u", DONE_BASE),
            ("MKR_EXIT_RING 96u", RING_EXIT),
            ("MKR_WORKERS_DONE 97u", RING_WORKERS_DONE),
            ("MKR_STARTED 98u", RING_STARTED),
            ("MKR_DONE_TAG 8u", DONE_TAG),
            ("MKR_SLOT_TAG 11u", SLOT_TAG),
        ] {
            assert!(TEMPLATE.contains(name), "{name} {v}");
        }
    }

    #[test]
    fn tags_catch_any_stale_word() {
        let words = [3u32, 0, 7, 1, 2, 3, 4];
        let t = tag(42, words);
        assert_eq!(t, tag(42, words));
        assert_ne!(t, tag(43, words), "an old sequence word");
        for i in 0..words.len() {
            let mut w = words;
            w[i] ^= 1;
            assert_ne!(t, tag(42, w), "word {i} stale");
        }
        // A word moved to another position is stale too.
        let mut swapped = words;
        swapped.swap(0, 2);
        assert_ne!(t, tag(42, swapped), "words swapped");
        // Pinned, so the template's copy can be checked against it.
        assert_eq!(tag(1, []), 0x9E37_79B1 ^ (0x9E37_79B1 >> 13));
        assert_eq!(tag(0, [0]), term(0, 1));
        assert_eq!(
            term(0, 1),
            0x7F4A_7C15u32.wrapping_mul(0x85EB_CA77)
                ^ (0x7F4A_7C15u32.wrapping_mul(0x85EB_CA77) >> 15)
        );
        for c in [
            "0x9E3779B1u",
            "0x85EBCA77u",
            "0x7F4A7C15u",
            ">> 13",
            ">> 15",
        ] {
            assert!(TEMPLATE.contains(c), "template lacks {c}");
        }
    }

    #[test]
    fn host_time_decides_relaunches() {
        use std::time::Duration as D;
        let (s, ms) = (D::from_secs, D::from_millis);
        let go = |e, stop, left, idle| should_relaunch(e, stop, left, idle, ms(100));
        assert!(go(ExitReason::LoopBound, false, s(1), s(5)));
        assert!(go(ExitReason::WallTime, false, s(1), s(5)));
        assert!(go(ExitReason::Idle, false, s(1), ms(99)));
        assert!(!go(ExitReason::Idle, false, s(1), ms(100)));
        assert!(!go(ExitReason::LoopBound, true, s(1), D::ZERO));
        assert!(!go(
            ExitReason::LoopBound,
            false,
            D::from_micros(999),
            D::ZERO
        ));
        assert!(!go(ExitReason::StopRequested, false, s(1), D::ZERO));
        assert!(!go(ExitReason::Running, false, s(1), D::ZERO));
    }

    #[test]
    fn llvmpipe_workers_are_one_chunk() {
        assert!(check_lanes("llvmpipe", 8, 8).is_ok());
        assert!(check_lanes("llvmpipe", 1, 8).is_ok());
        let e = check_lanes("llvmpipe", 64, 8).unwrap_err().to_string();
        assert!(e.contains("workgroup_size") && e.contains("8 lanes"), "{e}");
        assert!(check_lanes("NVIDIA", 1024, 32).is_ok());
        assert!(check_lanes("llvmpipe", 1, 0).is_ok());
        assert_eq!(loop_budget("llvmpipe"), 48_000);
        assert_eq!(loop_budget("NVIDIA"), u32::MAX);
    }

    #[test]
    fn exit_words_and_source() {
        assert_eq!(ExitReason::from_word(0), ExitReason::Running);
        assert_eq!(ExitReason::from_word(1), ExitReason::StopRequested);
        assert_eq!(ExitReason::from_word(2), ExitReason::WallTime);
        assert_eq!(ExitReason::from_word(3), ExitReason::Idle);
        assert_eq!(ExitReason::from_word(4), ExitReason::LoopBound);
        assert_eq!(ExitReason::from_word(99), ExitReason::LoopBound);
        let v = Variant {
            local: 32,
            slots: 64,
            clock: ClockKind::DeviceClock,
            memory_model: true,
            single_worker: true,
            loop_check: false,
            ordered_data: true,
        };
        let s = assemble("// USER", &v);
        assert!(s.starts_with("#version 450\n"));
        for d in [
            "#define MKR_LOCAL_SIZE 32",
            "#define MKR_SLOTS 64u",
            "#define MKR_CLOCK 1",
            "#define MKR_MEMORY_MODEL 1",
            "#define MKR_SINGLE 1",
            "#define MKR_LOOP_CHECK 0",
            "#define MKR_ORDERED_DATA 1",
        ] {
            assert!(s.contains(d), "{d}");
        }
        let (u, m) = (s.find("// USER").unwrap(), s.find("void main()").unwrap());
        assert!(s.find("struct MkTask").unwrap() < u && u < m);
        // Spins read through atomics only.
        let code: String = TEMPLATE
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect();
        assert!(!code.contains("volatile"));
        assert!(TEMPLATE.contains("uint c = mkr_ring_load(MKR_CLAIM);"));
    }
}
