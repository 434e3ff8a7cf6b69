//! Leak checks: creating and dropping many buffers and batches leaves the
//! device's object counts and allocator usage where they started.
//!
//! Each test warms up with the same mix of work it then runs (staging
//! included where the device stages) and a trim, snapshots
//! [`Device::stats`], runs 10,000 iterations, then waits, trims and
//! compares. The allocator keeps one memory block per memory type it has
//! used (and which types a workload uses depends on the adapter), so its
//! reserved bytes are held to the most seen during the warm-up, and must
//! not grow from the first half of the run to the second.

mod common;
use common::*;

use std::time::Instant;

use vkcompute::{Device, DeviceOptions, Memory, Stats};

const ITERATIONS: usize = 10_000;
/// Warm-up iterations: every size class, placement and read-back of the
/// buffer mix, every kind of batch.
const WARM_UP: usize = 128;
/// Slack for the second half of a run over the first: one memory block of
/// gpu-allocator's (256 MiB, its default device block, the largest it
/// sub-allocates from), for a pool that happened to peak late.
const BLOCK: u64 = 256 << 20;

/// One invocation adding 1 to the first element: batches are ordered after
/// earlier submissions, so the count is exact even for unwaited tickets.
const INCREMENT: &str = r#"
#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer B { uint v[]; };
void main() { v[0] += 1u; }
"#;

/// The placements the adapter offers (device-local host-visible memory
/// only where it has some).
fn placements(gpu: &Device) -> Vec<Memory> {
    let mut p = vec![Memory::DeviceLocal, Memory::HostVisible];
    if gpu.info().host_visible_device_memory > 0 {
        p.push(Memory::DeviceHostVisible);
    } else {
        skipped(format_args!(
            "Memory::DeviceHostVisible: {:?} has no device-local host-visible memory",
            gpu.info().name
        ));
    }
    p
}

/// Reserved-byte peaks over the two halves of a run, sampled as it goes.
#[derive(Default)]
struct Halves {
    first: u64,
    second: u64,
}

impl Halves {
    fn sample(&mut self, s: &Stats, i: usize, iterations: usize) {
        let half = if i < iterations / 2 {
            &mut self.first
        } else {
            &mut self.second
        };
        *half = (*half).max(s.allocator_reserved_bytes);
    }
}

/// Runs `iteration` WARM_UP times, then trims: returns the most reserved
/// bytes seen along the way.
fn warm_up(gpu: &Device, mut iteration: impl FnMut(usize)) -> u64 {
    let mut most = 0;
    for i in 0..WARM_UP {
        iteration(i);
        most = most.max(gpu.stats().allocator_reserved_bytes);
    }
    gpu.trim().unwrap();
    most.max(gpu.stats().allocator_reserved_bytes)
}

/// After `wait_idle` + `trim`: what users no longer hold is gone, and the
/// allocator holds no more than during the warm-up, nor more in the second
/// half of the run than in the first.
fn assert_back_to(gpu: &Device, start: &Stats, warm_reserved: u64, halves: &Halves, what: &str) {
    gpu.wait_idle().unwrap();
    gpu.trim().unwrap();
    let end = gpu.stats();
    println!("{what}: start {start:?}\n{what}: end   {end:?}");
    assert_eq!(end.buffers, start.buffers, "{what}: buffers");
    assert_eq!(end.buffer_bytes, start.buffer_bytes, "{what}: buffer bytes");
    assert_eq!(end.allocations, start.allocations, "{what}: allocations");
    assert_eq!(
        end.allocator_used_bytes, start.allocator_used_bytes,
        "{what}: allocator used bytes"
    );
    assert!(
        end.allocator_reserved_bytes <= warm_reserved,
        "{what}: allocator reserved {} bytes, at most {} during the warm-up",
        end.allocator_reserved_bytes,
        warm_reserved
    );
    println!(
        "{what}: reserved at most {} bytes in the warm-up, {} and {} in the halves, {} at the end",
        warm_reserved, halves.first, halves.second, end.allocator_reserved_bytes
    );
    assert!(
        halves.second <= halves.first.max(warm_reserved) + BLOCK,
        "{what}: allocator reserved grew from {} bytes (first half) to {} (second half)",
        halves.first,
        halves.second
    );
    assert_eq!(end.command_pools, 0, "{what}: command pools after trim");
    assert_eq!(end.command_buffers, 0, "{what}: command buffers after trim");
    assert_eq!(
        end.descriptor_pools, 0,
        "{what}: descriptor pools after trim"
    );
    assert_eq!(end.staging_buffers, 0, "{what}: staging buffers after trim");
    assert_eq!(end.query_pools, start.query_pools, "{what}: query pools");
    assert_eq!(end.deferred, 0, "{what}: deferred");
    assert_eq!(end.pipelines, start.pipelines, "{what}: pipelines");
    assert_eq!(end.semaphores, start.semaphores, "{what}: semaphores");
}

/// Creates and drops one small buffer (iteration `i` picks size, placement
/// and whether it is uploaded or zero-allocated), checking its contents.
fn one_buffer(gpu: &Device, placements: &[Memory], i: usize) {
    let memory = placements[i % placements.len()];
    let n = 1 + (i * 37) % 300;
    if i % 2 == 0 {
        let data: Vec<u8> = (0..n).map(|j| (i + j) as u8).collect();
        let b = gpu.upload_with(&data, memory).unwrap();
        // Read one element back now and then (each read is a transfer).
        if i % 64 == 0 {
            assert_eq!(b.read_range(n - 1..).unwrap(), [data[n - 1]]);
        }
    } else {
        let b = gpu.alloc_with::<f32>(n, memory).unwrap();
        if i % 64 == 1 {
            assert_eq!(b.read_range(..1).unwrap(), [0.0]);
        }
    }
}

fn buffers_leave_nothing(gpu: &Device, what: &str) {
    let placements = placements(gpu);
    let warm_reserved = warm_up(gpu, |i| one_buffer(gpu, &placements, i));
    let start = gpu.stats();
    let mut halves = Halves::default();
    let t = Instant::now();
    for i in 0..ITERATIONS {
        one_buffer(gpu, &placements, i);
        if i % 100 == 99 {
            let s = gpu.stats();
            halves.sample(&s, i, ITERATIONS);
            assert!(s.buffers <= start.buffers, "{what}: {s:?}");
            assert!(s.staging_buffers <= 4, "{what}: {s:?}");
            assert!(s.command_pools <= 4, "{what}: {s:?}");
        }
    }
    println!("{what}: {ITERATIONS} buffers in {:?}", t.elapsed());
    assert_back_to(gpu, &start, warm_reserved, &halves, what);
    assert_clean(gpu);
}

#[test]
fn ten_thousand_buffers_leave_nothing_behind() {
    let gpu = gpu();
    buffers_leave_nothing(&gpu, "mapped");
}

#[test]
fn ten_thousand_staged_buffers_leave_nothing_behind() {
    // Device-local buffers reached through staging: every zeroing and upload
    // takes a recorder and a staging buffer.
    let gpu = gpu_with(DeviceOptions {
        direct_host_access: false,
        staging_buffer_size: 4096,
        ..Default::default()
    });
    buffers_leave_nothing(&gpu, "staged");
}

/// Records one dispatch incrementing `counter` and, in every fourth batch,
/// one on a fresh buffer that is dropped right after submission (so its
/// memory must wait for the GPU). Even batches wait; odd ones drop their
/// ticket unwaited.
fn one_batch(gpu: &Device, k: &vkcompute::Kernel, counter: &vkcompute::Buffer<u32>, i: usize) {
    let mut b = gpu.batch().unwrap();
    b.run(k, &[counter], 1).unwrap();
    let scratch = (i % 4 == 3).then(|| gpu.alloc::<u32>(4).unwrap());
    if let Some(s) = &scratch {
        b.run(k, &[s], 1).unwrap();
    }
    if i % 2 == 0 {
        b.submit().unwrap();
    } else {
        let ticket = b.submit_async().unwrap();
        drop(scratch);
        drop(ticket);
    }
}

fn batches_leave_nothing(gpu: &Device, iterations: usize, what: &str) {
    let pooled = !gpu.info().push_descriptor;
    let k = gpu.kernel_glsl(INCREMENT).unwrap();
    let counter = gpu.alloc::<u32>(1).unwrap();
    // The same batches, and the read-back the run ends with (staged where
    // device-local memory is not mapped).
    let warm_reserved = warm_up(gpu, |i| {
        one_batch(gpu, &k, &counter, i);
        if i % 32 == 31 {
            assert_eq!(counter.download().unwrap(), [1 + i as u32]);
        }
    });
    let start = gpu.stats();
    assert_eq!(start.command_pools, 0);
    let mut halves = Halves::default();
    let t = Instant::now();
    let (mut max_pools, mut max_deferred, mut max_descriptor_pools) = (0, 0, 0);
    let (mut max_cached, mut max_cache_pools) = (0, 0);
    for i in 0..iterations {
        one_batch(gpu, &k, &counter, i);
        if i % 100 == 99 {
            let s = gpu.stats();
            halves.sample(&s, i, iterations);
            max_pools = max_pools.max(s.command_pools);
            max_deferred = max_deferred.max(s.deferred);
            max_descriptor_pools = max_descriptor_pools.max(s.descriptor_pools);
            max_cached = max_cached.max(s.cached_descriptor_sets);
            max_cache_pools = max_cache_pools.max(s.set_cache_pools);
        }
    }
    let recorded = t.elapsed();
    println!(
        "{what}: at most {max_pools} command pools, {max_descriptor_pools} descriptor pools, \
         {max_cached} cached descriptor sets in {max_cache_pools} pools, {max_deferred} deferred"
    );
    // Every other batch waits, so little is ever in flight: recorders and
    // parked buffers are recycled, not piled up.
    assert!(max_pools <= 8, "{what}: {max_pools} command pools");
    assert!(max_deferred <= 8, "{what}: {max_deferred} deferred");
    if pooled {
        // Sets come from the device's set cache (one per live binding set;
        // the scratch buffers' dead entries are swept once it is full),
        // or from per-recorder pools when it is full of live ones.
        assert!(max_cached > 0, "{what}: the set cache was not used");
        assert!(max_cached <= 1024, "{what}: {max_cached} cached sets");
        assert!(
            max_cache_pools <= 9,
            "{what}: {max_cache_pools} cache pools"
        );
        assert!(
            max_descriptor_pools <= 8,
            "{what}: {max_descriptor_pools} descriptor pools"
        );
    } else {
        assert_eq!(
            (max_descriptor_pools, max_cached),
            (0, 0),
            "{what}: push descriptors need no pools or sets"
        );
    }
    // Every batch ran, including those whose tickets were dropped.
    assert_eq!(counter.download().unwrap(), [(WARM_UP + iterations) as u32]);
    println!(
        "{what}: {iterations} batches in {recorded:?} ({:?} each)",
        recorded / iterations as u32
    );
    let s = gpu.stats();
    assert!(
        s.submissions - start.submissions >= iterations as u64,
        "{what}: one submission per batch at least"
    );
    assert_back_to(gpu, &start, warm_reserved, &halves, what);
    assert_eq!(gpu.stats().pipelines, 1);
    assert_clean(gpu);
}

#[test]
fn ten_thousand_batches_leave_nothing_behind() {
    let gpu = gpu();
    batches_leave_nothing(&gpu, ITERATIONS, "batches");
}

#[test]
fn batches_on_pooled_descriptors_leave_nothing_behind() {
    // The descriptor-set fallback allocates from per-recorder pools.
    let gpu = gpu_with(DeviceOptions {
        push_descriptors: Some(false),
        ..Default::default()
    });
    assert!(!gpu.info().push_descriptor);
    batches_leave_nothing(&gpu, ITERATIONS, "pooled descriptors");
}
