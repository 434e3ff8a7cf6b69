//! GLSL to SPIR-V at run time, through shaderc (feature `glsl`).
//!
//! One compiler is created per process on first use and shared. Errors carry
//! shaderc's diagnostics, with line numbers, verbatim.

use std::sync::OnceLock;

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

/// Options for [`compile_glsl_with`].
#[derive(Debug, Clone, Default)]
pub struct GlslOptions {
    /// Preprocessor definitions, as `(name, value)`; `None` defines the name empty.
    pub defines: Vec<(String, Option<String>)>,
    /// Optimisation level.
    pub optimization: GlslOptimization,
    /// A name for the source in diagnostics (default `kernel.comp`).
    pub file_name: Option<String>,
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
    let compiler = compiler()?;
    let mut opts = shaderc::CompileOptions::new().map_err(|e| Error::Glsl {
        message: format!("shaderc options: {e}"),
    })?;
    opts.set_target_env(
        shaderc::TargetEnv::Vulkan,
        shaderc::EnvVersion::Vulkan1_2 as u32,
    );
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

#[cfg(test)]
mod tests {
    use super::*;

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
