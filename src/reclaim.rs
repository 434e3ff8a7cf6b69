//! Deferred release of what in-flight GPU work still uses.
//!
//! Each object the GPU may touch carries the last timeline value, on each
//! queue, of a submission that used it (a [`UseMark`]: one value per queue
//! slot). When its owner drops it before those values complete, its Vulkan
//! handles are parked here and released by the next maintenance pass that
//! sees the values done, or at device teardown after the queues are idle.
//! Dropping never blocks, and the parked handles hold no reference to the
//! device, so nothing forms a cycle.
//!
//! Queue slots: 0 is the default compute queue, 1 the transfer-only queue
//! (unused without one), 2.. further queues of the compute family (streams).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

mod shared;

pub(crate) use shared::{Link, SharedUse};

/// Bit of [`LastUse`]'s slot word set while it has graph links (above every
/// queue slot's bit, so the unlinked, never-used case still reads one zero
/// word).
const LINKED_BIT: u32 = 1 << 31;

/// Queue slots a mark tracks (the default compute queue, the transfer
/// queue, and up to `MAX_QUEUES - 2` further compute queues).
pub(crate) const MAX_QUEUES: usize = 10;
/// Slot of the default compute queue.
pub(crate) const SLOT_COMPUTE: usize = 0;
/// Slot of the transfer-only queue.
pub(crate) const SLOT_TRANSFER: usize = 1;
/// First slot of the further compute queues.
pub(crate) const SLOT_FIRST_EXTRA: usize = 2;

/// One timeline value per queue slot (0: no use there).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct UseMark {
    values: [u64; MAX_QUEUES],
}

impl UseMark {
    /// A mark of `value` on `slot` alone.
    #[inline]
    pub(crate) fn at(slot: usize, value: u64) -> UseMark {
        let mut m = UseMark::default();
        m.raise(slot, value);
        m
    }

    /// The value on `slot` (0 for a slot out of range).
    #[inline]
    pub(crate) fn get(&self, slot: usize) -> u64 {
        self.values.get(slot).copied().unwrap_or(0)
    }

    /// Raises the value on `slot` to at least `value`.
    #[inline]
    pub(crate) fn raise(&mut self, slot: usize, value: u64) {
        if let Some(v) = self.values.get_mut(slot) {
            *v = (*v).max(value);
        }
    }

    /// Sets the value on `slot`.
    #[inline]
    pub(crate) fn set(&mut self, slot: usize, value: u64) {
        if let Some(v) = self.values.get_mut(slot) {
            *v = value;
        }
    }

    /// The later of two marks, slot by slot (both reached).
    pub(crate) fn join(mut self, other: UseMark) -> UseMark {
        for (a, b) in self.values.iter_mut().zip(other.values) {
            *a = (*a).max(b);
        }
        self
    }

    /// Whether every value is reached in `completed`.
    #[inline]
    pub(crate) fn reached(&self, completed: UseMark) -> bool {
        self.values
            .iter()
            .zip(completed.values)
            .all(|(&v, c)| v <= c)
    }

    /// Whether no slot holds a value.
    pub(crate) fn is_empty(&self) -> bool {
        self.values.iter().all(|&v| v == 0)
    }

    /// The slots with a value, with it.
    pub(crate) fn points(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.values
            .iter()
            .enumerate()
            .filter(|(_, &v)| v > 0)
            .map(|(s, &v)| (s, v))
    }
}

/// The last use of one object, updated by submissions from any thread:
/// per queue slot, the last submission that used it and the last that
/// wrote it, and a bit per slot ever used (so the common case, an object
/// used on one queue only, reads one word to find nothing to order). Graph
/// launches are not recorded here one by one: a buffer a graph uses links
/// to the graph's [`SharedUse`] (one update per launch, whatever the number
/// of buffers), and marks and hazards include the links (a bit in the slot
/// word says there are any, so unlinked objects pay nothing more).
#[derive(Debug, Default)]
pub(crate) struct LastUse {
    used: [AtomicU64; MAX_QUEUES],
    written: [AtomicU64; MAX_QUEUES],
    slots: AtomicU32,
    links: Mutex<Vec<Link>>,
}

impl LastUse {
    /// Records a use on `slot` at `value` (a write when `writes`).
    #[inline]
    pub(crate) fn used_on(&self, slot: usize, value: u64, writes: bool) {
        let Some(u) = self.used.get(slot) else { return };
        u.fetch_max(value, Ordering::AcqRel);
        if writes {
            self.written[slot].fetch_max(value, Ordering::AcqRel);
        }
        let bit = 1u32 << slot;
        let slots = self.slots.load(Ordering::Acquire);
        if slots & bit == 0 {
            self.slots.fetch_or(bit, Ordering::AcqRel);
        }
        if slots & LINKED_BIT != 0 {
            // Graphs using this object must follow this use where it
            // conflicts with theirs.
            let links = self.links.lock().unwrap_or_else(|p| p.into_inner());
            for l in links.iter().filter(|l| writes || l.writes) {
                l.shared.others.used_on(slot, value, false);
            }
        }
    }
    /// The current mark: the last use on every slot (graph launches
    /// included).
    pub(crate) fn mark(&self) -> UseMark {
        let mut m = UseMark::default();
        let slots = self.slots.load(Ordering::Acquire);
        for (s, u) in self.used.iter().enumerate() {
            if slots & (1 << s) != 0 {
                m.set(s, u.load(Ordering::Acquire));
            }
        }
        if slots & LINKED_BIT != 0 {
            let links = self.links.lock().unwrap_or_else(|p| p.into_inner());
            for l in links.iter() {
                m = m.join(l.shared.launches.mark());
            }
        }
        m
    }
    /// Raises `need` to what a new use must follow, on every slot: every
    /// earlier use when the new one `writes`, else every earlier write.
    /// Returns whether it raised anything. The caller decides what its own
    /// queue's order already covers.
    #[inline]
    pub(crate) fn hazards(&self, writes: bool, need: &mut UseMark) -> bool {
        let slots = self.slots.load(Ordering::Acquire);
        if slots == 0 {
            return false;
        }
        let mut any = self.own_hazards(writes, need);
        if slots & LINKED_BIT != 0 {
            // A launch counts as a write where the graph writes this object.
            let links = self.links.lock().unwrap_or_else(|p| p.into_inner());
            for l in links.iter().filter(|l| writes || l.writes) {
                any |= l.shared.launches.hazards(true, need);
            }
        }
        any
    }

    /// [`LastUse::hazards`] without the graph links.
    #[inline]
    fn own_hazards(&self, writes: bool, need: &mut UseMark) -> bool {
        let slots = self.slots.load(Ordering::Acquire) & !LINKED_BIT;
        if slots == 0 {
            return false;
        }
        let src = if writes { &self.used } else { &self.written };
        let mut any = false;
        let mut bits = slots;
        while bits != 0 {
            let s = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let v = src[s].load(Ordering::Acquire);
            if v > need.get(s) {
                need.set(s, v);
                any = true;
            }
        }
        any
    }
}

/// Things waiting for the GPU to pass a mark.
#[derive(Debug)]
pub(crate) struct Deferred<T> {
    items: Vec<(UseMark, T)>,
}

impl<T> Default for Deferred<T> {
    fn default() -> Self {
        Deferred { items: Vec::new() }
    }
}

impl<T> Deferred<T> {
    /// Parks `item` until `mark` is reached.
    pub(crate) fn push(&mut self, mark: UseMark, item: T) {
        self.items.push((mark, item));
    }

    /// Removes and returns every item whose mark is reached.
    pub(crate) fn take_ready(&mut self, completed: UseMark) -> Vec<T> {
        let mut ready = Vec::new();
        let mut i = 0;
        while i < self.items.len() {
            if self.items[i].0.reached(completed) {
                ready.push(self.items.swap_remove(i).1);
            } else {
                i += 1;
            }
        }
        ready
    }

    /// Removes one item whose mark is reached, if any.
    pub(crate) fn take_one_ready(&mut self, completed: UseMark) -> Option<T> {
        let i = self.items.iter().position(|(m, _)| m.reached(completed))?;
        Some(self.items.swap_remove(i).1)
    }

    /// Removes the most recently parked item whose mark is reached, if any.
    pub(crate) fn take_last_ready(&mut self, completed: UseMark) -> Option<T> {
        let i = self.items.iter().rposition(|(m, _)| m.reached(completed))?;
        Some(self.items.remove(i).1)
    }

    /// Removes everything (teardown, after the queues are idle).
    pub(crate) fn take_all(&mut self) -> Vec<T> {
        self.items.drain(..).map(|(_, t)| t).collect()
    }

    /// How many items are parked.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether nothing is parked.
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(c: u64, t: u64) -> UseMark {
        UseMark::at(SLOT_COMPUTE, c).join(UseMark::at(SLOT_TRANSFER, t))
    }

    #[test]
    fn releases_only_what_both_queues_passed() {
        let mut d = Deferred::default();
        d.push(m(3, 0), "a");
        d.push(m(5, 0), "b");
        d.push(m(1, 4), "c");
        assert!(d.take_ready(m(2, 3)).is_empty());
        let mut r = d.take_ready(m(4, 3));
        r.sort();
        assert_eq!(r, vec!["a"]);
        assert_eq!(d.take_ready(m(4, 4)), vec!["c"]);
        assert_eq!(d.len(), 1);
        assert_eq!(d.take_one_ready(m(4, 4)), None);
        assert_eq!(d.take_one_ready(m(5, 0)), Some("b"));
        assert!(d.is_empty());
    }

    #[test]
    fn last_use_only_moves_forward() {
        let u = LastUse::default();
        assert_eq!(u.mark(), UseMark::default());
        u.used_on(SLOT_COMPUTE, 7, true);
        u.used_on(SLOT_COMPUTE, 3, false);
        u.used_on(SLOT_TRANSFER, 2, false);
        assert_eq!(u.mark(), m(7, 2));
        assert!(u.mark().reached(m(7, 2)) && !u.mark().reached(m(6, 9)));
    }

    #[test]
    fn marks_cover_every_slot() {
        let a = UseMark::at(5, 9);
        let b = UseMark::at(SLOT_COMPUTE, 3).join(UseMark::at(5, 4));
        let j = a.join(b);
        assert_eq!(j.get(5), 9);
        assert_eq!(j.get(SLOT_COMPUTE), 3);
        assert_eq!(j.points().collect::<Vec<_>>(), vec![(0, 3), (5, 9)]);
        assert!(!j.reached(UseMark::at(5, 9)));
        assert!(j.reached(UseMark::at(5, 9).join(UseMark::at(SLOT_COMPUTE, 3))));
        assert!(UseMark::default().is_empty() && !j.is_empty());
        assert_eq!(UseMark::at(MAX_QUEUES, 1), UseMark::default());
    }

    #[test]
    fn hazards_order_writes_after_uses_and_reads_after_writes() {
        let u = LastUse::default();
        let mut need = UseMark::default();
        assert!(!u.hazards(true, &mut need));
        u.used_on(3, 10, false);
        u.used_on(4, 7, true);
        u.used_on(3, 8, true);
        // A read follows only writes.
        let mut r = UseMark::default();
        assert!(u.hazards(false, &mut r));
        assert_eq!(r.points().collect::<Vec<_>>(), vec![(3, 8), (4, 7)]);
        // A write follows every use.
        let mut w = UseMark::default();
        assert!(u.hazards(true, &mut w));
        assert_eq!(w.points().collect::<Vec<_>>(), vec![(3, 10), (4, 7)]);
        // Already needed: nothing raised.
        assert!(!u.hazards(true, &mut w));
        assert_eq!(u.mark(), w);
    }

    #[test]
    fn take_all_empties() {
        let mut d = Deferred::default();
        d.push(m(9, 9), 1);
        d.push(m(1, 1), 2);
        assert_eq!(d.take_all().len(), 2);
        assert!(d.is_empty());
    }
}
