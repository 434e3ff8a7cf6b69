//! Megakernel configuration: how many persistent workers, for how long, and
//! what the workload looks like. Plain data with a `validate` that says
//! which field (or which pair of fields) is wrong; tested without a GPU.

use std::time::Duration;

use super::source::StepBarrier;
use crate::error::{Error, Result};

/// The longest wall-time budget one launch may ask for.
pub const MAX_WALL_TIME: Duration = Duration::from_secs(3600);

/// How a launch measures its wall-time budget on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeadlineSource {
    /// The shader clock where the device has one, else an iteration budget.
    #[default]
    Auto,
    /// VK_KHR_shader_clock (device clock, else subgroup clock), calibrated
    /// against host time once per device. Adapters without it get
    /// [`Error::MissingFeature`] ([`Capability::MegakernelShaderClock`](crate::Capability::MegakernelShaderClock)).
    ShaderClock,
    /// A budget of worker-loop iterations derived from the wall time and a
    /// once-per-device calibration (coarse: a long task counts as one).
    IterationBudget,
}

/// Shape of the work, used by the launch policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MegakernelWorkloadHints {
    /// Invocations per worker workgroup (`local_size_x`, the lanes each
    /// task's code may use). Default 64.
    pub workgroup_size: u32,
    /// Most task slots the queue is meant to hold; 0 states no bound.
    pub queue_capacity: u32,
    /// Queue pressure: launch no more workers than `ceil(queue_len /
    /// min_tasks_per_worker)`, so each has at least this many tasks. Default 1.
    pub min_tasks_per_worker: u32,
    /// Room for re-queues within one launch, per schedulable task: a task
    /// that yields or requeues more often stays Yielded/Requeued for the
    /// next launch. Default 4.
    pub max_requeues_per_task: u32,
    /// Iterations any device-side wait may spin before giving up (and
    /// saying so in the report). Default 2^22.
    pub spin_budget: u32,
    /// How the wall-time budget is measured on the device.
    pub deadline: DeadlineSource,
    /// How the step barrier (step mode) signals that all workers arrived.
    pub step_barrier: StepBarrier,
}

impl Default for MegakernelWorkloadHints {
    fn default() -> Self {
        MegakernelWorkloadHints {
            workgroup_size: 64,
            queue_capacity: 0,
            min_tasks_per_worker: 1,
            max_requeues_per_task: 4,
            spin_budget: 1 << 22,
            deadline: DeadlineSource::Auto,
            step_barrier: StepBarrier::Counter,
        }
    }
}

/// Configuration of one megakernel launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MegakernelConfig {
    /// Persistent worker workgroups (a ceiling: a short queue gets fewer;
    /// more than the adapter keeps resident is an error). Default 8.
    pub worker_count: u32,
    /// Workers stop claiming tasks once this much time has passed; what is
    /// left stays schedulable for the next launch. Default 1 s.
    pub max_wall_time: Duration,
    /// Expected tasks per worker (0: no expectation). Checked against the
    /// queue capacity and the queue-pressure hint.
    pub expected_items_per_worker: u32,
    /// Workload shape.
    pub workload: MegakernelWorkloadHints,
}

impl Default for MegakernelConfig {
    fn default() -> Self {
        MegakernelConfig {
            worker_count: 8,
            max_wall_time: Duration::from_secs(1),
            expected_items_per_worker: 0,
            workload: MegakernelWorkloadHints::default(),
        }
    }
}

fn bad(field: &'static str, detail: String) -> Error {
    Error::MegakernelConfig { field, detail }
}

impl MegakernelConfig {
    /// Checks the configuration.
    ///
    /// # Errors
    /// [`Error::MegakernelConfig`] naming the field: zero workers, a zero
    /// wall-time budget or one over an hour, a zero workgroup size or spin
    /// budget, or hints that contradict each other (more expected items
    /// than the queue holds, a queue-pressure minimum above the expected
    /// items or above the queue capacity).
    pub fn validate(&self) -> Result<()> {
        if self.worker_count == 0 {
            return Err(bad(
                "worker_count",
                "0 workers can run no task; use at least 1".into(),
            ));
        }
        if self.max_wall_time.is_zero() {
            return Err(bad(
                "max_wall_time",
                "a zero wall-time budget lets no worker claim a task; give at least 1 µs".into(),
            ));
        }
        if self.max_wall_time > MAX_WALL_TIME {
            return Err(bad(
                "max_wall_time",
                format!(
                    "{:?} is over the limit of {:?}; split the work over several launches",
                    self.max_wall_time, MAX_WALL_TIME
                ),
            ));
        }
        let w = &self.workload;
        if w.workgroup_size == 0 {
            return Err(bad(
                "workload.workgroup_size",
                "0 invocations per worker; use at least 1".into(),
            ));
        }
        if w.spin_budget == 0 {
            return Err(bad(
                "workload.spin_budget",
                "0 lets no device-side wait succeed; use at least 1".into(),
            ));
        }
        if w.min_tasks_per_worker == 0 {
            return Err(bad(
                "workload.min_tasks_per_worker",
                "0 tasks per worker is no queue pressure; use at least 1".into(),
            ));
        }
        let expected = u64::from(self.expected_items_per_worker) * u64::from(self.worker_count);
        if w.queue_capacity != 0 && expected > u64::from(w.queue_capacity) {
            return Err(bad(
                "expected_items_per_worker × worker_count vs workload.queue_capacity",
                format!(
                    "{} × {} = {expected} expected items, more than the queue holds ({})",
                    self.expected_items_per_worker, self.worker_count, w.queue_capacity
                ),
            ));
        }
        if self.expected_items_per_worker != 0
            && w.min_tasks_per_worker > self.expected_items_per_worker
        {
            return Err(bad(
                "workload.min_tasks_per_worker vs expected_items_per_worker",
                format!(
                    "each worker should get at least {} tasks, but only {} are expected per worker",
                    w.min_tasks_per_worker, self.expected_items_per_worker
                ),
            ));
        }
        if w.queue_capacity != 0 && w.min_tasks_per_worker > w.queue_capacity {
            return Err(bad(
                "workload.min_tasks_per_worker vs workload.queue_capacity",
                format!(
                    "{} tasks per worker cannot fit a queue of {}",
                    w.min_tasks_per_worker, w.queue_capacity
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(c: &MegakernelConfig) -> Option<&'static str> {
        match c.validate() {
            Ok(()) => None,
            Err(Error::MegakernelConfig { field, .. }) => Some(field),
            Err(e) => panic!("unexpected error {e}"),
        }
    }

    #[test]
    fn default_is_valid() {
        assert_eq!(field_of(&MegakernelConfig::default()), None);
    }

    #[test]
    fn each_bad_field_is_named() {
        let d = MegakernelConfig::default();
        let hint = |f: &dyn Fn(&mut MegakernelConfig)| {
            let mut c = d;
            f(&mut c);
            field_of(&c)
        };
        assert_eq!(hint(&|c| c.worker_count = 0), Some("worker_count"));
        assert_eq!(
            hint(&|c| c.max_wall_time = Duration::ZERO),
            Some("max_wall_time")
        );
        assert_eq!(
            hint(&|c| c.max_wall_time = MAX_WALL_TIME + Duration::from_nanos(1)),
            Some("max_wall_time")
        );
        assert_eq!(hint(&|c| c.max_wall_time = MAX_WALL_TIME), None);
        assert_eq!(hint(&|c| c.max_wall_time = Duration::from_nanos(1)), None);
        assert_eq!(
            hint(&|c| c.workload.workgroup_size = 0),
            Some("workload.workgroup_size")
        );
        assert_eq!(
            hint(&|c| c.workload.spin_budget = 0),
            Some("workload.spin_budget")
        );
        assert_eq!(
            hint(&|c| c.workload.min_tasks_per_worker = 0),
            Some("workload.min_tasks_per_worker")
        );
    }

    #[test]
    fn contradicting_hints_say_which() {
        let mut c = MegakernelConfig {
            worker_count: 10,
            expected_items_per_worker: 11,
            ..Default::default()
        };
        c.workload.queue_capacity = 100;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("queue_capacity") && e.contains("110"), "{e}");
        c.expected_items_per_worker = 10;
        c.validate().unwrap();
        c.workload.min_tasks_per_worker = 11;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("min_tasks_per_worker vs expected"), "{e}");
        c.expected_items_per_worker = 0;
        c.workload.min_tasks_per_worker = 101;
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains("min_tasks_per_worker vs workload.queue_capacity"),
            "{e}"
        );
        // u32::MAX products do not overflow
        let c = MegakernelConfig {
            worker_count: u32::MAX,
            expected_items_per_worker: u32::MAX,
            ..Default::default()
        };
        c.validate().unwrap();
    }
}
