//! Launch policy: from a configuration, a queue and the adapter's limits to
//! the grid of one persistent launch. Plain functions, tested without a GPU.
//!
//! One worker is one workgroup; it runs one task at a time with all its
//! invocations. A launch gets
//!
//! `workers = min(worker_count, ceil(queue_len / min_tasks_per_worker),
//!                residency cap, maxComputeWorkGroupCount[0])`
//!
//! workgroups along x: never more than the configuration asks for, than the
//! queue needs, or than the adapter keeps resident at once (a persistent
//! worker that is not resident may never run while others wait for it).

use super::config::MegakernelConfig;
use super::task::{states_of, TaskWorkItem};
use crate::error::{Error, Result};

/// What bounded the number of workers of a launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchLimit {
    /// No schedulable task: nothing to launch.
    EmptyQueue,
    /// The configured `worker_count`.
    WorkerCount,
    /// The queue (with its tasks-per-worker pressure) needs no more.
    Queue,
    /// The forward-progress (residency) cap.
    Residency,
    /// `maxComputeWorkGroupCount[0]`.
    AdapterGrid,
}

/// Everything the policy decides from: the queue, the configuration and
/// the adapter's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MegakernelLaunchRequest {
    /// Schedulable tasks (Ready, Yielded, Requeued).
    pub queue_len: u32,
    /// Configured worker ceiling.
    pub worker_count: u32,
    /// Invocations per worker (the hint's workgroup size).
    pub workgroup_size: u32,
    /// Queue pressure: least tasks per worker.
    pub min_tasks_per_worker: u32,
    /// maxComputeWorkGroupSize[0].
    pub max_workgroup_size_x: u32,
    /// maxComputeWorkGroupCount[0].
    pub max_workgroups_per_dimension: u32,
    /// maxComputeWorkGroupInvocations.
    pub max_invocations_per_workgroup: u32,
    /// Workers the adapter keeps resident at once (`u32::MAX`: not stated).
    pub residency_cap: u32,
}

/// The launch shape the policy recommends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MegakernelLaunchRecommendation {
    /// Workgroups to dispatch (`[workers, 1, 1]`).
    pub grid: [u32; 3],
    /// Persistent workers (workgroups).
    pub workers: u32,
    /// Invocations per worker.
    pub workgroup_size: u32,
    /// Invocations in the whole launch (`workers × workgroup_size`).
    pub lanes: u64,
    /// Queue pressure: tasks per worker, rounded up (0 for an empty queue).
    pub tasks_per_worker: u32,
    /// What bounded `workers`.
    pub limited_by: LaunchLimit,
}

impl MegakernelLaunchRequest {
    /// The same request with a residency cap.
    pub const fn with_residency_cap(mut self, cap: u32) -> Self {
        self.residency_cap = cap;
        self
    }

    /// Workers and what bounded them (no limit checks).
    fn workers(&self) -> (u32, LaunchLimit) {
        if self.queue_len == 0 {
            return (0, LaunchLimit::EmptyQueue);
        }
        let need = self.queue_len.div_ceil(self.min_tasks_per_worker.max(1));
        let mut best = (self.worker_count, LaunchLimit::WorkerCount);
        for cand in [
            (need, LaunchLimit::Queue),
            (self.residency_cap, LaunchLimit::Residency),
            (self.max_workgroups_per_dimension, LaunchLimit::AdapterGrid),
        ] {
            if cand.0 < best.0 {
                best = cand;
            }
        }
        best
    }

    /// The recommended launch.
    ///
    /// # Errors
    /// [`Error::MegakernelConfig`] when a limit is zero (malformed), or the
    /// workgroup size is over `maxComputeWorkGroupSize[0]` or
    /// `maxComputeWorkGroupInvocations`.
    pub fn recommend(&self) -> Result<MegakernelLaunchRecommendation> {
        for (name, v) in [
            ("max_workgroup_size_x", self.max_workgroup_size_x),
            (
                "max_compute_workgroups_per_dimension",
                self.max_workgroups_per_dimension,
            ),
            (
                "max_compute_invocations_per_workgroup",
                self.max_invocations_per_workgroup,
            ),
            ("residency cap", self.residency_cap),
            ("workload.workgroup_size", self.workgroup_size),
            ("worker_count", self.worker_count),
        ] {
            if v == 0 {
                return Err(Error::MegakernelConfig {
                    field: name,
                    detail: "is 0: a malformed adapter limit or request".into(),
                });
            }
        }
        let ws = self.workgroup_size;
        let ws_limit = self
            .max_workgroup_size_x
            .min(self.max_invocations_per_workgroup);
        if ws > ws_limit {
            return Err(Error::MegakernelConfig {
                field: "workload.workgroup_size",
                detail: format!(
                    "{ws} invocations per worker is over the adapter's limit of {ws_limit} \
                     (maxComputeWorkGroupSize[0] {}, maxComputeWorkGroupInvocations {})",
                    self.max_workgroup_size_x, self.max_invocations_per_workgroup
                ),
            });
        }
        let (workers, limited_by) = self.workers();
        Ok(MegakernelLaunchRecommendation {
            grid: [workers, 1, 1],
            workers,
            workgroup_size: ws,
            lanes: u64::from(workers) * u64::from(ws),
            tasks_per_worker: if workers == 0 {
                0
            } else {
                self.queue_len.div_ceil(workers)
            },
            limited_by,
        })
    }
}

/// Schedulable tasks in `tasks`.
///
/// # Errors
/// [`Error::InvalidTaskState`] naming the first slot with a bad state word.
pub fn schedulable_count(tasks: &[TaskWorkItem]) -> Result<u32> {
    let n = states_of(tasks)?
        .iter()
        .filter(|s| s.is_schedulable())
        .count();
    Ok(u32::try_from(n).unwrap_or(u32::MAX))
}

impl MegakernelConfig {
    /// The grid for `queue_len` schedulable tasks: never more workgroups than
    /// `worker_count`, than the queue needs (with its tasks-per-worker
    /// pressure), or than `residency_cap` (workers the adapter keeps
    /// resident). A workgroup size over `max_workgroup_size_x` forms no
    /// workgroup: the grid is empty (`launch_recommendation` says why).
    pub fn dispatch_grid(
        &self,
        queue_len: u32,
        max_workgroup_size_x: u32,
        residency_cap: u32,
    ) -> [u32; 3] {
        if self.workload.workgroup_size == 0 || self.workload.workgroup_size > max_workgroup_size_x
        {
            return [0, 1, 1];
        }
        let req = self
            .launch_request(queue_len, max_workgroup_size_x, u32::MAX, u32::MAX)
            .with_residency_cap(residency_cap);
        [req.workers().0, 1, 1]
    }

    /// A policy request from this configuration and adapter limits (no
    /// residency cap: add one with
    /// [`MegakernelLaunchRequest::with_residency_cap`]).
    pub const fn launch_request(
        &self,
        queue_len: u32,
        max_workgroup_size_x: u32,
        max_compute_workgroups_per_dimension: u32,
        max_compute_invocations_per_workgroup: u32,
    ) -> MegakernelLaunchRequest {
        MegakernelLaunchRequest {
            queue_len,
            worker_count: self.worker_count,
            workgroup_size: self.workload.workgroup_size,
            min_tasks_per_worker: self.workload.min_tasks_per_worker,
            max_workgroup_size_x,
            max_workgroups_per_dimension: max_compute_workgroups_per_dimension,
            max_invocations_per_workgroup: max_compute_invocations_per_workgroup,
            residency_cap: u32::MAX,
        }
    }

    /// A policy request for a task list: paused, done, empty, running and
    /// faulted tasks add no lanes; ready, yielded and requeued ones do.
    ///
    /// # Errors
    /// [`Error::InvalidTaskState`] naming the first slot with a bad state word.
    pub fn launch_request_for_tasks(
        &self,
        tasks: &[TaskWorkItem],
        max_workgroup_size_x: u32,
        max_compute_workgroups_per_dimension: u32,
        max_compute_invocations_per_workgroup: u32,
    ) -> Result<MegakernelLaunchRequest> {
        Ok(self.launch_request(
            schedulable_count(tasks)?,
            max_workgroup_size_x,
            max_compute_workgroups_per_dimension,
            max_compute_invocations_per_workgroup,
        ))
    }

    /// The recommended launch for `queue_len` schedulable tasks.
    ///
    /// # Errors
    /// [`Error::MegakernelConfig`] for malformed limits or a workgroup size
    /// over them.
    pub fn launch_recommendation(
        &self,
        queue_len: u32,
        max_workgroup_size_x: u32,
        max_compute_workgroups_per_dimension: u32,
        max_compute_invocations_per_workgroup: u32,
    ) -> Result<MegakernelLaunchRecommendation> {
        self.launch_request(
            queue_len,
            max_workgroup_size_x,
            max_compute_workgroups_per_dimension,
            max_compute_invocations_per_workgroup,
        )
        .recommend()
    }

    /// The recommended launch for a task list.
    ///
    /// # Errors
    /// As [`MegakernelConfig::launch_request_for_tasks`] and
    /// [`MegakernelConfig::launch_recommendation`].
    pub fn launch_recommendation_for_tasks(
        &self,
        tasks: &[TaskWorkItem],
        max_workgroup_size_x: u32,
        max_compute_workgroups_per_dimension: u32,
        max_compute_invocations_per_workgroup: u32,
    ) -> Result<MegakernelLaunchRecommendation> {
        self.launch_request_for_tasks(
            tasks,
            max_workgroup_size_x,
            max_compute_workgroups_per_dimension,
            max_compute_invocations_per_workgroup,
        )?
        .recommend()
    }
}

#[cfg(test)]
mod tests {
    use super::super::task::TaskState;
    use super::*;
    use bytemuck::Zeroable;

    fn cfg(workers: u32, ws: u32, per: u32) -> MegakernelConfig {
        let mut c = MegakernelConfig {
            worker_count: workers,
            ..Default::default()
        };
        c.workload.workgroup_size = ws;
        c.workload.min_tasks_per_worker = per;
        c
    }

    #[test]
    fn dispatch_grid_table() {
        const M: u32 = u32::MAX;
        // (workers, workgroup size, pressure, queue, max_x, cap) -> grid x
        let rows: &[(u32, u32, u32, u32, u32, u32, u32)] = &[
            (8, 64, 1, 100, 1024, M, 8), // worker count bounds
            (8, 64, 1, 3, 1024, M, 3),   // queue bounds
            (8, 64, 1, 100, 1024, 2, 2), // residency bounds
            (8, 64, 10, 35, 1024, M, 4), // pressure: ceil(35/10)
            (8, 64, 1, 0, 1024, M, 0),   // empty queue
            (1, 1, 1, 1, 1, 1, 1),       // all ones
            (M, 1, 1, M, M, M, M),       // all max
            (M, M, M, M, M, M, 1),       // max pressure
            (M, 1, 1, M, M, 1, 1),       // cap 1
            (8, 64, 1, 100, 32, M, 0),   // workgroup size 64 over max_x 32
        ];
        for &(w, ws, per, q, max_x, cap, want) in rows {
            assert_eq!(
                cfg(w, ws, per).dispatch_grid(q, max_x, cap),
                [want, 1, 1],
                "workers {w} ws {ws} per {per} queue {q} max_x {max_x} cap {cap}"
            );
        }
    }

    #[test]
    fn recommendation_fields_and_limits() {
        const M: u32 = u32::MAX;
        // (workers, ws, queue, max_x, groups, invocations, cap) -> (workers, lanes, per, limit)
        type Row = (
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u64,
            u32,
            LaunchLimit,
        );
        let rows: &[Row] = &[
            (
                8,
                64,
                100,
                1024,
                65535,
                1024,
                M,
                8,
                512,
                13,
                LaunchLimit::WorkerCount,
            ),
            (
                8,
                64,
                5,
                1024,
                65535,
                1024,
                M,
                5,
                320,
                1,
                LaunchLimit::Queue,
            ),
            (
                8,
                64,
                100,
                1024,
                65535,
                1024,
                2,
                2,
                128,
                50,
                LaunchLimit::Residency,
            ),
            (
                8,
                64,
                100,
                1024,
                3,
                1024,
                M,
                3,
                192,
                34,
                LaunchLimit::AdapterGrid,
            ),
            (
                8,
                64,
                0,
                1024,
                65535,
                1024,
                M,
                0,
                0,
                0,
                LaunchLimit::EmptyQueue,
            ),
            (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, LaunchLimit::WorkerCount),
            (
                M,
                M,
                M,
                M,
                M,
                M,
                M,
                M,
                u64::from(M) * u64::from(M),
                1,
                LaunchLimit::WorkerCount,
            ),
        ];
        for &(w, ws, q, mx, mg, mi, cap, want_w, lanes, per, limit) in rows {
            let r = cfg(w, ws, 1)
                .launch_request(q, mx, mg, mi)
                .with_residency_cap(cap)
                .recommend()
                .unwrap();
            assert_eq!(r.workers, want_w, "{w} {q} {cap}");
            assert_eq!(r.grid, [want_w, 1, 1]);
            assert_eq!(r.workgroup_size, ws);
            assert_eq!(r.lanes, lanes);
            assert_eq!(r.tasks_per_worker, per);
            assert_eq!(r.limited_by, limit);
        }
    }

    #[test]
    fn malformed_limits_and_oversized_workgroups_are_errors() {
        let c = cfg(8, 64, 1);
        for (mx, mg, mi, field) in [
            (0, 1, 1, "max_workgroup_size_x"),
            (64, 0, 64, "max_compute_workgroups_per_dimension"),
            (64, 1, 0, "max_compute_invocations_per_workgroup"),
            (32, 1, 1024, "workload.workgroup_size"),
            (1024, 1, 32, "workload.workgroup_size"),
        ] {
            match c.launch_recommendation(10, mx, mg, mi) {
                Err(Error::MegakernelConfig { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{mx} {mg} {mi}: {other:?}"),
            }
        }
        let r = c
            .launch_request(10, 64, 1, 64)
            .with_residency_cap(0)
            .recommend();
        assert!(matches!(
            r,
            Err(Error::MegakernelConfig {
                field: "residency cap",
                ..
            })
        ));
    }

    #[test]
    fn only_schedulable_tasks_add_lanes() {
        let with = |s: TaskState| TaskWorkItem {
            state: s as u32,
            ..TaskWorkItem::zeroed()
        };
        let c = cfg(64, 32, 1);
        for s in TaskState::ALL {
            let tasks = vec![with(s); 5];
            let r = c
                .launch_recommendation_for_tasks(&tasks, 1024, 65535, 1024)
                .unwrap();
            let want = if s.is_schedulable() { 5 } else { 0 };
            assert_eq!(r.workers, want, "{s:?}");
            assert_eq!(r.lanes, u64::from(want) * 32, "{s:?}");
            let q = c
                .launch_request_for_tasks(&tasks, 1024, 65535, 1024)
                .unwrap();
            assert_eq!(q.queue_len, want);
        }
        let mut tasks = vec![with(TaskState::Ready); 3];
        tasks[2].state = 8;
        assert!(matches!(
            c.launch_recommendation_for_tasks(&tasks, 1024, 65535, 1024),
            Err(Error::InvalidTaskState { index: 2, word: 8 })
        ));
        tasks[2].state = u32::MAX;
        assert!(matches!(
            c.launch_request_for_tasks(&tasks, 1, 1, 1),
            Err(Error::InvalidTaskState { index: 2, .. })
        ));
    }
}
