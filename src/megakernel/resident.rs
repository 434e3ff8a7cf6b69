//! Resident mode: the megakernel keeps running and the host hands it tasks
//! through a ring in host-visible memory (device-local host-visible where
//! the adapter has it), reading completions back from the same ring, with
//! no submission per task.
//!
//! Ring layout (u32 words, shared with `MK_RESIDENT` in
//! `shaders/megakernel/worker.glsl`): word 0 the stop flag, word 32 the
//! device's claim counter, word 64 reserved; slot `i` at `128 + 32 i` (its
//! own 128-byte line): word 0 the request's sequence number + 1, written
//! last by the host (release); word 1 the completion, written last by the
//! device (release); words 16..31 the [`TaskWorkItem`]. Request `k` lives in
//! slot `k % slots`; the host reuses a slot only after the previous
//! request's result was read.
//!
//! The kernel stops when asked ([`ResidentSession::stop`]), when the
//! wall-time budget ends, or after `idle` without a request, so a host that
//! stops pushing never leaves the GPU spinning. Until the execution model's
//! streams land, a resident kernel runs on the device's one compute queue:
//! batches submitted meanwhile, and host reads of buffers, wait for it.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::config::{MegakernelConfig, MegakernelWorkloadHints};
use super::report::{initial_control, MegakernelReport};
use super::runner::{LastLaunch, Megakernel};
use super::source::MegakernelMode;
use super::task::{TaskState, TaskWorkItem};
use crate::buffer::Buffer;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::memory::Memory;
use crate::ticket::Ticket;

const STOP: usize = 0;
const SLOTS: usize = 128;
const SLOT_WORDS: usize = 32;

/// Words of a ring with `slots` slots (pure).
pub(crate) fn ring_words(slots: u32) -> usize {
    SLOTS + SLOT_WORDS * slots as usize
}

/// First word of request `k`'s slot (pure).
pub(crate) fn slot_base(k: u64, slots: u32) -> usize {
    SLOTS + SLOT_WORDS * (k % u64::from(slots)) as usize
}

impl Megakernel {
    /// A resident megakernel: the same user code as [`Megakernel::tasks`]
    /// (each request runs once: it must end Done or Faulted), served from
    /// a ring of `ring_slots` slots.
    ///
    /// # Errors
    /// [`Error::MegakernelConfig`] for zero slots, [`Error::Glsl`], or what
    /// allocation returns.
    pub fn resident(
        gpu: &Device,
        user_glsl: &str,
        workload: &MegakernelWorkloadHints,
        data: &Buffer<f32>,
        ring_slots: u32,
    ) -> Result<Megakernel> {
        if ring_slots == 0 || ring_slots > (1 << 20) {
            return Err(Error::MegakernelConfig {
                field: "ring_slots",
                detail: format!("{ring_slots} slots; use 1 to 2^20"),
            });
        }
        let tasks = gpu.upload(&[TaskWorkItem::default_empty()])?;
        let mut mk = Megakernel::build(
            gpu,
            MegakernelMode::Resident,
            user_glsl,
            workload,
            tasks,
            data,
        )?;
        let memory = if gpu.info().host_visible_device_memory > 0 {
            Memory::DeviceHostVisible
        } else {
            Memory::HostVisible
        };
        mk.order = gpu.alloc_with(ring_words(ring_slots), memory)?;
        Ok(mk)
    }

    /// Starts the resident kernel: `config.worker_count` workers serve the
    /// ring until [`ResidentSession::stop`], the wall-time budget, or
    /// `idle` without a request.
    ///
    /// # Errors
    /// As [`Megakernel::launch`]; [`Error::Unsupported`] when the ring is
    /// not host-mapped.
    pub fn start_resident(
        &mut self,
        config: &MegakernelConfig,
        idle: Duration,
    ) -> Result<ResidentSession<'_>> {
        self.expect_mode(MegakernelMode::Resident)?;
        config.validate()?;
        self.check_residency(config)?;
        let v = self.variant(&config.workload)?;
        let kernel = self.kernel(v)?;
        let (mut params, cal) = self.budget(&v, config)?;
        let slots = ((self.order.len() - SLOTS) / SLOT_WORDS) as u32;
        params.order_cap = slots;
        let (lo, hi) = cal.budget_ticks(idle);
        params.idle_lo = lo;
        params.idle_hi = hi;
        params.idle_iters = cal.budget_iterations(idle);
        self.order.write(0, &vec![0u32; self.order.len()])?;
        self.control.write(0, &initial_control(0))?;
        let ring = self
            .order
            .inner
            .mapped()
            .ok_or_else(|| Error::Unsupported {
                what: "a host-mapped ring for resident mode",
                adapter: self.gpu.info().name.clone(),
            })?;
        self.last = Some(LastLaunch {
            workers: config.worker_count,
            scheduled: 0,
            steps: 0,
            clock: v.clock,
            calibration: Some(cal),
        });
        let mut batch = self.gpu.batch()?;
        batch.run_configured(
            &kernel,
            &[&self.tasks, &self.control, &self.order, &self.data],
            [config.worker_count, 1, 1],
            Some(bytemuck::bytes_of(&params)),
        )?;
        let ticket = self.submit(batch)?;
        Ok(ResidentSession {
            ring,
            slots,
            next: AtomicU64::new(0),
            consumed: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            ticket: Some(ticket),
            mk: self,
        })
    }
}

/// A running resident megakernel. `push` and `wait` may be called from
/// many threads at once.
pub struct ResidentSession<'a> {
    ring: NonNull<u8>,
    slots: u32,
    next: AtomicU64,
    /// Per slot: sequence number + 1 of the last request whose result was read.
    consumed: Vec<AtomicU32>,
    ticket: Option<Ticket>,
    mk: &'a mut Megakernel,
}

// SAFETY: the ring pointer is a persistent mapping of host-coherent memory
// the session's Megakernel keeps alive; every access through it is an
// atomic on an aligned u32 (see `word`).
unsafe impl Send for ResidentSession<'_> {}
// SAFETY: as above: shared use is atomics only.
unsafe impl Sync for ResidentSession<'_> {}

impl ResidentSession<'_> {
    fn word(&self, i: usize) -> &AtomicU32 {
        debug_assert!(i < ring_words(self.slots));
        // SAFETY: `i` is within the ring (callers index slots modulo
        // `slots`), the mapping is 4-byte aligned, lives as long as `self`
        // (the Megakernel holds the buffer), and both the host and the
        // device access these words only atomically.
        unsafe { &*(self.ring.as_ptr().cast::<AtomicU32>().add(i)) }
    }

    fn stopped(&self, request: u64) -> Result<()> {
        let ticket = self
            .ticket
            .as_ref()
            .ok_or(Error::ResidentStopped { request })?;
        if ticket.is_ready()? {
            return Err(Error::ResidentStopped { request });
        }
        Ok(())
    }

    /// Hands `task` to the running kernel; returns its request number.
    /// Waits (up to `timeout`) while the ring is full of unread results.
    ///
    /// # Errors
    /// [`Error::ResidentStopped`] when the kernel has ended,
    /// [`Error::Timeout`], [`Error::MegakernelConfig`] past 2^32 − 2
    /// requests.
    pub fn push(&self, task: &TaskWorkItem, timeout: Duration) -> Result<u64> {
        let k = self.next.fetch_add(1, Ordering::Relaxed);
        if k >= u64::from(u32::MAX - 1) {
            return Err(Error::MegakernelConfig {
                field: "resident requests",
                detail: "2^32 − 2 requests per session; start a new one".into(),
            });
        }
        let slot = (k % u64::from(self.slots)) as usize;
        if k >= u64::from(self.slots) {
            let prev = (k - u64::from(self.slots) + 1) as u32;
            let t0 = Instant::now();
            while self.consumed[slot].load(Ordering::Acquire) != prev {
                if t0.elapsed() > timeout {
                    return Err(Error::Timeout {
                        waited: t0.elapsed(),
                    });
                }
                self.stopped(k)?;
                std::hint::spin_loop();
            }
        }
        let base = slot_base(k, self.slots);
        for (i, w) in bytemuck::cast_slice::<TaskWorkItem, u32>(std::slice::from_ref(task))
            .iter()
            .enumerate()
        {
            self.word(base + 16 + i).store(*w, Ordering::Relaxed);
        }
        // The ring may be write-combined (resizable BAR): a full fence
        // drains the task words before the sequence word, and the second
        // pushes the sequence word out now rather than when the buffer fills.
        std::sync::atomic::fence(Ordering::SeqCst);
        self.word(base).store(k as u32 + 1, Ordering::Release);
        std::sync::atomic::fence(Ordering::SeqCst);
        Ok(k)
    }

    /// Waits (spinning, up to `timeout`) for request `k` and returns the
    /// task as the kernel left it (Done or Faulted, with its `fault`).
    ///
    /// # Errors
    /// [`Error::ResidentStopped`] when the kernel ended without serving it,
    /// [`Error::Timeout`].
    pub fn wait(&self, k: u64, timeout: Duration) -> Result<TaskWorkItem> {
        let base = slot_base(k, self.slots);
        let t0 = Instant::now();
        let mut spins = 0u32;
        while self.word(base + 1).load(Ordering::Acquire) != k as u32 + 1 {
            spins = spins.wrapping_add(1);
            if spins % 1024 == 0 {
                if t0.elapsed() > timeout {
                    return Err(Error::Timeout {
                        waited: t0.elapsed(),
                    });
                }
                if let Err(e) = self.stopped(k) {
                    if self.word(base + 1).load(Ordering::Acquire) == k as u32 + 1 {
                        break;
                    }
                    return Err(e);
                }
            }
            std::hint::spin_loop();
        }
        let mut words = [0u32; 16];
        for (i, w) in words.iter_mut().enumerate() {
            *w = self.word(base + 16 + i).load(Ordering::Relaxed);
        }
        let slot = (k % u64::from(self.slots)) as usize;
        self.consumed[slot].store(k as u32 + 1, Ordering::Release);
        Ok(bytemuck::cast(words))
    }

    /// Whether the kernel is still running (it ends by itself after the
    /// wall-time budget or the idle time).
    ///
    /// # Errors
    /// [`Error::DeviceLost`].
    pub fn is_running(&self) -> Result<bool> {
        match &self.ticket {
            Some(t) => Ok(!t.is_ready()?),
            None => Ok(false),
        }
    }

    /// Asks the kernel to stop, waits for it, and returns its counters.
    ///
    /// # Errors
    /// What waiting returns ([`Error::DeviceLost`] among them).
    pub fn stop(mut self) -> Result<MegakernelReport> {
        self.word(STOP).store(1, Ordering::Release);
        std::sync::atomic::fence(Ordering::SeqCst);
        if let Some(t) = self.ticket.take() {
            t.wait()?;
        }
        self.mk.report()
    }
}

impl Drop for ResidentSession<'_> {
    fn drop(&mut self) {
        self.word(STOP).store(1, Ordering::Release);
        if let Some(t) = self.ticket.take() {
            let _ = t.wait_timeout(Duration::from_secs(10));
        }
    }
}

impl TaskWorkItem {
    fn default_empty() -> TaskWorkItem {
        TaskWorkItem {
            state: TaskState::Empty as u32,
            ..bytemuck::Zeroable::zeroed()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_layout() {
        assert_eq!(ring_words(1), 160);
        assert_eq!(slot_base(0, 4), 128);
        assert_eq!(slot_base(5, 4), 128 + 32);
        assert_eq!(slot_base(u64::from(u32::MAX), 1), 128);
        // each slot on its own 128-byte line, after the header lines
        assert_eq!((slot_base(1, 8) - slot_base(0, 8)) * 4, 128);
        assert_eq!(SLOTS * 4 % 128, 0);
    }
}
