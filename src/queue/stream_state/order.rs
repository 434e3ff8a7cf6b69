//! The order of a stream's batches: a batch is one unit of it, whatever
//! its chunking.
//!
//! A batch takes its place when it first submits (its first chunk, or its
//! whole self). While a batch that took its place earlier is still open
//! (it submitted chunks as it grew and has not ended), a later batch's
//! submissions are held back: their work is queued here, in order, and run
//! (submitted) by whoever ends the open batch, under the same lock, so
//! nothing slips in between. A held-back batch still open then becomes the
//! open one. A batch ends when it is submitted or dropped; a dropped
//! batch's submitted chunks stay submitted.
//!
//! Nothing here names what a batch is: held-back work is a closure, and a
//! held-back batch's completion value is a [`PendingMark`] filled by it.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::task::Waker;
use std::thread::ThreadId;
use std::time::Duration;

use ash::vk;

use crate::error::Result;
use crate::reclaim::UseMark;

/// Work held back behind an open batch; run, in order, under the stream's
/// order lock, so it must not take that lock.
pub(crate) type Deferred = Box<dyn FnOnce() + Send>;

/// Whether a submission goes to the queue now or is held back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Submit now, holding the order lock.
    Now,
    /// Queue the work ([`BatchOrder::defer`]); an earlier batch is open.
    Later,
}

/// A batch held back behind the open one.
struct Held {
    place: u64,
    /// The thread that last submitted a chunk of it.
    owner: ThreadId,
    ended: bool,
    work: Vec<Deferred>,
    /// The completion its ticket waits for (set when it ends).
    pending: Option<Arc<PendingMark>>,
}

/// Where a stream's batches stand: the open one and those held back.
/// Invariant: something is held back only while a batch is open.
#[derive(Default)]
pub(crate) struct BatchOrder {
    /// Places handed out so far (a batch's place is its number).
    placed: u64,
    /// The open batch's place (0: none).
    open: u64,
    /// The thread that last submitted a chunk of the open batch.
    owner: Option<ThreadId>,
    held: VecDeque<Held>,
}

impl std::fmt::Debug for BatchOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchOrder")
            .field("open", &self.open)
            .field(
                "held",
                &self.held.iter().map(|h| h.place).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl BatchOrder {
    /// Whether batch `place` (0: not placed yet; it is given a place here
    /// when it needs one) submits now or is held back. `ends`: this is the
    /// batch's last submission (a batch that submits whole while nothing
    /// is open needs no place).
    pub(crate) fn turn(&mut self, place: &mut u64, ends: bool) -> Turn {
        if self.open == 0 {
            if !ends {
                if *place == 0 {
                    self.placed += 1;
                    *place = self.placed;
                }
                self.open = *place;
                self.owner = Some(std::thread::current().id());
            }
            return Turn::Now;
        }
        if *place == self.open {
            self.owner = Some(std::thread::current().id());
            return Turn::Now;
        }
        let me = std::thread::current().id();
        match self
            .held
            .iter_mut()
            .find(|h| h.place == *place && *place != 0)
        {
            Some(h) => h.owner = me,
            None => {
                if *place == 0 {
                    self.placed += 1;
                    *place = self.placed;
                }
                self.held.push_back(Held {
                    place: *place,
                    owner: me,
                    ended: false,
                    work: Vec::new(),
                    pending: None,
                });
            }
        }
        Turn::Later
    }

    /// Queues `work` behind batch `place`'s earlier work (it was told
    /// [`Turn::Later`]); runs it at once if `place` is no longer held back.
    pub(crate) fn defer(&mut self, place: u64, work: Deferred) {
        match self.held.iter_mut().find(|h| h.place == place) {
            Some(h) => h.work.push(work),
            None => work(),
        }
    }

    /// Ends batch `place`: if it is the open one, the batches held back
    /// behind it are submitted, in order, up to the next one still open
    /// (which becomes the open one); if it is held back, it is marked ended
    /// (its work runs in its turn), with `pending` its completion.
    pub(crate) fn end(&mut self, place: u64, pending: Option<Arc<PendingMark>>) {
        if place == 0 {
            return;
        }
        if self.open == place {
            self.open = 0;
            self.owner = None;
            self.release();
        } else if let Some(h) = self.held.iter_mut().find(|h| h.place == place) {
            h.ended = true;
            h.pending = pending;
        }
    }

    /// Runs held-back work while no batch is open.
    fn release(&mut self) {
        while self.open == 0 {
            let Some(h) = self.held.pop_front() else {
                break;
            };
            for w in h.work {
                w();
            }
            if !h.ended {
                self.open = h.place;
                self.owner = Some(h.owner);
            }
        }
    }

    /// Whether batch `place` is the open one.
    #[cfg(test)]
    pub(crate) fn is_open(&self, place: u64) -> bool {
        place != 0 && self.open == place
    }

    /// Whether batch `place` is held back (its work not yet submitted).
    pub(crate) fn is_held(&self, place: u64) -> bool {
        self.held.iter().any(|h| h.place == place)
    }

    /// Whether no batch is open (nor, then, held back).
    pub(crate) fn is_clear(&self) -> bool {
        self.open == 0
    }

    /// Whether a batch that holds back `place` (the open one, or one held
    /// back before it and not ended; every one for `u64::MAX`) belongs to
    /// the calling thread: waiting for `place` there would never end.
    /// False once `place` is no longer held back.
    pub(crate) fn held_by_caller(&self, place: u64) -> bool {
        if self.open == 0 || (place != u64::MAX && !self.is_held(place)) {
            return false;
        }
        let me = std::thread::current().id();
        self.owner == Some(me)
            || self
                .held
                .iter()
                .take_while(|h| h.place != place)
                .any(|h| !h.ended && h.owner == me)
    }

    /// The completions of the batches held back that have ended (what a
    /// ticket for "everything submitted on the stream" also waits for).
    pub(crate) fn pending(&self) -> Vec<Arc<PendingMark>> {
        self.held.iter().filter_map(|h| h.pending.clone()).collect()
    }
}

/// The completion of a batch held back when it was submitted: empty until
/// its work reaches the queue, then its value (or the error that stopped
/// it).
#[derive(Debug)]
pub(crate) struct PendingMark {
    /// The batch's place in its stream.
    pub place: u64,
    state: Mutex<PendingState>,
    filled: Condvar,
}

#[derive(Debug, Default)]
struct PendingState {
    mark: Option<Result<UseMark>>,
    wakers: Vec<Waker>,
    /// Query pools whose last owner dropped before the value was known.
    orphans: Vec<vk::QueryPool>,
}

impl PendingMark {
    /// An empty completion for the batch at `place`.
    pub(crate) fn new(place: u64) -> Arc<PendingMark> {
        Arc::new(PendingMark {
            place,
            state: Mutex::new(PendingState::default()),
            filled: Condvar::new(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, PendingState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The value, once known.
    pub(crate) fn get(&self) -> Option<Result<UseMark>> {
        self.state().mark.clone()
    }

    /// Fills in the value, wakes every waiter and returns the query pools
    /// to release once it passes.
    pub(crate) fn fill(&self, mark: Result<UseMark>) -> Vec<vk::QueryPool> {
        let mut s = self.state();
        s.mark = Some(mark);
        for w in s.wakers.drain(..) {
            w.wake();
        }
        let orphans = std::mem::take(&mut s.orphans);
        drop(s);
        self.filled.notify_all();
        orphans
    }

    /// Waits up to `limit` for the value.
    pub(crate) fn wait(&self, limit: Duration) {
        let s = self.state();
        if s.mark.is_none() {
            drop(
                self.filled
                    .wait_timeout(s, limit)
                    .unwrap_or_else(|p| p.into_inner()),
            );
        }
    }

    /// The value if known; else `waker` is woken when it is.
    pub(crate) fn register(&self, waker: &Waker) -> Option<Result<UseMark>> {
        let mut s = self.state();
        if s.mark.is_none() {
            if !s.wakers.iter().any(|w| w.will_wake(waker)) {
                s.wakers.push(waker.clone());
            }
            return None;
        }
        s.mark.clone()
    }

    /// Hands over `pools` to release once the batch completes: the mark to
    /// release them at when it is known, else `None` (they are returned
    /// by [`PendingMark::fill`]).
    pub(crate) fn orphan(&self, pools: Vec<vk::QueryPool>) -> Option<UseMark> {
        let mut s = self.state();
        match &s.mark {
            Some(m) => Some(m.clone().unwrap_or_default()),
            None => {
                s.orphans.extend(pools);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn log_to(log: &Arc<Mutex<Vec<u32>>>, v: u32) -> Deferred {
        let log = log.clone();
        Box::new(move || log.lock().unwrap().push(v))
    }

    #[test]
    fn a_whole_batch_with_nothing_open_needs_no_place() {
        let mut o = BatchOrder::default();
        let mut p = 0;
        assert_eq!(o.turn(&mut p, true), Turn::Now);
        assert_eq!(p, 0);
        assert!(o.is_clear());
    }

    #[test]
    fn batches_behind_an_open_one_run_when_it_ends_in_order() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut o = BatchOrder::default();
        let (mut a, mut b, mut c) = (0, 0, 0);
        assert_eq!(o.turn(&mut a, false), Turn::Now);
        assert!(o.is_open(a));
        // B whole, held back; C's first chunk held back, C still open.
        assert_eq!(o.turn(&mut b, true), Turn::Later);
        o.defer(b, log_to(&log, 1));
        let pb = PendingMark::new(b);
        o.end(b, Some(pb.clone()));
        assert_eq!(o.turn(&mut c, false), Turn::Later);
        o.defer(c, log_to(&log, 2));
        assert!(o.is_held(b) && o.is_held(c));
        assert_eq!(o.pending().len(), 1);
        // A's later chunks go now.
        assert_eq!(o.turn(&mut a, false), Turn::Now);
        assert!(log.lock().unwrap().is_empty());
        o.end(a, None);
        assert_eq!(*log.lock().unwrap(), vec![1, 2]);
        // C is the open one now: it submits directly; a new batch waits.
        assert!(o.is_open(c) && !o.is_held(b));
        assert_eq!(o.turn(&mut c, false), Turn::Now);
        let mut d = 0;
        assert_eq!(o.turn(&mut d, true), Turn::Later);
        o.defer(d, log_to(&log, 3));
        o.end(d, None);
        o.end(c, None);
        assert_eq!(*log.lock().unwrap(), vec![1, 2, 3]);
        assert!(o.is_clear() && o.pending().is_empty());
    }

    #[test]
    fn a_dropped_held_batch_keeps_its_work_in_place() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut o = BatchOrder::default();
        let (mut a, mut b, mut c) = (0, 0, 0);
        o.turn(&mut a, false);
        assert_eq!(o.turn(&mut b, false), Turn::Later);
        o.defer(b, log_to(&log, 1));
        o.end(b, None); // dropped
        assert_eq!(o.turn(&mut c, true), Turn::Later);
        o.defer(c, log_to(&log, 2));
        o.end(c, None);
        o.end(a, None); // dropped too: ends all the same
        assert_eq!(*log.lock().unwrap(), vec![1, 2]);
        assert!(o.is_clear());
    }

    #[test]
    fn only_the_callers_own_open_batch_makes_a_wait_hopeless() {
        let mut o = BatchOrder::default();
        let (mut a, mut b) = (0, 0);
        assert!(!o.held_by_caller(u64::MAX));
        o.turn(&mut a, false);
        o.turn(&mut b, true);
        assert!(o.held_by_caller(b));
        // The open batch submitted from another thread: waiting is fine.
        let mut a2 = a;
        std::thread::scope(|s| {
            s.spawn(|| assert_eq!(o.turn(&mut a2, false), Turn::Now));
        });
        assert!(!o.held_by_caller(b));
        // Released: nothing holds it back any more, whoever is open.
        let mut c = 0;
        o.turn(&mut c, false);
        o.end(b, None);
        o.end(a, None);
        assert!(o.is_open(c) && !o.held_by_caller(b) && o.held_by_caller(u64::MAX));
    }

    #[test]
    fn a_pending_mark_wakes_and_hands_back_orphans() {
        struct Count(AtomicUsize);
        impl std::task::Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let n = Arc::new(Count(AtomicUsize::new(0)));
        let w = Waker::from(n.clone());
        let p = PendingMark::new(3);
        assert!(p.get().is_none() && p.register(&w).is_none());
        assert!(p.orphan(vec![vk::QueryPool::null()]).is_none());
        let m = UseMark::at(0, 7);
        assert_eq!(p.fill(Ok(m)).len(), 1);
        assert_eq!(n.0.load(Ordering::Relaxed), 1);
        assert_eq!(p.get().unwrap().unwrap(), m);
        assert_eq!(p.orphan(Vec::new()), Some(m));
        p.wait(Duration::from_secs(10)); // returns at once
    }
}
