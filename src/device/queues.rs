//! The device's queues (compute, the extra compute queues streams use,
//! transfer) by mark slot, and the marks read from their timelines:
//! completed, submitted, waited for.

use std::time::Duration;

use super::DeviceInner;
use crate::error::Result;
use crate::queue::Queue;
use crate::reclaim::{UseMark, SLOT_COMPUTE, SLOT_FIRST_EXTRA, SLOT_TRANSFER};
use crate::recorder::RecorderPool;

impl DeviceInner {
    /// The queue staging copies go to.
    pub(crate) fn transfer_queue(&self) -> &Queue {
        self.transfer.as_ref().unwrap_or(&self.compute)
    }

    /// The recorders of the queue staging copies go to.
    pub(crate) fn transfer_recorder_pool(&self) -> &RecorderPool {
        self.transfer_recorders
            .as_ref()
            .unwrap_or(&self.compute_recorders)
    }

    /// A mark on the transfer queue for `value` (on the compute queue when
    /// there is no transfer queue).
    pub(crate) fn transfer_mark(&self, value: u64) -> UseMark {
        UseMark::at(self.transfer_queue().slot, value)
    }

    /// The queue of mark slot `slot`.
    pub(crate) fn queue(&self, slot: usize) -> Option<&Queue> {
        match slot {
            SLOT_COMPUTE => Some(&self.compute),
            SLOT_TRANSFER => self.transfer.as_ref(),
            s => self.extra_compute.get(s - SLOT_FIRST_EXTRA),
        }
    }

    /// The compute-family queues: the compute queue, then the extra ones.
    pub(crate) fn compute_queues(&self) -> impl Iterator<Item = &Queue> {
        std::iter::once(&self.compute).chain(&self.extra_compute)
    }

    /// Every queue.
    pub(crate) fn queues(&self) -> impl Iterator<Item = &Queue> {
        self.compute_queues().chain(&self.transfer)
    }

    /// Completed values on every queue, asking the driver about queues
    /// with work the host has not yet seen complete.
    pub(crate) fn completed(&self) -> Result<UseMark> {
        self.sticky.check()?;
        let mut m = UseMark::default();
        for q in self.queues() {
            let v = if q.submitted() > q.completed_cached() {
                q.poll(&self.raw, &self.sticky)?
            } else {
                q.completed_cached()
            };
            m.set(q.slot, v);
        }
        Ok(m)
    }

    /// Completed values as last seen, without asking the driver.
    pub(crate) fn completed_cached(&self) -> UseMark {
        let mut m = UseMark::default();
        for q in self.queues() {
            m.set(q.slot, q.completed_cached());
        }
        m
    }

    /// The last values submitted on every queue.
    pub(crate) fn submitted_mark(&self) -> UseMark {
        let mut m = UseMark::default();
        for q in self.queues() {
            m.set(q.slot, q.submitted());
        }
        m
    }

    /// Waits until `mark` is reached on every queue.
    pub(crate) fn wait_mark(&self, mark: UseMark, timeout: Option<Duration>) -> Result<()> {
        let spin = self.options.wait_spin;
        for (slot, v) in mark.points() {
            if let Some(q) = self.queue(slot) {
                q.wait(&self.raw, &self.sticky, v, timeout, spin)?;
            }
        }
        Ok(())
    }

    /// Waits for all submitted work on every queue.
    pub(crate) fn wait_idle(&self) -> Result<()> {
        for q in self.queues() {
            q.wait_all(&self.raw, &self.sticky)?;
        }
        Ok(())
    }
}
