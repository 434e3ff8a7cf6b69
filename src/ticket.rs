//! Tickets: completion of a submitted batch.
//!
//! A ticket is a timeline value on the compute queue. Waiting spins briefly
//! on the timeline, then blocks (see [`DeviceOptions::wait_spin`]). A ticket
//! holds nothing the GPU uses: buffers record their own last use, so
//! dropping a ticket early neither blocks nor frees anything in flight.
//!
//! [`DeviceOptions::wait_spin`]: crate::DeviceOptions::wait_spin

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

/// The completion of a submitted batch.
#[must_use = "a ticket does nothing unless waited on or polled"]
pub struct Ticket {
    dev: Arc<DeviceInner>,
    value: u64,
    queries: Option<QueryReadout>,
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("value", &self.value)
            .finish()
    }
}

impl Ticket {
    pub(crate) fn new(dev: Arc<DeviceInner>, value: u64, queries: Option<QueryReadout>) -> Ticket {
        Ticket {
            dev,
            value,
            queries,
        }
    }

    /// The compute-queue timeline value that marks completion.
    pub fn timeline_value(&self) -> u64 {
        self.value
    }

    /// The device and the (timeline semaphore, value) pairs that must all be
    /// reached for the batch to be complete (for the futures' waiter).
    pub(crate) fn wait_points(&self) -> (&Arc<DeviceInner>, Vec<(vk::Semaphore, u64)>) {
        (&self.dev, vec![(self.dev.compute.timeline, self.value)])
    }

    /// Blocks until the batch has completed. After a device loss:
    /// [`Error::DeviceLost`], even for a batch that had completed.
    pub fn wait(&self) -> Result<()> {
        self.wait_inner(None)
    }

    /// Blocks until the batch has completed or `timeout` passes
    /// ([`Error::Timeout`]; the ticket stays valid and can be waited on again).
    pub fn wait_timeout(&self, timeout: Duration) -> Result<()> {
        self.wait_inner(Some(timeout))
    }

    fn wait_inner(&self, timeout: Option<Duration>) -> Result<()> {
        let d = &self.dev;
        // Device loss is sticky: even a batch the host already saw complete
        // reports it (its results can no longer be read back anyway).
        d.sticky.check()?;
        // Housekeeping runs while the wait spins (the first poll found the
        // work unfinished): release what earlier completions made free,
        // then ready a recorder for the next batch. Only when the work was
        // already done does it run after, on the values the wait saw.
        let idled = std::cell::Cell::new(false);
        let idle = || {
            idled.set(true);
            let done = d.completed_cached();
            d.release_ready(done);
            let pipeline = d.compute.last_pipeline();
            d.compute_recorders
                .prime(&d.raw, &d.sticky, &d.counters, done, pipeline)
        };
        let spin = d.options.wait_spin;
        d.compute
            .wait_with_idle(&d.raw, &d.sticky, self.value, timeout, spin, idle)?;
        if !idled.get() {
            d.release_ready(d.completed_cached());
        }
        Ok(())
    }

    /// Whether the batch has completed (never blocks); after a device loss,
    /// [`Error::DeviceLost`].
    pub fn is_ready(&self) -> Result<bool> {
        let d = &self.dev;
        d.sticky.check()?;
        d.compute.is_done(&d.raw, &d.sticky, self.value)
    }

    /// GPU timings of a profiled batch; waits for completion first.
    /// [`Error::Unsupported`] when the batch was not profiled.
    pub fn profile(&self) -> Result<Profile> {
        let Some(q) = &self.queries else {
            return Err(Error::Unsupported {
                what: "a profile of a batch recorded without BatchOptions::profiling",
                adapter: self.dev.info.name.clone(),
            });
        };
        self.wait()?;
        let d = &self.dev;
        let per_pool = crate::batch::QUERIES_PER_POOL;
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

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some(q) = self.queries.take() {
            let mark = UseMark {
                compute: self.value,
                transfer: 0,
            };
            for p in q.pools {
                self.dev.release(mark, Garbage::QueryPool(p));
            }
        }
    }
}
