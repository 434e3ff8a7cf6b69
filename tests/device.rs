//! Device creation: adapter listing and choice, handle sharing, validation,
//! and the objects a fresh device holds.
//!
//! No test here sets environment variables (tests run in parallel threads);
//! the `VKCOMPUTE_DEVICE` override is exercised through
//! `DeviceOptions::adapter`, which takes the same index-or-name request.
//! The runner may set `VKCOMPUTE_DEVICE` itself (`llvmpipe` on CI,
//! `NVIDIA` on the GPU machine): requests are made of adapters that exist.

mod common;
use common::*;

use vkcompute::{AdapterInfo, AdapterType, Device, DeviceOptions, Error, ENV_DEVICE};

const DOUBLE: &str = r#"
#version 450
layout(local_size_x = 32) in;
layout(set = 0, binding = 0) buffer Data { uint v[]; };
layout(push_constant) uniform P { uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) v[i] = v[i] * 2u + 1u;
}
"#;

/// Preference by type, as `Device::new` documents it: higher is better.
fn rank(t: AdapterType) -> u8 {
    match t {
        AdapterType::Discrete => 4,
        AdapterType::Integrated => 3,
        AdapterType::Virtual => 2,
        AdapterType::Cpu => 1,
        _ => 0,
    }
}

/// The adapter `Device::new` picks without a request: the best by type,
/// then by device-local memory, then the first enumerated.
fn best(adapters: &[AdapterInfo]) -> &AdapterInfo {
    let mut best = &adapters[0];
    for a in adapters {
        if (rank(a.adapter_type), a.device_local_memory)
            > (rank(best.adapter_type), best.device_local_memory)
        {
            best = a;
        }
    }
    best
}

/// `VKCOMPUTE_DEVICE` as the runner set it, when set to something.
fn env_request() -> Option<String> {
    std::env::var(ENV_DEVICE)
        .ok()
        .map(|r| r.trim().to_string())
        .filter(|r| !r.is_empty())
}

/// Whether `request` (an index or a case-insensitive name fragment) names `a`.
fn names(request: &str, a: &AdapterInfo) -> bool {
    match request.trim().parse::<usize>() {
        Ok(i) => a.index == i,
        Err(_) => a
            .name
            .to_lowercase()
            .contains(&request.trim().to_lowercase()),
    }
}

/// Runs a small kernel and a few transfers so validation has something to see.
fn some_work(gpu: &Device) {
    let n = 1000u32;
    let host: Vec<u32> = (0..n).collect();
    let buf = gpu.upload(&host).unwrap();
    let k = gpu.kernel_glsl(DOUBLE).unwrap();
    let mut b = gpu.batch().unwrap();
    b.run_with_push_constants(&k, &[&buf], n, &n.to_le_bytes())
        .unwrap();
    b.barrier();
    b.run_with_push_constants(&k, &[&buf], n, &n.to_le_bytes())
        .unwrap();
    b.submit().unwrap();
    let out = buf.download().unwrap();
    for (i, v) in out.iter().enumerate() {
        let i = i as u32;
        assert_eq!(*v, (i * 2 + 1) * 2 + 1, "element {i}");
    }
}

#[test]
fn adapters_are_listed_with_sane_fields() {
    let adapters = Device::adapters().unwrap();
    assert!(!adapters.is_empty(), "no adapter listed");
    for (i, a) in adapters.iter().enumerate() {
        assert_eq!(a.index, i, "adapters are listed in enumeration order");
        assert!(!a.name.trim().is_empty(), "adapter {i} has an empty name");
        assert!(!a.driver_name.is_empty(), "adapter {i}: empty driver name");
        assert!(
            a.api_version >= (1, 1, 0),
            "adapter {i}: {:?}",
            a.api_version
        );
        assert!(a.subgroup_size > 0 && a.subgroup_size.is_power_of_two());
        assert!(a.max_workgroup_size.iter().all(|&s| s > 0));
        assert!(a.max_workgroup_count.iter().all(|&c| c > 0));
        assert!(a.max_workgroup_invocations > 0);
        assert!(a.max_workgroup_invocations >= 128, "Vulkan guarantees 128");
        assert!(a.max_shared_memory > 0);
        assert!(a.max_storage_buffer_range > 0);
        assert!(a.max_uniform_buffer_range > 0);
        assert!(a.max_memory_allocation_size > 0);
        assert!(a.max_buffer_size >= a.max_memory_allocation_size.min(u32::MAX as u64));
        assert!(a.min_storage_buffer_offset_alignment.is_power_of_two());
        assert!(a.max_push_constants_size >= 128, "Vulkan guarantees 128");
        assert!(a.device_local_memory > 0);
        if a.timestamps {
            assert!(a.timestamp_period_ns > 0.0, "adapter {i}");
        }
    }
    match adapters.iter().find(|a| a.driver_name == "llvmpipe") {
        Some(lvp) => {
            assert!(lvp.name.to_lowercase().contains("llvmpipe"), "{lvp:?}");
            assert_eq!(lvp.adapter_type, AdapterType::Cpu);
            assert_eq!(lvp.max_storage_buffer_range, 128 << 20);
            assert_eq!(lvp.subgroup_size, 8);
            assert!(lvp.timestamps);
            assert!(lvp.timestamp_period_ns > 0.0);
            assert!(!lvp.transfer_queue, "lavapipe has one queue family");
            assert!(lvp.push_descriptor);
            assert!(!lvp.cooperative_matrix);
            assert_eq!(lvp.max_memory_allocation_size, 2 << 30);
            assert_eq!(lvp.host_visible_device_memory, lvp.device_local_memory);
        }
        None => skipped(format_args!(
            "lavapipe's listed properties: no llvmpipe adapter among {:?}",
            adapters.iter().map(|a| &a.name).collect::<Vec<_>>()
        )),
    }

    // What a device reports is what the listing said, for each adapter.
    for a in &adapters {
        let gpu = gpu_with(DeviceOptions {
            adapter: Some(a.index.to_string()),
            ..Default::default()
        });
        let got = gpu.info();
        assert_eq!(got.index, a.index);
        assert_eq!(got.name, a.name);
        assert_eq!(got.driver_name, a.driver_name);
        assert_eq!(got.max_storage_buffer_range, a.max_storage_buffer_range);
        assert_eq!(got.max_workgroup_count, a.max_workgroup_count);
        assert_eq!(got.max_memory_allocation_size, a.max_memory_allocation_size);
        assert_eq!(got.subgroup_size, a.subgroup_size);
        assert_eq!(got.transfer_queue, a.transfer_queue);
        assert_clean(&gpu);
    }
}

#[test]
fn new_picks_an_adapter_and_works() {
    let gpu = Device::new().unwrap();
    let adapters = Device::adapters().unwrap();
    assert!(adapters.iter().any(|a| a.name == gpu.info().name));
    match env_request() {
        // The runner named an adapter: that one (or the first it names).
        Some(request) => {
            let named = adapters
                .iter()
                .find(|a| names(&request, a))
                .expect("VKCOMPUTE_DEVICE names an adapter");
            assert_eq!(gpu.info().index, named.index, "{ENV_DEVICE}={request:?}");
        }
        // The best adapter: none listed ranks above the chosen one by type.
        None => {
            let chosen = rank(gpu.info().adapter_type);
            assert!(adapters.iter().all(|a| rank(a.adapter_type) <= chosen));
            assert_eq!(gpu.info().index, best(&adapters).index);
        }
    }
    // Options are the defaults (adapter: None).
    assert!(gpu.options().adapter.is_none());
    let x = gpu.upload(&[1.5f32, 2.5, 3.5]).unwrap();
    assert_eq!(x.download().unwrap(), vec![1.5, 2.5, 3.5]);
    assert_clean(&gpu);
}

#[test]
fn adapter_by_index() {
    let gpu = gpu_with(DeviceOptions {
        adapter: Some("0".into()),
        ..Default::default()
    });
    assert_eq!(gpu.info().index, 0);
    assert_eq!(gpu.info().name, Device::adapters().unwrap()[0].name);
    assert!(gpu.validation_enabled());
    some_work(&gpu);
    assert_clean(&gpu);
}

/// Whether `fragment` is a name fragment (not an index) that names only
/// adapters called like `target` (several GPUs of one model share a name).
fn names_only(fragment: &str, target: &AdapterInfo, adapters: &[AdapterInfo]) -> bool {
    !fragment.trim().is_empty()
        && fragment.trim().parse::<usize>().is_err()
        && names(fragment, target)
        && adapters
            .iter()
            .filter(|a| names(fragment, a))
            .all(|a| a.name == target.name)
}

#[test]
fn adapter_by_name_fragment_case_insensitive_and_trimmed() {
    // The adapter the runner's choice (or the best) lands on: lavapipe on CI.
    let adapters = Device::adapters().unwrap();
    let target = adapters[gpu().info().index].clone();
    // Its first word if that names it alone, else its whole name.
    let first_word = target.name.split_whitespace().next().unwrap_or("");
    let Some(word) = [first_word, target.name.trim()]
        .into_iter()
        .find(|f| names_only(f, &target, &adapters))
    else {
        skipped(format_args!(
            "requests by name: {:?} is part of another adapter's name",
            target.name
        ));
        return;
    };
    // On lavapipe: "llvmpipe", "LLVMPIPE", "LLVMpipe", "  llvm ", "0 ".
    let lower = word.to_lowercase();
    let half = lower.chars().count() / 2;
    let mixed: String = lower
        .chars()
        .enumerate()
        .map(|(i, c)| if i < half { c.to_ascii_uppercase() } else { c })
        .collect();
    let head: String = lower.chars().take(half).collect();
    let short = if names_only(&head, &target, &adapters) {
        head
    } else {
        lower.clone()
    };
    let requests = [
        lower.clone(),
        word.to_uppercase(),
        mixed,
        format!("  {short} "),
        format!("{} ", target.index),
    ];
    for request in requests {
        let gpu = gpu_with(DeviceOptions {
            adapter: Some(request.clone()),
            ..Default::default()
        });
        assert_eq!(
            gpu.info().name,
            target.name,
            "{request:?} chose {:?}",
            gpu.info().name
        );
        assert_clean(&gpu);
    }
}

#[test]
fn blank_adapter_request_means_the_default_choice() {
    let adapters = Device::adapters().unwrap();
    let default = gpu();
    let blank = gpu_with(DeviceOptions {
        adapter: Some("   ".into()),
        ..Default::default()
    });
    // A blank request overrides VKCOMPUTE_DEVICE with the best adapter.
    assert_eq!(blank.info().index, best(&adapters).index);
    match env_request() {
        None => assert_eq!(blank.info().index, default.info().index),
        Some(request) => {
            // The default is the first adapter the runner's request names.
            let named = adapters.iter().find(|a| names(&request, a)).unwrap();
            assert_eq!(default.info().index, named.index, "{request:?}");
            if named.index == blank.info().index {
                assert_eq!(blank.info().index, default.info().index);
            } else {
                skipped(format_args!(
                    "blank = default: {ENV_DEVICE}={request:?} makes {:?} the default, \
                     not the best adapter {:?}",
                    named.name,
                    blank.info().name
                ));
            }
        }
    }
    assert_ne!(blank.id(), default.id());
    assert_clean(&blank);
    assert_clean(&default);
}

/// Asks for adapter `request` and checks the `AdapterNotFound` error: it
/// names the request and lists every adapter. Returns the error and the
/// listing it was checked against.
fn unknown_adapter(request: &str, validation: bool) -> (Error, Vec<String>, Vec<AdapterInfo>) {
    let adapters = Device::adapters().unwrap();
    let err = Device::with_options(DeviceOptions {
        adapter: Some(request.into()),
        validation: Some(validation),
        ..Default::default()
    })
    .unwrap_err();
    let Error::AdapterNotFound {
        requested,
        available,
    } = &err
    else {
        panic!("expected AdapterNotFound, got {err:?}");
    };
    assert_eq!(requested, request);
    assert_eq!(available.len(), adapters.len());
    for a in &adapters {
        assert!(
            available.iter().any(|listed| listed.contains(&a.name)),
            "{available:?} lacks {:?}",
            a.name
        );
    }
    assert!(err.to_string().contains(request), "{err}");
    let available = available.clone();
    (err, available, adapters)
}

#[test]
fn unknown_adapter_index_is_an_error_listing_adapters() {
    let (err, available, adapters) = unknown_adapter("99", true);
    for (a, listed) in adapters.iter().zip(&available) {
        assert!(listed.contains(&a.name), "{listed:?} lacks {:?}", a.name);
        assert!(listed.starts_with(&a.index.to_string()), "{listed:?}");
    }
    // The message lists every adapter (llvmpipe on CI).
    let msg = err.to_string();
    for a in &adapters {
        assert!(msg.contains(&a.name), "{msg} lacks {:?}", a.name);
    }

    // Failing to create one device does not disturb another.
    let gpu = gpu();
    some_work(&gpu);
    assert_clean(&gpu);
}

#[test]
fn unknown_adapter_name_is_an_error_listing_adapters() {
    unknown_adapter("no-such-gpu-xyz", false);
    let gpu = gpu();
    assert_clean(&gpu);
}

#[test]
fn device_is_clone_send_sync_and_clones_share() {
    fn assert_traits<T: Clone + Send + Sync + 'static>() {}
    assert_traits::<Device>();

    let gpu = gpu();
    let other = gpu.clone();
    assert_eq!(gpu.id(), other.id());
    // A buffer made through one handle is visible through the other's stats.
    let before = other.stats().buffers;
    let buf = gpu.upload(&[7u32; 16]).unwrap();
    assert_eq!(other.stats().buffers, before + 1);
    assert_eq!(buf.device().id(), other.id());

    // A clone moved to another thread works on the same device.
    let t = std::thread::spawn(move || {
        let b = other.upload(&[3u32; 8]).unwrap();
        let id = other.id();
        (b.download().unwrap(), id)
    });
    let (data, id) = t.join().unwrap();
    assert_eq!(data, vec![3u32; 8]);
    assert_eq!(id, gpu.id());

    // Separate devices get distinct ids.
    let separate = common::gpu();
    assert_ne!(separate.id(), gpu.id());
    drop(buf);
    assert_clean(&separate);
    assert_clean(&gpu);
}

#[test]
fn validation_counts_no_messages_after_work() {
    let gpu = gpu();
    assert!(gpu.validation_enabled());
    assert_eq!(gpu.validation_message_count(), 0);
    some_work(&gpu);
    let _ = gpu.stats();
    gpu.wait_idle().unwrap();
    gpu.trim().unwrap();
    assert!(gpu.validation_messages().is_empty());
    assert!(!gpu.is_lost());
    assert_clean(&gpu);

    // Without validation nothing is counted, and work still runs.
    let plain = Device::with_options(DeviceOptions {
        validation: Some(false),
        ..Default::default()
    })
    .unwrap();
    assert!(!plain.validation_enabled());
    some_work(&plain);
    assert_eq!(plain.validation_message_count(), 0);
    assert_clean(&plain);
}

#[test]
fn fresh_device_stats() {
    let gpu = gpu();
    let s = gpu.stats();
    // One timeline per queue: every compute queue streams use, and the
    // transfer queue where there is one.
    let expected_semaphores =
        gpu.stream_queue_count() as i64 + i64::from(gpu.info().transfer_queue);
    assert_eq!(s.semaphores, expected_semaphores);
    if is_lavapipe(&gpu) {
        assert_eq!(s.semaphores, 1, "lavapipe has no transfer queue");
    } else {
        skipped(format_args!(
            "lavapipe's one semaphore: {:?} has {} (transfer queue: {})",
            gpu.info().name,
            s.semaphores,
            gpu.info().transfer_queue
        ));
    }
    assert_eq!(s.buffers, 0);
    assert_eq!(s.staging_buffers, 0);
    assert_eq!(s.allocations, 0);
    assert_eq!(s.buffer_bytes, 0);
    assert_eq!(s.pipelines, 0);
    assert_eq!(s.command_pools, 0);
    assert_eq!(s.command_buffers, 0);
    assert_eq!(s.deferred, 0);
    assert_eq!(s.query_pools, 0);
    assert_eq!(s.submissions, 0);
    assert_eq!(s.allocator_used_bytes, 0);

    // After work and a trim, only the pipeline (cached) and the semaphore remain.
    some_work(&gpu);
    gpu.trim().unwrap();
    let s = gpu.stats();
    assert_eq!(s.semaphores, expected_semaphores);
    assert_eq!(s.pipelines, 1);
    assert_eq!(gpu.cached_kernels(), 1);
    assert_eq!(s.buffers, 0);
    assert_eq!(s.allocations, 0);
    assert_eq!(s.command_pools, 0);
    assert_eq!(s.command_buffers, 0);
    assert_eq!(s.deferred, 0);
    assert!(s.submissions >= 1);
    assert_clean(&gpu);
}

#[test]
fn all_gives_one_device_per_adapter() {
    let adapters = Device::adapters().unwrap();
    let devices = Device::all(DeviceOptions {
        validation: Some(true),
        // Ignored by `all`: each device gets its own adapter.
        adapter: Some("no-such-gpu-xyz".into()),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(devices.len(), adapters.len());
    let mut ids = Vec::new();
    for (d, a) in devices.iter().zip(&adapters) {
        assert_eq!(d.info().index, a.index);
        assert_eq!(d.info().name, a.name);
        assert!(d.validation_enabled());
        some_work(d);
        ids.push(d.id());
    }
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), devices.len(), "each device is its own");
    for d in devices {
        assert_clean(&d);
        finish_device(d);
    }
}

#[test]
fn the_validation_log_outlives_the_device() {
    // The guard's teardown check reads the log after the device is gone:
    // it must still be there, shared, and count what the device reported.
    let gpu = gpu();
    let log = gpu.validation_log();
    assert!(std::sync::Arc::ptr_eq(&log, &gpu.validation_log()));
    some_work(&gpu);
    let clone = (*gpu).clone();
    drop(gpu);
    // A clone keeps the device alive; the log is the same one.
    assert!(std::sync::Arc::ptr_eq(&log, &clone.validation_log()));
    drop(clone);
    assert_eq!(log.count(), 0, "{:?}", log.messages());
    assert!(log.messages().is_empty());
}
