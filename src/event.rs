//! Host-signalled events: a timeline semaphore the host sets and batches
//! wait for on the GPU.
//!
//! An [`Event`] holds a value that only grows. [`Event::set`] (or
//! [`Event::signal`], one step up) sets it from the host;
//! [`Batch::wait_event`](crate::Batch::wait_event) makes a batch wait on the
//! GPU until it reaches a value. Nothing blocks on the host.
//!
//! The semaphore lives until every submission that waited on it completed
//! (it is parked like a dropped buffer). Dropping the last handle of an
//! event that batches still wait for sets it to the largest value they wait
//! for, so they run rather than wait forever (a wait nothing can end would
//! also hang device teardown).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ash::vk;

use crate::device::{Device, DeviceInner, Garbage};
use crate::error::{Error, Result};
use crate::reclaim::LastUse;
use crate::stats::Counter;

/// The largest step above an event's current value that a set or a wait
/// may take: Vulkan's guaranteed minimum of
/// `maxTimelineSemaphoreValueDifference` (2³¹ − 1).
pub const MAX_EVENT_STEP: u64 = (1 << 31) - 1;

/// The shared state of one event.
pub(crate) struct EventInner {
    dev: Arc<DeviceInner>,
    sem: vk::Semaphore,
    /// The largest value a submitted batch waits for.
    waited: AtomicU64,
    /// The submissions that waited on it (when the semaphore may go).
    last_use: LastUse,
    /// Held across read-check-signal, so two host sets cannot both pass
    /// the "above the current value" check with the same current value.
    host: Mutex<()>,
}

impl EventInner {
    /// The timeline semaphore.
    pub(crate) fn semaphore(&self) -> vk::Semaphore {
        self.sem
    }

    /// Whether the event belongs to `dev`.
    pub(crate) fn is_of(&self, dev: &Arc<DeviceInner>) -> bool {
        Arc::ptr_eq(&self.dev, dev)
    }

    /// Notes that the submission of `value` on queue slot `slot` waits for
    /// `target`.
    pub(crate) fn waited(&self, slot: usize, value: u64, target: u64) {
        self.waited.fetch_max(target, Ordering::AcqRel);
        self.last_use.used_on(slot, value, false);
    }

    fn current(&self) -> Result<u64> {
        let d = &self.dev;
        d.sticky.check()?;
        // SAFETY: `sem` is a live timeline semaphore of this device.
        unsafe { d.raw.get_semaphore_counter_value(self.sem) }
            .map_err(|r| d.sticky.fail("vkGetSemaphoreCounterValue", r))
    }

    /// Checks that a batch may wait for `value`.
    pub(crate) fn check_wait(&self, value: u64) -> Result<()> {
        let current = self.current()?;
        if value > current && value - current > MAX_EVENT_STEP {
            return Err(Error::EventValue {
                value,
                current,
                limit: MAX_EVENT_STEP,
                what: "a wait further above the current value than Vulkan guarantees",
            });
        }
        Ok(())
    }

    fn signal(&self, value: u64) -> Result<()> {
        let d = &self.dev;
        let info = vk::SemaphoreSignalInfo::default()
            .semaphore(self.sem)
            .value(value);
        // SAFETY: the semaphore is live; `value` is above its current value
        // and within the allowed step of every pending wait (callers check
        // under `host`).
        unsafe { d.raw.signal_semaphore(&info) }.map_err(|r| d.sticky.fail("vkSignalSemaphore", r))
    }
}

impl Drop for EventInner {
    fn drop(&mut self) {
        let d = &self.dev;
        if !d.sticky.is_lost() {
            let waited = self.waited.load(Ordering::Acquire);
            if let Ok(current) = self.current() {
                if waited > current {
                    // Release batches that would otherwise wait forever.
                    let _ = self.signal(waited);
                }
            }
        }
        d.release(self.last_use.mark(), Garbage::Semaphore(self.sem));
    }
}

/// A value the host sets and batches wait for on the GPU (a timeline
/// semaphore). Starts at 0 and only grows. Cheap to clone (clones are the
/// same event); `Send + Sync`.
///
/// ```
/// # fn main() -> vkcompute::Result<()> {
/// let gpu = vkcompute::Device::new()?;
/// let ready = gpu.event()?;
/// let buf = gpu.alloc::<u32>(16)?;
/// let mut b = gpu.stream()?.batch()?;
/// b.wait_event(&ready, 1)?;
/// b.fill(&buf, 5)?;
/// let t = b.submit_async()?;
/// assert!(!t.is_ready()?);      // waits on the GPU for the host
/// ready.set(1)?;
/// t.wait()?;
/// assert_eq!(buf.download()?, vec![5u32; 16]);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Event {
    inner: Arc<EventInner>,
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("waited", &self.inner.waited.load(Ordering::Relaxed))
            .finish()
    }
}

impl Device {
    /// A new event at value 0.
    pub fn event(&self) -> Result<Event> {
        let d = &self.inner;
        d.sticky.check()?;
        let mut type_info = vk::SemaphoreTypeCreateInfo::default()
            .semaphore_type(vk::SemaphoreType::TIMELINE)
            .initial_value(0);
        let info = vk::SemaphoreCreateInfo::default().push_next(&mut type_info);
        // SAFETY: plain creation on a live device; `info` outlives the call.
        let sem = unsafe { d.raw.create_semaphore(&info, None) }
            .map_err(|r| d.sticky.fail("vkCreateSemaphore", r))?;
        d.counters.add(Counter::Semaphores, 1);
        d.set_name(sem, "vkcompute event");
        Ok(Event {
            inner: Arc::new(EventInner {
                dev: d.clone(),
                sem,
                waited: AtomicU64::new(0),
                last_use: LastUse::default(),
                host: Mutex::new(()),
            }),
        })
    }
}

impl Event {
    pub(crate) fn inner(&self) -> &Arc<EventInner> {
        &self.inner
    }

    /// The event's current value.
    pub fn value(&self) -> Result<u64> {
        self.inner.current()
    }

    /// Sets the event to `value`, releasing every batch waiting for it or
    /// less. [`Error::EventValue`] when `value` is not above the current
    /// value, or more than [`MAX_EVENT_STEP`] above it;
    /// [`Error::DeviceLost`] after a device loss.
    pub fn set(&self, value: u64) -> Result<()> {
        let inner = &*self.inner;
        let _host = inner.host.lock().unwrap_or_else(|p| p.into_inner());
        let current = inner.current()?;
        if value <= current || value - current > MAX_EVENT_STEP {
            return Err(Error::EventValue {
                value,
                current,
                limit: MAX_EVENT_STEP,
                what: if value <= current {
                    "an event can only be set above its current value"
                } else {
                    "a step further above the current value than Vulkan guarantees"
                },
            });
        }
        inner.signal(value)
    }

    /// Sets the event one above its current value and returns the new
    /// value.
    pub fn signal(&self) -> Result<u64> {
        let inner = &*self.inner;
        let _host = inner.host.lock().unwrap_or_else(|p| p.into_inner());
        let value = inner.current()? + 1;
        inner.signal(value)?;
        Ok(value)
    }

    /// Blocks until the event reaches `value` (set by another thread) or
    /// `timeout` passes ([`Error::Timeout`]).
    pub fn wait_timeout(&self, value: u64, timeout: Duration) -> Result<()> {
        let d = &self.inner.dev;
        d.sticky.check()?;
        let start = std::time::Instant::now();
        let sems = [self.inner.sem];
        let vals = [value];
        let info = vk::SemaphoreWaitInfo::default()
            .semaphores(&sems)
            .values(&vals);
        let nanos = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        // SAFETY: the semaphore is live; arrays outlive the call.
        match unsafe { d.raw.wait_semaphores(&info, nanos) } {
            Ok(()) => Ok(()),
            Err(vk::Result::TIMEOUT) => Err(Error::Timeout {
                waited: start.elapsed(),
            }),
            Err(r) => Err(d.sticky.fail("vkWaitSemaphores", r)),
        }
    }
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Event>();
};
