//! Tickets: completion of submitted work.
//!
//! A ticket is a timeline value on the queue its batch ran on (a joined
//! ticket: one value per queue, the latest of each). Waiting spins briefly
//! on the timeline, then blocks (see [`DeviceOptions::wait_spin`]); a wait
//! on a graph launch blocks until shortly before the graph's launches
//! usually end, then spins (see `Graph::learned_duration`). A ticket
//! holds nothing the GPU uses: buffers record their own last use, so
//! dropping a ticket early neither blocks nor frees anything in flight.
//! Tickets are cheap to clone, and [`crate::Batch::wait_for`] orders a batch
//! after one on the GPU, with no host wait. With
//! [`DeviceOptions::validation_errors`] on, the wait of a batch's ticket
//! also reports the validation messages of the batch's span
//! ([`Error::Validation`]; the rule is in [`crate::ValidationLog`]).
//!
//! A batch held back behind an open batch of its stream (the crate guide's
//! "Ordering") gets a ticket whose value is not known yet: waiting on it
//! blocks until the batch reaches the queue, then waits for the GPU; when
//! the open batch that holds it back belongs to the waiting thread, the
//! wait could never end and returns [`Error::BatchHeldOpen`] at once.
//!
//! [`DeviceOptions::wait_spin`]: crate::DeviceOptions::wait_spin
//! [`DeviceOptions::validation_errors`]: crate::DeviceOptions::validation_errors

use std::sync::Arc;
use std::time::{Duration, Instant};

use ash::vk;

use crate::device::{DeviceInner, Garbage};
use crate::error::{Error, Result};
use crate::pace::{Pace, Seen};
use crate::profile::Profile;
use crate::queue::{PendingMark, Queue, StreamState};
use crate::reclaim::UseMark;

/// Timestamp queries a profiled batch wrote.
pub(crate) struct QueryReadout {
    pub pools: Vec<vk::QueryPool>,
    pub count: u32,
    pub labels: Vec<String>,
}

/// A profiled batch's query pools, released when the last ticket clone
/// holding them drops.
struct Queries {
    dev: Arc<DeviceInner>,
    mark: UseMark,
    /// The batch's completion while it is held back (its mark unknown).
    pending: Option<Arc<PendingMark>>,
    readout: QueryReadout,
}

impl Drop for Queries {
    fn drop(&mut self) {
        let pools = std::mem::take(&mut self.readout.pools);
        let mark = match &self.pending {
            // Not known yet: the batch's last work releases them.
            Some(p) => match p.orphan(pools.clone()) {
                Some(m) => m,
                None => return,
            },
            None => self.mark,
        };
        for p in pools {
            self.dev.release(mark, Garbage::QueryPool(p));
        }
    }
}

/// A held-back batch's completion, with its stream.
type Held = (Arc<StreamState>, Arc<PendingMark>);

/// The completion of submitted work: a batch, or several joined
/// ([`Ticket::join`]). Cheap to clone (clones are the same completion);
/// `Send + Sync`.
#[must_use = "a ticket does nothing unless waited on or polled"]
#[derive(Clone)]
pub struct Ticket {
    dev: Arc<DeviceInner>,
    /// The queue slot of the batch the ticket was made for.
    slot: usize,
    mark: UseMark,
    queries: Option<Arc<Queries>>,
    /// Where the validation span of the ticket's batch starts in the
    /// device's log (`None`: waits report no validation messages).
    validation_from: Option<usize>,
    /// What few tickets carry: completions of held-back batches, launch
    /// reports, the graph's wait pacing (none for nearly every ticket).
    extras: Option<Box<Extras>>,
}

/// A ticket's launch reports, each with its launch's token.
type Reports = Vec<(Arc<dyn LaunchReport>, u64)>;

/// The parts of a ticket beyond a batch's value.
#[derive(Default, Clone)]
struct Extras {
    /// Completions of batches held back when they were submitted, joined
    /// with the ticket's mark.
    held: Vec<Held>,
    /// Reports a wait reads once the work completed, each with its
    /// launch's token.
    reports: Reports,
    /// The launching graph's learned duration and when this launch was
    /// submitted: its waits are paced (`crate::pace`). A joined ticket
    /// has none.
    pace: Option<(Arc<Pace>, Instant)>,
}

/// What a launch's work tells its ticket beyond completing: read by
/// [`Ticket::wait`] once the work has completed (the op batch's report of
/// the bound flags its kernels raised). Each launch takes a token as it is
/// submitted, in submission order.
pub(crate) trait LaunchReport: Send + Sync {
    /// The token of the launch just submitted.
    fn launched(&self) -> u64;
    /// The report of launch `token`, read after its work completed: an
    /// error the launch raised, or `Ok`.
    fn check(&self, token: u64) -> Result<()>;
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("queue", &self.slot)
            .field("points", &self.mark.points().collect::<Vec<_>>())
            .finish()
    }
}

impl Ticket {
    /// A ticket for `mark`, made for a batch on queue slot `slot`.
    pub(crate) fn new(
        dev: Arc<DeviceInner>,
        slot: usize,
        mark: UseMark,
        queries: Option<QueryReadout>,
    ) -> Ticket {
        let queries = queries.map(|readout| {
            Arc::new(Queries {
                dev: dev.clone(),
                mark,
                pending: None,
                readout,
            })
        });
        Ticket {
            dev,
            slot,
            mark,
            queries,
            validation_from: None,
            extras: None,
        }
    }

    /// This ticket with `report` read by its waits, for the launch just
    /// submitted (which takes its token now).
    pub(crate) fn with_report(mut self, report: Arc<dyn LaunchReport>) -> Ticket {
        let token = report.launched();
        self.extras
            .get_or_insert_with(Default::default)
            .reports
            .push((report, token));
        self
    }

    /// This ticket with its waits paced by `pace`, for a launch submitted
    /// at `at` (see `crate::pace`).
    pub(crate) fn with_pace(mut self, pace: Arc<Pace>, at: Instant) -> Ticket {
        self.extras.get_or_insert_with(Default::default).pace = Some((pace, at));
        self
    }

    /// A ticket for a batch of `stream` held back behind an open batch:
    /// complete once `pending` is filled and its value passes.
    pub(crate) fn held(
        dev: Arc<DeviceInner>,
        stream: Arc<StreamState>,
        pending: Arc<PendingMark>,
        queries: Option<QueryReadout>,
    ) -> Ticket {
        let mut t = Ticket::new(dev, stream.slot, UseMark::default(), None);
        t.queries = queries.map(|readout| {
            Arc::new(Queries {
                dev: t.dev.clone(),
                mark: UseMark::default(),
                pending: Some(pending.clone()),
                readout,
            })
        });
        t.extras
            .get_or_insert_with(Default::default)
            .held
            .push((stream, pending));
        t
    }

    /// A ticket for `mark` that also waits for the batches held back
    /// behind an open batch of `stream` that have ended
    /// ([`crate::Stream::ticket`]).
    pub(crate) fn on_stream(
        dev: Arc<DeviceInner>,
        stream: &Arc<StreamState>,
        mark: UseMark,
        pending: Vec<Arc<PendingMark>>,
    ) -> Ticket {
        let mut t = Ticket::new(dev, stream.slot, mark, None);
        if !pending.is_empty() {
            t.extras.get_or_insert_with(Default::default).held =
                pending.into_iter().map(|p| (stream.clone(), p)).collect();
        }
        t
    }

    /// Completions of batches held back when they were submitted, joined
    /// with the ticket's mark (empty for nearly every ticket).
    #[inline]
    fn held_back(&self) -> &[Held] {
        match &self.extras {
            Some(e) => &e.held,
            None => &[],
        }
    }

    /// The ticket's values, waiting (up to `timeout` from `start`) for
    /// those of held-back batches; [`Error::BatchHeldOpen`] when one could
    /// never come.
    fn settled(
        &self,
        timeout: Option<Duration>,
        start: std::time::Instant,
        what: &'static str,
    ) -> Result<UseMark> {
        let mut mark = self.mark;
        for (s, p) in self.held_back() {
            let left = timeout.map(|t| t.saturating_sub(start.elapsed()));
            mark = mark.join(s.resolve(p, left, what)?);
        }
        Ok(mark)
    }

    /// The ticket's values, waiting on the host for those of held-back
    /// batches ([`Error::BatchHeldOpen`] when one could never come).
    pub(crate) fn resolved(&self, what: &'static str) -> Result<UseMark> {
        self.settled(None, std::time::Instant::now(), what)
    }

    /// The values known so far: `None` while a held-back batch has none.
    fn known(&self) -> Option<Result<UseMark>> {
        let mut mark = self.mark;
        for (_, p) in self.held_back() {
            match p.get()? {
                Ok(m) => mark = mark.join(m),
                Err(e) => return Some(Err(e)),
            }
        }
        Some(Ok(mark))
    }

    /// The values a batch of `stream` placed at `place` (0: not placed
    /// yet) must wait for to run after this ticket's work. A held-back
    /// batch of the same stream placed before it needs no wait (the stream
    /// orders them); any other held-back batch is waited for on the host
    /// until it reaches its queue ([`Error::BatchHeldOpen`] when it never
    /// could).
    pub(crate) fn mark_for(
        &self,
        stream: &Arc<StreamState>,
        place: u64,
        what: &'static str,
    ) -> Result<UseMark> {
        let mut mark = self.mark;
        for (s, p) in self.held_back() {
            if let Some(r) = p.get() {
                mark = mark.join(r?);
                continue;
            }
            let ordered = Arc::ptr_eq(s, stream) && (place == 0 || place > p.place);
            if !ordered {
                mark = mark.join(s.resolve(p, None, what)?);
            }
        }
        Ok(mark)
    }

    /// The values to wait for, or `Pending` with `cx`'s waker registered
    /// while a held-back batch has none yet (futures).
    pub(crate) fn poll_mark(
        &self,
        cx: &std::task::Context<'_>,
    ) -> std::task::Poll<Result<UseMark>> {
        use std::task::Poll;
        let mut mark = self.mark;
        for (s, p) in self.held_back() {
            match s.poll_resolve(p, cx.waker(), "a ticket's future") {
                Some(Ok(m)) => mark = mark.join(m),
                Some(Err(e)) => return Poll::Ready(Err(e)),
                None => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(mark))
    }

    /// This ticket, its waits reporting the validation messages received
    /// since `start` ([`crate::ValidationLog`]'s window of a batch).
    pub(crate) fn with_validation_from(mut self, start: Option<usize>) -> Ticket {
        self.validation_from = start;
        self
    }

    /// The timeline value that marks completion on the ticket's queue (the
    /// queue of the batch it was made for; for a joined ticket, the first
    /// ticket's queue, and the latest value on it among those joined).
    /// For a batch held back behind an open batch of its stream, the value
    /// is known once the batch reached the queue; before that, the value
    /// of the rest of the ticket (0 when nothing else is joined).
    pub fn timeline_value(&self) -> u64 {
        let mut mark = self.mark;
        for (_, p) in self.held_back() {
            if let Some(Ok(m)) = p.get() {
                mark = mark.join(m);
            }
        }
        mark.get(self.slot)
    }

    /// Which queue of the device the ticket's batch ran on (as
    /// [`crate::Stream::queue_id`]).
    pub fn queue_id(&self) -> usize {
        self.slot
    }

    /// A ticket that completes when every one of `tickets` has.
    /// [`Error::BadTicket`] for an empty list, or tickets of
    /// different devices.
    pub fn join_all(tickets: &[&Ticket]) -> Result<Ticket> {
        let Some((first, rest)) = tickets.split_first() else {
            return Err(Error::BadTicket {
                what: "Ticket::join_all of no tickets (there is no device to tie it to)",
            });
        };
        let mut t = (*first).clone();
        t.queries = None;
        for other in rest {
            t = t.join(other)?;
        }
        Ok(t)
    }

    /// A ticket that completes when both this one and `other` have.
    /// [`Error::BadTicket`] if `other` belongs to another device.
    pub fn join(&self, other: &Ticket) -> Result<Ticket> {
        if !Arc::ptr_eq(&self.dev, &other.dev) {
            return Err(Error::BadTicket {
                what: "Ticket::join with a ticket of another device",
            });
        }
        Ok(Ticket {
            dev: self.dev.clone(),
            slot: self.slot,
            mark: self.mark.join(other.mark),
            queries: None,
            // The earlier span covers both.
            validation_from: match (self.validation_from, other.validation_from) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
            extras: match (&self.extras, &other.extras) {
                (None, None) => None,
                (a, b) => Some(Box::new(Extras {
                    held: self
                        .held_back()
                        .iter()
                        .chain(other.held_back())
                        .cloned()
                        .collect(),
                    reports: a
                        .iter()
                        .chain(b)
                        .flat_map(|e| e.reports.iter())
                        .cloned()
                        .collect(),
                    pace: None,
                })),
            },
        })
    }

    /// Whether the ticket belongs to `dev`.
    pub(crate) fn is_of(&self, dev: &Arc<DeviceInner>) -> bool {
        Arc::ptr_eq(&self.dev, dev)
    }

    /// The device and the (timeline semaphore, value) pairs that must all be
    /// reached for `mark` to be complete (for the futures' waiter).
    pub(crate) fn wait_points(
        &self,
        mark: UseMark,
    ) -> (&Arc<DeviceInner>, Vec<(vk::Semaphore, u64)>) {
        let points = mark
            .points()
            .filter_map(|(slot, v)| self.dev.queue(slot).map(|q| (q.timeline, v)))
            .collect();
        (&self.dev, points)
    }

    /// Blocks until the work has completed. After a device loss:
    /// [`Error::DeviceLost`], even for work that had completed. For a
    /// batch held back behind an open batch of its stream, this first
    /// waits for that batch to end; [`Error::BatchHeldOpen`] at once when
    /// that open batch belongs to the calling thread (it could never end
    /// while the thread waits).
    ///
    /// With [`DeviceOptions::validation_errors`](crate::DeviceOptions::validation_errors)
    /// on, a batch's ticket returns [`Error::Validation`] once the work
    /// completed if the device's validation log received any message from
    /// the batch's creation until now, whoever caused it (batches that
    /// overlap in time on one device each report the messages of their own
    /// span). A joined ticket's span starts at the earliest of its
    /// batches'. Tickets of graph launches and transfers, futures
    /// ([`Ticket::wait_async`]) and [`Ticket::is_ready`] report none.
    ///
    /// A launch of an op batch (an execute or a graph launch) whose
    /// kernels counted values past their limits into a bound flag (token
    /// ids past the vocabulary, positions past the cache) returns the ops
    /// error `Flagged` once the work completed, with that launch's count;
    /// a joined ticket reports each of its launches' (see the op batch's
    /// notes on launch reports).
    pub fn wait(&self) -> Result<()> {
        self.wait_inner(None)
    }

    /// Blocks until the work has completed or `timeout` passes
    /// ([`Error::Timeout`]; the ticket stays valid and can be waited on again).
    /// Reports validation messages as [`Ticket::wait`] does.
    pub fn wait_timeout(&self, timeout: Duration) -> Result<()> {
        self.wait_inner(Some(timeout))
    }

    fn wait_inner(&self, timeout: Option<Duration>) -> Result<()> {
        let d = &self.dev;
        // Device loss is sticky: even work the host already saw complete
        // reports it (its results can no longer be read back anyway).
        d.sticky.check()?;
        if let (Some(e), None) = (&self.extras, timeout) {
            if let Some((pace, at)) = &e.pace {
                return self.wait_launch(pace, *at);
            }
        }
        let start = std::time::Instant::now();
        let mark = if self.held_back().is_empty() {
            self.mark
        } else {
            self.settled(timeout, start, "Ticket::wait")?
        };
        let spin = d.options.wait_spin;
        let idled = std::cell::Cell::new(false);
        for (slot, value) in mark.points() {
            let Some(q) = d.queue(slot) else { continue };
            let left = timeout.map(|t| t.saturating_sub(start.elapsed()));
            if slot != 0 {
                q.wait(&d.raw, &d.sticky, value, left, spin)?;
                continue;
            }
            // Housekeeping runs while the wait spins (the first poll found
            // the work unfinished): release what earlier completions made
            // free, then ready a recorder for the next batch.
            q.wait_with_idle(&d.raw, &d.sticky, value, left, spin, || {
                idled.set(true);
                housekeeping(d)
            })?;
        }
        self.after_wait(idled.get())
    }

    /// [`Ticket::wait`] of a graph launch's ticket: each queue's value
    /// waited for with [`wait_paced`], by the graph's learned duration.
    #[inline(never)]
    fn wait_launch(&self, pace: &Pace, at: Instant) -> Result<()> {
        let d = &self.dev;
        let spin = d.options.wait_spin;
        let idled = std::cell::Cell::new(false);
        for (slot, value) in self.mark.points() {
            let Some(q) = d.queue(slot) else { continue };
            wait_paced(d, q, value, pace, at, spin, || {
                if slot == 0 {
                    idled.set(true);
                    housekeeping(d)
                }
            })?;
        }
        self.after_wait(idled.get())
    }

    /// A wait's end: housekeeping after work already done (on the values
    /// the wait saw), then the validation messages of the ticket's span
    /// and its launch reports.
    #[inline(always)]
    fn after_wait(&self, idled: bool) -> Result<()> {
        let d = &self.dev;
        if !idled {
            d.release_ready(d.completed_cached());
        }
        if let Some(e) = self
            .validation_from
            .and_then(|from| d.instance.log.since(from))
        {
            return Err(e);
        }
        for (report, token) in self.extras.iter().flat_map(|e| e.reports.iter()) {
            report.check(*token)?;
        }
        Ok(())
    }

    /// Whether the work has completed (never blocks); after a device loss,
    /// [`Error::DeviceLost`]. False while a batch of the ticket is held
    /// back behind an open batch of its stream.
    pub fn is_ready(&self) -> Result<bool> {
        let d = &self.dev;
        d.sticky.check()?;
        let mark = match self.known() {
            None => return Ok(false),
            Some(m) => m?,
        };
        for (slot, value) in mark.points() {
            if let Some(q) = d.queue(slot) {
                if !q.is_done(&d.raw, &d.sticky, value)? {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// GPU timings of a profiled batch; waits for completion first.
    /// [`Error::Unsupported`] when the batch was not profiled.
    pub fn profile(&self) -> Result<Profile> {
        let Some(q) = self.queries.as_ref().map(|q| &q.readout) else {
            return Err(Error::Unsupported {
                what: "a profile of a batch recorded without BatchOptions::profiling",
                adapter: self.dev.info.name.clone(),
            });
        };
        self.wait()?;
        let d = &self.dev;
        let per_pool = crate::profile::QUERIES_PER_POOL;
        let mut ticks = vec![0u64; q.count as usize];
        for (i, chunk) in ticks.chunks_mut(per_pool as usize).enumerate() {
            // SAFETY: the queries were written by the completed batch; the
            // pool is live (this ticket owns it) and `chunk` holds one u64
            // per query read.
            unsafe {
                d.raw
                    .get_query_pool_results(q.pools[i], 0, chunk, vk::QueryResultFlags::TYPE_64)
            }
            .map_err(|r| d.sticky.fail("vkGetQueryPoolResults", r))?;
        }
        let bits = d.timestamp_bits;
        Ok(Profile::from_ticks(
            &q.labels,
            &ticks,
            d.info.timestamp_period_ns,
            bits,
        ))
    }
}

/// What a wait on the compute queue does while the work runs: release
/// what earlier completions made free, then ready a recorder for the next
/// batch.
fn housekeeping(d: &DeviceInner) {
    let done = d.completed_cached();
    d.release_ready(done);
    let pipeline = d.compute_queue().last_pipeline();
    d.compute_recorders()
        .prime(&d.raw, &d.sticky, &d.counters, done, pipeline)
}

/// A wait for `value` on `q` paced by `pace` for a launch submitted at
/// `at` (the rules are in `crate::pace`): work already done returns at
/// once and teaches nothing; else `idle` runs, the thread blocks until
/// shortly before the expected end (returning when the work completes
/// first), then spins, then blocks; the completion seen teaches the next
/// wait.
fn wait_paced(
    d: &DeviceInner,
    q: &Queue,
    value: u64,
    pace: &Pace,
    at: Instant,
    spin: Duration,
    idle: impl FnOnce(),
) -> Result<()> {
    if q.is_done(&d.raw, &d.sticky, value)? {
        return Ok(());
    }
    idle();
    let plan = pace.plan(at.elapsed(), spin);
    if !plan.sleep.is_zero() {
        match q.wait(&d.raw, &d.sticky, value, Some(plan.sleep), Duration::ZERO) {
            Ok(()) => {
                pace.observe(at.elapsed(), Seen::Sleeping);
                return Ok(());
            }
            Err(Error::Timeout { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let spun = Instant::now();
    q.wait(&d.raw, &d.sticky, value, None, plan.spin)?;
    let seen = if spun.elapsed() < plan.spin {
        Seen::Spinning
    } else {
        Seen::Blocked
    };
    pace.observe(at.elapsed(), seen);
    Ok(())
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Ticket>();
};
