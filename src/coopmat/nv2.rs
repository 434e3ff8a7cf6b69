//! `VK_NV_cooperative_matrix2`'s structures and query, defined here by hand
//! (ash 0.38 predates the extension), with the structure-type values and
//! member order of the Vulkan registry (`vulkan_core.h`):
//!
//! - `VkPhysicalDeviceCooperativeMatrix2FeaturesNV`, sType 1000593000
//! - `VkCooperativeMatrixFlexibleDimensionsPropertiesNV`, sType 1000593001
//! - `VkPhysicalDeviceCooperativeMatrix2PropertiesNV`, sType 1000593002
//! - `vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV`

use std::ffi::{c_void, CStr};

use ash::vk;

use super::{CoopComponent, CoopMat2Info, CoopMatFlexibleShape};

/// The extension's name.
pub(crate) const NAME: &CStr = c"VK_NV_cooperative_matrix2";

/// `VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV`.
pub(crate) const STYPE_FEATURES: vk::StructureType = vk::StructureType::from_raw(1_000_593_000);
/// `VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV`.
pub(crate) const STYPE_FLEXIBLE: vk::StructureType = vk::StructureType::from_raw(1_000_593_001);
/// `VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV`.
pub(crate) const STYPE_PROPERTIES: vk::StructureType = vk::StructureType::from_raw(1_000_593_002);

/// `VkPhysicalDeviceCooperativeMatrix2FeaturesNV`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Features2Nv {
    pub s_type: vk::StructureType,
    pub p_next: *mut c_void,
    pub workgroup_scope: vk::Bool32,
    pub flexible_dimensions: vk::Bool32,
    pub reductions: vk::Bool32,
    pub conversions: vk::Bool32,
    pub per_element_operations: vk::Bool32,
    pub tensor_addressing: vk::Bool32,
    pub block_loads: vk::Bool32,
}

impl Default for Features2Nv {
    fn default() -> Self {
        Features2Nv {
            s_type: STYPE_FEATURES,
            p_next: std::ptr::null_mut(),
            workgroup_scope: vk::FALSE,
            flexible_dimensions: vk::FALSE,
            reductions: vk::FALSE,
            conversions: vk::FALSE,
            per_element_operations: vk::FALSE,
            tensor_addressing: vk::FALSE,
            block_loads: vk::FALSE,
        }
    }
}

impl Features2Nv {
    /// The features that SPIR-V capabilities depend on.
    pub(crate) fn enabled(&self) -> crate::spirv_caps::Coopmat2Enabled {
        let on = |b: vk::Bool32| b == vk::TRUE;
        crate::spirv_caps::Coopmat2Enabled {
            reductions: on(self.reductions),
            conversions: on(self.conversions),
            per_element_operations: on(self.per_element_operations),
            tensor_addressing: on(self.tensor_addressing),
            block_loads: on(self.block_loads),
        }
    }
}

// SAFETY: `Features2Nv` starts with sType and pNext like every Vulkan
// structure, and the registry lists VkPhysicalDeviceFeatures2 and
// VkDeviceCreateInfo among the structures it extends.
unsafe impl vk::ExtendsPhysicalDeviceFeatures2 for Features2Nv {}
// SAFETY: as above.
unsafe impl vk::ExtendsDeviceCreateInfo for Features2Nv {}

/// `VkPhysicalDeviceCooperativeMatrix2PropertiesNV`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Properties2Nv {
    pub s_type: vk::StructureType,
    pub p_next: *mut c_void,
    pub workgroup_scope_max_workgroup_size: u32,
    pub flexible_dimensions_max_dimension: u32,
    pub workgroup_scope_reserved_shared_memory: u32,
}

impl Default for Properties2Nv {
    fn default() -> Self {
        Properties2Nv {
            s_type: STYPE_PROPERTIES,
            p_next: std::ptr::null_mut(),
            workgroup_scope_max_workgroup_size: 0,
            flexible_dimensions_max_dimension: 0,
            workgroup_scope_reserved_shared_memory: 0,
        }
    }
}

// SAFETY: sType and pNext first; the registry lists
// VkPhysicalDeviceProperties2 as the structure it extends.
unsafe impl vk::ExtendsPhysicalDeviceProperties2 for Properties2Nv {}

/// `VkCooperativeMatrixFlexibleDimensionsPropertiesNV`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct FlexibleDimensionsNv {
    pub s_type: vk::StructureType,
    pub p_next: *mut c_void,
    pub m_granularity: u32,
    pub n_granularity: u32,
    pub k_granularity: u32,
    pub a_type: vk::ComponentTypeKHR,
    pub b_type: vk::ComponentTypeKHR,
    pub c_type: vk::ComponentTypeKHR,
    pub result_type: vk::ComponentTypeKHR,
    pub saturating_accumulation: vk::Bool32,
    pub scope: vk::ScopeKHR,
    pub workgroup_invocations: u32,
}

impl Default for FlexibleDimensionsNv {
    fn default() -> Self {
        FlexibleDimensionsNv {
            s_type: STYPE_FLEXIBLE,
            p_next: std::ptr::null_mut(),
            m_granularity: 0,
            n_granularity: 0,
            k_granularity: 0,
            a_type: vk::ComponentTypeKHR::FLOAT16,
            b_type: vk::ComponentTypeKHR::FLOAT16,
            c_type: vk::ComponentTypeKHR::FLOAT16,
            result_type: vk::ComponentTypeKHR::FLOAT16,
            saturating_accumulation: vk::FALSE,
            scope: vk::ScopeKHR::SUBGROUP,
            workgroup_invocations: 0,
        }
    }
}

/// `PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV`.
type GetFlexibleDimensions = unsafe extern "system" fn(
    vk::PhysicalDevice,
    *mut u32,
    *mut FlexibleDimensionsNv,
) -> vk::Result;

impl FlexibleDimensionsNv {
    fn shape(&self) -> CoopMatFlexibleShape {
        CoopMatFlexibleShape {
            m_granularity: self.m_granularity,
            n_granularity: self.n_granularity,
            k_granularity: self.k_granularity,
            a: CoopComponent::from_raw(self.a_type.as_raw()),
            b: CoopComponent::from_raw(self.b_type.as_raw()),
            c: CoopComponent::from_raw(self.c_type.as_raw()),
            result: CoopComponent::from_raw(self.result_type.as_raw()),
            saturating_accumulation: self.saturating_accumulation == vk::TRUE,
            workgroup_scope: self.scope == vk::ScopeKHR::WORKGROUP,
            workgroup_invocations: self.workgroup_invocations,
        }
    }
}

/// The extension's features (as queried: `p_next` null), properties and
/// flexible-dimension shapes on `pd`; `None` when the adapter does not list
/// the extension. The caller knows `pd` lists `VK_KHR_cooperative_matrix`
/// (which this extension requires).
pub(crate) fn probe(
    entry: &ash::Entry,
    instance: &ash::Instance,
    pd: vk::PhysicalDevice,
    listed: bool,
) -> Option<(Features2Nv, CoopMat2Info)> {
    if !listed {
        return None;
    }
    let mut features = Features2Nv::default();
    let mut props = Properties2Nv::default();
    // SAFETY: `pd` belongs to `instance`; the chains point at locals alive
    // across each call; the query function is looked up by its registry
    // name and called with the registry's signature, once for the count
    // and once with a vector of that many initialised structures.
    unsafe {
        let mut chain = vk::PhysicalDeviceFeatures2::default().push_next(&mut features);
        instance.get_physical_device_features2(pd, &mut chain);
        let mut pchain = vk::PhysicalDeviceProperties2::default().push_next(&mut props);
        instance.get_physical_device_properties2(pd, &mut pchain);
        features.p_next = std::ptr::null_mut();
        props.p_next = std::ptr::null_mut();
        let mut shapes = Vec::new();
        let name = c"vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV";
        let raw = (entry.static_fn().get_instance_proc_addr)(instance.handle(), name.as_ptr());
        if let Some(f) = raw {
            let f: GetFlexibleDimensions = std::mem::transmute(f);
            let mut count = 0u32;
            if f(pd, &mut count, std::ptr::null_mut()) == vk::Result::SUCCESS {
                let mut list = vec![FlexibleDimensionsNv::default(); count as usize];
                let r = f(pd, &mut count, list.as_mut_ptr());
                if r == vk::Result::SUCCESS || r == vk::Result::INCOMPLETE {
                    list.truncate(count as usize);
                    shapes = list.iter().map(FlexibleDimensionsNv::shape).collect();
                }
            }
        }
        let on = |b: vk::Bool32| b == vk::TRUE;
        let info = CoopMat2Info {
            workgroup_scope: on(features.workgroup_scope),
            flexible_dimensions: on(features.flexible_dimensions),
            reductions: on(features.reductions),
            conversions: on(features.conversions),
            per_element_operations: on(features.per_element_operations),
            tensor_addressing: on(features.tensor_addressing),
            block_loads: on(features.block_loads),
            workgroup_scope_max_workgroup_size: props.workgroup_scope_max_workgroup_size,
            flexible_dimensions_max_dimension: props.flexible_dimensions_max_dimension,
            workgroup_scope_reserved_shared_memory: props.workgroup_scope_reserved_shared_memory,
            flexible_shapes: shapes,
        };
        Some((features, info))
    }
}

#[cfg(test)]
mod tests {
    use std::mem::{align_of, offset_of, size_of};

    use super::*;

    #[test]
    fn structure_types_are_the_registry_values() {
        assert_eq!(STYPE_FEATURES.as_raw(), 1_000_593_000);
        assert_eq!(STYPE_FLEXIBLE.as_raw(), 1_000_593_001);
        assert_eq!(STYPE_PROPERTIES.as_raw(), 1_000_593_002);
        assert_eq!(Features2Nv::default().s_type, STYPE_FEATURES);
        assert_eq!(Properties2Nv::default().s_type, STYPE_PROPERTIES);
        assert_eq!(FlexibleDimensionsNv::default().s_type, STYPE_FLEXIBLE);
    }

    /// The C layout on a 64-bit target: sType (4 bytes, 4 of padding),
    /// pNext (8), then 4-byte members; the size rounds up to 8.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn layouts_match_the_c_structures() {
        assert_eq!(offset_of!(Features2Nv, p_next), 8);
        assert_eq!(offset_of!(Features2Nv, workgroup_scope), 16);
        assert_eq!(offset_of!(Features2Nv, block_loads), 40);
        assert_eq!(size_of::<Features2Nv>(), 48);
        assert_eq!(
            offset_of!(Properties2Nv, workgroup_scope_max_workgroup_size),
            16
        );
        assert_eq!(
            offset_of!(Properties2Nv, workgroup_scope_reserved_shared_memory),
            24
        );
        assert_eq!(size_of::<Properties2Nv>(), 32);
        assert_eq!(offset_of!(FlexibleDimensionsNv, m_granularity), 16);
        assert_eq!(offset_of!(FlexibleDimensionsNv, a_type), 28);
        assert_eq!(
            offset_of!(FlexibleDimensionsNv, saturating_accumulation),
            44
        );
        assert_eq!(offset_of!(FlexibleDimensionsNv, scope), 48);
        assert_eq!(offset_of!(FlexibleDimensionsNv, workgroup_invocations), 52);
        assert_eq!(size_of::<FlexibleDimensionsNv>(), 56);
        for a in [
            align_of::<Features2Nv>(),
            align_of::<Properties2Nv>(),
            align_of::<FlexibleDimensionsNv>(),
        ] {
            assert_eq!(a, 8);
        }
    }

    #[test]
    fn the_features_struct_chains_behind_features2() {
        let mut f = Features2Nv::default();
        let chain = vk::PhysicalDeviceFeatures2::default().push_next(&mut f);
        assert_eq!(chain.p_next, (&raw mut f).cast::<c_void>());
        let mut p = Properties2Nv::default();
        let pchain = vk::PhysicalDeviceProperties2::default().push_next(&mut p);
        assert_eq!(pchain.p_next, (&raw mut p).cast::<c_void>());
    }

    #[test]
    fn flexible_shapes_map_their_fields() {
        let raw = FlexibleDimensionsNv {
            m_granularity: 16,
            n_granularity: 16,
            k_granularity: 16,
            c_type: vk::ComponentTypeKHR::FLOAT32,
            result_type: vk::ComponentTypeKHR::FLOAT32,
            scope: vk::ScopeKHR::WORKGROUP,
            workgroup_invocations: 256,
            ..FlexibleDimensionsNv::default()
        };
        let s = raw.shape();
        assert_eq!(
            (s.m_granularity, s.n_granularity, s.k_granularity),
            (16, 16, 16)
        );
        assert_eq!((s.a, s.b), (CoopComponent::F16, CoopComponent::F16));
        assert_eq!((s.c, s.result), (CoopComponent::F32, CoopComponent::F32));
        assert!(s.workgroup_scope && !s.saturating_accumulation);
        assert_eq!(s.workgroup_invocations, 256);
    }
}
