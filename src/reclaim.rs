//! Deferred release of what in-flight GPU work still uses.
//!
//! Each object the GPU may touch carries the last timeline value, on each
//! queue, of a submission that used it (a [`UseMark`]). When its owner drops
//! it before those values complete, its Vulkan handles are parked here and
//! released by the next maintenance pass that sees the values done, or at
//! device teardown after the queues are idle. Dropping never blocks, and the
//! parked handles hold no reference to the device, so nothing forms a cycle.

use std::sync::atomic::{AtomicU64, Ordering};

/// Timeline values on the compute and transfer queues.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct UseMark {
    /// Value on the compute queue's timeline.
    pub compute: u64,
    /// Value on the transfer queue's timeline (0 without a transfer queue).
    pub transfer: u64,
}

impl UseMark {
    /// Whether both values are reached in `completed`.
    pub(crate) fn reached(self, completed: UseMark) -> bool {
        self.compute <= completed.compute && self.transfer <= completed.transfer
    }
}

/// The last use of one object, updated by submissions from any thread.
#[derive(Debug, Default)]
pub(crate) struct LastUse {
    compute: AtomicU64,
    transfer: AtomicU64,
}

impl LastUse {
    /// Records a compute-queue use at `value`.
    pub(crate) fn used_compute(&self, value: u64) {
        self.compute.fetch_max(value, Ordering::AcqRel);
    }
    /// Records a transfer-queue use at `value`.
    pub(crate) fn used_transfer(&self, value: u64) {
        self.transfer.fetch_max(value, Ordering::AcqRel);
    }
    /// The current mark.
    pub(crate) fn mark(&self) -> UseMark {
        UseMark {
            compute: self.compute.load(Ordering::Acquire),
            transfer: self.transfer.load(Ordering::Acquire),
        }
    }
    /// The transfer-queue value only.
    pub(crate) fn transfer(&self) -> u64 {
        self.transfer.load(Ordering::Acquire)
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
        UseMark {
            compute: c,
            transfer: t,
        }
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
        u.used_compute(7);
        u.used_compute(3);
        u.used_transfer(2);
        assert_eq!(u.mark(), m(7, 2));
        assert!(u.mark().reached(m(7, 2)) && !u.mark().reached(m(6, 9)));
        assert_eq!(u.transfer(), 2);
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
