//! `ops::prefetch`: a read of a buffer range into the GPU's L2 cache. What
//! lavapipe can show: it reads, writes nothing, needs no barrier beside
//! independent work, is ordered after what wrote its range and before what
//! overwrites it, runs clean under synchronization validation, and refuses
//! ranges it cannot bind. Whether the cache then holds the range is for
//! the GPU machine's profile (the Qwen3 example's `--prefetch`).

mod common;

use vkcompute::ops::{self, Bf16};
use vkcompute::{BatchOptions, Error};

const N: usize = 4099;

fn opts() -> BatchOptions {
    BatchOptions::default()
        .with_auto_barriers(true)
        .with_record_plan(true)
}

#[test]
fn prefetch_writes_nothing_and_needs_no_barrier_beside_independent_work() {
    let gpu = common::gpu();
    let w: Vec<Bf16> = (0..N).map(|i| Bf16::from_f32(i as f32 * 0.25)).collect();
    let w = gpu.upload(&w).unwrap();
    let bytes = gpu
        .upload(&(0..N as u32).map(|i| i as u8).collect::<Vec<u8>>())
        .unwrap();
    let counter = gpu.upload(&[7u32; 33]).unwrap();
    let mut b = gpu.batch_with(opts()).unwrap();
    ops::increment(&mut b, &counter, 1).unwrap();
    ops::prefetch(&mut b, &w).unwrap();
    ops::prefetch(&mut b, &w.slice(0..1024).unwrap()).unwrap();
    ops::prefetch(&mut b, &bytes).unwrap();
    ops::increment(&mut b, &counter.slice(0..16).unwrap(), 2).unwrap();
    // Only the second increment waits, for the first: the prefetches read
    // ranges nothing in the batch writes.
    assert_eq!(b.barrier_count(), 1, "{:#?}", b.barrier_log());
    b.submit().unwrap();
    let want: Vec<Bf16> = (0..N).map(|i| Bf16::from_f32(i as f32 * 0.25)).collect();
    assert_eq!(w.download().unwrap(), want);
    let want: Vec<u8> = (0..N as u32).map(|i| i as u8).collect();
    assert_eq!(bytes.download().unwrap(), want);
    let mut want = vec![10u32; 16];
    want.extend(vec![8u32; 17]);
    assert_eq!(counter.download().unwrap(), want);
}

#[test]
fn prefetch_is_ordered_after_a_write_of_its_range_and_before_an_overwrite() {
    let gpu = common::gpu();
    let x = gpu.upload(&vec![1u32; N]).unwrap();
    let mut b = gpu.batch_with(opts()).unwrap();
    ops::increment(&mut b, &x, 1).unwrap();
    ops::prefetch(&mut b, &x).unwrap();
    assert_eq!(
        b.barrier_count(),
        1,
        "read after write: {:#?}",
        b.barrier_log()
    );
    ops::increment(&mut b, &x, 1).unwrap();
    assert_eq!(
        b.barrier_count(),
        2,
        "write after read: {:#?}",
        b.barrier_log()
    );
    b.submit().unwrap();
    assert_eq!(x.download().unwrap(), vec![3u32; N]);
}

#[test]
fn prefetch_refuses_ranges_it_cannot_bind() {
    let gpu = common::gpu();
    let tiny = gpu.upload(&[1u16]).unwrap();
    let mut b = gpu.batch().unwrap();
    match ops::prefetch(&mut b, &tiny) {
        Err(Error::OpShape { op, detail }) => {
            assert_eq!(op, "ops::prefetch");
            assert!(
                detail.contains("2 bytes") && detail.contains("at least 4"),
                "{detail}"
            );
        }
        other => panic!("a 2-byte range: {other:?}"),
    }
    let align = gpu.info().min_storage_buffer_offset_alignment;
    if align <= 4 {
        common::skipped("the adapter binds storage buffers at any 4-byte offset");
    } else {
        let x = gpu.upload(&vec![0u32; 64]).unwrap();
        let err = ops::prefetch(&mut b, &x.slice(1..64).unwrap()).unwrap_err();
        assert!(err.to_string().contains(&align.to_string()), "{err}");
    }
    assert_eq!(b.len(), 0, "nothing recorded");
    b.submit().unwrap();
}
