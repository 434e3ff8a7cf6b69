//! Graphs: record once, launch many times (the CUDA-graph equivalent).
//!
//! A [`GraphRecorder`] is a [`Batch`] in graph mode: everything a batch
//! records (`run`, `barrier`, `copy`, `fill`, ...) goes into one command
//! buffer that is never submitted in chunks, begun for simultaneous reuse,
//! with its descriptor sets (on the pooled-descriptor path) from the graph's
//! own pools rather than the device's set cache, which may free a cached
//! set once its buffers are dropped. [`GraphRecorder::finish`] ends it and
//! hands it to a [`Graph`]. Its barriers are found as a batch's are
//! ([`BatchOptions::auto_barriers`](crate::BatchOptions::auto_barriers), on;
//! [`Batch::set_auto_barriers`] turns it off), within the recording: a
//! launch is ordered after the graph's previous launch and each
//! [`Params`] copy ahead of it by the launch itself, so no barrier is
//! recorded for those.
//!
//! [`Graph::launch`] re-submits the recorded command buffer: nothing is
//! re-recorded or re-validated, and no Vulkan object is created. The
//! returned [`Ticket`] completes with the launch.
//!
//! Streams: a graph launches on the stream it was recorded on
//! ([`Stream::graph_recorder`]; the device's default stream for
//! [`Device::graph_recorder`]), or on any stream of the device with
//! [`Graph::launch_on`] (its command buffer is of the compute family, which
//! every stream's queue belongs to). A launch is a batch on that stream as
//! far as ordering goes: it starts after the stream's previous work, after
//! the ticket given to [`Graph::launch_after`] (from any stream or queue,
//! joined tickets included: every one of their queues), and after other
//! queues' conflicting use of its buffers (the crate guide's "Ordering":
//! a launch that writes a buffer waits for every earlier use, one that
//! reads it for earlier writes). Launches of one graph are always ordered
//! with each other, whatever streams they go to: each waits on the GPU for
//! the graph's previous launch (on its own queue's timeline, or on the
//! other queue's), so launching while earlier launches run is allowed and
//! ordered. Launches record their buffers' use on the queue they ran on,
//! so host access and other streams' work order after them, and nothing is
//! freed while they run.
//!
//! A graph keeps no one-off waits: [`Batch::wait_for`] and
//! [`Batch::wait_event`] on a [`GraphRecorder`] are [`Error::WaitInGraph`]
//! at record time; name the ticket at each launch instead
//! ([`Graph::launch_after`]).
//!
//! Lifetimes: a graph holds every buffer and kernel its commands use (and
//! its [`CapturePool`], if any), so users may drop their handles. Each
//! launch marks its buffers as used until it completes, so host access to
//! them waits for it, and dropping the graph never blocks: its command
//! buffer and descriptor sets go back to the device's recorders once the
//! last launch completes, and its buffers are released through the device's
//! deferred release when their last use passes.
//!
//! Per-launch values: [`Params`] (its documentation says how each launch
//! keeps the value it was launched with).
//!
//! Every launch reaches a queue through one function, `submit`.
//!
//! ```
//! # fn main() -> vkcompute::Result<()> {
//! let gpu = vkcompute::Device::new()?;
//! let add = gpu.kernel_glsl(r#"
//!     #version 450
//!     layout(local_size_x = 64) in;
//!     layout(set = 0, binding = 0) buffer X { uint x[]; };
//!     layout(set = 0, binding = 1) uniform P { uint k; } p;
//!     void main() { x[gl_GlobalInvocationID.x] += p.k; }
//! "#)?;
//! let x = gpu.alloc::<u32>(64)?;
//! let k = gpu.params(1u32)?;                  // a per-launch value
//! let mut rec = gpu.graph_recorder()?;        // records like a batch
//! for _ in 0..3 {
//!     rec.run(&add, &[&x, &k], 64)?;
//!     rec.barrier();
//! }
//! let graph = rec.finish()?;
//! let _first = graph.launch()?;               // x += 3 × 1
//! k.set(10);
//! let t = graph.launch()?;                    // x += 3 × 10, after the first
//! t.wait()?;
//! assert_eq!(x.download()?, vec![33; 64]);
//! assert_eq!(graph.num_replays(), 2);
//! # assert_eq!(gpu.validation_message_count(), 0, "{:?}", gpu.validation_messages());
//! # Ok(())
//! # }
//! ```

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ash::vk;

use crate::batch::Batch;
use crate::buffer::BufferInner;
use crate::device::{Device, DeviceInner, Garbage};
use crate::error::{Error, Result};
use crate::pace::Pace;
use crate::pipeline_cache::KernelCore;
use crate::profile::Profiling;
use crate::queue::StreamState;
use crate::reclaim::{SharedUse, UseMark};
use crate::recorder::Recorder;
use crate::stream::Stream;
use crate::ticket::{LaunchReport, QueryReadout, Ticket};

mod params;
mod pool;
mod profile;

use params::ParamsCore;
pub use params::{Params, DEFAULT_PARAM_SLOTS, MAX_PARAM_SLOTS};
pub use pool::CapturePool;

/// The one place graph work reaches a queue: submits `cbs` on `stream`'s
/// queue after the stream's previous submission and after `need` (per queue
/// slot, values to wait for on the GPU; those on the stream's own queue are
/// waited for on its timeline), and returns the timeline value that marks
/// its completion.
fn submit(
    d: &DeviceInner,
    stream: &StreamState,
    cbs: &[vk::CommandBuffer],
    need: UseMark,
) -> Result<u64> {
    let value = crate::stream::submit_on(d, stream, cbs, need, std::iter::empty(), 0, 0, false)?;
    d.counters.submissions.fetch_add(1, Ordering::Relaxed);
    Ok(value)
}

/// Where a graph's launches stand (held across a launch's submission, so
/// launches of one graph take their order from it).
#[derive(Debug, Default)]
struct Launches {
    /// The latest launch (its queue slot and value); the next one waits
    /// for it.
    prev: UseMark,
    /// Every launch so far, joined: the graph's objects are free once it
    /// is reached.
    all: UseMark,
}

/// A recording that becomes a [`Graph`]: a [`Batch`] in graph mode (it
/// dereferences to one, so `run`, `barrier`, `copy`, `fill` and the rest
/// record as in a batch). Made by [`Device::graph_recorder`] or
/// [`Device::graph_recorder_in`]. `Send`, not `Sync` (as a batch).
#[must_use = "a recording becomes a graph only through finish()"]
pub struct GraphRecorder {
    batch: Batch,
    dev: Arc<DeviceInner>,
    pool: Option<Arc<CapturePool>>,
    /// Reports each launch's ticket reads (see [`LaunchReport`]).
    reports: Vec<Arc<dyn LaunchReport>>,
}

impl std::fmt::Debug for GraphRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphRecorder")
            .field("commands", &self.batch.len())
            .field("has_pool", &self.pool.is_some())
            .finish()
    }
}

impl Deref for GraphRecorder {
    type Target = Batch;
    fn deref(&self) -> &Batch {
        &self.batch
    }
}

impl DerefMut for GraphRecorder {
    fn deref_mut(&mut self) -> &mut Batch {
        &mut self.batch
    }
}

impl GraphRecorder {
    fn new(
        d: &Arc<DeviceInner>,
        stream: Arc<StreamState>,
        profiling: Profiling,
    ) -> Result<GraphRecorder> {
        Ok(GraphRecorder {
            batch: Batch::for_graph(d, stream, profiling)?,
            dev: d.clone(),
            pool: None,
            reports: Vec::new(),
        })
    }
}

impl Device {
    /// A recording for a new [`Graph`] that launches on the device's
    /// default stream (unless [`Graph::launch_on`] names another).
    pub fn graph_recorder(&self) -> Result<GraphRecorder> {
        self.graph_recorder_with(Profiling::Off)
    }

    /// A recording for a new [`Graph`] whose launches write GPU timestamps
    /// as `profiling` says (read with [`Graph::last_profile`]); adapters
    /// without compute-queue timestamps give [`Error::Unsupported`].
    pub fn graph_recorder_with(&self, profiling: Profiling) -> Result<GraphRecorder> {
        GraphRecorder::new(&self.inner, self.inner.default_stream().clone(), profiling)
    }

    /// A recording for a new [`Graph`] that registers everything it uses in
    /// `pool` (shared with other graphs; a pool of another device is
    /// [`Error::ForeignObject`]).
    pub fn graph_recorder_in(&self, pool: &Arc<CapturePool>) -> Result<GraphRecorder> {
        pool.check_device(self.inner.id)?;
        let mut rec = self.graph_recorder()?;
        rec.pool = Some(pool.clone());
        Ok(rec)
    }
}

impl Stream {
    /// A recording for a new [`Graph`] whose [`Graph::launch`] and
    /// [`Graph::launch_after`] go to this stream (the graph keeps the
    /// stream, so its queue counts as used while the graph lives).
    pub fn graph_recorder(&self) -> Result<GraphRecorder> {
        self.graph_recorder_with(Profiling::Off)
    }

    /// [`Stream::graph_recorder`] with GPU timestamps as `profiling` says
    /// (see [`Device::graph_recorder_with`]).
    pub fn graph_recorder_with(&self, profiling: Profiling) -> Result<GraphRecorder> {
        GraphRecorder::new(self.device(), self.state().clone(), profiling)
    }
}

impl GraphRecorder {
    /// The pool this recording registers into, if any.
    pub fn pool(&self) -> Option<&Arc<CapturePool>> {
        self.pool.as_ref()
    }

    /// Has every launch's ticket read `report` once the launch completed.
    pub(crate) fn add_report(&mut self, report: Arc<dyn LaunchReport>) {
        self.reports.push(report);
    }

    /// Ends the recording: a graph ready to launch. Nothing recorded is
    /// [`Error::EmptyGraph`].
    pub fn finish(self) -> Result<Graph> {
        let GraphRecorder {
            batch,
            dev,
            pool,
            reports,
        } = self;
        let mut parts = batch.finish_graph()?;
        let mut params: Vec<Arc<ParamsCore>> = parts
            .buffers
            .iter()
            .filter_map(|(b, _)| ParamsCore::find(b))
            .collect();
        // One lock order for every launch: by address.
        params.sort_unstable_by_key(|p| Arc::as_ptr(p) as usize);
        // Each launch's copy writes the fixed buffer of every Params bound,
        // so launches order against other use of it as writers.
        for (b, writes) in &mut parts.buffers {
            *writes |= params.iter().any(|p| Arc::ptr_eq(&p.fixed, b));
        }
        // Launches mark one shared record; each buffer links to it (so its
        // hazards, host access and release see the launches).
        let shared = SharedUse::new();
        for (b, writes) in &parts.buffers {
            b.last_use.link(&shared, *writes);
        }
        if let Some(p) = &pool {
            let held: Vec<Arc<BufferInner>> =
                parts.buffers.iter().map(|(b, _)| b.clone()).collect();
            p.register(&held, &parts.kernels);
        }
        Ok(Graph {
            dev,
            rec: Some(parts.rec),
            cb: parts.cb,
            buffers: parts.buffers,
            shared,
            kernels: parts.kernels,
            params,
            pool,
            stream: parts.stream,
            commands: parts.commands,
            queries: parts.queries,
            replays: AtomicU64::new(0),
            launches: Mutex::new(Launches::default()),
            prewarmed: AtomicBool::new(false),
            prewarm_lock: Mutex::new(()),
            reports,
            pace: Arc::new(Pace::default()),
        })
    }
}

/// A recorded batch that launches any number of times, on any stream of
/// its device. `Send + Sync`: launches from several threads are ordered
/// (each after the one that took the graph's launch order before it).
pub struct Graph {
    dev: Arc<DeviceInner>,
    rec: Option<Recorder>,
    cb: vk::CommandBuffer,
    /// Every buffer the commands use, with whether a launch writes it.
    buffers: Vec<(Arc<BufferInner>, bool)>,
    /// The record every launch marks and every buffer above links to.
    shared: Arc<SharedUse>,
    kernels: Vec<Arc<KernelCore>>,
    params: Vec<Arc<ParamsCore>>,
    pool: Option<Arc<CapturePool>>,
    /// The stream `launch` and `launch_after` submit on.
    stream: Arc<StreamState>,
    commands: u64,
    /// Timestamp queries each launch resets and writes (profiled graphs).
    queries: Option<QueryReadout>,
    replays: AtomicU64,
    launches: Mutex<Launches>,
    prewarmed: AtomicBool,
    prewarm_lock: Mutex<()>,
    /// Reports each launch's ticket reads (see [`LaunchReport`]).
    reports: Vec<Arc<dyn LaunchReport>>,
    /// The launches' learned duration, which paces their waits.
    pace: Arc<Pace>,
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("commands", &self.commands)
            .field("buffers", &self.buffers.len())
            .field("params", &self.params.len())
            .field("replays", &self.num_replays())
            .finish()
    }
}

impl Graph {
    /// Launches the graph on its stream (the one it was recorded on): one
    /// submission of the recorded commands, after the stream's previous
    /// work and the graph's previous launch (see the module notes for the
    /// rest of its order). On failure nothing was submitted and the graph
    /// stays launchable. CPU cost: one `vkQueueSubmit`, a look at other
    /// work's conflicting use of the graph's buffers and one atomic update
    /// of the graph's shared use record (which the buffers consult, so
    /// host access and other streams order after the launch), whatever the
    /// number of commands or buffers; with [`Params`], a slot write per
    /// bound value.
    ///
    /// A launch is a whole batch of its stream: while a batch of that
    /// stream is open (it submitted chunks as it grew), the launch waits on
    /// the host for it to end; [`Error::BatchHeldOpen`] (nothing
    /// submitted) when the calling thread holds that batch. A ticket given
    /// to [`Graph::launch_after`] of a batch held back behind an open
    /// batch is waited for on the host until it reaches its queue, with
    /// the same error.
    #[inline]
    pub fn launch(&self) -> Result<Ticket> {
        self.launch_inner(&self.stream, None)
    }

    /// Launches the graph on its stream once `ticket`'s work has completed,
    /// with the wait on the GPU (the host does not wait). The ticket may
    /// come from any stream or queue of the device; a joined ticket waits
    /// for each of its queues. A ticket of another device is
    /// [`Error::ForeignObject`] (nothing submitted; the graph stays
    /// launchable).
    pub fn launch_after(&self, ticket: &Ticket) -> Result<Ticket> {
        self.launch_inner(&self.stream, Some(ticket))
    }

    /// Launches the graph on `stream` (as [`Graph::launch`]; the ticket is
    /// of `stream`'s queue). Still ordered after the graph's previous
    /// launch, wherever that went: on another queue, through a GPU-side
    /// wait on that launch. A stream of another device is
    /// [`Error::ForeignObject`].
    pub fn launch_on(&self, stream: &Stream) -> Result<Ticket> {
        if !Arc::ptr_eq(stream.device(), &self.dev) {
            return Err(Error::ForeignObject {
                what: "the stream passed to launch_on",
            });
        }
        self.launch_inner(stream.state(), None)
    }

    /// [`Graph::launch_on`] once `ticket`'s work has completed (as
    /// [`Graph::launch_after`]).
    pub fn launch_on_after(&self, stream: &Stream, ticket: &Ticket) -> Result<Ticket> {
        if !Arc::ptr_eq(stream.device(), &self.dev) {
            return Err(Error::ForeignObject {
                what: "the stream passed to launch_on_after",
            });
        }
        self.launch_inner(stream.state(), Some(ticket))
    }

    /// Which queue the graph's own stream records on (as
    /// [`Stream::queue_id`]).
    pub fn queue_id(&self) -> usize {
        self.stream.slot
    }

    /// How long a launch takes as the last wait on one saw it, from the
    /// launch to its completion (zero before any wait saw one complete).
    /// A wait on a launch's ticket with no timeout blocks in the driver
    /// until shortly before this time has passed since the launch, then
    /// spins on the queue's timeline (for twice its margin: 100 µs plus
    /// 1/32 of this time, or [`DeviceOptions::wait_spin`] when longer),
    /// then blocks: it returns about when a wait spinning through the
    /// launch would, without a core spinning through it (blocking waits
    /// wake late on some drivers). A launch that completes during the
    /// sleep wakes the wait at once, and the next wait starts spinning
    /// earlier. With `wait_spin` zero, waits never spin.
    ///
    /// [`DeviceOptions::wait_spin`]: crate::DeviceOptions::wait_spin
    pub fn learned_duration(&self) -> Duration {
        self.pace.expected()
    }

    /// Successful launches so far.
    pub fn num_replays(&self) -> u64 {
        self.replays.load(Ordering::Relaxed)
    }

    /// Commands recorded (dispatches, copies, fills).
    pub fn num_commands(&self) -> u64 {
        self.commands
    }

    /// Distinct buffers this graph keeps alive (those its commands use).
    pub fn buffer_count(&self) -> usize {
        self.buffers.len()
    }

    /// Distinct kernels this graph keeps alive.
    pub fn kernel_count(&self) -> usize {
        self.kernels.len()
    }

    /// Whether the graph holds a [`CapturePool`].
    pub fn has_pool(&self) -> bool {
        self.pool.is_some()
    }

    /// The graph's [`CapturePool`], to share with another recording
    /// ([`Device::graph_recorder_in`]).
    pub fn pool(&self) -> Option<&Arc<CapturePool>> {
        self.pool.as_ref()
    }

    /// Readies the launch path so the first launch costs what later ones
    /// do; later calls do nothing. It writes every free slot of each
    /// [`Params`] ring the graph binds (faulting in their pages), and makes
    /// one submission with no commands through the launch path (warming the
    /// queue's submission path and timeline), waiting for it. It runs none
    /// of the graph's commands and does not count as a launch.
    pub fn prewarm(&self) -> Result<()> {
        let _once = self.prewarm_lock.lock().unwrap_or_else(|p| p.into_inner());
        if self.prewarmed.load(Ordering::Acquire) {
            return Ok(());
        }
        let d = &*self.dev;
        d.sticky.check()?;
        for p in &self.params {
            p.touch();
        }
        let turn = self.stream.whole_turn("Graph::prewarm")?;
        let v = submit(d, &self.stream, &[], UseMark::default())?;
        drop(turn);
        d.wait_mark(UseMark::at(self.stream.slot, v), None)?;
        self.prewarmed.store(true, Ordering::Release);
        Ok(())
    }

    /// Whether [`Graph::prewarm`] has run.
    pub fn is_prewarmed(&self) -> bool {
        self.prewarmed.load(Ordering::Acquire)
    }

    fn launch_inner(&self, stream: &StreamState, after: Option<&Ticket>) -> Result<Ticket> {
        let d = &*self.dev;
        d.sticky.check()?;
        let mut need = UseMark::default();
        if let Some(t) = after {
            if !t.is_of(&self.dev) {
                return Err(Error::ForeignObject {
                    what: "the ticket passed to launch_after",
                });
            }
            need = t.resolved("Graph::launch_after")?;
        }
        // The launch is a whole batch of `stream`: it waits (on the host)
        // for the stream's open batch to end, and holds the stream's order
        // until it is submitted. Taken before the graph's own locks, as
        // every submission takes the order first.
        let _turn = stream.whole_turn("Graph::launch")?;
        // Held until the launch is submitted and its uses recorded: launches
        // of this graph (and, under the Params locks, of every graph sharing
        // a Params) see each other's marks.
        let mut launches = self.launches.lock().unwrap_or_else(|p| p.into_inner());
        need = need.join(launches.prev);
        let slot = stream.slot;
        let value = if self.params.is_empty() {
            self.buffer_hazards(&mut need);
            let value = submit(d, stream, &[self.cb], need)?;
            self.mark_buffers(slot, value);
            value
        } else {
            self.submit_with_params(stream, need)?
        };
        let mark = UseMark::at(slot, value);
        launches.prev = mark;
        launches.all = launches.all.join(mark);
        // Under the launch lock: reports number launches in submission
        // order.
        let mut ticket = Ticket::new(self.dev.clone(), slot, mark, None)
            .with_pace(self.pace.clone(), Instant::now());
        for r in &self.reports {
            ticket = ticket.with_report(r.clone());
        }
        drop(launches);
        self.replays.fetch_add(1, Ordering::Relaxed);
        Ok(ticket)
    }

    /// Raises `need` to the other queues' (and streams') conflicting use
    /// of the graph's buffers: all earlier use of what it writes, earlier
    /// writes of what it reads, and conflicting graphs' launches (gathered
    /// in the shared record as they happen, so this reads a fixed number of
    /// words).
    #[inline]
    fn buffer_hazards(&self, need: &mut UseMark) {
        self.shared.hazards(need);
    }

    /// Records the launch at `value` on queue slot `slot` as the last use
    /// of every buffer it uses: one update of the shared record they link
    /// to.
    #[inline]
    fn mark_buffers(&self, slot: usize, value: u64) {
        self.shared.launched(slot, value);
    }

    /// Snapshots each bound [`Params`] into its next slot and submits the
    /// slots' copies in front of the graph's commands. The buffers' hazards
    /// are read under the Params locks, so a launch of another graph
    /// sharing a Params (on any queue) is seen and waited for.
    fn submit_with_params(&self, stream: &StreamState, mut need: UseMark) -> Result<u64> {
        let mut staged = Vec::with_capacity(self.params.len());
        let mut cbs = Vec::with_capacity(self.params.len() + 1);
        for p in &self.params {
            let s = p.stage()?;
            cbs.push(s.cb);
            staged.push(s);
        }
        cbs.push(self.cb);
        self.buffer_hazards(&mut need);
        let value = submit(&self.dev, stream, &cbs, need)?;
        self.mark_buffers(stream.slot, value);
        for s in staged {
            s.commit(stream.slot, value);
        }
        Ok(value)
    }

    /// The latest launch's mark (empty: never launched).
    fn last_launch(&self) -> UseMark {
        self.launches.lock().unwrap_or_else(|p| p.into_inner()).prev
    }

    /// Every launch so far, joined (what must complete before the graph's
    /// objects are free).
    fn launched(&self) -> UseMark {
        self.launches.lock().unwrap_or_else(|p| p.into_inner()).all
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // Never blocks: the recorder goes back to the device's pool, to be
        // reset only once every launch completed; buffers and params are
        // released by their own deferred paths when their last use passes.
        let mark = self.launched();
        // The launches become each buffer's own last use before the links
        // go, so the buffers' release waits for them.
        for (b, _) in &self.buffers {
            b.last_use.unlink(&self.shared);
        }
        if let Some(rec) = self.rec.take() {
            self.dev.compute_recorders().retire(mark, rec);
        }
        if let Some(q) = self.queries.take() {
            for p in q.pools {
                self.dev.release(mark, Garbage::QueryPool(p));
            }
        }
    }
}

#[allow(dead_code)]
fn assert_thread_safety() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Graph>();
    send_sync::<CapturePool>();
    send_sync::<Params<u32>>();
    send::<GraphRecorder>();
}
