//! Device creation: adapter listing and choice, handle sharing, validation,
//! and the objects a fresh device holds.
//!
//! No test here sets environment variables (tests run in parallel threads);
//! the `VKCOMPUTE_DEVICE` override is exercised through
//! `DeviceOptions::adapter`, which takes the same index-or-name request.

mod common;
use common::*;

use vkcompute::{AdapterType, Device, DeviceOptions, Error};

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

fn is_lavapipe(gpu: &Device) -> bool {
    gpu.info().driver_name.to_lowercase().contains("llvmpipe")
        || gpu.info().name.to_lowercase().contains("llvmpipe")
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
fn adapters_lists_lavapipe_with_sane_fields() {
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
    }
    let lvp = adapters
        .iter()
        .find(|a| a.name.to_lowercase().contains("llvmpipe"))
        .expect("lavapipe (llvmpipe) is installed on the test machines");
    assert_eq!(lvp.adapter_type, AdapterType::Cpu);
    assert_eq!(lvp.driver_name, "llvmpipe");
    assert_eq!(lvp.max_storage_buffer_range, 128 << 20);
    assert_eq!(lvp.subgroup_size, 8);
    assert!(lvp.timestamps);
    assert!(lvp.timestamp_period_ns > 0.0);
    assert!(!lvp.transfer_queue, "lavapipe has one queue family");
    assert!(lvp.push_descriptor);
    assert!(!lvp.cooperative_matrix);
    assert_eq!(lvp.max_memory_allocation_size, 2 << 30);
    assert_eq!(lvp.host_visible_device_memory, lvp.device_local_memory);

    // What a device reports is what the listing said.
    let gpu = gpu_with(DeviceOptions {
        adapter: Some(lvp.index.to_string()),
        ..Default::default()
    });
    assert_eq!(gpu.info().name, lvp.name);
    assert_eq!(
        gpu.info().max_storage_buffer_range,
        lvp.max_storage_buffer_range
    );
    assert_clean(&gpu);
}

#[test]
fn new_picks_an_adapter_and_works() {
    let gpu = Device::new().unwrap();
    let adapters = Device::adapters().unwrap();
    assert!(adapters.iter().any(|a| a.name == gpu.info().name));
    // The best adapter: none listed ranks above the chosen one by type.
    let rank = |t: AdapterType| match t {
        AdapterType::Discrete => 4,
        AdapterType::Integrated => 3,
        AdapterType::Virtual => 2,
        AdapterType::Cpu => 1,
        _ => 0,
    };
    let chosen = rank(gpu.info().adapter_type);
    assert!(adapters.iter().all(|a| rank(a.adapter_type) <= chosen));
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

#[test]
fn adapter_by_name_fragment_case_insensitive_and_trimmed() {
    for request in ["llvmpipe", "LLVMpipe", "  llvm ", "0 "] {
        let gpu = gpu_with(DeviceOptions {
            adapter: Some(request.into()),
            ..Default::default()
        });
        assert!(
            gpu.info().name.to_lowercase().contains("llvmpipe"),
            "{request:?} chose {:?}",
            gpu.info().name
        );
        assert_clean(&gpu);
    }
}

#[test]
fn blank_adapter_request_means_the_default_choice() {
    let default = gpu();
    let blank = gpu_with(DeviceOptions {
        adapter: Some("   ".into()),
        ..Default::default()
    });
    assert_eq!(blank.info().index, default.info().index);
    assert_ne!(blank.id(), default.id());
    assert_clean(&blank);
    assert_clean(&default);
}

#[test]
fn unknown_adapter_index_is_an_error_listing_adapters() {
    let adapters = Device::adapters().unwrap();
    let err = Device::with_options(DeviceOptions {
        adapter: Some("99".into()),
        validation: Some(true),
        ..Default::default()
    })
    .unwrap_err();
    match &err {
        Error::AdapterNotFound {
            requested,
            available,
        } => {
            assert_eq!(requested, "99");
            assert_eq!(available.len(), adapters.len());
            for (a, listed) in adapters.iter().zip(available) {
                assert!(listed.contains(&a.name), "{listed:?} lacks {:?}", a.name);
                assert!(listed.starts_with(&a.index.to_string()), "{listed:?}");
            }
        }
        other => panic!("expected AdapterNotFound, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("99") && msg.contains("llvmpipe"), "{msg}");

    // Failing to create one device does not disturb another.
    let gpu = gpu();
    some_work(&gpu);
    assert_clean(&gpu);
}

#[test]
fn unknown_adapter_name_is_an_error_listing_adapters() {
    let err = Device::with_options(DeviceOptions {
        adapter: Some("no-such-gpu-xyz".into()),
        validation: Some(false),
        ..Default::default()
    })
    .unwrap_err();
    match &err {
        Error::AdapterNotFound {
            requested,
            available,
        } => {
            assert_eq!(requested, "no-such-gpu-xyz");
            assert!(!available.is_empty());
            assert!(
                available.iter().any(|a| a.contains("llvmpipe")),
                "{available:?}"
            );
        }
        other => panic!("expected AdapterNotFound, got {other:?}"),
    }
    assert!(err.to_string().contains("no-such-gpu-xyz"));
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
    let expected_semaphores = if gpu.info().transfer_queue { 2 } else { 1 };
    assert_eq!(s.semaphores, expected_semaphores);
    if is_lavapipe(&gpu) {
        assert_eq!(s.semaphores, 1, "lavapipe has no transfer queue");
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
    for d in &devices {
        assert_clean(d);
    }
}
