//! Hazard analysis for automatic barriers
//! ([`BatchOptions::auto_barriers`](crate::BatchOptions::auto_barriers)).
//!
//! Every command a batch records names the byte ranges it reads and writes
//! (a dispatch: each binding's view, written unless the kernel's reflection
//! says the binding is read-only; a copy: its source read, its destination
//! written; a fill or host write: its destination written). Before a command
//! is recorded, its ranges are checked against a per-batch table of what
//! earlier commands touched since a barrier last ordered them before the
//! command's stage: a read of a range an earlier command wrote, or a write
//! of a range an earlier command read or wrote, is a hazard, and the
//! command gets a barrier ([`crate::barrier`] picks its masks). Accesses of
//! one command never conflict with each other (one buffer bound twice in
//! one dispatch is not a hazard): a command's ranges are all checked before
//! any of them is noted.
//!
//! The table is an open-addressed hash table keyed by buffer, each entry
//! holding up to [`RANGES`] ranges of that buffer: checking or noting an
//! access costs a hash probe and a few comparisons, and nothing is
//! allocated once the table has grown to the batch's number of buffers.
//! Ranges of one kind noted since the same barrier merge when they touch
//! (a row of independent dispatches over consecutive slices stays one
//! range); a range a newer access covers is dropped; past [`RANGES`]
//! ranges a buffer's newest range absorbs the new one (a wider, never a
//! narrower, record: at worst a barrier more, never one less).
//!
//! Barriers are counted in generations: a range noted in generation `g` is
//! ordered before later commands of a stage once a barrier towards that
//! stage was recorded after it. A requested barrier orders everything
//! before it against every stage, so it clears the table at once.

use std::ops::Range;

use ash::vk;

use crate::barrier::Stage;

/// Ranges kept per buffer before they are merged into a wider one.
pub(crate) const RANGES: usize = 4;

/// Largest table (in buffers) kept for reuse by the next batch of a thread.
const KEEP_SLOTS: usize = 4096;

/// How a command's access conflicts with an earlier command's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HazardKind {
    /// The command reads bytes an earlier command wrote.
    ReadAfterWrite,
    /// The command writes bytes an earlier command read.
    WriteAfterRead,
    /// The command writes bytes an earlier command wrote.
    WriteAfterWrite,
}

/// Why a batch recorded a barrier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BarrierCause {
    /// [`Batch::barrier`](crate::Batch::barrier) asked for it (or, with
    /// automatic barriers off, the ordering [`Batch::write`](crate::Batch::write)
    /// and [`Batch::read`](crate::Batch::read) carry). One request may be
    /// recorded as one barrier per stage that follows it.
    Requested,
    /// Hazard tracking found that the command conflicts with an earlier one.
    Hazard {
        /// How it conflicts.
        kind: HazardKind,
        /// Index (as [`Batch::len`](crate::Batch::len) counts) of the latest
        /// earlier command whose access, merged with accesses of the same
        /// kind to adjacent bytes of the buffer since the same barrier,
        /// conflicts.
        earlier_command: u64,
        /// The buffer both touch.
        buffer: vk::Buffer,
        /// The bytes of `buffer` the command touches that conflict with the
        /// earlier access (within the range the command binds).
        bytes: Range<u64>,
    },
}

/// One barrier a batch recorded
/// ([`BatchOptions::record_plan`](crate::BatchOptions::record_plan),
/// [`Batch::barrier_log`](crate::Batch::barrier_log)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedBarrier {
    /// Index of the command the barrier precedes (as
    /// [`Batch::len`](crate::Batch::len) counts commands: a split launch's
    /// pieces and a kernel copy count as the commands they record).
    pub before_command: u64,
    /// Why it was recorded.
    pub cause: BarrierCause,
    /// Stages whose earlier work it waits for.
    pub src_stages: vk::PipelineStageFlags,
    /// Stage of the command it precedes.
    pub dst_stages: vk::PipelineStageFlags,
    /// Writes it makes available.
    pub src_access: vk::AccessFlags,
    /// Accesses it makes them visible to.
    pub dst_access: vk::AccessFlags,
}

/// One access of a command: bytes `start..end` of the buffer whose shared
/// state lives at address `owner`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Access {
    pub owner: usize,
    pub start: u64,
    pub end: u64,
    pub write: bool,
}

/// A hazard found by [`Hazards::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Conflict {
    pub kind: HazardKind,
    pub earlier_command: u64,
    /// The conflicting bytes (the overlap of both accesses).
    pub start: u64,
    pub end: u64,
}

/// A range one or more earlier commands touched.
#[derive(Debug, Clone, Copy, Default)]
struct Noted {
    start: u64,
    end: u64,
    /// Barrier generation it was noted in.
    gen: u32,
    write: bool,
    /// The latest command merged into it.
    cmd: u64,
}

/// One buffer's ranges; live when `epoch` is the table's.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    owner: usize,
    epoch: u32,
    n: u32,
    ranges: [Noted; RANGES],
}

/// The hazard table of one batch (see the module documentation).
#[derive(Debug)]
pub(crate) struct Hazards {
    /// Power-of-two length, or empty until the first access is noted.
    slots: Vec<Slot>,
    /// Live slots.
    live: usize,
    /// Slots whose `epoch` differs are empty: clearing is a bump.
    epoch: u32,
    /// Current barrier generation (ranges noted now get it).
    gen: u32,
    /// Generation of the latest range noted.
    last_noted: u32,
    /// Per stage (compute, transfer): ranges of an older generation are
    /// ordered before that stage's later commands.
    resolved: [u32; 2],
}

thread_local! {
    /// A table a finished batch left behind, reused by the thread's next
    /// batch so that its growth is paid once.
    /// Kept with its epoch, so that reuse clears nothing.
    static SPARE: std::cell::Cell<(Vec<Slot>, u32)> = const { std::cell::Cell::new((Vec::new(), 0)) };
}

fn stage_index(s: Stage) -> usize {
    match s {
        Stage::Compute => 0,
        Stage::Transfer => 1,
    }
}

#[inline]
fn hash(owner: usize, mask: usize) -> usize {
    ((owner as u64 >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & mask
}

impl Default for Hazards {
    fn default() -> Self {
        Hazards::new()
    }
}

impl Hazards {
    /// An empty table (allocates nothing).
    pub(crate) fn new() -> Self {
        Hazards {
            slots: Vec::new(),
            live: 0,
            epoch: 1,
            gen: 0,
            last_noted: 0,
            resolved: [0; 2],
        }
    }

    /// Forgets everything: a requested barrier orders all earlier commands
    /// before all later ones.
    #[inline]
    pub(crate) fn clear(&mut self) {
        if self.live == 0 {
            return;
        }
        self.live = 0;
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            // Wrapped: slots of epoch 1 from long ago would look live.
            self.slots.iter_mut().for_each(|s| s.epoch = 0);
            self.epoch = 1;
        }
        self.gen = 0;
        self.last_noted = 0;
        self.resolved = [0; 2];
    }

    /// A barrier towards `stage` was recorded: everything noted so far is
    /// ordered before that stage's later commands.
    pub(crate) fn resolve(&mut self, stage: Stage) {
        self.gen += 1;
        self.resolved[stage_index(stage)] = self.gen;
        if self.resolved[0].min(self.resolved[1]) > self.last_noted {
            // Everything noted is ordered before both stages.
            self.clear();
        }
    }

    #[inline]
    fn find(&self, owner: usize) -> Option<&Slot> {
        if self.live == 0 {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = hash(owner, mask);
        loop {
            let s = &self.slots[i];
            if s.epoch != self.epoch {
                return None;
            }
            if s.owner == owner {
                return Some(s);
            }
            i = (i + 1) & mask;
        }
    }

    /// A hazard `a`, done by a command of `stage`, has with what earlier
    /// commands did and no barrier yet orders before `stage` (one with an
    /// earlier write, if there is one: the data flow is the better reason).
    #[inline]
    pub(crate) fn check(&self, stage: Stage, a: &Access) -> Option<Conflict> {
        let slot = self.find(a.owner)?;
        let since = self.resolved[stage_index(stage)];
        let mut found = None;
        for r in &slot.ranges[..slot.n as usize] {
            if r.gen >= since && (r.write || a.write) && r.start < a.end && a.start < r.end {
                let kind = match (r.write, a.write) {
                    (true, true) => HazardKind::WriteAfterWrite,
                    (true, false) => HazardKind::ReadAfterWrite,
                    _ => HazardKind::WriteAfterRead,
                };
                found = Some(Conflict {
                    kind,
                    earlier_command: r.cmd,
                    start: r.start.max(a.start),
                    end: r.end.min(a.end),
                });
                if r.write {
                    break;
                }
            }
        }
        found
    }

    /// The slot of `owner`, made live if it was not.
    fn slot_mut(&mut self, owner: usize) -> &mut Slot {
        if (self.live + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = hash(owner, mask);
        loop {
            let epoch = self.epoch;
            if self.slots[i].epoch != epoch {
                self.live += 1;
                let s = &mut self.slots[i];
                s.owner = owner;
                s.epoch = epoch;
                s.n = 0;
                return s;
            }
            if self.slots[i].owner == owner {
                return &mut self.slots[i];
            }
            i = (i + 1) & mask;
        }
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        if self.slots.is_empty() {
            let (spare, epoch) = SPARE.with(|s| s.take());
            if !spare.is_empty() {
                self.slots = spare;
                self.epoch = epoch;
                self.live = 1;
                self.clear();
                return;
            }
        }
        let len = (self.slots.len() * 2).max(32);
        let old = std::mem::replace(&mut self.slots, vec![Slot::default(); len]);
        let old_epoch = self.epoch;
        self.epoch = 1;
        self.live = 0;
        let mask = len - 1;
        for s in old.into_iter().filter(|s| s.epoch == old_epoch) {
            let mut i = hash(s.owner, mask);
            while self.slots[i].epoch == 1 {
                i = (i + 1) & mask;
            }
            self.slots[i] = Slot { epoch: 1, ..s };
            self.live += 1;
        }
    }

    /// Notes `a`, done by command `cmd` (checked first: see
    /// [`Hazards::check`]).
    #[inline]
    pub(crate) fn note(&mut self, a: &Access, cmd: u64) {
        let gen = self.gen;
        self.last_noted = gen;
        let oldest = self.resolved[0].min(self.resolved[1]);
        let s = self.slot_mut(a.owner);
        let mut n = s.n as usize;
        let mut i = 0;
        let mut merged = false;
        while i < n {
            let r = &mut s.ranges[i];
            // Ordered before every stage, or covered by the new access
            // (which is as new and writes if the old one did): drop.
            if r.gen < oldest || (a.start <= r.start && r.end <= a.end && (a.write || !r.write)) {
                n -= 1;
                s.ranges[i] = s.ranges[n];
                continue;
            }
            if !merged && r.write == a.write && r.gen == gen && r.start <= a.end && a.start <= r.end
            {
                r.start = r.start.min(a.start);
                r.end = r.end.max(a.end);
                r.cmd = cmd;
                merged = true;
            }
            i += 1;
        }
        if !merged {
            let new = Noted {
                start: a.start,
                end: a.end,
                gen,
                write: a.write,
                cmd,
            };
            if n < RANGES {
                s.ranges[n] = new;
                n += 1;
            } else {
                // Full: the newest range absorbs it, wider and as new.
                let r = &mut s.ranges[n - 1];
                r.start = r.start.min(a.start);
                r.end = r.end.max(a.end);
                r.write |= a.write;
                r.gen = gen;
                r.cmd = cmd;
            }
        }
        s.n = n as u32;
    }
}

impl Drop for Hazards {
    fn drop(&mut self) {
        if !self.slots.is_empty() && self.slots.len() <= KEEP_SLOTS {
            let slots = std::mem::take(&mut self.slots);
            let epoch = self.epoch;
            // A thread being torn down has no spare to keep.
            let _ = SPARE.try_with(|s| {
                let kept = s.take();
                s.set(if kept.0.len() <= slots.len() {
                    (slots, epoch)
                } else {
                    kept
                });
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(owner: usize, r: Range<u64>, write: bool) -> Access {
        Access {
            owner,
            start: r.start,
            end: r.end,
            write,
        }
    }

    const C: Stage = Stage::Compute;
    const T: Stage = Stage::Transfer;

    #[test]
    fn reads_after_reads_are_free_writes_are_not() {
        let mut h = Hazards::new();
        let a = acc(0x1000, 0..64, false);
        assert_eq!(h.check(C, &a), None);
        h.note(&a, 0);
        assert_eq!(h.check(C, &a), None);
        h.note(&a, 1);
        let w = acc(0x1000, 32..40, true);
        let c = h.check(C, &w).unwrap();
        assert_eq!(c.kind, HazardKind::WriteAfterRead);
        assert_eq!((c.start, c.end), (32, 40));
        assert_eq!(c.earlier_command, 1);
        h.note(&w, 2);
        let c = h.check(T, &acc(0x1000, 0..36, false)).unwrap();
        assert_eq!(c.kind, HazardKind::ReadAfterWrite);
        assert_eq!(c.earlier_command, 2);
        assert_eq!((c.start, c.end), (32, 36));
        let c = h.check(C, &acc(0x1000, 39..100, true)).unwrap();
        assert_eq!(c.kind, HazardKind::WriteAfterWrite);
    }

    #[test]
    fn disjoint_ranges_and_other_buffers_are_independent() {
        let mut h = Hazards::new();
        h.note(&acc(0x1000, 0..64, true), 0);
        assert_eq!(h.check(C, &acc(0x1000, 64..128, true)), None);
        assert_eq!(h.check(C, &acc(0x2000, 0..64, true)), None);
        assert!(h.check(C, &acc(0x1000, 63..64, false)).is_some());
    }

    #[test]
    fn a_barrier_towards_one_stage_orders_only_that_stage() {
        let mut h = Hazards::new();
        let w = acc(0x1000, 0..64, true);
        h.note(&w, 0);
        h.resolve(C);
        assert_eq!(h.check(C, &w), None);
        // A transfer after it still needs its own barrier.
        assert!(h.check(T, &acc(0x1000, 0..4, false)).is_some());
        h.note(&w, 1);
        assert!(h.check(C, &w).is_some());
        h.resolve(T);
        // Both writes are ordered before transfers now; command 1's is not
        // yet ordered before compute.
        assert_eq!(h.check(T, &w), None);
        assert_eq!(h.check(C, &w).unwrap().earlier_command, 1);
        h.resolve(C);
        assert_eq!(h.check(T, &w), None);
        assert_eq!(h.check(C, &w), None);
    }

    #[test]
    fn barriers_towards_both_stages_clear_the_table() {
        let mut h = Hazards::new();
        h.note(&acc(0x1000, 0..64, true), 0);
        h.resolve(C);
        assert_eq!(h.live, 1);
        h.resolve(T);
        assert_eq!(h.live, 0);
        assert_eq!(h.check(C, &acc(0x1000, 0..64, true)), None);
    }

    #[test]
    fn clear_forgets_everything() {
        let mut h = Hazards::new();
        for i in 0..100 {
            h.note(&acc(0x1000 + i * 64, 0..64, true), i as u64);
        }
        h.clear();
        for i in 0..100 {
            assert_eq!(h.check(C, &acc(0x1000 + i * 64, 0..64, true)), None);
        }
        h.note(&acc(0x1000, 0..64, true), 100);
        assert!(h.check(C, &acc(0x1000, 0..64, false)).is_some());
    }

    #[test]
    fn consecutive_slices_merge_into_one_range() {
        let mut h = Hazards::new();
        for i in 0..1000u64 {
            let a = acc(0x1000, i * 256..(i + 1) * 256, true);
            assert_eq!(h.check(C, &a), None, "slice {i}");
            h.note(&a, i);
        }
        let s = h.find(0x1000).unwrap();
        assert_eq!(s.n, 1);
        assert_eq!((s.ranges[0].start, s.ranges[0].end), (0, 256_000));
        let c = h.check(C, &acc(0x1000, 1000..1004, false)).unwrap();
        assert_eq!(c.earlier_command, 999);
    }

    #[test]
    fn many_buffers_grow_the_table_and_stay_found() {
        let mut h = Hazards::new();
        for i in 0..5000usize {
            let a = acc(0x10_0000 + i * 48, 0..16, true);
            assert_eq!(h.check(C, &a), None);
            h.note(&a, i as u64);
        }
        for i in 0..5000usize {
            let c = h.check(C, &acc(0x10_0000 + i * 48, 8..9, false)).unwrap();
            assert_eq!(c.earlier_command, i as u64);
        }
    }

    #[test]
    fn a_full_buffer_widens_never_forgets() {
        let mut h = Hazards::new();
        // Strided writes that never touch: more than RANGES of them.
        for i in 0..(RANGES as u64 * 3) {
            h.note(&acc(0x1000, i * 100..i * 100 + 10, true), i);
        }
        for i in 0..(RANGES as u64 * 3) {
            assert!(h
                .check(C, &acc(0x1000, i * 100..i * 100 + 1, false))
                .is_some());
        }
        assert!(h.find(0x1000).unwrap().n as usize <= RANGES);
    }

    #[test]
    fn a_chain_keeps_one_range() {
        let mut h = Hazards::new();
        let w = acc(0x1000, 0..64, true);
        h.note(&w, 0);
        for i in 1..100 {
            assert!(h.check(C, &w).is_some());
            h.resolve(C);
            h.note(&w, i);
            assert_eq!(h.find(0x1000).unwrap().n, 1);
        }
    }

    #[test]
    fn table_is_reused_after_drop() {
        let mut h = Hazards::new();
        for i in 0..100usize {
            h.note(&acc(0x1000 + i * 64, 0..4, true), 0);
        }
        let len = h.slots.len();
        drop(h);
        let mut h = Hazards::new();
        h.note(&acc(0x1000, 0..4, false), 0);
        assert_eq!(h.slots.len(), len);
        // Nothing of the earlier batch survives.
        assert_eq!(h.check(C, &acc(0x1040, 0..4, true)), None);
        assert!(h.check(C, &acc(0x1000, 0..4, true)).is_some());
    }
}
