//! A stream's queue-level state: which queue slot it records on, its last
//! submitted value, and the rules for what a submission on it waits for.
//! The stream handle ([`crate::Stream`]) and its submission live in the
//! recording layer; this is what the device holds for its default stream.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::reclaim::UseMark;

/// What batches of one stream share: its queue and its last submission.
#[derive(Debug)]
pub(crate) struct StreamState {
    /// Mark slot of the stream's queue.
    pub slot: usize,
    /// The last value submitted on the stream (on its queue's timeline).
    pub last: AtomicU64,
    /// The queue's user count, released when the stream drops.
    lease: Option<(Arc<[AtomicUsize]>, usize)>,
}

impl StreamState {
    /// A stream on mark slot `slot`; `lease` is the user count to release
    /// (none for the device's default stream).
    pub(crate) fn new(slot: usize, lease: Option<(Arc<[AtomicUsize]>, usize)>) -> StreamState {
        StreamState {
            slot,
            last: AtomicU64::new(0),
            lease,
        }
    }
}

impl Drop for StreamState {
    fn drop(&mut self) {
        if let Some((users, i)) = &self.lease {
            if let Some(u) = users.get(*i) {
                u.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

/// Which values of `need` a submission on queue slot `slot` waits for:
/// the other queues' values (a semaphore wait each) and the value on its
/// own queue (0: none). Values `completed` reaches are dropped; so are own
/// values from `first_value` on (the batch's own earlier chunks), when the
/// batch has submitted (`first_value` > 0).
pub(crate) fn plan_waits(
    need: &UseMark,
    slot: usize,
    first_value: u64,
    completed: &UseMark,
) -> (UseMark, u64) {
    let mut others = UseMark::default();
    let mut own = 0;
    for (s, v) in need.points() {
        if v <= completed.get(s) {
            continue;
        }
        if s != slot {
            others.set(s, v);
        } else if first_value == 0 || v < first_value {
            own = v;
        }
    }
    (others, own)
}

/// The compute queue (by position among the family's queues) a new
/// stream should use: the one with the fewest streams, the first of equals.
pub(crate) fn pick_queue(users: &[usize]) -> usize {
    users
        .iter()
        .enumerate()
        .min_by_key(|&(i, &u)| (u, i))
        .map_or(0, |(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::{pick_queue, plan_waits};
    use crate::reclaim::UseMark;

    #[test]
    fn waits_skip_what_completed_and_the_batchs_own_chunks() {
        let need = UseMark::at(0, 9)
            .join(UseMark::at(1, 4))
            .join(UseMark::at(3, 7));
        let done = UseMark::at(1, 4).join(UseMark::at(3, 2));
        // First submission of a batch on slot 0: everything pending counts.
        let (others, own) = plan_waits(&need, 0, 0, &done);
        assert_eq!(others.points().collect::<Vec<_>>(), vec![(3, 7)]);
        assert_eq!(own, 9);
        // A later chunk of a batch that began at 8: 9 is its own chunk.
        assert_eq!(plan_waits(&need, 0, 8, &done).1, 0);
        // ... and one that began at 10: 9 came before it.
        assert_eq!(plan_waits(&need, 0, 10, &done).1, 9);
        // On slot 3 the roles swap; slot 0's value is another queue's.
        let (others, own) = plan_waits(&need, 3, 0, &done);
        assert_eq!(others.points().collect::<Vec<_>>(), vec![(0, 9)]);
        assert_eq!(own, 7);
        // Everything complete: nothing to wait for.
        let (others, own) = plan_waits(&need, 0, 0, &need);
        assert!(others.is_empty() && own == 0);
    }

    #[test]
    fn distinct_queues_first_then_least_used() {
        // The default stream holds queue 0.
        assert_eq!(pick_queue(&[1, 0, 0]), 1);
        assert_eq!(pick_queue(&[1, 1, 0]), 2);
        assert_eq!(pick_queue(&[1, 1, 1]), 0);
        assert_eq!(pick_queue(&[2, 1, 1]), 1);
        assert_eq!(pick_queue(&[2, 2, 1]), 2);
        // A freed queue is reused before sharing.
        assert_eq!(pick_queue(&[1, 0, 1]), 1);
        // One queue (lavapipe): everything shares it.
        assert_eq!(pick_queue(&[5]), 0);
        assert_eq!(pick_queue(&[]), 0);
    }
}
