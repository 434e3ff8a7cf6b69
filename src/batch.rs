//! Batches: dispatches, barriers, copies and fills recorded into command
//! buffers, submitted with one call, tracked by a [`Ticket`].
//!
//! Recording a dispatch checks it against the kernel's reflection and the
//! adapter's limits, then records only what changed since the previous
//! command: the pipeline if it differs, descriptors (pushed with
//! VK_KHR_push_descriptor, or a written set from the device's cache,
//! [`crate::set_cache`]) if the bindings differ or the kernel's layout
//! differs in definition ([`crate::layout_class`]), push constants, and the
//! dispatch. A dispatch on the same buffer ranges as the one before, of a
//! kernel of the same layout class, skips the checks too (they passed then,
//! for the same binding kinds). Nothing is allocated
//! per dispatch, except the cache's entry the first time a binding set is
//! seen. Commands not separated by a barrier may run concurrently; a
//! barrier orders everything before it against everything after it
//! ([`crate::barrier`] picks its masks). Barriers are found, not guessed:
//! with [`BatchOptions::auto_barriers`] (on by default) the batch tracks the
//! byte ranges each command reads and writes ([`crate::hazard`]) and records
//! a barrier exactly before a command that reads what an earlier command
//! wrote, or writes what one read or wrote, with no barrier yet between
//! them; [`Batch::barrier`] still works and is never doubled. What was
//! recorded is inspectable ([`BatchOptions::record_plan`],
//! [`Batch::barrier_log`]). Each batch is ordered after
//! the work submitted before it on its stream ([`crate::stream`]), after
//! tickets and events it names, and after other queues' conflicting use of
//! its buffers (the crate guide's "Ordering").
//!
//! A long batch is submitted in chunks as it grows ([`crate::chunking`]), so
//! the GPU starts while the CPU records; [`Batch::submit_async`] submits the
//! rest. Dropping a batch without submitting discards what was not yet
//! submitted; chunks already submitted run to completion, and the buffers
//! they use stay alive (parked) until they do. Chunking never lets another
//! batch of the stream in between: a batch that submits while an earlier
//! one of its stream is open is held back until that one ends
//! (`batch/held.rs`; the crate guide's "Ordering").
//!
//! A command that fails after recording began (a descriptor set that could
//! not be allocated, a copy whose second piece fails, a chunk that failed to
//! submit) poisons the batch: every later call returns that error, and
//! nothing more is recorded or submitted ([`Batch::poisoned`]). A command
//! refused by its checks before recording leaves the batch usable.

use std::sync::Arc;

use ash::vk;

use crate::barrier::Tracker;
use crate::buffer::{BufView, BufferInner, GpuBuf};
use crate::chunking::ChunkPolicy;
use crate::device::{Device, DeviceInner, Garbage};
use crate::error::{Error, Result};
use crate::event::EventInner;
use crate::hazard::{Hazards, PlannedBarrier};
use crate::kernel::Kernel;
use crate::pipeline_cache::KernelCore;
use crate::profile::Profiling;
use crate::queue::StreamState;
use crate::reclaim::UseMark;
use crate::recorder::Recorder;
use crate::reflect::MAX_BINDINGS;
use crate::stream::Stream;
use crate::ticket::{QueryReadout, Ticket};
use crate::workgroups::{self, GridError};

pub use options::BatchOptions;

mod bind;
mod chunks;
mod copy_cmds;
mod copy_kernel;
mod dispatch;
mod graph_mode;
mod hazards;
mod held;
pub(crate) mod host_io;
mod launch;
mod options;
mod poison;
mod split;

use dispatch::ELEM_MEMO;

use bind::{bind_descriptors, push_constants};

/// The buffers a batch keeps alive, each with whether the batch writes it.
type KeepList = Vec<(Arc<BufferInner>, bool)>;

/// Timestamp queries of one profiled batch.
struct Queries {
    pools: Vec<vk::QueryPool>,
    used: u32,
    labels: Vec<String>,
    next_label: Option<String>,
}

/// A recording of GPU work. Created by [`Device::batch`].
///
/// Dropping a batch without [`Batch::submit`] or [`Batch::submit_async`]
/// discards the commands not yet submitted; chunks it already submitted (a
/// long batch submits as it grows, see [`BatchOptions`]) still run to
/// completion, and the buffers they use stay alive until then.
#[must_use = "a batch does nothing until submitted; dropping it discards what was not yet submitted"]
pub struct Batch {
    dev: Arc<DeviceInner>,
    rec: Option<Recorder>,
    cb: vk::CommandBuffer,
    tracker: Tracker,
    /// Automatic barriers ([`BatchOptions::auto_barriers`]).
    auto: bool,
    /// What commands touched since barriers ordered them ([`crate::hazard`]).
    hazards: Hazards,
    /// Set while the pieces of a split launch after its first are
    /// recorded: one launch, checked once.
    in_launch: bool,
    /// Barriers recorded.
    barriers: u64,
    /// The barrier log ([`BatchOptions::record_plan`]).
    plan: Vec<PlannedBarrier>,
    /// Barriers are logged into `plan` ([`BatchOptions::record_plan`]).
    logging: bool,
    /// Buffers used by the open chunk (kept alive until it is submitted),
    /// with whether a command writes them.
    keep: KeepList,
    /// The stream the batch records on: its queue and last submission.
    stream: Arc<StreamState>,
    /// Per queue, values the next submission waits for (named tickets).
    wait_marks: UseMark,
    /// Events the next submission waits for, with the values.
    events: Vec<(Arc<EventInner>, u64)>,
    /// Value of the batch's first submission (0: none yet).
    first_value: u64,
    /// The batch's place in its stream's order (0: none yet; see
    /// `batch/held.rs`).
    place: u64,
    /// Set by `submit_async`: the next submission is the batch's last.
    ending: bool,
    /// Values of the chunks submitted while the batch was held back
    /// behind an open batch of its stream (none: never held back).
    held: Option<Arc<std::sync::Mutex<held::Progress>>>,
    /// The pipeline bound in the open chunk (null: none).
    last_pipeline: vk::Pipeline,
    /// Address of the kernel (`KernelCore`) whose pipeline is bound with
    /// `last_infos` as its descriptors, all validated for it; 0 when
    /// nothing bound is known valid (new chunk, another pipeline bound, a
    /// refused binding).
    bound: usize,
    /// The layout class of `bound` ([`crate::layout_class`]): while
    /// `bound` is set, a kernel of this class over the same buffer ranges
    /// finds its descriptors already bound.
    bound_class: u32,
    /// The descriptors bound for `bound`, one per binding.
    last_infos: [vk::DescriptorBufferInfo; MAX_BINDINGS],
    /// Address of each bound buffer's shared state (kept alive by `keep`
    /// while `bound` is set, so an equal address is the same buffer).
    last_owner: [usize; MAX_BINDINGS],
    /// Address of the kernel (`KernelCore`, alive as long as the device)
    /// whose element types `elem_checked` holds checks for; 0: none.
    elem_kernel: usize,
    /// Per binding of `elem_kernel` (the first [`ELEM_MEMO`]), the element
    /// hook (`BufView::elem`, as an address) of a buffer already checked
    /// there, 0 when none: a buffer of the same element type passes
    /// without a check.
    elem_checked: [usize; ELEM_MEMO],
    chunk_cmds: u32,
    /// The last (invocations, local size x) turned into a grid, and the grid.
    last_grid: (u32, u32, [u32; 3]),
    /// The open chunk uses a buffer the host reads through its mapping.
    chunk_host_reads: bool,
    policy: ChunkPolicy,
    commands: u64,
    last_value: u64,
    profiling: Profiling,
    queries: Option<Queries>,
    /// The error that poisoned the batch ([`poison`]).
    poisoned: Option<Box<Error>>,
    /// Test hook: descriptor binds left before an injected failure (0: off).
    fault: u32,
    /// Graph mode (`graph_mode`): the kernels recorded, kept by the graph.
    graph_kernels: Option<Vec<Arc<KernelCore>>>,
    /// Where the batch's validation span starts in the device's log
    /// (`None`: its ticket's waits report no validation messages).
    validation_from: Option<usize>,
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("commands", &self.commands)
            .field("submitted_up_to", &self.last_value)
            .finish()
    }
}

impl Device {
    /// A new batch with default options.
    pub fn batch(&self) -> Result<Batch> {
        self.batch_with(BatchOptions::default())
    }

    /// A new batch with `options`, on the device's default stream.
    pub fn batch_with(&self, options: BatchOptions) -> Result<Batch> {
        Batch::on_stream(&self.inner, self.inner.default_stream().clone(), options)
    }
}

impl Stream {
    /// A new batch on this stream with default options.
    pub fn batch(&self) -> Result<Batch> {
        self.batch_with(BatchOptions::default())
    }

    /// A new batch on this stream with `options`.
    pub fn batch_with(&self, options: BatchOptions) -> Result<Batch> {
        Batch::on_stream(self.device(), self.state().clone(), options)
    }
}

impl Batch {
    /// A new batch on `stream`.
    pub(crate) fn on_stream(
        d: &Arc<DeviceInner>,
        stream: Arc<StreamState>,
        options: BatchOptions,
    ) -> Result<Batch> {
        d.sticky.check()?;
        if options.profiling != Profiling::Off && !d.info.timestamps {
            return Err(Error::Unsupported {
                what: "timestamps on the compute queue (profiling)",
                adapter: d.info.name.clone(),
            });
        }
        let rec = d.compute_recorders().take(
            &d.raw,
            &d.sticky,
            &d.counters,
            d.completed_cached(),
            || d.completed(),
        )?;
        Ok(Batch::with_recorder(d, stream, rec, options))
    }
}

impl Batch {
    /// A batch on `stream` recording into `rec`.
    fn with_recorder(
        d: &Arc<DeviceInner>,
        stream: Arc<StreamState>,
        mut rec: Recorder,
        options: BatchOptions,
    ) -> Batch {
        // The list comes out of its box, which stays with the recorder for
        // `retire` to refill: no allocation per batch.
        let keep = rec
            .spare
            .as_mut()
            .and_then(|s| s.downcast_mut::<KeepList>())
            .map(std::mem::take)
            .unwrap_or_default();
        Batch {
            dev: d.clone(),
            rec: Some(rec),
            cb: vk::CommandBuffer::null(),
            tracker: Tracker::new_batch(),
            auto: options.auto_barriers,
            hazards: Hazards::new(),
            in_launch: false,
            barriers: 0,
            plan: Vec::new(),
            logging: options.record_plan,
            keep,
            stream,
            wait_marks: UseMark::default(),
            events: Vec::new(),
            first_value: 0,
            place: 0,
            ending: false,
            held: None,
            last_pipeline: vk::Pipeline::null(),
            bound: 0,
            bound_class: 0,
            last_infos: [vk::DescriptorBufferInfo::default(); MAX_BINDINGS],
            last_owner: [0; MAX_BINDINGS],
            elem_kernel: 0,
            elem_checked: [0; ELEM_MEMO],
            chunk_cmds: 0,
            last_grid: (0, 0, [0; 3]),
            chunk_host_reads: false,
            policy: ChunkPolicy::new(options.first_chunk, options.max_chunk),
            commands: 0,
            last_value: 0,
            profiling: options.profiling,
            queries: (options.profiling != Profiling::Off).then(|| Queries {
                pools: Vec::new(),
                used: 0,
                labels: Vec::new(),
                next_label: None,
            }),
            poisoned: None,
            fault: 0,
            graph_kernels: None,
            validation_from: d.instance.log.window_start(),
        }
    }
}

fn grid_error(k: &Kernel, e: GridError, limit: [u32; 3], asked: [u32; 3]) -> Error {
    match e {
        GridError::Empty => Error::EmptyDispatch {
            kernel: k.label.to_string(),
            workgroups: asked,
        },
        GridError::TooLarge(requested) => Error::WorkgroupLimit {
            kernel: k.label.to_string(),
            requested,
            limit,
        },
    }
}

impl Batch {
    /// Records `kernel` over `invocations` invocations along x, in
    /// `ceil(invocations / local_size_x)` workgroups of one row: a kernel
    /// indexing with `gl_GlobalInvocationID.x` alone sees each index below
    /// `invocations` once (and a few spare ones when `invocations` is not a
    /// multiple of the local size: bound-check).
    ///
    /// Past the adapter's `maxComputeWorkGroupCount[0]` workgroups (65,535
    /// on lavapipe) the launch is split along x into several dispatches of
    /// at most that many workgroups, each running a variant of the kernel
    /// whose `gl_GlobalInvocationID.x` and `gl_WorkGroupID.x` start where
    /// the previous piece ended (the kernel's SPIR-V, rewritten once, adds a
    /// specialization constant to each load of those built-ins), so the
    /// kernel still sees every index once. A launch of `n` invocations takes
    /// `ceil(n / (maxComputeWorkGroupCount[0] * local_size_x))` pieces; the
    /// variant for each piece past the first is compiled on the first
    /// launch that reaches it and kept with the kernel. The pieces are
    /// separate commands ([`Batch::len`], profiles and
    /// [`Stats`](crate::Stats) pipelines count them) that may run
    /// concurrently, as one dispatch's workgroups do.
    ///
    /// A kernel that reads `gl_NumWorkGroups`, or uses the built-ins in a
    /// way the rewrite does not handle (a dynamic component index, the
    /// pointer passed on), cannot be split: [`Error::LaunchTooLarge`] names
    /// the reason, as it does for a grid whose spare invocations would index
    /// past 2^32. Kernels that recover a linear index from a grid spread
    /// into y and z launch with [`Batch::run_spread`] instead. Launches
    /// within one row cost what they always did (one cached comparison).
    ///
    /// **Element types.** Where a binding's block is a single scalar or
    /// vector, or an array of them (`float x[]`, `uvec4 w[]`), and the
    /// buffer's element type is one the crate names (`f32`, `f64`,
    /// [`F16`](crate::ops::F16), `u8` to `u64`, `i8` to `i64`, and arrays
    /// of 2 to 4 of them), the two must have the same scalar kind (float16,
    /// float32, float64, signed or unsigned integer) and one element size
    /// must divide the other, else the dispatch is an
    /// [`Error::ElementMismatch`]: `Buffer<u32>` on `float[]` is refused;
    /// `Buffer<f32>` on `vec4[]` and `Buffer<u8>` on `uint[]` (packed
    /// reads) pass. Structs on either side are not checked, nor are kernels
    /// built with [`KernelBuilder::raw_elements`](crate::KernelBuilder::raw_elements).
    #[inline]
    pub fn run(
        &mut self,
        kernel: &Kernel,
        buffers: &[&dyn GpuBuf],
        invocations: u32,
    ) -> Result<&mut Self> {
        self.run_with_push_constants(kernel, buffers, invocations, &[])
    }

    /// Like [`Batch::run`], passing `push_constants` (exactly the kernel's
    /// push-constant block size).
    #[inline]
    pub fn run_with_push_constants(
        &mut self,
        kernel: &Kernel,
        buffers: &[&dyn GpuBuf],
        invocations: u32,
        push_constants: &[u8],
    ) -> Result<&mut Self> {
        let k = &*kernel.core;
        let local_x = k.workgroup_size[0];
        let grid = if self.last_grid.0 == invocations && self.last_grid.1 == local_x {
            self.last_grid.2
        } else {
            match self.x_grid(kernel, invocations)? {
                Some(grid) => {
                    self.last_grid = (invocations, local_x, grid);
                    grid
                }
                None => return self.run_split(kernel, buffers, invocations, push_constants),
            }
        };
        self.dispatch(kernel, buffers, grid, push_constants, k.pipeline)
    }

    /// The one-row grid for `invocations` of `k` (see [`Batch::run`]);
    /// `None` past one row.
    #[cold]
    #[inline(never)]
    fn x_grid(&self, kernel: &Kernel, invocations: u32) -> Result<Option<[u32; 3]>> {
        let limit = self.dev.info.max_workgroup_count;
        let local_x = kernel.core.workgroup_size[0];
        match workgroups::x_groups(u64::from(invocations), local_x, limit[0]) {
            Ok(x) => Ok(Some([x, 1, 1])),
            Err(GridError::TooLarge(_)) => Ok(None),
            Err(e) => Err(grid_error(kernel, e, limit, [0, 0, 0])),
        }
    }

    /// Records `kernel` over an explicit grid of `workgroups`, with optional
    /// push constants.
    pub fn run_configured(
        &mut self,
        kernel: &Kernel,
        buffers: &[&dyn GpuBuf],
        workgroups: [u32; 3],
        push_constants: Option<&[u8]>,
    ) -> Result<&mut Self> {
        let k = &*kernel.core;
        let limit = self.dev.info.max_workgroup_count;
        workgroups::check_grid(workgroups, limit)
            .map_err(|e| grid_error(kernel, e, limit, workgroups))?;
        self.dispatch(
            kernel,
            buffers,
            workgroups,
            push_constants.unwrap_or(&[]),
            k.pipeline,
        )
    }

    /// Orders every command recorded before against every command recorded
    /// after. Costs nothing until a command follows it. With automatic
    /// barriers on ([`BatchOptions::auto_barriers`]) it is never needed for
    /// memory the batch's commands touch, and never doubled: the tracking
    /// starts afresh after it.
    pub fn barrier(&mut self) -> &mut Self {
        self.tracker.barrier();
        self.hazards.clear();
        self
    }

    /// Names the next command in the profile (profiled batches only; a
    /// no-op otherwise).
    pub fn label(&mut self, label: &str) -> &mut Self {
        if let Some(q) = &mut self.queries {
            q.next_label = Some(label.to_string());
        }
        self
    }

    /// Commands recorded so far.
    pub fn len(&self) -> u64 {
        self.commands
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.commands == 0
    }

    /// Orders the batch after `ticket`'s work on the GPU, with no host
    /// wait: commands recorded from now on (when called before the first
    /// command: the whole batch) start after it completes, whatever queue
    /// or stream it ran on. Waiting never blocks a stream on another queue.
    /// A ticket of a batch held back behind an open batch of its stream
    /// (the crate guide's "Ordering") has no value yet: on that stream,
    /// a batch placed after it needs none (the stream orders the two);
    /// otherwise this waits on the host until the held-back batch reaches
    /// its queue, or returns [`Error::BatchHeldOpen`] when the open batch
    /// holding it back belongs to the calling thread.
    /// [`Error::BadTicket`] for a ticket of another device.
    /// In a graph recording: [`Error::WaitInGraph`] (use
    /// [`crate::Graph::launch_after`]).
    pub fn wait_for(&mut self, ticket: &Ticket) -> Result<&mut Self> {
        self.refuse_in_graph("Batch::wait_for")?;
        if !ticket.is_of(&self.dev) {
            return Err(Error::BadTicket {
                what: "Batch::wait_for with a ticket of another device",
            });
        }
        let mark = ticket.mark_for(&self.stream, self.place, "Batch::wait_for")?;
        self.wait_marks = self.wait_marks.join(mark);
        Ok(self)
    }

    /// Makes commands recorded from now on (when called before the first
    /// command: the whole batch) wait on the GPU until `event` reaches
    /// `value` (the host sets it with [`crate::Event::set`]). Until then the
    /// batch does not complete, and on a queue shared with other streams
    /// (lavapipe's one queue) their later work waits too.
    /// [`Error::BadTicket`] for an event of another device;
    /// [`Error::EventValue`] for a value further above the event's current
    /// one than Vulkan guarantees a wait can be.
    /// In a graph recording: [`Error::WaitInGraph`].
    pub fn wait_event(&mut self, event: &crate::Event, value: u64) -> Result<&mut Self> {
        self.refuse_in_graph("Batch::wait_event")?;
        let inner = event.inner();
        if !inner.is_of(&self.dev) {
            return Err(Error::BadTicket {
                what: "Batch::wait_event with an event of another device",
            });
        }
        inner.check_wait(value)?;
        self.events.push((inner.clone(), value));
        Ok(self)
    }

    /// The stream's queue slot.
    #[inline]
    fn slot(&self) -> usize {
        self.stream.slot
    }

    /// Submits what remains and waits for all of it to complete. With
    /// [`DeviceOptions::validation_errors`](crate::DeviceOptions::validation_errors)
    /// on: [`Error::Validation`] when validation messages arrived between
    /// the batch's creation and the end of the wait ([`Ticket::wait`]).
    /// [`Error::BatchHeldOpen`] when the batch is held back behind an open
    /// batch of its stream that this thread holds (see
    /// [`Batch::submit_async`]): it is submitted all the same and reaches
    /// the queue when that batch ends.
    pub fn submit(self) -> Result<()> {
        self.submit_async()?.wait()
    }

    /// Submits what remains and returns a [`Ticket`] for the whole batch.
    ///
    /// While an earlier batch of the same stream is open (it submitted
    /// chunks as it grew and is neither submitted nor dropped), this
    /// batch is held back and reaches the queue when that batch ends: the
    /// ticket's value is known from then on (see [`Ticket::wait`]).
    pub fn submit_async(mut self) -> Result<Ticket> {
        // Checked here too: a batch with nothing left to submit would
        // otherwise return a ticket from a lost device. A poisoned batch
        // submits nothing more (dropping it discards the open chunk).
        self.usable()?;
        self.ending = true;
        if self.profiling == Profiling::Batch && self.queries.as_ref().is_some_and(|q| q.used > 0) {
            if self.cb == vk::CommandBuffer::null() {
                self.open_chunk()?;
            }
            self.write_timestamp(vk::PipelineStageFlags::BOTTOM_OF_PIPE);
        }
        if let Err(e) = self.flush() {
            return Err(self.poison(e));
        }
        if self.last_value == 0
            && self.place == 0
            && (!self.wait_marks.is_empty() || !self.events.is_empty())
        {
            // Nothing recorded, but waits named: an empty submission carries
            // them, so the ticket completes after what they wait for.
            if let Err(e) = self.submit_chunk(&[]) {
                return Err(self.poison(e));
            }
        }
        let queries = |b: &mut Batch| {
            b.queries.take().map(|q| QueryReadout {
                pools: q.pools,
                count: q.used,
                labels: q.labels,
            })
        };
        if let Some(pending) = self.end_held(true) {
            let queries = queries(&mut self);
            return Ok(
                Ticket::held(self.dev.clone(), self.stream.clone(), pending, queries)
                    .with_validation_from(self.validation_from),
            );
        }
        let ended = self.end_open();
        let mark = UseMark::at(self.slot(), self.last_value);
        self.retire(mark);
        ended?;
        let queries = queries(&mut self);
        Ok(Ticket::new(self.dev.clone(), self.slot(), mark, queries)
            .with_validation_from(self.validation_from))
    }

    /// Hands the recorder back (its work completes at `mark`), with the
    /// emptied keep list for the next batch to reuse. Buffers still listed
    /// were used only by commands never submitted.
    fn retire(&mut self, mark: UseMark) {
        if let Some(mut rec) = self.rec.take() {
            self.keep.clear();
            match rec
                .spare
                .as_mut()
                .and_then(|s| s.downcast_mut::<KeepList>())
            {
                Some(spare) => *spare = std::mem::take(&mut self.keep),
                None => rec.spare = Some(Box::new(std::mem::take(&mut self.keep))),
            }
            self.dev.compute_recorders().retire(mark, rec);
        }
    }

    fn check_own(&self, v: &BufView<'_>, what: &str) -> Result<()> {
        if v.inner.dev.id != self.dev.id {
            return Err(Error::ForeignBuffer {
                kernel: what.to_string(),
                binding: 0,
            });
        }
        Ok(())
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        // Unsubmitted commands are discarded: the pool reset drops them.
        // A batch held back behind an open one hands its recorder and
        // query pools to its last held-back work; an open one ends, so the
        // batches held back behind it go to the queue.
        if self.end_held(false).is_some() {
            return;
        }
        // A chunk that failed while held back already poisoned what follows.
        let _ = self.end_open();
        let mark = UseMark::at(self.stream.slot, self.last_value);
        self.retire(mark);
        if let Some(q) = self.queries.take() {
            for p in q.pools {
                self.dev.release(mark, Garbage::QueryPool(p));
            }
        }
    }
}
