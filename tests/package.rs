//! The published crate holds the library and nothing else, and fits
//! the public registry's 10 MB limit with every precompiled built-in kernel.
//!
//! `cargo package --list` reads the manifest's `include` list without
//! building or touching the network. The registry's limit applies to the
//! uploaded archive (the compressed `.crate`), so the size test builds that
//! archive itself (`cargo package --no-verify --offline`, into the tests'
//! scratch directory) and checks its length; it also prints the listed
//! files' uncompressed total.

use std::path::Path;
use std::process::Command;

/// The public registry's limit on an uploaded crate.
const REGISTRY_LIMIT: u64 = 10 * 1000 * 1000;

/// Files cargo writes into every package beside the listed ones.
const GENERATED: [&str; 3] = [".cargo_vcs_info.json", "Cargo.lock", "Cargo.toml.orig"];

/// Runs `cargo package --allow-dirty --offline` with `args` in the crate's
/// root; its standard output.
fn cargo_package(args: &[&std::ffi::OsStr]) -> Vec<u8> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["package", "--allow-dirty", "--offline"])
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo package {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn package_list() -> Vec<String> {
    String::from_utf8(cargo_package(&["--list".as_ref()]))
        .expect("file names are UTF-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_package_holds_the_crate_and_nothing_else() {
    let files = package_list();
    // What the library needs to build: the manifest, the readme (the
    // crate docs run its program), the build script and the shaders it
    // embeds (shaders/spv) or includes as text (megakernel, fusion).
    for needed in [
        "Cargo.toml",
        "README.md",
        "build.rs",
        "build/builtin_shaders.rs",
        "src/lib.rs",
        "src/ARCHITECTURE.md",
        "shaders/spv/MANIFEST.tsv",
        "shaders/megakernel/worker.glsl",
        "shaders/activations.glsl",
    ] {
        assert!(
            files.iter().any(|f| f == needed),
            "{needed} missing: {files:?}"
        );
    }
    let allowed = ["src/", "shaders/", "build/"];
    let top = ["Cargo.toml", "README.md", "build.rs"];
    for f in &files {
        let ok = GENERATED.contains(&f.as_str())
            || top.contains(&f.as_str())
            || allowed.iter().any(|d| f.starts_with(d));
        assert!(
            ok,
            "{f} is packaged; the crate ships only {allowed:?} and {top:?}"
        );
    }
    // Every precompiled kernel the manifest lists is in (its first
    // column, after the comments and the header row).
    let manifest = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders/spv/MANIFEST.tsv"),
    )
    .unwrap();
    let outputs: Vec<&str> = manifest
        .lines()
        .filter(|l| !l.starts_with('#'))
        .skip(1)
        .filter_map(|l| l.split('\t').next())
        .collect();
    assert!(!outputs.is_empty(), "the manifest lists no kernel");
    for out in outputs {
        let spv = format!("shaders/spv/{out}.spv");
        assert!(files.contains(&spv), "{spv} is not packaged");
    }
}

#[test]
fn the_package_fits_the_registry_limit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut listed = 0u64;
    for f in package_list() {
        if GENERATED.contains(&f.as_str()) {
            continue;
        }
        let len = std::fs::metadata(root.join(&f))
            .unwrap_or_else(|e| panic!("{f}: {e}"))
            .len();
        listed += len;
    }
    // The archive as it would be uploaded, built without compiling it (the
    // tests build the crate already) into a directory of its own, so that
    // the running build's target directory is not touched.
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("package");
    cargo_package(&[
        "--no-verify".as_ref(),
        "--target-dir".as_ref(),
        scratch.as_os_str(),
    ]);
    let name = format!(
        "{}-{}.crate",
        env!("CARGO_PKG_NAME"),
        env!("CARGO_PKG_VERSION")
    );
    let archive = scratch.join("package").join(&name);
    let total = std::fs::metadata(&archive)
        .unwrap_or_else(|e| panic!("{}: {e}", archive.display()))
        .len();
    eprintln!("package: {name} is {total} bytes ({listed} bytes of files uncompressed)");
    assert!(
        total < REGISTRY_LIMIT,
        "{name} takes {total} bytes, over the registry's {REGISTRY_LIMIT}"
    );
    // The archive holds at least the kernels' SPIR-V; a few hundred bytes
    // would mean cargo packaged something other than this crate.
    assert!(
        total > listed / 20,
        "{name} is {total} bytes for {listed} bytes of files: not this crate's archive"
    );
}
