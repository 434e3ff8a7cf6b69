//! Set-up failures a user can act on: a driver manifest naming a library
//! that does not exist (the loader finds no driver it can load) and the
//! validation layer asked for where the loader cannot find it. Each is a
//! typed error whose text says what to install.
//!
//! The loader reads its environment once per process, so each case runs in
//! a child process: the test binary itself, started with
//! `VKCOMPUTE_SETUP_CHILD` naming the case and the loader's variables set.
//! The child creates the device and prints the result on a line starting
//! with `RESULT `; the parent checks that line.

use std::path::PathBuf;
use std::process::Command;

use vkcompute::{Device, DeviceOptions, Error};

/// Environment variable that puts the test binary in child mode.
const CHILD: &str = "VKCOMPUTE_SETUP_CHILD";

/// In a child: creates a device (validation as `validation`) and prints
/// the error's variant and text for the parent to check. Returns whether
/// this process is a child (whose test then ends: the parent asserts).
fn child_creates_device(validation: bool) -> bool {
    if std::env::var_os(CHILD).is_none() {
        return false;
    }
    let r = Device::with_options(DeviceOptions {
        validation: Some(validation),
        ..DeviceOptions::default()
    });
    match r {
        Ok(gpu) => println!("\nRESULT ok {}", gpu.info().name),
        Err(e) => {
            let variant = match e {
                Error::NoAdapter => "NoAdapter",
                Error::ValidationLayerMissing => "ValidationLayerMissing",
                Error::Loader(_) => "Loader",
                _ => "other",
            };
            println!("\nRESULT {variant} {e}");
        }
    }
    true
}

/// Runs `test` of this binary in a child with `env` set and `unset`
/// removed, and returns the child's `RESULT` line.
fn run_child(test: &str, env: &[(&str, &str)], unset: &[&str]) -> String {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = Command::new(exe);
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    for k in unset {
        cmd.env_remove(k);
    }
    let out = cmd.output().expect("the child test process starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find_map(|l| l.split_once("RESULT ").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("no RESULT line in the child's output:\n{stdout}"))
        .to_string()
}

/// A fresh folder under target/ for this test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    dir
}

#[test]
fn a_driver_that_fails_to_load_is_no_adapter_with_what_to_install() {
    if child_creates_device(false) {
        return;
    }
    let dir = scratch("setup_errors_icd");
    let manifest = dir.join("missing_icd.json");
    let library = dir.join("libvulkan_missing_driver.so");
    std::fs::write(
        &manifest,
        format!(
            r#"{{"file_format_version": "1.0.0", "ICD": {{"library_path": "{}", "api_version": "1.3.0"}}}}"#,
            library.display()
        ),
    )
    .unwrap();
    let manifest = manifest.to_str().unwrap();
    // Both names: VK_DRIVER_FILES for loaders from 1.3.207, VK_ICD_FILENAMES
    // for older ones (the newer name wins where both are read).
    let line = run_child(
        "a_driver_that_fails_to_load_is_no_adapter_with_what_to_install",
        &[
            ("VK_DRIVER_FILES", manifest),
            ("VK_ICD_FILENAMES", manifest),
        ],
        &["VK_ADD_DRIVER_FILES"],
    );
    assert!(line.starts_with("NoAdapter "), "{line}");
    assert!(line.contains("no Vulkan adapter"), "{line}");
    assert!(line.contains("VK_DRIVER_FILES is set"), "{line}");
    assert!(line.contains("library that exists"), "{line}");
    if cfg!(target_os = "linux") {
        // Every Linux message names a driver package (Mesa's, on the
        // distributions the hint knows by name).
        assert!(line.contains("mesa") || line.contains("Mesa"), "{line}");
    }
}

#[test]
fn validation_asked_for_without_the_layer_says_what_to_install() {
    if child_creates_device(true) {
        return;
    }
    let dir = scratch("setup_errors_no_layers");
    let line = run_child(
        "validation_asked_for_without_the_layer_says_what_to_install",
        &[("VK_LAYER_PATH", dir.to_str().unwrap())],
        &[
            "VK_ADD_LAYER_PATH",
            "VK_INSTANCE_LAYERS",
            "VK_LOADER_LAYERS_ENABLE",
        ],
    );
    assert!(line.starts_with("ValidationLayerMissing "), "{line}");
    assert!(line.contains("VK_LAYER_KHRONOS_validation"), "{line}");
    assert!(line.contains("VK_LAYER_PATH is set"), "{line}");
    assert!(line.contains("without validation"), "{line}");
    if std::fs::read_to_string("/etc/os-release").is_ok_and(|r| r.contains("ID=debian")) {
        assert!(
            line.contains("apt install vulkan-validationlayers"),
            "{line}"
        );
    }
}
