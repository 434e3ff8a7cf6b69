//! SPIR-V loading and reflection (`vkcompute::reflect_spirv`) on arbitrary
//! bytes, with the default entry point and with `main`: it must never
//! panic, crash or hang, and must fail only with the documented variants.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vkcompute::{reflect_spirv, Error};

fuzz_target!(|data: &[u8]| {
    for entry in [None, Some("main")] {
        match reflect_spirv(data, entry) {
            Ok(r) => {
                // What a kernel would be built from is self-consistent.
                assert!(r.workgroup_size.iter().all(|&s| s > 0), "{r:?}");
                assert!(r.bindings.windows(2).all(|w| w[0].binding < w[1].binding));
                assert!(r.spec_constants.windows(2).all(|w| w[0].id < w[1].id));
            }
            Err(
                Error::InvalidSpirv { .. }
                | Error::EntryPointNotFound { .. }
                | Error::UnsupportedShader { .. },
            ) => {}
            Err(e) => panic!("reflect_spirv returned an undocumented error: {e:?}"),
        }
    }
});
