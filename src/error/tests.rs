use super::*;

#[test]
fn loss_is_sticky_and_names_the_first_call() {
    let s = Sticky::default();
    assert!(s.check().is_ok());
    let e = s.fail("vkCreateBuffer", vk::Result::ERROR_OUT_OF_HOST_MEMORY);
    assert!(!e.is_device_lost() && s.check().is_ok());
    assert!(s
        .fail("vkQueueSubmit", vk::Result::ERROR_DEVICE_LOST)
        .is_device_lost());
    let later = s.fail("vkWaitSemaphores", vk::Result::ERROR_DEVICE_LOST);
    assert!(matches!(
        later,
        Error::DeviceLost {
            call: "vkQueueSubmit"
        }
    ));
    assert!(matches!(
        s.check(),
        Err(Error::DeviceLost {
            call: "vkQueueSubmit"
        })
    ));
    assert!(s.is_lost());
}

#[test]
fn a_validation_error_names_its_count_and_first_messages() {
    let messages: Vec<String> = (0..5).map(|i| format!("message {i}")).collect();
    let e = Error::Validation { count: 9, messages };
    let text = e.to_string();
    assert!(text.starts_with("9 validation message(s)"), "{text}");
    assert!(
        text.contains("message 0") && text.contains("message 2"),
        "{text}"
    );
    assert!(!text.contains("message 3"), "{text}");
    assert!(text.ends_with("... and 6 more"), "{text}");
    let one = Error::Validation {
        count: 1,
        messages: vec!["only".into()],
    };
    assert!(!one.to_string().contains("more"), "{one}");
}

#[test]
fn set_up_errors_end_with_what_to_install() {
    let loader = Error::Loader("libvulkan.so.1: cannot open".into()).to_string();
    assert!(loader.contains("libvulkan.so.1: cannot open"), "{loader}");
    for text in [
        loader,
        Error::NoAdapter.to_string(),
        Error::ValidationLayerMissing.to_string(),
    ] {
        assert!(text.contains("install"), "{text}");
    }
}

#[test]
fn a_missing_feature_reads_for_kernels_and_for_capabilities() {
    let spirv = missing_feature("Float16", "shaderFloat16", "llvmpipe");
    assert!(
        spirv.starts_with(
            "the kernel needs the SPIR-V capability Float16, which needs shaderFloat16; llvmpipe"
        ),
        "{spirv}"
    );
    let own = missing_feature(
        "subgroup size control (a fallback)",
        "subgroupSizeControl",
        "gpu",
    );
    assert!(
        own.starts_with("subgroup size control (a fallback) needs subgroupSizeControl; gpu"),
        "{own}"
    );
    assert!(own.contains("VKCOMPUTE_DEVICE"), "{own}");
}

#[test]
fn device_lost_maps_to_sticky_variant() {
    let e = vk_error("vkQueueSubmit", vk::Result::ERROR_DEVICE_LOST);
    assert!(e.is_device_lost());
    assert!(e.to_string().contains("vkQueueSubmit"));
}

#[test]
fn other_results_name_the_call() {
    let e = vk_error("vkCreateBuffer", vk::Result::ERROR_INITIALIZATION_FAILED);
    assert!(matches!(
        e,
        Error::Vulkan {
            call: "vkCreateBuffer",
            ..
        }
    ));
    let oom = vk_error("vkAllocateMemory", vk::Result::ERROR_OUT_OF_DEVICE_MEMORY);
    assert!(matches!(oom, Error::OutOfMemory { .. }));
}
