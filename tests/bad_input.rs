//! The bad-input matrix: every public entry point, given bad arguments,
//! returns the exact typed [`Error`] variant with the fields that name what
//! was asked and the limit at fault. Nothing panics, nothing leaks (the
//! device's [`Stats`] after `wait_idle` + `trim` equal the snapshot taken
//! after the warm-up), and the device still computes the right result
//! afterwards. Every bad input tried is counted and the count printed.
//!
//! Limits come from the adapter's `AdapterInfo`; a check the adapter cannot
//! make prints `skipped: <reason>` and the matrix goes on.

mod common;
use common::glsl::{saxpy_pc, ADD, INC, SAXPY, UNIFORM};
use common::*;

use vkcompute::{
    compile_glsl, reflect_spirv, Batch, Buffer, Device, DeviceOptions, Error, GpuBuf, Kernel,
    Memory, Stats,
};

/// Workgroup size in x set through specialization, plus a float constant.
const SIZED: &str = r#"
#version 450
layout(local_size_x_id = 3) in;
layout(constant_id = 0) const float SCALE = 1.0;
layout(set = 0, binding = 0) buffer Out { float o[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < o.length()) o[i] = SCALE * float(i);
}
"#;

/// Counts bad inputs and checks each one's error.
struct Matrix {
    tried: usize,
}

/// Tries one bad input: `$r` must be `Err` matching `$pat` (and the guard).
macro_rules! bad {
    ($m:expr, $what:expr, $r:expr, $pat:pat $(if $guard:expr)?) => {{
        $m.tried += 1;
        match $r {
            Err($pat) $(if $guard)? => {}
            other => panic!(
                "bad input {} ({}): expected {}, got {:?}",
                $m.tried,
                $what,
                stringify!($pat $(if $guard)?),
                other.map(|_| ())
            ),
        }
    }};
}

/// The kernels the matrix uses, compiled during the warm-up (pipelines are
/// cached for the device's life, so they count in the snapshot).
struct Kernels {
    add: Kernel,
    saxpy: Kernel,
    inc: Kernel,
    uniform: Kernel,
    sized: Kernel,
    sized_words: Vec<u32>,
    add_words: Vec<u32>,
}

fn kernels(gpu: &Device) -> Kernels {
    let sized_words = compile_glsl(SIZED).unwrap();
    Kernels {
        add: gpu.kernel_glsl(ADD).unwrap(),
        saxpy: gpu.kernel_glsl(SAXPY).unwrap(),
        inc: gpu.kernel_glsl(INC).unwrap(),
        uniform: gpu.kernel_glsl(UNIFORM).unwrap(),
        sized: Kernel::builder(gpu)
            .spirv(&sized_words)
            .local_size_x(64)
            .build()
            .unwrap(),
        sized_words,
        add_words: compile_glsl(ADD).unwrap(),
    }
}

/// One batch of good work over every placement (so the allocator's memory
/// types and the staging paths are warm), checked.
fn good_work(gpu: &Device, k: &Kernels) {
    let mut placements = vec![Memory::DeviceLocal, Memory::HostVisible];
    if gpu.info().host_visible_device_memory > 0 {
        placements.push(Memory::DeviceHostVisible);
    }
    for memory in placements {
        let x: Vec<f32> = (0..100).map(|i| i as f32).collect();
        let xs = gpu.upload_with(&x, memory).unwrap();
        let ys = gpu.alloc_with::<f32>(100, memory).unwrap();
        let zs = gpu.alloc_with::<f32>(100, memory).unwrap();
        let c = gpu.alloc_with::<u32>(64, memory).unwrap();
        let mut u = vec![0.0f32; 64];
        u[13] = 42.0;
        let us = gpu.upload_with(&u, memory).unwrap();
        let mut b = gpu.batch().unwrap();
        b.run_with_push_constants(&k.saxpy, &[&xs, &ys], 100, &saxpy_pc(2.0, 100))
            .unwrap();
        b.run(&k.inc, &[&c], 64).unwrap();
        b.run(&k.uniform, &[&us, &zs], 1).unwrap();
        b.barrier();
        b.run(&k.add, &[&xs, &ys, &zs], 100).unwrap();
        b.barrier();
        b.fill(&c.slice(4..8).unwrap(), 9).unwrap();
        b.run(&k.sized, &[&xs], 100).unwrap();
        b.submit().unwrap();
        let z = zs.download().unwrap();
        assert!(z.iter().enumerate().all(|(i, &v)| v == 3.0 * i as f32));
        assert_eq!(xs.read_range(..3).unwrap(), vec![0.0, 1.0, 2.0]);
        let mut want_c = vec![1u32; 64];
        want_c[4..8].fill(9);
        assert_eq!(c.download().unwrap(), want_c);
    }
}

/// Stats that must match: everything but the submission count (which
/// grows with the good work) .
fn comparable(s: Stats) -> Stats {
    let mut s = s;
    s.submissions = 0;
    // A high-water mark: the matrix's buffers raise it, and that is no leak.
    s.peak_device_bytes = 0;
    s
}

#[path = "bad_input/more.rs"]
mod more;
use more::{dispatches, foreign, tickets, transfers};

#[test]
fn every_entry_point_rejects_bad_input_with_a_typed_error() {
    let gpu = gpu();
    let other = common::gpu();
    let k = kernels(&gpu);
    good_work(&gpu, &k);
    gpu.trim().unwrap();
    let start = gpu.stats();
    println!("after warm-up: {start:?}");

    let mut m = Matrix { tried: 0 };
    device_options(&mut m);
    buffers(&mut m, &gpu);
    spirv(&mut m, &gpu, &k);
    glsl_and_builder(&mut m, &gpu, &k);
    dispatches(&mut m, &gpu, &k);
    foreign(&mut m, &gpu, &other, &k);
    transfers(&mut m, &gpu);
    tickets(&mut m, &gpu);
    println!("bad inputs tried: {}", m.tried);
    assert!(m.tried >= 80, "only {} bad inputs", m.tried);

    // No panic happened (we are here), no kernel was added by a bad input,
    // and the device still computes the right result.
    assert_eq!(gpu.cached_kernels(), 5);
    good_work(&gpu, &k);
    gpu.wait_idle().unwrap();
    gpu.trim().unwrap();
    let end = gpu.stats();
    println!("after the matrix: {end:?}");
    assert_eq!(comparable(end), comparable(start), "something leaked");
    assert!(end.submissions > start.submissions);
    assert_clean(&other);
    assert_clean(&gpu);
}

/// Unknown adapters by index and by name, through `DeviceOptions::adapter`.
fn device_options(m: &mut Matrix) {
    let adapters = Device::adapters().unwrap();
    let index = (adapters.len() + 7).to_string();
    for request in [index.as_str(), "no-such-gpu-xyz", "4294967296000"] {
        let r = Device::with_options(DeviceOptions {
            adapter: Some(request.to_string()),
            validation: Some(true),
            ..Default::default()
        });
        bad!(m, request, r, Error::AdapterNotFound { requested, available }
            if requested == request
                && available.len() == adapters.len()
                && adapters.iter().zip(&available).all(|(a, l)| l.contains(&a.name)));
    }
}

/// Zero-length, oversized and out-of-range buffers and host transfers.
fn buffers(m: &mut Matrix, gpu: &Device) {
    let info = gpu.info().clone();
    bad!(
        m,
        "alloc 0",
        gpu.alloc::<f32>(0),
        Error::ZeroLength { what: "alloc" }
    );
    for memory in [Memory::DeviceLocal, Memory::HostVisible] {
        bad!(
            m,
            "alloc_with 0",
            gpu.alloc_with::<u8>(0, memory),
            Error::ZeroLength { what: "alloc" }
        );
        bad!(
            m,
            "upload_with empty",
            gpu.upload_with::<u32>(&[], memory),
            Error::ZeroLength { what: "upload" }
        );
    }
    bad!(
        m,
        "upload empty",
        gpu.upload::<f32>(&[]),
        Error::ZeroLength { what: "upload" }
    );
    // Elements of zero size make a zero-byte buffer whatever the length.
    bad!(
        m,
        "alloc of ()",
        gpu.alloc::<()>(5),
        Error::ZeroLength { what: "alloc" }
    );

    // One byte over maxMemoryAllocationSize, and lengths whose byte size
    // overflows: refused before anything is allocated.
    let max = info.max_memory_allocation_size;
    if max < info.max_buffer_size && max < usize::MAX as u64 {
        bad!(m, "alloc max + 1", gpu.alloc::<u8>(max as usize + 1),
            Error::BufferTooLarge { requested, limit, limit_name: "maxMemoryAllocationSize" }
                if requested == max + 1 && limit == max);
    } else {
        skipped(format_args!(
            "maxMemoryAllocationSize ({max}) is not below maxBufferSize ({})",
            info.max_buffer_size
        ));
        bad!(
            m,
            "alloc max + 1",
            gpu.alloc::<u8>((max.min(usize::MAX as u64 - 1)) as usize + 1),
            Error::BufferTooLarge { .. }
        );
    }
    bad!(m, "alloc f32 max/4 + 1", gpu.alloc::<f32>((max / 4) as usize + 1),
        Error::BufferTooLarge { requested, .. } if requested == (max / 4 + 1) * 4);
    bad!(
        m,
        "alloc u64 usize::MAX",
        gpu.alloc::<u64>(usize::MAX),
        Error::BufferTooLarge {
            requested: u64::MAX,
            ..
        }
    );
    bad!(
        m,
        "alloc_with HostVisible over the limit",
        gpu.alloc_with::<u32>(usize::MAX / 4, Memory::HostVisible),
        Error::BufferTooLarge { .. }
    );

    let data: Vec<u32> = (0..10).collect();
    let buf = gpu.upload(&data).unwrap();
    // Reads.
    bad!(
        m,
        "read_range 5..20",
        buf.read_range(5..20),
        Error::OutOfRange {
            what: "read_range",
            start: 5,
            end: 20,
            len: 10
        }
    );
    bad!(
        m,
        "read_range 11..",
        buf.read_range(11..),
        Error::OutOfRange {
            what: "read_range",
            start: 11,
            end: 10,
            len: 10
        }
    );
    bad!(
        m,
        "read_range ..=10",
        buf.read_range(..=10),
        Error::OutOfRange {
            what: "read_range",
            start: 0,
            end: 11,
            len: 10
        }
    );
    #[allow(clippy::reversed_empty_ranges)]
    let backwards = buf.read_range(7..3);
    bad!(
        m,
        "read_range 7..3",
        backwards,
        Error::OutOfRange {
            what: "read_range",
            start: 7,
            end: 3,
            len: 10
        }
    );
    // Writes.
    bad!(
        m,
        "write at 8 of 4",
        buf.write(8, &[1, 2, 3, 4]),
        Error::OutOfRange {
            what: "write",
            start: 8,
            end: 12,
            len: 10
        }
    );
    bad!(
        m,
        "write at 11 of 0",
        buf.write(11, &[]),
        Error::OutOfRange {
            what: "write",
            start: 11,
            end: 11,
            len: 10
        }
    );
    bad!(
        m,
        "write at usize::MAX",
        buf.write(usize::MAX, &[1]),
        Error::OutOfRange {
            what: "write",
            end: u64::MAX,
            len: 10,
            ..
        }
    );
    bad!(
        m,
        "write 11 elements",
        buf.write(0, &[0; 11]),
        Error::OutOfRange {
            what: "write",
            start: 0,
            end: 11,
            len: 10
        }
    );
    // download_into with the wrong length.
    for n in [0usize, 9, 11, 100] {
        let mut out = vec![0u32; n];
        bad!(m, format!("download_into {n}"), buf.download_into(&mut out),
            Error::LengthMismatch { what: "download_into", expected: 10, got } if got == n as u64);
    }
    // Slices: empty and out of range.
    bad!(
        m,
        "slice 3..3",
        buf.slice(3..3),
        Error::ZeroLength { what: "slice" }
    );
    bad!(
        m,
        "slice 10..",
        buf.slice(10..),
        Error::ZeroLength { what: "slice" }
    );
    bad!(
        m,
        "slice 0..11",
        buf.slice(0..11),
        Error::OutOfRange {
            what: "slice",
            start: 0,
            end: 11,
            len: 10
        }
    );
    bad!(
        m,
        "slice 12..",
        buf.slice(12..),
        Error::OutOfRange {
            what: "slice",
            start: 12,
            end: 10,
            len: 10
        }
    );
    let s = buf.slice(2..5).unwrap();
    assert_eq!(s.download().unwrap(), vec![2, 3, 4]);
    // Nothing above touched the data.
    assert_eq!(buf.download().unwrap(), data);
}

/// Invalid SPIR-V through `Kernel::from_spirv`, `Device::kernel_spirv` and
/// `reflect_spirv`, as words and as bytes.
fn spirv(m: &mut Matrix, gpu: &Device, k: &Kernels) {
    let words = &k.add_words;
    let le: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let mut cases: Vec<(String, Vec<u8>)> = Vec::new();
    let mut magic = le.clone();
    magic[..4].copy_from_slice(&0xdead_beefu32.to_le_bytes());
    cases.push(("bad magic".into(), magic));
    for cut in [1, 2, 3] {
        cases.push((format!("odd length -{cut}"), le[..le.len() - cut].to_vec()));
    }
    cases.push(("empty".into(), Vec::new()));
    cases.push(("3 bytes".into(), vec![0x03, 0x02, 0x23]));
    cases.push(("header only".into(), le[..20].to_vec()));
    for len in [6, words.len() / 2, words.len() - 1] {
        cases.push((format!("truncated to {len} words"), le[..len * 4].to_vec()));
    }
    let mut rng = Rng::new(0x5eed);
    for trial in 0..8 {
        let mut b = le[..20].to_vec();
        let n = 4 * (1 + rng.below(64) as usize);
        b.extend((0..n).map(|_| rng.next_u64() as u8));
        cases.push((format!("random bytes after the header #{trial}"), b));
    }
    for (what, b) in &cases {
        bad!(
            m,
            format!("from_spirv bytes: {what}"),
            Kernel::from_spirv(gpu, b.as_slice()),
            Error::InvalidSpirv { .. }
        );
        bad!(
            m,
            format!("reflect_spirv bytes: {what}"),
            reflect_spirv(b.as_slice(), None),
            Error::InvalidSpirv { .. }
        );
        bad!(
            m,
            format!("reflect_spirv bytes, main: {what}"),
            reflect_spirv(b.as_slice(), Some("main")),
            Error::InvalidSpirv { .. }
        );
        if b.len() % 4 == 0 {
            let w: Vec<u32> = bytemuck_words(b);
            bad!(
                m,
                format!("kernel_spirv words: {what}"),
                gpu.kernel_spirv(&w),
                Error::InvalidSpirv { .. }
            );
        }
    }
    // The reasons name what is wrong.
    match reflect_spirv(cases[0].1.as_slice(), None) {
        Err(Error::InvalidSpirv { reason }) => assert!(reason.contains("magic"), "{reason}"),
        other => panic!("{other:?}"),
    }
    match reflect_spirv(cases[1].1.as_slice(), None) {
        Err(Error::InvalidSpirv { reason }) => {
            assert!(reason.contains("multiple of 4"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    // Missing entry points.
    bad!(m, "reflect_spirv entry nope", reflect_spirv(words, Some("nope")),
        Error::EntryPointNotFound { requested, available }
            if requested == "nope" && available == ["main"]);
    bad!(m, "builder entry nope", Kernel::builder(gpu).spirv(words).entry("nope").build(),
        Error::EntryPointNotFound { requested, available }
            if requested == "nope" && available == ["main"]);
    bad!(m, "builder entry empty", Kernel::builder(gpu).spirv(words).entry("").build(),
        Error::EntryPointNotFound { requested, .. } if requested.is_empty());
    // The good module still reflects.
    let r = reflect_spirv(words, Some("main")).unwrap();
    assert_eq!(r.bindings.len(), 3);
}

fn bytemuck_words(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// GLSL errors, specialization constants and workgroup sizes.
fn glsl_and_builder(m: &mut Matrix, gpu: &Device, k: &Kernels) {
    let src = "#version 450\nlayout(local_size_x = 1) in;\nvoid main() { this is not glsl; }\n";
    bad!(m, "kernel_glsl syntax error", gpu.kernel_glsl(src),
        Error::Glsl { message } if message.contains(":3:"));
    bad!(m, "compile_glsl syntax error", compile_glsl(src),
        Error::Glsl { message } if message.contains(":3:"));
    let src =
        "#version 450\nlayout(local_size_x = 1) in;\n\n\n\nvoid main() {\n  undeclared = 1;\n}\n";
    bad!(m, "kernel_glsl undeclared", gpu.kernel_glsl(src),
        Error::Glsl { message } if message.contains(":7:"));
    for src in [
        "",
        "void main() {}",
        "layout(local_size_x = 1) in;\nvoid main() {}\n",
    ] {
        bad!(m, format!("kernel_glsl without #version: {src:?}"), gpu.kernel_glsl(src),
            Error::Glsl { message } if message.contains("#version"));
    }
    bad!(
        m,
        "kernel_glsl NUL",
        gpu.kernel_glsl("#version 450\0"),
        Error::Glsl { .. }
    );
    let set1 = "#version 450\nlayout(local_size_x = 1) in;\nlayout(set = 1, binding = 0) buffer B { float b[]; };\nvoid main() { b[0] = 1.0; }\n";
    bad!(m, "descriptor set 1", gpu.kernel_glsl(set1),
        Error::UnsupportedShader { detail, .. } if detail.contains("set 1"));
    let limit = gpu.info().max_push_constants_size;
    let big_pc = format!(
        "#version 450\nlayout(local_size_x = 1) in;\nlayout(set = 0, binding = 0) buffer B {{ float b[]; }};\nlayout(push_constant) uniform P {{ float v[{}]; }};\nvoid main() {{ b[0] = v[0] + v[{}]; }}\n",
        limit / 4 + 1,
        limit / 4
    );
    bad!(m, "push constants over maxPushConstantsSize", gpu.kernel_glsl(&big_pc),
        Error::KernelLimit { got, limit: l, .. } if got == u64::from(limit) + 4 && l == u64::from(limit));
    bad!(
        m,
        "builder without source",
        Kernel::builder(gpu).build(),
        Error::InvalidSpirv { .. }
    );

    // Specialization constants: unknown ids, wrong sizes.
    let w = &k.sized_words;
    bad!(m, "spec id 9", Kernel::builder(gpu).spirv(w).spec_u32(9, 1).build(),
        Error::SpecConstant { id: 9, detail, .. } if detail.contains("no such constant"));
    bad!(
        m,
        "spec id u32::MAX",
        Kernel::builder(gpu).spirv(w).spec_u32(u32::MAX, 1).build(),
        Error::SpecConstant { id: u32::MAX, .. }
    );
    bad!(m, "spec f64 for a float", Kernel::builder(gpu).spirv(w).spec_f64(0, 1.0).build(),
        Error::SpecConstant { id: 0, detail, .. } if detail.contains('8') && detail.contains('4'));
    bad!(
        m,
        "spec 2 bytes",
        Kernel::builder(gpu).spirv(w).spec_bytes(0, &[0, 0]).build(),
        Error::SpecConstant { id: 0, .. }
    );
    bad!(
        m,
        "spec 0 bytes",
        Kernel::builder(gpu).spirv(w).spec_bytes(0, &[]).build(),
        Error::SpecConstant { id: 0, .. }
    );
    bad!(
        m,
        "spec on a kernel without any",
        Kernel::builder(gpu)
            .spirv(&k.add_words)
            .spec_u32(0, 1)
            .build(),
        Error::SpecConstant { id: 0, .. }
    );
    // A fixed workgroup size cannot change.
    bad!(m, "fixed local size", Kernel::builder(gpu).spirv(&k.add_words).local_size_x(128).build(),
        Error::SpecConstant { detail, .. } if detail.contains("local_size_x_id"));

    // Workgroup sizes over the limits.
    let info = gpu.info().clone();
    let over = info.max_workgroup_size[0].saturating_add(1);
    bad!(m, "local size x over", Kernel::builder(gpu).spirv(w).local_size_x(over).build(),
        Error::WorkgroupSizeLimit { size, limit, max_invocations, .. }
            if size == [over, 1, 1] && limit == info.max_workgroup_size
                && max_invocations == info.max_workgroup_invocations);
    bad!(
        m,
        "local size u32::MAX",
        Kernel::builder(gpu).spirv(w).local_size_x(u32::MAX).build(),
        Error::WorkgroupSizeLimit {
            size: [u32::MAX, 1, 1],
            ..
        }
    );
    bad!(
        m,
        "local size 0",
        Kernel::builder(gpu).spirv(w).local_size_x(0).build(),
        Error::WorkgroupSizeLimit {
            size: [0, 1, 1],
            ..
        }
    );
    // Setting y or z, which the module fixes at 1, to anything else.
    bad!(
        m,
        "local size y",
        Kernel::builder(gpu).spirv(w).local_size([64, 2, 1]).build(),
        Error::SpecConstant { id: 1, .. }
    );
    // The good specialization still builds, from the cache.
    let n = gpu.cached_kernels();
    assert!(Kernel::builder(gpu)
        .spirv(w)
        .local_size_x(64)
        .build()
        .is_ok());
    assert_eq!(
        gpu.cached_kernels(),
        n,
        "local size 64 was built in the warm-up"
    );
}

/// A kernel whose SPIR-V declares a capability the device did not enable
/// is a typed error naming the capability and the feature (drivers answer
/// such modules with VK_ERROR_UNKNOWN or worse); where the device has the
/// feature, the same kernel builds.
#[test]
fn kernels_needing_a_feature_the_device_lacks_are_typed_errors() {
    let gpu = gpu();
    let coopmat = r#"
#version 450
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 32) in;
layout(std430, set = 0, binding = 0) readonly buffer In { float16_t src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { float dst[]; };
void main() {
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a;
    coopMatLoadNV(a, src, 0, 16, false);
    fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> c = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
    c = coopMatMulAddNV(a, a, c);
    coopMatStoreNV(c, dst, 0, 16, false);
}
"#;
    let nv = !gpu.info().cooperative_matrix_nv_shapes.is_empty();
    match gpu.kernel_glsl(coopmat) {
        Ok(_) => assert!(nv, "built without VK_NV_cooperative_matrix"),
        Err(Error::MissingFeature {
            capability,
            feature,
            adapter,
        }) => {
            assert!(!nv, "refused although the device has the NV shapes");
            assert_eq!(capability, "CooperativeMatrixNV");
            assert_eq!(feature, "VK_NV_cooperative_matrix");
            assert_eq!(adapter, gpu.info().name);
        }
        Err(e) => panic!("expected MissingFeature, got {e}"),
    }
    // The device still builds and runs kernels afterwards.
    let k = gpu.kernel_glsl(INC).unwrap();
    let x = gpu.upload(&[1u32; 64]).unwrap();
    let mut b = gpu.batch().unwrap();
    b.run(&k, &[&x], 64).unwrap();
    b.submit().unwrap();
    assert_eq!(x.download().unwrap(), vec![2u32; 64]);
    assert_clean(&gpu);
}
