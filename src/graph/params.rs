//! Per-launch parameters: a value at a fixed device address that a graph's
//! kernels read, changed between launches, snapshotted by each launch.
//!
//! How each launch keeps the value it was launched with: a [`Params`] owns
//! a small device buffer at a fixed address (what kernels bind, as a
//! uniform or storage buffer) and a host-visible ring of slots, each with a
//! command buffer recorded once at creation that copies the slot into the
//! fixed buffer and then makes the copy visible to compute and transfer
//! work. At launch, the current value is written into the next slot and
//! that slot's copy is submitted in the same submission as the graph, in
//! front of it. Launches that bind one `Params` are ordered, on whatever
//! streams they run (each waits on the GPU for the one before: the graph's
//! own previous launch, and, since the copy writes the fixed buffer, any
//! earlier launch of another graph that uses it), so the fixed buffer holds
//! exactly that launch's value while its commands run, and `set` never
//! touches memory the GPU reads.
//! A slot is written again only after the launch that used it completed: a
//! launch that finds its slot still in flight waits for it on the CPU, so at
//! most [`Params::slots`] launches that use one `Params` are in flight.

use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use ash::vk;
use bytemuck::Pod;

use crate::barrier::Masks;
use crate::buffer::{sealed, BufView, Buffer, BufferInner, GpuBuf};
use crate::device::{Device, DeviceInner};
use crate::error::{Error, Result};
use crate::memory::Memory;
use crate::reclaim::UseMark;
use crate::recorder::{cmd_barrier, Recorder};

/// Slots of a ring made by [`Device::params`].
pub const DEFAULT_PARAM_SLOTS: usize = 1024;
/// The most slots a ring may have.
pub const MAX_PARAM_SLOTS: usize = 65536;

/// Every live `Params`, by the address of its fixed buffer's shared state,
/// so a finished recording finds the ones its commands bind. Entries are
/// removed when their `ParamsCore` drops (which keeps the address alive
/// until then).
static REGISTRY: Mutex<Vec<(usize, Weak<ParamsCore>)>> = Mutex::new(Vec::new());

/// The ring's bookkeeping.
#[derive(Debug)]
pub(crate) struct Slots {
    /// The value the next launch snapshots.
    value: Vec<u8>,
    /// The slot the next launch uses.
    next: usize,
    /// Per slot, the queue slot and timeline value of the last launch that
    /// used it (value 0: none).
    busy_until: Vec<(usize, u64)>,
}

impl Slots {
    fn new(value: &[u8], slots: usize) -> Self {
        Slots {
            value: value.to_vec(),
            next: 0,
            busy_until: vec![(0, 0); slots],
        }
    }

    /// The slot the next launch uses, and the (queue slot, timeline value)
    /// that must complete before the host may write it (`None`: free now,
    /// by `completed`, the value the host saw complete on a queue slot).
    fn claim(&self, completed: impl Fn(usize) -> u64) -> (usize, Option<(usize, u64)>) {
        let slot = self.next;
        let (q, v) = self.busy_until[slot];
        (slot, (v > completed(q)).then_some((q, v)))
    }

    /// Records that `slot` is read by the launch completing at `value` on
    /// queue slot `queue`.
    fn commit(&mut self, slot: usize, queue: usize, value: u64) {
        self.busy_until[slot] = (queue, value);
        self.next = (slot + 1) % self.busy_until.len();
    }
}

/// The shared state of a [`Params`], held by the handle and every graph
/// that binds it.
pub(crate) struct ParamsCore {
    dev: Arc<DeviceInner>,
    /// What kernels bind.
    pub(crate) fixed: Arc<BufferInner>,
    ring: Arc<BufferInner>,
    ring_ptr: NonNull<u8>,
    size: usize,
    stride: usize,
    /// Per slot, the recorded copy slot → fixed.
    copies: Vec<vk::CommandBuffer>,
    rec: Option<Recorder>,
    state: Mutex<Slots>,
}

// SAFETY: `ring_ptr` is the ring's persistent mapping; it is written only
// under `state`'s lock, into a slot no submitted work still reads.
unsafe impl Send for ParamsCore {}
// SAFETY: as above.
unsafe impl Sync for ParamsCore {}

/// One launch's claim on a slot: the lock is held until the launch is
/// submitted, so launches from several threads take slots in queue order.
pub(crate) struct Staged<'a> {
    core: &'a ParamsCore,
    guard: MutexGuard<'a, Slots>,
    slot: usize,
    /// The copy to submit in front of the graph.
    pub cb: vk::CommandBuffer,
}

impl Staged<'_> {
    /// The launch was submitted on queue slot `queue` and completes at
    /// `value` (the copy reads the ring there).
    pub(crate) fn commit(mut self, queue: usize, value: u64) {
        self.guard.commit(self.slot, queue, value);
        self.core.ring.last_use.used_on(queue, value, false);
    }
}

impl ParamsCore {
    /// Writes the current value into the next slot (after waiting for the
    /// slot's previous launch, if still in flight) and returns the claim.
    pub(crate) fn stage(&self) -> Result<Staged<'_>> {
        let d = &*self.dev;
        let guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let done = |q: usize| d.queue(q).map_or(u64::MAX, |q| q.completed_cached());
        let (slot, wait) = guard.claim(done);
        if let Some((q, v)) = wait {
            if let Some(q) = d.queue(q) {
                q.wait(&d.raw, &d.sticky, v, None, d.options.wait_spin)?;
            }
        }
        self.write_slot(slot, &guard.value);
        Ok(Staged {
            core: self,
            guard,
            slot,
            cb: self.copies[slot],
        })
    }

    /// Writes every slot no launch still reads with the current value,
    /// faulting in the ring's pages ahead of the first launches.
    pub(crate) fn touch(&self) {
        let d = &*self.dev;
        let guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        for slot in 0..guard.busy_until.len() {
            let (q, v) = guard.busy_until[slot];
            if d.queue(q).map_or(true, |q| v <= q.completed_cached()) {
                self.write_slot(slot, &guard.value);
            }
        }
    }

    fn write_slot(&self, slot: usize, value: &[u8]) {
        debug_assert_eq!(value.len(), self.size);
        // SAFETY: the slot lies inside the mapped ring (slots × stride bytes,
        // stride ≥ size); the caller holds the lock and no submitted work
        // still reads the slot (its last launch completed); the memory is
        // host-coherent, and the submission that reads it comes after.
        unsafe {
            std::ptr::copy_nonoverlapping(
                value.as_ptr(),
                self.ring_ptr.as_ptr().add(slot * self.stride),
                self.size,
            )
        };
    }

    /// The live `ParamsCore` whose fixed buffer is `b`, if any.
    pub(crate) fn find(b: &Arc<BufferInner>) -> Option<Arc<ParamsCore>> {
        let key = Arc::as_ptr(b) as usize;
        let reg = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
        reg.iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, w)| w.upgrade())
    }
}

impl Drop for ParamsCore {
    fn drop(&mut self) {
        let key = Arc::as_ptr(&self.fixed) as usize;
        REGISTRY
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(k, _)| *k != key);
        // The copies are pending until the last launch that used the ring.
        if let Some(rec) = self.rec.take() {
            self.dev
                .compute_recorders()
                .retire(self.ring.last_use.mark(), rec);
        }
    }
}

/// A per-launch parameter of type `T` for graphs: a value at a fixed device
/// address that kernels bind like a buffer (uniform or storage), changed
/// with [`Params::set`] between launches. Each launch of a graph that binds
/// it reads the value current when [`crate::Graph::launch`] was called,
/// whatever `set` does while it is in flight (see the module notes for how).
/// A batch that binds it outside a graph reads the value of the latest
/// launch whose copy has run (the initial value before any).
/// `Send + Sync`; clones share the value.
pub struct Params<T: Pod> {
    core: Arc<ParamsCore>,
    fixed: Buffer<T>,
}

impl<T: Pod> Clone for Params<T> {
    fn clone(&self) -> Self {
        Params {
            core: self.core.clone(),
            fixed: self.fixed.clone(),
        }
    }
}

impl<T: Pod> std::fmt::Debug for Params<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Params")
            .field("type", &std::any::type_name::<T>())
            .field("slots", &self.slots())
            .finish()
    }
}

impl Device {
    /// A per-launch parameter holding `value`, with a ring of
    /// [`DEFAULT_PARAM_SLOTS`] slots.
    pub fn params<T: Pod>(&self, value: T) -> Result<Params<T>> {
        self.params_with_slots(value, DEFAULT_PARAM_SLOTS)
    }

    /// A per-launch parameter holding `value`, with a ring of `slots` slots
    /// (at most that many launches binding it in flight; 1..=[`MAX_PARAM_SLOTS`]).
    pub fn params_with_slots<T: Pod>(&self, value: T, slots: usize) -> Result<Params<T>> {
        if slots == 0 || slots > MAX_PARAM_SLOTS {
            return Err(Error::ParamsSlots {
                requested: slots,
                limit: MAX_PARAM_SLOTS,
            });
        }
        let size = std::mem::size_of::<T>();
        if size == 0 {
            return Err(Error::ZeroLength { what: "params" });
        }
        let stride = size.next_multiple_of(4);
        let fixed = self.upload(std::slice::from_ref(&value))?;
        let ring = self.alloc_with::<u8>(slots * stride, Memory::HostVisible)?;
        let ring_ptr = ring.inner.mapped().ok_or(Error::Unsupported {
            what: "mapped host-visible memory (the per-launch parameter ring)",
            adapter: self.inner.info.name.clone(),
        })?;
        let d = &self.inner;
        // The host writes slots from now on: any GPU zero-fill of the ring
        // must be done first.
        d.wait_mark(ring.inner.last_use.mark(), None)?;
        let mut rec =
            Recorder::for_graph(&d.raw, d.compute_queue().family, &d.sticky, &d.counters)?;
        let copies =
            match record_copies(d, &mut rec, &ring.inner, &fixed.inner, size, stride, slots) {
                Ok(c) => c,
                Err(e) => {
                    // Nothing was submitted: the pool takes it back at once.
                    d.compute_recorders().retire(UseMark::default(), rec);
                    return Err(e);
                }
            };
        let core = Arc::new(ParamsCore {
            dev: d.clone(),
            fixed: fixed.inner.clone(),
            ring: ring.inner.clone(),
            ring_ptr,
            size,
            stride,
            copies,
            rec: Some(rec),
            state: Mutex::new(Slots::new(bytemuck::bytes_of(&value), slots)),
        });
        REGISTRY
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((Arc::as_ptr(&core.fixed) as usize, Arc::downgrade(&core)));
        Ok(Params { core, fixed })
    }
}

/// Records, per slot, copy slot → fixed then a barrier making it visible to
/// compute reads and writes and to transfers.
fn record_copies(
    d: &DeviceInner,
    rec: &mut Recorder,
    ring: &BufferInner,
    fixed: &BufferInner,
    size: usize,
    stride: usize,
    slots: usize,
) -> Result<Vec<vk::CommandBuffer>> {
    type S = vk::PipelineStageFlags;
    type A = vk::AccessFlags;
    let masks = Masks {
        src_stage: S::TRANSFER,
        dst_stage: S::COMPUTE_SHADER | S::TRANSFER,
        src_access: A::TRANSFER_WRITE,
        dst_access: A::SHADER_READ
            | A::UNIFORM_READ
            | A::SHADER_WRITE
            | A::TRANSFER_READ
            | A::TRANSFER_WRITE,
    };
    let mut copies = Vec::with_capacity(slots);
    for slot in 0..slots {
        let (cb, _) = rec.begin(&d.raw, &d.sticky, &d.counters)?;
        let region = vk::BufferCopy {
            src_offset: (slot * stride) as u64,
            dst_offset: 0,
            size: size as u64,
        };
        // SAFETY: `cb` is recording; both buffers are live (the core holds
        // them for as long as the copies may run) and the regions lie
        // inside them.
        unsafe { d.raw.cmd_copy_buffer(cb, ring.raw, fixed.raw, &[region]) };
        cmd_barrier(&d.raw, cb, masks);
        // SAFETY: `cb` is recording.
        unsafe { d.raw.end_command_buffer(cb) }
            .map_err(|r| d.sticky.fail("vkEndCommandBuffer", r))?;
        copies.push(cb);
    }
    Ok(copies)
}

impl<T: Pod> Params<T> {
    /// Sets the value the next launches read. Launches already made keep
    /// theirs.
    pub fn set(&self, value: T) {
        let mut s = self.core.state.lock().unwrap_or_else(|p| p.into_inner());
        s.value.copy_from_slice(bytemuck::bytes_of(&value));
    }

    /// The value the next launch will read.
    pub fn get(&self) -> T {
        let s = self.core.state.lock().unwrap_or_else(|p| p.into_inner());
        bytemuck::pod_read_unaligned(&s.value)
    }

    /// Slots in the ring: the most launches binding this value in flight.
    pub fn slots(&self) -> usize {
        self.core.copies.len()
    }

    /// The fixed device buffer kernels read (bind the `Params` itself, or
    /// this).
    pub fn buffer(&self) -> &Buffer<T> {
        &self.fixed
    }
}

impl<T: Pod> sealed::Sealed for Params<T> {}

impl<T: Pod> GpuBuf for Params<T> {
    fn byte_size(&self) -> u64 {
        self.fixed.byte_size()
    }
    fn byte_offset(&self) -> u64 {
        0
    }
    fn view(&self) -> BufView<'_> {
        self.fixed.view()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_cycle_and_wait_only_for_unfinished_launches() {
        let mut s = Slots::new(&[1, 2, 3, 4], 3);
        let at = |v: u64| move |_: usize| v;
        assert_eq!(s.claim(at(0)), (0, None));
        s.commit(0, 0, 10);
        assert_eq!(s.claim(at(0)), (1, None));
        s.commit(1, 0, 11);
        s.commit(2, 0, 12);
        // Back at slot 0, still read by the launch completing at 10.
        assert_eq!(s.claim(at(9)), (0, Some((0, 10))));
        assert_eq!(s.claim(at(10)), (0, None));
        s.commit(0, 0, 13);
        assert_eq!(s.claim(at(10)), (1, Some((0, 11))));
    }

    #[test]
    fn slots_wait_on_the_queue_of_their_last_launch() {
        let mut s = Slots::new(&[0; 4], 2);
        s.commit(0, 3, 5);
        s.commit(1, 0, 40);
        // Slot 0 was last read on queue slot 3: only that queue's progress counts.
        let done = |q: usize| if q == 3 { 4 } else { 100 };
        assert_eq!(s.claim(done), (0, Some((3, 5))));
        let done = |q: usize| if q == 3 { 5 } else { 0 };
        assert_eq!(s.claim(done), (0, None));
    }
}
