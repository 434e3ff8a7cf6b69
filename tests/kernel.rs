//! Kernels: building from SPIR-V (words and bytes) and GLSL, rejecting bad
//! modules, reflection, specialization, workgroup sizes and the kernel cache.

mod common;
use common::*;

use vkcompute::{compile_glsl, BindingKind, Buffer, Device, Error, Kernel};

/// y[i] = 2 * x[i] + 1 over the whole (runtime-sized) buffer.
const AFFINE: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { float y[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < x.length()) y[i] = 2.0 * x[i] + 1.0;
}
"#;

/// Specialization constants of three types change the result.
const SPEC: &str = r#"
#version 450
layout(local_size_x = 32) in;
layout(constant_id = 0) const float SCALE = 1.0;
layout(constant_id = 1) const uint OFFSET = 0;
layout(constant_id = 2) const bool NEGATE = false;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) buffer Y { float y[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= x.length()) return;
    float v = x[i] * SCALE + float(OFFSET);
    y[i] = NEGATE ? -v : v;
}
"#;

/// Workgroup size in x (and y) set through specialization; writes the
/// workgroup size the shader actually ran with next to each index.
const SIZED: &str = r#"
#version 450
layout(local_size_x_id = 3, local_size_y_id = 4) in;
layout(set = 0, binding = 0) buffer Out { uvec2 o[]; };
void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    if (i < o.length()) o[i] = uvec2(i, gl_WorkGroupSize.x * gl_WorkGroupSize.y);
}
"#;

/// Bindings declared out of order, of both kinds and all accesses.
const MIXED: &str = r#"
#version 450
layout(local_size_x = 32, local_size_y = 4, local_size_z = 2) in;
layout(set = 0, binding = 3) uniform U { vec4 scale; };
layout(set = 0, binding = 0) buffer Out { float o[]; };
layout(set = 0, binding = 2) readonly buffer In { float a[]; } in_a;
layout(set = 0, binding = 1) writeonly buffer Side { float s[]; };
layout(push_constant) uniform P { float k; uint n; vec2 pad; vec4 extra; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) { o[i] = in_a.a[i] * scale.x * k + extra.w; s[i] = pad.y; }
}
"#;

fn affine_cpu(x: &[f32]) -> Vec<f32> {
    x.iter().map(|v| 2.0 * v + 1.0).collect()
}

/// Runs a two-binding kernel over `x` and returns what it wrote.
fn run_xy(gpu: &Device, k: &Kernel, x: &[f32]) -> Vec<f32> {
    let xs = gpu.upload(x).unwrap();
    let ys = gpu.alloc::<f32>(x.len()).unwrap();
    let mut b = gpu.batch().unwrap();
    b.run(k, &[&xs, &ys], x.len() as u32).unwrap();
    b.submit().unwrap();
    ys.download().unwrap()
}

#[test]
fn from_spirv_words_and_both_byte_orders() {
    let gpu = gpu();
    let words: Vec<u32> = compile_glsl(AFFINE).unwrap();
    let le: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let be: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
    let mut rng = Rng::new(1);
    let x = rng.vec_f32(777);
    let want = affine_cpu(&x);

    let from_words = Kernel::from_spirv(&gpu, &words).unwrap();
    assert_eq!(run_xy(&gpu, &from_words, &x), want);
    let from_le = Kernel::from_spirv(&gpu, &le).unwrap();
    assert_eq!(run_xy(&gpu, &from_le, &x), want);
    let from_be = Kernel::from_spirv(&gpu, &be).unwrap();
    assert_eq!(run_xy(&gpu, &from_be, &x), want);
    // Slices and arrays are accepted too, through the same trait.
    let from_slice = gpu.kernel_spirv(words.as_slice()).unwrap();
    assert_eq!(run_xy(&gpu, &from_slice, &x), want);

    // All four are the same module: one pipeline.
    assert_eq!(gpu.cached_kernels(), 1);
    // Each keeps the label of the line that built it.
    assert!(
        from_words.label().starts_with("tests/kernel.rs:"),
        "{}",
        from_words.label()
    );
    assert_ne!(from_words.label(), from_le.label());
    assert_clean(&gpu);
}

#[test]
fn glsl_syntax_error_names_the_line() {
    let gpu = gpu();
    let src = "#version 450\nlayout(local_size_x = 1) in;\nvoid main() { this is not glsl; }\n";
    match gpu.kernel_glsl(src) {
        Err(Error::Glsl { message }) => {
            assert!(message.contains(":3:"), "message lacks the line: {message}")
        }
        other => panic!("expected Error::Glsl, got {other:?}"),
    }
    // An error further down names that line instead.
    let src =
        "#version 450\nlayout(local_size_x = 1) in;\n\n\n\nvoid main() {\n  undeclared = 1;\n}\n";
    match gpu.kernel_glsl(src) {
        Err(Error::Glsl { message }) => assert!(message.contains(":7:"), "{message}"),
        other => panic!("expected Error::Glsl, got {other:?}"),
    }
    assert_eq!(gpu.cached_kernels(), 0);
    // The device is fine afterwards.
    let k = gpu.kernel_glsl(AFFINE).unwrap();
    assert_eq!(run_xy(&gpu, &k, &[1.0, 2.0]), vec![3.0, 5.0]);
    assert_clean(&gpu);
}

fn expect_invalid<T: std::fmt::Debug>(r: Result<T, Error>, what: &str) -> String {
    match r {
        Err(Error::InvalidSpirv { reason }) => reason,
        other => panic!("{what}: expected Error::InvalidSpirv, got {other:?}"),
    }
}

#[test]
fn invalid_spirv_is_rejected() {
    let gpu = gpu();
    let words = compile_glsl(AFFINE).unwrap();
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();

    // Bad magic number.
    let mut bad = words.clone();
    bad[0] = 0xdead_beef;
    let reason = expect_invalid(Kernel::from_spirv(&gpu, &bad), "bad magic");
    assert!(reason.contains("magic"), "{reason}");

    // Odd byte lengths.
    for cut in [1, 2, 3] {
        let r = Kernel::from_spirv(&gpu, &bytes[..bytes.len() - cut]);
        expect_invalid(r, "odd byte length");
    }
    expect_invalid(Kernel::from_spirv(&gpu, &[0x03u8, 0x02, 0x23]), "3 bytes");

    // Empty and header-only-prefix inputs.
    expect_invalid(Kernel::from_spirv(&gpu, &Vec::<u32>::new()), "empty");
    expect_invalid(Kernel::from_spirv(&gpu, &words[..3]), "short header");

    // Truncated modules, cut at word boundaries mid-instruction.
    for len in [6, words.len() / 3, words.len() / 2, words.len() - 1] {
        let r = Kernel::from_spirv(&gpu, &words[..len]);
        expect_invalid(r, &format!("truncated to {len} words"));
    }
    // Cut at every instruction boundary: well-formed instruction streams
    // that end before the entry point's function does.
    let mut boundaries = Vec::new();
    let mut i = 5;
    while i < words.len() {
        boundaries.push(i);
        i += (words[i] >> 16) as usize;
    }
    assert!(boundaries.len() > 20);
    for &len in &boundaries {
        let r = Kernel::from_spirv(&gpu, &words[..len]);
        expect_invalid(r, &format!("cut after {len} words"));
        let b: Vec<u8> = bytes[..len * 4].to_vec();
        expect_invalid(Kernel::from_spirv(&gpu, &b), "cut bytes");
    }

    // Random words after a valid header.
    let mut rng = Rng::new(7);
    for trial in 0..16 {
        let mut w = words[..5].to_vec();
        let n = 1 + rng.below(200) as usize;
        w.extend((0..n).map(|_| rng.next_u64() as u32));
        expect_invalid(
            Kernel::from_spirv(&gpu, &w),
            &format!("random trial {trial}"),
        );
    }
    // Random words that still tile into well-formed instruction lengths.
    for trial in 0..64 {
        let mut w = words[..5].to_vec();
        for _ in 0..1 + rng.below(40) {
            let len = 1 + rng.below(6) as u32;
            let op = rng.below(400) as u32;
            w.push((len << 16) | op);
            w.extend((1..len).map(|_| rng.next_u64() as u32 % 64));
        }
        expect_invalid(
            Kernel::from_spirv(&gpu, &w),
            &format!("tiled trial {trial}"),
        );
    }

    // The builder with no source at all.
    expect_invalid(Kernel::builder(&gpu).build(), "no source");

    assert_eq!(gpu.cached_kernels(), 0);
    let k = Kernel::from_spirv(&gpu, &words).unwrap();
    assert_eq!(run_xy(&gpu, &k, &[0.5]), vec![2.0]);
    assert_clean(&gpu);
}

#[test]
fn missing_entry_point_lists_main() {
    let gpu = gpu();
    let words = compile_glsl(AFFINE).unwrap();
    match Kernel::builder(&gpu).spirv(&words).entry("nope").build() {
        Err(Error::EntryPointNotFound {
            requested,
            available,
        }) => {
            assert_eq!(requested, "nope");
            assert_eq!(available, vec!["main".to_string()]);
        }
        other => panic!("expected EntryPointNotFound, got {other:?}"),
    }
    let err = Kernel::builder(&gpu)
        .spirv(&words)
        .entry("nope")
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("main"), "{err}");
    // Naming the real entry point works, and a label replaces the default one.
    let k = Kernel::builder(&gpu)
        .spirv(&words)
        .entry("main")
        .label("affine")
        .build()
        .unwrap();
    assert_eq!(k.label(), "affine");
    assert_eq!(k.reflection().entry_point, "main");
    assert_eq!(run_xy(&gpu, &k, &[1.0]), vec![3.0]);
    assert_clean(&gpu);
}

#[test]
fn reflection_of_bindings_push_constants_and_workgroup_size() {
    let gpu = gpu();
    let k = gpu.kernel_glsl(MIXED).unwrap();
    let b = k.bindings();
    assert_eq!(
        b.iter().map(|b| b.binding).collect::<Vec<_>>(),
        vec![0, 1, 2, 3],
        "{b:?}"
    );
    let kinds: Vec<_> = b.iter().map(|b| (b.kind, b.read_only)).collect();
    assert_eq!(
        kinds,
        vec![
            (BindingKind::Storage, false), // buffer Out
            (BindingKind::Storage, false), // writeonly buffer Side
            (BindingKind::Storage, true),  // readonly buffer In
            (BindingKind::Uniform, true),  // uniform U
        ]
    );
    assert_eq!(k.bindings(), k.reflection().bindings.as_slice());
    // float k @0, uint n @4, vec2 pad @8, vec4 extra @16: 32 bytes.
    assert_eq!(k.push_constant_size(), 32);
    assert_eq!(k.reflection().push_constant_size, 32);
    assert_eq!(k.workgroup_size(), [32, 4, 2]);
    assert_eq!(k.reflection().workgroup_size, [32, 4, 2]);
    assert_eq!(k.reflection().workgroup_size_ids, [None, None, None]);

    let a = gpu.kernel_glsl(AFFINE).unwrap();
    assert_eq!(a.push_constant_size(), 0);
    assert_eq!(a.workgroup_size(), [64, 1, 1]);
    assert_eq!(a.bindings().len(), 2);
    assert!(a.bindings()[0].read_only && !a.bindings()[1].read_only);

    // The reflected kernel dispatches as declared: bindings in order, the
    // uniform as binding 3, 32 bytes of push constants.
    let n = 100u32;
    let out = gpu.alloc::<f32>(n as usize).unwrap();
    let side = gpu.alloc::<f32>(n as usize).unwrap();
    let input: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let inp = gpu.upload(&input).unwrap();
    let uni = gpu.upload(&[3.0f32, 0.0, 0.0, 0.0]).unwrap();
    let mut pc = Vec::new();
    for v in [
        2.0f32.to_bits(),
        n,
        0,
        7.0f32.to_bits(),
        0,
        0,
        0,
        0.5f32.to_bits(),
    ] {
        pc.extend_from_slice(&v.to_le_bytes());
    }
    let mut batch = gpu.batch().unwrap();
    batch
        .run_configured(&k, &[&out, &side, &inp, &uni], [4, 1, 1], Some(&pc))
        .unwrap();
    batch.submit().unwrap();
    let o = out.download().unwrap();
    for (i, v) in o.iter().enumerate() {
        assert_eq!(*v, i as f32 * 6.0 + 0.5, "o[{i}]");
    }
    assert!(side.download().unwrap().iter().all(|&s| s == 7.0));
    assert_clean(&gpu);
}

#[test]
fn spec_constants_change_results() {
    let gpu = gpu();
    let words = compile_glsl(SPEC).unwrap();
    let spec = &Kernel::from_spirv(&gpu, &words).unwrap();
    let ids: Vec<u32> = spec
        .reflection()
        .spec_constants
        .iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(ids, vec![0, 1, 2], "{:?}", spec.reflection().spec_constants);
    // float, uint and bool all take 4 bytes.
    assert!(spec.reflection().spec_constants.iter().all(|s| s.size == 4));
    let mut rng = Rng::new(3);
    let x = rng.vec_f32(333);

    // Defaults: y = x.
    assert_eq!(run_xy(&gpu, spec, &x), x);
    let scaled = Kernel::builder(&gpu)
        .spirv(&words)
        .spec_f32(0, 3.0)
        .build()
        .unwrap();
    let want: Vec<f32> = x.iter().map(|v| v * 3.0).collect();
    assert_eq!(run_xy(&gpu, &scaled, &x), want);
    let all = Kernel::builder(&gpu)
        .spirv(&words)
        .spec_f32(0, 0.5)
        .spec_u32(1, 10)
        .spec_bool(2, true)
        .build()
        .unwrap();
    let want: Vec<f32> = x.iter().map(|v| -(v * 0.5 + 10.0)).collect();
    assert_eq!(run_xy(&gpu, &all, &x), want);
    // Raw bytes work the same as the typed setters.
    let raw = Kernel::builder(&gpu)
        .spirv(&words)
        .spec_bytes(1, &7u32.to_le_bytes())
        .build()
        .unwrap();
    let want: Vec<f32> = x.iter().map(|v| v + 7.0).collect();
    assert_eq!(run_xy(&gpu, &raw, &x), want);
    assert_clean(&gpu);
}

#[test]
fn spec_constant_errors() {
    let gpu = gpu();
    let words = compile_glsl(SPEC).unwrap();
    match Kernel::builder(&gpu).spirv(&words).spec_u32(9, 1).build() {
        Err(Error::SpecConstant { id: 9, detail, .. }) => {
            assert!(detail.contains("no such constant"), "{detail}")
        }
        other => panic!("unknown id: expected SpecConstant, got {other:?}"),
    }
    match Kernel::builder(&gpu).spirv(&words).spec_u64(1, 1).build() {
        Err(Error::SpecConstant { id: 1, detail, .. }) => {
            assert!(detail.contains('8') && detail.contains('4'), "{detail}")
        }
        other => panic!("8 bytes for a uint: expected SpecConstant, got {other:?}"),
    }
    match Kernel::builder(&gpu)
        .spirv(&words)
        .spec_bytes(0, &[0, 0])
        .build()
    {
        Err(Error::SpecConstant { id: 0, .. }) => {}
        other => panic!("2 bytes for a float: expected SpecConstant, got {other:?}"),
    }
    match Kernel::builder(&gpu).spirv(&words).spec_f64(2, 1.0).build() {
        Err(Error::SpecConstant { id: 2, .. }) => {}
        other => panic!("8 bytes for a bool: expected SpecConstant, got {other:?}"),
    }
    assert_eq!(gpu.cached_kernels(), 0);
    let k = Kernel::builder(&gpu)
        .spirv(&words)
        .spec_f32(0, 2.0)
        .build()
        .unwrap();
    assert_eq!(run_xy(&gpu, &k, &[1.5]), vec![3.0]);
    assert_clean(&gpu);
}

/// Runs SIZED over `n` elements and checks index and reported workgroup size.
fn check_sized(gpu: &Device, k: &Kernel, n: usize) {
    let [x, y, z] = k.workgroup_size();
    assert_eq!(z, 1);
    let out: Buffer<[u32; 2]> = gpu.alloc(n).unwrap();
    let mut b = gpu.batch().unwrap();
    if y == 1 {
        b.run(k, &[&out], n as u32).unwrap();
    } else {
        // A row of `groups` workgroups: the shader's linear index
        // x + y * (groups * size_x) then covers 0..groups * size_x * size_y once.
        let groups = n.div_ceil((x * y) as usize) as u32;
        b.run_configured(k, &[&out], [groups, 1, 1], None).unwrap();
    }
    b.submit().unwrap();
    let o = out.download().unwrap();
    if y == 1 {
        for (i, v) in o.iter().enumerate() {
            assert_eq!(*v, [i as u32, x * y], "element {i} with size {x}x{y}");
        }
    } else {
        // Every element was written, each with the specialized size.
        let mut seen = vec![false; n];
        for v in &o {
            assert_eq!(v[1], x * y);
            seen[v[0] as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }
}

#[test]
fn workgroup_size_through_specialization() {
    let gpu = gpu();
    let words = compile_glsl(SIZED).unwrap();
    let default = Kernel::from_spirv(&gpu, &words).unwrap();
    assert_eq!(default.reflection().workgroup_size_ids[0], Some(3));
    assert_eq!(default.reflection().workgroup_size_ids[1], Some(4));
    assert_eq!(default.workgroup_size(), [1, 1, 1]);
    check_sized(&gpu, &default, 37);

    let limit = gpu.info().max_workgroup_size[0].min(gpu.info().max_workgroup_invocations);
    for x in [8, 64, 100, 256, 1024] {
        if x > limit {
            skipped(format_args!(
                "a workgroup of {x}: the adapter allows at most {limit} in x"
            ));
            continue;
        }
        let k = Kernel::builder(&gpu)
            .spirv(&words)
            .local_size_x(x)
            .build()
            .unwrap();
        assert_eq!(k.workgroup_size(), [x, 1, 1]);
        assert_eq!(k.reflection().workgroup_size, [1, 1, 1], "declared size");
        check_sized(&gpu, &k, 1000);
        check_sized(&gpu, &k, 1);
    }
    let k = Kernel::builder(&gpu)
        .spirv(&words)
        .local_size([16, 4, 1])
        .build()
        .unwrap();
    assert_eq!(k.workgroup_size(), [16, 4, 1]);
    check_sized(&gpu, &k, 640);
    assert_clean(&gpu);
}

/// Per-workgroup sums through shared memory sized by the specialized
/// workgroup size (a `SpecConstantOp` the reflection must get through).
const REDUCE: &str = r#"
#version 450
layout(local_size_x_id = 0) in;
layout(set = 0, binding = 0) readonly buffer X { uint x[]; };
layout(set = 0, binding = 1) writeonly buffer S { uint sums[]; };
shared uint tile[gl_WorkGroupSize.x];
void main() {
    uint l = gl_LocalInvocationID.x;
    uint i = gl_GlobalInvocationID.x;
    tile[l] = i < x.length() ? x[i] : 0u;
    barrier();
    for (uint s = gl_WorkGroupSize.x / 2u; s > 0u; s >>= 1u) {
        if (l < s) tile[l] += tile[l + s];
        barrier();
    }
    if (l == 0u) sums[gl_WorkGroupID.x] = tile[0];
}
"#;

#[test]
fn shared_memory_sized_by_specialized_workgroup() {
    let gpu = gpu();
    let words = compile_glsl(REDUCE).unwrap();
    let mut rng = Rng::new(11);
    let n = 5000usize;
    let x: Vec<u32> = (0..n).map(|_| rng.below(1000) as u32).collect();
    let xs = gpu.upload(&x).unwrap();
    let info = gpu.info();
    let limit = info.max_workgroup_size[0].min(info.max_workgroup_invocations);
    for wg in [32u32, 64, 256] {
        if wg > limit || wg * 4 > info.max_shared_memory {
            skipped(format_args!(
                "a workgroup of {wg}: the adapter allows {limit} in x, {} bytes shared",
                info.max_shared_memory
            ));
            continue;
        }
        let k = Kernel::builder(&gpu)
            .spirv(&words)
            .local_size_x(wg)
            .build()
            .unwrap();
        assert_eq!(k.workgroup_size(), [wg, 1, 1]);
        let groups = n.div_ceil(wg as usize);
        let sums = gpu.alloc::<u32>(groups).unwrap();
        let mut b = gpu.batch().unwrap();
        b.run(&k, &[&xs, &sums], n as u32).unwrap();
        b.submit().unwrap();
        let want: Vec<u32> = x.chunks(wg as usize).map(|c| c.iter().sum()).collect();
        assert_eq!(sums.download().unwrap(), want, "workgroup size {wg}");
    }
    assert_clean(&gpu);
}

#[test]
fn workgroup_size_errors() {
    let gpu = gpu();
    // A fixed size cannot be changed, only restated.
    let affine = compile_glsl(AFFINE).unwrap();
    match Kernel::builder(&gpu)
        .spirv(&affine)
        .local_size_x(128)
        .build()
    {
        Err(Error::SpecConstant { detail, .. }) => {
            assert!(detail.contains("local_size_x_id"), "{detail}")
        }
        other => panic!("fixed size: expected SpecConstant, got {other:?}"),
    }
    let same = Kernel::builder(&gpu)
        .spirv(&affine)
        .local_size_x(64)
        .build()
        .unwrap();
    assert_eq!(same.workgroup_size(), [64, 1, 1]);

    let limit = gpu.info().max_workgroup_size;
    let max_inv = gpu.info().max_workgroup_invocations;
    let sized = compile_glsl(SIZED).unwrap();
    let over = limit[0] + 1;
    match Kernel::builder(&gpu)
        .spirv(&sized)
        .local_size_x(over)
        .build()
    {
        Err(Error::WorkgroupSizeLimit {
            size,
            limit: l,
            max_invocations,
            ..
        }) => {
            assert_eq!(size, [over, 1, 1]);
            assert_eq!(l, limit);
            assert_eq!(max_invocations, max_inv);
        }
        other => panic!("x over the limit: expected WorkgroupSizeLimit, got {other:?}"),
    }
    // Each dimension within its limit, but too many invocations in total.
    let y = max_inv / 64 + 1;
    if 64 <= limit[0] && y <= limit[1] {
        match Kernel::builder(&gpu)
            .spirv(&sized)
            .local_size([64, y, 1])
            .build()
        {
            Err(Error::WorkgroupSizeLimit { size, .. }) => assert_eq!(size, [64, y, 1]),
            other => panic!("too many invocations: expected WorkgroupSizeLimit, got {other:?}"),
        }
    } else {
        skipped(format_args!(
            "64 x {y} within maxComputeWorkGroupSize {limit:?} but over {max_inv} invocations"
        ));
    }
    match Kernel::builder(&gpu).spirv(&sized).local_size_x(0).build() {
        Err(Error::WorkgroupSizeLimit { .. }) => {}
        other => panic!("zero size: expected WorkgroupSizeLimit, got {other:?}"),
    }
    // The largest workgroup along x (1024 on lavapipe).
    let max = Kernel::builder(&gpu)
        .spirv(&sized)
        .local_size_x(max_inv.min(limit[0]))
        .build()
        .unwrap();
    check_sized(&gpu, &max, 3000);
    assert_clean(&gpu);
}

#[test]
fn kernel_cache() {
    let gpu = gpu();
    assert_eq!(gpu.cached_kernels(), 0);
    let a1 = gpu.kernel_glsl(AFFINE).unwrap();
    assert_eq!(gpu.cached_kernels(), 1);
    let a2 = gpu.kernel_glsl(AFFINE).unwrap();
    let words = compile_glsl(AFFINE).unwrap();
    let _a3 = Kernel::from_spirv(&gpu, &words).unwrap();
    assert_eq!(gpu.cached_kernels(), 1);
    assert_eq!(gpu.stats().pipelines, 1);
    drop(a1);
    assert_eq!(run_xy(&gpu, &a2, &[4.0]), vec![9.0]);

    let spec = compile_glsl(SPEC).unwrap();
    let _s0 = Kernel::from_spirv(&gpu, &spec).unwrap();
    assert_eq!(gpu.cached_kernels(), 2);
    let _s1 = Kernel::builder(&gpu)
        .spirv(&spec)
        .spec_f32(0, 2.0)
        .build()
        .unwrap();
    assert_eq!(gpu.cached_kernels(), 3);
    let _s1b = Kernel::builder(&gpu)
        .spirv(&spec)
        .spec_f32(0, 2.0)
        .build()
        .unwrap();
    assert_eq!(gpu.cached_kernels(), 3);
    let _s2 = Kernel::builder(&gpu)
        .spirv(&spec)
        .spec_f32(0, 4.0)
        .build()
        .unwrap();
    assert_eq!(gpu.cached_kernels(), 4);
    // A label is not part of what is compiled.
    let _s2b = Kernel::builder(&gpu)
        .spirv(&spec)
        .spec_f32(0, 4.0)
        .label("other name")
        .build()
        .unwrap();
    assert_eq!(gpu.cached_kernels(), 4);
    // Failed builds add nothing.
    let _ = Kernel::builder(&gpu).spirv(&spec).spec_u32(42, 0).build();
    assert_eq!(gpu.cached_kernels(), 4);
    assert_eq!(gpu.stats().pipelines, 4);

    // The cache is per device.
    let other = common::gpu();
    let _o = other.kernel_glsl(AFFINE).unwrap();
    assert_eq!(other.cached_kernels(), 1);
    assert_eq!(gpu.cached_kernels(), 4);
    assert_clean(&other);
    assert_clean(&gpu);
}

#[test]
fn unsupported_shaders_are_typed_errors() {
    let gpu = gpu();
    let set1 = r#"
#version 450
layout(local_size_x = 1) in;
layout(set = 1, binding = 0) buffer B { float b[]; };
void main() { b[0] = 1.0; }
"#;
    match gpu.kernel_glsl(set1) {
        Err(Error::UnsupportedShader { detail, .. }) => {
            assert!(detail.contains("set 1"), "{detail}")
        }
        other => panic!("set 1: expected UnsupportedShader, got {other:?}"),
    }
    let image = r#"
#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0, r32f) uniform image2D img;
void main() { imageStore(img, ivec2(0), vec4(1.0)); }
"#;
    assert!(matches!(
        gpu.kernel_glsl(image),
        Err(Error::UnsupportedShader { .. })
    ));
    let limit = gpu.info().max_push_constants_size;
    let big_pc = format!(
        r#"
#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer B {{ float b[]; }};
layout(push_constant) uniform P {{ float v[{}]; }};
void main() {{ b[0] = v[0] + v[{}]; }}
"#,
        limit / 4 + 1,
        limit / 4
    );
    match gpu.kernel_glsl(&big_pc) {
        Err(Error::KernelLimit { got, limit: l, .. }) => {
            assert_eq!(got, u64::from(limit) + 4);
            assert_eq!(l, u64::from(limit));
        }
        other => panic!("push constants over the limit: expected KernelLimit, got {other:?}"),
    }
    assert_eq!(gpu.cached_kernels(), 0);
    assert_clean(&gpu);
}

/// 16- and 8-bit specialization constants take values of exactly their size.
const SMALL_SPEC: &str = r#"
#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x = 1) in;
layout(constant_id = 5) const int16_t S = int16_t(3);
layout(constant_id = 6) const uint8_t B = uint8_t(4);
layout(constant_id = 7) const uint64_t L = 5ul;
layout(set = 0, binding = 0) writeonly buffer O { int o[]; };
void main() { o[0] = int(S); o[1] = int(B); o[2] = int(L); }
"#;

#[test]
fn spec_constants_of_every_width() {
    let gpu = gpu();
    let words = compile_glsl(SMALL_SPEC).unwrap();
    let run = |k: &Kernel| {
        let o = gpu.alloc::<i32>(3).unwrap();
        let mut b = gpu.batch().unwrap();
        b.run(k, &[&o], 1).unwrap();
        b.submit().unwrap();
        o.download().unwrap()
    };
    let k = Kernel::from_spirv(&gpu, &words).unwrap();
    let sizes: Vec<(u32, u32)> = k
        .reflection()
        .spec_constants
        .iter()
        .map(|s| (s.id, s.size))
        .collect();
    assert_eq!(sizes, vec![(5, 2), (6, 1), (7, 8)]);
    assert_eq!(run(&k), vec![3, 4, 5]);
    let k = Kernel::builder(&gpu)
        .spirv(&words)
        .spec_bytes(5, &(-7i16).to_le_bytes())
        .spec_bytes(6, &[200])
        .spec_u64(7, 1 << 40 | 9)
        .build()
        .unwrap();
    assert_eq!(run(&k), vec![-7, 200, 9]);
    // A 32-bit value for a 16-bit constant is the wrong size.
    match Kernel::builder(&gpu).spirv(&words).spec_i32(5, 1).build() {
        Err(Error::SpecConstant { id: 5, detail, .. }) => {
            assert!(
                detail.contains("4 bytes") && detail.contains('2'),
                "{detail}"
            )
        }
        other => panic!("expected SpecConstant, got {other:?}"),
    }
    assert_clean(&gpu);
}
