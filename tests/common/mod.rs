//! Shared test set-up: a device with validation and synchronization
//! validation on, and a check that a test produced no validation message.
#![allow(dead_code)]

pub mod glsl;

use vkcompute::{Device, DeviceOptions};

/// A device with the validation layer on (fails if the layer is missing).
pub fn gpu() -> Device {
    gpu_with(DeviceOptions::default())
}

/// A validated device with `options`.
pub fn gpu_with(mut options: DeviceOptions) -> Device {
    options.validation = Some(true);
    Device::with_options(options).expect(
        "a Vulkan device with validation (install mesa-vulkan-drivers and vulkan-validationlayers)",
    )
}

/// Fails the test if the validation layer reported anything.
pub fn assert_clean(gpu: &Device) {
    let n = gpu.validation_message_count();
    assert_eq!(
        n,
        0,
        "{n} validation messages:\n{}",
        gpu.validation_messages().join("\n---\n")
    );
}

/// Whether `gpu` runs on lavapipe (Mesa's CPU driver), the adapter the
/// lavapipe-specific assertions describe.
pub fn is_lavapipe(gpu: &Device) -> bool {
    gpu.info().driver_name == "llvmpipe"
}

/// Reports a check the adapter at hand cannot make (the test goes on with
/// the rest). The runner shows it with `--nocapture`; grep for `skipped:`.
pub fn skipped(reason: impl std::fmt::Display) {
    println!("skipped: {reason}");
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
}
