//! SPIR-V validation by SPIRV-Tools, which the `glsl` feature links (see
//! `build.rs`): the same checks as `spirv-val`, for the Vulkan 1.3
//! environment, with block layouts left to the driver (they depend on
//! features such as scalarBlockLayout) and `LocalSizeId` allowed.

use std::ffi::{c_char, c_void, CStr};

/// `SPV_ENV_VULKAN_1_3` in `spv_target_env` (libspirv.h).
const SPV_ENV_VULKAN_1_3: u32 = 25;
/// `SPV_SUCCESS`.
const SPV_SUCCESS: i32 = 0;

#[repr(C)]
struct ConstBinary {
    code: *const u32,
    word_count: usize,
}

#[repr(C)]
struct Diagnostic {
    line: usize,
    column: usize,
    index: usize,
    error: *mut c_char,
    is_text_source: bool,
}

extern "C" {
    fn spvContextCreate(env: u32) -> *mut c_void;
    fn spvContextDestroy(context: *mut c_void);
    fn spvValidatorOptionsCreate() -> *mut c_void;
    fn spvValidatorOptionsDestroy(options: *mut c_void);
    fn spvValidatorOptionsSetRelaxBlockLayout(options: *mut c_void, val: bool);
    fn spvValidatorOptionsSetSkipBlockLayout(options: *mut c_void, val: bool);
    fn spvValidatorOptionsSetAllowLocalSizeId(options: *mut c_void, val: bool);
    fn spvValidateWithOptions(
        context: *const c_void,
        options: *const c_void,
        binary: *const ConstBinary,
        diagnostic: *mut *mut Diagnostic,
    ) -> i32;
    fn spvDiagnosticDestroy(diagnostic: *mut Diagnostic);
}

/// `Ok` for a valid module, else the validator's message.
pub(super) fn validate(words: &[u32]) -> Result<(), String> {
    // SAFETY: the context, options and diagnostic are created, used and
    // destroyed here, each checked for null before use; `binary` points
    // at `words`, which outlives the call; the diagnostic's message is a
    // NUL-terminated string owned by the diagnostic, copied before it is
    // destroyed.
    unsafe {
        let context = spvContextCreate(SPV_ENV_VULKAN_1_3);
        if context.is_null() {
            return Err("SPIRV-Tools could not create a validation context".into());
        }
        let options = spvValidatorOptionsCreate();
        if options.is_null() {
            spvContextDestroy(context);
            return Err("SPIRV-Tools could not create validator options".into());
        }
        spvValidatorOptionsSetRelaxBlockLayout(options, true);
        spvValidatorOptionsSetSkipBlockLayout(options, true);
        spvValidatorOptionsSetAllowLocalSizeId(options, true);
        let binary = ConstBinary {
            code: words.as_ptr(),
            word_count: words.len(),
        };
        let mut diagnostic: *mut Diagnostic = std::ptr::null_mut();
        let result = spvValidateWithOptions(context, options, &binary, &mut diagnostic);
        let message = if result == SPV_SUCCESS {
            None
        } else if !diagnostic.is_null() && !(*diagnostic).error.is_null() {
            let d = &*diagnostic;
            let text = CStr::from_ptr(d.error).to_string_lossy();
            Some(format!("{} (instruction {})", text.trim_end(), d.index))
        } else {
            Some(format!("the SPIRV-Tools validator returned {result}"))
        };
        spvDiagnosticDestroy(diagnostic);
        spvValidatorOptionsDestroy(options);
        spvContextDestroy(context);
        message.map_or(Ok(()), Err)
    }
}
