//! A queue and its timeline semaphore.
//!
//! Every submission to a queue signals the queue's one timeline semaphore
//! with the next value, assigned under the same lock as `vkQueueSubmit`, so
//! values complete in order. "Has submission v finished?" is then one counter
//! read, and nothing per submission (no fence) is created or reset. Waiting
//! first spins on the counter for a bounded time (blocking waits wake up tens
//! of microseconds late on some drivers), then blocks in `vkWaitSemaphores`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ash::vk;

use crate::error::{Error, Result, Sticky};

mod stream_state;
pub(crate) use stream_state::{pick_queue, plan_waits, BatchOrder, PendingMark, StreamState, Turn};

/// A semaphore wait attached to a submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SemaphoreWait {
    pub semaphore: vk::Semaphore,
    pub value: u64,
    pub stage: vk::PipelineStageFlags,
}

/// Semaphore waits of one submission: up to `INLINE_WAITS` held inline
/// (no allocation), more spilled to the heap. Never truncated.
#[derive(Debug, Default)]
pub(crate) struct WaitList {
    inline: [Option<SemaphoreWait>; INLINE_WAITS],
    n: usize,
    spill: Vec<SemaphoreWait>,
}

/// Waits a [`WaitList`] holds without allocating.
pub(crate) const INLINE_WAITS: usize = 12;

impl WaitList {
    /// Adds a wait.
    pub(crate) fn push(&mut self, w: SemaphoreWait) {
        if self.n < INLINE_WAITS {
            self.inline[self.n] = Some(w);
        } else {
            self.spill.push(w);
        }
        self.n += 1;
    }
    /// How many waits it holds.
    pub(crate) fn len(&self) -> usize {
        self.n
    }
    /// The waits, in the order pushed.
    pub(crate) fn iter(&self) -> impl Iterator<Item = SemaphoreWait> + '_ {
        self.inline
            .iter()
            .take(self.n.min(INLINE_WAITS))
            .flatten()
            .copied()
            .chain(self.spill.iter().copied())
    }
}

/// What a submission waits for on its own queue's timeline.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Order<'a> {
    /// Stages of the submission that wait.
    pub stages: vk::PipelineStageFlags,
    /// At least this value (0: none).
    pub own: u64,
    /// Everything submitted to the queue before it.
    pub whole_queue: bool,
    /// The stream's last value: the new value is recorded there, under
    /// the queue's lock.
    pub stream: Option<&'a AtomicU64>,
    /// Wait for the stream's last value too (read under the lock).
    pub after_stream: bool,
    /// Submit only while this is false (read under the lock); when it is
    /// set, nothing is submitted and the value returned is 0. A whole batch
    /// submitted without its stream's order lock passes the stream's
    /// "a batch is open" flag ([`StreamState::busy`]).
    pub gate: Option<&'a AtomicBool>,
}

/// One queue with its timeline.
pub(crate) struct Queue {
    raw: vk::Queue,
    /// Queue family index.
    pub family: u32,
    /// Slot of this queue in use marks ([`crate::reclaim::UseMark`]).
    pub slot: usize,
    /// The timeline semaphore every submission signals.
    pub timeline: vk::Semaphore,
    /// Last value handed out; held across `vkQueueSubmit` (external sync).
    lock: Mutex<u64>,
    submitted: AtomicU64,
    completed: AtomicU64,
    /// The compute pipeline a batch bound last (raw handle; 0: none), which
    /// a recorder readied ahead of time binds (`RecorderPool::prime`).
    last_pipeline: AtomicU64,
}

impl Queue {
    /// Wraps queue `index` of `family` as mark slot `slot`, creating its
    /// timeline semaphore.
    pub(crate) fn new(
        device: &ash::Device,
        family: u32,
        index: u32,
        slot: usize,
        sticky: &Sticky,
    ) -> Result<Self> {
        let mut type_info = vk::SemaphoreTypeCreateInfo::default()
            .semaphore_type(vk::SemaphoreType::TIMELINE)
            .initial_value(0);
        let info = vk::SemaphoreCreateInfo::default().push_next(&mut type_info);
        // SAFETY: `device` is live; the family was requested at device creation.
        let (raw, timeline) = unsafe {
            let raw = device.get_device_queue(family, index);
            let sem = device
                .create_semaphore(&info, None)
                .map_err(|r| sticky.fail("vkCreateSemaphore", r))?;
            (raw, sem)
        };
        Ok(Queue {
            raw,
            family,
            slot,
            timeline,
            lock: Mutex::new(0),
            submitted: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            last_pipeline: AtomicU64::new(0),
        })
    }

    /// Submits `cmds` after `waits` (`count` of them; any number: up to
    /// [`INLINE_WAITS`] and more without allocating, beyond it on the heap)
    /// and after what `order` names on this queue's own timeline, and
    /// returns the value that marks their completion (0, and nothing
    /// submitted, when `order.gate` is set). Values still pending
    /// on this queue are waited for on the GPU; ones the host has seen
    /// complete are not waited for at all (their writes are visible through
    /// that host synchronisation and the submission's own host-to-device
    /// dependency).
    pub(crate) fn submit_ordered(
        &self,
        device: &ash::Device,
        sticky: &Sticky,
        cmds: &[vk::CommandBuffer],
        waits: impl Iterator<Item = SemaphoreWait>,
        count: usize,
        order: Order<'_>,
    ) -> Result<u64> {
        sticky.check()?;
        const N: usize = INLINE_WAITS + 2;
        let total = count + 1;
        let mut inline = (
            [vk::Semaphore::null(); N],
            [0u64; N],
            [vk::PipelineStageFlags::empty(); N],
        );
        let mut heap: (Vec<vk::Semaphore>, Vec<u64>, Vec<vk::PipelineStageFlags>);
        let (wait_sems, wait_vals, wait_stages) = if total <= N {
            (&mut inline.0[..], &mut inline.1[..], &mut inline.2[..])
        } else {
            heap = (
                vec![vk::Semaphore::null(); total],
                vec![0; total],
                vec![vk::PipelineStageFlags::empty(); total],
            );
            (&mut heap.0[..], &mut heap.1[..], &mut heap.2[..])
        };
        let mut n = 0;
        for w in waits.take(count) {
            wait_sems[n] = w.semaphore;
            wait_vals[n] = w.value;
            wait_stages[n] = w.stage;
            n += 1;
        }
        let mut next = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        if order.gate.is_some_and(|g| g.load(Ordering::Relaxed)) {
            return Ok(0);
        }
        let value = *next + 1;
        let mut own = order.own;
        if order.whole_queue {
            own = own.max(*next);
        }
        if let Some(last) = order.stream.filter(|_| order.after_stream) {
            own = own.max(last.load(Ordering::Acquire));
        }
        if own > 0 && self.completed.load(Ordering::Acquire) < own {
            wait_sems[n] = self.timeline;
            wait_vals[n] = own;
            wait_stages[n] = order.stages;
            n += 1;
        }
        let signal = [self.timeline];
        let signal_vals = [value];
        let mut timeline_info = vk::TimelineSemaphoreSubmitInfo::default()
            .wait_semaphore_values(&wait_vals[..n])
            .signal_semaphore_values(&signal_vals);
        let submit = vk::SubmitInfo::default()
            .command_buffers(cmds)
            .wait_semaphores(&wait_sems[..n])
            .wait_dst_stage_mask(&wait_stages[..n])
            .signal_semaphores(&signal)
            .push_next(&mut timeline_info);
        // SAFETY: the queue is externally synchronised by `self.lock`; the
        // command buffers are fully recorded and owned by the caller until the
        // returned value completes; all arrays outlive the call.
        unsafe { device.queue_submit(self.raw, &[submit], vk::Fence::null()) }
            .map_err(|r| sticky.fail("vkQueueSubmit", r))?;
        *next = value;
        self.submitted.store(value, Ordering::Release);
        if let Some(last) = order.stream {
            last.fetch_max(value, Ordering::AcqRel);
        }
        Ok(value)
    }

    /// Notes the compute pipeline a batch just bound.
    #[inline]
    pub(crate) fn note_pipeline(&self, pipeline: vk::Pipeline) {
        use ash::vk::Handle;
        self.last_pipeline
            .store(pipeline.as_raw(), Ordering::Relaxed);
    }

    /// The compute pipeline a batch bound last (null: none yet).
    pub(crate) fn last_pipeline(&self) -> vk::Pipeline {
        use ash::vk::Handle;
        vk::Pipeline::from_raw(self.last_pipeline.load(Ordering::Relaxed))
    }

    /// The last value handed to a submission.
    pub(crate) fn submitted(&self) -> u64 {
        self.submitted.load(Ordering::Acquire)
    }

    /// The highest value known complete, without asking the driver.
    pub(crate) fn completed_cached(&self) -> u64 {
        self.completed.load(Ordering::Acquire)
    }

    /// Asks the driver for the timeline's current value.
    pub(crate) fn poll(&self, device: &ash::Device, sticky: &Sticky) -> Result<u64> {
        sticky.check()?;
        // SAFETY: the semaphore is a live timeline semaphore of `device`.
        let v = unsafe { device.get_semaphore_counter_value(self.timeline) }
            .map_err(|r| sticky.fail("vkGetSemaphoreCounterValue", r))?;
        // A locked read-modify-write only when the value moved (a spinning
        // wait polls many times without it moving).
        if v > self.completed.load(Ordering::Relaxed) {
            self.completed.fetch_max(v, Ordering::AcqRel);
        }
        Ok(v)
    }

    /// Whether `value` has completed.
    pub(crate) fn is_done(
        &self,
        device: &ash::Device,
        sticky: &Sticky,
        value: u64,
    ) -> Result<bool> {
        if self.completed_cached() >= value {
            return Ok(true);
        }
        Ok(self.poll(device, sticky)? >= value)
    }

    /// Waits until `value` completes: spins up to `spin`, then blocks until
    /// `timeout` (from the start of the call) runs out.
    pub(crate) fn wait(
        &self,
        device: &ash::Device,
        sticky: &Sticky,
        value: u64,
        timeout: Option<Duration>,
        spin: Duration,
    ) -> Result<()> {
        self.wait_with_idle(device, sticky, value, timeout, spin, || {})
    }

    /// [`Queue::wait`], running `idle` once if the first poll finds the work
    /// unfinished: housekeeping done in time that would otherwise be spent
    /// spinning.
    pub(crate) fn wait_with_idle(
        &self,
        device: &ash::Device,
        sticky: &Sticky,
        value: u64,
        timeout: Option<Duration>,
        spin: Duration,
        idle: impl FnOnce(),
    ) -> Result<()> {
        if self.completed_cached() >= value {
            return Ok(());
        }
        let start = Instant::now();
        let spin = timeout.map_or(spin, |t| spin.min(t));
        let mut idle = Some(idle);
        loop {
            if self.poll(device, sticky)? >= value {
                return Ok(());
            }
            if let Some(f) = idle.take() {
                f();
            }
            if start.elapsed() >= spin {
                break;
            }
            std::hint::spin_loop();
        }
        let remaining = timeout.map(|t| t.saturating_sub(start.elapsed()));
        let nanos = remaining.map_or(u64::MAX, |r| {
            u64::try_from(r.as_nanos()).unwrap_or(u64::MAX)
        });
        let sems = [self.timeline];
        let vals = [value];
        let info = vk::SemaphoreWaitInfo::default()
            .semaphores(&sems)
            .values(&vals);
        // SAFETY: the semaphore is live; arrays outlive the call.
        match unsafe { device.wait_semaphores(&info, nanos) } {
            Ok(()) => {
                self.completed.fetch_max(value, Ordering::AcqRel);
                Ok(())
            }
            Err(vk::Result::TIMEOUT) => Err(Error::Timeout {
                waited: start.elapsed(),
            }),
            Err(r) => Err(sticky.fail("vkWaitSemaphores", r)),
        }
    }

    /// Waits for everything submitted so far (teardown).
    pub(crate) fn wait_all(&self, device: &ash::Device, sticky: &Sticky) -> Result<()> {
        let v = self.submitted();
        self.wait(device, sticky, v, None, Duration::ZERO)
    }

    /// Destroys the timeline semaphore.
    ///
    /// # Safety
    /// No submission may still be pending and the queue is not used again.
    pub(crate) unsafe fn destroy(&self, device: &ash::Device) {
        // SAFETY: guaranteed by the caller.
        unsafe { device.destroy_semaphore(self.timeline, None) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(i: u64) -> SemaphoreWait {
        SemaphoreWait {
            semaphore: vk::Semaphore::null(),
            value: i,
            stage: vk::PipelineStageFlags::COMPUTE_SHADER,
        }
    }

    #[test]
    fn wait_list_keeps_every_wait_in_order() {
        let mut l = WaitList::default();
        assert_eq!(l.len(), 0);
        for i in 1..=(INLINE_WAITS as u64 + 5) {
            l.push(w(i));
        }
        assert_eq!(l.len(), INLINE_WAITS + 5);
        let vals: Vec<u64> = l.iter().map(|x| x.value).collect();
        assert_eq!(vals, (1..=(INLINE_WAITS as u64 + 5)).collect::<Vec<_>>());
    }

    #[test]
    fn wait_list_small_stays_inline() {
        let mut l = WaitList::default();
        for i in 1..=4 {
            l.push(w(i));
        }
        assert_eq!(l.spill.capacity(), 0);
        assert_eq!(l.iter().count(), 4);
    }
}
