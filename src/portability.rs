//! Portability implementations: Vulkan layered over another API, such as
//! MoltenVK over Metal on macOS. The loader lists them only to an instance
//! that enables `VK_KHR_portability_enumeration` and sets
//! `ENUMERATE_PORTABILITY_KHR`; a device that lists
//! `VK_KHR_portability_subset` must be created with it enabled.
//!
//! The decisions are pure (the available names in, the names to enable
//! out) and unit-tested without a GPU; `instance.rs` and `device.rs` apply
//! them.

use std::ffi::CStr;

use ash::vk;

/// The instance extension that lists portability drivers.
pub(crate) const PORTABILITY_ENUMERATION: &CStr = ash::khr::portability_enumeration::NAME;
/// The device extension a portability driver lists and must see enabled.
pub(crate) const PORTABILITY_SUBSET: &CStr = ash::khr::portability_subset::NAME;
/// The instance extension the validation messenger needs.
pub(crate) const DEBUG_UTILS: &CStr = ash::ext::debug_utils::NAME;

/// The instance's extensions and flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InstanceSetup {
    /// Extensions to enable, in order.
    pub extensions: Vec<&'static CStr>,
    /// Creation flags.
    pub flags: vk::InstanceCreateFlags,
}

/// The instance set-up given the extensions the loader offers (`available`)
/// and whether validation is on: debug utils with validation, portability
/// enumeration (and its flag) wherever the loader has it (pure).
pub(crate) fn instance_setup(available: &[&CStr], validation: bool) -> InstanceSetup {
    let mut extensions = Vec::new();
    if validation {
        extensions.push(DEBUG_UTILS);
    }
    let mut flags = vk::InstanceCreateFlags::empty();
    if available.contains(&PORTABILITY_ENUMERATION) {
        extensions.push(PORTABILITY_ENUMERATION);
        flags |= vk::InstanceCreateFlags::ENUMERATE_PORTABILITY_KHR;
    }
    InstanceSetup { extensions, flags }
}

/// Whether a device offering `available` must enable
/// `VK_KHR_portability_subset` (pure).
pub(crate) fn needs_subset(available: &[&CStr]) -> bool {
    available.contains(&PORTABILITY_SUBSET)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The instance extensions a MoltenVK set-up offers (the Vulkan SDK's
    /// loader on macOS); this machine has no MoltenVK, so the list is
    /// written from the SDK's, not read.
    const MOLTENVK_INSTANCE: [&CStr; 4] = [
        c"VK_KHR_surface",
        c"VK_EXT_metal_surface",
        c"VK_KHR_portability_enumeration",
        c"VK_EXT_debug_utils",
    ];
    /// What Debian's loader with lavapipe offers.
    const LAVAPIPE_INSTANCE: [&CStr; 3] = [
        c"VK_KHR_surface",
        c"VK_EXT_debug_utils",
        c"VK_KHR_portability_enumeration",
    ];

    #[test]
    fn portability_enumeration_is_enabled_with_its_flag_where_offered() {
        let s = instance_setup(&MOLTENVK_INSTANCE, false);
        assert_eq!(s.extensions, vec![PORTABILITY_ENUMERATION]);
        assert_eq!(s.flags, vk::InstanceCreateFlags::ENUMERATE_PORTABILITY_KHR);
        let s = instance_setup(&LAVAPIPE_INSTANCE, true);
        assert_eq!(s.extensions, vec![DEBUG_UTILS, PORTABILITY_ENUMERATION]);
        assert_eq!(s.flags, vk::InstanceCreateFlags::ENUMERATE_PORTABILITY_KHR);
    }

    #[test]
    fn an_older_loader_gets_neither_extension_nor_flag() {
        // Loaders before 1.3.216 do not know the extension, and reject the
        // flag without it.
        let s = instance_setup(&[c"VK_KHR_surface"], false);
        assert!(s.extensions.is_empty());
        assert!(s.flags.is_empty());
        let s = instance_setup(&[], true);
        assert_eq!(s.extensions, vec![DEBUG_UTILS]);
        assert!(s.flags.is_empty());
    }

    #[test]
    fn the_subset_is_enabled_only_on_devices_that_list_it() {
        let moltenvk = [
            c"VK_KHR_portability_subset",
            c"VK_KHR_push_descriptor",
            c"VK_KHR_timeline_semaphore",
        ];
        assert!(needs_subset(&moltenvk));
        assert!(!needs_subset(&[
            c"VK_KHR_push_descriptor",
            c"VK_KHR_shader_clock"
        ]));
        assert!(!needs_subset(&[]));
    }
}
