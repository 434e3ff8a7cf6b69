//! What each optional capability of vkcompute needs from the device, as a
//! table, and the check that turns a missing entry into
//! [`Error::MissingFeature`] naming the capability, the feature and what to
//! do instead.
//!
//! The table is checked where a capability is first used: device creation
//! (timeline semaphores), a megakernel asked for the shader-clock deadline,
//! a cooperative-matrix matmul plan, [`Device::require`](crate::Device::require)
//! for anything a caller is about to rely on. Kernels are checked by the
//! SPIR-V capabilities they declare ([`crate::spirv_caps`]); this table is
//! for what vkcompute itself chooses to use.
//!
//! Portability implementations (MoltenVK on macOS, over Metal) lack several
//! of these; the unit tests check the table against a MoltenVK-like set.

use crate::error::{Error, Result};
use crate::spirv_caps::ShaderFeatures;

/// An optional capability whose device features are checked before use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Capability {
    /// The megakernel's wall-time deadline read from the shader clock
    /// (`DeadlineSource::ShaderClock`).
    MegakernelShaderClock,
    /// 64-bit integer atomics on storage buffers.
    Int64Atomics,
    /// Choosing a compute pipeline's subgroup size, with full subgroups.
    SubgroupSizeControl,
    /// The built-in f16 matmul on cooperative matrices
    /// (`ops::MatmulKernel::CoopMatF16`).
    CooperativeMatrix,
    /// Timeline semaphores: every ticket is a timeline value, so no device
    /// is created without them.
    TimelineSemaphores,
}

/// One feature (or extension with its feature) a capability needs.
struct Need {
    /// The Vulkan name, as the error reports it.
    name: &'static str,
    /// Whether a device with these features has it enabled.
    enabled: fn(&ShaderFeatures) -> bool,
}

const SHADER_CLOCK: Need = Need {
    name: "VK_KHR_shader_clock (shaderDeviceClock or shaderSubgroupClock)",
    enabled: |f| f.shader_clock,
};
const INT64: Need = Need {
    name: "shaderInt64",
    enabled: |f| f.int64,
};
const INT64_ATOMICS: Need = Need {
    name: "shaderBufferInt64Atomics",
    enabled: |f| f.int64_atomics,
};
const SUBGROUP_SIZE_CONTROL: Need = Need {
    name: "subgroupSizeControl (Vulkan 1.3)",
    enabled: |f| f.subgroup_size_control,
};
const FULL_SUBGROUPS: Need = Need {
    name: "computeFullSubgroups (Vulkan 1.3)",
    enabled: |f| f.compute_full_subgroups,
};
const COOPMAT_NV: Need = Need {
    name: "VK_NV_cooperative_matrix (cooperativeMatrix)",
    enabled: |f| f.coopmat_nv,
};
const FLOAT16: Need = Need {
    name: "shaderFloat16",
    enabled: |f| f.float16,
};
const STORAGE16: Need = Need {
    name: "storageBuffer16BitAccess",
    enabled: |f| f.storage16,
};
const TIMELINE: Need = Need {
    name: "timelineSemaphore (Vulkan 1.2)",
    enabled: |f| f.timeline_semaphore,
};

impl Capability {
    /// Every capability in the table.
    pub const ALL: [Capability; 5] = [
        Capability::MegakernelShaderClock,
        Capability::Int64Atomics,
        Capability::SubgroupSizeControl,
        Capability::CooperativeMatrix,
        Capability::TimelineSemaphores,
    ];

    /// What the capability needs, all of it.
    fn needs(self) -> &'static [Need] {
        match self {
            Capability::MegakernelShaderClock => &[SHADER_CLOCK],
            Capability::Int64Atomics => &[INT64, INT64_ATOMICS],
            Capability::SubgroupSizeControl => &[SUBGROUP_SIZE_CONTROL, FULL_SUBGROUPS],
            // The built-in kernel is GLSL written against the NV extension
            // and loads f16 values from storage buffers.
            Capability::CooperativeMatrix => &[COOPMAT_NV, FLOAT16, STORAGE16],
            Capability::TimelineSemaphores => &[TIMELINE],
        }
    }

    /// The Vulkan names of the features the capability needs.
    pub fn features(self) -> Vec<&'static str> {
        self.needs().iter().map(|n| n.name).collect()
    }

    /// The capability as [`Error::MissingFeature`] names it: what it is,
    /// and what to use where the device lacks it.
    pub fn describe(self) -> &'static str {
        match self {
            Capability::MegakernelShaderClock => {
                "the megakernel's shader-clock deadline (DeadlineSource::ShaderClock; \
                 DeadlineSource::IterationBudget needs no clock)"
            }
            Capability::Int64Atomics => {
                "64-bit buffer atomics (use 32-bit atomics, or split a counter into two words)"
            }
            Capability::SubgroupSizeControl => {
                "subgroup size control (kernels then run at the adapter's default subgroup size)"
            }
            Capability::CooperativeMatrix => {
                "the cooperative-matrix f16 matmul (MatmulKernel::CoopMatF16; ops::matmul_f16 \
                 widens to f32 instead)"
            }
            Capability::TimelineSemaphores => {
                "timeline semaphores (every ticket is one; drivers of Vulkan 1.2 or later \
                 have them: update the driver)"
            }
        }
    }
}

/// The first feature `capability` needs that `enabled` lacks (pure).
pub(crate) fn missing(capability: Capability, enabled: &ShaderFeatures) -> Option<&'static str> {
    capability
        .needs()
        .iter()
        .find(|n| !(n.enabled)(enabled))
        .map(|n| n.name)
}

/// [`Error::MissingFeature`] when `enabled` lacks something `capability`
/// needs on adapter `adapter`.
pub(crate) fn check(capability: Capability, enabled: &ShaderFeatures, adapter: &str) -> Result<()> {
    match missing(capability, enabled) {
        None => Ok(()),
        Some(feature) => Err(Error::MissingFeature {
            capability: capability.describe(),
            feature,
            adapter: adapter.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What MoltenVK 1.2 on Apple silicon reports (Vulkan 1.2 over Metal,
    /// through VK_KHR_portability_subset): timeline semaphores, 16-bit
    /// storage and f16 arithmetic, 64-bit integers, subgroup size control;
    /// no shader clock, no 64-bit buffer atomics, no cooperative matrices.
    /// Written from MoltenVK's documented feature list: this machine has
    /// no MoltenVK (nor macOS), so no test here reads a real one.
    fn moltenvk_like() -> ShaderFeatures {
        ShaderFeatures {
            float16: true,
            int8: true,
            int16: true,
            int64: true,
            storage16: true,
            uniform_storage16: true,
            storage8: true,
            uniform_storage8: true,
            memory_model: true,
            buffer_device_address: true,
            subgroup_size_control: true,
            compute_full_subgroups: true,
            timeline_semaphore: true,
            ..ShaderFeatures::default()
        }
    }

    /// Everything on (an NVIDIA-like adapter).
    fn everything() -> ShaderFeatures {
        ShaderFeatures {
            shader_clock: true,
            device_clock: true,
            int64: true,
            int64_atomics: true,
            subgroup_size_control: true,
            compute_full_subgroups: true,
            coopmat_nv: true,
            float16: true,
            storage16: true,
            timeline_semaphore: true,
            ..ShaderFeatures::default()
        }
    }

    #[test]
    fn a_moltenvk_like_device_lacks_clock_atomics_and_coopmat() {
        let mvk = moltenvk_like();
        assert_eq!(
            missing(Capability::MegakernelShaderClock, &mvk),
            Some(SHADER_CLOCK.name)
        );
        assert_eq!(
            missing(Capability::Int64Atomics, &mvk),
            Some("shaderBufferInt64Atomics")
        );
        assert_eq!(
            missing(Capability::CooperativeMatrix, &mvk),
            Some(COOPMAT_NV.name)
        );
        assert_eq!(missing(Capability::SubgroupSizeControl, &mvk), None);
        assert_eq!(missing(Capability::TimelineSemaphores, &mvk), None);
    }

    #[test]
    fn everything_enabled_passes_every_capability() {
        for cap in Capability::ALL {
            assert!(check(cap, &everything(), "gpu").is_ok(), "{cap:?}");
        }
    }

    #[test]
    fn each_need_is_checked_on_its_own() {
        // Turning off one feature fails exactly the capabilities that list it.
        type TurnOff = fn(&mut ShaderFeatures);
        let off: [(TurnOff, &str); 5] = [
            (|f| f.int64 = false, "shaderInt64"),
            (|f| f.float16 = false, "shaderFloat16"),
            (|f| f.storage16 = false, "storageBuffer16BitAccess"),
            (
                |f| f.compute_full_subgroups = false,
                "computeFullSubgroups (Vulkan 1.3)",
            ),
            (
                |f| f.timeline_semaphore = false,
                "timelineSemaphore (Vulkan 1.2)",
            ),
        ];
        for (turn_off, name) in off {
            let mut f = everything();
            turn_off(&mut f);
            for cap in Capability::ALL {
                let lists = cap.features().contains(&name);
                assert_eq!(missing(cap, &f) == Some(name), lists, "{cap:?} {name}");
                assert_eq!(missing(cap, &f).is_none(), !lists, "{cap:?} {name}");
            }
        }
    }

    #[test]
    fn the_error_names_capability_feature_adapter_and_alternative() {
        let e = check(
            Capability::MegakernelShaderClock,
            &moltenvk_like(),
            "Apple M2",
        )
        .unwrap_err();
        match &e {
            Error::MissingFeature {
                capability,
                feature,
                adapter,
            } => {
                assert!(capability.contains("DeadlineSource::ShaderClock"));
                assert_eq!(*feature, SHADER_CLOCK.name);
                assert_eq!(adapter, "Apple M2");
            }
            other => panic!("{other:?}"),
        }
        let text = e.to_string();
        assert!(text.contains("IterationBudget"), "{text}");
        assert!(text.contains("VK_KHR_shader_clock"), "{text}");
        assert!(text.contains("Apple M2"), "{text}");
        assert!(text.contains("Device::adapters"), "{text}");
        let e = check(
            Capability::TimelineSemaphores,
            &ShaderFeatures::default(),
            "old",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("update the driver"), "{e}");
    }
}
