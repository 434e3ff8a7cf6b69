//! Pipeline statistics (`VK_KHR_pipeline_executable_properties`): what the
//! driver made of a user kernel (`Kernel::statistics`) and of a built-in
//! named as profile rows name it (`ops::builtin_statistics`), on a device
//! created with `DeviceOptions::pipeline_statistics`; a typed error without
//! the option or the extension, or for an unknown built-in. Kernels on such
//! a device (pipelines created with their statistics captured, outside the
//! pipeline cache, split-launch pieces included) still compute the same.

mod common;
use common::glsl::{ADD, INC};
use common::*;

use vkcompute::{ops, DeviceOptions, Error, ExecutableStatistics};

fn with_statistics(on: bool) -> Gpu {
    gpu_with(DeviceOptions {
        pipeline_statistics: on,
        ..DeviceOptions::default()
    })
}

/// Panics unless `r` is the Unsupported error that names the extension.
fn assert_unsupported<T: std::fmt::Debug>(r: vkcompute::Result<T>) {
    match r {
        Err(Error::Unsupported { what, .. }) => assert!(
            what.contains("VK_KHR_pipeline_executable_properties"),
            "{what}"
        ),
        other => panic!("expected Error::Unsupported, got {other:?}"),
    }
}

/// Panics unless each executable is named and reports something.
fn assert_reported(what: &str, executables: &[ExecutableStatistics]) {
    assert!(!executables.is_empty(), "{what}: no executables");
    for e in executables {
        assert!(!e.name.is_empty(), "{what}: an unnamed executable: {e:?}");
        assert!(!e.statistics.is_empty(), "{what}: {e:?} reports nothing");
        assert!(e.statistics.iter().all(|s| !s.name.is_empty()), "{e:?}");
    }
}

/// The adapter's support, reported as a skip where it lacks it (after
/// checking the typed error there).
fn supported(gpu: &Gpu) -> bool {
    if gpu.info().pipeline_executable_properties {
        return true;
    }
    let k = gpu.kernel_glsl(ADD).unwrap();
    assert_unsupported(k.statistics());
    assert_unsupported(ops::builtin_statistics(gpu, "vkcompute copy"));
    skipped(format!(
        "{} lacks VK_KHR_pipeline_executable_properties with pipelineExecutableInfo",
        gpu.info().name
    ));
    false
}

#[test]
fn without_the_option_statistics_are_unsupported() {
    let gpu = with_statistics(false);
    let k = gpu.kernel_glsl(ADD).unwrap();
    assert_unsupported(k.statistics());
    assert_unsupported(ops::builtin_statistics(&gpu, "vkcompute copy"));
    let r = ops::builtin_statistics(&gpu, "copy")
        .unwrap_err()
        .to_string();
    let remedy = gpu.info().pipeline_executable_properties;
    assert_eq!(r.contains("VKCOMPUTE_PIPELINE_STATISTICS=1"), remedy, "{r}");
}

#[test]
fn an_unknown_builtin_is_named() {
    for on in [false, true] {
        let gpu = with_statistics(on);
        match ops::builtin_statistics(&gpu, "vkcompute no_such_kernel") {
            Err(Error::UnknownBuiltin { name, known }) => {
                assert_eq!(name, "vkcompute no_such_kernel");
                assert_eq!(known, ops::builtin_names().len());
            }
            other => panic!("expected Error::UnknownBuiltin, got {other:?}"),
        }
    }
}

#[test]
fn a_user_kernel_reports_statistics_and_still_computes() {
    let gpu = with_statistics(true);
    if !supported(&gpu) {
        return;
    }
    let k = gpu.kernel_glsl(ADD).unwrap();
    let stats = k.statistics().unwrap();
    assert_reported("ADD", &stats);
    for e in &stats {
        eprintln!("{}: {e}", gpu.info().name);
    }
    let x = gpu.upload(&[1.0f32, 2.0, 3.0]).unwrap();
    let y = gpu.upload(&[10.0f32, 20.0, 30.0]).unwrap();
    let z = gpu.alloc::<f32>(3).unwrap();
    let mut b = gpu.batch().unwrap();
    b.run(&k, &[&x, &y, &z], 3).unwrap();
    b.submit().unwrap();
    assert_eq!(z.download().unwrap(), [11.0, 22.0, 33.0]);
    // The same kernel again is the same pipeline, with the same statistics.
    assert_eq!(gpu.kernel_glsl(ADD).unwrap().statistics().unwrap(), stats);
}

#[test]
fn a_split_launch_runs_on_a_statistics_device() {
    let gpu = with_statistics(true);
    if !supported(&gpu) {
        return;
    }
    let row = u64::from(gpu.info().max_workgroup_count[0]) * 64;
    let n = row + 64;
    if n > 1 << 26 {
        skipped(format!(
            "one row of {} workgroups holds {row} invocations of 64 here: no launch this \
             test can allocate for is split",
            gpu.info().max_workgroup_count[0]
        ));
        return;
    }
    let k = gpu.kernel_glsl(INC).unwrap();
    let data = gpu.alloc::<u32>(n as usize).unwrap();
    let mut b = gpu.batch().unwrap();
    b.zero(&data).unwrap();
    b.barrier();
    b.run(&k, &[&data], n as u32).unwrap();
    b.submit().unwrap();
    let out = data.download().unwrap();
    let wrong = out.iter().filter(|&&v| v != 1).count();
    assert_eq!(
        wrong, 0,
        "{wrong} of {n} words not incremented exactly once"
    );
    assert_reported("INC", &k.statistics().unwrap());
}

#[test]
fn a_builtin_reports_statistics_by_its_label() {
    let gpu = with_statistics(true);
    if !supported(&gpu) {
        return;
    }
    let a = gpu.upload(&[1.0f32, 2.0, 3.0, 4.0, 5.0]).unwrap();
    let b = gpu.upload(&[1.0f32; 5]).unwrap();
    let c = gpu.alloc::<f32>(5).unwrap();
    let mut batch = gpu.batch().unwrap();
    ops::add(&mut batch, &a, &b, &c).unwrap();
    batch.barrier();
    ops::mul(&mut batch, &a, &b, &c).unwrap();
    batch.submit().unwrap();
    assert_eq!(c.download().unwrap(), [1.0, 2.0, 3.0, 4.0, 5.0]);

    // add and mul: one built-in, two specializations, both reported.
    let ran = ops::builtin_statistics(&gpu, "vkcompute ew_binary_f32").unwrap();
    assert_eq!(ran.len(), 2, "{ran:?}");
    assert!(ran[0].spec < ran[1].spec, "in specialization order");
    for s in &ran {
        assert_eq!(s.name, "ew_binary_f32");
        assert_eq!(s.spec.len(), 1, "{s:?}");
        assert_reported("ew_binary_f32", &s.executables);
    }
    let by_name = ops::builtin_statistics(&gpu, "ew_binary_f32").unwrap();
    assert_eq!(by_name, ran);

    // A built-in not built yet: its unspecialized pipeline, built now.
    let before = ops::registry_stats(&gpu).built;
    let fresh = ops::builtin_statistics(&gpu, "reduce_sg").unwrap();
    assert_eq!(ops::registry_stats(&gpu).built, before + 1);
    assert_eq!(fresh.len(), 1);
    assert!(fresh[0].spec.is_empty());
    assert_reported("reduce_sg", &fresh[0].executables);
    let kernel = ops::builtin_kernel(&gpu, "reduce_sg", &[]).unwrap();
    assert_eq!(kernel.statistics().unwrap(), fresh[0].executables);
}
