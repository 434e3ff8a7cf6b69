//! Adapters: what each Vulkan physical device offers, and which one to pick.
//!
//! [`AdapterInfo`] is plain data read from the driver once; choosing among
//! adapters ([`pick`]) is plain logic, tested without a GPU.

use crate::error::{Error, Result};

/// The kind of adapter, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AdapterType {
    /// A discrete GPU.
    Discrete,
    /// A GPU integrated with the CPU.
    Integrated,
    /// A virtual GPU (in a VM).
    Virtual,
    /// A software implementation running on the CPU (lavapipe, SwiftShader).
    Cpu,
    /// Anything else.
    Other,
}

impl AdapterType {
    /// Preference rank: higher is better.
    pub(crate) fn rank(self) -> u8 {
        match self {
            AdapterType::Discrete => 4,
            AdapterType::Integrated => 3,
            AdapterType::Virtual => 2,
            AdapterType::Cpu => 1,
            AdapterType::Other => 0,
        }
    }
}

/// Everything vkcompute reads about an adapter, from its properties,
/// features, limits and queue families.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AdapterInfo {
    /// Index in the driver's enumeration order (what `VKCOMPUTE_DEVICE=<index>` names).
    pub index: usize,
    /// Device name as the driver reports it.
    pub name: String,
    /// Discrete, integrated, virtual or CPU.
    pub adapter_type: AdapterType,
    /// PCI vendor id (0x10de NVIDIA, 0x1002 AMD, 0x8086 Intel, 0x10005 Mesa).
    pub vendor_id: u32,
    /// PCI device id.
    pub device_id: u32,
    /// Driver name (VkPhysicalDeviceDriverProperties), e.g. "NVIDIA" or "llvmpipe".
    pub driver_name: String,
    /// Driver version details, e.g. "580.159.04" or "Mesa 22.3.6 (LLVM 15.0.6)".
    pub driver_info: String,
    /// The driver's own version number (`VkPhysicalDeviceProperties::driverVersion`,
    /// vendor-specific encoding).
    pub driver_version: u32,
    /// `pipelineCacheUUID`: pipeline-cache data is only valid for a driver
    /// reporting the same UUID.
    pub pipeline_cache_uuid: [u8; 16],
    /// deviceUUID (VkPhysicalDeviceIDProperties): the same physical GPU has
    /// the same UUID in every instance and API.
    pub device_uuid: [u8; 16],
    /// Vulkan API version as (major, minor, patch).
    pub api_version: (u32, u32, u32),
    /// Subgroup (warp / wave) size.
    pub subgroup_size: u32,
    /// maxComputeWorkGroupSize.
    pub max_workgroup_size: [u32; 3],
    /// maxComputeWorkGroupCount.
    pub max_workgroup_count: [u32; 3],
    /// maxComputeWorkGroupInvocations.
    pub max_workgroup_invocations: u32,
    /// maxComputeSharedMemorySize in bytes.
    pub max_shared_memory: u32,
    /// maxStorageBufferRange in bytes: the largest range one storage binding may cover.
    pub max_storage_buffer_range: u64,
    /// maxUniformBufferRange in bytes.
    pub max_uniform_buffer_range: u64,
    /// maxMemoryAllocationSize in bytes: the largest single buffer.
    pub max_memory_allocation_size: u64,
    /// maxBufferSize in bytes (Vulkan 1.3), or `u64::MAX` when unknown.
    pub max_buffer_size: u64,
    /// minStorageBufferOffsetAlignment in bytes: slice offsets must be multiples of it.
    pub min_storage_buffer_offset_alignment: u64,
    /// minUniformBufferOffsetAlignment in bytes.
    pub min_uniform_buffer_offset_alignment: u64,
    /// maxPushConstantsSize in bytes.
    pub max_push_constants_size: u32,
    /// Whether the compute queue writes timestamps.
    pub timestamps: bool,
    /// Nanoseconds per timestamp tick.
    pub timestamp_period_ns: f32,
    /// VK_KHR_cooperative_matrix is available.
    pub cooperative_matrix: bool,
    /// VK_KHR_shader_clock is available.
    pub shader_clock: bool,
    /// shaderFloat16 is supported.
    pub float16: bool,
    /// VK_KHR_push_descriptor is available.
    pub push_descriptor: bool,
    /// A transfer-only queue family exists (used for staging copies).
    pub transfer_queue: bool,
    /// `VK_KHR_pipeline_executable_properties` is available with its
    /// `pipelineExecutableInfo` feature: pipeline statistics can be had
    /// ([`DeviceOptions::pipeline_statistics`](crate::DeviceOptions::pipeline_statistics)).
    pub pipeline_executable_properties: bool,
    /// Bytes of device-local memory the host can map (ReBAR), 0 if none.
    pub host_visible_device_memory: u64,
    /// Size of the largest device-local heap in bytes.
    pub device_local_memory: u64,
    /// Streaming multiprocessors (NVIDIA, VK_NV_shader_sm_builtins) or compute
    /// units (AMD, VK_AMD_shader_core_properties); 0 when the driver does not say.
    pub compute_units: u32,
    /// Invocations one compute unit keeps resident at most (warps per SM ×
    /// warp size on NVIDIA, waves per CU × wave size on AMD); 0 when unknown.
    pub max_threads_per_compute_unit: u32,
    /// Subgroup arithmetic (`subgroupAdd`, `subgroupMax`, ...) in compute shaders.
    pub subgroup_arithmetic: bool,
    /// storageBuffer16BitAccess: 16-bit values in storage buffers.
    pub storage_buffer16: bool,
    /// `VK_EXT_shader_atomic_float` with `shaderBufferFloat32AtomicAdd`:
    /// atomic adds of f32 values in storage buffers (the tensor-core
    /// streaming linear kernel's K layers add into an in-place residual
    /// with them, and the fused SwiGLU MLP's down projection adds its
    /// workgroups' parts).
    pub float32_atomic_add: bool,
    /// The adapter lists `VK_KHR_portability_subset`: a portability
    /// implementation (MoltenVK over Metal) that leaves parts of Vulkan
    /// out; the device is created with the extension enabled.
    pub portability_subset: bool,
    /// Shapes from vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR, on a
    /// created [`Device`](crate::Device) where VK_KHR_cooperative_matrix and
    /// its feature were enabled; empty otherwise (and in
    /// [`Device::adapters`](crate::Device::adapters)).
    pub cooperative_matrix_shapes: Vec<crate::coopmat::CoopMatShape>,
    /// Shapes from vkGetPhysicalDeviceCooperativeMatrixPropertiesNV, on a
    /// created device where VK_NV_cooperative_matrix and its feature were
    /// enabled; empty otherwise.
    pub cooperative_matrix_nv_shapes: Vec<crate::coopmat::CoopMatShape>,
    /// The cooperative-matrix feature structures (KHR, NV and
    /// `VK_NV_cooperative_matrix2`'s features, properties and flexible
    /// shapes), on a created device; default (nothing) otherwise.
    pub cooperative_matrix_features: crate::coopmat::CoopMatFeatures,
}

impl AdapterInfo {
    /// A sort key: better adapters compare greater.
    pub(crate) fn score(&self) -> (u8, u64) {
        (self.adapter_type.rank(), self.device_local_memory)
    }
}

/// Whether push descriptors are the better default on this adapter. On
/// NVIDIA (driver 580, H200) recording a dispatch under a push-descriptor
/// layout cost about 50 ns more than under an ordinary bound set, even with
/// nothing re-pushed (docs/PERF.md); pooled sets win there. Elsewhere push
/// descriptors avoid allocating and writing a set per binding change.
pub(crate) fn prefer_push_descriptors(info: &AdapterInfo) -> bool {
    const NVIDIA: u32 = 0x10de;
    info.vendor_id != NVIDIA
}

/// Picks an adapter: by `request` (an index, or a case-insensitive name
/// fragment) when given, else the best by type (discrete > integrated >
/// virtual > CPU), then by device-local memory, then by enumeration order.
pub(crate) fn pick(adapters: &[AdapterInfo], request: Option<&str>) -> Result<usize> {
    if adapters.is_empty() {
        return Err(Error::NoAdapter);
    }
    if let Some(req) = request.map(str::trim).filter(|r| !r.is_empty()) {
        let found = match req.parse::<usize>() {
            Ok(i) => adapters.iter().position(|a| a.index == i),
            Err(_) => {
                let needle = req.to_lowercase();
                adapters
                    .iter()
                    .position(|a| a.name.to_lowercase().contains(&needle))
            }
        };
        return found.ok_or_else(|| Error::AdapterNotFound {
            requested: req.to_string(),
            available: adapters
                .iter()
                .map(|a| format!("{}: {}", a.index, a.name))
                .collect(),
        });
    }
    let mut best = 0;
    for (i, a) in adapters.iter().enumerate() {
        if a.score() > adapters[best].score() {
            best = i;
        }
    }
    Ok(best)
}

#[cfg(test)]
pub(crate) fn fake(index: usize, name: &str, ty: AdapterType, mem: u64) -> AdapterInfo {
    AdapterInfo {
        index,
        name: name.into(),
        adapter_type: ty,
        vendor_id: 0,
        device_id: 0,
        driver_name: String::new(),
        driver_info: String::new(),
        driver_version: 0,
        pipeline_cache_uuid: [0; 16],
        device_uuid: [0; 16],
        api_version: (1, 3, 0),
        subgroup_size: 32,
        max_workgroup_size: [1024, 1024, 64],
        max_workgroup_count: [65535; 3],
        max_workgroup_invocations: 1024,
        max_shared_memory: 32768,
        max_storage_buffer_range: 1 << 27,
        max_uniform_buffer_range: 65536,
        max_memory_allocation_size: 1 << 31,
        max_buffer_size: u64::MAX,
        min_storage_buffer_offset_alignment: 16,
        min_uniform_buffer_offset_alignment: 64,
        max_push_constants_size: 128,
        timestamps: true,
        timestamp_period_ns: 1.0,
        cooperative_matrix: false,
        shader_clock: false,
        float16: false,
        push_descriptor: true,
        transfer_queue: false,
        pipeline_executable_properties: false,
        host_visible_device_memory: 0,
        device_local_memory: mem,
        compute_units: 0,
        max_threads_per_compute_unit: 0,
        subgroup_arithmetic: true,
        storage_buffer16: false,
        float32_atomic_add: false,
        portability_subset: false,
        cooperative_matrix_shapes: Vec::new(),
        cooperative_matrix_nv_shapes: Vec::new(),
        cooperative_matrix_features: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set() -> Vec<AdapterInfo> {
        vec![
            fake(
                0,
                "llvmpipe (LLVM 15.0.6, 256 bits)",
                AdapterType::Cpu,
                1 << 30,
            ),
            fake(1, "Intel(R) UHD Graphics", AdapterType::Integrated, 1 << 32),
            fake(2, "NVIDIA H200", AdapterType::Discrete, 140 << 30),
            fake(3, "NVIDIA H100", AdapterType::Discrete, 80 << 30),
        ]
    }

    #[test]
    fn descriptor_strategy_per_vendor() {
        let mut nv = fake(0, "NVIDIA H200", AdapterType::Discrete, 1);
        nv.vendor_id = 0x10de;
        assert!(!prefer_push_descriptors(&nv));
        let mut lvp = fake(0, "llvmpipe", AdapterType::Cpu, 1);
        lvp.vendor_id = 0x10005;
        assert!(prefer_push_descriptors(&lvp));
    }

    #[test]
    fn prefers_discrete_then_memory() {
        assert_eq!(pick(&set(), None).unwrap(), 2);
        let mut s = set();
        s.truncate(2);
        assert_eq!(pick(&s, None).unwrap(), 1);
        s.truncate(1);
        assert_eq!(pick(&s, None).unwrap(), 0);
    }

    #[test]
    fn ties_keep_enumeration_order() {
        let s = vec![
            fake(0, "a", AdapterType::Discrete, 8),
            fake(1, "b", AdapterType::Discrete, 8),
        ];
        assert_eq!(pick(&s, None).unwrap(), 0);
    }

    #[test]
    fn override_by_index_or_name() {
        assert_eq!(pick(&set(), Some("0")).unwrap(), 0);
        assert_eq!(pick(&set(), Some(" 3 ")).unwrap(), 3);
        assert_eq!(pick(&set(), Some("llvmpipe")).unwrap(), 0);
        assert_eq!(pick(&set(), Some("h100")).unwrap(), 3);
        assert_eq!(pick(&set(), Some("")).unwrap(), 2);
    }

    #[test]
    fn unknown_override_lists_what_exists() {
        match pick(&set(), Some("9")) {
            Err(Error::AdapterNotFound {
                requested,
                available,
            }) => {
                assert_eq!(requested, "9");
                assert_eq!(available.len(), 4);
                assert!(available[2].contains("H200"));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(
            pick(&set(), Some("radeon")),
            Err(Error::AdapterNotFound { .. })
        ));
        assert!(matches!(pick(&[], None), Err(Error::NoAdapter)));
    }
}
