//! The floor for the resident megakernel's round trip
//! (`measure/examples/megakernel_resident.rs`): the raw-Vulkan mailbox of
//! `notes/persistent-kernels.md`, in minimal hand-written ash. One
//! workgroup of 256 invocations runs a persistent dispatch: lane 0 spins
//! on a request word in device-local host-visible memory (ReBAR), then
//! every lane does the same 256-element add as the resident example's
//! task, and lane 0 stores the request number into a done word in
//! host-cached memory, which the host spins on. No ring, no tags, no
//! budgets beyond one spin bound: the least a host → GPU → host round trip
//! costs on this driver.
//!
//! [`FloorMailbox`] owns its three buffers (each in its own allocation),
//! a descriptor set layout, pool and set, a pipeline layout and pipeline,
//! and a command pool with one command buffer; it uses the floor's device,
//! queue and timeline.

use std::rc::Rc;
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use ash::vk;

use super::{memory_type, Floor};

/// Elements of each input and of the output (the resident task's size).
const N: usize = 256;

/// The persistent kernel. `data` holds a (N), b (N), out (N); request k
/// computes out = a + b + k. A spin that runs out (the host stopped) ends
/// the kernel; `done[1]` counts requests served.
const KERNEL: &str = r#"
#version 450
#extension GL_KHR_memory_scope_semantics : require
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) coherent buffer Req { uint req[]; };
layout(set = 0, binding = 1) coherent buffer Done { uint done[]; };
layout(set = 0, binding = 2) coherent buffer Data { float d[]; };
layout(push_constant) uniform P { uint requests; uint spin_chunks; };
shared uint s_go;
void main() {
    uint lane = gl_LocalInvocationIndex;
    for (uint k = 1u; k <= requests; k++) {
        if (lane == 0u) {
            uint go = 0u;
            for (uint o = 0u; o < spin_chunks && go == 0u; o++) {
                for (uint i = 0u; i < 1024u; i++) {
                    // An atomic read: a plain or volatile load in a spin
                    // was hoisted out of the loop (notes). POLL_LOAD: an
                    // acquire load at device scope; else the notes' atomicAdd(0).
#if POLL_LOAD
                    uint seen = atomicLoad(req[0], gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsAcquire);
#else
                    uint seen = atomicAdd(req[0], 0u);
#endif
                    if (seen >= k) { go = 1u; break; }
                }
            }
            s_go = go;
        }
        memoryBarrierBuffer();
        barrier();
        memoryBarrierBuffer();
        if (s_go == 0u) return;
        d[512u + lane] = d[lane] + d[256u + lane] + float(k);
        memoryBarrierBuffer();
        barrier();
        if (lane == 0u) {
            atomicExchange(done[1], k);
            atomicExchange(done[0], k);
        }
    }
}
"#;

/// The mailbox floor's objects on a [`Floor`]'s device. Drop it before
/// its `Floor`.
pub struct FloorMailbox {
    dev: ash::Device,
    buffers: [vk::Buffer; 3],
    memories: [vk::DeviceMemory; 3],
    req: *const AtomicU32,
    done: *const AtomicU32,
    data: *mut f32,
    set_layout: vk::DescriptorSetLayout,
    desc_pool: vk::DescriptorPool,
    layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
    set: vk::DescriptorSet,
    pool: vk::CommandPool,
    cb: vk::CommandBuffer,
    used: bool,
    _live: Rc<()>,
}

impl FloorMailbox {
    /// Creates everything on `fl`'s device; `None` when the adapter has no
    /// device-local host-visible memory (no ReBAR) or no host-cached memory.
    /// `poll_load`: lane 0 polls with an acquire load at device scope (the
    /// cheapest atomic read), else with the notes' `atomicAdd(req, 0)`.
    pub fn new(fl: &Floor, poll_load: bool) -> Option<FloorMailbox> {
        use vk::MemoryPropertyFlags as F;
        let d = &fl.dev;
        // SAFETY: `pd` is the floor's adapter, from its live instance.
        let mem = unsafe { fl.instance.get_physical_device_memory_properties(fl.pd) };
        let wants = [
            (16u64, F::DEVICE_LOCAL | F::HOST_VISIBLE | F::HOST_COHERENT),
            (16, F::HOST_VISIBLE | F::HOST_COHERENT | F::HOST_CACHED),
            (
                (3 * N * 4) as u64,
                F::DEVICE_LOCAL | F::HOST_VISIBLE | F::HOST_COHERENT,
            ),
        ];
        let src = KERNEL.replacen(
            "layout(local_size_x",
            &format!(
                "#define POLL_LOAD {}\nlayout(local_size_x",
                u32::from(poll_load)
            ),
            1,
        );
        let code = vkcompute::compile_glsl(&src).expect("floor: compile the mailbox kernel");
        let module_info = vk::ShaderModuleCreateInfo::default().code(&code);
        let bindings: Vec<_> = (0..3)
            .map(|b| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(b)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let sizes = [vk::DescriptorPoolSize::default()
            .ty(vk::DescriptorType::STORAGE_BUFFER)
            .descriptor_count(3)];
        let ranges = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .size(8)];
        // SAFETY: `fl.dev` is live; every create info points at live locals;
        // each buffer gets its own allocation of a type its requirements
        // allow, mapped whole; the module is destroyed once the pipeline
        // exists. On an early `None`, what was made is destroyed first.
        unsafe {
            let mut buffers = [vk::Buffer::null(); 3];
            let mut memories = [vk::DeviceMemory::null(); 3];
            let mut maps = [std::ptr::null_mut::<u8>(); 3];
            for (i, (bytes, want)) in wants.iter().enumerate() {
                let info = vk::BufferCreateInfo::default()
                    .size(*bytes)
                    .usage(vk::BufferUsageFlags::STORAGE_BUFFER);
                buffers[i] = ok!(d.create_buffer(&info, None));
                let req = d.get_buffer_memory_requirements(buffers[i]);
                let Some(ty) = memory_type(&mem, req.memory_type_bits, *want) else {
                    for b in buffers.iter().take(i + 1) {
                        d.destroy_buffer(*b, None);
                    }
                    for m in memories.iter().take(i) {
                        d.free_memory(*m, None);
                    }
                    return None;
                };
                let ainfo = vk::MemoryAllocateInfo::default()
                    .allocation_size(req.size)
                    .memory_type_index(ty);
                memories[i] = ok!(d.allocate_memory(&ainfo, None));
                ok!(d.bind_buffer_memory(buffers[i], memories[i], 0));
                maps[i] =
                    ok!(d.map_memory(memories[i], 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()))
                        .cast::<u8>();
                std::ptr::write_bytes(maps[i], 0, *bytes as usize);
            }
            let sl_info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
            let set_layout = ok!(d.create_descriptor_set_layout(&sl_info, None));
            let dp_info = vk::DescriptorPoolCreateInfo::default()
                .max_sets(1)
                .pool_sizes(&sizes);
            let desc_pool = ok!(d.create_descriptor_pool(&dp_info, None));
            let layouts = [set_layout];
            let set_info = vk::DescriptorSetAllocateInfo::default()
                .descriptor_pool(desc_pool)
                .set_layouts(&layouts);
            let set = ok!(d.allocate_descriptor_sets(&set_info))[0];
            for (b, (buffer, (bytes, _))) in buffers.iter().zip(&wants).enumerate() {
                let info = [vk::DescriptorBufferInfo::default()
                    .buffer(*buffer)
                    .range(*bytes)];
                let write = vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(b as u32)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(&info);
                d.update_descriptor_sets(&[write], &[]);
            }
            let pl_info = vk::PipelineLayoutCreateInfo::default()
                .set_layouts(&layouts)
                .push_constant_ranges(&ranges);
            let layout = ok!(d.create_pipeline_layout(&pl_info, None));
            let module = ok!(d.create_shader_module(&module_info, None));
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(module)
                .name(c"main");
            let cinfo = [vk::ComputePipelineCreateInfo::default()
                .stage(stage)
                .layout(layout)];
            let p = d.create_compute_pipelines(vk::PipelineCache::null(), &cinfo, None);
            let pipeline = ok!(p.map_err(|(_, r)| r))[0];
            d.destroy_shader_module(module, None);
            let pool_info = vk::CommandPoolCreateInfo::default().queue_family_index(fl.family);
            let pool = ok!(d.create_command_pool(&pool_info, None));
            let alloc = vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .command_buffer_count(1);
            let cb = ok!(d.allocate_command_buffers(&alloc))[0];
            Some(FloorMailbox {
                dev: d.clone(),
                buffers,
                memories,
                req: maps[0].cast::<AtomicU32>(),
                done: maps[1].cast::<AtomicU32>(),
                data: maps[2].cast::<f32>(),
                set_layout,
                desc_pool,
                layout,
                pipeline,
                set,
                pool,
                cb,
                used: false,
                _live: Rc::clone(&fl.diags),
            })
        }
    }

    fn word(p: *const AtomicU32, i: usize) -> &'static AtomicU32 {
        // SAFETY: `p` is a live, 4-byte aligned mapping of at least 16 bytes
        // (i < 4) that outlives every use (the struct owns it).
        unsafe { &*p.add(i) }
    }

    /// Launches the persistent kernel for `requests` round trips, then times
    /// each: the host stores k into the request word (and fences it out of
    /// the write-combining buffer), then spins until the done word reads k.
    /// Returns the round trips after `warm` untimed ones. Panics unless
    /// every request was served and out = a + b + the last request, and
    /// on a second call (the command buffer is recorded once).
    pub fn round_trips(&mut self, fl: &mut Floor, warm: usize, timed: usize) -> Vec<Duration> {
        assert!(!self.used, "floor: the mailbox runs once");
        self.used = true;
        let requests = (warm + timed) as u32;
        let a: Vec<f32> = (0..N).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..N).map(|i| (2 * i) as f32).collect();
        // SAFETY: `data` maps 3 × N f32 the kernel is not running on yet.
        unsafe {
            std::ptr::copy_nonoverlapping(a.as_ptr(), self.data, N);
            std::ptr::copy_nonoverlapping(b.as_ptr(), self.data.add(N), N);
        }
        Self::word(self.req, 0).store(0, Ordering::SeqCst);
        Self::word(self.done, 0).store(0, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        // About 4 s of polls before the kernel gives up on a silent host.
        let pc: [u32; 2] = [requests, 1 << 13];
        let (d, cb, bind) = (&self.dev, self.cb, vk::PipelineBindPoint::COMPUTE);
        // SAFETY: `cb` is new (never begun: `used` was false); pipeline,
        // layout and set are live and match; the push range matches.
        unsafe {
            ok!(d.begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default()));
            d.cmd_bind_pipeline(cb, bind, self.pipeline);
            d.cmd_bind_descriptor_sets(cb, bind, self.layout, 0, &[self.set], &[]);
            d.cmd_push_constants(
                cb,
                self.layout,
                vk::ShaderStageFlags::COMPUTE,
                0,
                bytemuck::bytes_of(&pc),
            );
            d.cmd_dispatch(cb, 1, 1, 1);
            fl.host_barrier(cb);
        }
        fl.end(cb);
        let v = fl.submit(cb);
        let mut out = Vec::with_capacity(timed);
        for k in 1..=requests {
            let t = Instant::now();
            Self::word(self.req, 0).store(k, Ordering::Relaxed);
            fence(Ordering::SeqCst);
            let mut spins = 0u64;
            while Self::word(self.done, 0).load(Ordering::Acquire) != k {
                spins += 1;
                if spins % 4096 == 0 {
                    assert!(
                        t.elapsed() < Duration::from_secs(5),
                        "floor: mailbox request {k} not served"
                    );
                }
                std::hint::spin_loop();
            }
            let dt = t.elapsed();
            if k as usize > warm {
                out.push(dt);
            }
        }
        fl.wait_spin(v);
        assert_eq!(Self::word(self.done, 1).load(Ordering::Acquire), requests);
        for i in 0..N {
            // SAFETY: the kernel completed (waited for above); `data` maps 3 × N f32.
            let got = unsafe { *self.data.add(2 * N + i) };
            let want = a[i] + b[i] + requests as f32;
            assert!(
                got == want,
                "floor: mailbox out[{i}] = {got}, expected {want}"
            );
        }
        out
    }
}

impl Drop for FloorMailbox {
    fn drop(&mut self) {
        let d = &self.dev;
        // SAFETY: the floor's device is still live (its `Drop` refuses to
        // destroy it while `_live` is held); after waiting for idle nothing
        // of ours is in use; children before the memory they are bound to.
        unsafe {
            let _ = d.device_wait_idle();
            d.destroy_command_pool(self.pool, None);
            d.destroy_pipeline(self.pipeline, None);
            d.destroy_pipeline_layout(self.layout, None);
            d.destroy_descriptor_pool(self.desc_pool, None);
            d.destroy_descriptor_set_layout(self.set_layout, None);
            for (b, m) in self.buffers.iter().zip(&self.memories) {
                d.destroy_buffer(*b, None);
                d.free_memory(*m, None);
            }
        }
    }
}
