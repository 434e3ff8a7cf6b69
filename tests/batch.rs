//! Batches: dispatch forms, barriers and chunking, transfers, sliced
//! launches, the pooled-descriptor fallback, profiling, and what dropping
//! buffers and batches does to recorded work. Launches at the adapter's
//! limits and the typed errors of bad dispatches and transfers are in
//! `batch_errors.rs`.

mod common;
use common::glsl::{bytes, saxpy_pc, ADD, INC, SAXPY, SPIN, STEP};
use common::*;
use vkcompute_measure::spin::xorshift;

use vkcompute::{Batch, BatchOptions, Buffer, Device, DeviceOptions, Error, Kernel, Profiling};

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
    // Chunks of 16, 32, 64, then the remaining 88; one; and 1 + 99 * 2 + 1.
    assert_eq!(subs_default, 4);
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
    let pushed = gpu_with(DeviceOptions {
        push_descriptors: Some(true),
        ..Default::default()
    });
    let has_push = pushed.info().push_descriptor;
    if is_lavapipe(&pushed) {
        assert!(has_push, "lavapipe has push descriptors");
    }
    if !has_push {
        skipped(format_args!(
            "push descriptors: {:?} lacks VK_KHR_push_descriptor, so both devices use pools",
            pushed.info().name
        ));
    }
    let pooled = gpu_with(DeviceOptions {
        push_descriptors: Some(false),
        ..Default::default()
    });
    assert!(!pooled.info().push_descriptor);
    let want = workload(&pushed);
    let got = workload(&pooled);
    assert_eq!(got, want);
    if has_push {
        assert_eq!(pushed.stats().descriptor_pools, 0);
    }
    // Each distinct binding set was written once into the device's set
    // cache: 2 ping-pong pairs, 1 add, 48 saxpy slices.
    let s = pooled.stats();
    assert_eq!(s.cached_descriptor_sets, 51, "{s:?}");
    assert_eq!(s.descriptor_pools, 0, "{s:?}");
    // Recorders (and their descriptor pools) are reused: however many runs,
    // the pools stay bounded by the few recorders in rotation (a wait may
    // ready one ahead of the next batch, so how many depends on timing).
    for _ in 0..10 {
        assert_eq!(workload(&pooled), want);
    }
    pooled.wait_idle().unwrap();
    let s = pooled.stats();
    assert!(s.command_pools <= 4, "{s:?}");
    // About 350 sets per batch, 256 per fallback pool (where the driver
    // enforces maxSets): at most two pools per recorder.
    assert!(s.descriptor_pools <= 2 * s.command_pools, "{s:?}");
    assert_clean(&pushed);
    assert_clean(&pooled);
}

#[test]
fn profiling_commands_and_batch() {
    let gpu = gpu();
    if !gpu.info().timestamps {
        skipped(format_args!(
            "profiling: {:?} writes no timestamps on its compute queue",
            gpu.info().name
        ));
        let r = gpu.batch_with(BatchOptions::default().with_profiling(Profiling::Commands));
        assert!(matches!(r, Err(Error::Unsupported { .. })), "{r:?}");
        assert_clean(&gpu);
        return;
    }
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

#[test]
fn buffers_dropped_after_recording_stay_alive_until_the_work_is_done() {
    for push_descriptors in [true, false] {
        let gpu = gpu_with(DeviceOptions {
            push_descriptors: Some(push_descriptors),
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

#[test]
fn batches_after_a_wait_start_with_any_kernel() {
    // A wait that finds the work unfinished readies the next command
    // buffer with the last pipeline bound (see `Ticket::wait`); whichever
    // kernel the next batch starts with (the same one, another, or none),
    // it must run what it records. SPIN keeps each wait long enough.
    const ITERS: u32 = 20_000;
    for push in [true, false] {
        let gpu = gpu_with(DeviceOptions {
            push_descriptors: Some(push),
            ..Default::default()
        });
        let spin = gpu.kernel_glsl(SPIN).unwrap();
        let saxpy = gpu.kernel_glsl(SAXPY).unwrap();
        let seeds: Vec<u32> = (1..=64).collect();
        let s = gpu.upload(&seeds).unwrap();
        let x = gpu.upload(&[1.0f32; 64]).unwrap();
        let y = gpu.alloc::<f32>(64).unwrap();
        let f = gpu.alloc::<u32>(64).unwrap();
        let mut want = seeds.clone();
        for round in 1..=5u32 {
            // The same kernel twice: the second batch finds it bound.
            for _ in 0..2 {
                let mut b = gpu.batch().unwrap();
                b.run_with_push_constants(&spin, &[&s], 64, &bytes(&[ITERS]))
                    .unwrap();
                b.submit().unwrap();
                want.iter_mut().for_each(|v| *v = xorshift(*v, ITERS));
            }
            // Another kernel after it, then a batch that only fills.
            let mut b = gpu.batch().unwrap();
            b.run_with_push_constants(&saxpy, &[&x, &y], 64, &saxpy_pc(1.0, 64))
                .unwrap();
            b.submit().unwrap();
            let mut b = gpu.batch().unwrap();
            b.fill(&f, round).unwrap();
            b.submit().unwrap();
            assert_eq!(s.download().unwrap(), want, "round {round}, push {push}");
            assert!(y.download().unwrap().iter().all(|&v| v == round as f32));
            assert!(f.download().unwrap().iter().all(|&v| v == round));
        }
        assert_clean(&gpu);
    }
}
