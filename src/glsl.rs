//! GLSL to SPIR-V at run time, through shaderc (feature `glsl`).
//!
//! One compiler is created per process on first use and shared. Errors carry
//! shaderc's diagnostics, with line numbers, verbatim. Kernels built from
//! GLSL on a device with a cache directory keep their SPIR-V on disk
//! ([`compile_cached`]), keyed by the source, the options and the shaderc
//! build, since shaderc takes milliseconds per kernel; failed compilations
//! are not cached.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use crate::disk_cache::{self, CacheCounters};
use crate::error::{Error, Result};

/// Optimisation applied when compiling GLSL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GlslOptimization {
    /// No optimisation (fastest compile).
    None,
    /// Optimise for speed (the default).
    #[default]
    Performance,
}

/// The Vulkan version the SPIR-V is compiled for (it sets the SPIR-V
/// version: 1.3 for Vulkan 1.1, 1.5 for 1.2, 1.6 for 1.3). `Send + Sync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GlslTarget {
    /// Vulkan 1.1 (SPIR-V 1.3), what the crate's built-in kernels use.
    Vulkan1_1,
    /// Vulkan 1.2 (SPIR-V 1.5), the default.
    #[default]
    Vulkan1_2,
    /// Vulkan 1.3 (SPIR-V 1.6).
    Vulkan1_3,
}

/// Options for [`compile_glsl_with`].
#[derive(Debug, Clone, Default)]
pub struct GlslOptions {
    /// Preprocessor definitions, as `(name, value)`; `None` defines the name empty.
    pub defines: Vec<(String, Option<String>)>,
    /// Optimisation level.
    pub optimization: GlslOptimization,
    /// A name for the source in diagnostics (default `kernel.comp`).
    pub file_name: Option<String>,
    /// The Vulkan version targeted (default Vulkan 1.2). The device must
    /// support the SPIR-V version it implies.
    pub target: GlslTarget,
}

fn compiler() -> Result<&'static shaderc::Compiler> {
    static COMPILER: OnceLock<Option<shaderc::Compiler>> = OnceLock::new();
    COMPILER
        .get_or_init(|| shaderc::Compiler::new().ok())
        .as_ref()
        .ok_or_else(|| Error::Glsl {
            message: "shaderc could not create a compiler".into(),
        })
}

fn nul_free(what: &str, s: &str) -> Result<()> {
    if s.contains('\0') {
        return Err(Error::Glsl {
            message: format!("{what} contains a NUL byte"),
        });
    }
    Ok(())
}

/// Compiles a GLSL compute shader to SPIR-V words (entry point `main`,
/// Vulkan 1.2 target, optimised for speed).
pub fn compile_glsl(source: &str) -> Result<Vec<u32>> {
    compile_glsl_with(source, &GlslOptions::default())
}

/// Compiles a GLSL compute shader with `options`.
pub fn compile_glsl_with(source: &str, options: &GlslOptions) -> Result<Vec<u32>> {
    nul_free("the GLSL source", source)?;
    let file = options.file_name.as_deref().unwrap_or("kernel.comp");
    nul_free("the file name", file)?;
    if !has_version_directive(source) {
        // Without one glslang assumes version 110, which has no compute
        // shaders; on the first such compile it also prints its whole
        // built-in symbol table (thousands of lines) to stdout.
        return Err(Error::Glsl {
            message: format!(
                "{file}:1: error: no #version directive; compute shaders need #version 420 or later (e.g. #version 450)"
            ),
        });
    }
    let compiler = compiler()?;
    let mut opts = shaderc::CompileOptions::new().map_err(|e| Error::Glsl {
        message: format!("shaderc options: {e}"),
    })?;
    let env = match options.target {
        GlslTarget::Vulkan1_1 => shaderc::EnvVersion::Vulkan1_1,
        GlslTarget::Vulkan1_2 => shaderc::EnvVersion::Vulkan1_2,
        GlslTarget::Vulkan1_3 => shaderc::EnvVersion::Vulkan1_3,
    };
    opts.set_target_env(shaderc::TargetEnv::Vulkan, env as u32);
    opts.set_optimization_level(match options.optimization {
        GlslOptimization::None => shaderc::OptimizationLevel::Zero,
        GlslOptimization::Performance => shaderc::OptimizationLevel::Performance,
    });
    for (name, value) in &options.defines {
        nul_free("a define name", name)?;
        if let Some(v) = value {
            nul_free("a define value", v)?;
        }
        opts.add_macro_definition(name, value.as_deref());
    }
    let artifact = compiler
        .compile_into_spirv(
            source,
            shaderc::ShaderKind::Compute,
            file,
            "main",
            Some(&opts),
        )
        .map_err(|e| Error::Glsl {
            message: match e {
                shaderc::Error::CompilationError(_, msg) => msg,
                other => other.to_string(),
            },
        })?;
    Ok(artifact.as_binary().to_vec())
}

/// What identifies the compiler: output of another shaderc build may differ.
fn compiler_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let (spv, rev) = shaderc::get_spirv_version();
        format!(
            "vkcompute-glsl/1 target=vulkan1.2 shaderc-archives={} spirv={spv}.{rev}",
            option_env!("VKCOMPUTE_SHADERC_ID").unwrap_or("unknown")
        )
    })
}

/// `options` as key fields (everything that reaches the compiler).
fn option_fields(options: &GlslOptions) -> Vec<(String, String)> {
    let mut out = vec![
        (
            "optimization".to_string(),
            format!("{:?}", options.optimization),
        ),
        (
            "file".to_string(),
            options.file_name.clone().unwrap_or_default(),
        ),
    ];
    // Only a non-default target changes the key, so caches written before
    // the option existed stay valid.
    if options.target != GlslTarget::default() {
        out.push(("target".into(), format!("{:?}", options.target)));
    }
    for (name, value) in &options.defines {
        out.push(("define".into(), name.clone()));
        out.push(match value {
            Some(v) => ("value".into(), v.clone()),
            None => ("empty".into(), String::new()),
        });
    }
    out
}

/// [`compile_glsl_with`], answered from `dir` when it holds this exact
/// compilation, else compiled and stored there. Cache files that are
/// corrupt or fail the SPIR-V header check are ignored (and replaced).
pub(crate) fn compile_cached(
    source: &str,
    options: &GlslOptions,
    dir: Option<&Path>,
    counters: &CacheCounters,
) -> Result<Vec<u32>> {
    let Some(dir) = dir else {
        return compile_glsl_with(source, options);
    };
    let fields = option_fields(options);
    let pairs: Vec<(&str, &str)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let key = disk_cache::spirv_key(compiler_id(), source, &pairs);
    let path = dir.join(disk_cache::spirv_file_name(&key));
    if let Some(bytes) = disk_cache::read_file(&path, disk_cache::MAX_SPIRV_FILE) {
        match disk_cache::decode_spirv(&key, &bytes) {
            Ok(words) => {
                counters.spirv_hits.fetch_add(1, Ordering::Relaxed);
                return Ok(words);
            }
            Err(why) => {
                counters.spirv_rejected.fetch_add(1, Ordering::Relaxed);
                log::info!("vkcompute: ignoring {}: {why}", path.display());
            }
        }
    }
    let words = compile_glsl_with(source, options)?;
    counters.spirv_misses.fetch_add(1, Ordering::Relaxed);
    if let Err(e) = disk_cache::write_atomic(&path, &disk_cache::encode_spirv(&key, &words)) {
        log::info!(
            "vkcompute: could not cache SPIR-V in {}: {e}",
            path.display()
        );
    }
    Ok(words)
}

/// Whether some line is a `#version` directive (`#`, optional blanks, `version`).
fn has_version_directive(source: &str) -> bool {
    source.lines().any(|line| {
        line.trim_start()
            .strip_prefix('#')
            .is_some_and(|rest| rest.trim_start().starts_with("version"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_sets_the_spirv_version() {
        let src = "#version 450\nlayout(local_size_x = 1) in;\nvoid main() {}\n";
        for (target, version) in [
            (GlslTarget::Vulkan1_1, 0x0001_0300),
            (GlslTarget::Vulkan1_2, 0x0001_0500),
            (GlslTarget::Vulkan1_3, 0x0001_0600),
        ] {
            let opts = GlslOptions {
                target,
                ..GlslOptions::default()
            };
            let words = compile_glsl_with(src, &opts).unwrap();
            assert_eq!(words[1], version, "{target:?}");
            // Only a non-default target enters the cache key.
            let keyed = option_fields(&opts).iter().any(|(k, _)| k == "target");
            assert_eq!(keyed, target != GlslTarget::default());
        }
    }

    #[test]
    fn compiles_and_reports_line_numbers() {
        let ok =
            compile_glsl("#version 450\nlayout(local_size_x = 64) in;\nvoid main() {}\n").unwrap();
        assert_eq!(ok[0], 0x0723_0203);
        let err =
            compile_glsl("#version 450\nlayout(local_size_x = 64) in;\nvoid main() { oops; }\n")
                .unwrap_err();
        match err {
            Error::Glsl { message } => assert!(message.contains(":3:"), "{message}"),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn nul_bytes_are_errors_not_panics() {
        assert!(matches!(
            compile_glsl("#version 450\0"),
            Err(Error::Glsl { .. })
        ));
        let opts = GlslOptions {
            defines: vec![("A\0".into(), None)],
            ..Default::default()
        };
        assert!(compile_glsl_with("#version 450\nvoid main(){}", &opts).is_err());
    }

    #[test]
    fn cached_compilation_hits_and_survives_corruption() {
        let dir = std::env::temp_dir().join(format!("vkcompute-glsl-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let c = CacheCounters::default();
        let src = "#version 450\nlayout(local_size_x = 64) in;\nvoid main() {}\n";
        let opts = GlslOptions::default();
        let cold = compile_cached(src, &opts, Some(&dir), &c).unwrap();
        let warm = compile_cached(src, &opts, Some(&dir), &c).unwrap();
        assert_eq!(cold, warm);
        assert_eq!(cold, compile_glsl(src).unwrap());
        let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        assert_eq!((get(&c.spirv_misses), get(&c.spirv_hits)), (1, 1));
        // Other options are another entry.
        let none = GlslOptions {
            optimization: GlslOptimization::None,
            ..Default::default()
        };
        compile_cached(src, &none, Some(&dir), &c).unwrap();
        assert_eq!(get(&c.spirv_misses), 2);
        // Corrupt every entry: ignored, recompiled, rewritten.
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let mut b = std::fs::read(&p).unwrap();
            let n = b.len();
            b[n - 8] ^= 0xff;
            std::fs::write(&p, b).unwrap();
        }
        assert_eq!(compile_cached(src, &opts, Some(&dir), &c).unwrap(), cold);
        assert_eq!((get(&c.spirv_rejected), get(&c.spirv_misses)), (1, 3));
        assert_eq!(compile_cached(src, &opts, Some(&dir), &c).unwrap(), cold);
        assert_eq!(get(&c.spirv_hits), 2);
        // Errors are not cached.
        assert!(compile_cached("#version 450\noops", &opts, Some(&dir), &c).is_err());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn sources_without_a_version_are_errors() {
        for src in ["", " ", "void main() {}", "// #version 450\nvoid main() {}"] {
            match compile_glsl(src) {
                Err(Error::Glsl { message }) => assert!(message.contains("#version"), "{message}"),
                other => panic!("{src:?}: {other:?}"),
            }
        }
        assert!(has_version_directive("  #  version 450\n"));
        assert!(has_version_directive("// a comment\n#version 450 core\n"));
        assert!(!has_version_directive("#define version 450\n"));
    }

    #[test]
    fn defines_reach_the_preprocessor() {
        let src = "#version 450\nlayout(local_size_x = WG) in;\nvoid main() {}\n";
        assert!(compile_glsl(src).is_err());
        let opts = GlslOptions {
            defines: vec![("WG".into(), Some("128".into()))],
            ..Default::default()
        };
        assert!(compile_glsl_with(src, &opts).is_ok());
    }
}
