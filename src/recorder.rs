//! Recorders: the reusable Vulkan objects one batch records into.
//!
//! A recorder is a command pool with the command buffers allocated from it,
//! plus, on the pooled-descriptor fallback, descriptor pools. A batch takes a
//! recorder, records one or more command buffers (one per submitted chunk),
//! and retires it with the timeline value of its last submission. Once that
//! value completes the recorder is reset (one `vkResetCommandPool`, one
//! `vkResetDescriptorPool` per pool) and handed to the next batch. So after
//! warm-up no batch creates a Vulkan object.

use std::sync::Mutex;

use ash::vk;

use crate::barrier::Masks;
use crate::error::{Result, Sticky};
use crate::reclaim::{Deferred, UseMark};
use crate::stats::{Counter, Counters};

/// Descriptor sets per fallback descriptor pool.
const SETS_PER_POOL: u32 = 256;
/// Buffer descriptors per fallback pool, per type.
const DESCRIPTORS_PER_POOL: u32 = SETS_PER_POOL * 8;
/// Recorders kept for reuse per queue; more are destroyed when returned.
const MAX_FREE: usize = 32;

/// Records one pipeline barrier with a single global memory barrier.
pub(crate) fn cmd_barrier(device: &ash::Device, cb: vk::CommandBuffer, m: Masks) {
    let mb = [vk::MemoryBarrier::default()
        .src_access_mask(m.src_access)
        .dst_access_mask(m.dst_access)];
    // SAFETY: callers pass a command buffer in the recording state, and masks
    // naming only stages its queue supports (see `crate::barrier`).
    unsafe {
        device.cmd_pipeline_barrier(
            cb,
            m.src_stage,
            m.dst_stage,
            vk::DependencyFlags::empty(),
            &mb,
            &[],
            &[],
        )
    };
}

/// One command pool and what was allocated from it.
pub(crate) struct Recorder {
    pool: vk::CommandPool,
    buffers: Vec<vk::CommandBuffer>,
    next: usize,
    desc_pools: Vec<vk::DescriptorPool>,
    desc_current: usize,
    dirty: bool,
    /// A command buffer already begun ahead of use (see `RecorderPool::prime`),
    /// and the compute pipeline bound in it then (null: none).
    primed: Option<(vk::CommandBuffer, vk::Pipeline)>,
    /// Memory a batch hands back with the recorder (its emptied list of
    /// the buffers it kept alive) for the next batch on this recorder to
    /// reuse; the recorder never looks inside.
    pub(crate) spare: Option<Box<dyn std::any::Any + Send + Sync>>,
    /// Owned by a graph (`crate::graph`): command buffers are begun for
    /// reuse (no ONE_TIME_SUBMIT, SIMULTANEOUS_USE) and descriptor sets come
    /// from this recorder's pools, never the device's set cache. Cleared by
    /// the reset that follows the graph's retirement.
    graph: bool,
}

impl Recorder {
    fn new(
        device: &ash::Device,
        family: u32,
        sticky: &Sticky,
        counters: &Counters,
    ) -> Result<Self> {
        // One vkResetCommandPool recycles every buffer of a recorder; on the
        // H200 recording after it costs the same as after per-buffer resets
        // (docs/PERF.md, run j).
        let info = vk::CommandPoolCreateInfo::default().queue_family_index(family);
        // SAFETY: `device` is live; `family` is one of its queue families.
        let pool = unsafe { device.create_command_pool(&info, None) }
            .map_err(|r| sticky.fail("vkCreateCommandPool", r))?;
        counters.add(Counter::CommandPools, 1);
        Ok(Recorder {
            pool,
            buffers: Vec::new(),
            next: 0,
            desc_pools: Vec::new(),
            desc_current: 0,
            dirty: false,
            primed: None,
            spare: None,
            graph: false,
        })
    }

    /// A new recorder owned by a graph (see the `graph` field); it joins the
    /// queue's pool only when retired there, and its first reset makes it an
    /// ordinary recorder.
    pub(crate) fn for_graph(
        device: &ash::Device,
        family: u32,
        sticky: &Sticky,
        counters: &Counters,
    ) -> Result<Self> {
        let mut r = Recorder::new(device, family, sticky, counters)?;
        r.graph = true;
        Ok(r)
    }

    /// Whether a graph owns this recorder.
    pub(crate) fn is_graph(&self) -> bool {
        self.graph
    }

    /// Resets everything recorded, keeping the objects.
    fn reset(&mut self, device: &ash::Device, sticky: &Sticky) -> Result<()> {
        self.graph = false;
        if !self.dirty {
            return Ok(());
        }
        // SAFETY: the caller guarantees no submission using these command
        // buffers or descriptor sets is pending (the recorder's mark passed).
        unsafe {
            device
                .reset_command_pool(self.pool, vk::CommandPoolResetFlags::empty())
                .map_err(|r| sticky.fail("vkResetCommandPool", r))?;
            for &p in &self.desc_pools {
                device
                    .reset_descriptor_pool(p, vk::DescriptorPoolResetFlags::empty())
                    .map_err(|r| sticky.fail("vkResetDescriptorPool", r))?;
            }
        }
        self.next = 0;
        self.desc_current = 0;
        self.dirty = false;
        self.primed = None;
        Ok(())
    }

    /// The next command buffer, begun for one-time submission (for
    /// simultaneous reuse in a graph's recorder), with the
    /// compute pipeline already bound in it (null: none).
    pub(crate) fn begin(
        &mut self,
        device: &ash::Device,
        sticky: &Sticky,
        counters: &Counters,
    ) -> Result<(vk::CommandBuffer, vk::Pipeline)> {
        if let Some(primed) = self.primed.take() {
            return Ok(primed);
        }
        self.dirty = true;
        if self.next == self.buffers.len() {
            let info = vk::CommandBufferAllocateInfo::default()
                .command_pool(self.pool)
                .level(vk::CommandBufferLevel::PRIMARY)
                .command_buffer_count(1);
            // SAFETY: the pool is ours and externally synchronised by `&mut self`.
            let cb = unsafe { device.allocate_command_buffers(&info) }
                .map_err(|r| sticky.fail("vkAllocateCommandBuffers", r))?;
            counters.add(Counter::CommandBuffers, 1);
            self.buffers.extend(cb);
        }
        let cb = self.buffers[self.next];
        self.next += 1;
        let flags = if self.graph {
            vk::CommandBufferUsageFlags::SIMULTANEOUS_USE
        } else {
            vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT
        };
        let begin = vk::CommandBufferBeginInfo::default().flags(flags);
        // SAFETY: `cb` is in the initial state (fresh or after pool reset).
        unsafe { device.begin_command_buffer(cb, &begin) }
            .map_err(|r| sticky.fail("vkBeginCommandBuffer", r))?;
        Ok((cb, vk::Pipeline::null()))
    }

    /// A descriptor set of `layout` from the fallback pools.
    pub(crate) fn allocate_set(
        &mut self,
        device: &ash::Device,
        sticky: &Sticky,
        counters: &Counters,
        layout: vk::DescriptorSetLayout,
    ) -> Result<vk::DescriptorSet> {
        self.dirty = true;
        loop {
            if self.desc_current == self.desc_pools.len() {
                let sizes = [
                    vk::DescriptorPoolSize {
                        ty: vk::DescriptorType::STORAGE_BUFFER,
                        descriptor_count: DESCRIPTORS_PER_POOL,
                    },
                    vk::DescriptorPoolSize {
                        ty: vk::DescriptorType::UNIFORM_BUFFER,
                        descriptor_count: DESCRIPTORS_PER_POOL,
                    },
                ];
                let info = vk::DescriptorPoolCreateInfo::default()
                    .max_sets(SETS_PER_POOL)
                    .pool_sizes(&sizes);
                // SAFETY: plain creation on a live device.
                let p = unsafe { device.create_descriptor_pool(&info, None) }
                    .map_err(|r| sticky.fail("vkCreateDescriptorPool", r))?;
                counters.add(Counter::DescriptorPools, 1);
                self.desc_pools.push(p);
            }
            // SAFETY: the pool is ours (externally synchronised by `&mut self`).
            match unsafe { allocate_one_set(device, self.desc_pools[self.desc_current], layout) } {
                Ok(set) => return Ok(set),
                Err(vk::Result::ERROR_OUT_OF_POOL_MEMORY | vk::Result::ERROR_FRAGMENTED_POOL) => {
                    self.desc_current += 1;
                }
                Err(r) => return Err(sticky.fail("vkAllocateDescriptorSets", r)),
            }
        }
    }

    /// Destroys the pool and everything from it.
    ///
    /// # Safety
    /// Nothing recorded here may be pending on a queue.
    unsafe fn destroy(self, device: &ash::Device, counters: &Counters) {
        // SAFETY: guaranteed by the caller; freeing the pool frees its buffers.
        unsafe {
            for p in &self.desc_pools {
                device.destroy_descriptor_pool(*p, None);
            }
            device.destroy_command_pool(self.pool, None);
        }
        counters.add(Counter::DescriptorPools, -(self.desc_pools.len() as i64));
        counters.add(Counter::CommandBuffers, -(self.buffers.len() as i64));
        counters.add(Counter::CommandPools, -1);
    }
}

/// Recorders of one queue family: free ones, and ones whose work is in flight.
#[derive(Default)]
pub(crate) struct RecorderPool {
    family: u32,
    free: Mutex<Vec<Recorder>>,
    busy: Mutex<Deferred<Recorder>>,
}

impl RecorderPool {
    pub(crate) fn new(family: u32) -> Self {
        RecorderPool {
            family,
            ..Default::default()
        }
    }

    /// A ready recorder: one readied ahead, else the one retired last if its
    /// work completed (by `cached`), else a free one, else any whose work
    /// completed by `poll` (which asks the driver), else a new one.
    pub(crate) fn take(
        &self,
        device: &ash::Device,
        sticky: &Sticky,
        counters: &Counters,
        cached: UseMark,
        poll: impl FnOnce() -> Result<UseMark>,
    ) -> Result<Recorder> {
        // Preference: a recorder readied ahead of time; else the one retired
        // last, if its work is done (its command memory is the warmest in
        // the CPU's caches); else any free one; else any whose work the
        // driver reports done; else a new one.
        let primed = {
            let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
            free.iter()
                .rposition(|r| r.primed.is_some())
                .map(|i| free.swap_remove(i))
        };
        // One lock at a time: `prime` takes the free list's lock, then the
        // busy list's.
        let warm = primed.or_else(|| {
            let last = self
                .busy
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take_last_ready(cached);
            last.or_else(|| self.free.lock().unwrap_or_else(|p| p.into_inner()).pop())
        });
        let mut rec = match warm {
            Some(r) => r,
            None => {
                let mut busy = self.busy.lock().unwrap_or_else(|p| p.into_inner());
                let ready = if busy.is_empty() {
                    None
                } else {
                    busy.take_one_ready(poll()?)
                };
                drop(busy);
                match ready {
                    Some(r) => r,
                    None => Recorder::new(device, self.family, sticky, counters)?,
                }
            }
        };
        if rec.primed.is_some() {
            return Ok(rec);
        }
        if let Err(e) = rec.reset(device, sticky) {
            // SAFETY: reset failed only after its mark passed; nothing is pending.
            unsafe { rec.destroy(device, counters) };
            return Err(e);
        }
        Ok(rec)
    }

    /// Readies a recorder for the next batch ahead of time: reset, with its
    /// first command buffer already begun and `pipeline` (the compute
    /// pipeline most recently bound on this queue; null for none) bound in
    /// it, at the end of the free list (where `take` looks first). Called
    /// while a wait spins, so the next batch on this queue skips the pool
    /// reset, `vkBeginCommandBuffer` and, when it starts with the same
    /// kernel, the pipeline bind. A pipeline bound and never dispatched is
    /// harmless, and pipelines live until the device drops. Does nothing if
    /// a primed recorder is already waiting.
    pub(crate) fn prime(
        &self,
        device: &ash::Device,
        sticky: &Sticky,
        counters: &Counters,
        cached: UseMark,
        pipeline: vk::Pipeline,
    ) {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        if free.iter().any(|r| r.primed.is_some()) {
            return;
        }
        let rec = match free.pop() {
            Some(r) => Some(r),
            None => self
                .busy
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take_one_ready(cached),
        };
        let rec = match rec {
            Some(r) => Ok(r),
            None if free.len() < MAX_FREE => Recorder::new(device, self.family, sticky, counters),
            None => return,
        };
        let Ok(mut rec) = rec else { return };
        let primed = rec
            .reset(device, sticky)
            .and_then(|()| rec.begin(device, sticky, counters));
        match primed {
            Ok((cb, _)) => {
                if pipeline != vk::Pipeline::null() {
                    // SAFETY: `cb` is recording; the pipeline is a live
                    // compute pipeline of this device.
                    unsafe {
                        device.cmd_bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, pipeline)
                    };
                }
                rec.primed = Some((cb, pipeline));
                free.push(rec);
            }
            // SAFETY: the recorder's work completed (it was free or its mark
            // passed); nothing recorded in it is pending.
            Err(_) => unsafe { rec.destroy(device, counters) },
        }
    }

    /// Returns a recorder whose work completes at `mark`.
    pub(crate) fn retire(&self, mark: UseMark, rec: Recorder) {
        self.busy
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(mark, rec);
    }

    /// Moves recorders whose work completed to the free list, destroying any
    /// beyond the free-list cap.
    pub(crate) fn maintain(&self, device: &ash::Device, counters: &Counters, completed: UseMark) {
        // The first ready one apart: a list is allocated only for more
        // (one recorder a round trip comes back without a heap allocation).
        let (first, more) = {
            let mut busy = self.busy.lock().unwrap_or_else(|p| p.into_inner());
            let Some(first) = busy.take_one_ready(completed) else {
                return;
            };
            (first, busy.take_ready(completed))
        };
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        for r in std::iter::once(first).chain(more) {
            if free.len() < MAX_FREE {
                free.push(r);
            } else {
                // SAFETY: its mark passed, so nothing recorded in it is pending.
                unsafe { r.destroy(device, counters) };
            }
        }
    }

    /// Number of recorders parked behind in-flight work.
    pub(crate) fn busy_len(&self) -> usize {
        self.busy.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Destroys the free recorders.
    pub(crate) fn trim(&self, device: &ash::Device, counters: &Counters) {
        let free = std::mem::take(&mut *self.free.lock().unwrap_or_else(|p| p.into_inner()));
        for r in free {
            // SAFETY: free recorders have nothing pending.
            unsafe { r.destroy(device, counters) };
        }
    }

    /// Destroys every recorder.
    ///
    /// # Safety
    /// The queue must be idle.
    pub(crate) unsafe fn destroy_all(&self, device: &ash::Device, counters: &Counters) {
        let busy = self
            .busy
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take_all();
        for r in busy {
            // SAFETY: the queue is idle (caller's guarantee).
            unsafe { r.destroy(device, counters) };
        }
        self.trim(device, counters);
    }
}

/// One descriptor set of `layout` from `pool`, with no heap allocation
/// (ash's `allocate_descriptor_sets` returns a `Vec`: a malloc and a free
/// per set on the path that writes a set per dispatch).
///
/// # Safety
/// `pool` and `layout` are live objects of `device`, and no other thread
/// uses `pool` during the call.
pub(crate) unsafe fn allocate_one_set(
    device: &ash::Device,
    pool: vk::DescriptorPool,
    layout: vk::DescriptorSetLayout,
) -> ash::prelude::VkResult<vk::DescriptorSet> {
    let layouts = [layout];
    let info = vk::DescriptorSetAllocateInfo::default()
        .descriptor_pool(pool)
        .set_layouts(&layouts);
    let mut set = vk::DescriptorSet::null();
    // SAFETY: guaranteed by the caller; `info` asks for exactly one set, so
    // the driver writes one handle into `set`.
    let r =
        unsafe { (device.fp_v1_0().allocate_descriptor_sets)(device.handle(), &info, &mut set) };
    r.result_with_success(set)
}
