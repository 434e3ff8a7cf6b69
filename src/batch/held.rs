//! A batch held back behind an open batch of its stream.
//!
//! A batch is one unit of its stream's order (the crate guide's
//! "Ordering"; the rule is `queue/stream_state/order.rs`): while an
//! earlier batch of the stream is open, this batch's chunks are queued in
//! the stream's order, each with what its submission needs (its keep list,
//! the tickets and events it waits for), and submitted by whoever ends the
//! open batch. The values they get are written to a shared [`Progress`],
//! which the batch reads back once it is the open one itself. A batch that
//! ends while still held back hands its recorder (and, when dropped, its
//! query pools) to a last piece of work, which retires them at the batch's
//! last value and fills the ticket's pending completion.

use std::sync::{Arc, Mutex};

use ash::vk;

use super::{Batch, KeepList};
use crate::device::{DeviceInner, Garbage};
use crate::error::{Error, Result};
use crate::event::EventInner;
use crate::queue::{BatchOrder, PendingMark, StreamState};
use crate::reclaim::UseMark;
use crate::recorder::Recorder;

/// The values of a batch's chunks submitted while it was held back.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    /// Value of the batch's first submission (0: none yet).
    first: u64,
    /// Value of its latest.
    last: u64,
    /// The error a held-back chunk's submission met (nothing after it is
    /// submitted).
    failed: Option<Error>,
}

type Shared = Arc<Mutex<Progress>>;

fn lock(p: &Shared) -> std::sync::MutexGuard<'_, Progress> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

/// One chunk held back, with what its submission needs.
struct HeldChunk {
    dev: Arc<DeviceInner>,
    stream: Arc<StreamState>,
    place: u64,
    cmd: Option<vk::CommandBuffer>,
    need: UseMark,
    keep: KeepList,
    events: Vec<(Arc<EventInner>, u64)>,
    progress: Shared,
}

impl HeldChunk {
    /// Submits the chunk (its turn came: the batch ahead of it ended).
    fn submit(mut self) {
        let mut p = lock(&self.progress);
        if p.failed.is_none() {
            let r = super::chunks::submit_work(
                &self.dev,
                &self.stream,
                self.cmd.as_slice(),
                self.need,
                &mut self.keep,
                &mut self.events,
                p.first,
                false,
            );
            match r {
                Ok(value) => {
                    if p.first == 0 {
                        p.first = value;
                    }
                    p.last = value;
                }
                Err(e) => p.failed = Some(e),
            }
        }
        drop(p);
        for (b, _) in &self.keep {
            b.held.remove(&self.stream, self.place);
        }
    }
}

/// The last work of a batch that ended while held back.
struct LastWork {
    dev: Arc<DeviceInner>,
    slot: usize,
    rec: Option<Recorder>,
    progress: Shared,
    pending: Arc<PendingMark>,
    pools: Vec<vk::QueryPool>,
}

impl LastWork {
    /// Retires the recorder and the query pools at the batch's last value
    /// and fills its completion.
    fn run(self) {
        let p = lock(&self.progress);
        let mark = UseMark::at(self.slot, p.last);
        let result = match &p.failed {
            Some(e) => Err(e.clone()),
            None => Ok(mark),
        };
        drop(p);
        if let Some(mut rec) = self.rec {
            rec.spare = Some(Box::new(KeepList::new()));
            self.dev.compute_recorders().retire(mark, rec);
        }
        let orphans = self.pending.fill(result);
        for pool in orphans.into_iter().chain(self.pools) {
            self.dev.release(mark, Garbage::QueryPool(pool));
        }
    }
}

impl Batch {
    /// Queues `cmds` (one ended chunk, or none) behind the open batch of
    /// the stream, with what the submission needs; `order` is the stream's
    /// order, locked, that said [`crate::queue::Turn::Later`].
    #[cold]
    pub(super) fn defer_chunk(&mut self, order: &mut BatchOrder, cmds: &[vk::CommandBuffer]) {
        let progress = self.held.get_or_insert_with(Shared::default).clone();
        let keep = std::mem::take(&mut self.keep);
        for (b, _) in &keep {
            b.held.add(&self.stream, self.place);
        }
        let chunk = HeldChunk {
            dev: self.dev.clone(),
            stream: self.stream.clone(),
            place: self.place,
            cmd: cmds.first().copied(),
            need: std::mem::take(&mut self.wait_marks),
            keep,
            events: std::mem::take(&mut self.events),
            progress,
        };
        order.defer(self.place, Box::new(move || chunk.submit()));
    }

    /// Takes in the values of the chunks submitted while the batch was
    /// held back (it is the open batch now, or ending); the error one of
    /// them met, if any.
    pub(super) fn catch_up(&mut self) -> Result<()> {
        let Some(p) = &self.held else {
            return Ok(());
        };
        let p = lock(p);
        if let Some(e) = &p.failed {
            return Err(e.clone());
        }
        if self.first_value == 0 {
            self.first_value = p.first;
        }
        self.last_value = self.last_value.max(p.last);
        Ok(())
    }

    /// Ends the batch if it is still held back: its recorder (and, unless
    /// `keep_queries`, its query pools) go to its last held-back work,
    /// which fills the returned completion. `None` when it is not held
    /// back (never placed, or the open batch).
    #[inline]
    pub(super) fn end_held(&mut self, keep_queries: bool) -> Option<Arc<PendingMark>> {
        // One branch for the common batch, never placed (submitted whole
        // while no batch of its stream was open).
        if self.place == 0 {
            return None;
        }
        self.end_placed(keep_queries)
    }

    /// [`Batch::end_held`] for a batch that took a place.
    #[inline(never)]
    fn end_placed(&mut self, keep_queries: bool) -> Option<Arc<PendingMark>> {
        let stream = self.stream.clone();
        let mut order = stream.order();
        if !order.is_held(self.place) {
            return None;
        }
        let pending = PendingMark::new(self.place);
        self.keep.clear();
        let pools = match keep_queries {
            true => Vec::new(),
            false => self.queries.take().map(|q| q.pools).unwrap_or_default(),
        };
        let last = LastWork {
            dev: self.dev.clone(),
            slot: stream.slot,
            rec: self.rec.take(),
            progress: self.held.get_or_insert_with(Shared::default).clone(),
            pending: pending.clone(),
            pools,
        };
        order.defer(self.place, Box::new(move || last.run()));
        order.end(self.place, Some(pending.clone()));
        drop(order);
        stream.notify_ended();
        self.place = 0;
        Some(pending)
    }

    /// Ends the batch if it is the open batch of its stream: the batches
    /// held back behind it go to the queue. The error a chunk of it met
    /// while it was held back, if any.
    #[inline]
    pub(super) fn end_open(&mut self) -> Result<()> {
        // One branch for the common batch, never placed.
        if self.place == 0 {
            return Ok(());
        }
        self.end_open_placed()
    }

    /// [`Batch::end_open`] for a batch that took a place.
    #[inline(never)]
    fn end_open_placed(&mut self) -> Result<()> {
        let r = self.catch_up();
        self.stream.end(self.place, None, None);
        self.place = 0;
        r
    }
}
