//! Records the resolved versions of the two peers (from the workspace's
//! Cargo.lock) so the report can say exactly what it measured, and lets the
//! link find the Vulkan loader where only its runtime library is installed.
//!
//! scry-gpu's ash links `-lvulkan`, which needs the development symlink
//! `libvulkan.so` (package libvulkan-dev). A fresh machine often has only
//! `libvulkan.so.1` (package libvulkan1): then a `libvulkan.so` link to it
//! is made in OUT_DIR and added to the link search path.

use std::path::{Path, PathBuf};

/// Library directories searched for the loader, in order.
const LIB_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
];

/// The directory to add to the link search path so `-lvulkan` resolves, or
/// `None` when the linker finds `libvulkan.so` on its own (or nothing can
/// help: the link then fails naming libvulkan, and scripts/gpu_bundle.sh
/// says what to install).
fn vulkan_link_dir(out_dir: &Path) -> Option<PathBuf> {
    let extra = std::env::var("VULKAN_SDK")
        .ok()
        .map(|sdk| Path::new(&sdk).join("lib"));
    let dirs: Vec<PathBuf> = extra
        .into_iter()
        .chain(LIB_DIRS.iter().map(PathBuf::from))
        .collect();
    if dirs.iter().any(|d| d.join("libvulkan.so").exists()) {
        return None;
    }
    let runtime = dirs
        .iter()
        .map(|d| d.join("libvulkan.so.1"))
        .find(|p| p.exists())?;
    let link_dir = out_dir.join("vulkan-link");
    std::fs::create_dir_all(&link_dir).ok()?;
    let link = link_dir.join("libvulkan.so");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&runtime, &link).ok()?;
    Some(link_dir)
}

fn locked_version(lock: &str, name: &str) -> Option<String> {
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == format!("name = \"{name}\"") {
            let v = lines.next()?.trim();
            return v
                .strip_prefix("version = \"")
                .and_then(|v| v.strip_suffix('"'))
                .map(str::to_string);
        }
    }
    None
}

fn main() {
    if let Some(out) = std::env::var_os("OUT_DIR") {
        if let Some(dir) = vulkan_link_dir(Path::new(&out)) {
            println!("cargo:rustc-link-search=native={}", dir.display());
        }
    }
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let lock_path = Path::new(&dir).join("../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock_path.display());
    println!("cargo:rerun-if-env-changed=VULKAN_SDK");
    let lock = std::fs::read_to_string(&lock_path).unwrap_or_default();
    for (crate_name, var) in [
        ("wgpu", "PEERS_WGPU_VERSION"),
        ("scry-gpu", "PEERS_SCRY_VERSION"),
    ] {
        let v = locked_version(&lock, crate_name).unwrap_or_else(|| "?".to_string());
        println!("cargo:rustc-env={var}={v}");
    }
}
