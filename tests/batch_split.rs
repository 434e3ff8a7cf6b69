//! `Batch::run` past `maxComputeWorkGroupCount[0]` workgroups: the launch
//! is split along x, each piece running a variant of the kernel whose
//! `gl_GlobalInvocationID.x` / `gl_WorkGroupID.x` start at the piece's base,
//! so a plain x-indexed kernel sees every index exactly once.
//! Kernels that cannot be split (they read `gl_NumWorkGroups`) get the
//! typed error. On adapters whose row holds 16 Mi + 5 invocations already
//! (most discrete GPUs: 2^31 - 1 workgroups) the launches still run and are
//! checked, and the split itself is reported as skipped.

mod common;
use common::glsl::bytes;
use common::*;

use vkcompute::{Device, Error, Kernel};

/// Adds 1 to data[i] for every i < n through `gl_GlobalInvocationID.x`
/// (an access chain on component 0), atomically, so an index reached
/// twice shows as 2.
const ACCESS_CHAIN: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer D { uint data[]; };
layout(push_constant) uniform P { uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) atomicAdd(data[i], 1u);
}
"#;

/// The same through a load of the whole vector (y and z are 0).
const VECTOR: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer D { uint data[]; };
layout(push_constant) uniform P { uint n; };
void main() {
    uvec3 g = gl_GlobalInvocationID;
    if (g.x < n) atomicAdd(data[g.x], 1u + g.y + g.z);
}
"#;

/// The same through `gl_WorkGroupID.x`, with a specialized local size.
const WORKGROUP_ID: &str = r#"
#version 450
layout(local_size_x_id = 0) in;
layout(set = 0, binding = 0) buffer D { uint data[]; };
layout(push_constant) uniform P { uint n; };
void main() {
    uint i = gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (i < n) atomicAdd(data[i], 1u);
}
"#;

/// Reads `gl_NumWorkGroups`: cannot be split.
const NUM_WORKGROUPS: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer D { uint data[]; };
layout(push_constant) uniform P { uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n && gl_NumWorkGroups.x > 0u) atomicAdd(data[i], 1u);
}
"#;

/// Panics unless data[i] == want(i) for every i (a few mismatches named).
fn check(data: &[u32], want: impl Fn(usize) -> u32) {
    let bad: Vec<(usize, u32)> = data
        .iter()
        .enumerate()
        .filter(|&(i, &v)| v != want(i))
        .take(5)
        .map(|(i, &v)| (i, v))
        .collect();
    assert!(bad.is_empty(), "(index, value) wrong: {bad:?}");
}

/// Whether `n` invocations of `local` need more than one row here.
fn splits(gpu: &Device, n: u32, local: u32) -> bool {
    u64::from(n).div_ceil(u64::from(local)) > u64::from(gpu.info().max_workgroup_count[0])
}

#[test]
fn a_plain_x_kernel_sees_16_mi_plus_5_indices_once() {
    let gpu = gpu();
    let n: u32 = (16 << 20) + 5;
    let k = gpu.kernel_glsl(ACCESS_CHAIN).unwrap();
    assert_eq!(k.workgroup_size()[0], 64);
    let split = splits(&gpu, n, 64);
    if !split {
        skipped(format_args!(
            "16 Mi + 5 invocations of 64 fit in one row of {} workgroups here",
            gpu.info().max_workgroup_count[0]
        ));
    }
    let data = gpu.alloc::<u32>(n as usize + 64).unwrap();
    let pc = bytes(&[n]);
    let before = gpu.stats().pipelines;
    let mut b = gpu.batch().unwrap();
    b.run_with_push_constants(&k, &[&data], n, &pc).unwrap();
    let variants = gpu.stats().pipelines - before;
    b.barrier();
    // Again: the variants are reused.
    b.run_with_push_constants(&k, &[&data], n, &pc).unwrap();
    assert_eq!(gpu.stats().pipelines - before, variants);
    b.barrier();
    // A launch within one row right after a split one runs the kernel's
    // own pipeline again (base 0).
    b.run_with_push_constants(&k, &[&data], 100, &bytes(&[100]))
        .unwrap();
    b.submit().unwrap();
    if split {
        let max_x = u64::from(gpu.info().max_workgroup_count[0]);
        let pieces = u64::from(n).div_ceil(64).div_ceil(max_x);
        assert_eq!(variants, pieces as i64 - 1);
        if is_lavapipe(&gpu) {
            assert_eq!(pieces, 5);
        }
    } else {
        assert_eq!(variants, 0);
    }
    let got = data.download().unwrap();
    check(&got, |i| match i {
        _ if i < 100 => 3,
        _ if i < n as usize => 2,
        _ => 0,
    });
    assert_clean(&gpu);
}

/// `kernel` over `n` invocations updates data[..n] once each (and nothing
/// past `n`); refused kernels return their error.
fn once(gpu: &Device, kernel: &Kernel, n: u32) -> Result<(), Error> {
    let data = gpu.alloc::<u32>(n as usize + 1024).unwrap();
    let mut b = gpu.batch().unwrap();
    b.run_with_push_constants(kernel, &[&data], n, &bytes(&[n]))?;
    b.submit().unwrap();
    check(&data.download().unwrap(), |i| u32::from(i < n as usize));
    Ok(())
}

#[test]
fn vector_loads_and_workgroup_ids_are_offset_too() {
    let gpu = gpu();
    let max_x = gpu.info().max_workgroup_count[0];
    // Two pieces, the second short and not a multiple of the local size.
    let Some(n) = max_x
        .checked_mul(64)
        .and_then(|v| v.checked_add(12_345))
        .filter(|&v| v <= 16 << 20)
    else {
        skipped(format_args!(
            "a row of {max_x} workgroups of 64 is too long to split on purpose here"
        ));
        return;
    };
    let vector = gpu.kernel_glsl(VECTOR).unwrap();
    once(&gpu, &vector, n).unwrap();
    for local in [64, 32] {
        let k = Kernel::builder(&gpu)
            .glsl(WORKGROUP_ID)
            .local_size_x(local)
            .build()
            .unwrap();
        let n = if local == 64 { n } else { n / 2 + 7 };
        assert!(splits(&gpu, n, local));
        once(&gpu, &k, n).unwrap();
    }
    assert_clean(&gpu);
}

#[test]
fn a_kernel_reading_num_workgroups_gets_the_typed_error() {
    let gpu = gpu();
    let k = gpu.kernel_glsl(NUM_WORKGROUPS).unwrap();
    let max_x = gpu.info().max_workgroup_count[0];
    let Some(n) = max_x.checked_mul(64).and_then(|v| v.checked_add(1)) else {
        skipped(format_args!(
            "a row of {max_x} workgroups of 64 holds every u32 index"
        ));
        return;
    };
    let data = gpu.alloc::<u32>(1024).unwrap();
    let mut b = gpu.batch().unwrap();
    let e = b
        .run_with_push_constants(&k, &[&data], n, &bytes(&[n]))
        .map(|_| ())
        .unwrap_err();
    match &e {
        Error::LaunchTooLarge {
            invocations,
            local_size_x: 64,
            limit,
            reason,
            ..
        } => {
            assert_eq!((*invocations, *limit), (u64::from(n), max_x));
            assert!(reason.contains("gl_NumWorkGroups"), "{reason}");
            assert!(e.to_string().contains("gl_NumWorkGroups"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    // Refused before recording: the batch is still usable.
    assert!(b.poisoned().is_none());
    b.run_with_push_constants(&k, &[&data], 1000, &bytes(&[1000]))
        .unwrap();
    b.submit().unwrap();
    check(&data.download().unwrap(), |i| u32::from(i < 1000));
    assert_clean(&gpu);
}

#[test]
fn a_grid_whose_spare_invocations_would_wrap_is_refused() {
    let gpu = gpu();
    let k = Kernel::builder(&gpu)
        .glsl(WORKGROUP_ID)
        .local_size_x(100)
        .build()
        .unwrap();
    let data = gpu.alloc::<u32>(1024).unwrap();
    let before = gpu.stats().pipelines;
    let mut b = gpu.batch().unwrap();
    // ceil((2^32 - 1) / 100) * 100 invocations: the last ones would be
    // indices past 2^32, wrapping onto 0..
    let e = b
        .run_with_push_constants(&k, &[&data], u32::MAX, &bytes(&[1024]))
        .map(|_| ())
        .unwrap_err();
    match &e {
        Error::LaunchTooLarge {
            local_size_x: 100,
            reason,
            ..
        } => assert!(reason.contains("2^32"), "{reason}"),
        other => panic!("{other:?}"),
    }
    // Refused before any variant was built or anything recorded.
    assert_eq!(gpu.stats().pipelines, before);
    assert!(b.is_empty() && b.poisoned().is_none());
    drop(b);
    assert_clean(&gpu);
}
