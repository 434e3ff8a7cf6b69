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
//! narrower, record: at worst a barrier more, never one less). A batch's
//! first command, when it has one access, leaves it beside the table
//! until another command comes: a batch of one dispatch (a round trip)
//! neither builds a table nor hands one back.
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Access {
    pub owner: usize,
    pub start: u64,
    pub end: u64,
    pub write: bool,
}

/// A hazard found by [`Hazards::check_listed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Conflict {
    pub kind: HazardKind,
    /// The earlier command's index modulo 2^31 ([`command_index`]).
    pub earlier_command: u32,
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
    /// The latest command merged into it (its index modulo 2^31, bits
    /// 0-30), and whether it is a write (bit 31).
    cmd_write: u32,
}

const WRITE: u32 = 1 << 31;
const CMD: u32 = WRITE - 1;

impl Noted {
    fn write(&self) -> bool {
        self.cmd_write & WRITE != 0
    }
}

/// One buffer's key; live when `epoch` is the table's. Its ranges sit at
/// index `at` of [`Hazards::ranges`], handed out in the order buffers are
/// first seen: a probe touches keys only, and a new buffer's ranges are
/// written next to the previous one's.
#[derive(Debug, Clone, Copy, Default)]
struct Key {
    owner: usize,
    epoch: u32,
    n: u32,
    at: u32,
}

/// A table's memory, handed from a finished batch to the thread's next.
#[derive(Debug, Default)]
struct Memory {
    keys: Vec<Key>,
    ranges: Vec<[Noted; RANGES]>,
    listed: Vec<(Access, u32)>,
    epoch: u32,
}

/// The hazard table of one batch (see the module documentation).
#[derive(Debug)]
pub(crate) struct Hazards {
    /// Power-of-two length, or empty until the first access is noted.
    keys: Vec<Key>,
    /// Per live key, its ranges (the first `live` entries are in use).
    ranges: Vec<[Noted; RANGES]>,
    /// Live keys.
    live: usize,
    /// Keys whose `epoch` differs are empty: clearing is a bump.
    epoch: u32,
    /// Current barrier generation (ranges noted now get it).
    gen: u32,
    /// Generation of the latest range noted.
    last_noted: u32,
    /// Per stage (compute, transfer): ranges of an older generation are
    /// ordered before that stage's later commands.
    resolved: [u32; 2],
    /// The accesses of the command being recorded, each with its key's
    /// index once checked.
    listed: Vec<(Access, u32)>,
    /// `epoch` when `listed` was checked (a clear since stales the indices).
    listed_epoch: u32,
    /// The batch's first access, when its command had only that one, with
    /// the command: held here until another command comes, so a batch of
    /// one command neither builds a table nor hands one back. Only while
    /// `keys` is empty (and `gen` is 0: nothing was resolved yet).
    first: Option<(Access, u64)>,
}

thread_local! {
    /// The memory a finished batch left behind, reused by the thread's next
    /// batch so that its growth is paid once (kept with its epoch, so that
    /// reuse clears nothing).
    static SPARE: std::cell::Cell<Memory> = std::cell::Cell::new(Memory::default());
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

impl Hazards {
    /// An empty table (allocates nothing).
    pub(crate) fn new() -> Self {
        Hazards {
            keys: Vec::new(),
            ranges: Vec::new(),
            live: 0,
            epoch: 1,
            gen: 0,
            last_noted: 0,
            resolved: [0; 2],
            listed: Vec::new(),
            listed_epoch: 0,
            first: None,
        }
    }

    /// Forgets everything: a requested barrier orders all earlier commands
    /// before all later ones.
    #[inline]
    pub(crate) fn clear(&mut self) {
        if self.live == 0 {
            self.first = None;
            return;
        }
        self.live = 0;
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            // Wrapped: keys of epoch 1 from long ago would look live.
            self.keys.iter_mut().for_each(|k| k.epoch = 0);
            self.epoch = 1;
        }
        self.gen = 0;
        self.last_noted = 0;
        self.resolved = [0; 2];
    }

    /// A barrier towards `stage` was recorded: everything noted so far is
    /// ordered before that stage's later commands.
    pub(crate) fn resolve(&mut self, stage: Stage) {
        self.gen = self.gen.wrapping_add(1);
        self.resolved[stage_index(stage)] = self.gen;
        if self.resolved[0].min(self.resolved[1]) > self.last_noted {
            // Everything noted is ordered before both stages.
            self.clear();
        }
    }

    /// The index of `owner`'s key, if live.
    #[cfg(test)]
    fn find(&self, owner: usize) -> Option<usize> {
        if self.live == 0 {
            return None;
        }
        let mask = self.keys.len() - 1;
        let mut i = hash(owner, mask);
        loop {
            let k = &self.keys[i];
            if k.epoch != self.epoch {
                return None;
            }
            if k.owner == owner {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// The index of `owner`'s key, made live (with no ranges) if it was
    /// not; room must have been made ([`Hazards::reserve`]).
    #[inline]
    fn key_of(&mut self, owner: usize) -> usize {
        let mask = self.keys.len() - 1;
        let mut i = hash(owner, mask);
        loop {
            let k = &mut self.keys[i];
            if k.epoch != self.epoch {
                *k = Key {
                    owner,
                    epoch: self.epoch,
                    n: 0,
                    at: self.live as u32,
                };
                if self.live == self.ranges.len() {
                    self.ranges.push([Noted::default(); RANGES]);
                }
                self.live += 1;
                return i;
            }
            if k.owner == owner {
                return i;
            }
            i = (i + 1) & mask;
        }
    }

    /// Makes room for `more` keys (the table stays at most half full).
    #[inline]
    fn reserve(&mut self, more: usize) {
        if (self.live + more) * 2 > self.keys.len() {
            self.grow(more);
        }
    }

    /// Makes room for `more` keys besides the held first access, which it
    /// then notes in the table.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, more: usize) {
        let first = self.first.take();
        self.grow_table(more + usize::from(first.is_some()));
        if let Some((a, cmd)) = first {
            let i = self.key_of(a.owner);
            self.note_at(i, &a, cmd);
        }
    }

    /// Makes room for `more` keys: the thread's spare memory when the
    /// table has none, else a table twice as large.
    fn grow_table(&mut self, more: usize) {
        if self.keys.is_empty() {
            let spare = SPARE.with(|s| s.take());
            if !spare.keys.is_empty() {
                self.keys = spare.keys;
                self.ranges = spare.ranges;
                // The command being checked may have listed its accesses
                // already (`check_listed` grows the table): they move into
                // the spare list, whose old entries are the finished batch's.
                let mut listed = spare.listed;
                listed.clear();
                listed.append(&mut self.listed);
                self.listed = listed;
                self.epoch = spare.epoch;
                // Live keys of the earlier batch go with a bump.
                self.live = 1;
                self.clear();
                if (self.live + more) * 2 <= self.keys.len() {
                    return;
                }
            }
        }
        let len = ((self.live + more) * 2).next_power_of_two().max(32);
        let keys = std::mem::replace(&mut self.keys, vec![Key::default(); len]);
        self.ranges
            .reserve(len / 2 - self.ranges.len().min(len / 2));
        let old_epoch = self.epoch;
        self.epoch = 1;
        let mask = len - 1;
        // The ranges stay where they are; the keys move.
        for k in keys.iter().filter(|k| k.epoch == old_epoch) {
            let mut i = hash(k.owner, mask);
            while self.keys[i].epoch == 1 {
                i = (i + 1) & mask;
            }
            self.keys[i] = Key { epoch: 1, ..*k };
        }
    }

    /// The first hazard `a`, done by a command of `stage`, has with the
    /// ranges of key `i` (one with an earlier write, if there is one: the
    /// data flow is the better reason).
    #[inline]
    fn check_at(&self, i: usize, stage: Stage, a: &Access) -> Option<Conflict> {
        let since = self.resolved[stage_index(stage)];
        let mut found = None;
        let k = &self.keys[i];
        for r in &self.ranges[k.at as usize][..k.n as usize] {
            if r.gen >= since && (r.write() || a.write) && r.start < a.end && a.start < r.end {
                let kind = match (r.write(), a.write) {
                    (true, true) => HazardKind::WriteAfterWrite,
                    (true, false) => HazardKind::ReadAfterWrite,
                    _ => HazardKind::WriteAfterRead,
                };
                found = Some(Conflict {
                    kind,
                    earlier_command: r.cmd_write & CMD,
                    start: r.start.max(a.start),
                    end: r.end.min(a.end),
                });
                if r.write() {
                    break;
                }
            }
        }
        found
    }

    /// The hazard `a`, done by a command of `stage`, has with what earlier
    /// commands did and no barrier yet orders before `stage`.
    #[cfg(test)]
    fn check(&mut self, stage: Stage, a: &Access) -> Option<Conflict> {
        if self.first.is_some() {
            self.grow(0);
        }
        self.check_at(self.find(a.owner)?, stage, a)
    }

    /// Notes `a` alone as done by command `cmd`.
    #[cfg(test)]
    fn note(&mut self, a: &Access, cmd: u64) {
        self.reserve(1);
        let i = self.key_of(a.owner);
        self.note_at(i, a, cmd);
    }

    /// Checks and notes a command's only access, done at `stage` by
    /// command `cmd`, with one probe. On a hazard nothing is noted: it
    /// returns the hazard and the key to note the access at once the
    /// barrier is recorded ([`Hazards::note_one`]).
    #[inline]
    pub(crate) fn track_one(
        &mut self,
        stage: Stage,
        a: &Access,
        cmd: u64,
    ) -> Option<(Conflict, usize)> {
        if (self.live + 1) * 2 > self.keys.len() {
            if self.keys.is_empty() && self.first.is_none() {
                // The batch's first access: nothing to conflict with yet.
                self.first = Some((*a, cmd));
                return None;
            }
            self.grow(1);
        }
        let mask = self.keys.len() - 1;
        let mut i = hash(a.owner, mask);
        loop {
            let k = &mut self.keys[i];
            if k.epoch != self.epoch {
                // First seen since the last clear: no hazard, one range.
                let at = self.live;
                *k = Key {
                    owner: a.owner,
                    epoch: self.epoch,
                    n: 1,
                    at: at as u32,
                };
                let first = Noted {
                    start: a.start,
                    end: a.end,
                    gen: self.gen,
                    cmd_write: (cmd as u32 & CMD) | if a.write { WRITE } else { 0 },
                };
                if at == self.ranges.len() {
                    self.ranges.push([first; RANGES]);
                } else {
                    self.ranges[at][0] = first;
                }
                self.live += 1;
                self.last_noted = self.gen;
                return None;
            }
            if k.owner == a.owner {
                break;
            }
            i = (i + 1) & mask;
        }
        if let Some(c) = self.check_at(i, stage, a) {
            return Some((c, i));
        }
        self.note_at(i, a, cmd);
        None
    }

    /// Notes a command's only access (checked by [`Hazards::track_one`],
    /// which gave key `i`) as done by command `cmd`.
    #[inline]
    pub(crate) fn note_one(&mut self, i: usize, a: &Access, cmd: u64) {
        let k = &self.keys[i];
        let i = if k.epoch == self.epoch && k.owner == a.owner {
            i
        } else {
            // Cleared since the check (a barrier towards both stages).
            self.reserve(1);
            self.key_of(a.owner)
        };
        self.note_at(i, a, cmd);
    }

    /// Starts listing the accesses of the next command.
    #[inline]
    pub(crate) fn start(&mut self) {
        self.listed.clear();
    }

    /// Lists an access of the next command.
    #[inline]
    pub(crate) fn list(&mut self, a: Access) {
        self.listed.push((a, 0));
    }

    /// Checks the listed accesses, done by a command of `stage`, against
    /// what earlier commands did and no barrier yet orders before `stage`:
    /// the first hazard, with the index of the access in the list.
    #[inline]
    pub(crate) fn check_listed(&mut self, stage: Stage) -> Option<(Conflict, usize)> {
        self.reserve(self.listed.len());
        self.listed_epoch = self.epoch;
        let mut found = None;
        for j in 0..self.listed.len() {
            let a = self.listed[j].0;
            let i = self.key_of(a.owner);
            self.listed[j].1 = i as u32;
            if found.is_none() {
                if let Some(c) = self.check_at(i, stage, &a) {
                    found = Some((c, j));
                }
            }
        }
        found
    }

    /// The buffer of listed access `j` (its owner address).
    #[cfg(test)]
    fn listed_owner(&self, j: usize) -> usize {
        self.listed[j].0.owner
    }

    /// Notes the listed accesses (checked first: [`Hazards::check_listed`])
    /// as done by command `cmd`.
    #[inline]
    pub(crate) fn note_listed(&mut self, cmd: u64) {
        if self.listed_epoch != self.epoch {
            // Cleared since the check (a barrier towards both stages).
            self.reserve(self.listed.len());
            for j in 0..self.listed.len() {
                let i = self.key_of(self.listed[j].0.owner);
                self.listed[j].1 = i as u32;
            }
            self.listed_epoch = self.epoch;
        }
        for j in 0..self.listed.len() {
            let (a, i) = self.listed[j];
            self.note_at(i as usize, &a, cmd);
        }
    }

    /// Notes `a`, done by command `cmd`, in the ranges of live key `i`.
    #[inline]
    fn note_at(&mut self, i: usize, a: &Access, cmd: u64) {
        let gen = self.gen;
        self.last_noted = gen;
        let oldest = self.resolved[0].min(self.resolved[1]);
        let cmd_write = (cmd as u32 & CMD) | if a.write { WRITE } else { 0 };
        let ranges = &mut self.ranges[self.keys[i].at as usize];
        let mut n = self.keys[i].n as usize;
        let mut j = 0;
        let mut merged = false;
        while j < n {
            let r = &mut ranges[j];
            // Ordered before every stage, or covered by the new access
            // (which is as new and writes if the old one did): drop.
            if r.gen < oldest || (a.start <= r.start && r.end <= a.end && (a.write || !r.write())) {
                n -= 1;
                ranges[j] = ranges[n];
                continue;
            }
            if !merged
                && r.write() == a.write
                && r.gen == gen
                && r.start <= a.end
                && a.start <= r.end
            {
                r.start = r.start.min(a.start);
                r.end = r.end.max(a.end);
                r.cmd_write = cmd_write;
                merged = true;
            }
            j += 1;
        }
        if !merged {
            if n < RANGES {
                ranges[n] = Noted {
                    start: a.start,
                    end: a.end,
                    gen,
                    cmd_write,
                };
                n += 1;
            } else {
                // Full: the newest range absorbs it, wider and as new.
                let r = &mut ranges[n - 1];
                r.start = r.start.min(a.start);
                r.end = r.end.max(a.end);
                r.gen = gen;
                r.cmd_write = cmd_write | (r.cmd_write & WRITE);
            }
        }
        self.keys[i].n = n as u32;
    }
}

/// The index of the command whose index modulo 2^31 is `stored`, the
/// latest at or before `current`.
pub(crate) fn command_index(current: u64, stored: u32) -> u64 {
    let back = (current as u32).wrapping_sub(stored) & CMD;
    current.saturating_sub(u64::from(back))
}

impl Drop for Hazards {
    #[inline]
    fn drop(&mut self) {
        // A batch of one command never made its table: nothing to keep.
        if !self.keys.is_empty() {
            self.keep_spare();
        }
    }
}

impl Hazards {
    /// Hands the table's memory to the thread's spare (the larger of the
    /// two is kept) when it is small enough to keep.
    #[cold]
    #[inline(never)]
    fn keep_spare(&mut self) {
        if self.keys.len() <= KEEP_SLOTS {
            let memory = Memory {
                keys: std::mem::take(&mut self.keys),
                ranges: std::mem::take(&mut self.ranges),
                listed: std::mem::take(&mut self.listed),
                epoch: self.epoch,
            };
            // A thread being torn down has no spare to keep.
            let _ = SPARE.try_with(|s| {
                let kept = s.take();
                s.set(if kept.keys.len() <= memory.keys.len() {
                    memory
                } else {
                    kept
                });
            });
        }
    }
}

#[cfg(test)]
mod tests;
