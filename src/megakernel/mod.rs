//! Persistent megakernel: one dispatch whose workers pull many small tasks
//! from a device-side queue, or run many dependent steps with a device-wide
//! barrier, instead of one dispatch per task.
//!
//! - [`MegakernelConfig`] / [`MegakernelWorkloadHints`]: workers, wall-time
//!   budget, workload shape; [`MegakernelConfig::validate`].
//! - Launch policy ([`MegakernelConfig::dispatch_grid`],
//!   [`MegakernelConfig::launch_recommendation`] and its `_for_tasks` form):
//!   pure functions of the queue and the adapter's limits.
//! - [`TaskWorkItem`] / [`TaskState`]: 64-byte task slots and their life
//!   cycle, enforced on the host.
//! - Forward progress ([`ResidencyCap`]): never more workers than the
//!   adapter keeps resident at once; every device-side spin is bounded. A
//!   step launch cut short anyway is an error, never a result
//!   ([`MegakernelError::LaunchCut`], from [`Megakernel::report`]), and
//!   lowers the cap; [`Megakernel::assume_residency_cap`] sets it. Where
//!   the driver cuts loops (llvmpipe), a task cut mid-run ends Faulted
//!   ([`fault::LOOP_CUT`]), never Done.
//! - [`Megakernel`]: the GLSL template (`shaders/megakernel/`) plus the
//!   user's code in one kernel; [`Megakernel::launch`] returns a
//!   [`Ticket`](crate::Ticket); [`Megakernel::report`] says what it did.
//! - Resident mode ([`resident::ResidentMegakernel`]): the kernel keeps
//!   running on its own stream and the host pushes tasks into a
//!   host-visible ring, with no submission per task.
//!
//! ```no_run
//! use vkcompute::megakernel::{Megakernel, MegakernelConfig, TaskWorkItem};
//! # fn main() -> vkcompute::Result<()> {
//! let gpu = vkcompute::Device::new()?;
//! let data = gpu.upload(&vec![1.0f32; 1024])?;
//! let user = r#"
//!     #define MK_OP_COUNT 1
//!     uint run_task(inout MkTask t, uint lane, uint lanes) {
//!         for (uint i = lane; i < t.output_len; i += lanes)
//!             mk_data[t.output_offset + i] = 2.0 * mk_data[t.input_offset + i];
//!         return MK_DONE;
//!     }
//! "#;
//! let tasks: Vec<_> = (0..4u32)
//!     .map(|i| TaskWorkItem::ready(i, 0, i * 128..i * 128 + 128, 512 + i * 128..640 + i * 128))
//!     .collect();
//! let config = MegakernelConfig { worker_count: 1, ..Default::default() };
//! let mut mk = Megakernel::tasks(&gpu, user, &config.workload, &tasks, &data)?;
//! mk.launch(&config)?.wait()?;
//! mk.check_faults()?;
//! assert_eq!(mk.report()?.done, 4);
//! # Ok(())
//! # }
//! ```

mod clock;
mod config;
mod policy;
mod progress;
mod report;
pub mod resident;
mod runner;
mod source;
mod task;

pub use crate::error::MegakernelError;
pub use clock::ClockCalibration;
pub use config::{DeadlineSource, MegakernelConfig, MegakernelWorkloadHints, MAX_WALL_TIME};
pub use policy::{
    schedulable_count, LaunchLimit, MegakernelLaunchRecommendation, MegakernelLaunchRequest,
};
pub use progress::{residency_rule, ResidencyCap, ResidencySource, PROBE_MAX_WORKERS};
pub use report::MegakernelReport;
pub use runner::{Megakernel, PreparedLaunch, ENV_MEMORY_MODEL};
pub use source::{ClockKind, MegakernelMode, StepBarrier};
pub use task::{fault, TaskState, TaskWorkItem, TASK_PARAMS};
