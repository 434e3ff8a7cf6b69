//! The startup floor: what the driver alone costs to start, in minimal
//! hand-written ash: load the loader, `vkCreateInstance` (Vulkan 1.3, no
//! layers), list the adapters, `vkCreateDevice` with one compute queue and
//! timeline semaphores, nothing else. Run in a fresh process like
//! vkcompute's starts (`startup::floor_in_child`), with the same adapter
//! choice by `VKCOMPUTE_DEVICE` (index or name fragment; else the first
//! discrete GPU, else the first adapter). The floor never loads the
//! validation layer: compare it with starts made without
//! `VKCOMPUTE_VALIDATION` (as on the GPU machine).

use std::time::{Duration, Instant};

use ash::vk;

/// The adapter `VKCOMPUTE_DEVICE` names, else the first discrete GPU, else
/// the first: the position in `names`/`discrete`.
pub fn choose(request: Option<&str>, names: &[String], discrete: &[bool]) -> Option<usize> {
    if names.is_empty() {
        return None;
    }
    if let Some(r) = request.map(str::trim).filter(|r| !r.is_empty()) {
        if let Ok(i) = r.parse::<usize>() {
            return (i < names.len()).then_some(i);
        }
        let r = r.to_ascii_lowercase();
        return names
            .iter()
            .position(|n| n.to_ascii_lowercase().contains(&r));
    }
    Some(discrete.iter().position(|&d| d).unwrap_or(0))
}

/// One start of the floor: the time from before loading the loader to
/// after `vkCreateDevice` returned. Everything is destroyed afterwards,
/// outside the timed span.
pub fn start_once() -> Result<Duration, String> {
    let t = Instant::now();
    // SAFETY: loads the system Vulkan loader; we rely on it conforming.
    let entry = unsafe { ash::Entry::load() }.map_err(|e| format!("load the loader: {e}"))?;
    let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_3);
    let info = vk::InstanceCreateInfo::default().application_info(&app);
    // SAFETY: `info` points at live locals.
    let instance = unsafe { entry.create_instance(&info, None) }
        .map_err(|e| format!("vkCreateInstance: {e}"))?;
    let result = (|| {
        // SAFETY: a live instance; plain queries.
        let pds = unsafe { instance.enumerate_physical_devices() }
            .map_err(|e| format!("vkEnumeratePhysicalDevices: {e}"))?;
        let props: Vec<vk::PhysicalDeviceProperties> = pds
            .iter()
            // SAFETY: each handle comes from this instance.
            .map(|&pd| unsafe { instance.get_physical_device_properties(pd) })
            .collect();
        let names: Vec<String> = props
            .iter()
            .map(|p| {
                p.device_name_as_c_str()
                    .map_or_else(|_| "?".into(), |c| c.to_string_lossy().into_owned())
            })
            .collect();
        let discrete: Vec<bool> = props
            .iter()
            .map(|p| p.device_type == vk::PhysicalDeviceType::DISCRETE_GPU)
            .collect();
        let request = std::env::var("VKCOMPUTE_DEVICE").ok();
        let i = choose(request.as_deref(), &names, &discrete)
            .ok_or_else(|| format!("no adapter for {request:?} among {names:?}"))?;
        let pd = pds[i];
        // SAFETY: `pd` comes from this instance.
        let families = unsafe { instance.get_physical_device_queue_family_properties(pd) };
        let family = families
            .iter()
            .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .ok_or("no compute queue")? as u32;
        let priorities = [1.0f32];
        let queue_info = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&priorities)];
        let mut f12 = vk::PhysicalDeviceVulkan12Features::default().timeline_semaphore(true);
        let dinfo = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queue_info)
            .push_next(&mut f12);
        // SAFETY: `pd` is from this instance; `dinfo` points at live locals.
        let dev = unsafe { instance.create_device(pd, &dinfo, None) }
            .map_err(|e| format!("vkCreateDevice: {e}"))?;
        let elapsed = t.elapsed();
        // SAFETY: nothing was created on the device.
        unsafe { dev.destroy_device(None) };
        Ok(elapsed)
    })();
    // SAFETY: the device (if any) was destroyed above.
    unsafe { instance.destroy_instance(None) };
    result
}
