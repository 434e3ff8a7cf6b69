//! Shared test set-up: a device with validation and synchronization
//! validation on, a check that a test produced no validation message (also
//! during the device's teardown), and visible skips.
//!
//! # Conventions for every integration test
//!
//! - Get the device from [`gpu`] or [`gpu_with`]. They return a [`Gpu`]
//!   guard that derefs to [`Device`] (pass `&gpu` wherever `&Device` is
//!   expected; `gpu.clone()` gives a plain `Device`). When the guard drops at
//!   the end of the test it drops its device and fails the test if the
//!   validation layer reported anything, including while the device was
//!   destroyed (objects alive at `vkDestroyDevice`, leaks). Clones still
//!   alive at that point are destroyed later, unchecked: drop them first.
//! - Call [`assert_clean`] where a test wants the check before the end.
//! - Under scripts/test.sh (`VKCOMPUTE_VALIDATION_ERRORS=1`) a message
//!   fails the test earlier too: the wait of the batch it arrived during
//!   (`Ticket::wait`, `Batch::submit`) returns `Error::Validation`.
//! - A check the test cannot make on this adapter is never skipped silently:
//!   - [`skipped`]: the adapter lacks what the check needs (a feature, a
//!     limit, a queue), or the check describes another adapter (lavapipe's
//!     own values). Allowed everywhere.
//!   - [`not_exercised`]: the adapter supports the path but this run does
//!     not reach it (a size the test will not allocate, time, quick mode).
//!     On the GPU machine (`VKCOMPUTE_REQUIRE_PATHS=1`, set by
//!     scripts/gpu_run.sh) this fails the test: make the test reach the
//!     path there instead (e.g. lower a limit through [`DeviceOptions`]).
//!   - [`skip`] takes the distinction as a bool, for a condition computed
//!     from the adapter.
//!
//!   Each writes `skipped: <reason>` to the process's stderr (not through
//!   the test harness's capture) and, when `VKCOMPUTE_SKIP_LOG` names a
//!   file, appends `<test>: <reason>` to it; scripts/test.sh prints the
//!   count and the reasons at the end of the run.
#![allow(dead_code)]

pub mod glsl;

use std::io::Write;
use std::ops::Deref;
use std::sync::Arc;

use vkcompute::{Device, DeviceOptions, ValidationLog};

/// Environment variable naming a file every skip is appended to.
pub const ENV_SKIP_LOG: &str = "VKCOMPUTE_SKIP_LOG";
/// Environment variable (`1`) that makes [`not_exercised`] fail the test.
pub const ENV_REQUIRE_PATHS: &str = "VKCOMPUTE_REQUIRE_PATHS";

/// A validated device that checks its own teardown: dropping the guard
/// drops the device, then fails the test if the validation layer reported
/// anything over the device's whole life, its destruction included.
pub struct Gpu {
    device: Option<Device>,
    log: Arc<ValidationLog>,
}

impl Gpu {
    /// Drops the device now and checks its teardown (what dropping the guard
    /// does; for a test that wants the check at a given point).
    pub fn finish(self) {}

    /// The shared validation log (it outlives the device).
    pub fn log(&self) -> Arc<ValidationLog> {
        Arc::clone(&self.log)
    }
}

impl Deref for Gpu {
    type Target = Device;
    fn deref(&self) -> &Device {
        self.device
            .as_ref()
            .expect("the device lives until the guard drops")
    }
}

impl AsRef<Device> for Gpu {
    fn as_ref(&self) -> &Device {
        self
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        drop(self.device.take());
        if std::thread::panicking() {
            return;
        }
        assert_log_clean(&self.log, "over the device's life and teardown");
    }
}

/// Fails if `log` holds any message; `when` says over what span.
pub fn assert_log_clean(log: &ValidationLog, when: &str) {
    let n = log.count();
    assert_eq!(
        n,
        0,
        "{n} validation messages {when}:\n{}",
        log.messages().join("\n---\n")
    );
}

/// A device with the validation layer on (fails if the layer is missing).
pub fn gpu() -> Gpu {
    gpu_with(DeviceOptions::default())
}

/// A validated device with `options`.
pub fn gpu_with(mut options: DeviceOptions) -> Gpu {
    options.validation = Some(true);
    let device = Device::with_options(options).expect(
        "a Vulkan device with validation (install mesa-vulkan-drivers and vulkan-validationlayers)",
    );
    let log = device.validation_log();
    Gpu {
        device: Some(device),
        log,
    }
}

/// Fails the test if the validation layer reported anything so far.
pub fn assert_clean(gpu: &Device) {
    let n = gpu.validation_message_count();
    assert_eq!(
        n,
        0,
        "{n} validation messages:\n{}",
        gpu.validation_messages().join("\n---\n")
    );
}

/// Drops `device` (a plain device made by the test itself, e.g. with
/// validation on through [`Device::with_options`]) and fails the test if
/// its validation log holds any message, its teardown included.
pub fn finish_device(device: Device) {
    let log = device.validation_log();
    drop(device);
    assert_log_clean(&log, "over the device's life and teardown");
}

/// Whether `gpu` runs on lavapipe (Mesa's CPU driver), the adapter the
/// lavapipe-specific assertions describe.
pub fn is_lavapipe(gpu: &Device) -> bool {
    gpu.info().driver_name == "llvmpipe"
}

/// Whether this run must exercise every path the adapter supports
/// (`VKCOMPUTE_REQUIRE_PATHS=1`: the GPU machine).
pub fn require_paths() -> bool {
    std::env::var(ENV_REQUIRE_PATHS).is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    })
}

/// Reports a check this adapter lacks what it needs for (the test goes on
/// with the rest). See the module's conventions.
pub fn skipped(reason: impl std::fmt::Display) {
    skip(false, reason);
}

/// Reports a path the adapter supports that this run does not exercise;
/// fails the test under `VKCOMPUTE_REQUIRE_PATHS=1`.
pub fn not_exercised(reason: impl std::fmt::Display) {
    skip(true, reason);
}

/// Reports a skipped check: `adapter_supports` says whether the adapter
/// could run it (then, under `VKCOMPUTE_REQUIRE_PATHS=1`, the test fails).
pub fn skip(adapter_supports: bool, reason: impl std::fmt::Display) {
    let test = std::thread::current()
        .name()
        .unwrap_or("<unnamed thread>")
        .to_string();
    let kind = if adapter_supports {
        "not exercised"
    } else {
        "adapter lacks"
    };
    let line = format!("skipped: {reason} [{kind}; {test}]");
    // Straight to the process's stderr: the harness captures only the
    // print macros, so this shows even for a passing test.
    let _ = writeln!(std::io::stderr().lock(), "{line}");
    if let Some(path) = std::env::var_os(ENV_SKIP_LOG) {
        let bin = std::env::args()
            .next()
            .map(|a| {
                let name = std::path::Path::new(&a)
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or(a);
                // Cargo names test binaries `<target>-<hash>`.
                name.rsplit_once('-')
                    .map_or(name.clone(), |(t, _)| t.to_string())
            })
            .unwrap_or_default();
        let entry = format!("{bin}::{test}: {reason} [{kind}]\n");
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = f.write_all(entry.as_bytes());
        }
    }
    if adapter_supports && require_paths() {
        panic!("{ENV_REQUIRE_PATHS}=1: the adapter supports this path, so the test must exercise it: {reason}");
    }
}

/// A small deterministic generator (xorshift64*), so tests need no crate.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    pub fn f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
    pub fn vec_f32(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f32()).collect()
    }
    /// `len` multiples of 1/64 in [-1, 1), exact in f16: their IEEE
    /// binary16 bits and their values.
    pub fn exact_f16(&mut self, len: usize) -> (Vec<u16>, Vec<f64>) {
        (0..len)
            .map(|_| {
                let x = (self.below(128) as f32 - 64.0) / 64.0;
                (vkcompute::ops::F16::from_f32(x).0, f64::from(x))
            })
            .unzip()
    }
}
