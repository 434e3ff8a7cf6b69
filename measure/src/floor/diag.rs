//! Floor variants that record the way vkcompute does, so a gap between
//! vkcompute and the floor can be split into what the recording strategy
//! costs the driver and what vkcompute adds (`measure/examples/gpu_report`, part
//! `diag`).
//!
//! [`FloorDiag`] owns a command pool created without
//! `RESET_COMMAND_BUFFER` (recycled whole by `vkResetCommandPool`, as
//! vkcompute recycles its command buffers) with one command buffer, and a
//! one-set descriptor pool; it uses the floor's device, queue, timeline,
//! pipeline and buffer.

use std::rc::Rc;
use std::time::{Duration, Instant};

use ash::vk;

use super::{push, Floor, ELEMENTS};

/// A command pool recycled by `vkResetCommandPool` and a one-set
/// descriptor pool on a [`Floor`]'s device.
///
/// It holds a clone of the device's function table and destroys its
/// objects on drop. Drop it before its `Floor`: the `Floor` counts its live
/// `FloorDiag`s and panics (leaking the device rather than destroying it
/// under them) if dropped first.
pub struct FloorDiag {
    dev: ash::Device,
    pool: vk::CommandPool,
    cb: vk::CommandBuffer,
    desc_pool: vk::DescriptorPool,
    /// Keeps the floor's count of live diags up while this exists.
    _live: Rc<()>,
}

impl FloorDiag {
    /// Creates the pools (and the command buffer) on `fl`'s device.
    pub fn new(fl: &Floor) -> FloorDiag {
        let d = &fl.dev;
        let pool_info = vk::CommandPoolCreateInfo::default().queue_family_index(fl.family);
        let ty = vk::DescriptorType::STORAGE_BUFFER;
        let sizes = [vk::DescriptorPoolSize::default().ty(ty).descriptor_count(1)];
        let dp_info = vk::DescriptorPoolCreateInfo::default()
            .max_sets(1)
            .pool_sizes(&sizes);
        // SAFETY: `fl.dev` is live; the create infos point at live locals;
        // the command buffer comes from the pool just created.
        let (pool, cb, desc_pool) = unsafe {
            let pool = ok!(d.create_command_pool(&pool_info, None));
            let alloc = vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .command_buffer_count(1);
            let cb = ok!(d.allocate_command_buffers(&alloc))[0];
            (pool, cb, ok!(d.create_descriptor_pool(&dp_info, None)))
        };
        FloorDiag {
            dev: fl.dev.clone(),
            pool,
            cb,
            desc_pool,
            _live: Rc::clone(&fl.diags),
        }
    }

    fn check(&self, fl: &Floor) {
        assert!(
            self.dev.handle() == fl.dev.handle(),
            "floor: FloorDiag used with another Floor than its own"
        );
    }

    /// Resets the command pool and begins the command buffer (one-time
    /// submit) with the pipeline bound.
    fn begin(&self, fl: &Floor) {
        let (d, cb) = (&self.dev, self.cb);
        let usage = vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT;
        let info = vk::CommandBufferBeginInfo::default().flags(usage);
        let bind = vk::PipelineBindPoint::COMPUTE;
        // SAFETY: `cb` is not pending (every submission of it is waited for
        // before this returns to the caller), so its pool may be reset; the
        // reset leaves it initial, ready to begin; the pipeline is live.
        unsafe {
            ok!(d.reset_command_pool(self.pool, vk::CommandPoolResetFlags::empty()));
            ok!(d.begin_command_buffer(cb, &info));
            d.cmd_bind_pipeline(cb, bind, fl.pipeline);
        }
    }

    /// Binds `set` at set 0 of the floor's pipeline layout.
    fn bind_set(&self, fl: &Floor, set: vk::DescriptorSet) {
        let bind = vk::PipelineBindPoint::COMPUTE;
        // SAFETY: `self.cb` is recording; `set` is live, written, and of the
        // layout's set 0 layout.
        unsafe {
            let d = &self.dev;
            d.cmd_bind_descriptor_sets(self.cb, bind, fl.layout, 0, &[set], &[])
        };
    }

    /// Resets the descriptor pool and allocates and writes a set naming the
    /// floor's buffer, as a recorder with no cached set does.
    fn fresh_set(&self, fl: &Floor) -> vk::DescriptorSet {
        let d = &self.dev;
        let layouts = [fl.set_layout];
        let info = vk::DescriptorSetAllocateInfo::default()
            .descriptor_pool(self.desc_pool)
            .set_layouts(&layouts);
        let buffers = [vk::DescriptorBufferInfo::default()
            .buffer(fl.buffer)
            .range((ELEMENTS * 4) as vk::DeviceSize)];
        // SAFETY: no command buffer using the pool's previous set is pending
        // or recording (the one that did was waited for, and its pool reset
        // in `begin`); the pool holds one set of this layout; the write names
        // the live buffer within its size.
        unsafe {
            ok!(d.reset_descriptor_pool(self.desc_pool, vk::DescriptorPoolResetFlags::empty()));
            let set = ok!(d.allocate_descriptor_sets(&info))[0];
            let write = vk::WriteDescriptorSet::default()
                .dst_set(set)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .buffer_info(&buffers);
            d.update_descriptor_sets(&[write], &[]);
            set
        }
    }

    /// As [`Floor::record_cost`] (CPU time of `n` × push constants +
    /// dispatch [+ barrier], pipeline and set already bound; not submitted),
    /// but the command buffer is recycled by `vkResetCommandPool` on a pool
    /// without `RESET_COMMAND_BUFFER`, as vkcompute recycles its own, where
    /// the floor's is reset alone by `vkResetCommandBuffer`. The reset,
    /// begin and binds are not timed.
    pub fn record_cost_pool_reset(&mut self, fl: &mut Floor, n: usize, barrier: bool) -> Duration {
        self.check(fl);
        let (cb, pc) = (self.cb, push(1.0, 1.0));
        self.begin(fl);
        self.bind_set(fl, fl.set);
        let start = Instant::now();
        for _ in 0..n {
            fl.step(cb, &pc, barrier);
        }
        let t = start.elapsed();
        fl.end(cb);
        t
    }

    /// Wall time of a round trip that records its command buffer each
    /// time, the driver's floor for what vkcompute does: reset the command
    /// pool, begin (one-time submit), bind the pipeline and a set (with
    /// `fresh_set`, one reset-allocated-written in the descriptor pool right
    /// then; else the floor's pre-written set), push constants (a = 1,
    /// b = 0: the buffer is left as is), dispatch, the host barrier, end,
    /// submit signalling the floor's timeline, spin on its counter. The
    /// commands are those of the floor's pre-recorded round trip
    /// ([`Floor::round_trip`]).
    pub fn round_trip_rerecord(&mut self, fl: &mut Floor, fresh_set: bool) -> Duration {
        self.check(fl);
        let (cb, pc) = (self.cb, push(1.0, 0.0));
        let start = Instant::now();
        self.begin(fl);
        let set = if fresh_set {
            self.fresh_set(fl)
        } else {
            fl.set
        };
        self.bind_set(fl, set);
        fl.step(cb, &pc, false);
        fl.host_barrier(cb);
        fl.end(cb);
        let v = fl.submit(cb);
        fl.wait_spin(v);
        start.elapsed()
    }
}

impl Drop for FloorDiag {
    fn drop(&mut self) {
        let d = &self.dev;
        // SAFETY: the floor's device is still live (its `Drop` refuses to
        // destroy it while `_live` is held); after waiting for idle nothing
        // of ours is in use; freeing the pools frees their command buffer
        // and set.
        unsafe {
            let _ = d.device_wait_idle();
            d.destroy_descriptor_pool(self.desc_pool, None);
            d.destroy_command_pool(self.pool, None);
        }
    }
}
