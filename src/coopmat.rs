//! Cooperative matrices (tensor cores): which shapes the adapter offers, and
//! the extension and feature to enable at device creation.
//!
//! Two extensions describe them: `VK_KHR_cooperative_matrix` and NVIDIA's
//! older `VK_NV_cooperative_matrix`. Both are enabled when the adapter has
//! them (with their `cooperativeMatrix` feature), and each one's list of
//! shapes (`vkGetPhysicalDeviceCooperativeMatrixProperties{KHR,NV}`) lands
//! in [`AdapterInfo`](crate::AdapterInfo). The built-in f16 matmul kernel is
//! GLSL written against `GL_NV_cooperative_matrix`, the one the glslang in
//! use compiles, so it runs where the NV list holds its shape.
//!
//! A third, `VK_NV_cooperative_matrix2` (workgroup-scope matrices, flexible
//! dimensions, tensor-layout loads; [`nv2`]), extends the KHR one: it is
//! enabled with its features where the adapter lists it beside KHR, and
//! what it reports lands in [`CoopMatFeatures::nv2`].

use std::ffi::CStr;

use ash::vk;

pub(crate) mod nv2;

/// Element type of a cooperative matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CoopComponent {
    /// 16-bit float.
    F16,
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
    /// Signed 8-bit integer.
    I8,
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 32-bit integer.
    U32,
    /// Any other type, by its raw `VkComponentTypeKHR` value.
    Other(i32),
}

impl CoopComponent {
    fn from_raw(raw: i32) -> CoopComponent {
        // VkComponentTypeKHR and VkComponentTypeNV share their values.
        match vk::ComponentTypeKHR::from_raw(raw) {
            vk::ComponentTypeKHR::FLOAT16 => CoopComponent::F16,
            vk::ComponentTypeKHR::FLOAT32 => CoopComponent::F32,
            vk::ComponentTypeKHR::FLOAT64 => CoopComponent::F64,
            vk::ComponentTypeKHR::SINT8 => CoopComponent::I8,
            vk::ComponentTypeKHR::UINT8 => CoopComponent::U8,
            vk::ComponentTypeKHR::SINT32 => CoopComponent::I32,
            vk::ComponentTypeKHR::UINT32 => CoopComponent::U32,
            _ => CoopComponent::Other(raw),
        }
    }
}

/// One cooperative-matrix multiply the adapter supports:
/// `Result[M×N] = A[M×K] · B[K×N] + C[M×N]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CoopMatShape {
    /// Rows of A, C and the result.
    pub m: u32,
    /// Columns of B, C and the result.
    pub n: u32,
    /// Columns of A, rows of B.
    pub k: u32,
    /// Element type of A.
    pub a: CoopComponent,
    /// Element type of B.
    pub b: CoopComponent,
    /// Element type of C.
    pub c: CoopComponent,
    /// Element type of the result.
    pub result: CoopComponent,
    /// Subgroup scope (the only scope the built-in kernels use).
    pub subgroup_scope: bool,
}

impl CoopMatShape {
    /// Whether this is the 16×16×16 f16 · f16 + f32 → f32 subgroup shape the
    /// built-in f16 matmul uses.
    pub fn is_f16_f32_16x16x16(&self) -> bool {
        (self.m, self.n, self.k) == (16, 16, 16)
            && self.a == CoopComponent::F16
            && self.b == CoopComponent::F16
            && self.c == CoopComponent::F32
            && self.result == CoopComponent::F32
            && self.subgroup_scope
    }
}

/// A shape family of `VK_NV_cooperative_matrix2`'s flexible dimensions
/// (`VkCooperativeMatrixFlexibleDimensionsPropertiesNV`): any M, N, K that
/// are multiples of the granularities (up to
/// [`CoopMat2Info::flexible_dimensions_max_dimension`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct CoopMatFlexibleShape {
    /// M is a multiple of this.
    pub m_granularity: u32,
    /// N is a multiple of this.
    pub n_granularity: u32,
    /// K is a multiple of this.
    pub k_granularity: u32,
    /// Element type of A.
    pub a: CoopComponent,
    /// Element type of B.
    pub b: CoopComponent,
    /// Element type of C.
    pub c: CoopComponent,
    /// Element type of the result.
    pub result: CoopComponent,
    /// Integer results saturate.
    pub saturating_accumulation: bool,
    /// Workgroup scope (else subgroup scope).
    pub workgroup_scope: bool,
    /// Invocations per workgroup this shape needs (workgroup scope).
    pub workgroup_invocations: u32,
}

impl CoopMatFlexibleShape {
    /// Whether this is a workgroup-scope f16 · f16 + f32 → f32 family for
    /// workgroups of `invocations` invocations.
    pub fn is_f16_f32_workgroup(&self, invocations: u32) -> bool {
        self.a == CoopComponent::F16
            && self.b == CoopComponent::F16
            && self.c == CoopComponent::F32
            && self.result == CoopComponent::F32
            && self.workgroup_scope
            && self.workgroup_invocations == invocations
    }
}

/// What `VK_NV_cooperative_matrix2` reports: its features
/// (`VkPhysicalDeviceCooperativeMatrix2FeaturesNV`), properties
/// (`VkPhysicalDeviceCooperativeMatrix2PropertiesNV`) and flexible shapes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct CoopMat2Info {
    /// `cooperativeMatrixWorkgroupScope`.
    pub workgroup_scope: bool,
    /// `cooperativeMatrixFlexibleDimensions`.
    pub flexible_dimensions: bool,
    /// `cooperativeMatrixReductions`.
    pub reductions: bool,
    /// `cooperativeMatrixConversions`.
    pub conversions: bool,
    /// `cooperativeMatrixPerElementOperations`.
    pub per_element_operations: bool,
    /// `cooperativeMatrixTensorAddressing`.
    pub tensor_addressing: bool,
    /// `cooperativeMatrixBlockLoads`.
    pub block_loads: bool,
    /// `cooperativeMatrixWorkgroupScopeMaxWorkgroupSize`.
    pub workgroup_scope_max_workgroup_size: u32,
    /// `cooperativeMatrixFlexibleDimensionsMaxDimension`.
    pub flexible_dimensions_max_dimension: u32,
    /// `cooperativeMatrixWorkgroupScopeReservedSharedMemory`: bytes of
    /// shared memory a workgroup-scope kernel must leave free.
    pub workgroup_scope_reserved_shared_memory: u32,
    /// From `vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV`.
    pub flexible_shapes: Vec<CoopMatFlexibleShape>,
}

impl CoopMat2Info {
    /// The finest (M, N, K) granularity (the smallest product) among the
    /// flexible workgroup-scope f16 · f16 + f32 → f32 shapes for
    /// workgroups of `invocations`, or `None` where none is listed.
    pub(crate) fn f16_workgroup_granularity(&self, invocations: u32) -> Option<[u32; 3]> {
        self.flexible_shapes
            .iter()
            .filter(|s| s.is_f16_f32_workgroup(invocations))
            .map(|s| [s.m_granularity, s.n_granularity, s.k_granularity])
            .min_by_key(|g| u64::from(g[0]) * u64::from(g[1]) * u64::from(g[2]))
    }
}

/// The cooperative-matrix feature structures of a created device: what
/// each extension reported (and was enabled with).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct CoopMatFeatures {
    /// `VK_KHR_cooperative_matrix`: `cooperativeMatrixRobustBufferAccess`.
    pub khr_robust_buffer_access: bool,
    /// `VK_NV_cooperative_matrix`: `cooperativeMatrixRobustBufferAccess`.
    pub nv_robust_buffer_access: bool,
    /// `VK_NV_cooperative_matrix2`, where the adapter lists it beside the
    /// KHR extension (and the device enabled it).
    pub nv2: Option<CoopMat2Info>,
}

const KHR: &CStr = c"VK_KHR_cooperative_matrix";
const NV: &CStr = c"VK_NV_cooperative_matrix";

/// What device creation learned about cooperative matrices.
#[derive(Default)]
pub(crate) struct CoopProbe {
    /// The KHR extension and its feature are present (to enable).
    pub khr: bool,
    /// The NV extension and its feature are present (to enable).
    pub nv: bool,
    /// Shapes from the KHR query (empty unless `khr`).
    pub khr_shapes: Vec<CoopMatShape>,
    /// Shapes from the NV query (empty unless `nv`).
    pub nv_shapes: Vec<CoopMatShape>,
    /// `VK_NV_cooperative_matrix2`'s features as queried (to enable, with
    /// the extension, when `Some`; only beside `khr`).
    pub nv2: Option<nv2::Features2Nv>,
    /// What the feature structures reported.
    pub features: CoopMatFeatures,
}

impl CoopProbe {
    /// Extension names to enable.
    pub(crate) fn extensions(&self) -> Vec<*const std::ffi::c_char> {
        let mut out = Vec::new();
        if self.khr {
            out.push(KHR.as_ptr());
        }
        if self.nv {
            out.push(NV.as_ptr());
        }
        if self.nv2.is_some() {
            out.push(nv2::NAME.as_ptr());
        }
        out
    }
}

/// Reads extensions, features and shapes of cooperative matrices on `pd`.
/// Failures of the optional queries leave the extension off.
pub(crate) fn probe(
    entry: &ash::Entry,
    instance: &ash::Instance,
    pd: vk::PhysicalDevice,
) -> CoopProbe {
    let mut out = CoopProbe::default();
    // SAFETY: `pd` belongs to `instance`; the queries fill plain structs and
    // vectors sized from the counts the driver returned, and the p_next
    // chain points at locals alive across the call.
    unsafe {
        let Ok(exts) = instance.enumerate_device_extension_properties(pd) else {
            return out;
        };
        let has = |name: &CStr| {
            exts.iter()
                .any(|e| e.extension_name_as_c_str().ok() == Some(name))
        };
        let (has_khr, has_nv, has_nv2) = (has(KHR), has(NV), has(nv2::NAME));
        if !has_khr && !has_nv {
            return out;
        }
        let mut fk = vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default();
        let mut fnv = vk::PhysicalDeviceCooperativeMatrixFeaturesNV::default();
        let mut chain = vk::PhysicalDeviceFeatures2::default();
        if has_khr {
            chain = chain.push_next(&mut fk);
        }
        if has_nv {
            chain = chain.push_next(&mut fnv);
        }
        instance.get_physical_device_features2(pd, &mut chain);
        out.features.khr_robust_buffer_access =
            fk.cooperative_matrix_robust_buffer_access == vk::TRUE;
        out.features.nv_robust_buffer_access =
            fnv.cooperative_matrix_robust_buffer_access == vk::TRUE;
        if has_khr && fk.cooperative_matrix == vk::TRUE {
            let loader = ash::khr::cooperative_matrix::Instance::new(entry, instance);
            if let Ok(props) = loader.get_physical_device_cooperative_matrix_properties(pd) {
                out.khr = true;
                out.khr_shapes = props
                    .iter()
                    .map(|p| CoopMatShape {
                        m: p.m_size,
                        n: p.n_size,
                        k: p.k_size,
                        a: CoopComponent::from_raw(p.a_type.as_raw()),
                        b: CoopComponent::from_raw(p.b_type.as_raw()),
                        c: CoopComponent::from_raw(p.c_type.as_raw()),
                        result: CoopComponent::from_raw(p.result_type.as_raw()),
                        subgroup_scope: p.scope == vk::ScopeKHR::SUBGROUP,
                    })
                    .collect();
            }
        }
        if has_nv && fnv.cooperative_matrix == vk::TRUE {
            let loader = ash::nv::cooperative_matrix::Instance::new(entry, instance);
            let f = loader
                .fp()
                .get_physical_device_cooperative_matrix_properties_nv;
            let mut count = 0u32;
            if f(pd, &mut count, std::ptr::null_mut()) == vk::Result::SUCCESS {
                let mut props = vec![vk::CooperativeMatrixPropertiesNV::default(); count as usize];
                let r = f(pd, &mut count, props.as_mut_ptr());
                if r == vk::Result::SUCCESS || r == vk::Result::INCOMPLETE {
                    props.truncate(count as usize);
                    out.nv = true;
                    out.nv_shapes = props
                        .iter()
                        .map(|p| CoopMatShape {
                            m: p.m_size,
                            n: p.n_size,
                            k: p.k_size,
                            a: CoopComponent::from_raw(p.a_type.as_raw()),
                            b: CoopComponent::from_raw(p.b_type.as_raw()),
                            c: CoopComponent::from_raw(p.c_type.as_raw()),
                            result: CoopComponent::from_raw(p.d_type.as_raw()),
                            subgroup_scope: p.scope == vk::ScopeNV::SUBGROUP,
                        })
                        .collect();
                }
            }
        }
        // The second NV extension extends the KHR one: only beside it.
        if out.khr {
            if let Some((features, info)) = nv2::probe(entry, instance, pd, has_nv2) {
                out.nv2 = Some(features);
                out.features.nv2 = Some(info);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn component_types_map_from_raw_values() {
        assert_eq!(
            CoopComponent::from_raw(vk::ComponentTypeKHR::FLOAT16.as_raw()),
            CoopComponent::F16
        );
        assert_eq!(
            CoopComponent::from_raw(vk::ComponentTypeNV::FLOAT32.as_raw()),
            CoopComponent::F32
        );
        assert_eq!(CoopComponent::from_raw(1000), CoopComponent::Other(1000));
    }

    #[test]
    fn the_f16_shape_is_recognised() {
        let mut s = CoopMatShape {
            m: 16,
            n: 16,
            k: 16,
            a: CoopComponent::F16,
            b: CoopComponent::F16,
            c: CoopComponent::F32,
            result: CoopComponent::F32,
            subgroup_scope: true,
        };
        assert!(s.is_f16_f32_16x16x16());
        s.n = 8;
        assert!(!s.is_f16_f32_16x16x16());
        s.n = 16;
        s.c = CoopComponent::F16;
        assert!(!s.is_f16_f32_16x16x16());
    }
}
