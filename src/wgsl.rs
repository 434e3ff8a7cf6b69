//! WGSL to SPIR-V at run time, through naga (feature `wgsl`).
//!
//! naga is the pure-Rust front end wgpu uses: the source is parsed,
//! validated, and the one compute entry point asked for is written as a
//! SPIR-V 1.3 module (what Vulkan 1.1 accepts), which then goes through the
//! crate's ordinary reflection and checks like any kernel. Errors carry
//! naga's diagnostics verbatim: the file name, line and column, the line
//! itself and what is wrong with it, as [`Error::Wgsl`].
//!
//! Out-of-bounds accesses stay inside their binding, as WGSL promises: an
//! index past the end of an array, vector, matrix or a buffer binding's
//! runtime-sized array is clamped to its last element
//! ([`BoundsCheckPolicy::Restrict`]). That is what wgpu writes on Vulkan
//! devices without robust buffer access, so kernels behave as their authors
//! saw them behave under wgpu; naga's other policy (reads of zero, writes
//! skipped) cannot be written for atomics. A launch larger than the data
//! therefore needs its guard (`if i < arrayLength(&y)`), as under wgpu: an
//! unguarded write past the end lands on the last element. The cost is one
//! `min` per dynamically indexed access.
//!
//! `var<push_constant>` (naga's extension, as in wgpu) becomes the kernel's
//! push-constant block. Only a compute entry point's own globals are written, so a module with
//! several entry points gives each kernel just the bindings its entry point
//! uses. WGSL `override` declarations have no SPIR-V specialization
//! constants in naga's writer and are refused; use a `const` or a uniform.

use naga::back::spv;
use naga::proc::{BoundsCheckPolicies, BoundsCheckPolicy};
use naga::valid::{Capabilities, ValidationFlags, Validator};

use crate::error::{Error, Result};

/// The name given to the source in diagnostics.
const FILE_NAME: &str = "kernel.wgsl";

/// The bounds-check policies every WGSL kernel is written with (see the
/// module documentation).
const BOUNDS_CHECKS: BoundsCheckPolicies = BoundsCheckPolicies {
    index: BoundsCheckPolicy::Restrict,
    buffer: BoundsCheckPolicy::Restrict,
    image_load: BoundsCheckPolicy::Restrict,
    binding_array: BoundsCheckPolicy::Restrict,
};

fn wgsl_error(message: String) -> Error {
    Error::Wgsl { message }
}

/// Compiles a WGSL module's compute entry point `entry` (or its only compute
/// entry point, or the one named `main`) to SPIR-V words.
pub fn compile_wgsl(source: &str, entry: Option<&str>) -> Result<Vec<u32>> {
    // naga is not hardened against every input; a panic inside it must not
    // reach the caller.
    match std::panic::catch_unwind(|| compile(source, entry)) {
        Ok(result) => result,
        Err(_) => Err(wgsl_error(format!(
            "{FILE_NAME}: the WGSL front end (naga) stopped on this source"
        ))),
    }
}

fn compile(source: &str, entry: Option<&str>) -> Result<Vec<u32>> {
    let module = naga::front::wgsl::parse_str(source)
        .map_err(|e| wgsl_error(e.emit_to_string_with_path(source, FILE_NAME)))?;
    let info = Validator::new(ValidationFlags::all(), Capabilities::all())
        .validate(&module)
        .map_err(|e| wgsl_error(e.emit_to_string_with_path(source, FILE_NAME)))?;
    if let Some((_, o)) = module.overrides.iter().next() {
        return Err(wgsl_error(format!(
            "{FILE_NAME}: `override {}` is not supported (naga writes no specialization \
             constants); declare it `const`, or pass it in a uniform or push constant",
            o.name.as_deref().unwrap_or("(unnamed)")
        )));
    }
    let compute: Vec<&str> = module
        .entry_points
        .iter()
        .filter(|ep| ep.stage == naga::ShaderStage::Compute)
        .map(|ep| ep.name.as_str())
        .collect();
    let chosen = pick_entry(&compute, entry).ok_or_else(|| Error::EntryPointNotFound {
        requested: entry.unwrap_or("main").to_string(),
        available: compute.iter().map(|s| s.to_string()).collect(),
    })?;
    let options = spv::Options {
        // SPIR-V 1.3: what every Vulkan 1.1 device accepts.
        lang_version: (1, 3),
        // Names for reflection (a binding's name) and debuggers; the
        // driver ignores them.
        flags: spv::WriterFlags::DEBUG,
        bounds_check_policies: BOUNDS_CHECKS,
        ..spv::Options::default()
    };
    let pipeline = spv::PipelineOptions {
        shader_stage: naga::ShaderStage::Compute,
        entry_point: chosen.to_string(),
    };
    spv::write_vec(&module, &info, &options, Some(&pipeline))
        .map_err(|e| wgsl_error(format!("{FILE_NAME}: entry point {chosen:?}: {e}")))
}

/// The entry point to write: `entry` if the module has it, else `main`, else
/// the only one.
fn pick_entry<'a>(compute: &[&'a str], entry: Option<&str>) -> Option<&'a str> {
    match entry {
        Some(name) => compute.iter().copied().find(|&n| n == name),
        None => compute
            .iter()
            .copied()
            .find(|&n| n == "main")
            .or(match compute {
                [only] => Some(*only),
                _ => None,
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADD: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> b: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&b) {
        b[id.x] = a[id.x] + 1.0;
    }
}
"#;

    #[test]
    fn compiles_to_spirv_1_3_with_naga_generator_id() {
        let words = compile_wgsl(ADD, None).unwrap();
        assert_eq!(words[0], 0x0723_0203);
        assert_eq!(words[1], 0x0001_0300, "SPIR-V 1.3");
        // Tool 28 in the SPIR-V registry's generator list is naga, which
        // writes it as the whole word (the low half, where the registry
        // puts a version) rather than in the high half.
        assert_eq!(words[2], 28);
    }

    #[test]
    fn parse_errors_name_the_file_line_and_column() {
        let src = "@compute @workgroup_size(1)\nfn main() {\n    let x: f32 = 1;\n    oops;\n}\n";
        let Err(Error::Wgsl { message }) = compile_wgsl(src, None) else {
            panic!("expected Error::Wgsl");
        };
        assert!(message.contains("kernel.wgsl:4:"), "{message}");
        assert!(message.contains("oops"), "{message}");
    }

    #[test]
    fn validation_errors_name_the_line() {
        // Parses, but assigns a u32 to an f32 storage element.
        let src = "@group(0) @binding(0) var<storage, read_write> b: array<f32>;\n\
                   @compute @workgroup_size(1)\nfn main() {\n    b[0] = 1u;\n}\n";
        let Err(Error::Wgsl { message }) = compile_wgsl(src, None) else {
            panic!("expected Error::Wgsl");
        };
        assert!(message.contains("kernel.wgsl:4"), "{message}");
    }

    #[test]
    fn entry_points_are_picked_by_name_or_as_the_only_one() {
        assert_eq!(pick_entry(&["main", "b"], None), Some("main"));
        assert_eq!(pick_entry(&["a"], None), Some("a"));
        assert_eq!(pick_entry(&["a", "b"], None), None);
        assert_eq!(pick_entry(&["a", "b"], Some("b")), Some("b"));
        assert_eq!(pick_entry(&["a"], Some("c")), None);
        let two = "@compute @workgroup_size(1) fn a() {}\n@compute @workgroup_size(1) fn b() {}\n";
        assert!(matches!(
            compile_wgsl(two, None),
            Err(Error::EntryPointNotFound { available, .. }) if available == ["a", "b"]
        ));
        assert!(compile_wgsl(two, Some("b")).is_ok());
    }

    #[test]
    fn a_second_group_is_refused_by_reflection_naming_it() {
        let src = "@group(0) @binding(0) var<storage, read> a: array<f32>;\n\
                   @group(2) @binding(5) var<storage, read_write> b: array<f32>;\n\
                   @compute @workgroup_size(64) fn main() { b[0] = a[0]; }\n";
        let words = compile_wgsl(src, None).unwrap();
        let Err(Error::UnsupportedShader { detail, .. }) = crate::reflect::reflect(&words, None)
        else {
            panic!("expected UnsupportedShader");
        };
        assert!(detail.contains("binding 5"), "{detail}");
        assert!(detail.contains("descriptor set 2"), "{detail}");
        assert!(detail.contains("@group(2)"), "{detail}");
    }

    #[test]
    fn overrides_are_refused_by_name() {
        let src = "override scale: f32 = 2.0;\n\
                   @group(0) @binding(0) var<storage, read_write> b: array<f32>;\n\
                   @compute @workgroup_size(1) fn main() { b[0] = scale; }\n";
        let Err(Error::Wgsl { message }) = compile_wgsl(src, None) else {
            panic!("expected Error::Wgsl");
        };
        assert!(message.contains("override scale"), "{message}");
    }
}
