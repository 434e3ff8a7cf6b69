//! The descriptor-set cache of the pooled-descriptor path: written sets
//! are reused across batches for the same buffers, never for a different
//! buffer (even one that got a dropped buffer's handle or address), stay
//! bounded (1024 sets, then per-batch sets), make room again when their
//! buffers die (swept within one miss per entry, no trim needed), and
//! `trim` frees the sets of dropped buffers. Every device here forces pooled descriptor sets.

mod common;

use common::glsl::{ADD, INC};
use common::{assert_clean, gpu_with};
use vkcompute::{Device, DeviceOptions};

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
