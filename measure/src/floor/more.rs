//! Floor variants for the report's same-strategy comparisons
//! (`measure/examples/gpu_report`): a chain submitted in chunks while it is
//! recorded, as vkcompute's default batch does; recording where every
//! dispatch binds a different buffer (a descriptor set allocated, written
//! and bound per dispatch); and recording where two pipelines alternate.
//!
//! [`FloorMore`] owns a command pool (individually resettable command
//! buffers, one per chunk), `BUFFERS` buffers of `ELEMENTS` f32 in one
//! host-visible allocation, a descriptor pool of `BUFFERS` sets, and a
//! second pipeline (`x = x * a + 2b`) of the floor's layout; it uses the
//! floor's device, queue, timeline and first pipeline.

use std::rc::Rc;
use std::time::{Duration, Instant};

use ash::vk;

use super::{push, Floor, ELEMENTS, GROUPS};

/// Distinct buffers for the new-bindings workloads.
pub const BUFFERS: usize = 1000;
fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Most chunks one chained run submits.
const MAX_CHUNKS: usize = 64;

/// The second kernel: `x = x * a + 2b`, same bindings and push constants.
const KERNEL_B: &str = r#"
#version 450
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) buffer X { float x[]; };
layout(push_constant) uniform P { float a; float b; uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) x[i] = x[i] * a + 2.0 * b;
}
"#;

/// Objects of the same-strategy floor workloads on a [`Floor`]'s device.
/// Drop it before its `Floor` (which counts live helpers and refuses to
/// destroy the device under them).
pub struct FloorMore {
    dev: ash::Device,
    pool: vk::CommandPool,
    cbs: Vec<vk::CommandBuffer>,
    buffers: Vec<vk::Buffer>,
    memory: vk::DeviceMemory,
    desc_pool: vk::DescriptorPool,
    pipeline_b: vk::Pipeline,
    /// One set per buffer, written once (`independent_own_buffers`), from
    /// a pool of their own.
    own_pool: vk::DescriptorPool,
    own_sets: Vec<vk::DescriptorSet>,
    /// The buffers' memory, mapped (host-visible: the floor's type).
    mapped: *mut u8,
    stride: u64,
    _live: Rc<()>,
}

impl FloorMore {
    /// Creates everything on `fl`'s device.
    pub fn new(fl: &Floor) -> FloorMore {
        let d = &fl.dev;
        let pool_info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(fl.family)
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        let ty = vk::DescriptorType::STORAGE_BUFFER;
        let sizes = [vk::DescriptorPoolSize::default()
            .ty(ty)
            .descriptor_count(BUFFERS as u32)];
        let dp_info = vk::DescriptorPoolCreateInfo::default()
            .max_sets(BUFFERS as u32)
            .pool_sizes(&sizes);
        let bytes = (ELEMENTS * 4) as vk::DeviceSize;
        let buffer_info = vk::BufferCreateInfo::default()
            .size(bytes)
            .usage(vk::BufferUsageFlags::STORAGE_BUFFER);
        let code = vkcompute::compile_glsl(KERNEL_B).expect("floor: compile kernel B");
        let module_info = vk::ShaderModuleCreateInfo::default().code(&code);
        // SAFETY: `fl.dev` is live; every create info points at live locals;
        // the buffers are bound at offsets that are multiples of their
        // alignment inside an allocation of a type their requirements allow
        // (the floor's own buffer's type: same size and usage); the module
        // is destroyed after the pipeline is created.
        unsafe {
            let pool = ok!(d.create_command_pool(&pool_info, None));
            let alloc = vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .command_buffer_count(MAX_CHUNKS as u32);
            let cbs = ok!(d.allocate_command_buffers(&alloc));
            let desc_pool = ok!(d.create_descriptor_pool(&dp_info, None));
            let buffers: Vec<vk::Buffer> = (0..BUFFERS)
                .map(|_| ok!(d.create_buffer(&buffer_info, None)))
                .collect();
            let req = d.get_buffer_memory_requirements(buffers[0]);
            let stride = req.size.div_ceil(req.alignment) * req.alignment;
            let mem_type = fl.memory_type_index;
            assert!(
                (req.memory_type_bits >> mem_type) & 1 == 1,
                "floor: the buffers cannot use the floor's memory type"
            );
            let ainfo = vk::MemoryAllocateInfo::default()
                .allocation_size(stride * BUFFERS as u64)
                .memory_type_index(mem_type);
            let memory = ok!(d.allocate_memory(&ainfo, None));
            for (i, b) in buffers.iter().enumerate() {
                ok!(d.bind_buffer_memory(*b, memory, stride * i as u64));
            }
            // One pre-written set per buffer, for the independent rows.
            let own_pool = ok!(d.create_descriptor_pool(&dp_info, None));
            let layouts = vec![fl.set_layout; BUFFERS];
            let own_info = vk::DescriptorSetAllocateInfo::default()
                .descriptor_pool(own_pool)
                .set_layouts(&layouts);
            let own_sets = ok!(d.allocate_descriptor_sets(&own_info));
            for (set, b) in own_sets.iter().zip(&buffers) {
                let info = [vk::DescriptorBufferInfo::default().buffer(*b).range(bytes)];
                let write = vk::WriteDescriptorSet::default()
                    .dst_set(*set)
                    .descriptor_type(ty)
                    .buffer_info(&info);
                d.update_descriptor_sets(&[write], &[]);
            }
            let mapped = ok!(d.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()))
                .cast::<u8>();
            let module = ok!(d.create_shader_module(&module_info, None));
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(module)
                .name(c"main");
            let cinfo = [vk::ComputePipelineCreateInfo::default()
                .stage(stage)
                .layout(fl.layout)];
            let p = d.create_compute_pipelines(vk::PipelineCache::null(), &cinfo, None);
            let pipeline_b = ok!(p.map_err(|(_, r)| r))[0];
            d.destroy_shader_module(module, None);
            FloorMore {
                dev: d.clone(),
                pool,
                cbs,
                buffers,
                memory,
                desc_pool,
                pipeline_b,
                own_pool,
                own_sets,
                mapped,
                stride,
                _live: Rc::clone(&fl.diags),
            }
        }
    }

    fn begin(&self, fl: &Floor, cb: vk::CommandBuffer, bind_set: bool) {
        let info = vk::CommandBufferBeginInfo::default()
            .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        let bind = vk::PipelineBindPoint::COMPUTE;
        let d = &self.dev;
        // SAFETY: `cb` is not pending (every submission of it is waited for
        // before the next recording) and its pool allows implicit reset; the
        // pipeline and set are live and match the layout.
        unsafe {
            ok!(d.begin_command_buffer(cb, &info));
            d.cmd_bind_pipeline(cb, bind, fl.pipeline);
            if bind_set {
                d.cmd_bind_descriptor_sets(cb, bind, fl.layout, 0, &[fl.set], &[]);
            }
        }
    }

    /// Wall µs per dispatch of a chain of `n` = sum of `lengths` dispatches
    /// (barrier between each) recorded and submitted in chunks of
    /// `lengths` (`rules::chunk_lengths`), each submitted as soon as it is
    /// recorded, then one blocking wait: the strategy of vkcompute's
    /// default batch. Panics unless every `x[i]` went from i to i + n.
    pub fn chain_wall_chunked(&mut self, fl: &mut Floor, lengths: &[usize]) -> f64 {
        let n: usize = lengths.iter().sum();
        assert!(
            lengths.len() <= MAX_CHUNKS,
            "floor: {} chunks",
            lengths.len()
        );
        fl.reset_buffer();
        let pc = push(1.0, 1.0);
        let start = Instant::now();
        let mut done = 0;
        let mut last = 0;
        for (c, len) in lengths.iter().enumerate() {
            let cb = self.cbs[c];
            self.begin(fl, cb, true);
            for _ in 0..*len {
                done += 1;
                fl.step(cb, &pc, done < n);
            }
            if done == n {
                fl.host_barrier(cb);
            }
            fl.end(cb);
            last = fl.submit(cb);
        }
        fl.wait_blocking(last);
        let wall = start.elapsed();
        for (i, v) in fl.read().into_iter().enumerate() {
            let want = (i + n) as f32;
            assert!(
                v == want,
                "floor: chunked chain of {n}: x[{i}] = {v}, expected {want}"
            );
        }
        us(wall) / n as f64
    }

    /// CPU µs per dispatch to record `n` dispatches (n ≤ [`BUFFERS`]), each
    /// on its own buffer: a descriptor set allocated from the pool,
    /// written (`vkUpdateDescriptorSets`) and bound per dispatch, then
    /// push constants and the dispatch. The pool reset and the begin are
    /// outside the timing; nothing is submitted.
    pub fn record_new_bindings(&mut self, fl: &mut Floor, n: usize) -> f64 {
        assert!(n <= BUFFERS);
        let cb = self.cbs[0];
        let d = &self.dev;
        let pc = push(1.0, 1.0);
        // SAFETY: no set of the pool is in use (nothing recorded with them
        // is pending: the command buffer below is reset unsubmitted).
        ok!(unsafe {
            d.reset_descriptor_pool(self.desc_pool, vk::DescriptorPoolResetFlags::empty())
        });
        self.begin(fl, cb, false);
        let layouts = [fl.set_layout];
        let bind = vk::PipelineBindPoint::COMPUTE;
        let range = (ELEMENTS * 4) as vk::DeviceSize;
        let start = Instant::now();
        for b in &self.buffers[..n] {
            let info = vk::DescriptorSetAllocateInfo::default()
                .descriptor_pool(self.desc_pool)
                .set_layouts(&layouts);
            let buffers = [vk::DescriptorBufferInfo::default().buffer(*b).range(range)];
            // SAFETY: the pool has room for `BUFFERS` sets; the write names
            // a live buffer within its size; `cb` is recording with a
            // pipeline of the set's layout bound.
            unsafe {
                let set = ok!(d.allocate_descriptor_sets(&info))[0];
                let write = vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(&buffers);
                d.update_descriptor_sets(&[write], &[]);
                d.cmd_bind_descriptor_sets(cb, bind, fl.layout, 0, &[set], &[]);
                d.cmd_push_constants(cb, fl.layout, vk::ShaderStageFlags::COMPUTE, 0, &pc);
                d.cmd_dispatch(cb, GROUPS, 1, 1);
            }
        }
        let t = start.elapsed();
        self.discard(fl, cb);
        us(t) / n as f64
    }

    /// CPU µs per dispatch to record `n` dispatches that alternate between
    /// the floor's pipeline and a second one of the same layout (a pipeline
    /// bind, the pre-written set bound again, push constants, dispatch,
    /// barrier). Nothing is submitted.
    pub fn record_alternating(&mut self, fl: &mut Floor, n: usize) -> f64 {
        let cb = self.cbs[0];
        let d = &self.dev;
        let pc = push(1.0, 1.0);
        self.begin(fl, cb, false);
        let bind = vk::PipelineBindPoint::COMPUTE;
        let start = Instant::now();
        for i in 0..n {
            let p = if i % 2 == 0 {
                fl.pipeline
            } else {
                self.pipeline_b
            };
            // SAFETY: `cb` is recording; both pipelines and the set are live
            // and of the floor's layout.
            unsafe {
                d.cmd_bind_pipeline(cb, bind, p);
                d.cmd_bind_descriptor_sets(cb, bind, fl.layout, 0, &[fl.set], &[]);
            }
            fl.step(cb, &pc, true);
        }
        let t = start.elapsed();
        self.discard(fl, cb);
        us(t) / n as f64
    }

    /// `n` (≤ [`BUFFERS`]) independent dispatches, each on its own buffer
    /// through a descriptor set written before the timer (bind set, push
    /// constants, dispatch; no barrier between them), recorded, submitted
    /// once and waited for: (GPU time between timestamps, wall time from
    /// the begin to the end of the wait). vkcompute's independent rows bind
    /// a different slice per dispatch, so this is the same work (the
    /// floor's own `independent_gpu` rebinds nothing and races on one
    /// buffer). Panics unless every element of the `n` buffers went from 0
    /// to exactly 1.
    pub fn independent_own_buffers(&mut self, fl: &mut Floor, n: usize) -> (Duration, Duration) {
        assert!(n > 0 && n <= BUFFERS, "floor: 1..={BUFFERS} dispatches");
        let floats = ELEMENTS;
        // SAFETY: the mapping covers every buffer (`stride` apart, each
        // `ELEMENTS` f32 long); no GPU work is pending (every submission is
        // waited for); the memory is host-coherent.
        unsafe {
            for i in 0..n {
                let p = self.mapped.add(self.stride as usize * i).cast::<f32>();
                std::ptr::write_bytes(p, 0, floats);
            }
        }
        let (d, cb, pc, q) = (&self.dev, self.cbs[0], push(1.0, 1.0), fl.queries);
        let bind = vk::PipelineBindPoint::COMPUTE;
        let start = Instant::now();
        self.begin(fl, cb, false);
        // SAFETY: `cb` is recording with the floor's pipeline bound; the
        // sets are live, written, of the floor's set layout; queries 0 and 1
        // exist and are reset before either is written.
        unsafe {
            d.cmd_reset_query_pool(cb, q, 0, 2);
            d.cmd_write_timestamp(cb, vk::PipelineStageFlags::TOP_OF_PIPE, q, 0);
            for set in &self.own_sets[..n] {
                d.cmd_bind_descriptor_sets(cb, bind, fl.layout, 0, &[*set], &[]);
                d.cmd_push_constants(cb, fl.layout, vk::ShaderStageFlags::COMPUTE, 0, &pc);
                d.cmd_dispatch(cb, GROUPS, 1, 1);
            }
            d.cmd_write_timestamp(cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE, q, 1);
        }
        fl.host_barrier(cb);
        fl.end(cb);
        let v = fl.submit(cb);
        fl.wait_blocking(v);
        let wall = start.elapsed();
        let mut ts = [0u64; 2];
        let flags = vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT;
        // SAFETY: both queries were written by the completed submission; the
        // output holds exactly two 64-bit results.
        ok!(unsafe { d.get_query_pool_results(q, 0, &mut ts, flags) });
        let ticks = ts[1].wrapping_sub(ts[0]) & fl.timestamp_mask;
        let gpu = Duration::from_nanos((ticks as f64 * fl.timestamp_period_ns).round() as u64);
        for i in 0..n {
            // SAFETY: as above; the submission completed and its host
            // barrier made the writes visible.
            let x = unsafe {
                std::slice::from_raw_parts(
                    self.mapped.add(self.stride as usize * i).cast::<f32>(),
                    floats,
                )
            };
            if let Some(j) = x.iter().position(|&v| v != 1.0) {
                panic!(
                    "floor: independent, buffer {i}: x[{j}] = {}, expected 1",
                    x[j]
                );
            }
        }
        (gpu, wall)
    }

    /// Ends and resets a command buffer that was never submitted.
    fn discard(&self, fl: &Floor, cb: vk::CommandBuffer) {
        fl.end(cb);
        // SAFETY: `cb` was never submitted; its pool allows individual reset.
        ok!(unsafe {
            self.dev
                .reset_command_buffer(cb, vk::CommandBufferResetFlags::empty())
        });
    }
}

impl Drop for FloorMore {
    fn drop(&mut self) {
        let d = &self.dev;
        // SAFETY: the floor's device is still live (its `Drop` refuses to
        // destroy it while `_live` is held); after waiting for idle nothing
        // of ours is in use; children before the memory they are bound to.
        unsafe {
            let _ = d.device_wait_idle();
            d.destroy_pipeline(self.pipeline_b, None);
            d.destroy_descriptor_pool(self.desc_pool, None);
            d.destroy_descriptor_pool(self.own_pool, None);
            d.destroy_command_pool(self.pool, None);
            for b in &self.buffers {
                d.destroy_buffer(*b, None);
            }
            d.free_memory(self.memory, None);
        }
    }
}
