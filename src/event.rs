//! Host-signalled events: a timeline semaphore the host sets, batches
//! wait for on the GPU, and tasks await.
//!
//! An [`Event`] holds a value that only grows. [`Event::set`] (or
//! [`Event::signal`], one step up) sets it from the host;
//! [`Batch::wait_event`](crate::Batch::wait_event) makes a batch wait on the
//! GPU until it reaches a value. Nothing blocks on the host.
//! [`Event::wait_async`] / [`Event::with_deadline`] are futures of a value,
//! woken by the device's waiter thread; [`Event::wait_timeout`] blocks.
//!
//! A ticket that depends on the host: an empty batch that only waits,
//! `b.wait_event(&event, v)?; b.submit_async()?`, submits an empty
//! submission carrying the wait, and its ticket completes once the event
//! reaches `v` (and the stream's earlier work finished). Later batches on
//! the same stream run after it.
//!
//! The semaphore lives until every submission that waited on it completed
//! (it is parked like a dropped buffer); an event a future has waited on
//! keeps its semaphore until the device is dropped instead (the waiter
//! thread may still be waiting on it), so create few of those. Dropping
//! the last handle of an event that batches still wait for sets it to the
//! largest value they wait for, so they run rather than wait forever (a
//! wait nothing can end would also hang device teardown) — also after a
//! device loss, since the device still has to go idle before it is
//! destroyed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use ash::vk;

use crate::device::{Device, DeviceInner, Garbage};
use crate::error::{Error, Result};
use crate::reclaim::LastUse;
use crate::stats::Counter;
use crate::ticket_future::poll_points;

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
    /// Whether a future registered a wait on it with the waiter thread
    /// (which may then still wait on the semaphore after the future went).
    awaited: AtomicBool,
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
        // Release batches that would otherwise wait forever. No sticky
        // check: after a (simulated) loss the device still has to go idle
        // before it is destroyed; on a real loss the counter read fails.
        let waited = self.waited.load(Ordering::Acquire);
        // SAFETY: `sem` is a live timeline semaphore of this device.
        if let Ok(current) = unsafe { d.raw.get_semaphore_counter_value(self.sem) } {
            // Waits are checked against the value when named, and the value
            // only grows, so the step is always allowed; checked anyway.
            if waited > current && waited - current <= MAX_EVENT_STEP {
                let _ = self.signal(waited);
            }
        }
        if self.awaited.load(Ordering::Acquire) {
            // The waiter thread may still list the semaphore: it is
            // destroyed with the waiter, once the device is idle.
            d.counters.add(Counter::Semaphores, -1);
            d.waiter().adopt(self.sem);
        } else {
            d.release(self.last_use.mark(), Garbage::Semaphore(self.sem));
        }
    }
}

/// A value the host sets, batches wait for on the GPU and tasks await (a
/// timeline semaphore). Starts at 0 and only grows. Cheap to clone (clones
/// are the same event); `Send + Sync`.
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
                awaited: AtomicBool::new(false),
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

    /// A future that resolves once the event reaches `value` (`Ok(())`),
    /// or to [`Error::DeviceLost`]. Needs no async runtime: the device's
    /// waiter thread wakes the task.
    pub fn wait_async(&self, value: u64) -> EventWait<'_> {
        EventWait {
            event: self,
            value,
            deadline: None,
            started: Instant::now(),
        }
    }

    /// [`Event::wait_async`] that resolves to [`Error::Timeout`] once
    /// `timeout` has passed (counted from this call).
    pub fn with_deadline(&self, value: u64, timeout: Duration) -> EventWait<'_> {
        let started = Instant::now();
        EventWait {
            event: self,
            value,
            // A timeout too long to represent never expires.
            deadline: started.checked_add(timeout),
            started,
        }
    }
}

/// A future of an [`Event`] value (see [`Event::wait_async`]).
/// `Send`, `Sync` and `Unpin`.
#[must_use = "futures do nothing unless awaited or polled"]
#[derive(Debug)]
pub struct EventWait<'a> {
    event: &'a Event,
    value: u64,
    deadline: Option<Instant>,
    started: Instant,
}

impl std::future::Future for EventWait<'_> {
    type Output = Result<()>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let inner = &*self.event.inner;
        let r = poll_points(
            &inner.dev,
            &[(inner.sem, self.value)],
            self.deadline,
            self.started,
            cx,
        );
        if r.is_pending() {
            // The waiter thread now lists the semaphore (the event cannot
            // be dropped during this borrow, so setting it after is in time).
            inner.awaited.store(true, Ordering::Release);
        }
        r
    }
}

const _: () = {
    const fn send_sync<T: Send + Sync + Unpin>() {}
    send_sync::<Event>();
    send_sync::<EventWait<'static>>();
};
