//! Resident-mode configuration and what the host reads back: plain data,
//! validated without a GPU.

use std::time::Duration;

use super::super::config::{DeadlineSource, MegakernelConfig, MegakernelWorkloadHints};
use super::super::source::ClockKind;
use super::super::task::TaskState;
use super::layout::{ExitReason, MAX_RING_SLOTS};
use crate::error::{Error, Result};

/// Configuration of a resident kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResidentConfig {
    /// Persistent workers: the share of the GPU the kernel occupies (at
    /// most the forward-progress cap). Default 1.
    pub worker_count: u32,
    /// Invocations per worker (the lanes each task's code may use). Default 64.
    pub workgroup_size: u32,
    /// Ring slots: tasks in flight at once (a power of two, 2 to
    /// [`MAX_RING_SLOTS`]). Default 1,024.
    pub ring_slots: u32,
    /// Workers end after this long without a task. Default 100 ms.
    pub idle_timeout: Duration,
    /// Workers end after this long in all (at most an hour). Default 10 s.
    pub max_wall_time: Duration,
    /// How the device measures time (shader clock, else iterations).
    pub deadline: DeadlineSource,
    /// Make each task's writes to the data buffer available on the device
    /// before its completion is published (a device-scope release fence),
    /// so a task pushed once the host has seen an earlier task's completion
    /// reads that task's output. Off by default: a completion is then
    /// published as soon as the task's stores are issued, and its output is
    /// for reading once the kernel has ended (a batch or host read of the
    /// buffer waits for that by itself). The fence waits for the stores to
    /// reach the device's memory: +0.3 to 0.4 µs per round trip on an
    /// H100 (docs/PERF.md).
    pub ordered_data: bool,
}

impl Default for ResidentConfig {
    fn default() -> Self {
        ResidentConfig {
            worker_count: 1,
            workgroup_size: 64,
            ring_slots: 1024,
            idle_timeout: Duration::from_millis(100),
            max_wall_time: Duration::from_secs(10),
            deadline: DeadlineSource::Auto,
            ordered_data: false,
        }
    }
}

impl ResidentConfig {
    /// The drain-mode configuration with the same workers, budget and lanes.
    pub fn as_megakernel_config(&self) -> MegakernelConfig {
        MegakernelConfig {
            worker_count: self.worker_count,
            max_wall_time: self.max_wall_time,
            expected_items_per_worker: 0,
            workload: MegakernelWorkloadHints {
                workgroup_size: self.workgroup_size,
                deadline: self.deadline,
                ..MegakernelWorkloadHints::default()
            },
        }
    }

    /// Checks the configuration.
    ///
    /// # Errors
    /// [`Error::MegakernelConfig`] naming the field: what
    /// [`MegakernelConfig::validate`] refuses, ring slots that are not a
    /// power of two in 2..=[`MAX_RING_SLOTS`], a zero idle timeout.
    pub fn validate(&self) -> Result<()> {
        self.as_megakernel_config().validate()?;
        let s = self.ring_slots;
        if !(2..=MAX_RING_SLOTS).contains(&s) || !s.is_power_of_two() {
            return Err(Error::MegakernelConfig {
                field: "ring_slots",
                detail: format!("{s} is not a power of two from 2 to {MAX_RING_SLOTS}"),
            });
        }
        if self.idle_timeout.is_zero() {
            return Err(Error::MegakernelConfig {
                field: "idle_timeout",
                detail: "a zero idle timeout ends the workers before any task; give at least 1 µs"
                    .into(),
            });
        }
        Ok(())
    }
}

/// A finished task, as the kernel left it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The task's id.
    pub task_id: u32,
    /// [`TaskState::Done`] or [`TaskState::Faulted`].
    pub state: TaskState,
    /// Why it faulted ([`fault`](crate::megakernel::fault)), 0 otherwise.
    pub fault: u32,
    /// The parameter words as the task's code left them (its results).
    pub params: [u32; 4],
}

/// What a resident kernel did, read after it ended.
#[derive(Debug, Clone)]
pub struct ResidentStats {
    /// The last launch's ticket, completed (batches on other streams may
    /// order after it with `wait_for`).
    pub ticket: crate::Ticket,
    /// Tasks pushed.
    pub pushed: u64,
    /// Tasks claimed by the device (served or faulted).
    pub claimed: u32,
    /// Tasks that ended Done.
    pub served: u32,
    /// Tasks that ended Faulted.
    pub faulted: u32,
    /// Sum of `mk_count_user` calls.
    pub user_counter: u32,
    /// Why the first worker ended.
    pub exit: ExitReason,
    /// Workers that started and that finished.
    pub workers: (u32, u32),
    /// How the device measured time.
    pub clock: ClockKind,
    /// Host time from launch to the end.
    pub elapsed: Duration,
    /// Launches after the first: generations started because every worker
    /// ended at a loop bound (lavapipe's loop limit), never per task.
    pub relaunches: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_checks_name_the_field() {
        let field = |c: ResidentConfig| match c.validate() {
            Ok(()) => None,
            Err(Error::MegakernelConfig { field, .. }) => Some(field),
            Err(e) => panic!("{e}"),
        };
        let d = ResidentConfig::default();
        assert_eq!(field(d), None);
        for s in [0, 1, 3, 1000, MAX_RING_SLOTS * 2] {
            let c = ResidentConfig { ring_slots: s, ..d };
            assert_eq!(field(c), Some("ring_slots"), "{s}");
        }
        let c = ResidentConfig {
            ring_slots: MAX_RING_SLOTS,
            ..d
        };
        assert_eq!(field(c), None);
        let c = ResidentConfig {
            idle_timeout: Duration::ZERO,
            ..d
        };
        assert_eq!(field(c), Some("idle_timeout"));
        let c = ResidentConfig {
            worker_count: 0,
            ..d
        };
        assert_eq!(field(c), Some("worker_count"));
        let c = ResidentConfig {
            max_wall_time: Duration::from_secs(3601),
            ..d
        };
        assert_eq!(field(c), Some("max_wall_time"));
    }
}
