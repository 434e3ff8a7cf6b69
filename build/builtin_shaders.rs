//! Compiles every `shaders/*.comp` to SPIR-V at build time and embeds it.
//!
//! Each file becomes one entry of `$OUT_DIR/builtin_spirv.rs`, a table
//! `BUILTIN_SPIRV: &[(&str, &[u32])]` of (file stem, SPIR-V words), in the
//! order of the sorted stems (each file's variants after it).
//! `#include "x.glsl"` resolves against `shaders/`. Built-in kernels
//! therefore need no runtime shaderc: the crate and its built-ins work with
//! `default-features = false`.
//!
//! A `.comp` file may also name variants compiled from the same source with
//! preprocessor definitions, one line each anywhere in the file:
//! `// variant: <stem> NAME=VALUE ...`. Each becomes an entry of its own
//! (the matmul kernels use them to fix a tile's shape at compile time, so
//! that their loops unroll and their arrays of accumulators become
//! registers in the SPIR-V itself; the plain file keeps specialization
//! constants for any other shape).
//!
//! The compiler is Debian's `glslc` (package `glslc`), or
//! `glslangValidator` (package `glslang-tools`) when glslc is missing; the
//! `VKCOMPUTE_GLSLC` variable names another glslc. The target is Vulkan 1.1
//! (SPIR-V 1.3), the first with subgroup operations.

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Which command-line compiler is used.
enum Compiler {
    Glslc(PathBuf),
    Glslang(PathBuf),
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = env::var_os("PATH")?;
    env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn compiler() -> Compiler {
    println!("cargo:rerun-if-env-changed=VKCOMPUTE_GLSLC");
    if let Some(p) = env::var_os("VKCOMPUTE_GLSLC") {
        return Compiler::Glslc(PathBuf::from(p));
    }
    if let Some(p) = find_in_path("glslc") {
        return Compiler::Glslc(p);
    }
    if let Some(p) = find_in_path("glslangValidator") {
        return Compiler::Glslang(p);
    }
    panic!(
        "vkcompute: the built-in kernels are compiled from shaders/*.comp at build time and \
         need `glslc` (Debian/Ubuntu package `glslc`) or `glslangValidator` (package \
         `glslang-tools`) on PATH; install one (scripts/setup.sh does), or set VKCOMPUTE_GLSLC \
         to a glslc binary"
    );
}

/// The `// variant: <stem> NAME=VALUE ...` lines of a shader's source:
/// (stem, definitions). Pure.
fn variants(source: &str) -> Vec<(String, Vec<String>)> {
    source
        .lines()
        .filter_map(|l| l.trim().strip_prefix("// variant:"))
        .filter_map(|rest| {
            let mut words = rest.split_whitespace();
            let stem = words.next()?.to_string();
            Some((stem, words.map(str::to_string).collect()))
        })
        .collect()
}

fn compile(c: &Compiler, src: &Path, include: &Path, out: &Path, defines: &[String]) {
    let mut cmd = match c {
        Compiler::Glslc(p) => {
            let mut cmd = Command::new(p);
            cmd.arg("--target-env=vulkan1.1")
                .arg("-fshader-stage=compute")
                .arg("-O")
                .arg("-I")
                .arg(include)
                .args(defines.iter().map(|d| format!("-D{d}")))
                .arg("-o")
                .arg(out)
                .arg(src);
            cmd
        }
        Compiler::Glslang(p) => {
            let mut cmd = Command::new(p);
            cmd.arg("-V")
                .arg("--target-env")
                .arg("vulkan1.1")
                .arg("-S")
                .arg("comp")
                .arg(format!("-I{}", include.display()))
                .args(defines.iter().map(|d| format!("-D{d}")))
                .arg("-o")
                .arg(out)
                .arg(src);
            cmd
        }
    };
    let output = cmd.output().unwrap_or_else(|e| {
        panic!(
            "vkcompute: could not run the GLSL compiler {:?} ({e}); install `glslc` \
                 (Debian/Ubuntu package `glslc`) or `glslangValidator` (package `glslang-tools`)",
            cmd.get_program()
        )
    });
    if !output.status.success() {
        panic!(
            "vkcompute: compiling {} failed:\n{}{}",
            src.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// Compiles `shaders/*.comp` and writes `$OUT_DIR/builtin_spirv.rs`.
pub fn compile_all() {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let dir = root.join("shaders");
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    for f in &files {
        // Includes too: a change to one recompiles every shader.
        println!("cargo:rerun-if-changed={}", f.display());
    }
    let comps: Vec<&PathBuf> = files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "comp"))
        .collect();
    let mut table = String::from(
        "/// Built-in SPIR-V, compiled from `shaders/*.comp` at build time: (file stem, words).\n\
         pub(crate) static BUILTIN_SPIRV: &[(&str, &[u32])] = &[\n",
    );
    if !comps.is_empty() {
        let c = compiler();
        for src in comps {
            let stem = src
                .file_stem()
                .and_then(|s| s.to_str())
                .expect("shader file names are UTF-8");
            let source = std::fs::read_to_string(src).expect("read shader source");
            let mut outputs = vec![(stem.to_string(), Vec::new())];
            outputs.extend(variants(&source));
            for (name, defines) in outputs {
                let spv = out_dir.join(format!("{name}.spv"));
                compile(&c, src, &dir, &spv, &defines);
                let bytes = std::fs::read(&spv).expect("read compiled SPIR-V");
                assert!(bytes.len() % 4 == 0, "SPIR-V of {name} is not whole words");
                let _ = write!(table, "    ({name:?}, &[");
                for (i, w) in bytes.chunks_exact(4).enumerate() {
                    if i % 8 == 0 {
                        table.push_str("\n        ");
                    }
                    let word = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                    let _ = write!(table, "0x{word:08x}, ");
                }
                table.push_str("\n    ]),\n");
            }
        }
    }
    table.push_str("];\n");
    std::fs::write(out_dir.join("builtin_spirv.rs"), table).expect("write builtin_spirv.rs");
}
