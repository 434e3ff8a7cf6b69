//! Buffer errors: zero length, sizes over the adapter's limits (failing
//! before anything is allocated), out-of-range reads, writes and slices,
//! wrong download lengths, and the memory budget.

mod common;
use common::*;

use bytemuck::{Pod, Zeroable};
use vkcompute::{Buffer, DeviceOptions, Error, Memory};

/// A device whose host transfers all go through staging buffers.
fn staged_gpu() -> common::Gpu {
    gpu_with(DeviceOptions {
        direct_host_access: false,
        staging_buffer_size: 4096,
        ..Default::default()
    })
}

/// Asserts every element is zero.
fn assert_zero<T: Pod>(got: &[T], what: &str) {
    let bytes = bytemuck::cast_slice::<T, u8>(got);
    if let Some(i) = bytes.iter().position(|&b| b != 0) {
        panic!("{what}: byte {i} is {:#04x}, not zero", bytes[i]);
    }
}

/// A 20-byte element with no padding.
#[derive(Debug, Clone, Copy, PartialEq, Pod, Zeroable)]
#[repr(C)]
struct Particle {
    pos: [f32; 3],
    id: u32,
    vel: [i16; 2],
}

/// Every placement: these checks fail before memory is chosen.
const PLACEMENTS: [Memory; 3] = [
    Memory::DeviceLocal,
    Memory::HostVisible,
    Memory::DeviceHostVisible,
];

#[test]
fn zero_length_is_an_error() {
    let gpu = gpu();
    assert!(matches!(
        gpu.alloc::<f32>(0),
        Err(Error::ZeroLength { what: "alloc" })
    ));
    for memory in PLACEMENTS {
        assert!(matches!(
            gpu.alloc_with::<u8>(0, memory),
            Err(Error::ZeroLength { what: "alloc" })
        ));
        assert!(matches!(
            gpu.upload_with::<u32>(&[], memory),
            Err(Error::ZeroLength { what: "upload" })
        ));
    }
    assert!(matches!(
        gpu.upload::<Particle>(&[]),
        Err(Error::ZeroLength { what: "upload" })
    ));
    let s = gpu.stats();
    assert_eq!((s.buffers, s.allocations, s.buffer_bytes), (0, 0, 0));
    assert_clean(&gpu);
}

#[test]
fn buffers_over_max_memory_allocation_size_fail_before_allocating() {
    let gpu = gpu();
    let limit = gpu.info().max_memory_allocation_size;
    let before = gpu.stats();
    let t = std::time::Instant::now();
    for memory in PLACEMENTS {
        match gpu.alloc_with::<u8>(limit as usize + 1, memory) {
            Err(Error::BufferTooLarge {
                requested,
                limit: l,
                limit_name,
            }) => {
                assert_eq!(requested, limit + 1, "the bytes asked for");
                assert_eq!(l, limit);
                assert_eq!(limit_name, "maxMemoryAllocationSize");
            }
            other => panic!("expected BufferTooLarge, got {other:?}"),
        }
    }
    // In elements of 4 bytes: the bytes asked for are named.
    let n = (limit / 4 + 1) as usize;
    match gpu.alloc::<f32>(n) {
        Err(Error::BufferTooLarge {
            requested,
            limit_name: "maxMemoryAllocationSize",
            ..
        }) => assert_eq!(requested, limit + 4),
        other => panic!("expected BufferTooLarge, got {other:?}"),
    }
    let msg = gpu.alloc::<u8>(limit as usize + 1).unwrap_err().to_string();
    assert!(msg.contains("maxMemoryAllocationSize"), "{msg}");
    assert!(msg.contains(&(limit + 1).to_string()), "{msg}");
    // A byte count that overflows u64.
    assert!(matches!(
        gpu.alloc::<[u64; 4]>(usize::MAX),
        Err(Error::BufferTooLarge { .. })
    ));
    // Nothing was allocated, nothing zeroed: this returns at once.
    assert!(
        t.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(gpu.stats(), before);
    // The limit itself is not an error to compute (just not allocated here).
    assert_clean(&gpu);
}

#[test]
fn out_of_range_and_length_errors_name_the_bounds() {
    for gpu in [gpu(), staged_gpu()] {
        let buf = gpu.upload(&[1u32; 10]).unwrap();
        let oor = |r: vkcompute::Result<Vec<u32>>| match r {
            Err(Error::OutOfRange {
                what,
                start,
                end,
                len,
            }) => (what, start, end, len),
            other => panic!("expected OutOfRange, got {other:?}"),
        };
        assert_eq!(oor(buf.read_range(5..11)), ("read_range", 5, 11, 10));
        assert_eq!(oor(buf.read_range(11..)), ("read_range", 11, 10, 10));
        assert_eq!(oor(buf.read_range(..=10)), ("read_range", 0, 11, 10));
        let (a, b) = (7usize, 3usize);
        assert_eq!(oor(buf.read_range(a..b)), ("read_range", 7, 3, 10));

        match buf.write(8, &[0, 0, 0]) {
            Err(Error::OutOfRange {
                what: "write",
                start: 8,
                end: 11,
                len: 10,
            }) => {}
            other => panic!("expected OutOfRange, got {other:?}"),
        }
        match buf.write(11, &[]) {
            Err(Error::OutOfRange {
                what: "write",
                start: 11,
                end: 11,
                len: 10,
            }) => {}
            other => panic!("expected OutOfRange, got {other:?}"),
        }
        assert!(matches!(
            buf.write(usize::MAX, &[1]),
            Err(Error::OutOfRange { what: "write", .. })
        ));
        match buf.slice(3..12) {
            Err(Error::OutOfRange {
                what: "slice",
                start: 3,
                end: 12,
                len: 10,
            }) => {}
            other => panic!("expected OutOfRange, got {other:?}"),
        }
        assert!(matches!(
            buf.slice(4..4),
            Err(Error::ZeroLength { what: "slice" })
        ));
        assert!(matches!(
            buf.slice(10..),
            Err(Error::ZeroLength { what: "slice" })
        ));

        let mut short = [0u32; 9];
        match buf.download_into(&mut short) {
            Err(Error::LengthMismatch {
                what: "download_into",
                expected: 10,
                got: 9,
            }) => {}
            other => panic!("expected LengthMismatch, got {other:?}"),
        }
        let mut long = vec![0u32; 11];
        assert!(matches!(
            buf.download_into(&mut long),
            Err(Error::LengthMismatch {
                expected: 10,
                got: 11,
                ..
            })
        ));
        // Failed calls changed nothing.
        assert_eq!(buf.download().unwrap(), vec![1u32; 10]);
        assert_eq!(short, [0; 9]);
        let msg = buf.read_range(5..11).unwrap_err().to_string();
        assert!(msg.contains("5..11") && msg.contains("10"), "{msg}");
        assert_clean(&gpu);
    }
}

#[test]
fn memory_budget_limits_live_buffers() {
    for direct in [true, false] {
        let gpu = gpu_with(DeviceOptions {
            memory_budget: Some(1 << 20),
            direct_host_access: direct,
            staging_buffer_size: 4096,
            ..Default::default()
        });
        const N: usize = 16 << 10; // 64 KiB of u32
        let fill =
            |i: usize| -> Vec<u32> { (0..N as u32).map(|j| j ^ (i as u32 * 7919)).collect() };

        // A buffer over the whole budget fails without using any of it.
        match gpu.alloc::<u8>((1 << 20) + 1) {
            Err(Error::OutOfMemory { requested, detail }) => {
                assert!(requested > 1 << 20, "{requested}");
                assert!(detail.contains("budget"), "{detail}");
            }
            other => panic!("expected OutOfMemory, got {other:?}"),
        }

        let mut bufs: Vec<Option<Buffer<u32>>> = Vec::new();
        let err = loop {
            assert!(bufs.len() <= 16, "the budget was not enforced");
            match gpu.upload(&fill(bufs.len())) {
                Ok(b) => bufs.push(Some(b)),
                Err(e) => break e,
            }
        };
        assert_eq!(bufs.len(), 16, "1 MiB holds sixteen 64 KiB buffers");
        match err {
            Error::OutOfMemory { requested, detail } => {
                assert_eq!(requested, (N * 4) as u64);
                assert!(detail.contains("budget"), "{detail}");
            }
            other => panic!("expected OutOfMemory, got {other:?}"),
        }
        // Any further allocation fails, whatever its size or placement.
        for memory in PLACEMENTS {
            assert!(matches!(
                gpu.alloc_with::<u8>(1, memory),
                Err(Error::OutOfMemory { .. })
            ));
        }
        assert_eq!(gpu.stats().buffers, 16);
        assert_eq!(gpu.stats().buffer_bytes, 1 << 20);

        // Earlier buffers still hold their data, and can be written (staging
        // memory does not count against the budget).
        for (i, b) in bufs.iter().enumerate() {
            let b = b.as_ref().unwrap();
            assert_eq!(b.download().unwrap(), fill(i), "buffer {i}");
        }
        bufs[3].as_ref().unwrap().write(5, &[1, 2, 3]).unwrap();
        assert_eq!(
            bufs[3].as_ref().unwrap().read_range(5..8).unwrap(),
            [1, 2, 3]
        );

        // Dropping some frees their share of the budget.
        for i in [0, 5, 10, 15] {
            bufs[i] = None;
        }
        assert_eq!(gpu.stats().buffers, 12);
        let again: Vec<Buffer<u32>> = (0..4)
            .map(|i| gpu.upload(&fill(100 + i)).unwrap())
            .collect();
        assert!(matches!(
            gpu.alloc::<u32>(N),
            Err(Error::OutOfMemory { .. })
        ));
        for (i, b) in again.iter().enumerate() {
            assert_eq!(b.download().unwrap(), fill(100 + i));
        }
        for (i, b) in bufs.iter().enumerate() {
            if let Some(b) = b {
                assert_eq!(b.read_range(100..200).unwrap(), fill(i)[100..200]);
            }
        }
        drop(again);
        drop(bufs);
        let s = gpu.stats();
        assert_eq!((s.buffers, s.buffer_bytes), (0, 0));
        // The whole budget is available again.
        let whole = gpu.alloc::<u8>(1 << 20).unwrap();
        assert_zero(&whole.read_range(..4096).unwrap(), "whole budget");
        assert_clean(&gpu);
    }
}
