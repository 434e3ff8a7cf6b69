//! Streams: ordered queues of batches that may run concurrently with each
//! other.
//!
//! A stream records on one queue of the compute family. Each batch's first
//! submission waits (on the GPU, through the queue's timeline semaphore) for
//! the last submission of the stream before it; nothing else orders it,
//! except tickets and events it names ([`Batch::wait_for`],
//! [`Batch::wait_event`]) and the buffer rule ([`crate#ordering`]).
//!
//! A batch is one unit of the stream's order whatever its chunking: every
//! submission on the stream holds the stream's order lock, and while an
//! earlier batch is open (it submitted chunks as it grew), a later batch's
//! submissions are held back and reach the queue when that batch ends
//! (`queue/stream_state/order.rs` has the rule, `batch/held.rs` the held
//! batch). A graph launch waits on the host for the open batch instead.
//! A stream with no open batch submits as it always did, plus one
//! uncontended lock.
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

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ash::vk;

use crate::device::{Device, DeviceInner};
use crate::error::Result;
use crate::queue::{pick_queue, plan_waits, Order, SemaphoreWait, StreamState, WaitList};
use crate::reclaim::UseMark;
use crate::ticket::Ticket;

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
///
/// `whole`: a whole batch submitted without the stream's order lock; it
/// reaches the queue only while no batch of the stream is open
/// ([`StreamState::busy`], read under the queue's lock), else nothing is
/// submitted and the value is 0.
#[allow(clippy::too_many_arguments)]
pub(crate) fn submit_on(
    d: &DeviceInner,
    stream: &StreamState,
    cmds: &[vk::CommandBuffer],
    need: UseMark,
    events: impl Iterator<Item = (vk::Semaphore, u64)>,
    count: usize,
    first_value: u64,
    whole: bool,
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
        gate: whole.then_some(&stream.busy),
    };
    let q = d.queue(slot).unwrap_or(d.compute_queue());
    q.submit_ordered(&d.raw, &d.sticky, cmds, waits.iter(), waits.len(), order)
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
            .field("id", &self.state.id)
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
        let users = d.stream_users();
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
            state: self.inner.default_stream().clone(),
        }
    }

    /// How many queues of the compute family streams spread over (1 on
    /// lavapipe).
    pub fn stream_queue_count(&self) -> usize {
        self.inner.stream_users().len()
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
    /// once when nothing was), batches held back behind an open batch
    /// included once they ended (were submitted or dropped).
    pub fn ticket(&self) -> Ticket {
        let order = self.state.order();
        let last = self.state.last.load(Ordering::Acquire);
        let held = order.pending();
        drop(order);
        Ticket::on_stream(
            self.dev.clone(),
            &self.state,
            UseMark::at(self.state.slot, last),
            held,
        )
    }

    /// The stream's number, unique in the process (error messages name
    /// streams by it, e.g. [`crate::Error::BatchHeldOpen`]).
    pub fn id(&self) -> u64 {
        self.state.id
    }

    /// Blocks until everything submitted on this stream so far completed
    /// ([`crate::Error::BatchHeldOpen`] when a batch held back behind an
    /// open batch this thread holds is part of it).
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
