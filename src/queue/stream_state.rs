//! A stream's queue-level state: which queue slot it records on, its last
//! submitted value, the order of its batches ([`BatchOrder`]), and the rules
//! for what a submission on it waits for. The stream handle
//! ([`crate::Stream`]) and its submission live in the recording layer;
//! this is what the device holds for its default stream.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::reclaim::UseMark;

mod order;
pub(crate) use order::{BatchOrder, Deferred, PendingMark, Turn};

/// Numbers streams in creation order (for error messages).
static NEXT_STREAM: AtomicU64 = AtomicU64::new(0);

/// How long a blocked wait sleeps before it checks again whether the
/// batch holding it back has moved to the waiting thread.
const RECHECK: Duration = Duration::from_millis(50);

/// What batches of one stream share: its queue, its last submission and
/// the order of its batches.
#[derive(Debug)]
pub(crate) struct StreamState {
    /// Mark slot of the stream's queue.
    pub slot: usize,
    /// The stream's number, unique in the process (error messages).
    pub id: u64,
    /// The last value submitted on the stream (on its queue's timeline).
    pub last: AtomicU64,
    /// The open batch and the batches held back behind it.
    order: Mutex<BatchOrder>,
    /// Whether a batch of the stream is open (and, while one ends, until
    /// the batches held back behind it reached the queue): written under
    /// the order lock before an opening batch submits, cleared once the
    /// order is clear again. A whole batch submits without the order lock,
    /// reading this under the queue's lock ([`crate::queue::Order::gate`]):
    /// clear there, no batch of the stream can have chunks on the queue
    /// with more to come, nor batches held back.
    pub busy: AtomicBool,
    /// Signalled when a batch of the stream ends.
    ended: Condvar,
    /// The queue's user count, released when the stream drops.
    lease: Option<(Arc<[AtomicUsize]>, usize)>,
}

impl StreamState {
    /// A stream on mark slot `slot`; `lease` is the user count to release
    /// (none for the device's default stream).
    pub(crate) fn new(slot: usize, lease: Option<(Arc<[AtomicUsize]>, usize)>) -> StreamState {
        StreamState {
            slot,
            id: NEXT_STREAM.fetch_add(1, Ordering::Relaxed),
            last: AtomicU64::new(0),
            order: Mutex::new(BatchOrder::default()),
            busy: AtomicBool::new(false),
            ended: Condvar::new(),
            lease,
        }
    }

    /// The stream's order, locked: every submission on the stream holds it
    /// (uncontended unless two threads submit on one stream at once).
    pub(crate) fn order(&self) -> MutexGuard<'_, BatchOrder> {
        self.order.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets [`StreamState::busy`] from `order` (the stream's order, locked):
    /// after a batch took its turn (before it submits), and after one ended.
    pub(crate) fn note_order(&self, order: &BatchOrder) {
        self.busy.store(!order.is_clear(), Ordering::Relaxed);
    }

    /// Ends batch `place` (0: a batch never placed, nothing to do): see
    /// [`BatchOrder::end`]; `work` (for a batch still held back) runs after its
    /// chunks, `pending` is filled by it.
    pub(crate) fn end(
        &self,
        place: u64,
        work: Option<Deferred>,
        pending: Option<Arc<PendingMark>>,
    ) {
        if place == 0 {
            return;
        }
        let mut o = self.order();
        if let Some(w) = work {
            o.defer(place, w);
        }
        o.end(place, pending);
        self.note_order(&o);
        drop(o);
        self.ended.notify_all();
    }

    /// Wakes the threads waiting for a batch of the stream to end (call
    /// after ending one through [`StreamState::order`]).
    pub(crate) fn notify_ended(&self) {
        self.ended.notify_all();
    }

    /// The error of a wait for `what` that could never end.
    pub(crate) fn held_open(&self, what: &'static str) -> Error {
        Error::BatchHeldOpen {
            what,
            stream: self.id,
            queue: self.slot,
        }
    }

    /// Blocks until the chunks batch `place` submitted while held back
    /// have reached the queue; [`Error::BatchHeldOpen`] when a batch
    /// holding them back belongs to the calling thread.
    pub(crate) fn wait_released(&self, place: u64, what: &'static str) -> Result<()> {
        let mut o = self.order();
        loop {
            if !o.is_held(place) {
                return Ok(());
            }
            if o.held_by_caller(place) {
                return Err(self.held_open(what));
            }
            o = self
                .ended
                .wait_timeout(o, RECHECK)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Blocks until no batch of the stream is open and returns the order,
    /// locked: the caller submits a whole batch in the stream's order while
    /// it holds it. [`Error::BatchHeldOpen`] when the open batch (or one
    /// held back) belongs to the calling thread.
    pub(crate) fn whole_turn(&self, what: &'static str) -> Result<MutexGuard<'_, BatchOrder>> {
        let mut o = self.order();
        loop {
            if o.is_clear() {
                return Ok(o);
            }
            if o.held_by_caller(u64::MAX) {
                return Err(self.held_open(what));
            }
            o = self
                .ended
                .wait_timeout(o, RECHECK)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// The value of `pending` (a batch of this stream held back when it was
    /// submitted), waiting up to `timeout` for it (`None`: no limit).
    /// [`Error::BatchHeldOpen`] when a batch holding it back belongs to the
    /// calling thread; [`Error::Timeout`] when the limit passes first.
    pub(crate) fn resolve(
        &self,
        pending: &PendingMark,
        timeout: Option<Duration>,
        what: &'static str,
    ) -> Result<UseMark> {
        let start = Instant::now();
        loop {
            if let Some(r) = pending.get() {
                return r;
            }
            if self.order().held_by_caller(pending.place) {
                return Err(self.held_open(what));
            }
            let step = match timeout {
                Some(t) => {
                    let left = t.saturating_sub(start.elapsed());
                    if left.is_zero() {
                        return Err(Error::Timeout {
                            waited: start.elapsed(),
                        });
                    }
                    left.min(RECHECK)
                }
                None => RECHECK,
            };
            pending.wait(step);
        }
    }

    /// [`StreamState::resolve`] without blocking: the value once known,
    /// the error when it could never come, else `None` with `waker`
    /// registered to be woken when it comes.
    pub(crate) fn poll_resolve(
        &self,
        pending: &PendingMark,
        waker: &std::task::Waker,
        what: &'static str,
    ) -> Option<Result<UseMark>> {
        if let Some(r) = pending.get() {
            return Some(r);
        }
        if self.order().held_by_caller(pending.place) {
            return Some(Err(self.held_open(what)));
        }
        pending.register(waker)
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
    use super::{pick_queue, plan_waits, StreamState, Turn};
    use crate::reclaim::UseMark;
    use std::sync::atomic::Ordering;

    #[test]
    fn busy_from_an_opening_turn_until_the_held_back_batches_went() {
        let s = StreamState::new(0, None);
        let busy = || s.busy.load(Ordering::Relaxed);
        let turn = |place: &mut u64, ends: bool| {
            let mut o = s.order();
            let t = o.turn(place, ends);
            s.note_order(&o);
            t
        };
        // A whole batch with nothing open leaves the stream clear.
        let mut w = 0;
        assert_eq!(turn(&mut w, true), Turn::Now);
        assert!(!busy());
        // A batch that submits a chunk opens it, before it submits.
        let (mut a, mut b, mut c) = (0, 0, 0);
        assert_eq!(turn(&mut a, false), Turn::Now);
        assert!(busy());
        // B (still open) and C (whole) are held back behind A.
        assert_eq!(turn(&mut b, false), Turn::Later);
        assert_eq!(turn(&mut c, true), Turn::Later);
        s.order().defer(c, Box::new(|| ()));
        s.end(c, None, None);
        // A ends: C goes to the queue, B is the open one now.
        s.end(a, None, None);
        assert!(busy());
        s.end(b, None, None);
        assert!(!busy());
    }

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
