//! Large copies: the built-in copy kernel path of `Batch::copy` (16-byte
//! granular copies of at least 1 MiB), including copies split into pieces
//! at the binding-range limit, slices at aligned offsets, and the transfer
//! command path for copies that do not qualify; every byte checked.

mod common;
use common::*;
use vkcompute::{BatchOptions, Device, DeviceOptions, Profiling};

fn pattern(n: usize, seed: u64) -> Vec<u32> {
    let mut r = Rng::new(seed);
    (0..n).map(|_| r.next_u64() as u32).collect()
}

#[test]
fn large_copies_move_every_byte() {
    let gpu = gpu();
    // 3 MiB + 16 bytes: the kernel path, one piece.
    let n = (3 << 18) + 4;
    let src_host = pattern(n, 1);
    let src = gpu.upload(&src_host).unwrap();
    let dst = gpu.alloc::<u32>(n).unwrap();
    let mut b = gpu
        .batch_with(BatchOptions::default().with_profiling(Profiling::Commands))
        .unwrap();
    b.copy(&src, &dst).unwrap();
    let t = b.submit_async().unwrap();
    let p = t.profile().unwrap();
    assert_eq!(p.commands.len(), 1);
    assert_eq!(p.commands[0].label, "copy");
    assert_eq!(dst.download().unwrap(), src_host);

    // Slices at 16-byte-aligned offsets (a multiple of the binding
    // alignment), 2 MiB long, into the middle of another buffer.
    let align = (gpu.info().min_storage_buffer_offset_alignment.max(16) / 4) as usize;
    let len = 1 << 19;
    let big = gpu.alloc::<u32>(len + 4 * align).unwrap();
    let mut b = gpu.batch().unwrap();
    b.copy(
        &src.slice(align..align + len).unwrap(),
        &big.slice(2 * align..2 * align + len).unwrap(),
    )
    .unwrap();
    b.submit().unwrap();
    let got = big.download().unwrap();
    assert!(got[..2 * align].iter().all(|&v| v == 0));
    assert_eq!(
        &got[2 * align..2 * align + len],
        &src_host[align..align + len]
    );
    assert!(got[2 * align + len..].iter().all(|&v| v == 0));

    // Not 16-byte granular (1 MiB + 4 bytes): the transfer command, same result.
    let m = (1 << 18) + 1;
    let a = gpu.upload(&src_host[..m]).unwrap();
    let c = gpu.alloc::<u32>(m).unwrap();
    let mut b = gpu.batch().unwrap();
    b.copy(&a, &c).unwrap();
    // A dispatch after a copy, with a barrier: ordered, and rebinds its own state.
    b.barrier();
    b.copy(&c, &dst.slice(0..m).unwrap()).unwrap();
    b.submit().unwrap();
    assert_eq!(c.download().unwrap(), &src_host[..m]);
    assert_eq!(&dst.download().unwrap()[..m], &src_host[..m]);
    assert_clean(&gpu);
}

/// Copies `bytes` (a multiple of 4) from one buffer to another in one batch
/// and checks every word.
fn copy_and_check(gpu: &Device, bytes: u64) {
    let n = (bytes / 4) as usize;
    let host: Vec<u32> = (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let src = gpu.upload(&host).unwrap();
    let dst = gpu.alloc::<u32>(n).unwrap();
    let mut b = gpu.batch().unwrap();
    b.copy(&src, &dst).unwrap();
    b.submit().unwrap();
    let got = dst.download().unwrap();
    let first_bad = got.iter().zip(&host).position(|(g, h)| g != h);
    assert_eq!(first_bad, None, "mismatch at word {first_bad:?} of {n}");
}

#[test]
fn copies_over_the_binding_range_are_split() {
    // The split, on every adapter: a binding limit the test sets itself
    // (1 MiB + 256 bytes), under a 5 MiB + 4 KiB copy, so pieces land at
    // offsets that are not powers of two and the last one is short.
    let limit = (1 << 20) + 256;
    let limited = gpu_with(DeviceOptions {
        copy_binding_limit: Some(limit),
        ..Default::default()
    });
    copy_and_check(&limited, (5 << 20) + 4096);
    limited.finish();
    // At the adapter's own maxStorageBufferRange where two such buffers fit.
    let gpu = gpu();
    let range = gpu.info().max_storage_buffer_range;
    let bytes = range + 4096;
    if bytes > gpu.info().max_memory_allocation_size / 2 || bytes > (1 << 30) {
        skipped(format!(
            "a copy over the adapter's own maxStorageBufferRange ({range} bytes) needs two \
             buffers over 1 GiB (the split ran above under a {limit}-byte limit)"
        ));
        return;
    }
    copy_and_check(&gpu, bytes);
    assert_clean(&gpu);
}
