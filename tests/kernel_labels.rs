//! Kernel labels: an unlabelled kernel is named by the file and line that
//! built it, so errors, debug names and profile rows tell kernels apart
//! even when every one of them has the entry point `main`; a label given
//! to the builder replaces it, and fused op-batch kernels are named by
//! their op chain.

mod common;
use common::glsl::{ADD, INC};
use common::*;

use vkcompute::ops::OpBatchOptions;
use vkcompute::{BatchOptions, Error, Kernel, Profiling};

/// The `kernel` field of a binding-count error from running `k` with no buffers.
fn binding_count_label(gpu: &vkcompute::Device, k: &Kernel) -> String {
    let mut b = gpu.batch().unwrap();
    match b.run(k, &[], 1) {
        Err(Error::BindingCount { kernel, .. }) => kernel,
        other => panic!("expected BindingCount, got {other:?}"),
    }
}

#[test]
fn three_unlabelled_kernels_have_three_labels_in_their_errors() {
    let gpu = gpu();
    let words = vkcompute::compile_glsl(INC).unwrap();
    let a = gpu.kernel_glsl(ADD).unwrap();
    let b = Kernel::from_spirv(&gpu, &words).unwrap();
    let c = Kernel::builder(&gpu).glsl(INC).build().unwrap();
    let labels: Vec<String> = [&a, &b, &c]
        .iter()
        .map(|k| binding_count_label(&gpu, k))
        .collect();
    for (k, l) in [&a, &b, &c].iter().zip(&labels) {
        assert_eq!(k.label(), l, "the error names the kernel's label");
        assert!(l.starts_with("tests/kernel_labels.rs:"), "{l}");
    }
    assert!(
        labels[0] != labels[1] && labels[1] != labels[2] && labels[0] != labels[2],
        "{labels:?}"
    );
    // The message shows the label, not the entry point.
    let mut batch = gpu.batch().unwrap();
    let msg = batch.run(&a, &[], 1).unwrap_err().to_string();
    assert!(msg.contains(&labels[0]), "{msg}");
    assert_clean(&gpu);
}

#[test]
fn one_module_built_at_two_places_keeps_two_labels() {
    let gpu = gpu();
    let first = gpu.kernel_glsl(INC).unwrap();
    let second = gpu.kernel_glsl(INC).unwrap();
    assert_eq!(gpu.cached_kernels(), 1, "one pipeline");
    assert_ne!(first.label(), second.label());
    assert_eq!(binding_count_label(&gpu, &second), second.label());
    // A label given to the builder replaces the default.
    let named = Kernel::builder(&gpu)
        .glsl(INC)
        .label("inc")
        .build()
        .unwrap();
    assert_eq!(named.label(), "inc");
    assert_eq!(binding_count_label(&gpu, &named), "inc");
    assert_clean(&gpu);
}

#[test]
fn profile_rows_name_unlabelled_kernels_by_their_place() {
    let gpu = gpu();
    if !gpu.info().timestamps {
        skipped("the adapter has no timestamps on the compute queue");
        return;
    }
    let k = gpu.kernel_glsl(INC).unwrap();
    let x = gpu.upload(&[1u32; 64]).unwrap();
    let mut b = gpu
        .batch_with(BatchOptions::default().with_profiling(Profiling::Commands))
        .unwrap();
    b.run(&k, &[&x], 64).unwrap();
    let p = b.submit_async().unwrap().profile().unwrap();
    let labels: Vec<&str> = p.commands.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(labels, [k.label()]);
    assert!(
        k.label().starts_with("tests/kernel_labels.rs:"),
        "{labels:?}"
    );
    assert_clean(&gpu);
}

#[test]
fn fused_kernels_are_named_by_their_op_chain() {
    let gpu = gpu();
    if !gpu.info().timestamps {
        skipped("the adapter has no timestamps on the compute queue");
        return;
    }
    let mut ops = gpu.ops_with(OpBatchOptions::default().with_profiling(Profiling::Commands));
    let x = ops.upload(&[1.0f32, -2.0, 3.0, -4.0]).unwrap();
    let y = ops.upload(&[0.5f32; 4]).unwrap();
    let s = ops.add(&x, &y).unwrap();
    let r = ops.relu(&s).unwrap();
    let p = ops.execute().unwrap().profile().unwrap();
    let labels: Vec<&str> = p.commands.iter().map(|c| c.label.as_str()).collect();
    assert!(
        labels.iter().any(|l| l.contains("add+relu")),
        "no row names the fused chain: {labels:?}"
    );
    assert_eq!(ops.read(&r).unwrap(), [1.5, 0.0, 3.5, 0.0]);
    assert_clean(&gpu);
}
