//! Reading adapters from the driver: properties, limits, features, queue
//! families and memory heaps, turned into [`AdapterInfo`] and a queue plan.
//! The queue choice itself ([`plan_queues`]) is plain logic.

use std::ffi::CStr;

use ash::vk;

use crate::adapter::{AdapterInfo, AdapterType};
use crate::error::{vk_error, Result};

/// Device extensions vkcompute uses when present.
pub(crate) const PUSH_DESCRIPTOR: &CStr = ash::khr::push_descriptor::NAME;
const COOPERATIVE_MATRIX: &CStr = c"VK_KHR_cooperative_matrix";
pub(crate) const SHADER_CLOCK: &CStr = c"VK_KHR_shader_clock";
pub(crate) const ATOMIC_FLOAT: &CStr = c"VK_EXT_shader_atomic_float";
const NV_SM_BUILTINS: &CStr = c"VK_NV_shader_sm_builtins";
const AMD_SHADER_CORE: &CStr = c"VK_AMD_shader_core_properties";

/// Which queue families to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QueuePlan {
    /// Family of the compute queue.
    pub compute: u32,
    /// How many queues the compute family has (streams use several).
    pub compute_count: u32,
    /// Family of a transfer-only queue, when one exists.
    pub transfer: Option<u32>,
    /// Valid timestamp bits on the compute family (0: no timestamps).
    pub timestamp_bits: u32,
}

/// Picks a compute family (a compute-only one when it exists, else any with
/// compute) and a transfer-only family (transfer without compute or graphics).
pub(crate) fn plan_queues(families: &[vk::QueueFamilyProperties]) -> Option<QueuePlan> {
    let has =
        |f: &vk::QueueFamilyProperties, flags| f.queue_flags.contains(flags) && f.queue_count > 0;
    let compute = families
        .iter()
        .position(|f| {
            has(f, vk::QueueFlags::COMPUTE) && !f.queue_flags.contains(vk::QueueFlags::GRAPHICS)
        })
        .or_else(|| {
            families
                .iter()
                .position(|f| has(f, vk::QueueFlags::COMPUTE))
        })?;
    let transfer = families.iter().position(|f| {
        has(f, vk::QueueFlags::TRANSFER)
            && !f
                .queue_flags
                .intersects(vk::QueueFlags::COMPUTE | vk::QueueFlags::GRAPHICS)
    });
    Some(QueuePlan {
        compute: compute as u32,
        compute_count: families[compute].queue_count,
        transfer: transfer.map(|t| t as u32),
        timestamp_bits: families[compute].timestamp_valid_bits,
    })
}

/// One physical device as read from the driver.
pub(crate) struct Probed {
    pub physical: vk::PhysicalDevice,
    pub info: AdapterInfo,
    pub plan: QueuePlan,
}

fn cstr_field(bytes: &[std::ffi::c_char]) -> String {
    // SAFETY: Vulkan guarantees these fixed arrays are NUL-terminated.
    unsafe { CStr::from_ptr(bytes.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// Every adapter with a compute queue, in enumeration order.
pub(crate) fn probe_all(instance: &ash::Instance) -> Result<Vec<Probed>> {
    // SAFETY: a plain query on a valid instance.
    let physicals = unsafe { instance.enumerate_physical_devices() }
        .map_err(|r| vk_error("vkEnumeratePhysicalDevices", r))?;
    let mut out = Vec::new();
    for (index, &pd) in physicals.iter().enumerate() {
        if let Some(p) = probe_one(instance, pd, index)? {
            out.push(p);
        }
    }
    Ok(out)
}

fn probe_one(
    instance: &ash::Instance,
    pd: vk::PhysicalDevice,
    index: usize,
) -> Result<Option<Probed>> {
    // SAFETY: `pd` came from this instance; the queries fill plain structs,
    // and the p_next chains point at locals alive across each call.
    unsafe {
        let families = instance.get_physical_device_queue_family_properties(pd);
        let Some(plan) = plan_queues(&families) else {
            return Ok(None);
        };
        let exts = instance
            .enumerate_device_extension_properties(pd)
            .map_err(|r| vk_error("vkEnumerateDeviceExtensionProperties", r))?;
        let has_ext = |name: &CStr| {
            exts.iter()
                .any(|e| e.extension_name_as_c_str().ok() == Some(name))
        };

        let mut driver = vk::PhysicalDeviceDriverProperties::default();
        let mut subgroup = vk::PhysicalDeviceSubgroupProperties::default();
        let mut maint3 = vk::PhysicalDeviceMaintenance3Properties::default();
        let mut ids = vk::PhysicalDeviceIDProperties::default();
        let mut maint4 = vk::PhysicalDeviceMaintenance4Properties::default();
        let mut nv_sm = vk::PhysicalDeviceShaderSMBuiltinsPropertiesNV::default();
        let mut amd_core = vk::PhysicalDeviceShaderCorePropertiesAMD::default();
        let (has_nv_sm, has_amd_core) = (has_ext(NV_SM_BUILTINS), has_ext(AMD_SHADER_CORE));
        let base = instance.get_physical_device_properties(pd);
        let api13 = base.api_version >= vk::API_VERSION_1_3;
        let mut props2 = vk::PhysicalDeviceProperties2::default()
            .push_next(&mut driver)
            .push_next(&mut subgroup)
            .push_next(&mut maint3)
            .push_next(&mut ids);
        if api13 {
            props2 = props2.push_next(&mut maint4);
        }
        if has_nv_sm {
            props2 = props2.push_next(&mut nv_sm);
        }
        if has_amd_core {
            props2 = props2.push_next(&mut amd_core);
        }
        instance.get_physical_device_properties2(pd, &mut props2);
        let props = props2.properties;
        let limits = props.limits;

        let mut f11 = vk::PhysicalDeviceVulkan11Features::default();
        let mut f12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut fexec = vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default();
        let has_exec = has_ext(crate::pipeline_stats::EXTENSION);
        let mut fatomic = vk::PhysicalDeviceShaderAtomicFloatFeaturesEXT::default();
        let has_atomic_float = has_ext(ATOMIC_FLOAT);
        let mut feats2 = vk::PhysicalDeviceFeatures2::default()
            .push_next(&mut f11)
            .push_next(&mut f12);
        if has_exec {
            feats2 = feats2.push_next(&mut fexec);
        }
        if has_atomic_float {
            feats2 = feats2.push_next(&mut fatomic);
        }
        instance.get_physical_device_features2(pd, &mut feats2);

        let mem = instance.get_physical_device_memory_properties(pd);
        let heaps = &mem.memory_heaps[..mem.memory_heap_count as usize];
        let types = &mem.memory_types[..mem.memory_type_count as usize];
        let device_local_memory = heaps
            .iter()
            .filter(|h| h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
            .map(|h| h.size)
            .max()
            .unwrap_or(0);
        let rebar_flags =
            vk::MemoryPropertyFlags::DEVICE_LOCAL | vk::MemoryPropertyFlags::HOST_VISIBLE;
        let host_visible_device_memory = types
            .iter()
            .filter(|t| t.property_flags.contains(rebar_flags))
            .filter_map(|t| heaps.get(t.heap_index as usize))
            .map(|h| h.size)
            .max()
            .unwrap_or(0);

        let adapter_type = match props.device_type {
            vk::PhysicalDeviceType::DISCRETE_GPU => AdapterType::Discrete,
            vk::PhysicalDeviceType::INTEGRATED_GPU => AdapterType::Integrated,
            vk::PhysicalDeviceType::VIRTUAL_GPU => AdapterType::Virtual,
            vk::PhysicalDeviceType::CPU => AdapterType::Cpu,
            _ => AdapterType::Other,
        };
        let v = props.api_version;
        let (compute_units, max_threads_per_compute_unit) = if has_nv_sm {
            (
                nv_sm.shader_sm_count,
                nv_sm.shader_warps_per_sm * subgroup.subgroup_size,
            )
        } else if has_amd_core {
            let c = &amd_core;
            (
                c.shader_engine_count
                    * c.shader_arrays_per_engine_count
                    * c.compute_units_per_shader_array,
                c.simd_per_compute_unit * c.wavefronts_per_simd * c.wavefront_size,
            )
        } else {
            (0, 0)
        };
        let info = AdapterInfo {
            index,
            name: cstr_field(&props.device_name),
            adapter_type,
            vendor_id: props.vendor_id,
            device_id: props.device_id,
            driver_name: cstr_field(&driver.driver_name),
            driver_info: cstr_field(&driver.driver_info),
            driver_version: props.driver_version,
            pipeline_cache_uuid: props.pipeline_cache_uuid,
            device_uuid: ids.device_uuid,
            api_version: (
                vk::api_version_major(v),
                vk::api_version_minor(v),
                vk::api_version_patch(v),
            ),
            subgroup_size: subgroup.subgroup_size,
            max_workgroup_size: limits.max_compute_work_group_size,
            max_workgroup_count: limits.max_compute_work_group_count,
            max_workgroup_invocations: limits.max_compute_work_group_invocations,
            max_shared_memory: limits.max_compute_shared_memory_size,
            max_storage_buffer_range: u64::from(limits.max_storage_buffer_range),
            max_uniform_buffer_range: u64::from(limits.max_uniform_buffer_range),
            max_memory_allocation_size: maint3.max_memory_allocation_size,
            max_buffer_size: if api13 {
                maint4.max_buffer_size
            } else {
                u64::MAX
            },
            min_storage_buffer_offset_alignment: limits.min_storage_buffer_offset_alignment,
            min_uniform_buffer_offset_alignment: limits.min_uniform_buffer_offset_alignment,
            max_push_constants_size: limits.max_push_constants_size,
            timestamps: plan.timestamp_bits > 0 && limits.timestamp_period > 0.0,
            timestamp_period_ns: limits.timestamp_period,
            cooperative_matrix: has_ext(COOPERATIVE_MATRIX),
            shader_clock: has_ext(SHADER_CLOCK),
            float16: f12.shader_float16 == vk::TRUE,
            push_descriptor: has_ext(PUSH_DESCRIPTOR),
            transfer_queue: plan.transfer.is_some(),
            pipeline_executable_properties: has_exec && fexec.pipeline_executable_info == vk::TRUE,
            host_visible_device_memory,
            device_local_memory,
            compute_units,
            max_threads_per_compute_unit,
            subgroup_arithmetic: subgroup
                .supported_stages
                .contains(vk::ShaderStageFlags::COMPUTE)
                && subgroup.supported_operations.contains(
                    vk::SubgroupFeatureFlags::BASIC | vk::SubgroupFeatureFlags::ARITHMETIC,
                ),
            storage_buffer16: f11.storage_buffer16_bit_access == vk::TRUE,
            float32_atomic_add: has_atomic_float
                && fatomic.shader_buffer_float32_atomic_add == vk::TRUE,
            portability_subset: crate::portability::needs_subset(
                &exts
                    .iter()
                    .filter_map(|e| e.extension_name_as_c_str().ok())
                    .collect::<Vec<_>>(),
            ),
            cooperative_matrix_shapes: Vec::new(),
            cooperative_matrix_nv_shapes: Vec::new(),
            cooperative_matrix_features: Default::default(),
        };
        Ok(Some(Probed {
            physical: pd,
            info,
            plan,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fam(flags: vk::QueueFlags, count: u32, ts: u32) -> vk::QueueFamilyProperties {
        vk::QueueFamilyProperties {
            queue_flags: flags,
            queue_count: count,
            timestamp_valid_bits: ts,
            ..Default::default()
        }
    }

    #[test]
    fn nvidia_like_families() {
        use vk::QueueFlags as Q;
        let f = [
            fam(Q::GRAPHICS | Q::COMPUTE | Q::TRANSFER, 16, 64),
            fam(Q::TRANSFER, 2, 64),
            fam(Q::COMPUTE | Q::TRANSFER, 8, 64),
        ];
        assert_eq!(
            plan_queues(&f),
            Some(QueuePlan {
                compute: 2,
                compute_count: 8,
                transfer: Some(1),
                timestamp_bits: 64
            })
        );
    }

    #[test]
    fn lavapipe_like_single_family() {
        use vk::QueueFlags as Q;
        let f = [fam(Q::GRAPHICS | Q::COMPUTE | Q::TRANSFER, 1, 64)];
        assert_eq!(
            plan_queues(&f),
            Some(QueuePlan {
                compute: 0,
                compute_count: 1,
                transfer: None,
                timestamp_bits: 64
            })
        );
    }

    #[test]
    fn no_compute_no_plan() {
        use vk::QueueFlags as Q;
        assert_eq!(plan_queues(&[fam(Q::GRAPHICS, 1, 0)]), None);
        assert_eq!(plan_queues(&[fam(Q::COMPUTE, 0, 0)]), None);
    }
}
