//! Devices made and dropped one after another in one process give back
//! what the driver gave them: open files and threads return to where they
//! were, so the fortieth device is made as easily as the first.
//!
//! Its own test binary: it counts the whole process's open files and
//! threads, which other tests running beside it would change.

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
    .expect("a Vulkan device (install mesa-vulkan-drivers)");
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
