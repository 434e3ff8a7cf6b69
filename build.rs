//! Embeds the built-in kernels' checked-in SPIR-V (`build/builtin_shaders.rs`;
//! no shader compiler runs) and links shaderc's dependencies statically when
//! the `glsl` feature is on.
//!
//! Debian and Ubuntu ship `libshaderc_combined.a` holding shaderc alone, not
//! glslang or SPIRV-Tools, and the shared `libshaderc.so` leaves glslang
//! symbols undefined. So `shaderc-sys` links the combined archive (feature
//! `prefer-static-linking`) and this script adds the glslang and SPIRV-Tools
//! archives from the system library folder, in dependency order. Building
//! shaderc from source would take over ten minutes; this takes none.

use std::env;
use std::hash::{Hash, Hasher};
use std::path::Path;

#[path = "build/builtin_shaders.rs"]
mod builtin_shaders;
#[path = "build/sha256.rs"]
mod sha256;

/// Archives shaderc needs, in the order the linker must see them. Newer
/// glslang releases fold OGLCompiler, OSDependent and HLSL into glslang;
/// those that exist are linked.
const STATIC_LIBS: &[&str] = &[
    "glslang",
    "MachineIndependent",
    "OSDependent",
    "GenericCodeGen",
    "OGLCompiler",
    "SPIRV",
    "HLSL",
    "SPIRV-Tools-opt",
    "SPIRV-Tools",
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=VKCOMPUTE_SHADERC_LIB_DIR");
    builtin_shaders::embed_all();
    if env::var_os("CARGO_FEATURE_GLSL").is_none() {
        return;
    }
    if env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        return;
    }
    // docs.rs documents the crate without linking it: no archives to look
    // for, and no warning that they are missing.
    println!("cargo:rerun-if-env-changed=DOCS_RS");
    if env::var_os("DOCS_RS").is_some() {
        return;
    }
    let dir = env::var("VKCOMPUTE_SHADERC_LIB_DIR").unwrap_or_else(|_| {
        let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
        format!("/usr/lib/{arch}-linux-gnu")
    });
    let present = |lib: &str| Path::new(&dir).join(format!("lib{lib}.a")).exists();
    // Debian's and Ubuntu's layout: `libshaderc_combined.a` holds shaderc
    // alone, and glslang and SPIRV-Tools sit beside it as static archives.
    // Only that layout needs the archives added here; anywhere else (the
    // Vulkan SDK, Fedora's or Arch's shared libshaderc, SHADERC_LIB_DIR,
    // or shaderc-sys building shaderc from source) the `shaderc` crate's
    // own discovery links a complete shaderc and nothing is added.
    let debian_layout = present("shaderc_combined") && present("glslang");
    if debian_layout && env::var_os("SHADERC_LIB_DIR").is_none() {
        println!("cargo:rustc-link-search=native={dir}");
        for lib in STATIC_LIBS.iter().filter(|l| present(l)) {
            println!("cargo:rustc-link-lib=static={lib}");
        }
    } else if present("shaderc_combined") {
        println!(
            "cargo:warning=vkcompute: {dir} has libshaderc_combined.a but not libglslang.a; on \
             Debian/Ubuntu install glslang-dev and spirv-tools beside libshaderc-dev"
        );
    }
    shaderc_fingerprint(&dir);
}

/// Identifies the shaderc build linked (name, size and modification time of
/// each archive), so the on-disk GLSL cache (src/glsl.rs) misses after an
/// upgrade instead of serving another compiler's output.
fn shaderc_fingerprint(dir: &str) {
    println!("cargo:rerun-if-env-changed=SHADERC_LIB_DIR");
    let mut dirs = vec![dir.to_string()];
    if let Ok(d) = env::var("SHADERC_LIB_DIR") {
        dirs.push(d);
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for d in &dirs {
        for lib in std::iter::once(&"shaderc_combined").chain(STATIC_LIBS) {
            let path = Path::new(d).join(format!("lib{lib}.a"));
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            println!("cargo:rerun-if-changed={}", path.display());
            path.hash(&mut h);
            meta.len().hash(&mut h);
            if let Ok(m) = meta.modified() {
                m.hash(&mut h);
            }
        }
    }
    println!("cargo:rustc-env=VKCOMPUTE_SHADERC_ID={:016x}", h.finish());
}
