//! The Vulkan loader, the instance, and the validation messenger.
//!
//! The loader is opened at run time (`ash::Entry::load`), so binaries link no
//! Vulkan library. With validation on, the instance enables
//! `VK_LAYER_KHRONOS_validation` with synchronization validation, and a
//! debug-utils messenger routes every message to `log`. Warnings and errors
//! of the validation and performance kinds also go to the instance's
//! [`ValidationLog`], which counts and keeps them (so a test can assert that
//! a run produced none), prints them where no logger would, and answers for
//! the batches that turn them into errors. The messenger's
//! create-info is chained into instance creation so that messages emitted
//! while the instance itself is created or destroyed are caught too.
//!
//! Where the loader offers `VK_KHR_portability_enumeration`, the instance
//! enables it, so portability drivers (MoltenVK) are listed too
//! ([`crate::portability`]). A loader that finds no driver it can load
//! makes instance creation fail with `VK_ERROR_INCOMPATIBLE_DRIVER`: that
//! is [`Error::NoAdapter`], whose text says what to install.
//!
//! When the first instance is destroyed, one bare instance (no layers,
//! only portability enumeration where offered) is made first and kept for
//! the rest of the process, so the drivers stay loaded between the crate's
//! instances (made at the first teardown, not at start-up, so creating a
//! device costs no second instance). The loader loads each driver when
//! an instance is created and unloads it when the last one is destroyed,
//! and some drivers do not survive that many times: on an NVIDIA H200
//! (driver 580.159) the 30th load in one process found no driver
//! (`VK_ERROR_INCOMPATIBLE_DRIVER`), whether or not the loader itself was
//! reloaded, while 41 instances made and destroyed beside one kept instance
//! all succeeded (`tests/device_churn.rs`).

use std::ffi::{c_void, CStr};
use std::sync::Arc;

use ash::vk;

use crate::error::{vk_error, Error, Result};
use crate::portability;
use crate::validation_log::{ValidationLog, LOG_TARGET};

const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

unsafe extern "system" fn messenger_callback(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    kind: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: the layer passes a valid callback-data pointer for the duration
    // of the call; `user` is the `ValidationLog` in `Instance`'s `Arc`, which
    // outlives the messenger (it is destroyed before the field is dropped).
    let (text, log) = unsafe {
        let msg = if data.is_null() || (*data).p_message.is_null() {
            "<no message>".to_string()
        } else {
            CStr::from_ptr((*data).p_message)
                .to_string_lossy()
                .into_owned()
        };
        let id = if data.is_null() || (*data).p_message_id_name.is_null() {
            None
        } else {
            Some(CStr::from_ptr((*data).p_message_id_name).to_string_lossy())
        };
        (
            with_id(id.as_deref(), msg),
            (user as *const ValidationLog).as_ref(),
        )
    };
    let counted = severity.intersects(
        vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
            | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
    ) && kind.intersects(
        vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
            | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
    );
    if counted {
        log::error!(target: LOG_TARGET, "{text}");
        if let Some(log) = log {
            log.record(text);
        }
    } else if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::WARNING) {
        log::warn!(target: LOG_TARGET, "{text}");
    } else {
        log::debug!(target: LOG_TARGET, "{text}");
    }
    vk::FALSE
}

/// The message with the layer's message name (`SYNC-HAZARD-WRITE-AFTER-WRITE`,
/// a VUID) in front, unless the text already holds it: newer layers leave
/// the name out of the text, and a message is matched by it.
fn with_id(id: Option<&str>, msg: String) -> String {
    match id {
        Some(id) if !id.is_empty() && !msg.contains(id) => format!("[ {id} ] {msg}"),
        _ => msg,
    }
}

/// The bare instance kept for the rest of the process once the first one
/// was destroyed (see the module documentation), with the loader it came from.
struct DriverKeeper {
    _entry: ash::Entry,
    _instance: ash::Instance,
}

static DRIVER_KEEPER: std::sync::OnceLock<Option<DriverKeeper>> = std::sync::OnceLock::new();

/// Makes the kept instance the first time an instance is destroyed; a
/// failure only leaves the drivers to be reloaded with each instance.
fn keep_drivers_loaded(
    entry: &ash::Entry,
    flags: vk::InstanceCreateFlags,
    extensions: &[*const std::ffi::c_char],
) {
    DRIVER_KEEPER.get_or_init(|| {
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_1);
        let info = vk::InstanceCreateInfo::default()
            .application_info(&app)
            .flags(flags)
            .enabled_extension_names(extensions);
        // SAFETY: `info`, `app` and the extension names outlive the call;
        // the instance is never destroyed (the process's exit releases it)
        // and nothing is made from it.
        match unsafe { entry.create_instance(&info, None) } {
            Ok(instance) => Some(DriverKeeper {
                _entry: entry.clone(),
                _instance: instance,
            }),
            Err(r) => {
                log::debug!("vkcompute: no instance kept to hold the drivers loaded: {r}");
                None
            }
        }
    });
}

/// An instance, with its messenger when validation is on.
pub(crate) struct Instance {
    pub(crate) entry: ash::Entry,
    pub(crate) raw: ash::Instance,
    pub(crate) debug_utils: Option<ash::ext::debug_utils::Instance>,
    messenger: vk::DebugUtilsMessengerEXT,
    /// Behind an `Arc` so its address, handed to the layer, never moves,
    /// and so it outlives the instance for whoever holds a clone.
    pub(crate) log: Arc<ValidationLog>,
    /// The set-up of the bare instance kept once this one is destroyed.
    bare: portability::InstanceSetup,
}

impl Instance {
    /// Opens the loader and creates an instance (Vulkan 1.3 requested),
    /// whose validation messages go to `log`.
    pub(crate) fn new(validation: bool, log: ValidationLog) -> Result<Self> {
        // SAFETY: loading the system Vulkan loader runs its initialisers; we
        // rely on it being a conforming loader.
        let entry = unsafe { ash::Entry::load() }.map_err(|e| Error::Loader(e.to_string()))?;
        if validation {
            // SAFETY: plain query through a valid entry.
            let layers = unsafe { entry.enumerate_instance_layer_properties() }
                .map_err(|r| vk_error("vkEnumerateInstanceLayerProperties", r))?;
            let found = layers
                .iter()
                .any(|l| l.layer_name_as_c_str().ok() == Some(VALIDATION_LAYER));
            if !found {
                return Err(Error::ValidationLayerMissing);
            }
        }
        let log = Arc::new(log);
        let log_ptr = Arc::as_ptr(&log) as *mut c_void;
        let app = vk::ApplicationInfo::default()
            .application_name(c"vkcompute")
            .engine_name(c"vkcompute")
            .api_version(vk::API_VERSION_1_3);
        let layers = [VALIDATION_LAYER.as_ptr()];
        // SAFETY: plain query through a valid entry.
        let offered = unsafe { entry.enumerate_instance_extension_properties(None) }
            .map_err(|r| vk_error("vkEnumerateInstanceExtensionProperties", r))?;
        let offered: Vec<&CStr> = offered
            .iter()
            .filter_map(|e| e.extension_name_as_c_str().ok())
            .collect();
        let setup = portability::instance_setup(&offered, validation);
        let mut extensions: Vec<_> = setup.extensions.iter().map(|e| e.as_ptr()).collect();
        // Synchronization validation of shader accesses: since the layer's
        // 1.3.290 release, the descriptors a dispatch binds are tracked only
        // under `syncval_shader_accesses_heuristic`, set through
        // VK_EXT_layer_settings (which the layer itself offers). Without it
        // a dispatch's writes are invisible to synchronization validation
        // and a missing barrier after one is never reported. Older layers
        // track them always and offer no such extension: nothing to set.
        let layer_settings = validation && layer_offers_settings(&entry);
        if layer_settings {
            extensions.push(ash::ext::layer_settings::NAME.as_ptr());
        }
        let bool_true: vk::Bool32 = vk::TRUE;
        let mut setting = vk::LayerSettingEXT::default()
            .layer_name(VALIDATION_LAYER)
            .setting_name(c"syncval_shader_accesses_heuristic")
            .ty(vk::LayerSettingTypeEXT::BOOL32)
            .values(bytemuck::bytes_of(&bool_true));
        setting.value_count = 1;
        let settings = [setting];
        let mut settings_info = vk::LayerSettingsCreateInfoEXT::default().settings(&settings);
        let enabled = [vk::ValidationFeatureEnableEXT::SYNCHRONIZATION_VALIDATION];
        let mut features =
            vk::ValidationFeaturesEXT::default().enabled_validation_features(&enabled);
        let messenger_info = || {
            vk::DebugUtilsMessengerCreateInfoEXT::default()
                .message_severity(
                    vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                        | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR
                        | vk::DebugUtilsMessageSeverityFlagsEXT::INFO,
                )
                .message_type(
                    vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                        | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                        | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
                )
                .pfn_user_callback(Some(messenger_callback))
                .user_data(log_ptr)
        };
        let mut chained_messenger = messenger_info();
        let mut info = vk::InstanceCreateInfo::default()
            .application_info(&app)
            .flags(setup.flags)
            .enabled_extension_names(&extensions);
        if validation {
            info = info
                .enabled_layer_names(&layers)
                .push_next(&mut features)
                .push_next(&mut chained_messenger);
            if layer_settings {
                info = info.push_next(&mut settings_info);
            }
        }
        // SAFETY: every pointer in `info` refers to locals alive across the call.
        let raw = unsafe { entry.create_instance(&info, None) }.map_err(|r| match r {
            vk::Result::ERROR_INCOMPATIBLE_DRIVER => Error::NoAdapter,
            r => vk_error("vkCreateInstance", r),
        })?;
        let mut inst = Instance {
            // The same drivers as this instance sees (portability ones
            // too), without layers, for the kept instance.
            bare: portability::instance_setup(&offered, false),
            entry,
            raw,
            debug_utils: None,
            messenger: vk::DebugUtilsMessengerEXT::null(),
            log,
        };
        if validation {
            let du = ash::ext::debug_utils::Instance::new(&inst.entry, &inst.raw);
            // SAFETY: the instance was created with VK_EXT_debug_utils; the
            // user-data pointer is the shared log, which outlives the messenger.
            inst.messenger = unsafe { du.create_debug_utils_messenger(&messenger_info(), None) }
                .map_err(|r| vk_error("vkCreateDebugUtilsMessengerEXT", r))?;
            inst.debug_utils = Some(du);
        }
        Ok(inst)
    }
}

/// Whether the validation layer offers VK_EXT_layer_settings (layers from
/// 1.3.268 on).
fn layer_offers_settings(entry: &ash::Entry) -> bool {
    // SAFETY: plain query through a valid entry, naming an installed layer.
    let Ok(exts) =
        (unsafe { entry.enumerate_instance_extension_properties(Some(VALIDATION_LAYER)) })
    else {
        return false;
    };
    exts.iter()
        .any(|e| e.extension_name_as_c_str().ok() == Some(ash::ext::layer_settings::NAME))
}

impl Drop for Instance {
    fn drop(&mut self) {
        // Before the drivers could unload with this instance.
        let extensions: Vec<_> = self.bare.extensions.iter().map(|e| e.as_ptr()).collect();
        keep_drivers_loaded(&self.entry, self.bare.flags, &extensions);
        // SAFETY: every child object (the logical device, the messenger) is
        // destroyed here or before; `DeviceInner::drop` destroys the device
        // before its `Instance` field is dropped.
        unsafe {
            if let Some(du) = &self.debug_utils {
                du.destroy_debug_utils_messenger(self.messenger, None);
            }
            self.raw.destroy_instance(None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::with_id;

    #[test]
    fn messages_carry_their_name() {
        let id = Some("SYNC-HAZARD-WRITE-AFTER-WRITE");
        let m = with_id(id, "vkCmdFillBuffer(): hazard".into());
        assert_eq!(
            m,
            "[ SYNC-HAZARD-WRITE-AFTER-WRITE ] vkCmdFillBuffer(): hazard"
        );
        let old = "Validation Error: [ SYNC-HAZARD-WRITE-AFTER-WRITE ] ...".to_string();
        assert_eq!(with_id(id, old.clone()), old);
        assert_eq!(with_id(None, "x".into()), "x");
    }
}
