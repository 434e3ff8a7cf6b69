//! The SPIR-V capabilities a kernel declares, checked against the device
//! features enabled at creation: a kernel that needs a feature the device
//! does not have is refused with [`Error::MissingFeature`] naming the
//! capability and the feature, before any driver sees it (drivers answer
//! such a module with `VK_ERROR_UNKNOWN`, a validation error, or worse).
//!
//! Only capabilities whose feature vkcompute enables conditionally are
//! checked; every other capability is left to the SPIR-V validator and the
//! driver.

use ash::vk;

use crate::error::{Error, Result};

/// VK_NV_cooperative_matrix2's features that SPIR-V capabilities depend
/// on, as enabled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Coopmat2Enabled {
    pub reductions: bool,
    pub conversions: bool,
    pub per_element_operations: bool,
    pub tensor_addressing: bool,
    pub block_loads: bool,
}

/// Device features that SPIR-V capabilities depend on, as enabled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ShaderFeatures {
    pub float16: bool,
    pub float64: bool,
    pub int8: bool,
    pub int16: bool,
    pub int64: bool,
    pub storage16: bool,
    pub uniform_storage16: bool,
    pub storage8: bool,
    pub uniform_storage8: bool,
    pub memory_model: bool,
    /// `vulkanMemoryModelDeviceScope` (the megakernel's device-scope
    /// atomics need it beside `memory_model`).
    pub memory_model_device_scope: bool,
    pub buffer_device_address: bool,
    /// VK_KHR_shader_clock with either clock.
    pub shader_clock: bool,
    /// VK_KHR_shader_clock with `shaderDeviceClock`.
    pub device_clock: bool,
    /// VK_KHR_shader_clock with `shaderSubgroupClock`.
    pub subgroup_clock: bool,
    pub coopmat_nv: bool,
    pub coopmat_khr: bool,
    /// `shaderBufferInt64Atomics`: 64-bit atomics on storage buffers.
    pub int64_atomics: bool,
    /// `subgroupSizeControl` (Vulkan 1.3).
    pub subgroup_size_control: bool,
    /// `computeFullSubgroups` (Vulkan 1.3).
    pub compute_full_subgroups: bool,
    /// `timelineSemaphore` (Vulkan 1.2): every ticket waits on one.
    pub timeline_semaphore: bool,
    /// `shaderBufferFloat32AtomicAdd` (VK_EXT_shader_atomic_float).
    pub float32_atomic_add: bool,
    /// VK_NV_cooperative_matrix2's features, as enabled.
    pub coopmat2_reductions: bool,
    pub coopmat2_conversions: bool,
    pub coopmat2_per_element: bool,
    pub coopmat2_tensor_addressing: bool,
    pub coopmat2_block_loads: bool,
}

impl ShaderFeatures {
    /// What a device created with these feature structures has enabled
    /// (`f13`: the Vulkan 1.3 structure when the device is 1.3; `clock`:
    /// VK_KHR_shader_clock's structure when the extension is enabled;
    /// `coop_*`: the cooperative-matrix extensions with their feature).
    pub(crate) fn enabled(
        core: &vk::PhysicalDeviceFeatures,
        f11: &vk::PhysicalDeviceVulkan11Features<'_>,
        f12: &vk::PhysicalDeviceVulkan12Features<'_>,
        f13: Option<&vk::PhysicalDeviceVulkan13Features<'_>>,
        clock: Option<&vk::PhysicalDeviceShaderClockFeaturesKHR<'_>>,
        coop_nv: bool,
        coop_khr: bool,
    ) -> ShaderFeatures {
        let on = |b: vk::Bool32| b == vk::TRUE;
        let device_clock = clock.is_some_and(|c| on(c.shader_device_clock));
        let subgroup_clock = clock.is_some_and(|c| on(c.shader_subgroup_clock));
        ShaderFeatures {
            float16: on(f12.shader_float16),
            float64: on(core.shader_float64),
            int8: on(f12.shader_int8),
            int16: on(core.shader_int16),
            int64: on(core.shader_int64),
            storage16: on(f11.storage_buffer16_bit_access),
            uniform_storage16: on(f11.uniform_and_storage_buffer16_bit_access),
            storage8: on(f12.storage_buffer8_bit_access),
            uniform_storage8: on(f12.uniform_and_storage_buffer8_bit_access),
            memory_model: on(f12.vulkan_memory_model),
            memory_model_device_scope: on(f12.vulkan_memory_model_device_scope),
            buffer_device_address: on(f12.buffer_device_address),
            shader_clock: device_clock || subgroup_clock,
            device_clock,
            subgroup_clock,
            coopmat_nv: coop_nv,
            coopmat_khr: coop_khr,
            int64_atomics: on(f12.shader_buffer_int64_atomics),
            subgroup_size_control: f13.is_some_and(|f| on(f.subgroup_size_control)),
            compute_full_subgroups: f13.is_some_and(|f| on(f.compute_full_subgroups)),
            timeline_semaphore: on(f12.timeline_semaphore),
            ..ShaderFeatures::default()
        }
    }

    /// The same with VK_NV_cooperative_matrix2 enabled with these
    /// features, when `Some`.
    pub(crate) fn with_coopmat2(self, nv2: Option<Coopmat2Enabled>) -> ShaderFeatures {
        let Some(f) = nv2 else { return self };
        ShaderFeatures {
            coopmat2_reductions: f.reductions,
            coopmat2_conversions: f.conversions,
            coopmat2_per_element: f.per_element_operations,
            coopmat2_tensor_addressing: f.tensor_addressing,
            coopmat2_block_loads: f.block_loads,
            ..self
        }
    }

    /// The same with f32 atomic adds on storage buffers enabled or not.
    pub(crate) fn with_float32_atomic_add(self, on: bool) -> ShaderFeatures {
        ShaderFeatures {
            float32_atomic_add: on,
            ..self
        }
    }

    /// `vulkanMemoryModel` with device scope: what device-scope atomics
    /// with acquire and release semantics need (the megakernel's).
    pub(crate) fn device_scope_memory_model(&self) -> bool {
        self.memory_model && self.memory_model_device_scope
    }

    /// The capability's name and the feature it needs, when that feature
    /// is off (pure).
    fn lacks(&self, capability: u32) -> Option<(&'static str, &'static str)> {
        let (name, feature, have) = match capability {
            9 => ("Float16", "shaderFloat16", self.float16),
            10 => ("Float64", "shaderFloat64", self.float64),
            11 => ("Int64", "shaderInt64", self.int64),
            12 => (
                "Int64Atomics",
                "shaderBufferInt64Atomics",
                self.int64_atomics,
            ),
            22 => ("Int16", "shaderInt16", self.int16),
            39 => ("Int8", "shaderInt8", self.int8),
            4433 => (
                "StorageBuffer16BitAccess",
                "storageBuffer16BitAccess",
                self.storage16,
            ),
            4434 => (
                "UniformAndStorageBuffer16BitAccess",
                "uniformAndStorageBuffer16BitAccess",
                self.uniform_storage16,
            ),
            4448 => (
                "StorageBuffer8BitAccess",
                "storageBuffer8BitAccess",
                self.storage8,
            ),
            4449 => (
                "UniformAndStorageBuffer8BitAccess",
                "uniformAndStorageBuffer8BitAccess",
                self.uniform_storage8,
            ),
            5055 => ("ShaderClockKHR", "VK_KHR_shader_clock", self.shader_clock),
            5345 => ("VulkanMemoryModel", "vulkanMemoryModel", self.memory_model),
            5347 => (
                "PhysicalStorageBufferAddresses",
                "bufferDeviceAddress",
                self.buffer_device_address,
            ),
            5357 => (
                "CooperativeMatrixNV",
                "VK_NV_cooperative_matrix",
                self.coopmat_nv,
            ),
            5430 => (
                "CooperativeMatrixReductionsNV",
                "cooperativeMatrixReductions (VK_NV_cooperative_matrix2)",
                self.coopmat2_reductions,
            ),
            5431 => (
                "CooperativeMatrixConversionsNV",
                "cooperativeMatrixConversions (VK_NV_cooperative_matrix2)",
                self.coopmat2_conversions,
            ),
            5432 => (
                "CooperativeMatrixPerElementOperationsNV",
                "cooperativeMatrixPerElementOperations (VK_NV_cooperative_matrix2)",
                self.coopmat2_per_element,
            ),
            5433 => (
                "CooperativeMatrixTensorAddressingNV",
                "cooperativeMatrixTensorAddressing (VK_NV_cooperative_matrix2)",
                self.coopmat2_tensor_addressing,
            ),
            5434 => (
                "CooperativeMatrixBlockLoadsNV",
                "cooperativeMatrixBlockLoads (VK_NV_cooperative_matrix2)",
                self.coopmat2_block_loads,
            ),
            // SPV_NV_tensor_addressing's tensor layouts and views: Vulkan
            // allows them with cooperativeMatrixTensorAddressing.
            5439 => (
                "TensorAddressingNV",
                "cooperativeMatrixTensorAddressing (VK_NV_cooperative_matrix2)",
                self.coopmat2_tensor_addressing,
            ),
            6033 => (
                "AtomicFloat32AddEXT",
                "shaderBufferFloat32AtomicAdd (VK_EXT_shader_atomic_float)",
                self.float32_atomic_add,
            ),
            6022 => (
                "CooperativeMatrixKHR",
                "VK_KHR_cooperative_matrix",
                self.coopmat_khr,
            ),
            _ => return None,
        };
        (!have).then_some((name, feature))
    }
}

/// The operands of every `OpCapability` in a module (pure). `words` holds a
/// header-checked module; a malformed instruction ends the scan (the
/// validator reports it).
pub(crate) fn declared(words: &[u32]) -> Vec<u32> {
    const OP_CAPABILITY: u32 = 17;
    const OP_MEMORY_MODEL: u32 = 14;
    let mut out = Vec::new();
    let mut i = 5;
    while i < words.len() {
        let (count, op) = ((words[i] >> 16) as usize, words[i] & 0xffff);
        if count == 0 || i + count > words.len() || op == OP_MEMORY_MODEL {
            break; // capabilities all come before OpMemoryModel
        }
        if op == OP_CAPABILITY && count == 2 {
            out.push(words[i + 1]);
        }
        i += count;
    }
    out
}

/// [`Error::MissingFeature`] for the first capability `words` declares
/// whose feature `have` lacks.
pub(crate) fn check(words: &[u32], have: &ShaderFeatures, adapter: &str) -> Result<()> {
    for cap in declared(words) {
        if let Some((capability, feature)) = have.lacks(cap) {
            return Err(Error::MissingFeature {
                capability,
                feature,
                adapter: adapter.to_string(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header, the given capabilities, then OpMemoryModel and one
    /// capability after it (which must not count).
    fn module(caps: &[u32]) -> Vec<u32> {
        let mut w = vec![0x0723_0203, 0x0001_0300, 0, 100, 0];
        for &c in caps {
            w.extend([(2 << 16) | 17, c]);
        }
        w.extend([(3 << 16) | 14, 0, 1]);
        w.extend([(2 << 16) | 17, 10]);
        w
    }

    #[test]
    fn capabilities_before_the_memory_model_are_read() {
        assert_eq!(declared(&module(&[1, 9, 5357])), vec![1, 9, 5357]);
        assert_eq!(declared(&module(&[])), Vec::<u32>::new());
        // A zero word count or a count past the end stops the scan.
        let mut w = module(&[9]);
        w[5] = 17; // count 0
        assert!(declared(&w).is_empty());
        assert!(declared(&w[..6]).is_empty());
    }

    #[test]
    fn a_missing_feature_is_a_typed_error_naming_both() {
        let none = ShaderFeatures::default();
        assert!(
            check(&module(&[1]), &none, "gpu").is_ok(),
            "Shader needs nothing"
        );
        let e = check(&module(&[1, 9]), &none, "gpu").unwrap_err();
        match e {
            Error::MissingFeature {
                capability,
                feature,
                adapter,
            } => {
                assert_eq!((capability, feature), ("Float16", "shaderFloat16"));
                assert_eq!(adapter, "gpu");
            }
            other => panic!("{other:?}"),
        }
        let e = check(&module(&[5357]), &none, "gpu").unwrap_err();
        assert!(e.to_string().contains("CooperativeMatrixNV"), "{e}");
        // f32 atomic adds need VK_EXT_shader_atomic_float's feature.
        let e = check(&module(&[6033]), &none, "gpu").unwrap_err();
        assert!(
            e.to_string().contains("shaderBufferFloat32AtomicAdd"),
            "{e}"
        );
        let atomics = none.with_float32_atomic_add(true);
        assert!(check(&module(&[6033]), &atomics, "gpu").is_ok());
        let have = ShaderFeatures {
            float16: true,
            coopmat_nv: true,
            ..ShaderFeatures::default()
        };
        assert!(check(&module(&[1, 9, 5357]), &have, "gpu").is_ok());
        // The coopmat2 capabilities need the extension's features.
        let e = check(&module(&[6022, 5433, 5439]), &have, "gpu").unwrap_err();
        assert!(e.to_string().contains("CooperativeMatrixKHR"), "{e}");
        let khr = ShaderFeatures {
            coopmat_khr: true,
            ..have
        };
        let e = check(&module(&[6022, 5433, 5439]), &khr, "gpu").unwrap_err();
        assert!(
            e.to_string().contains("cooperativeMatrixTensorAddressing"),
            "{e}"
        );
        let nv2 = Coopmat2Enabled {
            tensor_addressing: true,
            ..Default::default()
        };
        let cm2 = khr.with_coopmat2(Some(nv2));
        assert!(check(&module(&[6022, 5433, 5439]), &cm2, "gpu").is_ok());
        let e = check(&module(&[6022, 5430]), &cm2, "gpu").unwrap_err();
        assert!(
            e.to_string().contains("CooperativeMatrixReductionsNV"),
            "{e}"
        );
        assert_eq!(khr.with_coopmat2(None), khr);
        // Float64 after OpMemoryModel in `module` is not a declaration.
        assert!(check(&module(&[]), &none, "gpu").is_ok());
    }
}
