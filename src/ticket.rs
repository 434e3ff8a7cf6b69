//! Tickets: completion of submitted work.
//!
//! A ticket is a timeline value on the queue its batch ran on (a joined
//! ticket: one value per queue, the latest of each). Waiting spins briefly
//! on the timeline, then blocks (see [`DeviceOptions::wait_spin`]). A ticket
//! holds nothing the GPU uses: buffers record their own last use, so
//! dropping a ticket early neither blocks nor frees anything in flight.
//! Tickets are cheap to clone, and [`crate::Batch::wait_for`] orders a batch
//! after one on the GPU, with no host wait. With
//! [`DeviceOptions::validation_errors`] on, the wait of a batch's ticket
//! also reports the validation messages of the batch's span
//! ([`Error::Validation`]; the rule is in [`crate::ValidationLog`]).
//!
//! [`DeviceOptions::wait_spin`]: crate::DeviceOptions::wait_spin
//! [`DeviceOptions::validation_errors`]: crate::DeviceOptions::validation_errors

use std::sync::Arc;
use std::time::Duration;

use ash::vk;

use crate::device::{DeviceInner, Garbage};
use crate::error::{Error, Result};
use crate::profile::Profile;
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
    readout: QueryReadout,
}

impl Drop for Queries {
    fn drop(&mut self) {
        for p in self.readout.pools.drain(..) {
            self.dev.release(self.mark, Garbage::QueryPool(p));
        }
    }
}

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
                readout,
            })
        });
        Ticket {
            dev,
            slot,
            mark,
            queries,
            validation_from: None,
        }
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
    pub fn timeline_value(&self) -> u64 {
        self.mark.get(self.slot)
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
        })
    }

    /// The (timeline semaphore, value) pairs that mark completion, one per
    /// queue the ticket covers: what a host wait (futures) or a submission
    /// waiting on the ticket (graph launches) waits for.
    #[allow(dead_code)] // the crate-internal hook for futures and graphs
    pub(crate) fn sync_points(&self) -> impl Iterator<Item = (vk::Semaphore, u64)> + '_ {
        self.mark
            .points()
            .filter_map(|(slot, v)| self.dev.queue(slot).map(|q| (q.timeline, v)))
    }

    /// The ticket's values, one per queue slot.
    pub(crate) fn mark(&self) -> UseMark {
        self.mark
    }

    /// Whether the ticket belongs to `dev`.
    pub(crate) fn is_of(&self, dev: &Arc<DeviceInner>) -> bool {
        Arc::ptr_eq(&self.dev, dev)
    }

    /// The device and the (timeline semaphore, value) pairs that must all be
    /// reached for the work to be complete (for the futures' waiter).
    pub(crate) fn wait_points(&self) -> (&Arc<DeviceInner>, Vec<(vk::Semaphore, u64)>) {
        (&self.dev, self.sync_points().collect())
    }

    /// Blocks until the work has completed. After a device loss:
    /// [`Error::DeviceLost`], even for work that had completed.
    ///
    /// With [`DeviceOptions::validation_errors`](crate::DeviceOptions::validation_errors)
    /// on, a batch's ticket returns [`Error::Validation`] once the work
    /// completed if the device's validation log received any message from
    /// the batch's creation until now, whoever caused it (batches that
    /// overlap in time on one device each report the messages of their own
    /// span). A joined ticket's span starts at the earliest of its
    /// batches'. Tickets of graph launches and transfers, futures
    /// ([`Ticket::wait_async`]) and [`Ticket::is_ready`] report none.
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
        let start = std::time::Instant::now();
        let spin = d.options.wait_spin;
        let idled = std::cell::Cell::new(false);
        for (slot, value) in self.mark.points() {
            let Some(q) = d.queue(slot) else { continue };
            let left = timeout.map(|t| t.saturating_sub(start.elapsed()));
            if slot != 0 {
                q.wait(&d.raw, &d.sticky, value, left, spin)?;
                continue;
            }
            // Housekeeping runs while the wait spins (the first poll found
            // the work unfinished): release what earlier completions made
            // free, then ready a recorder for the next batch.
            let idle = || {
                idled.set(true);
                let done = d.completed_cached();
                d.release_ready(done);
                let pipeline = d.compute_queue().last_pipeline();
                d.compute_recorders()
                    .prime(&d.raw, &d.sticky, &d.counters, done, pipeline)
            };
            q.wait_with_idle(&d.raw, &d.sticky, value, left, spin, idle)?;
        }
        // Only when the work was already done does housekeeping run after
        // the wait, on the values it saw.
        if !idled.get() {
            d.release_ready(d.completed_cached());
        }
        match self
            .validation_from
            .and_then(|from| d.instance.log.since(from))
        {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Whether the work has completed (never blocks); after a device loss,
    /// [`Error::DeviceLost`].
    pub fn is_ready(&self) -> Result<bool> {
        let d = &self.dev;
        d.sticky.check()?;
        for (slot, value) in self.mark.points() {
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

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Ticket>();
};
