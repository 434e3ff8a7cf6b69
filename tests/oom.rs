//! Out of device memory, bounded by `DeviceOptions::memory_budget` so the
//! test is quick and safe on any adapter: allocating buffers of random
//! sizes in mixed placements until the allocator refuses gives a typed
//! [`Error::OutOfMemory`]; every earlier buffer still holds its random data;
//! the budget's edge is exact; after freeing some, allocation works again,
//! and a batch over the surviving buffers computes the right result.
//! (`tests/buffer.rs` checks the budget itself on a few buffers.)
//!
//! Out of memory from the driver itself (no budget): on an adapter with
//! memory of its own, device-local buffers are allocated until the driver
//! refuses; the refusal is a typed [`Error::OutOfMemory`] naming the driver,
//! and with the memory still full, then after freeing, batches compute the
//! right results. Skipped on CPU adapters (lavapipe), whose device memory
//! is the host's RAM.

mod common;
use common::glsl::INC;
use common::*;

use vkcompute::{AdapterType, Buffer, Device, DeviceOptions, Error, Memory};

/// The budget: small, so the test allocates a few dozen buffers.
const BUDGET: u64 = 4 << 20;

/// x[i] ^= k over the whole buffer.
const XOR: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer X { uint x[]; };
layout(push_constant) uniform P { uint k; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < x.length()) x[i] ^= k;
}
"#;

fn placements(gpu: &Device) -> Vec<Memory> {
    let mut p = vec![Memory::DeviceLocal, Memory::HostVisible];
    if gpu.info().host_visible_device_memory > 0 {
        p.push(Memory::DeviceHostVisible);
    } else {
        skipped(format_args!(
            "Memory::DeviceHostVisible: {:?} has none",
            gpu.info().name
        ));
    }
    p
}

/// Checks the buffer holds `want` (names the first differing element).
fn check(buf: &Buffer<u32>, want: &[u32], what: &str) {
    let got = buf.download().unwrap();
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!("{what}: element {i} is {:#x}, want {:#x}", got[i], want[i]);
    }
    assert_eq!(got.len(), want.len(), "{what}");
}

fn expect_oom<T: std::fmt::Debug>(r: vkcompute::Result<T>, bytes: u64, what: &str) {
    match r {
        Err(Error::OutOfMemory { requested, detail }) => {
            assert_eq!(requested, bytes, "{what}");
            assert!(detail.contains("budget"), "{what}: {detail}");
        }
        other => panic!("{what}: expected OutOfMemory, got {other:?}"),
    }
}

#[test]
fn allocate_until_out_of_memory_then_recover() {
    let gpu = gpu_with(DeviceOptions {
        memory_budget: Some(BUDGET),
        ..Default::default()
    });
    let placements = placements(&gpu);
    let mut rng = Rng::new(0xf00d);
    // (buffer, its data, its placement)
    let mut live: Vec<(Buffer<u32>, Vec<u32>, Memory)> = Vec::new();
    let mut used = 0u64;
    let first_oom = loop {
        let n = 1024 + rng.below(64 * 1024) as usize;
        let memory = placements[live.len() % placements.len()];
        let data: Vec<u32> = (0..n).map(|_| rng.next_u64() as u32).collect();
        // Alternate uploads and zero-filled allocations written afterwards.
        let r = if live.len() % 2 == 0 {
            gpu.upload_with(&data, memory)
        } else {
            gpu.alloc_with::<u32>(n, memory).and_then(|b| {
                assert_eq!(b.read_range(n - 4..).unwrap(), vec![0; 4]);
                b.write(0, &data).map(|_| b)
            })
        };
        match r {
            Ok(b) => {
                used += n as u64 * 4;
                live.push((b, data, memory));
            }
            Err(Error::OutOfMemory { requested, detail }) => {
                assert_eq!(requested, n as u64 * 4);
                assert!(detail.contains("budget"), "{detail}");
                assert!(used + requested > BUDGET && used <= BUDGET);
                break requested;
            }
            Err(e) => panic!("allocation {}: {e:?}", live.len()),
        }
        assert!(live.len() < 10_000, "the budget was never reached");
    };
    println!(
        "{} buffers ({used} bytes) before OutOfMemory for {first_oom} more bytes, budget {BUDGET}",
        live.len()
    );
    assert!(live.len() >= 8);
    assert_eq!(gpu.stats().buffers, live.len() as i64);
    assert_eq!(gpu.stats().buffer_bytes, used);

    // Every earlier buffer still holds its data.
    for (i, (b, data, memory)) in live.iter().enumerate() {
        check(
            b,
            data,
            &format!("buffer {i} ({memory:?}) after OutOfMemory"),
        );
    }

    // The edge is exact: one element more than what is left fails (in
    // every placement, uploads too), exactly what is left succeeds, and
    // then nothing more fits.
    let left = BUDGET - used;
    for memory in &placements {
        let n = (left / 4 + 1) as usize;
        expect_oom(
            gpu.alloc_with::<u32>(n, *memory),
            n as u64 * 4,
            "one element over",
        );
        expect_oom(
            gpu.upload_with(&vec![1u32; n], *memory),
            n as u64 * 4,
            "upload one element over",
        );
    }
    let rest = if left >= 4 {
        let data: Vec<u32> = (0..left / 4).map(|_| rng.next_u64() as u32).collect();
        let b = gpu.upload(&data).unwrap();
        used += left / 4 * 4;
        Some((b, data))
    } else {
        skipped(format_args!("filling the budget: {left} bytes left"));
        None
    };
    if BUDGET - used < 4 {
        expect_oom(gpu.alloc::<u32>(1), 4, "a full budget");
    }

    // Free every other buffer: allocation works again, in the space freed
    // (and only there: the budget was full).
    let mut freed = 0u64;
    let mut kept = Vec::new();
    for (i, entry) in live.into_iter().enumerate() {
        if i % 2 == 0 {
            freed += entry.0.byte_size();
        } else {
            kept.push(entry);
        }
    }
    drop(rest);
    // Half of it goes to new buffers; the batch below needs a little more.
    let mut again = Vec::new();
    for memory in &placements {
        let n = (freed / 8 / placements.len() as u64) as usize;
        let data: Vec<u32> = (0..n).map(|_| rng.next_u64() as u32).collect();
        let b = gpu.upload_with(&data, *memory).unwrap();
        again.push((b, data, *memory));
    }
    for (i, (b, data, memory)) in kept.iter().chain(&again).enumerate() {
        check(b, data, &format!("buffer {i} ({memory:?}) after freeing"));
    }

    // A batch over the surviving buffers: xor each with a constant, count
    // in one, and copy one into a fresh buffer.
    let xor = gpu.kernel_glsl(XOR).unwrap();
    let inc = gpu.kernel_glsl(INC).unwrap();
    let k = 0xa5a5_5a5au32;
    let (first, first_data, _) = &kept[0];
    let copy = gpu.alloc::<u32>(first.len()).unwrap();
    let mut b = gpu.batch().unwrap();
    for (buf, _, _) in kept.iter().chain(&again) {
        b.run_with_push_constants(&xor, &[buf], buf.len() as u32, &k.to_le_bytes())
            .unwrap();
    }
    b.barrier();
    b.copy(first, &copy).unwrap();
    b.barrier();
    b.run(&inc, &[&copy], copy.len() as u32).unwrap();
    b.submit().unwrap();
    for (i, (buf, data, memory)) in kept.iter().chain(&again).enumerate() {
        let want: Vec<u32> = data.iter().map(|v| v ^ k).collect();
        check(
            buf,
            &want,
            &format!("buffer {i} ({memory:?}) after the batch"),
        );
    }
    let want: Vec<u32> = first_data.iter().map(|v| (v ^ k).wrapping_add(1)).collect();
    check(&copy, &want, "the copy");

    // Everything freed: the whole budget is available again.
    drop((kept, again, copy));
    gpu.wait_idle().unwrap();
    let s = gpu.stats();
    assert_eq!((s.buffers, s.buffer_bytes), (0, 0));
    let whole = gpu.alloc::<u32>((BUDGET / 4) as usize).unwrap();
    assert_eq!(whole.read_range(..4).unwrap(), vec![0; 4]);
    expect_oom(gpu.alloc::<u8>(1), 4, "past the whole budget");
    drop(whole);
    assert_clean(&gpu);
}

/// XORs every element of `buf` with `k` in one batch and checks all of it
/// against `data ^ k`.
fn xor_and_check(
    gpu: &Device,
    xor: &vkcompute::Kernel,
    buf: &Buffer<u32>,
    data: &[u32],
    k: u32,
    what: &str,
) {
    let mut b = gpu.batch().unwrap();
    b.run_with_push_constants(xor, &[buf], buf.len() as u32, &k.to_le_bytes())
        .unwrap();
    b.submit().unwrap();
    let want: Vec<u32> = data.iter().map(|v| v ^ k).collect();
    check(buf, &want, what);
}

#[test]
fn the_driver_refuses_then_work_goes_on() {
    let gpu = gpu();
    let info = gpu.info().clone();
    if info.adapter_type != AdapterType::Discrete {
        skipped(format_args!(
            "the driver's own out-of-memory: {:?} is {:?}, its device memory is the host's \
             RAM (filling it would exhaust the machine, not the adapter)",
            info.name, info.adapter_type
        ));
        return;
    }
    // Built and allocated before memory runs out: the kernel, and a small
    // buffer to compute on while the memory is full.
    let xor = gpu.kernel_glsl(XOR).unwrap();
    let mut rng = Rng::new(0x00d_0000);
    let small_data: Vec<u32> = (0..4096).map(|_| rng.next_u64() as u32).collect();
    let small = gpu.upload(&small_data).unwrap();
    let heap = info.device_local_memory;
    // Chunks of at most 2 GiB (a sixteenth of the heap where smaller), so
    // the last refusal leaves little unused.
    let chunk = (heap / 16)
        .min(2 << 30)
        .min(info.max_memory_allocation_size)
        .max(1 << 20)
        / 4
        * 4;
    let mut held: Vec<Buffer<u32>> = Vec::new();
    let mut bytes = 0u64;
    let refusal = loop {
        match gpu.alloc::<u32>((chunk / 4) as usize) {
            Ok(b) => {
                bytes += chunk;
                held.push(b);
            }
            Err(Error::OutOfMemory { detail, .. }) => break detail,
            Err(e) => panic!("allocation {} ({bytes} bytes held): {e:?}", held.len()),
        }
        // A driver that never refuses would page device memory out to the
        // host: stop well before it could exhaust the machine.
        assert!(
            bytes <= heap + heap / 4,
            "{bytes} bytes allocated on a heap of {heap} and the driver never refused"
        );
    };
    println!(
        "driver refused after {} buffers of {chunk} bytes ({bytes} of a {heap}-byte heap): {refusal}",
        held.len()
    );
    assert!(!refusal.contains("budget"), "no budget was set: {refusal}");
    assert!(
        bytes >= heap / 2,
        "refused at {bytes} bytes of a {heap}-byte heap"
    );
    // The newest buffer is zero-filled, the oldest too.
    for b in [held.first(), held.last()].into_iter().flatten() {
        assert_eq!(b.read_range(..1024).unwrap(), vec![0; 1024]);
        let n = b.len();
        assert_eq!(b.read_range(n - 1024..).unwrap(), vec![0; 1024]);
    }
    // Memory full: a batch over the small buffer still computes.
    xor_and_check(
        &gpu,
        &xor,
        &small,
        &small_data,
        0x5a5a_a5a5,
        "with memory full",
    );
    let small_data: Vec<u32> = small_data.iter().map(|v| v ^ 0x5a5a_a5a5).collect();
    // Free half: allocation succeeds again, and a new buffer computes.
    let keep = held.len() / 2;
    held.truncate(keep);
    gpu.wait_idle().unwrap();
    let n = (chunk.min(256 << 20) / 4) as usize;
    let data: Vec<u32> = (0..n).map(|_| rng.next_u64() as u32).collect();
    let fresh = gpu.upload(&data).unwrap();
    xor_and_check(&gpu, &xor, &fresh, &data, 0x0f0f_f0f0, "after freeing half");
    xor_and_check(
        &gpu,
        &xor,
        &small,
        &small_data,
        1,
        "the small buffer after freeing",
    );
    drop((held, fresh, small));
    assert_clean(&gpu);
}
