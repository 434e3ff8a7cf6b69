//! Graphs: record once, launch many times (the CUDA-graph equivalent).
//!
//! A [`GraphRecorder`] is a [`Batch`] in graph mode: everything a batch
//! records (`run`, `barrier`, `copy`, `fill`, ...) goes into one command
//! buffer that is never submitted in chunks, begun for simultaneous reuse,
//! with its descriptor sets (on the pooled-descriptor path) from the graph's
//! own pools rather than the device's set cache, which may free a cached
//! set once its buffers are dropped. [`GraphRecorder::finish`] ends it and
//! hands it to a [`Graph`].
//!
//! [`Graph::launch`] re-submits the recorded command buffer: nothing is
//! re-recorded or re-validated, and no Vulkan object is created. Each
//! launch is ordered after everything submitted to the queue before it,
//! earlier launches of the same graph included (a GPU-side wait on the
//! queue's timeline), so launching while earlier launches run is allowed
//! and ordered. The returned [`Ticket`] completes with the launch.
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
//! Every launch reaches the queue through one function, `submit`.
//! (Launching on a chosen stream, `launch_on`, comes with streams.)
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

use ash::vk;

use crate::batch::Batch;
use crate::buffer::BufferInner;
use crate::device::{Device, DeviceInner, Garbage};
use crate::error::{Error, Result};
use crate::pipeline_cache::KernelCore;
use crate::profile::Profiling;
use crate::queue::SemaphoreWait;
use crate::reclaim::UseMark;
use crate::recorder::Recorder;
use crate::ticket::{QueryReadout, Ticket};

mod params;
mod pool;
mod profile;

use params::ParamsCore;
pub use params::{Params, DEFAULT_PARAM_SLOTS, MAX_PARAM_SLOTS};
pub use pool::CapturePool;

/// Stages at which a launch waits for earlier work.
const WAIT_STAGES: vk::PipelineStageFlags = vk::PipelineStageFlags::from_raw(
    vk::PipelineStageFlags::COMPUTE_SHADER.as_raw() | vk::PipelineStageFlags::TRANSFER.as_raw(),
);

/// The one place graph work reaches a queue: submits `cbs` after `waits`,
/// ordered after everything submitted before on the device's compute queue,
/// and returns the timeline value that marks its completion.
fn submit(d: &DeviceInner, cbs: &[vk::CommandBuffer], waits: &[SemaphoreWait]) -> Result<u64> {
    let value = d
        .compute
        .submit(&d.raw, &d.sticky, cbs, waits, Some(WAIT_STAGES))?;
    d.counters.submissions.fetch_add(1, Ordering::Relaxed);
    Ok(value)
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

impl Device {
    /// A recording for a new [`Graph`].
    pub fn graph_recorder(&self) -> Result<GraphRecorder> {
        self.graph_recorder_with(Profiling::Off)
    }

    /// A recording for a new [`Graph`] whose launches write GPU timestamps
    /// as `profiling` says (read with [`Graph::last_profile`]); adapters
    /// without compute-queue timestamps give [`Error::Unsupported`].
    pub fn graph_recorder_with(&self, profiling: Profiling) -> Result<GraphRecorder> {
        Ok(GraphRecorder {
            batch: Batch::for_graph(&self.inner, profiling)?,
            dev: self.inner.clone(),
            pool: None,
        })
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

impl GraphRecorder {
    /// The pool this recording registers into, if any.
    pub fn pool(&self) -> Option<&Arc<CapturePool>> {
        self.pool.as_ref()
    }

    /// Ends the recording: a graph ready to launch. Nothing recorded is
    /// [`Error::EmptyGraph`].
    pub fn finish(self) -> Result<Graph> {
        let GraphRecorder { batch, dev, pool } = self;
        let parts = batch.finish_graph()?;
        let mut params: Vec<Arc<ParamsCore>> =
            parts.buffers.iter().filter_map(ParamsCore::find).collect();
        // One lock order for every launch: by address.
        params.sort_unstable_by_key(|p| Arc::as_ptr(p) as usize);
        if let Some(p) = &pool {
            p.register(&parts.buffers, &parts.kernels);
        }
        Ok(Graph {
            dev,
            rec: Some(parts.rec),
            cb: parts.cb,
            buffers: parts.buffers,
            kernels: parts.kernels,
            params,
            pool,
            commands: parts.commands,
            queries: parts.queries,
            replays: AtomicU64::new(0),
            last_value: AtomicU64::new(0),
            prewarmed: AtomicBool::new(false),
            prewarm_lock: Mutex::new(()),
        })
    }
}

/// A recorded batch that launches any number of times. `Send + Sync`:
/// launches from several threads are ordered as they reach the queue.
pub struct Graph {
    dev: Arc<DeviceInner>,
    rec: Option<Recorder>,
    cb: vk::CommandBuffer,
    buffers: Vec<Arc<BufferInner>>,
    kernels: Vec<Arc<KernelCore>>,
    params: Vec<Arc<ParamsCore>>,
    pool: Option<Arc<CapturePool>>,
    commands: u64,
    /// Timestamp queries each launch resets and writes (profiled graphs).
    queries: Option<QueryReadout>,
    replays: AtomicU64,
    last_value: AtomicU64,
    prewarmed: AtomicBool,
    prewarm_lock: Mutex<()>,
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
    /// Launches the graph: one submission of the recorded commands, after
    /// everything submitted before it on the device (earlier launches
    /// included). On failure nothing was submitted and the graph stays
    /// launchable. CPU cost: one `vkQueueSubmit` plus one atomic update per
    /// distinct buffer the graph uses (so host access to a buffer waits for
    /// the launch), whatever the number of commands; with [`Params`], a
    /// slot write per bound value.
    #[inline]
    pub fn launch(&self) -> Result<Ticket> {
        self.launch_inner(None)
    }

    /// Launches the graph once `ticket`'s work has completed, with the wait
    /// on the GPU (the host does not wait). A ticket of another device is
    /// [`Error::ForeignObject`] (nothing submitted; the graph stays
    /// launchable).
    pub fn launch_after(&self, ticket: &Ticket) -> Result<Ticket> {
        self.launch_inner(Some(ticket))
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
        let v = submit(d, &[], &[])?;
        d.compute
            .wait(&d.raw, &d.sticky, v, None, d.options.wait_spin)?;
        self.prewarmed.store(true, Ordering::Release);
        Ok(())
    }

    /// Whether [`Graph::prewarm`] has run.
    pub fn is_prewarmed(&self) -> bool {
        self.prewarmed.load(Ordering::Acquire)
    }

    fn launch_inner(&self, after: Option<&Ticket>) -> Result<Ticket> {
        let d = &*self.dev;
        d.sticky.check()?;
        let none = SemaphoreWait {
            semaphore: vk::Semaphore::null(),
            value: 0,
            stage: WAIT_STAGES,
        };
        let mut waits = [none; 2];
        let mut n = 0;
        if let Some(t) = after {
            if !Arc::ptr_eq(t.device(), &self.dev) {
                return Err(Error::ForeignObject {
                    what: "the ticket passed to launch_after",
                });
            }
            let v = t.timeline_value();
            if v > d.compute.completed_cached() {
                waits[n] = SemaphoreWait {
                    semaphore: d.compute.timeline,
                    value: v,
                    stage: WAIT_STAGES,
                };
                n += 1;
            }
        }
        // Host writes staged through the transfer queue since the last
        // launch (as a batch's first chunk waits for them).
        if let Some(t) = &d.transfer {
            let need = self
                .buffers
                .iter()
                .map(|b| b.last_use.transfer())
                .max()
                .unwrap_or(0);
            if need > t.completed_cached() {
                waits[n] = SemaphoreWait {
                    semaphore: t.timeline,
                    value: need,
                    stage: WAIT_STAGES,
                };
                n += 1;
            }
        }
        let value = if self.params.is_empty() {
            submit(d, &[self.cb], &waits[..n])?
        } else {
            self.submit_with_params(&waits[..n])?
        };
        for b in &self.buffers {
            b.last_use.used_compute(value);
        }
        self.last_value.fetch_max(value, Ordering::AcqRel);
        self.replays.fetch_add(1, Ordering::Relaxed);
        Ok(Ticket::new(self.dev.clone(), value, None))
    }

    /// Snapshots each bound [`Params`] into its next slot and submits the
    /// slots' copies in front of the graph's commands.
    fn submit_with_params(&self, waits: &[SemaphoreWait]) -> Result<u64> {
        let mut staged = Vec::with_capacity(self.params.len());
        let mut cbs = Vec::with_capacity(self.params.len() + 1);
        for p in &self.params {
            let s = p.stage()?;
            cbs.push(s.cb);
            staged.push(s);
        }
        cbs.push(self.cb);
        let value = submit(&self.dev, &cbs, waits)?;
        for s in staged {
            s.commit(value);
        }
        Ok(value)
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // Never blocks: the recorder goes back to the device's pool, to be
        // reset only once the last launch completed; buffers and params are
        // released by their own deferred paths when their last use passes.
        let mark = UseMark {
            compute: self.last_value.load(Ordering::Acquire),
            transfer: 0,
        };
        if let Some(rec) = self.rec.take() {
            self.dev.compute_recorders.retire(mark, rec);
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
