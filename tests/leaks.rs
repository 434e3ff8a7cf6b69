//! Leak checks: creating and dropping many buffers and batches leaves the
//! device's object counts and allocator usage where they started.
//!
//! Each test warms up with one iteration and a trim, snapshots
//! [`Device::stats`], runs 10,000 iterations, then waits, trims and compares.

mod common;
use common::*;

use std::time::Instant;

use vkcompute::{Device, DeviceOptions, Memory, Stats};

const ITERATIONS: usize = 10_000;

/// One invocation adding 1 to the first element: batches are ordered after
/// earlier submissions, so the count is exact even for unwaited tickets.
const INCREMENT: &str = r#"
#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer B { uint v[]; };
void main() { v[0] += 1u; }
"#;

const PLACEMENTS: [Memory; 3] = [
    Memory::DeviceLocal,
    Memory::HostVisible,
    Memory::DeviceHostVisible,
];

/// After `wait_idle` + `trim`: what users no longer hold is gone.
fn assert_back_to(gpu: &Device, start: &Stats, warm_reserved: u64, what: &str) {
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
        "{what}: allocator reserved {} bytes, {} after warm-up",
        end.allocator_reserved_bytes,
        warm_reserved
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
fn one_buffer(gpu: &Device, i: usize) {
    let memory = PLACEMENTS[i % 3];
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
    one_buffer(gpu, 0);
    gpu.trim().unwrap();
    let start = gpu.stats();
    let warm_reserved = start.allocator_reserved_bytes;
    let t = Instant::now();
    for i in 0..ITERATIONS {
        one_buffer(gpu, i);
        if i % 100 == 99 {
            let s = gpu.stats();
            assert!(s.buffers <= start.buffers, "{what}: {s:?}");
            assert!(s.staging_buffers <= 4, "{what}: {s:?}");
            assert!(s.command_pools <= 4, "{what}: {s:?}");
        }
    }
    println!("{what}: {ITERATIONS} buffers in {:?}", t.elapsed());
    assert_back_to(gpu, &start, warm_reserved, what);
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

fn batches_leave_nothing(gpu: &Device, iterations: usize, pooled: bool, what: &str) {
    let k = gpu.kernel_glsl(INCREMENT).unwrap();
    let counter = gpu.alloc::<u32>(1).unwrap();
    one_batch(gpu, &k, &counter, 3);
    gpu.wait_idle().unwrap();
    gpu.trim().unwrap();
    let start = gpu.stats();
    let warm_reserved = start.allocator_reserved_bytes;
    assert_eq!(start.command_pools, 0);
    let t = Instant::now();
    let (mut max_pools, mut max_deferred, mut max_descriptor_pools) = (0, 0, 0);
    for i in 0..iterations {
        one_batch(gpu, &k, &counter, i);
        if i % 100 == 99 {
            let s = gpu.stats();
            max_pools = max_pools.max(s.command_pools);
            max_deferred = max_deferred.max(s.deferred);
            max_descriptor_pools = max_descriptor_pools.max(s.descriptor_pools);
        }
    }
    let recorded = t.elapsed();
    println!(
        "{what}: at most {max_pools} command pools, {max_descriptor_pools} descriptor pools, {max_deferred} deferred"
    );
    // Every other batch waits, so little is ever in flight: recorders and
    // parked buffers are recycled, not piled up.
    assert!(max_pools <= 8, "{what}: {max_pools} command pools");
    assert!(max_deferred <= 8, "{what}: {max_deferred} deferred");
    if pooled {
        assert!(
            max_descriptor_pools > 0,
            "{what}: the fallback was not used"
        );
        assert!(
            max_descriptor_pools <= 8,
            "{what}: {max_descriptor_pools} descriptor pools"
        );
    } else {
        assert_eq!(
            max_descriptor_pools, 0,
            "{what}: push descriptors need no pools"
        );
    }
    // Every batch ran, including those whose tickets were dropped.
    assert_eq!(counter.download().unwrap(), [1 + iterations as u32]);
    println!(
        "{what}: {iterations} batches in {recorded:?} ({:?} each)",
        recorded / iterations as u32
    );
    let s = gpu.stats();
    assert!(
        s.submissions - start.submissions >= iterations as u64,
        "{what}: one submission per batch at least"
    );
    assert_back_to(gpu, &start, warm_reserved, what);
    assert_eq!(gpu.stats().pipelines, 1);
    assert_clean(gpu);
}

#[test]
fn ten_thousand_batches_leave_nothing_behind() {
    let gpu = gpu();
    batches_leave_nothing(&gpu, ITERATIONS, false, "batches");
}

#[test]
fn batches_on_pooled_descriptors_leave_nothing_behind() {
    // The descriptor-set fallback allocates from per-recorder pools.
    let gpu = gpu_with(DeviceOptions {
        push_descriptors: false,
        ..Default::default()
    });
    assert!(!gpu.info().push_descriptor);
    batches_leave_nothing(&gpu, ITERATIONS, true, "pooled descriptors");
}
