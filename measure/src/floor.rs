//! The driver floor: the dispatch workloads of the benches in minimal
//! hand-written ash, so vkcompute's figures can be stated as ratios to what
//! the driver itself costs.
//!
//! Self-contained on purpose: nothing from the library but
//! `vkcompute::compile_glsl`. One instance, one device, one compute queue (a
//! compute-only family when there is one), one timeline semaphore, one
//! command pool, a two-entry timestamp query pool, a 1024-f32 host-visible
//! storage buffer (device-local too when such memory exists, so a discrete
//! GPU does not read across PCIe) and one pipeline whose descriptor set is
//! written once. `VKCOMPUTE_DEVICE=<index|name fragment>` picks the adapter
//! as vkcompute does; `VKCOMPUTE_VALIDATION=1` turns on the Khronos
//! validation layer, and `Drop` panics if it reported a warning or error.
//! `diag` (`floor/diag.rs`) adds variants that record the way vkcompute
//! does, for the report's diagnostics.
//! `barriers` (`floor/barriers.rs`) times the dependent chain under each
//! form of dependency Vulkan has (`synchronization2` is enabled where the
//! adapter has it).
#![allow(dead_code)]

use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ash::vk;
use vk::{AccessFlags as A, PipelineStageFlags as S};

/// Elements in the buffer: 4 workgroups of 256.
pub const ELEMENTS: usize = 1024;
const GROUPS: u32 = (ELEMENTS / 256) as u32;
const TIMEOUT: Duration = Duration::from_secs(30);

const KERNEL: &str = r#"
#version 450
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) buffer X { float x[]; };
layout(push_constant) uniform P { float a; float b; uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) x[i] = x[i] * a + b;
}
"#;

/// Unwraps a Vulkan result, panicking with the call that failed.
macro_rules! ok {
    ($call:expr) => {
        $call.unwrap_or_else(|e| panic!("floor: {} failed: {e:?}", stringify!($call)))
    };
}

// After `ok!`, which it uses.
pub mod barriers;
pub mod diag;
pub mod graph;
pub mod mailbox;
pub mod more;

/// The kernel's push constants for `x[i] = x[i] * a + b` over the buffer.
fn push(a: f32, b: f32) -> [u8; 12] {
    let mut out = [0u8; 12];
    out[0..4].copy_from_slice(&a.to_ne_bytes());
    out[4..8].copy_from_slice(&b.to_ne_bytes());
    out[8..12].copy_from_slice(&(ELEMENTS as u32).to_ne_bytes());
    out
}

/// Validation warnings and errors seen; boxed so the address handed to the
/// layer never moves.
#[derive(Default)]
struct Log(AtomicUsize);

unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _kind: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: the layer passes valid callback data for the duration of the
    // call; `user` is the boxed `Log`, alive until after vkDestroyInstance.
    let (text, log) = unsafe {
        let text = match data.as_ref() {
            Some(d) if !d.p_message.is_null() => CStr::from_ptr(d.p_message).to_string_lossy(),
            _ => "<no message>".into(),
        };
        (text, (user as *const Log).as_ref())
    };
    eprintln!("floor validation [{severity:?}]: {text}");
    if let Some(log) = log {
        log.0.fetch_add(1, Ordering::Relaxed);
    }
    vk::FALSE
}

/// Everything the floor workloads need, created once.
pub struct Floor {
    _entry: ash::Entry,
    instance: ash::Instance,
    debug: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    log: Box<Log>,
    dev: ash::Device,
    /// The adapter (memory types for helpers that allocate their own).
    pd: vk::PhysicalDevice,
    queue: vk::Queue,
    family: u32,
    timeline: vk::Semaphore,
    value: u64,
    pool: vk::CommandPool,
    cb: vk::CommandBuffer,
    round_trip_cb: vk::CommandBuffer,
    queries: vk::QueryPool,
    timestamp_mask: u64,
    timestamp_period_ns: f64,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    memory_type_index: u32,
    mapped: *mut f32,
    set_layout: vk::DescriptorSetLayout,
    desc_pool: vk::DescriptorPool,
    set: vk::DescriptorSet,
    layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
    /// One count per live `diag::FloorDiag` (which owns objects of `dev`):
    /// `Drop` refuses to destroy the device while there is one.
    diags: std::rc::Rc<()>,
    /// Whether `synchronization2` is enabled (`floor/barriers.rs`).
    sync2: bool,
    /// Adapter, buffer memory type, timestamp resolution and validation, for
    /// the bench's header line.
    pub description: String,
}

/// Runs this executable again with `args`, as the floor's child process
/// (one Vulkan device per process: in a process holding two devices, or
/// right after one, round trips read several times slower), and returns
/// what it printed. Panics when it cannot start or fails.
pub fn run_child<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> String {
    let exe = std::env::current_exe().expect("the example's own path");
    let out = std::process::Command::new(exe)
        .args(args)
        .output()
        .expect("start the floor's process");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the floor's process failed: {}\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

impl Floor {
    /// Creates everything; panics with a clear message when something fails.
    // No `Default`: making a floor creates a Vulkan instance and device.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Floor {
        let validation = std::env::var("VKCOMPUTE_VALIDATION")
            .is_ok_and(|v| matches!(v.trim(), "1" | "true" | "yes" | "on"));
        // SAFETY: loads the system Vulkan loader; we rely on it conforming.
        let entry = unsafe { ash::Entry::load() }.expect("floor: load libvulkan.so.1");
        let log = Box::new(Log::default());
        let log_ptr = &*log as *const Log as *mut c_void;
        type Sev = vk::DebugUtilsMessageSeverityFlagsEXT;
        type Ty = vk::DebugUtilsMessageTypeFlagsEXT;
        let messenger_info = || {
            vk::DebugUtilsMessengerCreateInfoEXT::default()
                .message_severity(Sev::WARNING | Sev::ERROR)
                .message_type(Ty::GENERAL | Ty::VALIDATION | Ty::PERFORMANCE)
                .pfn_user_callback(Some(on_message))
                .user_data(log_ptr)
        };
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_3);
        let layers = [c"VK_LAYER_KHRONOS_validation".as_ptr()];
        let extensions = [ash::ext::debug_utils::NAME.as_ptr()];
        let mut chained = messenger_info();
        let mut info = vk::InstanceCreateInfo::default().application_info(&app);
        // Core validation only: the barrier-free loops (`independent_gpu`,
        // `record_cost` without barriers) race on the one buffer by design,
        // which synchronization validation may flag. (Layer 1.3.239 reports
        // nothing for the whole bench with it on.)
        if validation {
            info = info
                .enabled_layer_names(&layers)
                .enabled_extension_names(&extensions)
                .push_next(&mut chained);
        }
        // SAFETY: every pointer in `info` refers to locals alive across the
        // call. (With validation, a failure here means no validation layer.)
        let instance = ok!(unsafe { entry.create_instance(&info, None) });
        let debug = validation.then(|| {
            let du = ash::ext::debug_utils::Instance::new(&entry, &instance);
            // SAFETY: the instance has VK_EXT_debug_utils; the user data is
            // the boxed log, which outlives the messenger.
            let m = ok!(unsafe { du.create_debug_utils_messenger(&messenger_info(), None) });
            (du, m)
        });

        let (pd, family, props, bits) = pick_adapter(&instance);
        assert!(bits > 0, "floor: the compute queue writes no timestamps");
        let priorities = [1.0f32];
        let queue_info = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&priorities)];
        let mut f12 = vk::PhysicalDeviceVulkan12Features::default().timeline_semaphore(true);
        // synchronization2 where the adapter has it (Vulkan 1.3), for the
        // barrier kinds of `floor/barriers.rs`.
        let sync2 = props.api_version >= vk::API_VERSION_1_3 && {
            let mut q13 = vk::PhysicalDeviceVulkan13Features::default();
            let mut q = vk::PhysicalDeviceFeatures2::default().push_next(&mut q13);
            // SAFETY: `pd` is from this instance, which is Vulkan 1.3.
            unsafe { instance.get_physical_device_features2(pd, &mut q) };
            q13.synchronization2 == vk::TRUE
        };
        let mut f13 = vk::PhysicalDeviceVulkan13Features::default().synchronization2(sync2);
        let mut dinfo = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queue_info)
            .push_next(&mut f12);
        if sync2 {
            dinfo = dinfo.push_next(&mut f13);
        }
        // SAFETY: `pd` is from this instance; `dinfo` points at live locals.
        let dev = ok!(unsafe { instance.create_device(pd, &dinfo, None) });
        let d = &dev;

        let timeline_type = vk::SemaphoreType::TIMELINE;
        let mut type_info = vk::SemaphoreTypeCreateInfo::default().semaphore_type(timeline_type);
        let sem_info = vk::SemaphoreCreateInfo::default().push_next(&mut type_info);
        let pool_info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(family)
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        let query_info = vk::QueryPoolCreateInfo::default()
            .query_type(vk::QueryType::TIMESTAMP)
            .query_count(2);
        let size = (ELEMENTS * 4) as vk::DeviceSize;
        let usage = vk::BufferUsageFlags::STORAGE_BUFFER;
        let buffer_info = vk::BufferCreateInfo::default().size(size).usage(usage);
        // SAFETY: `dev` is live, queue 0 of `family` was requested, and every
        // create info points at live locals.
        let (queue, timeline, pool, queries, buffer) = unsafe {
            let queue = d.get_device_queue(family, 0);
            let timeline = ok!(d.create_semaphore(&sem_info, None));
            let pool = ok!(d.create_command_pool(&pool_info, None));
            let queries = ok!(d.create_query_pool(&query_info, None));
            (
                queue,
                timeline,
                pool,
                queries,
                ok!(d.create_buffer(&buffer_info, None)),
            )
        };
        let alloc = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool)
            .command_buffer_count(2);
        // SAFETY: `pool` belongs to `dev`, `buffer` too, `pd` to `instance`.
        let (cbs, req, mem_props) = unsafe {
            let cbs = ok!(d.allocate_command_buffers(&alloc));
            let req = d.get_buffer_memory_requirements(buffer);
            (cbs, req, instance.get_physical_device_memory_properties(pd))
        };
        let (type_index, flags) = pick_memory(&mem_props, req.memory_type_bits);
        let ainfo = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size)
            .memory_type_index(type_index);
        // SAFETY: the type suits the buffer's requirements and is host-visible,
        // so mapping it whole is valid; it stays mapped until `Drop`.
        let (memory, mapped) = unsafe {
            let m = ok!(d.allocate_memory(&ainfo, None));
            ok!(d.bind_buffer_memory(buffer, m, 0));
            let p = ok!(d.map_memory(m, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()));
            (m, p.cast::<f32>())
        };

        let code = vkcompute::compile_glsl(KERNEL).expect("floor: compile the kernel");
        let (ty, compute) = (
            vk::DescriptorType::STORAGE_BUFFER,
            vk::ShaderStageFlags::COMPUTE,
        );
        let bindings = [vk::DescriptorSetLayoutBinding::default()
            .descriptor_type(ty)
            .descriptor_count(1)
            .stage_flags(compute)];
        let sizes = [vk::DescriptorPoolSize::default().ty(ty).descriptor_count(1)];
        let ranges = [vk::PushConstantRange::default()
            .stage_flags(compute)
            .size(12)];
        let buffer_infos = [vk::DescriptorBufferInfo::default()
            .buffer(buffer)
            .range(size)];
        let sl_info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
        let dp_info = vk::DescriptorPoolCreateInfo::default()
            .max_sets(1)
            .pool_sizes(&sizes);
        let module_info = vk::ShaderModuleCreateInfo::default().code(&code);
        // SAFETY: every create info points at live locals; the descriptor
        // write names the live buffer within its size; the shader module is
        // destroyed only after the pipeline that uses it is created.
        let (set_layout, desc_pool, set, layout, pipeline) = unsafe {
            let sls = [ok!(d.create_descriptor_set_layout(&sl_info, None))];
            let dp = ok!(d.create_descriptor_pool(&dp_info, None));
            let set_info = vk::DescriptorSetAllocateInfo::default()
                .descriptor_pool(dp)
                .set_layouts(&sls);
            let set = ok!(d.allocate_descriptor_sets(&set_info))[0];
            let write = vk::WriteDescriptorSet::default()
                .dst_set(set)
                .descriptor_type(ty)
                .buffer_info(&buffer_infos);
            d.update_descriptor_sets(&[write], &[]);
            let pl_info = vk::PipelineLayoutCreateInfo::default()
                .set_layouts(&sls)
                .push_constant_ranges(&ranges);
            let pl = ok!(d.create_pipeline_layout(&pl_info, None));
            let module = ok!(d.create_shader_module(&module_info, None));
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(compute)
                .module(module)
                .name(c"main");
            let cinfo = [vk::ComputePipelineCreateInfo::default()
                .stage(stage)
                .layout(pl)];
            let p = d.create_compute_pipelines(vk::PipelineCache::null(), &cinfo, None);
            let p = ok!(p.map_err(|(_, r)| r))[0];
            d.destroy_shader_module(module, None);
            (sls[0], dp, set, pl, p)
        };

        let period = props.limits.timestamp_period;
        let name = props
            .device_name_as_c_str()
            .unwrap_or(c"?")
            .to_string_lossy();
        let on_off = if validation { "on" } else { "off" };
        let description = format!(
            "{name} ({:?}), queue family {family}, buffer memory {flags:?}, \
             timestamps {bits} bits x {period} ns, validation {on_off}",
            props.device_type,
        );
        let floor = Floor {
            _entry: entry,
            instance,
            debug,
            log,
            dev,
            pd,
            queue,
            family,
            timeline,
            value: 0,
            pool,
            cb: cbs[0],
            round_trip_cb: cbs[1],
            queries,
            timestamp_mask: u64::MAX >> (64 - bits.min(64)),
            timestamp_period_ns: f64::from(period),
            buffer,
            memory,
            memory_type_index: type_index,
            mapped,
            set_layout,
            desc_pool,
            set,
            layout,
            pipeline,
            diags: std::rc::Rc::new(()),
            sync2,
            description,
        };
        // One tiny dispatch (a = 1, b = 0 leaves the buffer as is), recorded once.
        let cb = floor.round_trip_cb;
        floor.begin(cb, vk::CommandBufferUsageFlags::empty());
        floor.step(cb, &push(1.0, 0.0), false);
        floor.host_barrier(cb);
        floor.end(cb);
        floor
    }

    /// Validation warnings and errors reported so far.
    pub fn validation_messages(&self) -> usize {
        self.log.0.load(Ordering::Relaxed)
    }

    /// Begins `cb` and binds the pipeline and the set.
    fn begin(&self, cb: vk::CommandBuffer, flags: vk::CommandBufferUsageFlags) {
        let info = vk::CommandBufferBeginInfo::default().flags(flags);
        let (d, bind) = (&self.dev, vk::PipelineBindPoint::COMPUTE);
        // SAFETY: `cb` is not pending (every submission is waited for before
        // the next recording) and its pool allows implicit reset; pipeline
        // and set are live and match `layout`.
        unsafe {
            ok!(d.begin_command_buffer(cb, &info));
            d.cmd_bind_pipeline(cb, bind, self.pipeline);
            d.cmd_bind_descriptor_sets(cb, bind, self.layout, 0, &[self.set], &[]);
        }
    }

    /// Push constants + dispatch, then optionally a compute→compute barrier.
    #[inline(always)]
    fn step(&self, cb: vk::CommandBuffer, pc: &[u8; 12], barrier: bool) {
        let (d, stage) = (&self.dev, vk::ShaderStageFlags::COMPUTE);
        // SAFETY: `cb` is recording with the pipeline and set bound; the push
        // range matches the layout's; the grid is within every limit.
        unsafe {
            d.cmd_push_constants(cb, self.layout, stage, 0, pc);
            d.cmd_dispatch(cb, GROUPS, 1, 1);
        }
        if barrier {
            self.barrier(cb, S::COMPUTE_SHADER, A::SHADER_READ | A::SHADER_WRITE);
        }
    }

    /// A global barrier from compute-shader writes to `stage` / `access`.
    fn barrier(&self, cb: vk::CommandBuffer, stage: S, access: A) {
        let mb = [vk::MemoryBarrier::default()
            .src_access_mask(A::SHADER_WRITE)
            .dst_access_mask(access)];
        let (d, none) = (&self.dev, vk::DependencyFlags::empty());
        // SAFETY: `cb` is recording; the stages exist on a compute queue.
        unsafe { d.cmd_pipeline_barrier(cb, S::COMPUTE_SHADER, stage, none, &mb, &[], &[]) };
    }

    /// Makes shader writes visible to host reads and ordered before host writes.
    fn host_barrier(&self, cb: vk::CommandBuffer) {
        self.barrier(cb, S::HOST, A::HOST_READ | A::HOST_WRITE);
    }

    fn end(&self, cb: vk::CommandBuffer) {
        let d = &self.dev;
        // SAFETY: `cb` is recording.
        ok!(unsafe { d.end_command_buffer(cb) });
    }

    /// Submits `cb` signalling the next timeline value, which it returns.
    fn submit(&mut self, cb: vk::CommandBuffer) -> u64 {
        self.value += 1;
        let (cbs, sems, vals) = ([cb], [self.timeline], [self.value]);
        let mut tl = vk::TimelineSemaphoreSubmitInfo::default().signal_semaphore_values(&vals);
        let submit = vk::SubmitInfo::default()
            .command_buffers(&cbs)
            .signal_semaphores(&sems)
            .push_next(&mut tl);
        let (d, q) = (&self.dev, self.queue);
        // SAFETY: `cb` is executable and not pending; the queue is used by
        // this thread only (`&mut self`); the arrays outlive the call.
        ok!(unsafe { d.queue_submit(q, &[submit], vk::Fence::null()) });
        self.value
    }

    fn wait_blocking(&self, value: u64) {
        let (sems, vals) = ([self.timeline], [value]);
        let info = vk::SemaphoreWaitInfo::default()
            .semaphores(&sems)
            .values(&vals);
        let (d, ns) = (&self.dev, TIMEOUT.as_nanos() as u64);
        // SAFETY: a live timeline semaphore; the arrays outlive the call.
        ok!(unsafe { d.wait_semaphores(&info, ns) });
    }

    fn wait_spin(&self, value: u64) {
        let (d, start) = (&self.dev, Instant::now());
        for polls in 0u64.. {
            // SAFETY: a live timeline semaphore.
            if ok!(unsafe { d.get_semaphore_counter_value(self.timeline) }) >= value {
                return;
            }
            if polls % 4096 == 4095 {
                assert!(
                    start.elapsed() < TIMEOUT,
                    "floor: value {value} not reached"
                );
            }
            std::hint::spin_loop();
        }
    }

    /// CPU time to record `n` × (push constants + dispatch [+ barrier]) into
    /// a command buffer with pipeline and set already bound. Not submitted.
    pub fn record_cost(&mut self, n: usize, barrier: bool) -> Duration {
        let (cb, pc) = (self.cb, push(1.0, 1.0));
        self.begin(cb, vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        let start = Instant::now();
        for _ in 0..n {
            self.step(cb, &pc, barrier);
        }
        let t = start.elapsed();
        self.end(cb);
        let (d, flags) = (&self.dev, vk::CommandBufferResetFlags::empty());
        // SAFETY: `cb` was never submitted; its pool allows individual reset.
        ok!(unsafe { d.reset_command_buffer(cb, flags) });
        t
    }

    /// `n` dependent dispatches, a barrier between each: (GPU time from
    /// timestamps, wall time from the start of recording to the end of the
    /// wait). Panics unless every `x[i]` went from i to i + n.
    pub fn chain_gpu(&mut self, n: usize) -> (Duration, Duration) {
        self.chain_gpu_with(n, vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT)
    }

    /// [`Floor::chain_gpu`] with the command buffer begun with `flags`
    /// (`SIMULTANEOUS_USE`: as a graph's).
    pub fn chain_gpu_with(
        &mut self,
        n: usize,
        flags: vk::CommandBufferUsageFlags,
    ) -> (Duration, Duration) {
        let r = self.timed_run(n, true, flags);
        for (i, v) in self.read().into_iter().enumerate() {
            let want = (i + n) as f32;
            assert!(
                v == want,
                "floor: chain of {n}: x[{i}] = {v}, expected {want}"
            );
        }
        r
    }

    /// `n` dispatches with no barrier between them: (GPU time, wall time).
    /// They race on the buffer, so increments may be lost; the check is
    /// only that each `x[i]` grew by a whole number in 1..=n.
    pub fn independent_gpu(&mut self, n: usize) -> (Duration, Duration) {
        let r = self.timed_run(n, false, vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        for (i, v) in self.read().into_iter().enumerate() {
            let grew = v - i as f32;
            let fine = (1.0..=n as f32).contains(&grew) && grew.fract() == 0.0;
            assert!(
                fine,
                "floor: {n} independent: x[{i}] = {v}, not {i} + 1..={n}"
            );
        }
        r
    }

    fn timed_run(
        &mut self,
        n: usize,
        barrier: bool,
        flags: vk::CommandBufferUsageFlags,
    ) -> (Duration, Duration) {
        assert!(n > 0, "floor: at least one dispatch");
        let pc = push(1.0, 1.0);
        self.timed_record(flags, |fl, cb| {
            for i in 0..n {
                fl.step(cb, &pc, barrier && i + 1 < n);
            }
        })
    }

    /// Resets the buffer to `x[i]` = i, records `body` into the floor's
    /// command buffer between two timestamps (begun with `flags`, the
    /// pipeline and set bound), submits it and waits: (GPU time between
    /// the timestamps, wall time from the start of recording to the end of
    /// the wait).
    fn timed_record(
        &mut self,
        flags: vk::CommandBufferUsageFlags,
        body: impl FnOnce(&Floor, vk::CommandBuffer),
    ) -> (Duration, Duration) {
        self.reset_buffer();
        let (cb, q) = (self.cb, self.queries);
        let start = Instant::now();
        self.begin(cb, flags);
        // SAFETY: `cb` is recording; queries 0 and 1 exist and are reset
        // before either is written.
        unsafe {
            self.dev.cmd_reset_query_pool(cb, q, 0, 2);
            self.dev.cmd_write_timestamp(cb, S::TOP_OF_PIPE, q, 0);
        }
        body(self, cb);
        // SAFETY: `cb` is recording; query 1 was reset above.
        unsafe { self.dev.cmd_write_timestamp(cb, S::BOTTOM_OF_PIPE, q, 1) };
        self.host_barrier(cb);
        self.end(cb);
        let v = self.submit(cb);
        self.wait_blocking(v);
        let wall = start.elapsed();
        let mut ts = [0u64; 2];
        let flags = vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT;
        let d = &self.dev;
        // SAFETY: both queries were written by the completed submission; the
        // output holds exactly two 64-bit results.
        ok!(unsafe { d.get_query_pool_results(q, 0, &mut ts, flags) });
        let ticks = ts[1].wrapping_sub(ts[0]) & self.timestamp_mask;
        let ns = (ticks as f64 * self.timestamp_period_ns).round() as u64;
        (Duration::from_nanos(ns), wall)
    }

    /// Submit + wait of the pre-recorded one-dispatch command buffer; `spin`
    /// polls the timeline counter instead of blocking in vkWaitSemaphores.
    pub fn round_trip(&mut self, spin: bool) -> Duration {
        let start = Instant::now();
        let v = self.submit(self.round_trip_cb);
        if spin {
            self.wait_spin(v);
        } else {
            self.wait_blocking(v);
        }
        start.elapsed()
    }

    /// [`Floor::round_trip`] with spinning, split: (submit, wait).
    pub fn round_trip_phases(&mut self) -> (Duration, Duration) {
        let start = Instant::now();
        let v = self.submit(self.round_trip_cb);
        let submitted = Instant::now();
        self.wait_spin(v);
        (submitted - start, submitted.elapsed())
    }

    /// `x[i]` = i, written through the mapping.
    fn reset_buffer(&mut self) {
        // SAFETY: `mapped` points at ELEMENTS coherent f32s; no GPU work is
        // pending (every submission is waited for, and ends with a barrier
        // ordering its writes before host access).
        let x = unsafe { std::slice::from_raw_parts_mut(self.mapped, ELEMENTS) };
        for (i, v) in x.iter_mut().enumerate() {
            *v = i as f32;
        }
    }

    fn read(&self) -> Vec<f32> {
        // SAFETY: as in `reset_buffer`.
        unsafe { std::slice::from_raw_parts(self.mapped, ELEMENTS) }.to_vec()
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        let live = std::rc::Rc::strong_count(&self.diags) - 1;
        if live > 0 {
            // Their objects belong to `dev`: leak everything rather than
            // destroy the device under them.
            if !std::thread::panicking() {
                panic!("floor: dropped before its {live} FloorDiag(s); drop those first");
            }
            return;
        }
        let d = &self.dev;
        // SAFETY: after waiting for idle nothing below is in use; children go
        // before parents, the device before the instance, and the log box
        // (a field) is dropped after vkDestroyInstance reported into it.
        unsafe {
            let _ = d.device_wait_idle();
            d.unmap_memory(self.memory);
            d.destroy_pipeline(self.pipeline, None);
            d.destroy_pipeline_layout(self.layout, None);
            d.destroy_descriptor_pool(self.desc_pool, None);
            d.destroy_descriptor_set_layout(self.set_layout, None);
            d.destroy_buffer(self.buffer, None);
            d.free_memory(self.memory, None);
            d.destroy_query_pool(self.queries, None);
            d.destroy_command_pool(self.pool, None);
            d.destroy_semaphore(self.timeline, None);
            d.destroy_device(None);
            if let Some((du, m)) = &self.debug {
                du.destroy_debug_utils_messenger(*m, None);
            }
            self.instance.destroy_instance(None);
        }
        let n = self.validation_messages();
        if n > 0 && !std::thread::panicking() {
            panic!("floor: the validation layer reported {n} warnings/errors (printed above)");
        }
    }
}

type Picked = (vk::PhysicalDevice, u32, vk::PhysicalDeviceProperties, u32);

/// The adapter vkcompute would pick: `VKCOMPUTE_DEVICE` (index or name
/// fragment) if set, else discrete > integrated > virtual > CPU, then the
/// largest device-local heap, then enumeration order. Returns it with its
/// compute family (compute-only preferred), properties and timestamp bits.
fn pick_adapter(instance: &ash::Instance) -> Picked {
    // SAFETY: a plain query on a live instance.
    let all = ok!(unsafe { instance.enumerate_physical_devices() });
    let mut found = Vec::new();
    for (index, &pd) in all.iter().enumerate() {
        // SAFETY: `pd` came from this instance.
        let (families, props, mem) = unsafe {
            let families = instance.get_physical_device_queue_family_properties(pd);
            let props = instance.get_physical_device_properties(pd);
            (
                families,
                props,
                instance.get_physical_device_memory_properties(pd),
            )
        };
        let has = |i: &usize, f| families[*i].queue_flags.contains(f);
        let mut compute = (0..families.len())
            .filter(|i| has(i, vk::QueueFlags::COMPUTE) && families[*i].queue_count > 0);
        let Some(first) = compute.clone().next() else {
            continue;
        };
        let family = compute
            .find(|i| !has(i, vk::QueueFlags::GRAPHICS))
            .unwrap_or(first);
        let rank = match props.device_type {
            vk::PhysicalDeviceType::DISCRETE_GPU => 4,
            vk::PhysicalDeviceType::INTEGRATED_GPU => 3,
            vk::PhysicalDeviceType::VIRTUAL_GPU => 2,
            vk::PhysicalDeviceType::CPU => 1,
            _ => 0,
        };
        let local = mem.memory_heaps[..mem.memory_heap_count as usize]
            .iter()
            .filter(|h| h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
            .map(|h| h.size)
            .max()
            .unwrap_or(0);
        let name = props
            .device_name_as_c_str()
            .unwrap_or(c"?")
            .to_string_lossy();
        let bits = families[family].timestamp_valid_bits;
        let picked = (pd, family as u32, props, bits);
        found.push((index, name.into_owned(), (rank, local), picked));
    }
    assert!(
        !found.is_empty(),
        "floor: no Vulkan adapter with a compute queue"
    );
    let request = std::env::var("VKCOMPUTE_DEVICE").unwrap_or_default();
    let chosen = match request.trim() {
        "" => {
            // The first of the best: a later adapter must score strictly higher.
            let better = |best: usize, i: usize| if found[i].2 > found[best].2 { i } else { best };
            (0..found.len()).fold(0, better)
        }
        req => {
            let needle = req.to_lowercase();
            let hit = match req.parse::<usize>() {
                Ok(i) => found.iter().position(|f| f.0 == i),
                Err(_) => found
                    .iter()
                    .position(|f| f.1.to_lowercase().contains(&needle)),
            };
            let list: Vec<String> = found.iter().map(|f| format!("{}: {}", f.0, f.1)).collect();
            hit.unwrap_or_else(|| panic!("floor: VKCOMPUTE_DEVICE={req} matches none of {list:?}"))
        }
    };
    found.swap_remove(chosen).3
}

/// A host-visible, coherent memory type allowed for the buffer, preferring
/// one that is device-local too.
/// The first memory type allowed by `allowed` with all of `want`.
fn memory_type(
    mem: &vk::PhysicalDeviceMemoryProperties,
    allowed: u32,
    want: vk::MemoryPropertyFlags,
) -> Option<u32> {
    (0..mem.memory_type_count).find(|&i| {
        allowed & (1 << i) != 0 && mem.memory_types[i as usize].property_flags.contains(want)
    })
}

fn pick_memory(
    mem: &vk::PhysicalDeviceMemoryProperties,
    allowed: u32,
) -> (u32, vk::MemoryPropertyFlags) {
    use vk::MemoryPropertyFlags as F;
    let find = |want: F| {
        memory_type(mem, allowed, want).map(|i| (i, mem.memory_types[i as usize].property_flags))
    };
    find(F::DEVICE_LOCAL | F::HOST_VISIBLE | F::HOST_COHERENT)
        .or_else(|| find(F::HOST_VISIBLE | F::HOST_COHERENT))
        .expect("floor: no host-visible, coherent memory type for the storage buffer")
}
