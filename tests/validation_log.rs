//! Validation messages reach the user: on stderr when no `log` logger
//! takes them (once per distinct message), and, with
//! `DeviceOptions::validation_errors`, as `Error::Validation` from the
//! wait of the batch they arrived during.
//!
//! The tests here plant a hazard on purpose (a dispatch and a fill writing
//! one buffer with no barrier between them, automatic barriers off:
//! synchronization validation's WRITE_AFTER_WRITE), so they make their own devices and check the log
//! themselves instead of using the clean-teardown guard.

mod common;
use common::glsl::INC;

use std::process::Command;

use vkcompute::{Batch, BatchOptions, Buffer, Device, DeviceOptions, Error, Kernel};

/// Set (to `1`) in the child process the stderr test starts.
const ENV_CHILD: &str = "VKCOMPUTE_VALIDATION_STDERR_CHILD";
/// The layer's name for the planted hazard.
const HAZARD: &str = "SYNC-HAZARD-WRITE-AFTER-WRITE";
/// Batches that each plant the hazard (several, so one line on stderr
/// proves the repeats were folded into it).
const REPEATS: usize = 4;

/// A device with validation on and `options` otherwise.
fn validated(options: DeviceOptions) -> Device {
    Device::with_options(DeviceOptions {
        validation: Some(true),
        ..options
    })
    .expect(
        "a Vulkan device with validation (install mesa-vulkan-drivers and vulkan-validationlayers)",
    )
}

/// A batch with the hazard planted: a dispatch writing `buf`, then a fill
/// of `buf` with no barrier between them, automatic barriers off (they
/// would record the barrier). (Two dispatches writing one buffer are a
/// hazard too, but the Khronos layer on CI, 1.3.239, reports none between
/// dispatches; a fill after a dispatch it does.)
fn hazard_batch(gpu: &Device, kernel: &Kernel, buf: &Buffer<u32>) -> Batch {
    let mut b = gpu
        .batch_with(BatchOptions::default().with_auto_barriers(false))
        .unwrap();
    b.run(kernel, &[buf], 64).unwrap();
    b.fill(buf, 7).unwrap();
    b
}

/// A batch with no hazard: one dispatch on `buf`.
fn clean_batch(gpu: &Device, kernel: &Kernel, buf: &Buffer<u32>) -> Batch {
    let mut b = gpu.batch().unwrap();
    b.run(kernel, &[buf], 64).unwrap();
    b
}

/// How many of `gpu`'s validation messages name the planted hazard.
fn hazards(gpu: &Device) -> usize {
    gpu.validation_messages()
        .iter()
        .filter(|m| m.contains(HAZARD))
        .count()
}

/// In the child: no logger is installed (this test binary installs none),
/// validation is on, stderr printing as `stderr` says; the hazard is
/// planted `REPEATS` times. Prints how many messages the log counted, for
/// the parent to check against stderr.
fn child(stderr: Option<bool>) {
    let gpu = validated(DeviceOptions {
        validation_stderr: stderr,
        validation_errors: Some(false),
        ..Default::default()
    });
    let inc = gpu.kernel_glsl(INC).unwrap();
    let buf = gpu.alloc::<u32>(64).unwrap();
    for _ in 0..REPEATS {
        hazard_batch(&gpu, &inc, &buf).submit().unwrap();
    }
    println!("hazard messages counted: {}", hazards(&gpu));
}

/// Runs this test binary's `test` alone in a child process with
/// `ENV_CHILD` set to `mode`; returns the hazard messages the child's log
/// counted and the lines of its stderr that name the hazard.
fn run_child(test: &str, mode: &str) -> (usize, usize, String) {
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(exe)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(ENV_CHILD, mode)
        .output()
        .expect("the child test process runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "the child failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    // The harness prints the test's name on the same line.
    let counted: usize = stdout
        .lines()
        .find_map(|l| l.split("hazard messages counted: ").nth(1))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("the child reported no count:\n{stdout}"));
    let printed = stderr.lines().filter(|l| l.contains(HAZARD)).count();
    (counted, printed, stderr)
}

#[test]
fn a_hazard_without_a_logger_reaches_stderr_once() {
    // In the child process this test is the child: it plants the hazards
    // and reports; the parent below checks what reached its stderr.
    match std::env::var(ENV_CHILD).as_deref() {
        Ok("auto") => return child(None),
        Ok("never") => return child(Some(false)),
        _ => {}
    }
    let test = "a_hazard_without_a_logger_reaches_stderr_once";
    let (counted, printed, stderr) = run_child(test, "auto");
    assert!(
        counted > 1,
        "the hazard was reported {counted} times; repeats are needed to show the folding"
    );
    assert_eq!(
        printed, 1,
        "the hazard ({counted} messages) should show on stderr exactly once:\n{stderr}"
    );
    // `validation_stderr: Some(false)` keeps stderr quiet; the log still counts.
    let (counted, printed, stderr) = run_child(test, "never");
    assert!(counted > 1, "the hazard was reported {counted} times");
    assert_eq!(printed, 0, "nothing should reach stderr:\n{stderr}");
}

#[test]
fn validation_errors_report_the_messages_of_the_batch_span() {
    let gpu = validated(DeviceOptions {
        validation_stderr: Some(false),
        validation_errors: Some(true),
        ..Default::default()
    });
    let inc = gpu.kernel_glsl(INC).unwrap();
    let a = gpu.alloc::<u32>(64).unwrap();
    let b = gpu.alloc::<u32>(64).unwrap();

    clean_batch(&gpu, &inc, &a).submit().unwrap();
    assert_eq!(gpu.validation_message_count(), 0);

    match hazard_batch(&gpu, &inc, &b).submit() {
        Err(Error::Validation { count, messages }) => {
            assert_eq!(count, messages.len());
            assert!(messages.iter().any(|m| m.contains(HAZARD)), "{messages:?}");
        }
        other => panic!("expected Error::Validation, got {other:?}"),
    }
    // The work itself ran: the fill came last.
    assert_eq!(b.download().unwrap(), vec![7u32; 64]);

    // A ticket reports its span on every wait, wait_timeout too.
    let before = gpu.validation_message_count();
    let ticket = hazard_batch(&gpu, &inc, &b).submit_async().unwrap();
    assert!(matches!(ticket.wait(), Err(Error::Validation { .. })));
    let again = ticket.wait_timeout(std::time::Duration::from_secs(60));
    assert!(
        matches!(again, Err(Error::Validation { count, .. }) if count == gpu.validation_message_count() - before),
        "{again:?}"
    );

    // Overlapping spans: a clean batch created before a hazard's batch and
    // waited for after it reports the hazard too; a batch created after
    // the hazard's wait reports nothing.
    let early = clean_batch(&gpu, &inc, &a);
    let hazard = hazard_batch(&gpu, &inc, &b);
    assert!(matches!(hazard.submit(), Err(Error::Validation { .. })));
    match early.submit() {
        Err(Error::Validation { messages, .. }) => {
            assert!(messages.iter().any(|m| m.contains(HAZARD)), "{messages:?}");
        }
        other => panic!("the overlapping batch should report the hazard, got {other:?}"),
    }
    clean_batch(&gpu, &inc, &a).submit().unwrap();
    assert_eq!(a.download().unwrap(), vec![3u32; 64]);
    drop((a, b, inc, ticket));
    drop(gpu);
}

#[test]
fn without_validation_errors_a_hazard_is_only_counted() {
    let gpu = validated(DeviceOptions {
        validation_stderr: Some(false),
        validation_errors: Some(false),
        ..Default::default()
    });
    let inc = gpu.kernel_glsl(INC).unwrap();
    let buf = gpu.alloc::<u32>(64).unwrap();
    hazard_batch(&gpu, &inc, &buf).submit().unwrap();
    assert!(hazards(&gpu) > 0, "{:?}", gpu.validation_messages());
}
