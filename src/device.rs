//! The device: adapter choice, queues, allocator, and the one place where
//! everything is destroyed.
//!
//! `Device` is a cheap handle (`Arc` of `DeviceInner`); every buffer, kernel,
//! batch and ticket holds one, so the device outlives them all. Objects that
//! in-flight work may still use are not destroyed when dropped but parked in
//! the device's deferred list ([`crate::reclaim`]) until their timeline
//! values pass. `DeviceInner::drop` is the destroy order: wait for the
//! queues, then release parked objects, recorders, staging buffers, kernels,
//! semaphores, the allocator, the device, and last the instance.

use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ash::vk;
use gpu_allocator::vulkan::{Allocation, Allocator, AllocatorCreateDesc};
use gpu_allocator::{AllocationSizes, AllocatorDebugSettings};

use crate::adapter::{self, AdapterInfo};
use crate::disk_cache::{self, PipelineKey};
use crate::error::{Error, Result, Sticky};
use crate::instance::Instance;
use crate::pipeline_cache::KernelCache;
use crate::probe::{self, Probed};
use crate::queue::Queue;
use crate::queue::StreamState;
use crate::reclaim::{
    Deferred, UseMark, MAX_QUEUES, SLOT_COMPUTE, SLOT_FIRST_EXTRA, SLOT_TRANSFER,
};
use crate::recorder::RecorderPool;
use crate::requirements::Capability;
use crate::set_cache::SetCache;
use crate::staging::StagingPool;
use crate::stats::{Counter, Counters, StartupTimes};
use crate::validation_log::ValidationLog;

use crate::options::env_flag;
pub use crate::options::{
    DeviceOptions, DEFAULT_COMPUTE_QUEUES, ENV_COMPUTE_QUEUES, ENV_DEVICE, ENV_PIPELINE_STATISTICS,
    ENV_PUSH_DESCRIPTORS, ENV_VALIDATION, ENV_VALIDATION_ERRORS,
};

mod cache;
mod capabilities;
mod memory_ops;
mod queues;

/// A Vulkan device ready for compute. Cheap to clone; `Send + Sync`.
#[derive(Clone)]
pub struct Device {
    pub(crate) inner: Arc<DeviceInner>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("adapter", &self.inner.info.name)
            .field("id", &self.inner.id)
            .finish()
    }
}

/// Something parked until in-flight work passes its mark.
pub(crate) enum Garbage {
    Buffer(vk::Buffer, Allocation),
    QueryPool(vk::QueryPool),
    /// A semaphore (an [`crate::Event`]'s) that submissions waited on.
    Semaphore(vk::Semaphore),
    /// A staging buffer of an async transfer: back to the pool when done.
    Staging(crate::staging::StagingBuffer),
}

/// The shared state behind every handle.
///
/// Read-only facts about the device (its id, adapter info, options, raw
/// handles, sticky loss, counters, queue families, enabled features) are
/// visible crate-wide. Every stateful part (queues, recorders, caches,
/// staging, the stream users, the waiter, the allocator and the deferred
/// list) is private to the device module and reached through accessors.
pub(crate) struct DeviceInner {
    pub id: u64,
    pub info: AdapterInfo,
    pub options: DeviceOptions,
    pub raw: ash::Device,
    pub push_descriptor: Option<ash::khr::push_descriptor::Device>,
    /// Where asked for and available: pipelines capture statistics ([`crate::pipeline_stats`]).
    pub pipeline_statistics: Option<ash::khr::pipeline_executable_properties::Device>,
    pub debug_utils: Option<ash::ext::debug_utils::Device>,
    pub sticky: Sticky,
    pub counters: Counters,
    /// How long creation took, by phase.
    pub startup: StartupTimes,
    pub buffer_device_address: bool,
    /// Valid bits of compute-queue timestamps.
    pub timestamp_bits: u32,
    /// Families that share buffers (CONCURRENT sharing when two).
    pub families: Vec<u32>,
    /// Features SPIR-V capabilities need, as enabled (kernels are checked;
    /// the megakernel's templates choose their clock and memory model by
    /// them).
    pub shader_features: crate::spirv_caps::ShaderFeatures,
    /// The physical device `raw` was created on (for [`crate::interop`]).
    pub physical: vk::PhysicalDevice,
    compute: Queue,
    transfer: Option<Queue>,
    /// Further queues of the compute family, for streams (slots 2..).
    extra_compute: Vec<Queue>,
    /// The stream `Device::batch` records on (the compute queue).
    default_stream: Arc<StreamState>,
    /// Live streams per compute queue (index 0: the compute queue, i: the
    /// extra queue i - 1), the default stream counted.
    stream_users: Arc<[AtomicUsize]>,
    compute_recorders: RecorderPool,
    transfer_recorders: Option<RecorderPool>,
    kernels: KernelCache,
    /// Written descriptor sets kept across batches (pooled descriptors).
    set_cache: SetCache,
    /// Built-in kernels ([`crate::ops`], the copy kernel), each made at first use.
    builtins: crate::pipeline_cache::BuiltinStore,
    staging: StagingPool,
    allocator: Mutex<ManuallyDrop<Allocator>>,
    garbage: Mutex<Deferred<Garbage>>,
    budget_used: AtomicU64,
    /// The thread that wakes ticket futures (started at first use).
    waiter: crate::waiter::WaiterSlot,
    /// Dropped last: the device is destroyed in `drop` before it.
    pub(crate) instance: Instance,
}

impl DeviceInner {
    /// The default compute queue (slot 0).
    pub(crate) fn compute_queue(&self) -> &Queue {
        &self.compute
    }

    /// Whether the device has a transfer-only queue.
    pub(crate) fn has_transfer_queue(&self) -> bool {
        self.transfer.is_some()
    }

    /// The transfer-only queue's family, if there is one.
    pub(crate) fn transfer_family(&self) -> Option<u32> {
        self.transfer.as_ref().map(|t| t.family)
    }

    /// The stream [`Device::batch`] records on.
    pub(crate) fn default_stream(&self) -> &Arc<StreamState> {
        &self.default_stream
    }

    /// Live streams per compute queue, the default stream counted.
    pub(crate) fn stream_users(&self) -> &Arc<[AtomicUsize]> {
        &self.stream_users
    }

    /// The compute family's recorders (command pools), recycled.
    pub(crate) fn compute_recorders(&self) -> &RecorderPool {
        &self.compute_recorders
    }

    /// Pipelines and the `VkPipelineCache` of this device.
    pub(crate) fn kernels(&self) -> &KernelCache {
        &self.kernels
    }

    /// Written descriptor sets kept across batches.
    pub(crate) fn set_cache(&self) -> &SetCache {
        &self.set_cache
    }

    /// The built-in pipelines made so far.
    pub(crate) fn builtins(&self) -> &crate::pipeline_cache::BuiltinStore {
        &self.builtins
    }

    /// The thread that wakes ticket futures.
    pub(crate) fn waiter(&self) -> &crate::waiter::WaiterSlot {
        &self.waiter
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Device {
    /// The best adapter (or the one `VKCOMPUTE_DEVICE` names), validation
    /// as `VKCOMPUTE_VALIDATION` says.
    pub fn new() -> Result<Device> {
        Device::with_options(DeviceOptions::default())
    }

    /// A device chosen and configured by `options`.
    pub fn with_options(options: DeviceOptions) -> Result<Device> {
        let validation = options
            .validation
            .unwrap_or_else(|| env_flag(ENV_VALIDATION));
        let t0 = std::time::Instant::now();
        let log = ValidationLog::with_settings(
            options.validation_stderr,
            options
                .validation_errors
                .unwrap_or_else(|| env_flag(ENV_VALIDATION_ERRORS)),
        );
        let instance = Instance::new(validation, log)?;
        let t1 = std::time::Instant::now();
        let probed = probe::probe_all(&instance.raw)?;
        let t2 = std::time::Instant::now();
        let infos: Vec<AdapterInfo> = probed.iter().map(|p| p.info.clone()).collect();
        let env_choice = std::env::var(ENV_DEVICE).ok();
        let request = options.adapter.as_deref().or(env_choice.as_deref());
        let chosen = adapter::pick(&infos, request)?;
        let p = probed.into_iter().nth(chosen).ok_or(Error::NoAdapter)?;
        let mut inner = DeviceInner::create(instance, p, options, validation)?;
        inner.startup.instance = t1 - t0;
        inner.startup.probe = t2 - t1;
        log::info!(
            "vkcompute: using {} ({:?}, {} {}), compute queues: {}, transfer queue: {}, push descriptors: {}",
            inner.info.name,
            inner.info.adapter_type,
            inner.info.driver_name,
            inner.info.driver_info,
            1 + inner.extra_compute.len(),
            inner.transfer.is_some(),
            inner.push_descriptor.is_some()
        );
        Ok(Device {
            inner: Arc::new(inner),
        })
    }

    /// Every adapter with a compute queue, in enumeration order.
    pub fn adapters() -> Result<Vec<AdapterInfo>> {
        let instance = Instance::new(false, ValidationLog::default())?;
        Ok(probe::probe_all(&instance.raw)?
            .into_iter()
            .map(|p| p.info)
            .collect())
    }

    /// One device per adapter (for multi-GPU work), with `options` applied
    /// to each (its `adapter` field is ignored).
    pub fn all(options: DeviceOptions) -> Result<Vec<Device>> {
        Device::adapters()?
            .into_iter()
            .map(|a| {
                Device::with_options(DeviceOptions {
                    adapter: Some(a.index.to_string()),
                    ..options.clone()
                })
            })
            .collect()
    }

    /// What the chosen adapter offers.
    pub fn info(&self) -> &AdapterInfo {
        &self.inner.info
    }

    /// The options the device was created with.
    pub fn options(&self) -> &DeviceOptions {
        &self.inner.options
    }

    /// Whether the validation layer is on for this device.
    pub fn validation_enabled(&self) -> bool {
        self.inner.instance.debug_utils.is_some()
    }

    /// Validation-layer warnings and errors counted so far on this device
    /// (0 when validation is off).
    pub fn validation_message_count(&self) -> usize {
        self.inner.instance.log.count()
    }

    /// The first validation messages (up to 64), verbatim.
    pub fn validation_messages(&self) -> Vec<String> {
        self.inner.instance.log.messages()
    }

    /// The device's validation log, shared: it outlives the device, so a
    /// test can drop the device and then check that its teardown (objects
    /// alive at `vkDestroyDevice`, leaks) reported nothing.
    pub fn validation_log(&self) -> Arc<ValidationLog> {
        Arc::clone(&self.inner.instance.log)
    }

    /// Whether the device was lost; every operation then fails with
    /// [`Error::DeviceLost`].
    pub fn is_lost(&self) -> bool {
        self.inner.sticky.is_lost()
    }

    /// Waits until all submitted work is done, then releases parked objects.
    /// Batches held back behind an open batch of their stream (the crate
    /// guide's "Ordering") are not on a queue yet and are not waited for.
    pub fn wait_idle(&self) -> Result<()> {
        self.inner.wait_idle()?;
        self.inner.maintain()
    }

    /// Waits for idle, then releases pooled objects not in use (free
    /// recorders, staging buffers, cached descriptor sets of dropped
    /// buffers) so [`Device::stats`] shows only what users hold. Kernels,
    /// and descriptor sets of live buffers, stay cached.
    pub fn trim(&self) -> Result<()> {
        self.wait_idle()?;
        let d = &self.inner;
        d.compute_recorders.trim(&d.raw, &d.counters);
        if let Some(t) = &d.transfer_recorders {
            t.trim(&d.raw, &d.counters);
        }
        for s in d.staging.drain() {
            d.destroy_staging(s);
        }
        d.set_cache
            .trim(&d.raw, &d.counters, &|| d.submitted_mark(), &|| {
                d.completed_cached()
            });
        Ok(())
    }

    /// Marks the device lost, exactly as a driver's `VK_ERROR_DEVICE_LOST`
    /// would, without touching the GPU: every later operation on this
    /// device fails with [`Error::DeviceLost`]. For testing how an
    /// application handles device loss; there is no way back.
    pub fn simulate_device_loss(&self) {
        let _ = self
            .inner
            .sticky
            .fail("simulate_device_loss", vk::Result::ERROR_DEVICE_LOST);
        self.inner.waiter.device_lost();
    }

    /// How long this device's creation took, by phase.
    pub fn startup_times(&self) -> StartupTimes {
        self.inner.startup
    }

    /// A process-unique id of this device.
    pub fn id(&self) -> u64 {
        self.inner.id
    }
}

impl DeviceInner {
    fn create(
        instance: Instance,
        p: Probed,
        options: DeviceOptions,
        validation: bool,
    ) -> Result<DeviceInner> {
        let sticky = Sticky::default();
        let fail = |call, r| sticky.fail(call, r);
        // SAFETY (whole block): `p.physical` belongs to `instance`; all
        // create-info pointers refer to locals alive across each call.
        unsafe {
            let mut core = vk::PhysicalDeviceFeatures2::default();
            let mut q11 = vk::PhysicalDeviceVulkan11Features::default();
            let mut q12 = vk::PhysicalDeviceVulkan12Features::default();
            let mut q13 = vk::PhysicalDeviceVulkan13Features::default();
            let mut qclock = vk::PhysicalDeviceShaderClockFeaturesKHR::default();
            let api13 = p.info.api_version >= (1, 3, 0);
            {
                let mut chain = vk::PhysicalDeviceFeatures2::default()
                    .push_next(&mut q11)
                    .push_next(&mut q12);
                if api13 {
                    chain = chain.push_next(&mut q13);
                }
                if p.info.shader_clock {
                    chain = chain.push_next(&mut qclock);
                }
                instance
                    .raw
                    .get_physical_device_features2(p.physical, &mut chain);
                core.features = chain.features;
            }
            let timeline = q12.timeline_semaphore == vk::TRUE;
            let have = crate::spirv_caps::ShaderFeatures {
                timeline_semaphore: timeline,
                ..Default::default()
            };
            crate::requirements::check(Capability::TimelineSemaphores, &have, &p.info.name)?;
            let f = core.features;
            let features = vk::PhysicalDeviceFeatures::default()
                .shader_int64(f.shader_int64 == vk::TRUE)
                .shader_int16(f.shader_int16 == vk::TRUE)
                .shader_float64(f.shader_float64 == vk::TRUE);
            let mut e11 = vk::PhysicalDeviceVulkan11Features::default()
                .storage_buffer16_bit_access(q11.storage_buffer16_bit_access == vk::TRUE)
                .uniform_and_storage_buffer16_bit_access(
                    q11.uniform_and_storage_buffer16_bit_access == vk::TRUE,
                );
            let bda = q12.buffer_device_address == vk::TRUE;
            let mut e12 = vk::PhysicalDeviceVulkan12Features::default()
                .timeline_semaphore(true)
                .shader_float16(q12.shader_float16 == vk::TRUE)
                .shader_int8(q12.shader_int8 == vk::TRUE)
                .shader_buffer_int64_atomics(q12.shader_buffer_int64_atomics == vk::TRUE)
                .storage_buffer8_bit_access(q12.storage_buffer8_bit_access == vk::TRUE)
                .uniform_and_storage_buffer8_bit_access(
                    q12.uniform_and_storage_buffer8_bit_access == vk::TRUE,
                )
                .scalar_block_layout(q12.scalar_block_layout == vk::TRUE)
                .vulkan_memory_model(q12.vulkan_memory_model == vk::TRUE)
                .vulkan_memory_model_device_scope(q12.vulkan_memory_model_device_scope == vk::TRUE)
                .buffer_device_address(bda);
            let mut e13 = vk::PhysicalDeviceVulkan13Features::default()
                .synchronization2(q13.synchronization2 == vk::TRUE)
                .maintenance4(q13.maintenance4 == vk::TRUE)
                .subgroup_size_control(q13.subgroup_size_control == vk::TRUE)
                .compute_full_subgroups(q13.compute_full_subgroups == vk::TRUE);

            let transfer_family = p.plan.transfer.filter(|_| options.transfer_queue);
            let prio = [1.0f32];
            let compute_queues = crate::options::compute_queue_count(
                options
                    .compute_queues
                    .or_else(crate::options::env_compute_queues),
                p.plan.compute_count,
                (MAX_QUEUES - 1) as u32,
            );
            let compute_prio = vec![1.0f32; compute_queues as usize];
            let mut queue_infos = vec![vk::DeviceQueueCreateInfo::default()
                .queue_family_index(p.plan.compute)
                .queue_priorities(&compute_prio)];
            if let Some(t) = transfer_family {
                queue_infos.push(
                    vk::DeviceQueueCreateInfo::default()
                        .queue_family_index(t)
                        .queue_priorities(&prio),
                );
            }
            let use_push = p.info.push_descriptor
                && options
                    .push_descriptors
                    .unwrap_or_else(|| adapter::prefer_push_descriptors(&p.info));
            let mut extensions = Vec::new();
            if use_push {
                extensions.push(probe::PUSH_DESCRIPTOR.as_ptr());
            }
            if p.info.portability_subset {
                extensions.push(crate::portability::PORTABILITY_SUBSET.as_ptr());
            }
            let mut eclock = vk::PhysicalDeviceShaderClockFeaturesKHR::default()
                .shader_device_clock(qclock.shader_device_clock == vk::TRUE)
                .shader_subgroup_clock(qclock.shader_subgroup_clock == vk::TRUE);
            let use_clock =
                eclock.shader_device_clock == vk::TRUE || eclock.shader_subgroup_clock == vk::TRUE;
            if use_clock {
                extensions.push(probe::SHADER_CLOCK.as_ptr());
            }
            let use_stats = options.pipeline_statistics && p.info.pipeline_executable_properties;
            let mut estats = crate::pipeline_stats::feature();
            extensions.extend(use_stats.then_some(crate::pipeline_stats::EXTENSION.as_ptr()));
            let coop = crate::coopmat::probe(&instance.entry, &instance.raw, p.physical);
            extensions.extend(coop.extensions());
            // f32 atomic adds on storage buffers (the tensor-core K layers'
            // in-place residual adds, the fused MLP's parts).
            let use_atomic_float = p.info.float32_atomic_add;
            extensions.extend(use_atomic_float.then_some(probe::ATOMIC_FLOAT.as_ptr()));
            let mut eatomic = vk::PhysicalDeviceShaderAtomicFloatFeaturesEXT::default()
                .shader_buffer_float32_atomic_add(true);
            let mut coop_khr =
                vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default().cooperative_matrix(true);
            let mut coop_nv =
                vk::PhysicalDeviceCooperativeMatrixFeaturesNV::default().cooperative_matrix(true);
            // Every VK_NV_cooperative_matrix2 feature the adapter reports.
            let mut coop_nv2 = coop.nv2.unwrap_or_default();
            let shader_features = crate::spirv_caps::ShaderFeatures::enabled(
                &features,
                &e11,
                &e12,
                api13.then_some(&e13),
                use_clock.then_some(&eclock),
                coop.nv,
                coop.khr,
            )
            .with_coopmat2(coop.nv2.map(|f| f.enabled()))
            .with_float32_atomic_add(use_atomic_float);
            let mut info = vk::DeviceCreateInfo::default()
                .queue_create_infos(&queue_infos)
                .enabled_extension_names(&extensions)
                .enabled_features(&features)
                .push_next(&mut e11)
                .push_next(&mut e12);
            if api13 {
                info = info.push_next(&mut e13);
            }
            if use_clock {
                info = info.push_next(&mut eclock);
            }
            if coop.khr {
                info = info.push_next(&mut coop_khr);
            }
            if coop.nv {
                info = info.push_next(&mut coop_nv);
            }
            if coop.nv2.is_some() {
                info = info.push_next(&mut coop_nv2);
            }
            if use_stats {
                info = info.push_next(&mut estats);
            }
            if use_atomic_float {
                info = info.push_next(&mut eatomic);
            }
            let t_dev = std::time::Instant::now();
            let raw = instance
                .raw
                .create_device(p.physical, &info, None)
                .map_err(|r| fail("vkCreateDevice", r))?;
            let create_device_time = t_dev.elapsed();
            let t_rest = std::time::Instant::now();

            // From here on, a failure must destroy `raw`.
            let built = (|| -> Result<_> {
                let allocator = Allocator::new(&AllocatorCreateDesc {
                    instance: instance.raw.clone(),
                    device: raw.clone(),
                    physical_device: p.physical,
                    debug_settings: {
                        let mut s = AllocatorDebugSettings::default();
                        s.log_leaks_on_shutdown = false;
                        s
                    },
                    buffer_device_address: bda,
                    allocation_sizes: AllocationSizes::default(),
                })
                .map_err(|e| Error::Allocator(e.to_string()))?;
                let counters = Counters::default();
                let compute = Queue::new(&raw, p.plan.compute, 0, SLOT_COMPUTE, &sticky)?;
                counters.add(Counter::Semaphores, 1);
                let mut extra_compute = Vec::new();
                for i in 1..compute_queues {
                    let slot = SLOT_FIRST_EXTRA + i as usize - 1;
                    match Queue::new(&raw, p.plan.compute, i, slot, &sticky) {
                        Ok(q) => {
                            counters.add(Counter::Semaphores, 1);
                            extra_compute.push(q);
                        }
                        Err(e) => {
                            compute.destroy(&raw);
                            for q in &extra_compute {
                                q.destroy(&raw);
                            }
                            return Err(e);
                        }
                    }
                }
                let transfer = match transfer_family {
                    Some(t) => match Queue::new(&raw, t, 0, SLOT_TRANSFER, &sticky) {
                        Ok(q) => {
                            counters.add(Counter::Semaphores, 1);
                            Some(q)
                        }
                        Err(e) => {
                            compute.destroy(&raw);
                            for q in &extra_compute {
                                q.destroy(&raw);
                            }
                            return Err(e);
                        }
                    },
                    None => None,
                };
                let cache_dir =
                    disk_cache::resolve_dir(options.cache_dir.as_deref(), |v| std::env::var_os(v));
                let key = PipelineKey {
                    vendor_id: p.info.vendor_id,
                    device_id: p.info.device_id,
                    driver_version: p.info.driver_version,
                    uuid: p.info.pipeline_cache_uuid,
                };
                let kernels = match KernelCache::create(&raw, cache_dir, key) {
                    Ok(c) => c,
                    Err(r) => {
                        compute.destroy(&raw);
                        for q in extra_compute.iter().chain(&transfer) {
                            q.destroy(&raw);
                        }
                        return Err(sticky.fail("vkCreatePipelineCache", r));
                    }
                };
                Ok((
                    allocator,
                    counters,
                    compute,
                    extra_compute,
                    transfer,
                    kernels,
                ))
            })();
            let (allocator, counters, compute, extra_compute, transfer, kernels) = match built {
                Ok(b) => b,
                Err(e) => {
                    raw.destroy_device(None);
                    return Err(e);
                }
            };

            let push_descriptor =
                use_push.then(|| ash::khr::push_descriptor::Device::new(&instance.raw, &raw));
            let debug_utils =
                validation.then(|| ash::ext::debug_utils::Device::new(&instance.raw, &raw));
            let pipeline_statistics =
                use_stats.then(|| crate::pipeline_stats::loader(&instance.raw, &raw));
            let mut families = vec![compute.family];
            if let Some(t) = &transfer {
                families.push(t.family);
            }
            let mut info = p.info;
            info.push_descriptor = use_push;
            info.cooperative_matrix_shapes = coop.khr_shapes;
            info.cooperative_matrix_nv_shapes = coop.nv_shapes;
            info.cooperative_matrix_features = coop.features;
            Ok(DeviceInner {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                info,
                compute_recorders: RecorderPool::new(compute.family),
                transfer_recorders: transfer.as_ref().map(|t| RecorderPool::new(t.family)),
                options,
                raw,
                push_descriptor,
                pipeline_statistics,
                debug_utils,
                default_stream: Arc::new(StreamState::new(compute.slot, None)),
                stream_users: (0..compute_queues)
                    .map(|i| AtomicUsize::new(usize::from(i == 0)))
                    .collect(),
                compute,
                transfer,
                extra_compute,
                sticky,
                counters,
                kernels,
                set_cache: SetCache::new(),
                builtins: crate::pipeline_cache::BuiltinStore::default(),
                startup: StartupTimes {
                    create_device: create_device_time,
                    rest: t_rest.elapsed(),
                    ..StartupTimes::default()
                },
                staging: StagingPool::default(),
                timestamp_bits: p.plan.timestamp_bits,
                buffer_device_address: bda,
                families,
                shader_features,
                allocator: Mutex::new(ManuallyDrop::new(allocator)),
                garbage: Mutex::new(Deferred::default()),
                budget_used: AtomicU64::new(0),
                physical: p.physical,
                waiter: crate::waiter::WaiterSlot::default(),
                instance,
            })
        }
    }

    /// Releases parked objects and recorders whose work completed.
    pub(crate) fn maintain(&self) -> Result<()> {
        let done = self.completed()?;
        self.release_ready(done);
        Ok(())
    }

    /// `maintain` that ignores errors (used where none can be reported).
    pub(crate) fn maintain_quiet(&self) {
        if let Ok(done) = self.completed() {
            self.release_ready(done);
        }
    }

    /// Releases parked objects and recorders whose mark `done` reaches.
    pub(crate) fn release_ready(&self, done: UseMark) {
        let ready = {
            let mut g = self.garbage.lock().unwrap_or_else(|p| p.into_inner());
            if g.is_empty() {
                Vec::new()
            } else {
                g.take_ready(done)
            }
        };
        for item in ready {
            self.destroy_garbage(item);
        }
        self.compute_recorders
            .maintain(&self.raw, &self.counters, done);
        if let Some(t) = &self.transfer_recorders {
            t.maintain(&self.raw, &self.counters, done);
        }
    }

    /// Releases `item` now if `mark` has passed, else parks it.
    pub(crate) fn release(&self, mark: UseMark, item: Garbage) {
        if mark.reached(self.completed_cached()) {
            self.destroy_garbage(item);
        } else {
            self.garbage
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(mark, item);
        }
    }

    fn destroy_garbage(&self, item: Garbage) {
        match item {
            Garbage::Buffer(raw, alloc) => self.destroy_buffer(raw, alloc, false),
            Garbage::QueryPool(pool) => {
                // SAFETY: the pool's last use completed (its mark passed).
                unsafe { self.raw.destroy_query_pool(pool, None) };
                self.counters.add(Counter::QueryPools, -1);
            }
            Garbage::Semaphore(sem) => {
                // SAFETY: every submission that waited on it completed (its
                // mark passed).
                unsafe { self.raw.destroy_semaphore(sem, None) };
                self.counters.add(Counter::Semaphores, -1);
            }
            Garbage::Staging(s) => self.give_staging(s),
        }
    }

    /// Names a Vulkan object for validation messages and debuggers.
    pub(crate) fn set_name<H: vk::Handle>(&self, handle: H, name: &str) {
        let Some(du) = &self.debug_utils else { return };
        let Ok(c) = std::ffi::CString::new(name) else {
            return;
        };
        let info = vk::DebugUtilsObjectNameInfoEXT::default()
            .object_handle(handle)
            .object_name(&c);
        // SAFETY: `handle` is a live object of this device; `c` outlives the call.
        let _ = unsafe { du.set_debug_utils_object_name(&info) };
    }
}

impl Drop for DeviceInner {
    fn drop(&mut self) {
        // The destroy order. Work may still be in flight if tickets were
        // dropped unwaited: wait for it (unless the device is lost, when the
        // driver guarantees nothing will run).
        // SAFETY (whole block): after vkDeviceWaitIdle nothing is pending, so
        // every object may be destroyed; children go before the device, the
        // device before the instance (a later field).
        unsafe {
            // The futures' waiter thread first: it waits on semaphores of
            // this device.
            self.waiter.stop(&self.raw);
            let _ = self.raw.device_wait_idle();
            self.waiter.destroy_adopted(&self.raw);
            for item in self
                .garbage
                .get_mut()
                .unwrap_or_else(|p| p.into_inner())
                .take_all()
            {
                self.destroy_garbage(item);
            }
            self.compute_recorders
                .destroy_all(&self.raw, &self.counters);
            if let Some(t) = &self.transfer_recorders {
                t.destroy_all(&self.raw, &self.counters);
            }
            for s in self.staging.drain() {
                self.destroy_staging(s);
            }
            self.set_cache.destroy(&self.raw, &self.counters);
            if !self.sticky.is_lost() {
                if let Err(e) = self.kernels.save(&self.raw, false) {
                    log::warn!("vkcompute: pipeline cache not saved: {e}");
                }
            }
            self.kernels.destroy_all(&self.raw, &self.counters);
            for q in self.queues() {
                q.destroy(&self.raw);
            }
            ManuallyDrop::drop(self.allocator.get_mut().unwrap_or_else(|p| p.into_inner()));
            self.raw.destroy_device(None);
        }
    }
}
