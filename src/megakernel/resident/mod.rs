//! Resident mode: the megakernel stays running on its own stream and the
//! host pushes tasks into a host-visible ring while it runs, reading
//! completions back from it, with no `vkQueueSubmit` per task.
//!
//! # The ring
//! Two buffers, both persistently mapped:
//! - the **request ring** (device-local host-visible memory where the
//!   adapter has it, else host-visible): a stop word, the device's claim
//!   counter, its counters and exit reason, each hot word on its own
//!   128-byte line, then `ring_slots` slots of 16 words: a sequence word
//!   (ticket + 1 once the task is published) and words 1..16 of a
//!   [`TaskWorkItem`], whose `fault` word carries the slot's tag;
//! - the **completion words** (host-visible, host-cached where the adapter
//!   has it, so the host polls its own cache; the device only stores
//!   there): a copy of the exit reason, then 16 words per slot: sequence,
//!   state, fault, task id, the four parameter words as the task's code
//!   left them (its results), and the record's tag.
//!
//! A tag is a hash of the sequence word and the record's words: a reader
//! that sees a sequence word trusts the words only once the tag matches,
//! so words still in flight across the bus (stores need not arrive in
//! order) are never taken for a task or a completion.
//!
//! A push takes the next ticket with a compare-and-swap on a host-side
//! counter (lock-free; several threads may push at once), writes the
//! sequence word, the task words and the tag in one burst, and flushes it
//! with a full fence (mapped device memory is write-combined: x86 drains
//! such stores only at a fence). The words need no order among them: the
//! tag says when they all arrived. A ticket's slot is reused only
//! once the kernel has finished its previous occupant and that one's
//! [`TaskHandle`] has been dropped, so no completion is overwritten unread;
//! a push that finds it otherwise fails with [`Error::ResidentRingFull`].
//!
//! On the device, one invocation per worker looks at the slot of the claim
//! counter: its words and, last, its sequence word with an acquire atomic
//! at device scope (MakeVisible under the Vulkan memory model; never a
//! plain load in a spin, `notes/persistent-kernels.md`), checks the tag,
//! claims the task (a compare-and-swap on the claim counter; a single
//! worker keeps the counter in a register and only stores it), hands it to
//! its workgroup, runs the user's `run_task`, and publishes the completion:
//! its words, its tag and its sequence word, with no fence between them
//! (the host checks the tag). The task's writes to the data buffer are
//! ordered before its completion only with
//! [`ResidentConfig::ordered_data`] (a device-scope release fence; then a
//! task pushed after the host saw an earlier completion reads that task's
//! output); otherwise read them after the kernel ends (a batch or a host
//! read that uses the buffer waits for that on its own).
//!
//! # Stopping
//! Workers stop on the ring's stop word ([`ResidentMegakernel::stop`],
//! `Drop`), when the wall-time budget ends, or after `idle_timeout` without
//! a task, measured with the shader clock (calibrated against host time,
//! [`ClockCalibration`](super::ClockCalibration)) or, without one, with an
//! iteration budget. Every wait loop is also bounded. So a host that stops
//! pushing never leaves the GPU spinning. A task published after the
//! workers ended is not served: waiting on it reports
//! [`Error::ResidentStopped`].
//!
//! # Forward progress and sharing the GPU
//! Workers wait only for the host, never for each other, but the grid is
//! still kept within the forward-progress cap ([`ResidencyCap`]) and is the
//! share of the GPU the kernel occupies: batches on other streams (other
//! `VkQueue`s) run beside it on the rest. On lavapipe every stream shares
//! one queue, so other work waits until the kernel ends.
//!
//! # lavapipe
//! A running dispatch there sees host writes and the host its writes
//! (measured by `tests/megakernel_resident.rs`). llvmpipe ends an
//! invocation's loops after 65,535 iterations, silently, and a loop inside
//! the waiting lane's branch runs in every SIMD chunk of the workgroup; so
//! there a worker is one chunk wide (wider ones are refused), ends its
//! launch well before the limit (a loop budget), and checks after every
//! task that no lane's loops were cut ([`FAULT_LOOP_CUT`]); the host starts
//! the next launch on the same ring when a push or a wait finds the
//! workers gone with host time left ([`ResidentStats::relaunches`]).

mod config;
mod layout;

pub use config::{Completion, ResidentConfig, ResidentStats};
pub use layout::{ExitReason, ENV_LOOP_BUDGET, FAULT_LOOP_CUT, MAX_RING_SLOTS};

use layout::{
    assemble, check_lanes, loop_budget, ring_words, should_relaunch, slot_free, tag, Variant,
    DONE_BASE, DONE_EXIT, DONE_TAG, DONE_WORDS, LOOKS_PER_ITERATION, RING_CLAIM, RING_EXIT,
    RING_FAULTED, RING_SERVED, RING_SLOT_BASE, RING_STARTED, RING_STOP, RING_USER,
    RING_WORKERS_DONE, SLOT_TAG, SLOT_WORDS,
};
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::clock;
use super::config::{DeadlineSource, MegakernelWorkloadHints};
use super::progress::{self, ResidencyCap, PROBE_MAX_WORKERS};
use super::runner::{Megakernel, ENV_MEMORY_MODEL};
use super::source::ClockKind;
use super::task::{TaskState, TaskWorkItem};
use crate::buffer::Buffer;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::memory::Memory;
use crate::stream::Stream;
use crate::ticket::Ticket;

/// The mapped words and the host-side producer state, shared by the kernel
/// handle and every task handle.
struct HostRing {
    ring: *mut u32,
    ring_len: usize,
    done: *mut u32,
    done_len: usize,
    slots: u32,
    next: AtomicU64,
    consumed: Box<[AtomicU64]>,
    stop_requested: AtomicBool,
    /// Host time of the last push, in ns since the kernel started.
    last_push_ns: AtomicU64,
    /// Keep the mappings alive.
    _buffers: (Buffer<u32>, Buffer<u32>),
}

// SAFETY: the pointers are persistent mappings of the two buffers the
// struct owns; every access goes through `AtomicU32` views, so sharing
// between threads is data-race free.
unsafe impl Send for HostRing {}
// SAFETY: as above.
unsafe impl Sync for HostRing {}

impl HostRing {
    fn ring(&self, i: usize) -> &AtomicU32 {
        assert!(i < self.ring_len, "ring word {i} of {}", self.ring_len);
        // SAFETY: in bounds (checked), 4-byte aligned (mappings are), mapped
        // for as long as `self` holds the buffer; the device accesses it only
        // with atomics or after an acquire that orders these accesses.
        unsafe { AtomicU32::from_ptr(self.ring.add(i)) }
    }

    fn done(&self, i: usize) -> &AtomicU32 {
        assert!(
            i < self.done_len,
            "completion word {i} of {}",
            self.done_len
        );
        // SAFETY: as in `ring`.
        unsafe { AtomicU32::from_ptr(self.done.add(i)) }
    }

    fn slot(&self, ticket: u64) -> usize {
        (ticket % u64::from(self.slots)) as usize
    }

    fn exit(&self) -> ExitReason {
        ExitReason::from_word(self.done(DONE_EXIT).load(Ordering::Acquire))
    }

    /// The exit reason once every worker has ended: one that ended without
    /// writing a reason had its loops cut by the driver.
    fn ended(&self) -> ExitReason {
        match self.exit() {
            ExitReason::Running => ExitReason::LoopBound,
            e => e,
        }
    }

    fn completion(&self, ticket: u64) -> Option<Completion> {
        let rec = DONE_BASE + self.slot(ticket) * DONE_WORDS;
        if self.done(rec).load(Ordering::Acquire) != (ticket + 1) as u32 {
            return None;
        }
        let w = |i: usize| self.done(rec + i).load(Ordering::Relaxed);
        let words = [w(1), w(2), w(3), w(4), w(5), w(6), w(7)];
        if w(DONE_TAG) != tag((ticket + 1) as u32, words) {
            return None; // words still in flight
        }
        let [state, fault, task_id, p0, p1, p2, p3] = words;
        Some(Completion {
            state: TaskState::from_word(state).unwrap_or(TaskState::Faulted),
            fault,
            task_id,
            params: [p0, p1, p2, p3],
        })
    }

    fn request_stop(&self) {
        self.stop_requested.store(true, Ordering::Release);
        self.ring(RING_STOP).store(1, Ordering::Release);
        fence(Ordering::SeqCst); // flush write-combined stores to the device
    }
}

/// A pushed task. Dropping it frees its ring slot for reuse once the
/// kernel has finished the task.
pub struct TaskHandle {
    ticket: u64,
    ring: Arc<HostRing>,
}

impl TaskHandle {
    /// The task's ticket (its position in push order, from 0).
    pub fn ticket(&self) -> u64 {
        self.ticket
    }
}

impl std::fmt::Debug for TaskHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskHandle")
            .field("ticket", &self.ticket)
            .finish()
    }
}

impl Drop for TaskHandle {
    fn drop(&mut self) {
        let s = self.ring.slot(self.ticket);
        self.ring.consumed[s].fetch_max(self.ticket + 1, Ordering::AcqRel);
    }
}

/// The current launch and what a relaunch needs.
struct Launch {
    ticket: Ticket,
    relaunches: u32,
}

/// A running resident megakernel (see the [module docs](self)).
/// `Send + Sync`: any number of threads may push and wait at once.
pub struct ResidentMegakernel {
    ring: Arc<HostRing>,
    launch: Mutex<Launch>,
    ring_buf: Buffer<u32>,
    done_buf: Buffer<u32>,
    clock: ClockKind,
    started: Instant,
    stopped: bool,
    kernel: Kernel,
    data: Buffer<f32>,
    stream: Stream,
    config: ResidentConfig,
    gpu: Device,
}

impl std::fmt::Debug for ResidentMegakernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResidentMegakernel")
            .field("slots", &self.ring.slots)
            .field("pushed", &self.ring.next.load(Ordering::Relaxed))
            .field("clock", &self.clock)
            .finish()
    }
}

fn memory_model(gpu: &Device) -> bool {
    let enabled = gpu.inner.shader_features.device_scope_memory_model();
    match std::env::var(ENV_MEMORY_MODEL).ok().as_deref() {
        Some("0") => false,
        Some("1") => enabled,
        _ => enabled && gpu.info().driver_name != "llvmpipe",
    }
}

fn clock_kind(gpu: &Device, deadline: DeadlineSource) -> Result<ClockKind> {
    let f = gpu.inner.shader_features;
    let best = if f.device_clock {
        ClockKind::DeviceClock
    } else if f.subgroup_clock {
        ClockKind::SubgroupClock
    } else {
        ClockKind::IterationBudget
    };
    match deadline {
        DeadlineSource::Auto => Ok(best),
        DeadlineSource::IterationBudget => Ok(ClockKind::IterationBudget),
        DeadlineSource::ShaderClock => {
            crate::requirements::check(
                crate::Capability::MegakernelShaderClock,
                &f,
                &gpu.info().name,
            )?;
            Ok(best)
        }
    }
}

/// The forward-progress cap for `workgroup_size` on `gpu`: the adapter's
/// rule, else the drain-mode megakernel's probe (cached per device).
pub fn residency_cap(gpu: &Device, workgroup_size: u32) -> Result<ResidencyCap> {
    if let Some(c) = progress::residency_rule(gpu.info(), workgroup_size) {
        return Ok(c);
    }
    let data = gpu.upload(&vec![0f32; 2 * PROBE_MAX_WORKERS as usize])?;
    let hints = MegakernelWorkloadHints {
        workgroup_size,
        deadline: DeadlineSource::IterationBudget,
        ..MegakernelWorkloadHints::default()
    };
    Megakernel::steps(gpu, progress::PROBE_GLSL, &hints, &data)?.residency_cap(workgroup_size)
}

/// Push constants of the resident template (`MkrParams`).
#[derive(Debug, Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Params {
    idle: [u32; 2],
    wall: [u32; 2],
    loop_budget: u32,
    two: u32,
}

fn budgets(
    gpu: &Device,
    clock: ClockKind,
    config: &ResidentConfig,
    wall: Duration,
) -> Result<Params> {
    let cal = clock::calibration(gpu, clock)?;
    let words = |d: Duration| match clock {
        ClockKind::IterationBudget => [(cal.budget_iterations(d) / LOOKS_PER_ITERATION).max(1), 0],
        _ => {
            let (lo, hi) = cal.budget_ticks(d);
            [lo, hi]
        }
    };
    Ok(Params {
        idle: words(config.idle_timeout),
        wall: words(wall),
        loop_budget: std::env::var(ENV_LOOP_BUDGET)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| loop_budget(&gpu.info().driver_name)),
        two: 2,
    })
}

/// What one launch of the workers binds and runs.
struct Workers<'a> {
    gpu: &'a Device,
    stream: &'a Stream,
    kernel: &'a Kernel,
    buffers: [&'a Buffer<u32>; 2],
    data: &'a Buffer<f32>,
    config: &'a ResidentConfig,
    clock: ClockKind,
}

/// Records and submits one launch of the workers with `wall` of budget.
fn submit(w: &Workers<'_>, wall: Duration) -> Result<Ticket> {
    let params = budgets(w.gpu, w.clock, w.config, wall)?;
    let mut batch = w.stream.batch()?;
    batch.run_configured(
        w.kernel,
        &[w.buffers[0], w.buffers[1], w.data],
        [w.config.worker_count, 1, 1],
        Some(bytemuck::bytes_of(&params)),
    )?;
    batch.submit_async()
}

fn poisoned() -> Error {
    Error::MegakernelConfig {
        field: "resident launch lock",
        detail: "a thread panicked while relaunching; stop and start again".into(),
    }
}

fn mapped(buf: &Buffer<u32>, what: &'static str) -> Result<*mut u32> {
    buf.inner
        .mapped()
        .map(|p| p.cast::<u32>().as_ptr())
        .ok_or_else(|| Error::Unsupported {
            what,
            adapter: buf.inner.dev.info.name.clone(),
        })
}

impl ResidentMegakernel {
    /// Compiles the resident template with `user_glsl` (the drain-mode
    /// megakernel's user code: `MK_OP_COUNT` and `uint run_task(inout
    /// MkTask t, uint lane, uint lanes)` over `mk_data`, returning `MK_DONE`
    /// or `MK_FAULTED`) and launches `config.worker_count` workers on
    /// `stream`, where they stay until stopped, idle or out of time.
    ///
    /// # Errors
    /// [`Error::MegakernelConfig`] for an invalid configuration,
    /// [`Error::MegakernelResidency`] for more workers than the adapter
    /// keeps resident, [`Error::Glsl`] for code that does not compile,
    /// [`Error::Unsupported`] when the ring cannot be mapped, or what
    /// recording and submitting return ([`Error::DeviceLost`] among them).
    pub fn start(
        gpu: &Device,
        stream: &Stream,
        user_glsl: &str,
        data: &Buffer<f32>,
        config: &ResidentConfig,
    ) -> Result<ResidentMegakernel> {
        config.validate()?;
        let info = gpu.info();
        check_lanes(&info.driver_name, config.workgroup_size, info.subgroup_size)?;
        let cap = residency_cap(gpu, config.workgroup_size)?;
        if config.worker_count > cap.workers {
            return Err(Error::MegakernelResidency {
                requested: config.worker_count,
                cap: cap.workers,
                source_of_cap: cap.to_string(),
            });
        }
        let max_groups = gpu.info().max_workgroup_count[0];
        if config.worker_count > max_groups {
            return Err(Error::MegakernelConfig {
                field: "worker_count",
                detail: format!(
                    "{} workers exceed maxComputeWorkGroupCount[0] ({max_groups})",
                    config.worker_count
                ),
            });
        }
        let clock = clock_kind(gpu, config.deadline)?;
        let src = assemble(
            user_glsl,
            &Variant {
                local: config.workgroup_size,
                slots: config.ring_slots,
                clock,
                memory_model: memory_model(gpu),
                single_worker: config.worker_count == 1,
                loop_check: loop_budget(&info.driver_name) != u32::MAX,
                ordered_data: config.ordered_data,
            },
        );
        let kernel = super::runner::compile_glsl(gpu, &src, "megakernel-resident")?;
        let (ring_len, done_len) = ring_words(config.ring_slots);
        let ring_buf = match gpu.alloc_with::<u32>(ring_len, Memory::DeviceHostVisible) {
            Err(Error::Unsupported { .. }) => {
                gpu.alloc_with::<u32>(ring_len, Memory::HostVisible)?
            }
            r => r?,
        };
        let done_buf = gpu.alloc_with::<u32>(done_len, Memory::HostVisible)?;
        let ring = Arc::new(HostRing {
            ring: mapped(&ring_buf, "a mapped request ring")?,
            ring_len,
            done: mapped(&done_buf, "mapped completion words")?,
            done_len,
            slots: config.ring_slots,
            next: AtomicU64::new(0),
            consumed: (0..config.ring_slots).map(|_| AtomicU64::new(0)).collect(),
            stop_requested: AtomicBool::new(false),
            last_push_ns: AtomicU64::new(0),
            _buffers: (ring_buf.clone(), done_buf.clone()),
        });
        clock::calibration(gpu, clock)?; // measured once per device, before the clock starts
        let started = Instant::now();
        let ticket = submit(
            &Workers {
                gpu,
                stream,
                kernel: &kernel,
                buffers: [&ring_buf, &done_buf],
                data,
                config,
                clock,
            },
            config.max_wall_time,
        )?;
        Ok(ResidentMegakernel {
            ring,
            launch: Mutex::new(Launch {
                ticket,
                relaunches: 0,
            }),
            ring_buf,
            done_buf,
            clock,
            started,
            stopped: false,
            kernel,
            data: data.clone(),
            stream: stream.clone(),
            config: *config,
            gpu: gpu.clone(),
        })
    }

    /// Records and submits one launch of the workers with `wall` of budget.
    fn submit(&self, wall: Duration) -> Result<Ticket> {
        submit(
            &Workers {
                gpu: &self.gpu,
                stream: &self.stream,
                kernel: &self.kernel,
                buffers: [&self.ring_buf, &self.done_buf],
                data: &self.data,
                config: &self.config,
                clock: self.clock,
            },
            wall,
        )
    }

    fn lock(&self) -> Result<MutexGuard<'_, Launch>> {
        self.launch.lock().map_err(|_| poisoned())
    }

    /// Once every worker has ended, and [`should_relaunch`] says host time
    /// does not agree that the kernel is done: launches the workers again
    /// on the same ring, which keeps every published task. One submission
    /// per generation, not per task. Returns whether the workers run
    /// (again).
    fn revive(&self, launch: &mut Launch) -> Result<bool> {
        if !launch.ticket.is_ready()? {
            return Ok(true);
        }
        let elapsed = self.started.elapsed();
        let left = self.config.max_wall_time.saturating_sub(elapsed);
        let last_push = Duration::from_nanos(self.ring.last_push_ns.load(Ordering::Acquire));
        let host_idle = elapsed.saturating_sub(last_push);
        if !should_relaunch(
            self.ring.ended(),
            self.ring.stop_requested.load(Ordering::Acquire),
            left,
            host_idle,
            self.config.idle_timeout,
        ) {
            return Ok(false);
        }
        self.ring.ring(RING_EXIT).store(0, Ordering::Release);
        self.ring.done(DONE_EXIT).store(0, Ordering::Release);
        launch.ticket = self.submit(left)?;
        launch.relaunches += 1;
        Ok(true)
    }

    /// Pushes a task (its `state` word is ignored). Never waits and takes
    /// no lock.
    ///
    /// # Errors
    /// [`Error::ResidentRingFull`] when the slot it needs is still in use,
    /// [`Error::ResidentStopped`] once a stop was requested or a worker
    /// ended, [`Error::DeviceLost`].
    pub fn push(&self, task: &TaskWorkItem) -> Result<TaskHandle> {
        self.gpu.inner.sticky.check()?;
        let r = &self.ring;
        if r.stop_requested.load(Ordering::Acquire) {
            return Err(Error::ResidentStopped {
                reason: ExitReason::StopRequested.name(),
                what: "cannot push",
            });
        }
        let exit = r.exit();
        if exit != ExitReason::Running && !self.revive(&mut *self.lock()?)? {
            return Err(Error::ResidentStopped {
                reason: exit.name(),
                what: "cannot push",
            });
        }
        let now = self.started.elapsed().as_nanos() as u64;
        r.last_push_ns.fetch_max(now, Ordering::AcqRel);
        let mut t = r.next.load(Ordering::Acquire);
        loop {
            let s = r.slot(t);
            let done_seq = r.done(DONE_BASE + s * DONE_WORDS).load(Ordering::Acquire);
            let consumed = r.consumed[s].load(Ordering::Acquire);
            if !slot_free(t, r.slots, consumed, done_seq) {
                return Err(Error::ResidentRingFull {
                    slots: r.slots,
                    oldest: t - u64::from(r.slots),
                });
            }
            match r
                .next
                .compare_exchange_weak(t, t + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break,
                Err(now) => t = now,
            }
        }
        let base = RING_SLOT_BASE + r.slot(t) * SLOT_WORDS;
        let mut words: [u32; SLOT_WORDS] = bytemuck::cast(*task);
        let seq = (t + 1) as u32;
        words[SLOT_TAG] = tag(
            seq,
            (1..SLOT_WORDS).filter(|&i| i != SLOT_TAG).map(|i| words[i]),
        );
        words[0] = seq;
        // All sixteen words in one write-combined burst, then out of the
        // write-combining buffer now (x86 drains it only at a full fence).
        // They need no order among them: the device takes the slot only
        // once the tag matches the sequence word and the others, which it
        // loads together (one fence per push, not two: measured 0.05–0.08
        // µs less per round trip on an H100, docs/PERF.md).
        for (i, &w) in words.iter().enumerate() {
            r.ring(base + i).store(w, Ordering::Relaxed);
        }
        fence(Ordering::SeqCst);
        Ok(TaskHandle {
            ticket: t,
            ring: r.clone(),
        })
    }

    /// The task's completion if the kernel has finished it (never waits).
    ///
    /// # Errors
    /// [`Error::ResidentStopped`] when the kernel ended without serving it,
    /// [`Error::DeviceLost`].
    pub fn poll(&self, handle: &TaskHandle) -> Result<Option<Completion>> {
        if let Some(c) = self.ring.completion(handle.ticket) {
            return Ok(Some(c));
        }
        self.unserved(handle)
    }

    /// `Ok(None)` while the kernel runs; once it has ended, the completion
    /// if it came in the meantime, else [`Error::ResidentStopped`].
    fn unserved(&self, handle: &TaskHandle) -> Result<Option<Completion>> {
        if self.revive(&mut *self.lock()?)? {
            return Ok(None);
        }
        if let Some(c) = self.ring.completion(handle.ticket) {
            return Ok(Some(c));
        }
        Err(Error::ResidentStopped {
            reason: self.ring.ended().name(),
            what: "the task was not served",
        })
    }

    /// Spins until the task is finished (checking every few µs that the
    /// kernel still runs, so it never hangs: the kernel's own budgets end
    /// it), then frees its slot.
    ///
    /// # Errors
    /// As [`ResidentMegakernel::poll`].
    pub fn wait(&self, handle: TaskHandle) -> Result<Completion> {
        let mut spins = 0u32;
        loop {
            if let Some(c) = self.ring.completion(handle.ticket) {
                return Ok(c);
            }
            spins += 1;
            if spins % 4096 == 0 {
                if let Some(c) = self.unserved(&handle)? {
                    return Ok(c);
                }
                if spins >= 1 << 20 {
                    std::thread::yield_now();
                }
            }
            std::hint::spin_loop();
        }
    }

    /// Why the kernel's first worker ended ([`ExitReason::Running`] while
    /// none has). Never waits.
    pub fn exit_reason(&self) -> ExitReason {
        self.ring.exit()
    }

    /// Whether every worker has ended (the launch's ticket is complete).
    ///
    /// # Errors
    /// [`Error::DeviceLost`].
    pub fn is_finished(&self) -> Result<bool> {
        self.lock()?.ticket.is_ready()
    }

    /// Launches so far: 1, plus one per generation the host started
    /// again (see [`ResidentStats::relaunches`]).
    ///
    /// # Errors
    /// [`Error::MegakernelConfig`] if a thread panicked while relaunching.
    pub fn launches(&self) -> Result<u32> {
        Ok(self.lock()?.relaunches + 1)
    }

    /// Workers that have started running, over all launches (never waits).
    pub fn workers_started(&self) -> u32 {
        self.ring.ring(RING_STARTED).load(Ordering::Acquire)
    }

    /// How the device measures time.
    pub fn clock(&self) -> ClockKind {
        self.clock
    }

    /// Asks the workers to stop, waits for the launch's ticket and says
    /// what the kernel did. Tasks not yet claimed stay unserved.
    ///
    /// # Errors
    /// What waiting on the launch returns ([`Error::DeviceLost`]).
    pub fn stop(mut self) -> Result<ResidentStats> {
        self.stopped = true;
        self.ring.request_stop();
        self.finish()
    }

    /// Waits (without asking them to stop) until the workers end by
    /// themselves (idle, wall-time budget), then says what they did.
    ///
    /// # Errors
    /// As [`ResidentMegakernel::stop`].
    pub fn join(mut self) -> Result<ResidentStats> {
        self.stopped = true;
        self.finish()
    }

    fn finish(&self) -> Result<ResidentStats> {
        let launch = self.lock()?;
        launch.ticket.wait()?;
        let elapsed = self.started.elapsed();
        let r = &self.ring;
        Ok(ResidentStats {
            ticket: launch.ticket.clone(),
            relaunches: launch.relaunches,
            pushed: r.next.load(Ordering::Acquire),
            claimed: r.ring(RING_CLAIM).load(Ordering::Acquire),
            served: r.ring(RING_SERVED).load(Ordering::Acquire),
            faulted: r.ring(RING_FAULTED).load(Ordering::Acquire),
            user_counter: r.ring(RING_USER).load(Ordering::Acquire),
            exit: r.ended(),
            workers: (
                r.ring(RING_STARTED).load(Ordering::Acquire),
                r.ring(RING_WORKERS_DONE).load(Ordering::Acquire),
            ),
            clock: self.clock,
            elapsed,
        })
    }
}

impl Drop for ResidentMegakernel {
    /// Asks the workers to stop and waits for them (they see the stop word
    /// within one wait-loop iteration; their budgets bound it anyway).
    fn drop(&mut self) {
        if !self.stopped {
            self.ring.request_stop();
            if let Ok(l) = self.launch.lock() {
                let _ = l.ticket.wait();
            }
        }
    }
}

// Every public type of resident mode states its thread-safety: the
// megakernel and handles are shared across pushing threads.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<ResidentMegakernel>();
    send_sync::<TaskHandle>();
    send_sync::<ResidentConfig>();
    send_sync::<Completion>();
    send_sync::<ResidentStats>();
    send_sync::<ExitReason>();
};
