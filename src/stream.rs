//! Streams: ordered queues of batches that may run concurrently with each
//! other.
//!
//! A stream records on one queue of the compute family. Each batch's first
//! submission waits (on the GPU, through the queue's timeline semaphore) for
//! the last submission of the stream before it; nothing else orders it,
//! except tickets and events it names ([`Batch::wait_for`],
//! [`Batch::wait_event`]) and the buffer rule ([`crate#ordering`]).
//!
//! Vulkan signals a submission's semaphore only after every earlier
//! submission on the same queue, so streams that must overlap need
//! different `VkQueue`s. [`Device::stream`] hands out distinct queues while
//! the family has free ones (the default stream holds the first), then
//! shares them, the least used first. Streams sharing a queue stay correct
//! but do not overlap, and a batch waiting there (on an event, say) holds up
//! later work of every stream on that queue. On lavapipe, with one queue,
//! every stream shares it.
//!
//! [`Batch::wait_for`]: crate::Batch::wait_for
//! [`Batch::wait_event`]: crate::Batch::wait_event

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ash::vk;

use crate::batch::{Batch, BatchOptions};
use crate::device::{Device, DeviceInner};
use crate::error::Result;
use crate::queue::{Order, SemaphoreWait, WaitList};
use crate::reclaim::UseMark;
use crate::ticket::Ticket;

/// What batches of one stream share: its queue and its last submission.
#[derive(Debug)]
pub(crate) struct StreamState {
    /// Mark slot of the stream's queue.
    pub slot: usize,
    /// The last value submitted on the stream (on its queue's timeline).
    pub last: AtomicU64,
    /// The queue's user count, released when the stream drops.
    lease: Option<(Arc<[AtomicUsize]>, usize)>,
}

impl StreamState {
    /// A stream on mark slot `slot`; `lease` is the user count to release
    /// (none for the device's default stream).
    pub(crate) fn new(slot: usize, lease: Option<(Arc<[AtomicUsize]>, usize)>) -> StreamState {
        StreamState {
            slot,
            last: AtomicU64::new(0),
            lease,
        }
    }
}

impl Drop for StreamState {
    fn drop(&mut self) {
        if let Some((users, i)) = &self.lease {
            if let Some(u) = users.get(*i) {
                u.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

/// Submits `cmds` (none: the submission carries waits alone) on
/// `stream`'s queue and returns the value that marks their completion.
///
/// It waits on the GPU for `need` (per queue slot: named tickets, and the
/// conflicting earlier use of the buffers the commands use) and for the
/// `count` event semaphores of `events` at their values. With
/// `first_value` 0 (the first submission of a batch) it also waits for the
/// stream's last submission; otherwise `first_value` is the batch's first
/// value, and values on the stream's own queue from there on are the
/// batch's own earlier chunks, ordered by its barriers, so not waited for.
/// Values the host has seen complete are never waited for. The stream's
/// last value becomes the new one.
pub(crate) fn submit_on(
    d: &DeviceInner,
    stream: &StreamState,
    cmds: &[vk::CommandBuffer],
    need: UseMark,
    events: impl Iterator<Item = (vk::Semaphore, u64)>,
    count: usize,
    first_value: u64,
) -> Result<u64> {
    let slot = stream.slot;
    let stages = vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER;
    let (others, own) = plan_waits(&need, slot, first_value, &d.completed_cached());
    let mut waits = WaitList::default();
    for (s, v) in others.points() {
        if let Some(q) = d.queue(s) {
            waits.push(SemaphoreWait {
                semaphore: q.timeline,
                value: v,
                stage: stages,
            });
        }
    }
    for (semaphore, value) in events.take(count) {
        waits.push(SemaphoreWait {
            semaphore,
            value,
            stage: stages,
        });
    }
    let order = Order {
        stages,
        own,
        whole_queue: false,
        stream: Some(&stream.last),
        after_stream: first_value == 0,
    };
    let q = d.queue(slot).unwrap_or(&d.compute);
    q.submit_ordered(&d.raw, &d.sticky, cmds, waits.iter(), waits.len(), order)
}

/// Which values of `need` a submission on queue slot `slot` waits for:
/// the other queues' values (a semaphore wait each) and the value on its
/// own queue (0: none). Values `completed` reaches are dropped; so are own
/// values from `first_value` on (the batch's own earlier chunks), when the
/// batch has submitted (`first_value` > 0).
pub(crate) fn plan_waits(
    need: &UseMark,
    slot: usize,
    first_value: u64,
    completed: &UseMark,
) -> (UseMark, u64) {
    let mut others = UseMark::default();
    let mut own = 0;
    for (s, v) in need.points() {
        if v <= completed.get(s) {
            continue;
        }
        if s != slot {
            others.set(s, v);
        } else if first_value == 0 || v < first_value {
            own = v;
        }
    }
    (others, own)
}

/// The compute queue (by position among the family's queues) a new
/// stream should use: the one with the fewest streams, the first of equals.
pub(crate) fn pick_queue(users: &[usize]) -> usize {
    users
        .iter()
        .enumerate()
        .min_by_key(|&(i, &u)| (u, i))
        .map_or(0, |(i, _)| i)
}

/// An ordered queue of batches. Batches on one stream run in the order
/// they were submitted (each waits on the GPU for the stream's previous
/// one); batches on different streams may run at the same time. Cheap to
/// clone (clones are the same stream); `Send + Sync`.
///
/// ```
/// # fn main() -> vkcompute::Result<()> {
/// let gpu = vkcompute::Device::new()?;
/// let (a, b) = (gpu.stream()?, gpu.stream()?);
/// let xs = gpu.upload(&[1u32; 64])?;
/// let ys = gpu.alloc::<u32>(64)?;
/// let mut first = a.batch()?;
/// first.fill(&xs, 7)?;
/// let t = first.submit_async()?;
/// let mut second = b.batch()?;
/// second.wait_for(&t)?;        // GPU-side: b's batch runs after a's
/// second.copy(&xs, &ys)?;
/// second.submit()?;
/// assert_eq!(ys.download()?, vec![7u32; 64]);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Stream {
    dev: Arc<DeviceInner>,
    state: Arc<StreamState>,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("queue", &self.state.slot)
            .field("last", &self.state.last.load(Ordering::Relaxed))
            .finish()
    }
}

impl Device {
    /// A new stream, on a queue of the compute family no other live stream
    /// uses while there is one, else on the least used one (see
    /// [`crate::Stream`]).
    pub fn stream(&self) -> Result<Stream> {
        let d = &self.inner;
        d.sticky.check()?;
        let users = &d.stream_users;
        let counts: Vec<usize> = users.iter().map(|u| u.load(Ordering::Acquire)).collect();
        let i = pick_queue(&counts);
        users[i].fetch_add(1, Ordering::AcqRel);
        let slot = d.compute_queues().nth(i).map_or(0, |q| q.slot);
        Ok(Stream {
            dev: d.clone(),
            state: Arc::new(StreamState::new(slot, Some((users.clone(), i)))),
        })
    }

    /// The stream [`Device::batch`] records on.
    pub fn default_stream(&self) -> Stream {
        Stream {
            dev: self.inner.clone(),
            state: self.inner.default_stream.clone(),
        }
    }

    /// How many queues of the compute family streams spread over (1 on
    /// lavapipe).
    pub fn stream_queue_count(&self) -> usize {
        self.inner.stream_users.len()
    }
}

impl Stream {
    /// The stream's shared state (its queue slot and last value).
    pub(crate) fn state(&self) -> &Arc<StreamState> {
        &self.state
    }

    /// The device the stream belongs to.
    pub(crate) fn device(&self) -> &Arc<DeviceInner> {
        &self.dev
    }

    /// A new batch on this stream with default options.
    pub fn batch(&self) -> Result<Batch> {
        self.batch_with(BatchOptions::default())
    }

    /// A new batch on this stream with `options`.
    pub fn batch_with(&self, options: BatchOptions) -> Result<Batch> {
        Batch::on_stream(&self.dev, self.state.clone(), options)
    }

    /// Which queue of the device the stream records on (a position among
    /// the device's queues; streams with equal values share a queue and do
    /// not overlap).
    pub fn queue_id(&self) -> usize {
        self.state.slot
    }

    /// Whether `other` records on the same queue (then the two never
    /// overlap).
    pub fn shares_queue_with(&self, other: &Stream) -> bool {
        self.state.slot == other.state.slot && Arc::ptr_eq(&self.dev, &other.dev)
    }

    /// A ticket for everything submitted on this stream so far (ready at
    /// once when nothing was).
    pub fn ticket(&self) -> Ticket {
        let last = self.state.last.load(Ordering::Acquire);
        Ticket::new(
            self.dev.clone(),
            self.state.slot,
            UseMark::at(self.state.slot, last),
            None,
        )
    }

    /// Blocks until everything submitted on this stream so far completed.
    pub fn synchronize(&self) -> Result<()> {
        self.ticket().wait()
    }

    /// [`Stream::synchronize`] with a limit ([`crate::Error::Timeout`]).
    pub fn synchronize_timeout(&self, timeout: Duration) -> Result<()> {
        self.ticket().wait_timeout(timeout)
    }
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Stream>();
};

#[cfg(test)]
mod tests {
    use super::{pick_queue, plan_waits};
    use crate::reclaim::UseMark;

    #[test]
    fn waits_skip_what_completed_and_the_batchs_own_chunks() {
        let need = UseMark::at(0, 9)
            .join(UseMark::at(1, 4))
            .join(UseMark::at(3, 7));
        let done = UseMark::at(1, 4).join(UseMark::at(3, 2));
        // First submission of a batch on slot 0: everything pending counts.
        let (others, own) = plan_waits(&need, 0, 0, &done);
        assert_eq!(others.points().collect::<Vec<_>>(), vec![(3, 7)]);
        assert_eq!(own, 9);
        // A later chunk of a batch that began at 8: 9 is its own chunk.
        assert_eq!(plan_waits(&need, 0, 8, &done).1, 0);
        // ... and one that began at 10: 9 came before it.
        assert_eq!(plan_waits(&need, 0, 10, &done).1, 9);
        // On slot 3 the roles swap; slot 0's value is another queue's.
        let (others, own) = plan_waits(&need, 3, 0, &done);
        assert_eq!(others.points().collect::<Vec<_>>(), vec![(0, 9)]);
        assert_eq!(own, 7);
        // Everything complete: nothing to wait for.
        let (others, own) = plan_waits(&need, 0, 0, &need);
        assert!(others.is_empty() && own == 0);
    }

    #[test]
    fn distinct_queues_first_then_least_used() {
        // The default stream holds queue 0.
        assert_eq!(pick_queue(&[1, 0, 0]), 1);
        assert_eq!(pick_queue(&[1, 1, 0]), 2);
        assert_eq!(pick_queue(&[1, 1, 1]), 0);
        assert_eq!(pick_queue(&[2, 1, 1]), 1);
        assert_eq!(pick_queue(&[2, 2, 1]), 2);
        // A freed queue is reused before sharing.
        assert_eq!(pick_queue(&[1, 0, 1]), 1);
        // One queue (lavapipe): everything shares it.
        assert_eq!(pick_queue(&[5]), 0);
        assert_eq!(pick_queue(&[]), 0);
    }
}
