//! WGSL kernels (feature `wgsl`), written the way wgpu users write them:
//! `var<storage, read_write>` arrays, `arrayLength`, `@workgroup_size(64)`,
//! a uniform, several bindings; reflected, checked and run in a batch and in
//! a graph, with out-of-bounds accesses clamped into their binding.

mod common;

use common::{assert_clean, gpu};
use vkcompute::{BindingKind, Error, Kernel};

/// y = a * x + b over `arrayLength(&y)` elements; the launch may be larger.
/// Bindings 0 to 3 of group 0 in the order a wgpu user would declare them,
/// with the uniform last.
const AFFINE: &str = r#"
struct Params {
    a: f32,
    b: f32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> count: array<atomic<u32>>;
@group(0) @binding(3) var<uniform> params: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if i >= arrayLength(&y) {
        return;
    }
    y[i] = params.a * x[i] + params.b;
    atomicAdd(&count[0], 1u);
}
"#;

/// Two entry points over different bindings of one module.
const TWO_ENTRIES: &str = r#"
@group(0) @binding(0) var<storage, read_write> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> b: array<u32>;

@compute @workgroup_size(64)
fn fill_a(@builtin(global_invocation_id) gid: vec3<u32>) {
    if gid.x < arrayLength(&a) { a[gid.x] = gid.x * 2u; }
}

@compute @workgroup_size(32)
fn fill_b(@builtin(global_invocation_id) gid: vec3<u32>) {
    if gid.x < arrayLength(&b) { b[gid.x] = gid.x + 7u; }
}
"#;

/// No guard at all: every invocation reads and writes its index.
const UNGUARDED: &str = r#"
@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    dst[gid.x] = src[gid.x] + 1.0;
}
"#;

#[test]
fn a_wgsl_kernel_reflects_and_runs_in_a_batch() {
    let gpu = gpu();
    let k = gpu.kernel_wgsl(AFFINE).unwrap();
    assert_eq!(k.workgroup_size(), [64, 1, 1]);
    assert_eq!(k.push_constant_size(), 0);
    let seen: Vec<_> = k
        .bindings()
        .iter()
        .map(|b| (b.binding, b.kind, b.read_only, b.name.as_deref()))
        .collect();
    assert_eq!(
        seen,
        [
            (0, BindingKind::Storage, true, Some("x")),
            (1, BindingKind::Storage, false, Some("y")),
            (2, BindingKind::Storage, false, Some("count")),
            (3, BindingKind::Uniform, true, Some("params")),
        ]
    );
    // Through the builder and `Kernel::from_wgsl`: the same module, the
    // same pipeline.
    let again = Kernel::from_wgsl(&gpu, AFFINE).unwrap();
    assert_eq!(again.bindings(), k.bindings());
    assert_eq!(gpu.cached_kernels(), 1);

    let n = 1000usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let xs = gpu.upload(&x).unwrap();
    let ys = gpu.alloc::<f32>(n).unwrap();
    let count = gpu.upload(&[0u32]).unwrap();
    let params = gpu.upload(&[3.0f32, -1.0]).unwrap();
    let mut b = gpu.batch().unwrap();
    // 1024 invocations over 1000 elements: the guard on arrayLength stops
    // the last 24.
    b.run(&k, &[&xs, &ys, &count, &params], 1024).unwrap();
    // A second dispatch reading what the first wrote.
    let zs = gpu.alloc::<f32>(n).unwrap();
    b.run(&k, &[&ys, &zs, &count, &params], n as u32).unwrap();
    b.submit().unwrap();
    let z = zs.download().unwrap();
    for (i, v) in z.iter().enumerate() {
        let want = 3.0 * (3.0 * i as f32 - 1.0) - 1.0;
        assert_eq!(*v, want, "z[{i}]");
    }
    assert_eq!(count.download().unwrap(), [2 * n as u32]);
    // The dispatch is checked against the reflection like any kernel's.
    let mut b = gpu.batch().unwrap();
    assert!(matches!(
        b.run(&k, &[&xs, &ys, &count], 64),
        Err(Error::BindingCount { .. })
    ));
    drop(b);
    assert_clean(&gpu);
}

#[test]
fn a_wgsl_kernel_runs_in_a_graph_with_a_uniform_parameter() {
    let gpu = gpu();
    let k = gpu.kernel_wgsl(AFFINE).unwrap();
    let n = 256usize;
    let xs = gpu.upload(&vec![1.0f32; n]).unwrap();
    let ys = gpu.alloc::<f32>(n).unwrap();
    let count = gpu.upload(&[0u32]).unwrap();
    let p = gpu.params([0.0f32, 0.0]).unwrap();
    let mut rec = gpu.graph_recorder().unwrap();
    rec.run(&k, &[&xs, &ys, &count, &p], n as u32).unwrap();
    let graph = rec.finish().unwrap();
    for launch in 1..=3u32 {
        p.set([launch as f32, 0.5]);
        graph.launch().unwrap().wait().unwrap();
        let y = ys.download().unwrap();
        assert!(
            y.iter().all(|&v| v == launch as f32 + 0.5),
            "launch {launch}: {:?}",
            &y[..4]
        );
    }
    assert_eq!(count.download().unwrap(), [3 * n as u32]);
    drop(graph);
    assert_clean(&gpu);
}

#[test]
fn push_constants_reflect_and_reach_the_kernel() {
    let gpu = gpu();
    let src = r#"
struct Push {
    scale: f32,
    count: u32,
}
var<push_constant> pc: Push;
@group(0) @binding(0) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if gid.x < pc.count && gid.x < arrayLength(&y) {
        y[gid.x] = pc.scale * f32(gid.x);
    }
}
"#;
    let k = gpu.kernel_wgsl(src).unwrap();
    assert_eq!(k.push_constant_size(), 8);
    let y = gpu.upload(&[-1.0f32; 100]).unwrap();
    let mut pc = 0.5f32.to_le_bytes().to_vec();
    pc.extend_from_slice(&60u32.to_le_bytes());
    let mut b = gpu.batch().unwrap();
    b.run_with_push_constants(&k, &[&y], 100, &pc).unwrap();
    b.submit().unwrap();
    let out = y.download().unwrap();
    for (i, v) in out.iter().enumerate() {
        let want = if i < 60 { 0.5 * i as f32 } else { -1.0 };
        assert_eq!(*v, want, "y[{i}]");
    }
    assert_clean(&gpu);
}

#[test]
fn each_entry_point_binds_only_what_it_uses() {
    let gpu = gpu();
    let fill_b = Kernel::builder(&gpu)
        .wgsl(TWO_ENTRIES)
        .entry("fill_b")
        .build()
        .unwrap();
    assert_eq!(fill_b.workgroup_size(), [32, 1, 1]);
    assert_eq!(fill_b.bindings().len(), 1);
    assert_eq!(fill_b.bindings()[0].binding, 1);
    assert_eq!(fill_b.bindings()[0].name.as_deref(), Some("b"));
    let fill_a = Kernel::builder(&gpu)
        .wgsl(TWO_ENTRIES)
        .entry("fill_a")
        .build()
        .unwrap();
    assert_eq!(fill_a.bindings()[0].binding, 0);
    let a = gpu.alloc::<u32>(100).unwrap();
    let b = gpu.alloc::<u32>(50).unwrap();
    let mut batch = gpu.batch().unwrap();
    batch.run(&fill_a, &[&a], 100).unwrap();
    batch.run(&fill_b, &[&b], 50).unwrap();
    batch.submit().unwrap();
    assert_eq!(
        a.download().unwrap(),
        (0..100u32).map(|i| i * 2).collect::<Vec<_>>()
    );
    assert_eq!(
        b.download().unwrap(),
        (0..50u32).map(|i| i + 7).collect::<Vec<_>>()
    );
    // Without a name, two compute entry points and no `main` is ambiguous.
    match gpu.kernel_wgsl(TWO_ENTRIES) {
        Err(Error::EntryPointNotFound { available, .. }) => {
            assert_eq!(available, ["fill_a", "fill_b"])
        }
        other => panic!("expected EntryPointNotFound, got {other:?}"),
    }
    assert_clean(&gpu);
}

#[test]
fn out_of_bounds_accesses_are_clamped_into_the_binding() {
    let gpu = gpu();
    let k = gpu.kernel_wgsl(UNGUARDED).unwrap();
    // 64 invocations; src has 10 elements, dst is a 20-element view of a
    // 64-element buffer whose tail must stay untouched.
    let src = gpu
        .upload(&(0..10).map(|i| i as f32).collect::<Vec<_>>())
        .unwrap();
    let big = gpu.upload(&vec![-5.0f32; 64]).unwrap();
    let dst = big.slice(0..20).unwrap();
    let mut b = gpu.batch().unwrap();
    b.run(&k, &[&src, &dst], 64).unwrap();
    b.submit().unwrap();
    let out = big.download().unwrap();
    for (i, v) in out.iter().enumerate() {
        let want = match i {
            0..=9 => i as f32 + 1.0,
            // Past src's end the read is its last element, 9; invocations
            // past the view's end all write 10 into its last element.
            10..=19 => 10.0,
            // Nothing lands past the view.
            _ => -5.0,
        };
        assert_eq!(*v, want, "big[{i}]");
    }
    assert_clean(&gpu);
}

#[test]
fn wgsl_errors_name_the_line() {
    let gpu = gpu();
    let parse = "@compute @workgroup_size(64)\nfn main() {\n    let x = 1u\n}\n";
    match gpu.kernel_wgsl(parse) {
        Err(Error::Wgsl { message }) => assert!(message.contains("kernel.wgsl:4"), "{message}"),
        other => panic!("expected Error::Wgsl, got {other:?}"),
    }
    // Well-formed but invalid: a read-only binding written.
    let invalid = "@group(0) @binding(0) var<storage, read> x: array<f32>;\n\
                   @compute @workgroup_size(64)\n\
                   fn main() {\n    x[0] = 1.0;\n}\n";
    match gpu.kernel_wgsl(invalid) {
        Err(Error::Wgsl { message }) => assert!(message.contains("kernel.wgsl:4"), "{message}"),
        other => panic!("expected Error::Wgsl, got {other:?}"),
    }
    assert_clean(&gpu);
}

#[test]
fn a_binding_in_group_1_is_refused_naming_the_group() {
    let gpu = gpu();
    let src = r#"
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(1) @binding(0) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if gid.x < arrayLength(&y) { y[gid.x] = x[gid.x]; }
}
"#;
    match gpu.kernel_wgsl(src) {
        Err(Error::UnsupportedShader { detail, .. }) => {
            assert!(detail.contains("descriptor set 1"), "{detail}");
            assert!(detail.contains("@group(1)"), "{detail}");
            assert!(detail.contains("@group(0)"), "{detail}");
        }
        other => panic!("expected UnsupportedShader, got {other:?}"),
    }
    // The same bindings moved into group 0 build and run.
    let moved = src.replace("@group(1) @binding(0)", "@group(0) @binding(1)");
    let k = gpu.kernel_wgsl(&moved).unwrap();
    let x = gpu.upload(&[1.0f32, 2.0, 3.0]).unwrap();
    let y = gpu.alloc::<f32>(3).unwrap();
    let mut b = gpu.batch().unwrap();
    b.run(&k, &[&x, &y], 3).unwrap();
    b.submit().unwrap();
    assert_eq!(y.download().unwrap(), [1.0, 2.0, 3.0]);
    assert_clean(&gpu);
}
