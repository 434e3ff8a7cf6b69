//! Devices made and dropped one after another in one process give back
//! what the driver gave them: open files and threads return to where they
//! were, so the fortieth device is made as easily as the first.
//!
//! Its own test binary: it counts the whole process's open files and
//! threads, which other tests running beside it would change. Each test
//! also passes alone (`--exact NAME`, a process of its own): on an NVIDIA
//! H200 (driver 580.159) the 30th instance of a process found no driver
//! until the crate kept one instance for the process (see `src/instance.rs`);
//! made with raw ash, instances stopped at the 30th too, with the loader
//! reloaded each round or kept, and went on beside one kept instance.

mod common;

use vkcompute::{Device, DeviceOptions};

const INC: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer Data { uint v[]; };
void main() { v[gl_GlobalInvocationID.x] += 1u; }
"#;

/// How many devices the test makes after its warm-up one.
const ROUNDS: usize = 40;

/// Open files, threads, memory mappings and resident KiB of this process
/// (Linux's `/proc`), for the failure messages.
fn process_facts() -> String {
    let maps = std::fs::read_to_string("/proc/self/maps")
        .map(|m| m.lines().count())
        .unwrap_or(0);
    let rss = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_default();
    format!(
        "open files and threads {:?}, {maps} memory mappings, resident {rss}",
        process_counts()
    )
}

/// Runs `make` `ROUNDS + 1` times, failing with the round, the error and
/// the process's facts at the first error.
fn rounds<E: std::fmt::Debug>(what: &str, mut make: impl FnMut() -> Result<(), E>) {
    let start = process_facts();
    for round in 0..=ROUNDS {
        if let Err(e) = make() {
            panic!(
                "{what}: round {round} failed: {e:?}; at the start: {start}; now: {}",
                process_facts()
            );
        }
    }
    eprintln!("{what}: {} rounds; {}", ROUNDS + 1, process_facts());
}

/// Open file descriptors and threads of this process (Linux's `/proc`).
fn process_counts() -> Option<(usize, usize)> {
    let fds = std::fs::read_dir("/proc/self/fd").ok()?.count();
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let threads = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))?
        .trim()
        .parse()
        .ok()?;
    Some((fds, threads))
}

/// One device's life as the tests use one: validation on, a kernel, a
/// buffer, a batch, a read-back, then dropped.
fn one_device(validation: bool) {
    let gpu = Device::with_options(DeviceOptions {
        validation: Some(validation),
        ..Default::default()
    })
    .unwrap_or_else(|e| panic!("a Vulkan device: {e:?}; {}", process_facts()));
    let k = gpu.kernel_glsl(INC).unwrap();
    let x = gpu.upload(&[7u32; 64]).unwrap();
    let mut b = gpu.batch().unwrap();
    b.run(&k, &[&x], 64).unwrap();
    b.submit().unwrap();
    assert_eq!(x.download().unwrap(), vec![8u32; 64]);
    assert_eq!(
        gpu.validation_message_count(),
        0,
        "{:?}",
        gpu.validation_messages()
    );
}

#[test]
fn forty_adapter_listings() {
    rounds("Device::adapters", || Device::adapters().map(|_| ()));
}

#[test]
fn forty_devices_made_and_dropped_without_work() {
    rounds("devices without work", || {
        Device::with_options(DeviceOptions {
            validation: Some(false),
            ..Default::default()
        })
        .map(drop)
    });
}

fn churn(validation: bool) {
    // The first device loads the driver and the layers, which stay loaded.
    one_device(validation);
    let Some(start) = process_counts() else {
        common::skipped("no /proc/self to count open files and threads in");
        return;
    };
    let mut seen = Vec::new();
    for round in 0..ROUNDS {
        one_device(validation);
        let now = process_counts().expect("/proc/self was readable a moment ago");
        seen.push(now);
        // A little slack for threads the driver parks and reuses; a leak
        // of one device's files or threads per round exceeds it by round 10.
        assert!(
            now.0 <= start.0 + 8 && now.1 <= start.1 + 4,
            "validation {validation}: after {} devices the process holds {} open files \
             and {} threads, against {} and {} after the first (counts per round: {seen:?})",
            round + 2,
            now.0,
            now.1,
            start.0,
            start.1
        );
    }
    eprintln!(
        "device churn (validation {validation}): {} devices; open files {} -> {}, threads {} -> {}",
        ROUNDS + 1,
        start.0,
        seen.last().unwrap().0,
        start.1,
        seen.last().unwrap().1
    );
}

#[test]
fn forty_devices_with_validation_leave_no_files_or_threads() {
    churn(true);
}

#[test]
fn forty_devices_without_validation_leave_no_files_or_threads() {
    churn(false);
}
