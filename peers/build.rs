//! Records the resolved versions of the two peers (from the workspace's
//! Cargo.lock) so the report can say exactly what it measured.

use std::path::Path;

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
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let lock_path = Path::new(&dir).join("../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock_path.display());
    let lock = std::fs::read_to_string(&lock_path).unwrap_or_default();
    for (crate_name, var) in [
        ("wgpu", "PEERS_WGPU_VERSION"),
        ("scry-gpu", "PEERS_SCRY_VERSION"),
    ] {
        let v = locked_version(&lock, crate_name).unwrap_or_else(|| "?".to_string());
        println!("cargo:rustc-env={var}={v}");
    }
}
