//! Batches: dispatch forms, barriers and chunking, transfers, large and
//! sliced launches, the pooled-descriptor fallback, profiling, and every
//! typed error a bad dispatch or transfer gets.

mod common;
use common::*;

use vkcompute::bytemuck;
use vkcompute::{
    Batch, BatchOptions, Buffer, Device, DeviceOptions, Error, GpuBuf, Kernel, Profiling,
};

/// z = x + y over the length of x (no push constants).
const ADD: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) readonly buffer Y { float y[]; };
layout(set = 0, binding = 2) writeonly buffer Z { float z[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < x.length()) z[i] = x[i] + y[i];
}
"#;

/// y = a * x + y for i < n.
const SAXPY: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) buffer Y { float y[]; };
layout(push_constant) uniform P { float a; uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"#;

/// x = x * a + b in place, for i < n.
const STEP: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer X { float x[]; };
layout(push_constant) uniform P { float a; float b; uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) x[i] = x[i] * a + b;
}
"#;

/// y = x * a + b for i < n.
const STEP_TO: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { float a; float b; uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) y[i] = x[i] * a + b;
}
"#;

/// y = x * 0.5 + 1 over the shorter of the two (exact in f32 either way).
const HALF_PLUS_ONE: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { float y[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < min(x.length(), y.length())) y[i] = x[i] * 0.5 + 1.0;
}
"#;

/// x *= 2 in place over the bound range.
const DOUBLE: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer X { float x[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < x.length()) x[i] *= 2.0;
}
"#;

/// c[i] += 1 for every element (a "good dispatch" marker).
const INC: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer C { uint c[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < c.length()) c[i] += 1u;
}
"#;

/// Writes each invocation's linear index (the formula `Batch::run` documents).
const INDEX: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) writeonly buffer O { uint o[]; };
layout(set = 0, binding = 1) buffer M { uint meta[]; };
layout(push_constant) uniform P { uint n; };
void main() {
    uint idx = gl_GlobalInvocationID.x
             + gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x)
             + gl_GlobalInvocationID.z * (gl_NumWorkGroups.x * gl_WorkGroupSize.x * gl_NumWorkGroups.y);
    if (idx == 0u) {
        meta[0] = gl_NumWorkGroups.x;
        meta[1] = gl_NumWorkGroups.y;
        meta[2] = gl_NumWorkGroups.z;
    }
    if (idx >= n) return;
    o[idx] = idx;
}
"#;

/// Writes data[i] = i + 1 for i < n, on a u32 view.
const MARK: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer D { uint data[]; };
layout(push_constant) uniform P { uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) data[i] = i + 1u;
}
"#;

/// Reads a uniform block.
const UNIFORM: &str = r#"
#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) uniform U { vec4 u[16]; };
layout(set = 0, binding = 1) writeonly buffer O { float o[]; };
void main() { o[0] = u[3].y; }
"#;

fn bytes(words: &[u32]) -> Vec<u8> {
    bytemuck::cast_slice(words).to_vec()
}

fn saxpy_pc(a: f32, n: u32) -> Vec<u8> {
    bytes(&[a.to_bits(), n])
}

/// y = a * x + y as the GPU may compute it: with or without a fused multiply-add.
fn assert_saxpy(got: &[f32], a: f32, x: &[f32], y: &[f32], what: &str) {
    assert_eq!(got.len(), x.len());
    for i in 0..x.len() {
        let plain = a * x[i] + y[i];
        let fused = a.mul_add(x[i], y[i]);
        assert!(
            got[i] == plain || got[i] == fused,
            "{what}: element {i}: {} (want {plain} or {fused})",
            got[i]
        );
    }
}

#[test]
fn run_forms_on_sizes_not_multiple_of_the_workgroup() {
    let gpu = gpu();
    let add = gpu.kernel_glsl(ADD).unwrap();
    let saxpy = gpu.kernel_glsl(SAXPY).unwrap();
    let mut rng = Rng::new(42);
    for n in [1usize, 63, 64, 65, 1000, 100_003] {
        let x = rng.vec_f32(n);
        let y = rng.vec_f32(n);
        let a = rng.f32() * 4.0;
        let xs = gpu.upload(&x).unwrap();
        let ys1 = gpu.upload(&y).unwrap();
        let ys2 = gpu.upload(&y).unwrap();
        let z1 = gpu.alloc::<f32>(n).unwrap();
        let z2 = gpu.alloc::<f32>(n).unwrap();
        let groups = n.div_ceil(64) as u32;

        let mut b = gpu.batch().unwrap();
        b.run(&add, &[&xs, &ys1, &z1], n as u32).unwrap();
        b.run_configured(&add, &[&ys1, &xs, &z2], [groups, 1, 1], None)
            .unwrap();
        b.barrier();
        b.run_with_push_constants(&saxpy, &[&xs, &ys1], n as u32, &saxpy_pc(a, n as u32))
            .unwrap();
        b.run_configured(
            &saxpy,
            &[&xs, &ys2],
            [groups, 1, 1],
            Some(&saxpy_pc(a, n as u32)),
        )
        .unwrap();
        assert_eq!(b.len(), 4);
        b.submit().unwrap();

        let want: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
        assert_eq!(z1.download().unwrap(), want, "run, n = {n}");
        assert_eq!(z2.download().unwrap(), want, "run_configured, n = {n}");
        assert_saxpy(
            &ys1.download().unwrap(),
            a,
            &x,
            &y,
            "run_with_push_constants",
        );
        assert_saxpy(&ys2.download().unwrap(), a, &x, &y, "run_configured + pc");
    }
    assert_clean(&gpu);
}

/// Dependent steps of x = x * a + b (a a power of two, so exact), taken in
/// place on even steps and from one buffer into the other on odd ones (the
/// synchronization validation sees a missing barrier between different
/// bindings, not between two writes through one read-write binding).
fn chain(gpu: &Device, options: BatchOptions, x0: &[f32], steps: &[(f32, f32)]) -> (Vec<f32>, u64) {
    let in_place = gpu.kernel_glsl(STEP).unwrap();
    let across = gpu.kernel_glsl(STEP_TO).unwrap();
    let mut cur = gpu.upload(x0).unwrap();
    let mut other = gpu.alloc::<f32>(x0.len()).unwrap();
    let n = x0.len() as u32;
    let before = gpu.stats().submissions;
    let mut b = gpu.batch_with(options).unwrap();
    for (i, &(a, c)) in steps.iter().enumerate() {
        let pc = bytes(&[a.to_bits(), c.to_bits(), n]);
        if i % 2 == 0 {
            b.run_with_push_constants(&in_place, &[&cur], n, &pc)
                .unwrap();
        } else {
            b.run_with_push_constants(&across, &[&cur, &other], n, &pc)
                .unwrap();
            std::mem::swap(&mut cur, &mut other);
        }
        b.barrier();
    }
    b.submit().unwrap();
    let submissions = gpu.stats().submissions - before;
    (cur.download().unwrap(), submissions)
}

#[test]
fn dependent_chain_with_barriers_under_any_chunking() {
    let gpu = gpu();
    let mut rng = Rng::new(5);
    let x0 = rng.vec_f32(1000);
    let choices = [0.5f32, -0.5, 1.0, -1.0, 0.25];
    let steps: Vec<(f32, f32)> = (0..200)
        .map(|_| (choices[rng.below(5) as usize], rng.f32()))
        .collect();
    let mut want = x0.clone();
    for &(a, c) in &steps {
        for v in &mut want {
            *v = *v * a + c;
        }
    }
    let (default, subs_default) = chain(&gpu, BatchOptions::default(), &x0, &steps);
    let (single, subs_single) = chain(&gpu, BatchOptions::single_submit(), &x0, &steps);
    let tiny = BatchOptions {
        first_chunk: 1,
        max_chunk: 2,
        ..Default::default()
    };
    let (chunked, subs_tiny) = chain(&gpu, tiny, &x0, &steps);
    assert_eq!(default, want);
    assert_eq!(single, want);
    assert_eq!(chunked, want);
    // Chunks of 32, 64, then the remaining 104; one; and 1 + 99 * 2 + 1.
    assert_eq!(subs_default, 3);
    assert_eq!(subs_single, 1);
    assert_eq!(subs_tiny, 101);
    assert_clean(&gpu);
}

#[test]
fn ping_pong_between_two_buffers() {
    let gpu = gpu();
    let k = gpu.kernel_glsl(HALF_PLUS_ONE).unwrap();
    let mut rng = Rng::new(9);
    let n = 4099;
    let x = rng.vec_f32(n);
    let a = gpu.upload(&x).unwrap();
    let b = gpu.alloc::<f32>(n).unwrap();
    let mut batch = gpu.batch().unwrap();
    let steps = 75;
    for s in 0..steps {
        let (src, dst) = if s % 2 == 0 { (&a, &b) } else { (&b, &a) };
        batch.run(&k, &[src, dst], n as u32).unwrap();
        batch.barrier();
    }
    batch.submit().unwrap();
    let mut want = x.clone();
    for _ in 0..steps {
        for v in &mut want {
            *v = *v * 0.5 + 1.0;
        }
    }
    // An odd number of steps ends in b; a holds the step before.
    assert_eq!(b.download().unwrap(), want);
    let mut before = x;
    for _ in 0..steps - 1 {
        for v in &mut before {
            *v = *v * 0.5 + 1.0;
        }
    }
    assert_eq!(a.download().unwrap(), before);
    assert_clean(&gpu);
}

#[test]
fn independent_dispatches_need_no_barriers() {
    let gpu = gpu();
    let saxpy = gpu.kernel_glsl(SAXPY).unwrap();
    let add = gpu.kernel_glsl(ADD).unwrap();
    let mut rng = Rng::new(77);
    let n = 3000;
    let shared_x = rng.vec_f32(n);
    let xs = gpu.upload(&shared_x).unwrap();
    let inputs: Vec<Vec<f32>> = (0..12).map(|_| rng.vec_f32(n)).collect();
    let ys: Vec<Buffer<f32>> = inputs.iter().map(|v| gpu.upload(v).unwrap()).collect();
    let zs: Vec<Buffer<f32>> = (0..12).map(|_| gpu.alloc(n).unwrap()).collect();
    let scales: Vec<f32> = (0..12).map(|i| i as f32 - 5.5).collect();
    let mut b = gpu.batch().unwrap();
    for i in 0..12 {
        // Every dispatch reads the shared input; each writes only its own buffers.
        if i % 2 == 0 {
            b.run_with_push_constants(
                &saxpy,
                &[&xs, &ys[i]],
                n as u32,
                &saxpy_pc(scales[i], n as u32),
            )
            .unwrap();
        } else {
            b.run(&add, &[&xs, &ys[i], &zs[i]], n as u32).unwrap();
        }
    }
    b.submit().unwrap();
    for i in 0..12 {
        if i % 2 == 0 {
            assert_saxpy(
                &ys[i].download().unwrap(),
                scales[i],
                &shared_x,
                &inputs[i],
                "saxpy",
            );
        } else {
            let want: Vec<f32> = shared_x
                .iter()
                .zip(&inputs[i])
                .map(|(a, b)| a + b)
                .collect();
            assert_eq!(zs[i].download().unwrap(), want);
            assert_eq!(
                ys[i].download().unwrap(),
                inputs[i],
                "read-only input changed"
            );
        }
    }
    assert_eq!(xs.download().unwrap(), shared_x);
    assert_clean(&gpu);
}

#[test]
fn copies_fills_and_zeroes() {
    let gpu = gpu();
    let double = gpu.kernel_glsl(DOUBLE).unwrap();
    let mut rng = Rng::new(13);
    let n = 1000;
    let x = rng.vec_f32(n);
    let a = gpu.upload(&x).unwrap();
    let b = gpu.alloc::<f32>(n).unwrap();
    let c = gpu.upload(&rng.vec_f32(n)).unwrap();
    let bits = gpu.alloc::<u32>(n).unwrap();
    let quads = gpu.alloc::<[f32; 4]>(n / 4).unwrap();
    let ones = gpu.upload(&vec![7.0f32; n]).unwrap();
    let zeroed = gpu.upload(&vec![3.0f32; n]).unwrap();
    let within = gpu.upload(&x).unwrap();

    let mut batch = gpu.batch().unwrap();
    // Whole-buffer copy, then a dispatch on the copy, then a copy back out.
    batch.copy(&a, &b).unwrap();
    batch.barrier();
    batch.run(&double, &[&b], n as u32).unwrap();
    batch.barrier();
    batch.copy(&b, &c).unwrap();
    // Different element types of the same byte size.
    batch.copy(&a, &bits).unwrap();
    batch.copy(&a, &quads).unwrap();
    // Slices at 16-byte multiples within one buffer (disjoint ranges):
    // within[512..768] = within[16..272].
    batch
        .copy(
            &within.slice(16..272).unwrap(),
            &within.slice(512..768).unwrap(),
        )
        .unwrap();
    batch.fill(&ones, 1.0f32.to_bits()).unwrap();
    batch.zero(&zeroed).unwrap();
    // Fill a 16-byte-aligned slice only.
    batch.barrier();
    batch
        .fill(&zeroed.slice(100..200).unwrap(), (-2.0f32).to_bits())
        .unwrap();
    batch.barrier();
    // A dispatch on what the fill wrote.
    batch.run(&double, &[&ones], n as u32).unwrap();
    assert_eq!(batch.len(), 10);
    batch.submit().unwrap();

    let doubled: Vec<f32> = x.iter().map(|v| v * 2.0).collect();
    assert_eq!(b.download().unwrap(), doubled);
    assert_eq!(c.download().unwrap(), doubled);
    assert_eq!(a.download().unwrap(), x);
    let want_bits: Vec<u32> = x.iter().map(|v| v.to_bits()).collect();
    assert_eq!(bits.download().unwrap(), want_bits);
    let flat: Vec<f32> = quads.download().unwrap().concat();
    assert_eq!(flat, x);
    let mut want_within = x.clone();
    want_within.copy_within(16..272, 512);
    assert_eq!(within.download().unwrap(), want_within);
    assert_eq!(ones.download().unwrap(), vec![2.0; n]);
    let z = zeroed.download().unwrap();
    for (i, v) in z.iter().enumerate() {
        let want = if (100..200).contains(&i) { -2.0 } else { 0.0 };
        assert_eq!(*v, want, "zeroed[{i}]");
    }

    // Slices of two buffers at offsets that differ, and odd byte sizes.
    let src = gpu.upload(&(0..64u8).collect::<Vec<_>>()).unwrap();
    let dst = gpu.alloc::<u8>(64).unwrap();
    let odd = gpu.alloc::<u8>(7).unwrap();
    let mut batch = gpu.batch().unwrap();
    batch
        .copy(&src.slice(16..48).unwrap(), &dst.slice(32..64).unwrap())
        .unwrap();
    batch.copy(&src.slice(0..7).unwrap(), &odd).unwrap();
    batch.submit().unwrap();
    let d = dst.download().unwrap();
    assert_eq!(&d[..32], &[0u8; 32]);
    assert_eq!(&d[32..], &(16..48u8).collect::<Vec<_>>()[..]);
    assert_eq!(odd.download().unwrap(), (0..7u8).collect::<Vec<_>>());
    // A whole buffer of 7 bytes fills completely.
    let mut batch = gpu.batch().unwrap();
    batch.fill(&odd, 0xabab_abab).unwrap();
    batch.submit().unwrap();
    assert_eq!(odd.download().unwrap(), vec![0xab; 7]);
    assert_clean(&gpu);
}

#[test]
fn large_launch_spreads_into_y() {
    let gpu = gpu();
    let k = gpu.kernel_glsl(INDEX).unwrap();
    let n: u32 = 65535 * 64 + 1000;
    let out = gpu.alloc::<u32>(n as usize + 64).unwrap();
    let meta = gpu.alloc::<u32>(3).unwrap();
    let mut b = gpu.batch().unwrap();
    b.fill(&out, 0xffff_ffff).unwrap();
    b.barrier();
    b.run_with_push_constants(&k, &[&out, &meta], n, &bytes(&[n]))
        .unwrap();
    b.submit().unwrap();
    let m = meta.download().unwrap();
    let limit = gpu.info().max_workgroup_count;
    assert!(
        m[0] <= limit[0] && m[1] <= limit[1] && m[2] <= limit[2],
        "{m:?}"
    );
    assert!(m[1] > 1, "the grid did not spread into y: {m:?}");
    let total = u64::from(m[0]) * u64::from(m[1]) * u64::from(m[2]) * 64;
    assert!(total >= u64::from(n), "{m:?} covers {total} < {n}");
    let o = out.download().unwrap();
    for (i, v) in o[..n as usize].iter().enumerate() {
        assert_eq!(*v, i as u32, "element {i}");
    }
    assert!(
        o[n as usize..].iter().all(|&v| v == 0xffff_ffff),
        "wrote past n"
    );
    assert_clean(&gpu);
}

#[test]
fn slices_bound_in_dispatches() {
    let gpu = gpu();
    let double = gpu.kernel_glsl(DOUBLE).unwrap();
    let add = gpu.kernel_glsl(ADD).unwrap();
    let mut rng = Rng::new(21);
    let n = 10_000;
    let x = rng.vec_f32(n);
    let y = rng.vec_f32(n);
    let xs = gpu.upload(&x).unwrap();
    let ys = gpu.upload(&y).unwrap();
    let zs = gpu.alloc::<f32>(n).unwrap();
    let mut b = gpu.batch().unwrap();
    // First pass in chunks of 1024 (4 KiB offsets), the last one partial;
    // disjoint ranges need no barrier between them.
    for start in (0..n).step_by(1024) {
        let end = (start + 1024).min(n);
        let s = xs.slice(start..end).unwrap();
        b.run(&double, &[&s], (end - start) as u32).unwrap();
    }
    b.barrier();
    // Second pass over different boundaries (multiples of 4 elements).
    for start in (0..n).step_by(2000 + 4) {
        let end = (start + 2004).min(n);
        let s = xs.slice(start..end).unwrap();
        b.run(&double, &[&s], (end - start) as u32).unwrap();
    }
    b.barrier();
    // z[k..] = x[k..] + y[k..] for chunks of 500, slices in all three bindings.
    for start in (0..n).step_by(500) {
        let r = start..start + 500;
        let (xv, yv, zv) = (
            xs.slice(r.clone()).unwrap(),
            ys.slice(r.clone()).unwrap(),
            zs.slice(r).unwrap(),
        );
        b.run(&add, &[&xv, &yv, &zv], 500).unwrap();
    }
    b.submit().unwrap();
    let quad: Vec<f32> = x.iter().map(|v| v * 4.0).collect();
    assert_eq!(xs.download().unwrap(), quad);
    let want: Vec<f32> = quad.iter().zip(&y).map(|(a, b)| a + b).collect();
    assert_eq!(zs.download().unwrap(), want);
    // A slice view downloads its own range.
    assert_eq!(
        zs.slice(500..1000).unwrap().download().unwrap(),
        want[500..1000]
    );
    assert_clean(&gpu);
}

/// A mixed workload: chained dispatches with changing bindings, slices,
/// copies and fills. Returns every output.
fn workload(gpu: &Device) -> Vec<Vec<f32>> {
    let add = gpu.kernel_glsl(ADD).unwrap();
    let half = gpu.kernel_glsl(HALF_PLUS_ONE).unwrap();
    let saxpy = gpu.kernel_glsl(SAXPY).unwrap();
    let mut rng = Rng::new(99);
    let n = 777;
    let x = rng.vec_f32(n);
    let a = gpu.upload(&x).unwrap();
    let b = gpu.alloc::<f32>(n).unwrap();
    let c = gpu.upload(&rng.vec_f32(n)).unwrap();
    let d = gpu.alloc::<f32>(n).unwrap();
    let mut batch = gpu.batch().unwrap();
    // 300 ping-pong steps: more descriptor sets than one fallback pool holds.
    for s in 0..300 {
        let (src, dst) = if s % 2 == 0 { (&a, &b) } else { (&b, &a) };
        batch.run(&half, &[src, dst], n as u32).unwrap();
        batch.barrier();
    }
    batch.run(&add, &[&a, &c, &d], n as u32).unwrap();
    batch.barrier();
    for start in (0..n - 16).step_by(16) {
        let s = b.slice(start..start + 16).unwrap();
        let t = d.slice(start..start + 16).unwrap();
        batch
            .run_with_push_constants(&saxpy, &[&t, &s], 16, &saxpy_pc(0.5, 16))
            .unwrap();
    }
    batch.barrier();
    batch.copy(&b, &c).unwrap();
    batch.fill(&d.slice(0..4).unwrap(), 0).unwrap();
    batch.submit().unwrap();
    [a, b, c, d].iter().map(|v| v.download().unwrap()).collect()
}

#[test]
fn pooled_descriptor_fallback_matches_push_descriptors() {
    let pushed = gpu();
    assert!(
        pushed.info().push_descriptor,
        "lavapipe has push descriptors"
    );
    let pooled = gpu_with(DeviceOptions {
        push_descriptors: false,
        ..Default::default()
    });
    assert!(!pooled.info().push_descriptor);
    let want = workload(&pushed);
    let got = workload(&pooled);
    assert_eq!(got, want);
    assert_eq!(pushed.stats().descriptor_pools, 0);
    // Lavapipe does not enforce maxSets, so one fallback pool may hold all sets.
    assert!(pooled.stats().descriptor_pools >= 1, "{:?}", pooled.stats());
    // Recorders (and their descriptor pools) are reused: a second run adds none.
    pooled.wait_idle().unwrap();
    let pools = pooled.stats().descriptor_pools;
    assert_eq!(workload(&pooled), want);
    assert_eq!(pooled.stats().descriptor_pools, pools);
    assert_clean(&pushed);
    assert_clean(&pooled);
}

#[test]
fn profiling_commands_and_batch() {
    let gpu = gpu();
    let saxpy = Kernel::builder(&gpu)
        .glsl(SAXPY)
        .label("saxpy")
        .build()
        .unwrap();
    let n = 1 << 16;
    let mut rng = Rng::new(1);
    let x = gpu.upload(&rng.vec_f32(n)).unwrap();
    let y = gpu.upload(&rng.vec_f32(n)).unwrap();
    let z = gpu.alloc::<f32>(n).unwrap();
    let pc = saxpy_pc(2.0, n as u32);

    let record = |b: &mut Batch| {
        b.run_with_push_constants(&saxpy, &[&x, &y], n as u32, &pc)
            .unwrap();
        b.barrier();
        b.copy(&y, &z).unwrap();
        b.barrier();
        b.fill(&y, 0).unwrap();
        b.barrier();
        b.label("x");
        b.run_with_push_constants(&saxpy, &[&x, &y], n as u32, &pc)
            .unwrap();
    };

    let mut b = gpu
        .batch_with(BatchOptions::default().with_profiling(Profiling::Commands))
        .unwrap();
    record(&mut b);
    let ticket = b.submit_async().unwrap();
    let p = ticket.profile().unwrap();
    let labels: Vec<&str> = p.commands.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(labels, ["saxpy", "copy", "fill", "x"]);
    assert!(p.commands.iter().all(|c| c.gpu_ns > 0.0), "{p:?}");
    let sum: f64 = p.commands.iter().map(|c| c.gpu_ns).sum();
    assert!(p.total_ns > 0.0 && (p.total_ns - sum).abs() < 1.0, "{p:?}");
    assert!(p.to_string().contains("saxpy"));
    // The profiled batch computed the same thing.
    assert_eq!(
        y.download().unwrap(),
        x.download()
            .unwrap()
            .iter()
            .map(|v| v * 2.0)
            .collect::<Vec<_>>()
    );

    let mut b = gpu
        .batch_with(BatchOptions::default().with_profiling(Profiling::Batch))
        .unwrap();
    record(&mut b);
    let p = b.submit_async().unwrap().profile().unwrap();
    assert!(p.commands.is_empty(), "{p:?}");
    assert!(p.total_ns > 0.0, "{p:?}");

    // Many commands: several chunks and more than one query pool.
    let small = gpu.alloc::<u32>(64).unwrap();
    let mut b = gpu
        .batch_with(BatchOptions::default().with_profiling(Profiling::Commands))
        .unwrap();
    for i in 0..1100u32 {
        b.fill(&small, i).unwrap();
        b.barrier();
    }
    let ticket = b.submit_async().unwrap();
    let p = ticket.profile().unwrap();
    assert_eq!(p.commands.len(), 1100);
    assert!(p
        .commands
        .iter()
        .all(|c| c.label == "fill" && c.gpu_ns >= 0.0));
    assert!(p.total_ns > 0.0);
    assert_eq!(small.download().unwrap(), vec![1099; 64]);

    // Unprofiled: labels are no-ops and there is no profile.
    let mut b = gpu.batch().unwrap();
    b.label("ignored");
    b.fill(&small, 5).unwrap();
    let ticket = b.submit_async().unwrap();
    assert!(matches!(ticket.profile(), Err(Error::Unsupported { .. })));
    ticket.wait().unwrap();
    assert_eq!(small.download().unwrap(), vec![5; 64]);
    assert_clean(&gpu);
}

/// Records one good dispatch (c += 1) after a barrier.
fn good(b: &mut Batch, inc: &Kernel, c: &Buffer<u32>) {
    b.barrier();
    b.run(inc, &[c], c.len() as u32).unwrap();
}

#[test]
fn bad_dispatches_are_typed_errors_and_the_batch_stays_usable() {
    let gpu = gpu();
    let saxpy = gpu.kernel_glsl(SAXPY).unwrap();
    let add = gpu.kernel_glsl(ADD).unwrap();
    let inc = gpu.kernel_glsl(INC).unwrap();
    let x = gpu.upload(&[1.0f32; 100]).unwrap();
    let y = gpu.upload(&[2.0f32; 100]).unwrap();
    let counter = gpu.alloc::<u32>(10).unwrap();
    let pc = saxpy_pc(1.0, 100);
    let mut b = gpu.batch().unwrap();
    let mut goods = 0;

    let one: [&dyn GpuBuf; 1] = [&x];
    let three: [&dyn GpuBuf; 3] = [&x, &y, &y];
    for bufs in [&one[..], &three[..], &[][..]] {
        match b.run_with_push_constants(&saxpy, bufs, 100, &pc) {
            Err(Error::BindingCount {
                expected: 2, got, ..
            }) => assert_eq!(got, bufs.len()),
            other => panic!("expected BindingCount, got {other:?}"),
        }
        good(&mut b, &inc, &counter);
        goods += 1;
    }
    for len in [4usize, 12, 0] {
        let r = b.run_with_push_constants(&saxpy, &[&x, &y], 100, &vec![0u8; len]);
        match r {
            Err(Error::PushConstantSize {
                expected: 8, got, ..
            }) => assert_eq!(got, len),
            other => panic!("expected PushConstantSize, got {other:?}"),
        }
        good(&mut b, &inc, &counter);
        goods += 1;
    }
    assert!(matches!(
        b.run(&saxpy, &[&x, &y], 100),
        Err(Error::PushConstantSize {
            expected: 8,
            got: 0,
            ..
        })
    ));
    assert!(matches!(
        b.run_configured(&add, &[&x, &y, &y], [1, 1, 1], Some(&[0u8; 4])),
        Err(Error::PushConstantSize {
            expected: 0,
            got: 4,
            ..
        })
    ));
    good(&mut b, &inc, &counter);
    goods += 1;

    assert!(matches!(
        b.run(&add, &[&x, &y, &y], 0),
        Err(Error::EmptyDispatch { .. })
    ));
    assert!(matches!(
        b.run_with_push_constants(&saxpy, &[&x, &y], 0, &pc),
        Err(Error::EmptyDispatch { .. })
    ));
    for grid in [[0, 1, 1], [1, 0, 1], [1, 1, 0]] {
        match b.run_configured(&add, &[&x, &y, &y], grid, None) {
            Err(Error::EmptyDispatch { workgroups, .. }) => assert_eq!(workgroups, grid),
            other => panic!("expected EmptyDispatch for {grid:?}, got {other:?}"),
        }
    }
    good(&mut b, &inc, &counter);
    goods += 1;
    for grid in [[65536, 1, 1], [1, 65536, 1], [1, 1, 65536]] {
        match b.run_configured(&add, &[&x, &y, &y], grid, None) {
            Err(Error::WorkgroupLimit {
                requested, limit, ..
            }) => {
                assert_eq!(requested, grid.map(u64::from));
                assert_eq!(limit, gpu.info().max_workgroup_count);
            }
            other => panic!("expected WorkgroupLimit for {grid:?}, got {other:?}"),
        }
        good(&mut b, &inc, &counter);
        goods += 1;
    }
    // The largest legal grid is accepted (recorded, not run: the batch is dropped).
    {
        let mut spare = gpu.batch().unwrap();
        spare
            .run_configured(&add, &[&x, &y, &y], [65535, 1, 1], None)
            .unwrap();
    }

    // Slice offsets must be multiples of minStorageBufferOffsetAlignment (16).
    let misaligned = x.slice(1..50).unwrap();
    match b.run_with_push_constants(&saxpy, &[&misaligned, &y], 49, &pc) {
        Err(Error::BindingMismatch {
            binding: 0, detail, ..
        }) => assert!(detail.contains("alignment"), "{detail}"),
        other => panic!("expected BindingMismatch, got {other:?}"),
    }
    let misaligned = y.slice(2..50).unwrap();
    assert!(matches!(
        b.run_with_push_constants(&saxpy, &[&x, &misaligned], 48, &pc),
        Err(Error::BindingMismatch { binding: 1, .. })
    ));
    good(&mut b, &inc, &counter);
    goods += 1;
    // 4 elements = 16 bytes: aligned, accepted.
    let aligned = y.slice(4..100).unwrap();
    b.barrier();
    b.run_with_push_constants(&saxpy, &[&x, &aligned], 96, &saxpy_pc(1.0, 96))
        .unwrap();

    // Transfers.
    let short = gpu.alloc::<f32>(99).unwrap();
    match b.copy(&x, &short) {
        Err(Error::BadTransfer {
            what: "copy",
            detail,
        }) => {
            assert!(detail.contains("400") && detail.contains("396"), "{detail}")
        }
        other => panic!("expected BadTransfer, got {other:?}"),
    }
    good(&mut b, &inc, &counter);
    goods += 1;
    let bytes_buf = gpu.alloc::<u8>(64).unwrap();
    for (s, d) in [(0..32, 16..48), (16..48, 0..32), (0..32, 0..32)] {
        let r = b.copy(
            &bytes_buf.slice(s.clone()).unwrap(),
            &bytes_buf.slice(d.clone()).unwrap(),
        );
        assert!(
            matches!(r, Err(Error::BadTransfer { what: "copy", .. })),
            "{s:?} -> {d:?}: {r:?}"
        );
        good(&mut b, &inc, &counter);
        goods += 1;
    }
    assert!(matches!(
        b.copy(&x, &x),
        Err(Error::BadTransfer { what: "copy", .. })
    ));
    for range in [1..9, 2..6, 0..3, 4..7] {
        let r = b.fill(&bytes_buf.slice(range.clone()).unwrap(), 0);
        assert!(
            matches!(r, Err(Error::BadTransfer { what: "fill", .. })),
            "fill {range:?}: {r:?}"
        );
        good(&mut b, &inc, &counter);
        goods += 1;
    }
    let halves = gpu.alloc::<u16>(16).unwrap();
    assert!(matches!(
        b.fill(&halves.slice(1..5).unwrap(), 0),
        Err(Error::BadTransfer { .. })
    ));
    b.barrier();
    b.fill(&halves.slice(2..6).unwrap(), 0x0007_0007).unwrap();
    good(&mut b, &inc, &counter);
    goods += 1;

    assert_eq!(b.len(), goods as u64 + 2);
    b.submit().unwrap();
    assert_eq!(counter.download().unwrap(), vec![goods; 10]);
    let mut want_y = vec![2.0f32; 100];
    for v in &mut want_y[4..] {
        *v += 1.0;
    }
    assert_eq!(y.download().unwrap(), want_y);
    let mut want_h = vec![0u16; 16];
    want_h[2..6].fill(7);
    assert_eq!(halves.download().unwrap(), want_h);
    assert_clean(&gpu);
}

#[test]
fn bindings_over_the_range_limits() {
    let gpu = gpu();
    let mark = gpu.kernel_glsl(MARK).unwrap();
    let range = gpu.info().max_storage_buffer_range;
    assert_eq!(range, 128 << 20, "lavapipe's maxStorageBufferRange");
    let big = gpu.alloc::<u8>(range as usize + 4).unwrap();
    let mut b = gpu.batch().unwrap();
    match b.run_with_push_constants(&mark, &[&big], 16, &bytes(&[16])) {
        Err(Error::BindingMismatch {
            binding: 0, detail, ..
        }) => assert!(detail.contains("maxStorageBufferRange"), "{detail}"),
        other => panic!("expected BindingMismatch, got {other:?}"),
    }
    // Slices of at most the limit bind, at offset 0 and at an aligned offset.
    let head = big.slice(0..range as usize).unwrap();
    b.run_with_push_constants(&mark, &[&head], 16, &bytes(&[16]))
        .unwrap();
    // One byte over the limit is still too much; an offset of 4 is misaligned.
    let over = big.slice(0..range as usize + 1).unwrap();
    assert!(matches!(
        b.run_with_push_constants(&mark, &[&over], 16, &bytes(&[16])),
        Err(Error::BindingMismatch { .. })
    ));
    let shifted = big.slice(4..).unwrap();
    match b.run_with_push_constants(&mark, &[&shifted], 16, &bytes(&[16])) {
        Err(Error::BindingMismatch { detail, .. }) => {
            assert!(detail.contains("alignment"), "{detail}")
        }
        other => panic!("expected BindingMismatch, got {other:?}"),
    }
    let tail = big.slice(16..).unwrap();
    b.barrier();
    b.run_with_push_constants(&mark, &[&tail], 2, &bytes(&[2]))
        .unwrap();
    b.submit().unwrap();
    let got = big.read_range(0..72).unwrap();
    let mut want = vec![0u8; 72];
    for i in 0..16u32 {
        want[i as usize * 4..i as usize * 4 + 4].copy_from_slice(&(i + 1).to_le_bytes());
    }
    want[16..20].copy_from_slice(&1u32.to_le_bytes());
    want[20..24].copy_from_slice(&2u32.to_le_bytes());
    assert_eq!(got, want);
    drop(big);

    // Uniform bindings are held to maxUniformBufferRange.
    let uni = gpu.kernel_glsl(UNIFORM).unwrap();
    let ulimit = gpu.info().max_uniform_buffer_range as usize;
    let too_big = gpu.alloc::<f32>(ulimit / 4 + 1).unwrap();
    let out = gpu.alloc::<f32>(1).unwrap();
    let mut b = gpu.batch().unwrap();
    match b.run(&uni, &[&too_big, &out], 1) {
        Err(Error::BindingMismatch { detail, .. }) => {
            assert!(detail.contains("maxUniformBufferRange"), "{detail}")
        }
        other => panic!("expected BindingMismatch, got {other:?}"),
    }
    let mut u = vec![0.0f32; 64];
    u[13] = 42.0;
    let ok = gpu.upload(&u).unwrap();
    b.run(&uni, &[&ok, &out], 1).unwrap();
    b.submit().unwrap();
    assert_eq!(out.download().unwrap(), vec![42.0]);
    assert_clean(&gpu);
}

#[test]
fn foreign_buffers_and_kernels() {
    let gpu = gpu();
    let other = common::gpu();
    let add = gpu.kernel_glsl(ADD).unwrap();
    let inc = gpu.kernel_glsl(INC).unwrap();
    let foreign_add = other.kernel_glsl(ADD).unwrap();
    let x = gpu.upload(&[1.0f32; 64]).unwrap();
    let z = gpu.alloc::<f32>(64).unwrap();
    let fx = other.upload(&[5.0f32; 64]).unwrap();
    let counter = gpu.alloc::<u32>(4).unwrap();
    let mut b = gpu.batch().unwrap();

    match b.run(&foreign_add, &[&x, &x, &z], 64) {
        Err(Error::ForeignKernel { kernel }) => assert_eq!(kernel, "main"),
        other => panic!("expected ForeignKernel, got {other:?}"),
    }
    good(&mut b, &inc, &counter);
    for (bufs, binding) in [
        ([&fx as &dyn GpuBuf, &x, &z], 0),
        ([&x as &dyn GpuBuf, &fx, &z], 1),
        ([&x as &dyn GpuBuf, &x, &fx], 2),
    ] {
        match b.run(&add, &bufs, 64) {
            Err(Error::ForeignBuffer { binding: got, .. }) => assert_eq!(got, binding),
            other => panic!("expected ForeignBuffer, got {other:?}"),
        }
        good(&mut b, &inc, &counter);
    }
    let fslice = fx.slice(16..32).unwrap();
    let r = b.run(
        &add,
        &[&x.slice(0..16).unwrap(), &fslice, &z.slice(0..16).unwrap()],
        16,
    );
    assert!(
        matches!(r, Err(Error::ForeignBuffer { binding: 1, .. })),
        "{r:?}"
    );
    assert!(matches!(b.copy(&fx, &z), Err(Error::ForeignBuffer { .. })));
    assert!(matches!(b.copy(&x, &fx), Err(Error::ForeignBuffer { .. })));
    assert!(matches!(b.fill(&fx, 0), Err(Error::ForeignBuffer { .. })));
    good(&mut b, &inc, &counter);
    b.barrier();
    b.run(&add, &[&x, &x, &z], 64).unwrap();
    b.submit().unwrap();
    assert_eq!(counter.download().unwrap(), vec![5; 4]);
    assert_eq!(z.download().unwrap(), vec![2.0; 64]);

    // The other device is untouched and works on its own.
    let fz = other.alloc::<f32>(64).unwrap();
    let mut ob = other.batch().unwrap();
    ob.run(&foreign_add, &[&fx, &fx, &fz], 64).unwrap();
    ob.submit().unwrap();
    assert_eq!(fz.download().unwrap(), vec![10.0; 64]);
    assert_clean(&other);
    assert_clean(&gpu);
}

#[test]
fn buffers_dropped_after_recording_stay_alive_until_the_work_is_done() {
    for push_descriptors in [true, false] {
        let gpu = gpu_with(DeviceOptions {
            push_descriptors,
            ..Default::default()
        });
        let add = gpu.kernel_glsl(ADD).unwrap();
        let n = 2000;
        let out = gpu.alloc::<f32>(n).unwrap();
        let copied = gpu.alloc::<f32>(n).unwrap();
        let mut b = gpu.batch().unwrap();
        {
            // The only handles to the inputs go away before the batch is submitted.
            let x = gpu.upload(&vec![1.5f32; n]).unwrap();
            let y = gpu.upload(&vec![2.0f32; n]).unwrap();
            b.run(&add, &[&x, &y.slice(..).unwrap(), &out], n as u32)
                .unwrap();
            b.copy(&y, &copied).unwrap();
        }
        // Garbage in between: other buffers come and go.
        for _ in 0..4 {
            let junk = gpu.upload(&vec![9.0f32; n]).unwrap();
            drop(junk);
        }
        b.submit().unwrap();
        assert_eq!(out.download().unwrap(), vec![3.5; n]);
        assert_eq!(copied.download().unwrap(), vec![2.0; n]);
        gpu.wait_idle().unwrap();
        assert_eq!(gpu.stats().buffers, 2);
        assert_clean(&gpu);
    }
}

#[test]
fn dropping_a_batch_discards_only_what_was_not_submitted() {
    let gpu = gpu();
    let inc = gpu.kernel_glsl(INC).unwrap();
    let counter = gpu.alloc::<u32>(100).unwrap();
    let options = BatchOptions {
        first_chunk: 1,
        max_chunk: 2,
        ..Default::default()
    };
    let mut b = gpu.batch_with(options).unwrap();
    // Chunks of 1, 2 and 2 commands are submitted as they fill up...
    for _ in 0..5 {
        b.run(&inc, &[&counter], 100).unwrap();
        b.barrier();
    }
    // ...and a sixth command is still open when the batch is dropped.
    b.run(&inc, &[&counter], 100).unwrap();
    drop(b);
    assert_eq!(counter.download().unwrap(), vec![5; 100]);
    // A never-submitted batch leaves nothing behind; the device carries on.
    let mut b = gpu.batch().unwrap();
    b.run(&inc, &[&counter], 100).unwrap();
    drop(b);
    let mut b = gpu.batch().unwrap();
    b.run(&inc, &[&counter], 100).unwrap();
    b.submit().unwrap();
    assert_eq!(counter.download().unwrap(), vec![6; 100]);
    gpu.wait_idle().unwrap();
    assert_eq!(gpu.stats().deferred, 0);
    assert_clean(&gpu);
}
