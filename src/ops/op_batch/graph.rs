//! An op batch finished into a [`Graph`]: planned as an execute plans, its
//! steps recorded once into a graph recorder instead of a batch.

use std::sync::Arc;

use super::exec;
use super::OpBatch;
use crate::{CapturePool, Error, Graph, GraphRecorder, Result, Stream};

impl OpBatch {
    /// The recording as a [`Graph`] that launches on the device's default
    /// stream: planned exactly as [`OpBatch::execute`] plans it (the same
    /// fusion, buffers and barriers; the graph's dispatches are
    /// [`OpBatch::num_dispatches`]), recorded once, launched any number of
    /// times with [`Graph::launch`] and its kin. Nothing runs until a
    /// launch. GPU timestamps as [`OpBatchOptions::profiling`](super::OpBatchOptions::profiling)
    /// says (read with [`Graph::last_profile`]).
    ///
    /// The graph binds the op batch's buffers themselves: after a launch's
    /// ticket has been waited for, [`OpBatch::read`] and
    /// [`OpBatch::buffer`] give that launch's results, and what changes
    /// between launches is what the inputs hold: imported buffers written
    /// by the host ([`Buffer::write`](crate::Buffer::write) waits for the
    /// launches that use the buffer), imported [`Params`](crate::Params)
    /// ([`OpBatch::import_params`], a value per launch), and the `u32`
    /// buffers the transformer ops read. An in-place op applies again at
    /// each launch, as at each execute. An op batch with nothing to run is
    /// [`Error::EmptyGraph`]: nothing recorded, or with fusion on only
    /// element-wise runs whose values no held tensor names and no later
    /// step reads (fusion drops those).
    ///
    /// The op batch stays usable. Executing it without recording anything
    /// new reuses the plan and so the same buffers (an execute and a
    /// launch are ordered like any two submissions that share buffers).
    /// A later replan (new ops, or a different set of held tensors) gives
    /// the op batch new buffers for its intermediates and results and
    /// leaves the graph's to the graph, which keeps computing what it
    /// recorded: from then on `read` shows the op batch's own executes,
    /// and the graph's results stay reachable through buffers taken with
    /// [`OpBatch::buffer`] before the replan. Uploads and imports are
    /// shared by both throughout.
    ///
    /// ```
    /// # fn main() -> vkcompute::Result<()> {
    /// let gpu = vkcompute::Device::new()?;
    /// let input = gpu.upload(&[1.0f32, -2.0, 3.0, -4.0])?;
    /// let mut ops = gpu.ops();
    /// let x = ops.import(&input)?;
    /// let y = ops.scale(&x, 2.0)?;
    /// let y = ops.relu(&y)?;
    /// let total = ops.sum(&y)?;
    /// let graph = ops.graph()?;                // planned and recorded once
    /// graph.launch()?.wait()?;
    /// assert_eq!(ops.read(&y)?, [2.0, 0.0, 6.0, 0.0]);
    /// input.write(0, &[-1.0, 5.0, 0.5, 1.0])?;  // waits for the launch
    /// graph.launch()?.wait()?;                 // nothing re-recorded
    /// assert_eq!(ops.read(&total)?, [13.0]);
    /// assert_eq!(graph.num_replays(), 2);
    /// # assert_eq!(gpu.validation_message_count(), 0, "{:?}", gpu.validation_messages());
    /// # Ok(())
    /// # }
    /// ```
    pub fn graph(&mut self) -> Result<Graph> {
        let rec = self.gpu.graph_recorder_with(self.options.profiling)?;
        self.graph_from(rec)
    }

    /// [`OpBatch::graph`] whose [`Graph::launch`] goes to `stream` (a
    /// stream of another device is [`Error::ForeignObject`]).
    pub fn graph_on(&mut self, stream: &Stream) -> Result<Graph> {
        if !Arc::ptr_eq(stream.device(), &self.gpu.inner) {
            return Err(Error::ForeignObject {
                what: "the stream passed to OpBatch::graph_on",
            });
        }
        let rec = stream.graph_recorder_with(self.options.profiling)?;
        self.graph_from(rec)
    }

    /// [`OpBatch::graph`] registering its buffers and kernels in `pool`
    /// (shared with other graphs, see [`CapturePool`]; a pool of another
    /// device is [`Error::ForeignObject`]). Such a graph is not profiled.
    pub fn graph_in(&mut self, pool: &Arc<CapturePool>) -> Result<Graph> {
        let rec = self.gpu.graph_recorder_in(pool)?;
        self.graph_from(rec)
    }

    fn graph_from(&mut self, mut rec: GraphRecorder) -> Result<Graph> {
        exec::plan_current(self)?;
        // The plan's barriers are the recording's only ordering, as in an
        // execute.
        rec.set_auto_barriers(false);
        exec::record_steps(self, &mut rec)?;
        if let Some(r) = self.report.as_ref().filter(|r| !r.is_empty()) {
            rec.add_report(r.clone());
        }
        let graph = rec.finish()?;
        self.graphed = true;
        self.executed_nodes = Some(self.graph.nodes.len());
        Ok(graph)
    }
}
