//! The runner: a [`Megakernel`] is the template plus the user's GLSL, its
//! task slots, control words, claim order and data buffer; each launch is
//! one persistent dispatch.
//!
//! Buffers (set 0): 0 task slots ([`TaskWorkItem`]), 1 control words, 2 the
//! claim order (task index + 1 per entry, 0 for an entry not yet written),
//! 3 the user's `float` data. A launch reads the task states back, writes
//! the claim order (schedulable tasks, higher priority first) and fresh
//! control words, and records one dispatch. Every launch goes through
//! [`Megakernel::submit`], the one place that hands work to a queue.

use std::collections::HashMap;

use bytemuck::Zeroable;

use super::clock::{self, ClockCalibration};
use super::config::{DeadlineSource, MegakernelConfig, MegakernelWorkloadHints};
use super::progress::{
    self, ResidencyCap, ResidencySource, PROBE_MAX_WORKERS, PROBE_REPEATS, PROBE_STEPS,
};
use super::report::{initial_control, MegakernelReport, CONTROL_WORDS};
use super::source::{self, assemble, ClockKind, MegakernelMode, Variant};
use super::task::{claim_order, fault, states_of, TaskState, TaskWorkItem};
use crate::batch::Batch;
use crate::buffer::Buffer;
use crate::device::Device;
use crate::error::{Error, MegakernelError, Result};
use crate::kernel::Kernel;
use crate::ticket::Ticket;

/// Environment variable choosing the atomics flavour: `0` atomics with
/// `memoryBarrierBuffer` (the classic form); unset or `1`: acquire/release
/// atomics under the Vulkan memory model wherever the device enables it.
/// (`notes/persistent-kernels.md` saw stale reads from its memory-model
/// probe on lavapipe; this template's memory-model form is exact there in
/// the tests, which run both flavours.)
pub const ENV_MEMORY_MODEL: &str = "VKCOMPUTE_MEGAKERNEL_MEMORY_MODEL";

/// Push constants of the template (`MkParams`).
#[derive(Debug, Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub(super) struct Params {
    pub order_cap: u32,
    pub steps: u32,
    pub spin_budget: u32,
    pub iter_budget: u32,
    pub budget_lo: u32,
    pub budget_hi: u32,
    /// 2, the trip count of the template's loop-cut probe (a push
    /// constant, so the compiler cannot unroll it away).
    pub two: u32,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct LastLaunch {
    pub workers: u32,
    pub scheduled: u32,
    pub steps: u32,
    pub clock: ClockKind,
    pub calibration: Option<ClockCalibration>,
    /// Where a step launch's residency cap is cached (`None`: a task
    /// launch, whose cut claims leave tasks schedulable, not wrong).
    pub cap_key: Option<progress::CapKey>,
}

/// A persistent kernel: workers pull tasks from a device-side queue (task
/// mode) or run dependent steps with a device-wide barrier (step mode).
/// `Send + Sync` (launching takes `&mut self`).
pub struct Megakernel {
    pub(super) gpu: Device,
    pub(super) mode: MegakernelMode,
    user: String,
    pub(super) memory_model: bool,
    kernels: HashMap<Variant, Kernel>,
    pub(super) tasks: Buffer<TaskWorkItem>,
    pub(super) control: Buffer<u32>,
    pub(super) order: Buffer<u32>,
    pub(super) data: Buffer<f32>,
    pub(super) last: Option<LastLaunch>,
    /// The task slots as the host last wrote them, while no launch has run
    /// since (so a launch need not read them back).
    host_tasks: Option<Vec<TaskWorkItem>>,
}

impl std::fmt::Debug for Megakernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Megakernel")
            .field("mode", &self.mode)
            .field("tasks", &self.tasks.len())
            .field("memory_model", &self.memory_model)
            .finish()
    }
}

fn choose_memory_model(gpu: &Device) -> bool {
    let enabled = gpu.inner.shader_features.device_scope_memory_model();
    enabled && std::env::var(ENV_MEMORY_MODEL).ok().as_deref() != Some("0")
}

impl Megakernel {
    /// A task-mode megakernel over `tasks` and `data`. `user_glsl` defines
    /// `MK_OP_COUNT` and `uint run_task(inout MkTask t, uint lane, uint
    /// lanes)` (see `shaders/megakernel/worker.glsl`); it is compiled now
    /// for `workload`'s workgroup size and deadline source.
    ///
    /// # Errors
    /// [`Error::Glsl`] for code that does not compile, [`Error::ZeroLength`]
    /// for no tasks, [`Error::InvalidTaskState`] for a bad state word.
    pub fn tasks(
        gpu: &Device,
        user_glsl: &str,
        workload: &MegakernelWorkloadHints,
        tasks: &[TaskWorkItem],
        data: &Buffer<f32>,
    ) -> Result<Megakernel> {
        states_of(tasks)?;
        let buf = gpu.upload(tasks)?;
        let mut mk = Megakernel::build(gpu, MegakernelMode::Tasks, user_glsl, workload, buf, data)?;
        mk.host_tasks = Some(tasks.to_vec());
        Ok(mk)
    }

    /// A step-mode megakernel over `data`. `user_glsl` defines `void
    /// run_step(uint step, uint worker, uint workers, uint lane)`, run by
    /// every invocation of every worker with a device-wide barrier after
    /// each step.
    ///
    /// # Errors
    /// [`Error::Glsl`] for code that does not compile.
    pub fn steps(
        gpu: &Device,
        user_glsl: &str,
        workload: &MegakernelWorkloadHints,
        data: &Buffer<f32>,
    ) -> Result<Megakernel> {
        let tasks = gpu.upload(&[TaskWorkItem::zeroed()])?;
        Megakernel::build(gpu, MegakernelMode::Steps, user_glsl, workload, tasks, data)
    }

    pub(super) fn build(
        gpu: &Device,
        mode: MegakernelMode,
        user: &str,
        workload: &MegakernelWorkloadHints,
        tasks: Buffer<TaskWorkItem>,
        data: &Buffer<f32>,
    ) -> Result<Megakernel> {
        let mut mk = Megakernel {
            gpu: gpu.clone(),
            mode,
            user: user.to_owned(),
            memory_model: choose_memory_model(gpu),
            kernels: HashMap::new(),
            control: gpu.upload(&initial_control(0))?,
            order: gpu.upload(&[0u32])?,
            tasks,
            data: data.clone(),
            last: None,
            host_tasks: None,
        };
        let v = mk.variant(workload)?;
        mk.kernel(v)?;
        Ok(mk)
    }

    /// Whether this kernel's atomics use the Vulkan memory model.
    pub fn uses_memory_model(&self) -> bool {
        self.memory_model
    }

    /// Chooses the atomics flavour of later launches: acquire/release under
    /// the Vulkan memory model (`true`) or the classic atomics with
    /// `memoryBarrierBuffer` (`false`).
    ///
    /// # Errors
    /// [`Error::Unsupported`] for `true` where the device has no
    /// `vulkanMemoryModel` with device scope.
    pub fn set_memory_model(&mut self, on: bool) -> Result<()> {
        if on && !self.gpu.inner.shader_features.device_scope_memory_model() {
            return Err(Error::Unsupported {
                what: "vulkanMemoryModel with vulkanMemoryModelDeviceScope",
                adapter: self.gpu.info().name.clone(),
            });
        }
        self.memory_model = on;
        Ok(())
    }

    /// The mode of this kernel.
    pub fn mode(&self) -> MegakernelMode {
        self.mode
    }

    /// The data buffer (binding 3).
    pub fn data(&self) -> &Buffer<f32> {
        &self.data
    }

    pub(super) fn variant(&self, w: &MegakernelWorkloadHints) -> Result<Variant> {
        let f = self.gpu.inner.shader_features;
        let best = if f.device_clock {
            ClockKind::DeviceClock
        } else if f.subgroup_clock {
            ClockKind::SubgroupClock
        } else {
            ClockKind::IterationBudget
        };
        let clock = match w.deadline {
            DeadlineSource::Auto => best,
            DeadlineSource::IterationBudget => ClockKind::IterationBudget,
            DeadlineSource::ShaderClock => {
                let name = &self.gpu.info().name;
                crate::requirements::check(crate::Capability::MegakernelShaderClock, &f, name)?;
                best
            }
        };
        Ok(Variant {
            mode: self.mode,
            local_size: w.workgroup_size,
            clock,
            memory_model: self.memory_model,
            barrier: w.step_barrier,
            loop_check: source::loop_limit(&self.gpu.info().driver_name),
        })
    }

    pub(super) fn kernel(&mut self, v: Variant) -> Result<Kernel> {
        if let Some(k) = self.kernels.get(&v) {
            return Ok(k.clone());
        }
        let k = compile_glsl(
            &self.gpu,
            &assemble(&self.user, v),
            match v.mode {
                MegakernelMode::Tasks => "megakernel-tasks",
                MegakernelMode::Steps => "megakernel-steps",
            },
        )?;
        self.kernels.insert(v, k.clone());
        Ok(k)
    }

    /// The forward-progress cap for `workgroup_size` invocations per worker
    /// on this device and atomics flavour: one set or lowered earlier, else
    /// the adapter's rule, else probed once and cached.
    ///
    /// # Errors
    /// As a launch, or [`Error::Unsupported`] when even one worker's step
    /// barrier gave wrong results.
    pub fn residency_cap(&self, workgroup_size: u32) -> Result<ResidencyCap> {
        let key = self.cap_key(workgroup_size);
        if let Some(c) = progress::cached(key)? {
            return Ok(c);
        }
        if let Some(c) = progress::residency_rule(self.gpu.info(), workgroup_size) {
            return Ok(c);
        }
        progress::cached_cap(key, || probe(&self.gpu, workgroup_size))
    }

    /// Sets the forward-progress cap for `workgroup_size` invocations per
    /// worker on this device and atomics flavour to `workers`, in place of
    /// the adapter's rule or the probe: the caller vouches that many
    /// workers stay resident. A step launch the device then cuts short
    /// still fails and lowers it again (see [`Megakernel::report`]).
    ///
    /// # Errors
    /// [`Error::MegakernelConfig`] for 0 workers or a 0 workgroup size.
    pub fn assume_residency_cap(&self, workgroup_size: u32, workers: u32) -> Result<ResidencyCap> {
        for (field, v) in [("workers", workers), ("workgroup_size", workgroup_size)] {
            if v == 0 {
                return Err(Error::MegakernelConfig {
                    field,
                    detail: "is 0: a residency cap needs at least 1 worker of at least 1 \
                             invocation"
                        .into(),
                });
            }
        }
        let cap = ResidencyCap {
            workers,
            source: ResidencySource::Assumed,
        };
        progress::set_cap(self.cap_key(workgroup_size), cap)?;
        Ok(cap)
    }

    /// Where this kernel's cap for `workgroup_size` is cached.
    fn cap_key(&self, workgroup_size: u32) -> progress::CapKey {
        (self.gpu.id(), workgroup_size, self.memory_model)
    }

    pub(super) fn check_residency(&self, config: &MegakernelConfig) -> Result<ResidencyCap> {
        let cap = self.residency_cap(config.workload.workgroup_size)?;
        if config.worker_count > cap.workers {
            return Err(Error::MegakernelResidency {
                requested: config.worker_count,
                cap: cap.workers,
                source_of_cap: cap.to_string(),
            });
        }
        Ok(cap)
    }

    pub(super) fn budget(
        &self,
        v: &Variant,
        config: &MegakernelConfig,
    ) -> Result<(Params, ClockCalibration)> {
        let cal = clock::calibration(&self.gpu, v.clock)?;
        let (lo, hi) = cal.budget_ticks(config.max_wall_time);
        Ok((
            Params {
                spin_budget: config.workload.spin_budget,
                iter_budget: cal.budget_iterations(config.max_wall_time),
                budget_lo: lo,
                budget_hi: hi,
                two: 2,
                ..Params::default()
            },
            cal,
        ))
    }

    pub(super) fn expect_mode(&self, mode: MegakernelMode) -> Result<()> {
        if self.mode != mode {
            return Err(Error::MegakernelConfig {
                field: "mode",
                detail: format!(
                    "this megakernel was built for {:?}, not {mode:?}",
                    self.mode
                ),
            });
        }
        Ok(())
    }

    /// Launches the workers on the task queue: they claim schedulable
    /// tasks (higher priority first), run them, re-queue the ones that
    /// yield or requeue, and stop claiming once `max_wall_time` has passed.
    /// Unfinished tasks stay schedulable for the next launch. Faulted tasks
    /// do not fail the ticket: see [`Megakernel::check_faults`].
    ///
    /// # Errors
    /// [`Error::MegakernelConfig`] for an invalid configuration,
    /// [`Error::MegakernelResidency`] for more workers than the adapter
    /// keeps resident, [`Error::InvalidTaskState`], or what recording and
    /// submitting return ([`Error::DeviceLost`] among them).
    pub fn launch(&mut self, config: &MegakernelConfig) -> Result<Ticket> {
        self.prepare_launch(config)?.submit()
    }

    /// Does a task launch's host work (reading the task states, unless
    /// [`Megakernel::set_tasks`] or the constructor wrote them since the
    /// last launch; writing the claim order and counters; recording) and
    /// returns it unsubmitted, so the submission alone can be timed:
    /// [`PreparedLaunch::submit`]. [`Megakernel::launch`] is the two in one.
    ///
    /// # Errors
    /// As [`Megakernel::launch`].
    pub fn prepare_launch(&mut self, config: &MegakernelConfig) -> Result<PreparedLaunch<'_>> {
        self.expect_mode(MegakernelMode::Tasks)?;
        config.validate()?;
        let cap = self.check_residency(config)?;
        let tasks = match self.host_tasks.take() {
            Some(t) if t.len() == self.tasks.len() => t,
            _ => self.tasks.download()?,
        };
        let order = claim_order(&tasks)?;
        let queued = order.len() as u32;
        let info = self.gpu.info();
        let rec = config
            .launch_request(
                queued,
                info.max_workgroup_size[0],
                info.max_workgroup_count[0],
                info.max_workgroup_invocations,
            )
            .with_residency_cap(cap.workers)
            .recommend()?;
        let v = self.variant(&config.workload)?;
        let kernel = self.kernel(v)?;
        let (mut params, cal) = self.budget(&v, config)?;
        let room = u64::from(queued) * (1 + u64::from(config.workload.max_requeues_per_task));
        let order_cap = room.clamp(1, u64::from(u32::MAX / 2)) as u32;
        params.order_cap = order_cap;
        if (self.order.len() as u64) < u64::from(order_cap) {
            self.order = self.gpu.alloc(order_cap as usize)?;
        }
        let mut words = vec![0u32; order_cap as usize];
        for (slot, &t) in words.iter_mut().zip(&order) {
            *slot = t + 1;
        }
        self.order.write(0, &words)?;
        self.control.write(0, &initial_control(queued))?;
        self.last = Some(LastLaunch {
            workers: rec.workers,
            scheduled: queued,
            steps: 0,
            clock: v.clock,
            calibration: Some(cal),
            cap_key: None,
        });
        let mut batch = self.gpu.batch()?;
        if rec.workers > 0 {
            batch.run_configured(
                &kernel,
                &[&self.tasks, &self.control, &self.order, &self.data],
                rec.grid,
                Some(bytemuck::bytes_of(&params)),
            )?;
        }
        Ok(PreparedLaunch {
            batch,
            _mk: std::marker::PhantomData,
        })
    }

    /// Launches exactly `config.worker_count` workers for `steps` dependent
    /// steps, with a device-wide barrier after each.
    ///
    /// # Errors
    /// As [`Megakernel::launch`]; [`Error::MegakernelConfig`] when `steps ×
    /// worker_count` does not fit in 32 bits (the barrier's counter).
    pub fn launch_steps(&mut self, config: &MegakernelConfig, steps: u32) -> Result<Ticket> {
        self.expect_mode(MegakernelMode::Steps)?;
        config.validate()?;
        self.check_residency(config)?;
        self.launch_steps_unchecked(config, steps)
    }

    fn launch_steps_unchecked(&mut self, config: &MegakernelConfig, steps: u32) -> Result<Ticket> {
        if steps.checked_mul(config.worker_count).is_none() {
            return Err(Error::MegakernelConfig {
                field: "steps × worker_count",
                detail: format!(
                    "{steps} × {} overflows the 32-bit barrier counter",
                    config.worker_count
                ),
            });
        }
        let info = self.gpu.info();
        let rec = config
            .launch_request(
                u32::MAX,
                info.max_workgroup_size[0],
                info.max_workgroup_count[0],
                info.max_workgroup_invocations,
            )
            .recommend()?;
        if rec.workers != config.worker_count {
            return Err(Error::MegakernelConfig {
                field: "worker_count",
                detail: format!(
                    "{} workers do not fit maxComputeWorkGroupCount[0] ({})",
                    config.worker_count, info.max_workgroup_count[0]
                ),
            });
        }
        let v = self.variant(&config.workload)?;
        let kernel = self.kernel(v)?;
        let cal = if v.clock == ClockKind::IterationBudget {
            None
        } else {
            Some(clock::calibration(&self.gpu, v.clock)?)
        };
        let params = Params {
            steps,
            spin_budget: config.workload.spin_budget,
            two: 2,
            ..Params::default()
        };
        self.control.write(0, &initial_control(0))?;
        self.last = Some(LastLaunch {
            workers: config.worker_count,
            scheduled: 0,
            steps,
            clock: v.clock,
            calibration: cal,
            cap_key: Some((
                self.gpu.id(),
                config.workload.workgroup_size,
                v.memory_model,
            )),
        });
        let mut batch = self.gpu.batch()?;
        batch.run_configured(
            &kernel,
            &[&self.tasks, &self.control, &self.order, &self.data],
            [config.worker_count, 1, 1],
            Some(bytemuck::bytes_of(&params)),
        )?;
        self.submit(batch)
    }

    /// The one place a launch is handed to a queue (today the device's
    /// compute queue, in order with other batches).
    pub(super) fn submit(&self, batch: Batch) -> Result<Ticket> {
        batch.submit_async()
    }

    /// Counters of the last launch (waits for it).
    ///
    /// A step launch that was cut short (a wait ran out of its spin budget,
    /// or the driver ended a device loop: its data is no result) is an
    /// error, never a report: it lowers the device's cached residency cap
    /// below the launch's workers (see [`Megakernel::residency_cap`]), so a
    /// retry at that count is refused and one within the new cap runs.
    /// Step results are results only once this returned `Ok`.
    ///
    /// # Errors
    /// [`MegakernelError::LaunchCut`](crate::error::MegakernelError::LaunchCut)
    /// (in [`Error::Megakernel`]) for a cut step launch, or what a download
    /// returns ([`Error::DeviceLost`] among them).
    pub fn report(&self) -> Result<MegakernelReport> {
        let r = self.raw_report()?;
        let Some(key) = self.last.and_then(|l| l.cap_key) else {
            return Ok(r);
        };
        if !r.spin_exhausted && !r.loop_cut {
            return Ok(r);
        }
        let current = self.residency_cap(key.1)?;
        let cap = progress::lower_cap(key, current, r.workers)?;
        log::warn!(
            "megakernel: a step launch of {} workers was cut short; residency cap now {} ({cap})",
            r.workers,
            cap.workers
        );
        Err(MegakernelError::LaunchCut {
            workers: r.workers,
            steps: r.steps,
            spin_exhausted: r.spin_exhausted,
            loop_cut: r.loop_cut,
            cap: cap.workers,
            source_of_cap: cap.to_string(),
        }
        .into())
    }

    /// The last launch's counters as they are, cut or not.
    fn raw_report(&self) -> Result<MegakernelReport> {
        let words = self.control.download()?;
        let (mut r, ticks) = MegakernelReport::from_words(&words[..CONTROL_WORDS.min(words.len())]);
        if let Some(l) = self.last {
            r.workers = l.workers;
            r.scheduled = l.scheduled;
            r.steps = l.steps;
            r.clock = Some(l.clock);
            r.device_elapsed = l.calibration.and_then(|c| c.ticks_to_duration(ticks));
        }
        Ok(r)
    }

    /// The task slots as they are now (waits for work using them).
    ///
    /// # Errors
    /// What a download returns.
    pub fn task_items(&self) -> Result<Vec<TaskWorkItem>> {
        self.tasks.download()
    }

    /// Replaces the task slots (e.g. new work, or Paused tasks made Ready).
    ///
    /// # Errors
    /// [`Error::InvalidTaskState`] for a bad state word, [`Error::ZeroLength`]
    /// for no tasks, or what an upload returns.
    pub fn set_tasks(&mut self, tasks: &[TaskWorkItem]) -> Result<()> {
        self.expect_mode(MegakernelMode::Tasks)?;
        states_of(tasks)?;
        self.host_tasks = None;
        if tasks.len() == self.tasks.len() {
            self.tasks.write(0, tasks)?;
        } else {
            self.tasks = self.gpu.upload(tasks)?;
        }
        self.host_tasks = Some(tasks.to_vec());
        Ok(())
    }

    /// `Ok` when no task is Faulted; otherwise [`Error::TasksFaulted`]
    /// naming them (task id and fault code, see [`fault`]).
    ///
    /// # Errors
    /// [`Error::TasksFaulted`], or what a download returns.
    pub fn check_faults(&self) -> Result<()> {
        let tasks = self.tasks.download()?;
        let faulted: Vec<(u32, u32)> = tasks
            .iter()
            .filter(|t| t.state == TaskState::Faulted as u32)
            .map(|t| (t.task_id, t.fault))
            .collect();
        if faulted.is_empty() {
            return Ok(());
        }
        debug_assert!(faulted.iter().all(|f| f.1 != fault::NONE));
        Err(Error::TasksFaulted {
            count: faulted.len(),
            tasks: faulted.into_iter().take(32).collect(),
        })
    }
}

/// Builds one of the template's kernels from GLSL (runtime GLSL is the
/// `glsl` feature's).
pub(super) fn compile_glsl(gpu: &Device, glsl: &str, label: &str) -> Result<Kernel> {
    #[cfg(feature = "glsl")]
    {
        Kernel::builder(gpu).glsl(glsl).label(label).build()
    }
    #[cfg(not(feature = "glsl"))]
    {
        let _ = (gpu, glsl, label);
        Err(MegakernelError::NeedsGlsl {
            what: "the megakernel (its template and the user's code)",
        }
        .into())
    }
}

/// Runs the step-barrier probe at 1, 2, 3, … workers (see
/// [`progress`](super::progress)).
fn probe(gpu: &Device, workgroup_size: u32) -> Result<ResidencyCap> {
    let n = 2 * PROBE_MAX_WORKERS as usize;
    let data = gpu.upload(&vec![0f32; n])?;
    let hints = MegakernelWorkloadHints {
        workgroup_size,
        deadline: DeadlineSource::IterationBudget,
        spin_budget: 1 << 20,
        ..MegakernelWorkloadHints::default()
    };
    let mut mk = Megakernel::steps(gpu, progress::PROBE_GLSL, &hints, &data)?;
    let mut runs = Vec::new();
    for workers in 1..=PROBE_MAX_WORKERS {
        let mut exact = true;
        for _ in 0..PROBE_REPEATS {
            data.write(0, &vec![0f32; n])?;
            let config = MegakernelConfig {
                worker_count: workers,
                workload: hints,
                ..MegakernelConfig::default()
            };
            mk.launch_steps_unchecked(&config, PROBE_STEPS)?.wait()?;
            // Raw: a cut probe run counts as not exact below, and lowers
            // nothing (the probe is what sets the cap).
            let r = mk.raw_report()?;
            let parity = (PROBE_STEPS & 1) as usize * workers as usize;
            let finals = data.read_range(parity..parity + workers as usize)?;
            exact &= progress::probe_run_exact(
                r.user_counter,
                r.spin_exhausted || r.loop_cut,
                r.workers_finished,
                workers,
                &finals,
                PROBE_STEPS,
            );
        }
        log::info!("megakernel residency probe: {workers} workers exact: {exact}");
        runs.push(exact);
        if !exact {
            break;
        }
    }
    let workers = progress::cap_from_runs(&runs).ok_or_else(|| Error::Unsupported {
        what: "a device-wide step barrier (one worker's probe gave wrong results)",
        adapter: gpu.info().name.clone(),
    })?;
    Ok(ResidencyCap {
        workers,
        source: ResidencySource::Probed,
    })
}

/// A task launch recorded by [`Megakernel::prepare_launch`], not yet
/// submitted. It holds the megakernel borrowed, so its tasks cannot change
/// before the submission; dropping it submits nothing. `Send`, not `Sync`
/// (as the [`Batch`] it holds).
#[must_use = "a prepared launch does nothing until submitted"]
pub struct PreparedLaunch<'a> {
    batch: Batch,
    _mk: std::marker::PhantomData<&'a mut Megakernel>,
}

impl std::fmt::Debug for PreparedLaunch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedLaunch").finish_non_exhaustive()
    }
}

impl PreparedLaunch<'_> {
    /// Submits the launch (one `vkQueueSubmit`).
    ///
    /// # Errors
    /// What submitting returns ([`Error::DeviceLost`] among them).
    pub fn submit(self) -> Result<Ticket> {
        self.batch.submit_async()
    }
}

// A megakernel moves between threads and is shared by reference (`&self`
// methods only read); a prepared launch moves as its batch does.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    const fn send<T: Send>() {}
    send_sync::<Megakernel>();
    send::<PreparedLaunch<'static>>();
};
