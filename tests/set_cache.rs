//! The descriptor-set cache of the pooled-descriptor path: written sets
//! are reused across batches for the same buffers, never for a different
//! buffer (even one that got a dropped buffer's handle or address), stay
//! bounded (1024 sets, then per-batch sets), make room again when their
//! buffers die (swept within one miss per entry, no trim needed), and
//! `trim` frees the sets of dropped buffers. Every device here forces pooled descriptor sets,
//! except in the layout-class test, which runs both descriptor paths.

mod common;

use common::glsl::{bytes, ADD, INC, STEP};
use common::{assert_clean, gpu_with, skipped};
use vkcompute::{BatchOptions, Device, DeviceOptions};

/// The cache's documented capacity (`Stats::cached_descriptor_sets`).
const CAPACITY: usize = 1024;

fn pooled() -> common::Gpu {
    let gpu = gpu_with(DeviceOptions {
        push_descriptors: Some(false),
        ..Default::default()
    });
    assert!(!gpu.info().push_descriptor);
    gpu
}

/// With every bound buffer dropped, a trim frees every cached set and pool.
fn assert_trim_empties_cache(gpu: &Device) {
    gpu.trim().unwrap();
    let s = gpu.stats();
    assert_eq!(s.cached_descriptor_sets, 0, "{s:?}");
    assert_eq!(s.set_cache_pools, 0, "{s:?}");
    assert_clean(gpu);
}

#[test]
fn repeated_batches_reuse_one_written_set() {
    let gpu = pooled();
    let inc = gpu.kernel_glsl(INC).unwrap();
    let c = gpu.alloc::<u32>(1000).unwrap();
    for round in 1..=50u32 {
        let mut b = gpu.batch().unwrap();
        b.run(&inc, &[&c], 1000).unwrap();
        b.submit().unwrap();
        let s = gpu.stats();
        assert_eq!(s.cached_descriptor_sets, 1, "round {round}: {s:?}");
        // Nothing came from the per-batch pools.
        assert_eq!(s.descriptor_pools, 0, "round {round}: {s:?}");
    }
    assert!(c.download().unwrap().iter().all(|&v| v == 50));
    // A slice is another binding: its own set.
    let mut b = gpu.batch().unwrap();
    b.run(&inc, &[&c.slice(0..500).unwrap()], 500).unwrap();
    b.submit().unwrap();
    assert_eq!(gpu.stats().cached_descriptor_sets, 2);
    let got = c.download().unwrap();
    assert!(got[..500].iter().all(|&v| v == 51) && got[500..].iter().all(|&v| v == 50));
    assert_clean(&gpu);
}

#[test]
fn a_new_buffer_never_binds_a_dropped_buffers_set() {
    let gpu = pooled();
    let inc = gpu.kernel_glsl(INC).unwrap();
    // More short-lived buffers than the cache holds: dead entries are
    // swept once it is full, and handles and addresses get reused.
    for i in 0..(CAPACITY as u32 + 200) {
        let c = gpu.upload(&[i, i + 1, i + 2]).unwrap();
        let mut b = gpu.batch().unwrap();
        b.run(&inc, &[&c], 3).unwrap();
        b.submit().unwrap();
        assert_eq!(
            c.download().unwrap(),
            vec![i + 1, i + 2, i + 3],
            "buffer {i}"
        );
        let s = gpu.stats();
        assert!(s.cached_descriptor_sets <= CAPACITY as i64, "{s:?}");
    }
    assert_trim_empties_cache(&gpu);
}

#[test]
fn past_capacity_batches_write_their_own_sets() {
    let gpu = pooled();
    let add = gpu.kernel_glsl(ADD).unwrap();
    let n = CAPACITY + 100;
    let xs: Vec<_> = (0..n)
        .map(|i| gpu.upload(&[i as f32, 1.0]).unwrap())
        .collect();
    let y = gpu.upload(&[10.0f32, 20.0]).unwrap();
    let zs: Vec<_> = (0..n).map(|_| gpu.alloc::<f32>(2).unwrap()).collect();
    for round in 0..2 {
        let mut b = gpu.batch().unwrap();
        for (x, z) in xs.iter().zip(&zs) {
            b.run(&add, &[x, &y, z], 2).unwrap();
        }
        b.submit().unwrap();
        let s = gpu.stats();
        assert_eq!(s.cached_descriptor_sets, CAPACITY as i64, "round {round}");
        assert!(
            s.descriptor_pools >= 1,
            "the overflow used batch pools: {s:?}"
        );
        for (i, z) in zs.iter().enumerate() {
            assert_eq!(z.download().unwrap(), vec![i as f32 + 10.0, 21.0], "{i}");
        }
    }
    // The live buffers keep their sets through a trim.
    gpu.trim().unwrap();
    assert_eq!(gpu.stats().cached_descriptor_sets, CAPACITY as i64);
    drop(xs);
    assert_trim_empties_cache(&gpu);
}

#[test]
fn threads_share_cached_sets() {
    let gpu = pooled();
    let inc = gpu.kernel_glsl(INC).unwrap();
    let shared = gpu.alloc::<u32>(64).unwrap();
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                let own = gpu.alloc::<u32>(64).unwrap();
                for _ in 0..100 {
                    let mut b = gpu.batch().unwrap();
                    b.run(&inc, &[&own], 64).unwrap();
                    b.submit().unwrap();
                }
                assert!(own.download().unwrap().iter().all(|&v| v == 100));
                // All threads bind the same buffer: one set, bound from many
                // command buffers at once. The batches run one after another
                // on the queue (each waits for the previous), so no update
                // is lost.
                let mut b = gpu.batch().unwrap();
                b.run(&inc, &[&shared], 64).unwrap();
                b.submit().unwrap();
            });
        }
    });
    assert!(shared.download().unwrap().iter().all(|&v| v == 8));
    gpu.trim().unwrap();
    // The eight per-thread buffers are gone; the shared one keeps its set.
    assert_eq!(gpu.stats().cached_descriptor_sets, 1);
    assert_clean(&gpu);
}

#[test]
fn a_cache_full_of_buffers_that_die_is_reclaimed_without_trim() {
    let gpu = pooled();
    let inc = gpu.kernel_glsl(INC).unwrap();
    // Fill the cache with live buffers; one more binding finds it full of
    // live entries (its sweep frees nothing, so the next misses wait).
    let olds: Vec<_> = (0..=CAPACITY)
        .map(|_| gpu.alloc::<u32>(4).unwrap())
        .collect();
    let mut b = gpu.batch().unwrap();
    for o in &olds {
        b.run(&inc, &[o], 4).unwrap();
    }
    b.submit().unwrap();
    assert_eq!(gpu.stats().cached_descriptor_sets, CAPACITY as i64);
    drop(olds);
    // Now every cached buffer is dead. New bindings (slices 64 bytes
    // apart) miss; within a sweep interval (one miss per entry) the dead
    // entries are swept and their sets freed, and later slices are cached.
    let per = 16;
    let count = CAPACITY + 100;
    let c = gpu.alloc::<u32>(per * count).unwrap();
    let mut b = gpu.batch().unwrap();
    for i in 0..count {
        let s = c.slice(i * per..(i + 1) * per).unwrap();
        b.run(&inc, &[&s], per as u32).unwrap();
    }
    b.submit().unwrap();
    assert!(c.download().unwrap().iter().all(|&v| v == 1));
    // The swept sets wait for the submissions that may have bound them (a
    // trim frees them); what is left are sets of the new slices, cached
    // only because the dead entries left the map during recording.
    gpu.trim().unwrap();
    let s = gpu.stats();
    assert!(
        s.cached_descriptor_sets > 0 && s.cached_descriptor_sets <= count as i64,
        "no new slice was cached: the dead entries stayed: {s:?}"
    );
    assert_clean(&gpu);
}

/// y = x + 1 (reads binding 0, writes binding 1).
const INC_INTO: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) buffer Y { float y[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < x.length()) y[i] = x[i] + 1.0;
}
"#;

/// x = y * 2 (writes binding 0, reads binding 1): INC_INTO's layout.
const DOUBLE_FROM: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer X { float x[]; };
layout(set = 0, binding = 1) readonly buffer Y { float y[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < x.length()) x[i] = y[i] * 2.0;
}
"#;

#[test]
fn kernels_of_one_layout_alternate_over_the_same_buffers() {
    // Two kernels whose layouts are identically defined switch over the
    // same buffers (only the pipeline changes: the descriptors bound for
    // one serve the other), with a kernel of another layout in between;
    // on both descriptor paths, in one chunk and in many.
    let pushed = gpu_with(DeviceOptions {
        push_descriptors: Some(true),
        ..Default::default()
    });
    if !pushed.info().push_descriptor {
        skipped("push descriptors: the adapter lacks VK_KHR_push_descriptor");
    }
    let pooled = gpu_with(DeviceOptions {
        push_descriptors: Some(false),
        ..Default::default()
    });
    let n = 300;
    let x0: Vec<f32> = (0..n).map(|i| (i % 97) as f32).collect();
    let steps = 12;
    let mut want = x0.clone();
    let mut want_y = vec![0.0f32; n];
    for s in 0..steps {
        for (x, y) in want.iter_mut().zip(&mut want_y) {
            *y = *x + 1.0;
            *x = *y * 2.0;
            if s % 5 == 4 {
                *x = *x * 1.0 + 1.0;
            }
        }
    }
    for gpu in [&pushed, &pooled] {
        let inc = gpu.kernel_glsl(INC_INTO).unwrap();
        let double = gpu.kernel_glsl(DOUBLE_FROM).unwrap();
        let step = gpu.kernel_glsl(STEP).unwrap();
        for options in [BatchOptions::single_submit(), BatchOptions::default()] {
            let x = gpu.upload(&x0).unwrap();
            let y = gpu.alloc::<f32>(n).unwrap();
            let mut b = gpu.batch_with(options).unwrap();
            for s in 0..steps {
                b.run(&inc, &[&x, &y], n as u32).unwrap();
                b.barrier();
                b.run(&double, &[&x, &y], n as u32).unwrap();
                b.barrier();
                if s % 5 == 4 {
                    let pc = bytes(&[1.0f32.to_bits(), 1.0f32.to_bits(), n as u32]);
                    b.run_with_push_constants(&step, &[&x], n as u32, &pc)
                        .unwrap();
                    b.barrier();
                }
            }
            b.submit().unwrap();
            assert_eq!(x.download().unwrap(), want, "{options:?}");
            assert_eq!(y.download().unwrap(), want_y, "{options:?}");
            if !gpu.info().push_descriptor && options.first_chunk == 0 {
                // One set for [x, y] (bound for `inc`, kept for `double`)
                // and one for [x] (`step`): `double` bound none.
                assert_eq!(gpu.stats().cached_descriptor_sets, 2);
            }
        }
        if !gpu.info().push_descriptor {
            // A batch that binds [x, y] for `double` first finds the set
            // cached for `inc`: sets are shared by layout class.
            let x = gpu.upload(&x0).unwrap();
            let y = gpu.alloc::<f32>(n).unwrap();
            gpu.trim().unwrap();
            let before = gpu.stats().cached_descriptor_sets;
            for k in [&inc, &double] {
                let mut b = gpu.batch().unwrap();
                b.run(k, &[&x, &y], n as u32).unwrap();
                b.submit().unwrap();
            }
            assert_eq!(gpu.stats().cached_descriptor_sets, before + 1);
            let want: Vec<f32> = x0.iter().map(|v| (v + 1.0) * 2.0).collect();
            assert_eq!(x.download().unwrap(), want);
        }
        assert_clean(gpu);
    }
}
