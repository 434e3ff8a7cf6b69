//! Graph mode: a batch recorded once for a [`crate::Graph`].
//!
//! Such a batch records into a recorder of its own
//! ([`Recorder::for_graph`]): one command buffer, never submitted in chunks,
//! begun for simultaneous reuse, with descriptor sets from the recorder's
//! own pools. Finishing it hands the command buffer, the recorder and every
//! buffer and kernel it used to the graph instead of submitting.

use std::sync::Arc;

use ash::vk;

use super::{Batch, BatchOptions};
use crate::buffer::BufferInner;
use crate::device::DeviceInner;
use crate::error::{Error, Result};
use crate::pipeline_cache::KernelCore;
use crate::profile::Profiling;
use crate::queue::StreamState;
use crate::recorder::{cmd_barrier, Recorder};
use crate::ticket::QueryReadout;

/// What a finished graph-mode batch hands to its graph.
pub(crate) struct GraphParts {
    /// The recorder that owns `cb` and the descriptor sets it binds.
    pub rec: Recorder,
    /// The recorded command buffer, executable, never submitted.
    pub cb: vk::CommandBuffer,
    /// Every buffer the commands use, once each, with whether a command
    /// writes it.
    pub buffers: Vec<(Arc<BufferInner>, bool)>,
    /// Every kernel the commands bind, once each.
    pub kernels: Vec<Arc<KernelCore>>,
    /// The stream the graph launches on by default (where it was recorded).
    pub stream: Arc<StreamState>,
    /// Commands recorded.
    pub commands: u64,
    /// The timestamp queries every launch resets and writes (profiled
    /// recordings only).
    pub queries: Option<QueryReadout>,
}

/// Sorts `v` by address and drops repeats of one `Arc`.
fn dedup_arcs<T>(v: &mut Vec<Arc<T>>) {
    v.sort_unstable_by_key(|a| Arc::as_ptr(a) as usize);
    v.dedup_by(|a, b| Arc::ptr_eq(a, b));
}

/// Sorts `v` by buffer address and keeps one entry per buffer, writing
/// when any of its entries writes.
fn dedup_buffers<T>(v: &mut Vec<(Arc<T>, bool)>) {
    v.sort_unstable_by_key(|(a, _)| Arc::as_ptr(a) as usize);
    v.dedup_by(|later, kept| {
        let same = Arc::ptr_eq(&later.0, &kept.0);
        if same {
            kept.1 |= later.1;
        }
        same
    });
}

impl Batch {
    /// A batch in graph mode (its graph launches on `stream` unless told
    /// otherwise), writing timestamps as `profiling` says (each launch
    /// resets and rewrites them). Its command buffer is of the compute
    /// family, so it runs on any stream's queue.
    pub(crate) fn for_graph(
        d: &Arc<DeviceInner>,
        stream: Arc<StreamState>,
        profiling: Profiling,
    ) -> Result<Batch> {
        d.sticky.check()?;
        if profiling != Profiling::Off && !d.info.timestamps {
            return Err(Error::Unsupported {
                what: "timestamps on the compute queue (profiling)",
                adapter: d.info.name.clone(),
            });
        }
        let rec = Recorder::for_graph(&d.raw, d.compute_queue().family, &d.sticky, &d.counters)?;
        let options = BatchOptions::single_submit().with_profiling(profiling);
        let mut b = Batch::with_recorder(d, stream, rec, options);
        b.graph_kernels = Some(Vec::new());
        Ok(b)
    }

    /// [`Error::WaitInGraph`] in graph mode: a recorded command buffer
    /// keeps no one-off wait (tickets are named per launch instead).
    pub(super) fn refuse_in_graph(&self, what: &'static str) -> Result<()> {
        if self.graph_kernels.is_some() {
            return Err(Error::WaitInGraph { what });
        }
        Ok(())
    }

    /// Ends the recording and hands it over (graph mode only; a batch in
    /// graph mode never flushed, so everything is in one command buffer).
    pub(crate) fn finish_graph(mut self) -> Result<GraphParts> {
        self.dev.sticky.check()?;
        if self.graph_kernels.is_none() || self.cb == vk::CommandBuffer::null() {
            return Err(Error::EmptyGraph);
        }
        if self.profiling == Profiling::Batch && self.queries.as_ref().is_some_and(|q| q.used > 0) {
            self.write_timestamp(vk::PipelineStageFlags::BOTTOM_OF_PIPE);
        }
        let cb = std::mem::replace(&mut self.cb, vk::CommandBuffer::null());
        // As `flush`: a host barrier when the host reads a used buffer
        // through its mapping.
        if let Some(m) = self.tracker.end_chunk() {
            if std::mem::take(&mut self.chunk_host_reads) {
                cmd_barrier(&self.dev.raw, cb, m);
            }
        }
        let d = &*self.dev;
        // SAFETY: `cb` is recording.
        unsafe { d.raw.end_command_buffer(cb) }
            .map_err(|r| d.sticky.fail("vkEndCommandBuffer", r))?;
        let rec = self.rec.take().ok_or(Error::DeviceLost { call: "graph" })?;
        let mut buffers = std::mem::take(&mut self.keep);
        dedup_buffers(&mut buffers);
        let mut kernels = self.graph_kernels.take().unwrap_or_default();
        dedup_arcs(&mut kernels);
        let queries = self.queries.take().map(|q| QueryReadout {
            pools: q.pools,
            count: q.used,
            labels: q.labels,
        });
        Ok(GraphParts {
            rec,
            cb,
            buffers,
            kernels,
            stream: self.stream.clone(),
            commands: self.commands,
            queries,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedup_keeps_one_of_each() {
        let (a, b) = (Arc::new(1), Arc::new(1));
        let mut v = vec![a.clone(), b.clone(), a.clone(), b.clone(), a.clone()];
        dedup_arcs(&mut v);
        assert_eq!(v.len(), 2);
        assert!(v.iter().any(|x| Arc::ptr_eq(x, &a)) && v.iter().any(|x| Arc::ptr_eq(x, &b)));
    }

    #[test]
    fn dedup_buffers_keeps_one_of_each_writing_if_any_writes() {
        let (a, b, c) = (Arc::new(1), Arc::new(2), Arc::new(3));
        let mut v = vec![
            (a.clone(), false),
            (b.clone(), false),
            (a.clone(), true),
            (c.clone(), false),
            (a.clone(), false),
            (b.clone(), false),
        ];
        dedup_buffers(&mut v);
        assert_eq!(v.len(), 3);
        let writes = |x: &Arc<i32>| v.iter().find(|e| Arc::ptr_eq(&e.0, x)).map(|e| e.1);
        assert_eq!(writes(&a), Some(true));
        assert_eq!(writes(&b), Some(false));
        assert_eq!(writes(&c), Some(false));
    }
}
