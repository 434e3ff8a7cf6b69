//! A timeline the host signals: await a value, or gate compute-queue work
//! on it.
//!
//! [`HostTimeline::signal`] sets the value from the host
//! (`vkSignalSemaphore`); [`HostTimeline::wait_async`] is a future of a
//! value, woken by the device's waiter thread; [`HostTimeline::gate`]
//! submits an empty compute-queue submission that waits (on the GPU) for a
//! value and returns its [`Ticket`], so a ticket can depend on the host.
//! Because every compute batch waits for the work submitted before it, a
//! gate holds back every later batch on the compute queue until its value
//! is signalled. Dropping the timeline signals the highest gated value, so
//! no gated work waits forever; its semaphore is kept until the device is
//! dropped (the waiter thread may still be waiting on it), so create few.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use ash::vk;

use crate::device::{Device, DeviceInner};
use crate::error::{Error, Result};
use crate::queue::SemaphoreWait;
use crate::ticket::Ticket;
use crate::ticket_future::poll_points;

/// The least `maxTimelineSemaphoreValueDifference` Vulkan guarantees.
const MAX_STEP: u64 = (1 << 31) - 1;

/// A host-signalled timeline semaphore. `Send + Sync`.
pub struct HostTimeline {
    dev: Arc<DeviceInner>,
    sem: vk::Semaphore,
    /// Highest value a gate waits for.
    gated: AtomicU64,
}

impl std::fmt::Debug for HostTimeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostTimeline")
            .field("gated", &self.gated.load(Ordering::Relaxed))
            .finish()
    }
}

/// Whether a signal from `current` to `value` is allowed.
fn check_step(current: u64, value: u64) -> Result<()> {
    if value <= current || value - current > MAX_STEP {
        return Err(Error::TimelineValue {
            value,
            current,
            max_difference: MAX_STEP,
        });
    }
    Ok(())
}

impl Device {
    /// A new host timeline at value 0.
    pub fn host_timeline(&self) -> Result<HostTimeline> {
        let d = &self.inner;
        d.sticky.check()?;
        let mut type_info = vk::SemaphoreTypeCreateInfo::default()
            .semaphore_type(vk::SemaphoreType::TIMELINE)
            .initial_value(0);
        let info = vk::SemaphoreCreateInfo::default().push_next(&mut type_info);
        // SAFETY: the device is live; the info chain outlives the call.
        let sem = unsafe { d.raw.create_semaphore(&info, None) }
            .map_err(|r| d.sticky.fail("vkCreateSemaphore", r))?;
        d.waiter.adopt(sem);
        d.set_name(sem, "vkcompute host timeline");
        Ok(HostTimeline {
            dev: d.clone(),
            sem,
            gated: AtomicU64::new(0),
        })
    }
}

impl HostTimeline {
    /// The current value.
    pub fn value(&self) -> Result<u64> {
        let d = &self.dev;
        d.sticky.check()?;
        // SAFETY: a live timeline semaphore of this device.
        unsafe { d.raw.get_semaphore_counter_value(self.sem) }
            .map_err(|r| d.sticky.fail("vkGetSemaphoreCounterValue", r))
    }

    /// Sets the value to `value`, which must be above the current one
    /// (by at most 2³¹ − 1): [`Error::TimelineValue`] otherwise.
    pub fn signal(&self, value: u64) -> Result<()> {
        check_step(self.value()?, value)?;
        self.signal_unchecked(value)
    }

    fn signal_unchecked(&self, value: u64) -> Result<()> {
        let d = &self.dev;
        let info = vk::SemaphoreSignalInfo::default()
            .semaphore(self.sem)
            .value(value);
        // SAFETY: a live timeline semaphore; `value` is above its current
        // value (checked by the callers) and no queue signals it.
        unsafe { d.raw.signal_semaphore(&info) }.map_err(|r| d.sticky.fail("vkSignalSemaphore", r))
    }

    /// A future that resolves once the value reaches `value`.
    pub fn wait_async(&self, value: u64) -> HostTimelineWait<'_> {
        HostTimelineWait {
            timeline: self,
            value,
            deadline: None,
            started: Instant::now(),
        }
    }

    /// [`HostTimeline::wait_async`] that resolves to [`Error::Timeout`]
    /// once `timeout` has passed.
    pub fn with_deadline(&self, value: u64, timeout: Duration) -> HostTimelineWait<'_> {
        let started = Instant::now();
        HostTimelineWait {
            timeline: self,
            value,
            deadline: started.checked_add(timeout),
            started,
        }
    }

    /// Submits an empty compute-queue submission that waits on the GPU for
    /// `value`, and returns its ticket: complete once the host signalled
    /// `value` and the work submitted before it finished. Later compute
    /// batches run after it.
    pub fn gate(&self, value: u64) -> Result<Ticket> {
        self.gated.fetch_max(value, Ordering::AcqRel);
        compute_after(&self.dev, self.sem, value)
    }
}

impl Drop for HostTimeline {
    fn drop(&mut self) {
        // Release gated work, so the queue can drain (no sticky check: a
        // lost device still has to go idle before it is destroyed).
        let gated = self.gated.load(Ordering::Acquire);
        // SAFETY: a live timeline semaphore of this device.
        let current = unsafe { self.dev.raw.get_semaphore_counter_value(self.sem) };
        if let Ok(c) = current {
            if gated > c && check_step(c, gated).is_ok() {
                let _ = self.signal_unchecked(gated);
            }
        }
    }
}

/// A compute-queue ticket that completes once `sem` reaches `value`: an
/// empty submission waiting on it.
pub(crate) fn compute_after(
    d: &Arc<DeviceInner>,
    sem: vk::Semaphore,
    value: u64,
) -> Result<Ticket> {
    let wait = [SemaphoreWait {
        semaphore: sem,
        value,
        stage: vk::PipelineStageFlags::ALL_COMMANDS,
    }];
    let order = crate::queue::Order {
        stages: vk::PipelineStageFlags::ALL_COMMANDS,
        own: 0,
        whole_queue: false,
        stream: None,
        after_stream: false,
    };
    let q = &d.compute;
    let v = q.submit_ordered(&d.raw, &d.sticky, &[], wait.iter().copied(), 1, order)?;
    d.counters
        .submissions
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(Ticket::new(
        d.clone(),
        q.slot,
        crate::reclaim::UseMark::at(q.slot, v),
        None,
    ))
}

/// A future of a [`HostTimeline`] value (see [`HostTimeline::wait_async`]).
#[must_use = "futures do nothing unless awaited or polled"]
#[derive(Debug)]
pub struct HostTimelineWait<'a> {
    timeline: &'a HostTimeline,
    value: u64,
    deadline: Option<Instant>,
    started: Instant,
}

impl std::future::Future for HostTimelineWait<'_> {
    type Output = Result<()>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let t = self.timeline;
        poll_points(
            &t.dev,
            &[(t.sem, self.value)],
            self.deadline,
            self.started,
            cx,
        )
    }
}

const _: () = {
    const fn send_sync<T: Send + Sync + Unpin>() {}
    send_sync::<HostTimeline>();
    send_sync::<HostTimelineWait<'static>>();
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_must_go_up_within_the_limit() {
        assert!(check_step(0, 1).is_ok());
        assert!(check_step(5, 5 + MAX_STEP).is_ok());
        assert!(matches!(
            check_step(5, 5),
            Err(Error::TimelineValue {
                value: 5,
                current: 5,
                ..
            })
        ));
        assert!(check_step(5, 4).is_err());
        assert!(check_step(5, 6 + MAX_STEP).is_err());
    }
}
