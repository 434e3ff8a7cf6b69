//! Adapters as the peers see them: enumerated through ash, chosen by
//! vkcompute's rule (`VKCOMPUTE_DEVICE`, else the best) or by scry-gpu's
//! own (`Device::auto`).

use std::ffi::CStr;

use ash::vk;

/// One adapter as the Vulkan loader enumerates it.
#[derive(Debug, Clone)]
pub struct Adapter {
    /// Index in enumeration order (what `VKCOMPUTE_DEVICE=<index>` names).
    pub index: usize,
    pub name: String,
    pub device_type: vk::PhysicalDeviceType,
    pub vendor_id: u32,
    pub device_id: u32,
    pub driver: String,
    pub api_version: u32,
    pub compute: bool,
    pub max_storage_buffer_range: u64,
    pub max_memory_allocation_size: u64,
    /// maxBufferSize (Vulkan 1.3 / maintenance4), else unlimited.
    pub max_buffer_size: u64,
    /// Largest device-local heap.
    pub device_local_memory: u64,
    /// How many adapters before this one have the same vendor, device and
    /// name (to tell identical GPUs apart when matching wgpu's list).
    pub twin: usize,
}

impl Adapter {
    /// vkcompute's ranking: discrete > integrated > virtual > CPU.
    fn rank(&self) -> u8 {
        match self.device_type {
            vk::PhysicalDeviceType::DISCRETE_GPU => 4,
            vk::PhysicalDeviceType::INTEGRATED_GPU => 3,
            vk::PhysicalDeviceType::VIRTUAL_GPU => 2,
            vk::PhysicalDeviceType::CPU => 1,
            _ => 0,
        }
    }

    pub fn type_name(&self) -> &'static str {
        match self.device_type {
            vk::PhysicalDeviceType::DISCRETE_GPU => "discrete",
            vk::PhysicalDeviceType::INTEGRATED_GPU => "integrated",
            vk::PhysicalDeviceType::VIRTUAL_GPU => "virtual",
            vk::PhysicalDeviceType::CPU => "cpu",
            _ => "other",
        }
    }
}

fn cstr(bytes: &[std::ffi::c_char]) -> String {
    // SAFETY: Vulkan's fixed-size name arrays are NUL-terminated.
    unsafe { CStr::from_ptr(bytes.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// Every adapter, in enumeration order (those without a compute queue
/// included, marked: scry-gpu's fallback counts them).
pub fn probe_adapters() -> Result<Vec<Adapter>, String> {
    // SAFETY: the loader is linked (ash `linked`); every call below is a
    // plain query on the instance created here, destroyed at the end.
    unsafe {
        let entry = ash::Entry::linked();
        let app = vk::ApplicationInfo::default()
            .application_name(c"vkcompute-peers")
            .api_version(vk::API_VERSION_1_2);
        let instance = entry
            .create_instance(
                &vk::InstanceCreateInfo::default().application_info(&app),
                None,
            )
            .map_err(|e| format!("vkCreateInstance: {e}"))?;
        let physicals = match instance.enumerate_physical_devices() {
            Ok(p) => p,
            Err(e) => {
                instance.destroy_instance(None);
                return Err(format!("vkEnumeratePhysicalDevices: {e}"));
            }
        };
        let mut out: Vec<Adapter> = Vec::new();
        for (index, &pd) in physicals.iter().enumerate() {
            let props = instance.get_physical_device_properties(pd);
            let mut m3 = vk::PhysicalDeviceMaintenance3Properties::default();
            let mut m4 = vk::PhysicalDeviceMaintenance4Properties::default();
            let mut driver = vk::PhysicalDeviceDriverProperties::default();
            let has_driver_props = props.api_version >= vk::API_VERSION_1_2;
            let has_m4 = props.api_version >= vk::API_VERSION_1_3;
            {
                let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut m3);
                if has_driver_props {
                    p2 = p2.push_next(&mut driver);
                }
                if has_m4 {
                    p2 = p2.push_next(&mut m4);
                }
                instance.get_physical_device_properties2(pd, &mut p2);
            }
            let driver = if has_driver_props {
                format!(
                    "{} {}",
                    cstr(&driver.driver_name),
                    cstr(&driver.driver_info)
                )
            } else {
                format!("version {:#x}", props.driver_version)
            };
            let mem = instance.get_physical_device_memory_properties(pd);
            let device_local_memory = mem.memory_heaps[..mem.memory_heap_count as usize]
                .iter()
                .filter(|h| h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
                .map(|h| h.size)
                .max()
                .unwrap_or(0);
            let compute = instance
                .get_physical_device_queue_family_properties(pd)
                .iter()
                .any(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE) && f.queue_count > 0);
            let name = cstr(&props.device_name);
            let twin = out
                .iter()
                .filter(|a| {
                    a.vendor_id == props.vendor_id
                        && a.device_id == props.device_id
                        && a.name == name
                })
                .count();
            out.push(Adapter {
                index,
                name,
                device_type: props.device_type,
                vendor_id: props.vendor_id,
                device_id: props.device_id,
                driver,
                api_version: props.api_version,
                compute,
                max_storage_buffer_range: props.limits.max_storage_buffer_range as u64,
                max_memory_allocation_size: m3.max_memory_allocation_size,
                max_buffer_size: if has_m4 { m4.max_buffer_size } else { u64::MAX },
                device_local_memory,
                twin,
            });
        }
        instance.destroy_instance(None);
        Ok(out)
    }
}

/// vkcompute's choice (`src/adapter.rs`): by `request` (an index, or a
/// case-insensitive name fragment) when given, else the best by type, then
/// by device-local memory, then by enumeration order. Only adapters with a
/// compute queue count.
pub fn pick_like_vkcompute(all: &[Adapter], request: Option<&str>) -> Result<usize, String> {
    let usable: Vec<&Adapter> = all.iter().filter(|a| a.compute).collect();
    if usable.is_empty() {
        return Err("no Vulkan adapter with a compute queue".into());
    }
    if let Some(req) = request.map(str::trim).filter(|r| !r.is_empty()) {
        let found = match req.parse::<usize>() {
            Ok(i) => usable.iter().find(|a| a.index == i),
            Err(_) => {
                let needle = req.to_lowercase();
                usable
                    .iter()
                    .find(|a| a.name.to_lowercase().contains(&needle))
            }
        };
        return found.map(|a| a.index).ok_or_else(|| {
            let list: Vec<String> = usable
                .iter()
                .map(|a| format!("{}: {}", a.index, a.name))
                .collect();
            format!(
                "VKCOMPUTE_DEVICE={req} names no adapter; available: {}",
                list.join(", ")
            )
        });
    }
    let mut best = usable[0];
    for a in &usable {
        if (a.rank(), a.device_local_memory) > (best.rank(), best.device_local_memory) {
            best = a;
        }
    }
    Ok(best.index)
}

/// scry-gpu's `Device::auto` (Vulkan backend): the first discrete GPU, else
/// the first integrated GPU, else the first adapter enumerated.
pub fn pick_like_scry(all: &[Adapter]) -> Option<usize> {
    let first = |t| all.iter().find(|a| a.device_type == t).map(|a| a.index);
    first(vk::PhysicalDeviceType::DISCRETE_GPU)
        .or_else(|| first(vk::PhysicalDeviceType::INTEGRATED_GPU))
        .or_else(|| all.first().map(|a| a.index))
}
