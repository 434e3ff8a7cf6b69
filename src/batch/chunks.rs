//! Command boundaries of a batch: the barrier a command needs before it,
//! the timestamps around it when profiling, and chunked submission (a
//! chunk opens with the first command and is submitted once the chunk
//! policy says so, or at the end).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ash::vk;

use super::{Batch, KeepList};
use crate::barrier::Stage;
use crate::device::DeviceInner;
use crate::error::{Error, Result};
use crate::event::EventInner;
use crate::profile::Profiling;
use crate::profile::QUERIES_PER_POOL;
use crate::queue::{StreamState, Turn};
use crate::reclaim::UseMark;
use crate::recorder::cmd_barrier;
use crate::stats::Counter;

impl Batch {
    /// Opens a chunk if needed and records the barrier the command needs.
    /// Inlined into every command: the common case (a chunk is open, no
    /// barrier due) is a null check and a few bit operations.
    #[inline(always)]
    pub(super) fn begin_command(&mut self, stage: Stage, writes: bool) -> Result<()> {
        if self.cb == vk::CommandBuffer::null() {
            return self.begin_command_opening(stage, writes);
        }
        if let Some(m) = self.tracker.command(stage, writes) {
            self.record_barrier(m);
        }
        Ok(())
    }

    /// `begin_command` when no chunk is open yet.
    #[cold]
    #[inline(never)]
    pub(super) fn begin_command_opening(&mut self, stage: Stage, writes: bool) -> Result<()> {
        self.open_chunk()?;
        if let Some(m) = self.tracker.command(stage, writes) {
            self.record_barrier(m);
        }
        Ok(())
    }

    /// Records a barrier a [`Batch::barrier`] request owed.
    #[inline(never)]
    pub(super) fn record_barrier(&mut self, m: crate::barrier::Masks) {
        self.log_barrier(m, crate::hazard::BarrierCause::Requested);
        cmd_barrier(&self.dev.raw, self.cb, m);
    }

    /// Counts a recorded command; submits the chunk when the policy says so.
    #[inline]
    pub(super) fn end_command(&mut self, label: &str) -> Result<&mut Self> {
        self.commands += 1;
        self.chunk_cmds += 1;
        if self.queries.is_some() {
            self.end_command_profiled(label);
        }
        if self.policy.should_flush(self.chunk_cmds) {
            if let Err(e) = self.flush() {
                return Err(self.poison(e));
            }
            self.policy.advance();
        }
        Ok(self)
    }

    #[cold]
    pub(super) fn end_command_profiled(&mut self, label: &str) {
        let per_command = self.profiling == Profiling::Commands;
        if let Some(q) = &mut self.queries {
            let next = q.next_label.take();
            if per_command {
                q.labels.push(next.unwrap_or_else(|| label.to_string()));
            }
        }
        if per_command {
            self.write_timestamp(vk::PipelineStageFlags::BOTTOM_OF_PIPE);
        }
    }

    pub(super) fn open_chunk(&mut self) -> Result<()> {
        let d = &*self.dev;
        let rec = self
            .rec
            .as_mut()
            .ok_or(Error::DeviceLost { call: "batch" })?;
        let (cb, pipeline) = rec.begin(&d.raw, &d.sticky, &d.counters)?;
        self.cb = cb;
        self.chunk_cmds = 0;
        self.bound = 0;
        self.last_pipeline = pipeline;
        if self.queries.as_ref().is_some_and(|q| q.used == 0) {
            self.write_timestamp(vk::PipelineStageFlags::TOP_OF_PIPE);
        }
        Ok(())
    }

    pub(super) fn write_timestamp(&mut self, stage: vk::PipelineStageFlags) {
        let d = &*self.dev;
        let Some(q) = &mut self.queries else { return };
        let pool_index = (q.used / QUERIES_PER_POOL) as usize;
        if pool_index == q.pools.len() {
            let info = vk::QueryPoolCreateInfo::default()
                .query_type(vk::QueryType::TIMESTAMP)
                .query_count(QUERIES_PER_POOL);
            // SAFETY: plain creation on a live device.
            match unsafe { d.raw.create_query_pool(&info, None) } {
                Ok(p) => {
                    d.counters.add(Counter::QueryPools, 1);
                    // SAFETY: `cb` is recording outside any render pass.
                    unsafe { d.raw.cmd_reset_query_pool(self.cb, p, 0, QUERIES_PER_POOL) };
                    q.pools.push(p);
                }
                Err(_) => return,
            }
        }
        // SAFETY: the query was reset earlier in submission order and is
        // written once.
        unsafe {
            d.raw.cmd_write_timestamp(
                self.cb,
                stage,
                q.pools[pool_index],
                q.used % QUERIES_PER_POOL,
            )
        };
        q.used += 1;
    }

    /// Ends and submits the open chunk, if any.
    pub(super) fn flush(&mut self) -> Result<()> {
        if self.cb == vk::CommandBuffer::null() {
            return Ok(());
        }
        let cb = std::mem::replace(&mut self.cb, vk::CommandBuffer::null());
        // Writes reach the host's view only through a HOST barrier; needed
        // only when the chunk used a buffer the host reads through a mapping
        // (staged reads copy on the GPU, ordered by their own barrier or
        // semaphore wait).
        let host_reads = std::mem::take(&mut self.chunk_host_reads);
        if let Some(m) = self.tracker.end_chunk() {
            if host_reads {
                cmd_barrier(&self.dev.raw, cb, m);
            }
        }
        let d = &*self.dev;
        // SAFETY: `cb` is recording.
        unsafe { d.raw.end_command_buffer(cb) }
            .map_err(|r| d.sticky.fail("vkEndCommandBuffer", r))?;
        self.submit_chunk(&[cb])?;
        self.bound = 0;
        Ok(())
    }

    /// Submits `cmds` (one ended chunk, or none to carry waits alone) on
    /// the stream's queue. The first submission of a batch waits for the
    /// stream's previous one (see `Queue::submit_ordered`); later chunks
    /// follow in queue order and are ordered by the batch's own barriers.
    /// Every submission also waits for the tickets and events named since
    /// the previous one, and for the other queues' (and other streams')
    /// conflicting use of the chunk's buffers: a write waits for every
    /// earlier use, a read for earlier writes.
    ///
    /// The stream's order is held meanwhile: while an earlier batch of the
    /// stream is open, the chunk is held back instead (`batch/held.rs`).
    /// A batch submitted whole (its first submission is its last) goes to
    /// the queue without the order lock while no batch of its stream is
    /// open ([`StreamState::busy`], read under the queue's lock), as
    /// batches did before the stream's order: a round trip takes no lock
    /// more than the queue's.
    pub(super) fn submit_chunk(&mut self, cmds: &[vk::CommandBuffer]) -> Result<()> {
        if self.ending && self.place == 0 {
            let value = submit_work(
                &self.dev,
                &self.stream,
                cmds,
                self.wait_marks,
                &mut self.keep,
                &mut self.events,
                0,
                true,
            )?;
            if value != 0 {
                self.wait_marks = UseMark::default();
                self.first_value = value;
                self.last_value = value;
                return Ok(());
            }
        }
        self.submit_in_order(cmds)
    }

    /// [`Batch::submit_chunk`] under the stream's order lock.
    #[inline(never)]
    fn submit_in_order(&mut self, cmds: &[vk::CommandBuffer]) -> Result<()> {
        let stream = self.stream.clone();
        let mut order = stream.order();
        let turn = order.turn(&mut self.place, self.ending);
        stream.note_order(&order);
        if turn == Turn::Later {
            self.defer_chunk(&mut order, cmds);
            return Ok(());
        }
        if self.held.is_some() {
            self.catch_up()?;
        }
        let value = submit_work(
            &self.dev,
            &stream,
            cmds,
            std::mem::take(&mut self.wait_marks),
            &mut self.keep,
            &mut self.events,
            self.first_value,
            false,
        )?;
        drop(order);
        if self.first_value == 0 {
            self.first_value = value;
        }
        self.last_value = value;
        Ok(())
    }
}

/// Submits `cmds` on `stream` after `need` and `events` and the conflicting
/// earlier use of the buffers in `keep` (see [`Batch::submit_chunk`]), and
/// records the submission as their last use (draining both lists).
/// `first_value`: the batch's first value (0: this is its first
/// submission). `whole`: a whole batch submitted without the stream's
/// order lock, which submits nothing (and returns 0, the lists untouched)
/// while a batch of the stream is open. Inlined into
/// [`Batch::submit_chunk`], the path of nearly every submission.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn submit_work(
    d: &DeviceInner,
    stream: &StreamState,
    cmds: &[vk::CommandBuffer],
    mut need: UseMark,
    keep: &mut KeepList,
    events: &mut Vec<(Arc<EventInner>, u64)>,
    first_value: u64,
    whole: bool,
) -> Result<u64> {
    let slot = stream.slot;
    for (b, writes) in keep.iter() {
        b.last_use.hazards(*writes, &mut need);
    }
    let sems = events.iter().map(|(e, v)| (e.semaphore(), *v));
    let n = events.len();
    let value = crate::stream::submit_on(d, stream, cmds, need, sems, n, first_value, whole)?;
    if value == 0 {
        return Ok(0);
    }
    d.counters.submissions.fetch_add(1, Ordering::Relaxed);
    for (b, writes) in keep.drain(..) {
        b.last_use.used_on(slot, value, writes);
    }
    for (e, v) in events.drain(..) {
        e.waited(slot, value, v);
    }
    Ok(value)
}
