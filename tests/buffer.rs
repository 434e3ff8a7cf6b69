//! Buffers: upload/download round trips, zero-filled allocation, sub-range
//! reads and writes, slices, memory placements and the staging path (errors
//! and the memory budget: `tests/buffer_errors.rs`).

mod common;
use common::*;

use bytemuck::{Pod, Zeroable};
use vkcompute::{Device, DeviceOptions, Error, GpuBuf, Memory};

/// Sizes (in elements) that are multiples of neither 4 bytes nor any
/// workgroup size.
const SIZES: [usize; 5] = [1, 3, 1023, 4097, (1 << 20) + 5];

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

/// A 20-byte element with no padding.
#[derive(Debug, Clone, Copy, PartialEq, Pod, Zeroable)]
#[repr(C)]
struct Particle {
    pos: [f32; 3],
    id: u32,
    vel: [i16; 2],
}

/// A 6-byte element: a buffer of an odd count is not a multiple of 4 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Pod, Zeroable)]
#[repr(C)]
struct Rgb16 {
    r: u16,
    g: u16,
    b: u16,
}

/// A device that reaches device-local memory only through staging copies,
/// with staging buffers of 4 KiB so most transfers take several chunks.
fn staged_gpu() -> common::Gpu {
    gpu_with(DeviceOptions {
        direct_host_access: false,
        staging_buffer_size: 4096,
        ..Default::default()
    })
}

/// `n` elements of random bytes (any bit pattern, NaNs included).
fn random<T: Pod>(rng: &mut Rng, n: usize) -> Vec<T> {
    let mut v = vec![T::zeroed(); n];
    for chunk in bytemuck::cast_slice_mut::<T, u8>(&mut v).chunks_mut(8) {
        let r = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&r[..chunk.len()]);
    }
    v
}

/// Bitwise equality, naming the first differing byte.
fn assert_same<T: Pod>(got: &[T], want: &[T], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let (g, w) = (
        bytemuck::cast_slice::<T, u8>(got),
        bytemuck::cast_slice::<T, u8>(want),
    );
    if let Some(i) = g.iter().zip(w).position(|(a, b)| a != b) {
        panic!(
            "{what}: first difference at byte {i} (element {}): got {:#04x}, want {:#04x}",
            i / std::mem::size_of::<T>(),
            g[i],
            w[i]
        );
    }
}

fn assert_zero<T: Pod>(got: &[T], what: &str) {
    let bytes = bytemuck::cast_slice::<T, u8>(got);
    if let Some(i) = bytes.iter().position(|&b| b != 0) {
        panic!("{what}: byte {i} is {:#04x}, not zero", bytes[i]);
    }
}

fn round_trip<T: Pod>(gpu: &Device, rng: &mut Rng, n: usize, memory: Memory) {
    let what = format!("{} x {} in {memory:?}", n, std::any::type_name::<T>());
    let host: Vec<T> = random(rng, n);
    let buf = gpu.upload_with(&host, memory).unwrap();
    assert_eq!(buf.len(), n, "{what}");
    assert!(!buf.is_empty());
    assert_eq!(buf.byte_size(), (n * std::mem::size_of::<T>()) as u64);
    assert_eq!(buf.memory(), memory);
    assert_same(&buf.download().unwrap(), &host, &what);
}

#[test]
fn round_trips_of_element_types_and_odd_sizes() {
    let gpu = gpu();
    let mut rng = Rng::new(1);
    for &n in &SIZES {
        round_trip::<f32>(&gpu, &mut rng, n, Memory::DeviceLocal);
        round_trip::<u32>(&gpu, &mut rng, n, Memory::DeviceLocal);
        round_trip::<u8>(&gpu, &mut rng, n, Memory::DeviceLocal);
        round_trip::<i16>(&gpu, &mut rng, n, Memory::DeviceLocal);
        round_trip::<[f32; 3]>(&gpu, &mut rng, n, Memory::DeviceLocal);
        round_trip::<Particle>(&gpu, &mut rng, n, Memory::DeviceLocal);
        round_trip::<Rgb16>(&gpu, &mut rng, n, Memory::DeviceLocal);
    }
    // Typed values survive too (not only bytes).
    let ps: Vec<Particle> = (0..77)
        .map(|i| Particle {
            pos: [i as f32, -(i as f32), 0.5],
            id: i,
            vel: [i as i16, -(i as i16)],
        })
        .collect();
    assert_eq!(gpu.upload(&ps).unwrap().download().unwrap(), ps);
    let v3: Vec<[f32; 3]> = (0..5).map(|i| [i as f32; 3]).collect();
    let b = gpu
        .upload(bytemuck::cast_slice::<[f32; 3], f32>(&v3))
        .unwrap();
    assert_eq!(b.len(), 15);
    assert_eq!(
        bytemuck::cast_slice::<f32, [f32; 3]>(&b.download().unwrap()),
        &v3[..]
    );
    assert_clean(&gpu);
}

#[test]
fn round_trips_in_every_placement() {
    let gpu = gpu();
    let mut rng = Rng::new(2);
    for memory in placements(&gpu) {
        for &n in &SIZES[..4] {
            round_trip::<u8>(&gpu, &mut rng, n, memory);
            round_trip::<f32>(&gpu, &mut rng, n, memory);
            round_trip::<Particle>(&gpu, &mut rng, n, memory);
        }
        round_trip::<i16>(&gpu, &mut rng, SIZES[4], memory);

        let z = gpu.alloc_with::<Rgb16>(1023, memory).unwrap();
        assert_eq!(z.memory(), memory);
        assert_zero(&z.download().unwrap(), "alloc_with");
        let data: Vec<Rgb16> = random(&mut rng, 100);
        z.write(900, &data).unwrap();
        assert_same(&z.read_range(900..1000).unwrap(), &data, "write/read_range");
        assert_zero(&z.read_range(..900).unwrap(), "untouched head");
        assert_zero(&z.read_range(1000..).unwrap(), "untouched tail");
    }
    assert_clean(&gpu);
}

#[test]
fn device_host_visible_placement_matches_the_adapter() {
    let gpu = gpu();
    let rebar = gpu.info().host_visible_device_memory > 0;
    if is_lavapipe(&gpu) {
        // Its only memory type is device-local and host-visible.
        assert!(rebar, "lavapipe's memory is device-local and host-visible");
    } else {
        skipped(format_args!(
            "lavapipe's device-local host-visible memory: the adapter is {:?}",
            gpu.info().name
        ));
    }
    let r = gpu.upload_with(&[1u16, 2, 3], Memory::DeviceHostVisible);
    if rebar {
        let b = r.unwrap();
        assert_eq!(b.memory(), Memory::DeviceHostVisible);
        assert_eq!(b.download().unwrap(), vec![1, 2, 3]);
    } else {
        // Where there is none, the placement is a typed error, and nothing is left.
        assert!(matches!(r, Err(Error::Unsupported { .. })), "{r:?}");
        let s = gpu.stats();
        assert_eq!((s.buffers, s.allocations, s.buffer_bytes), (0, 0, 0));
    }
    assert_clean(&gpu);
}

#[test]
fn alloc_is_zero_filled_even_after_memory_reuse() {
    for gpu in [gpu(), staged_gpu()] {
        for memory in placements(&gpu) {
            for &n in &[1usize, 3, 1023, 4097, 70_001] {
                let garbage = vec![0xA5u8; n];
                let reserved_before = {
                    let g = gpu.upload_with(&garbage, memory).unwrap();
                    assert_eq!(g.download().unwrap(), garbage);
                    gpu.stats().allocator_reserved_bytes
                };
                // Same size again: the allocator hands back the same memory.
                let z = gpu.alloc_with::<u8>(n, memory).unwrap();
                assert_eq!(gpu.stats().allocator_reserved_bytes, reserved_before);
                assert_zero(
                    &z.download().unwrap(),
                    &format!("alloc_with::<u8>({n}, {memory:?}) after garbage"),
                );
                // And as another type over the same bytes.
                drop(z);
                let g = gpu.upload_with(&vec![-1i16; n], memory).unwrap();
                drop(g);
                let z = gpu.alloc_with::<i16>(n, memory).unwrap();
                assert_zero(&z.download().unwrap(), "alloc_with::<i16> after garbage");
                // A write to a freshly zeroed buffer leaves the rest zero.
                z.write(n - 1, &[7]).unwrap();
                let back = z.download().unwrap();
                assert_eq!(back[n - 1], 7);
                assert_zero(&back[..n - 1], "rest after one write");
            }
        }
        assert_clean(&gpu);
    }
}

fn sub_ranges<T: Pod>(gpu: &Device, rng: &mut Rng, n: usize) {
    let what = std::any::type_name::<T>();
    let mut mirror: Vec<T> = random(rng, n);
    let buf = gpu.upload(&mirror).unwrap();
    for _ in 0..40 {
        let start = rng.below(n as u64) as usize;
        let len = rng.below((n - start) as u64 + 1) as usize;
        let data: Vec<T> = random(rng, len);
        buf.write(start, &data).unwrap();
        mirror[start..start + len].copy_from_slice(&data);

        let a = rng.below(n as u64 + 1) as usize;
        let b = a + rng.below((n - a) as u64 + 1) as usize;
        let got = buf.read_range(a..b).unwrap();
        assert_same(&got, &mirror[a..b], &format!("{what} read_range({a}..{b})"));
        if a < b {
            let got = buf.read_range(a..=b - 1).unwrap();
            assert_same(
                &got,
                &mirror[a..b],
                &format!("{what} read_range({a}..={})", b - 1),
            );
        }
    }
    assert_same(&buf.read_range(..).unwrap(), &mirror, what);
    assert_same(&buf.read_range(n / 2..).unwrap(), &mirror[n / 2..], what);
    assert_same(&buf.read_range(..n / 3).unwrap(), &mirror[..n / 3], what);
    assert!(buf.read_range(n..).unwrap().is_empty());
    buf.write(n, &[]).unwrap();
    assert_same(&buf.download().unwrap(), &mirror, what);
}

#[test]
fn write_and_read_range_on_sub_ranges() {
    for gpu in [gpu(), staged_gpu()] {
        let mut rng = Rng::new(3);
        sub_ranges::<u8>(&gpu, &mut rng, 3 * 4096 + 7);
        sub_ranges::<i16>(&gpu, &mut rng, 5001);
        sub_ranges::<f32>(&gpu, &mut rng, 2049);
        sub_ranges::<Rgb16>(&gpu, &mut rng, 1999);
        sub_ranges::<u32>(&gpu, &mut rng, 1);
        assert_clean(&gpu);
    }
}

#[test]
fn download_into_fills_the_slice() {
    for gpu in [gpu(), staged_gpu()] {
        let mut rng = Rng::new(4);
        for &n in &SIZES[..4] {
            let host: Vec<i16> = random(&mut rng, n);
            let buf = gpu.upload(&host).unwrap();
            let mut out = vec![0x5555i16; n];
            buf.download_into(&mut out).unwrap();
            assert_same(&out, &host, "download_into");
        }
        let host: Vec<Particle> = random(&mut rng, 999);
        let buf = gpu.upload_with(&host, Memory::HostVisible).unwrap();
        let mut out = vec![Particle::zeroed(); 999];
        buf.download_into(&mut out).unwrap();
        assert_same(&out, &host, "download_into HostVisible");
        assert_clean(&gpu);
    }
}

#[test]
fn slices_view_sub_ranges() {
    for gpu in [gpu(), staged_gpu()] {
        let host: Vec<u32> = (0..5000).collect();
        let buf = gpu.upload(&host).unwrap();

        let s = buf.slice(100..300).unwrap();
        assert_eq!((s.start(), s.len()), (100, 200));
        assert!(!s.is_empty());
        assert_eq!(s.byte_offset(), 400);
        assert_eq!(GpuBuf::byte_size(&s), 800);
        assert_eq!(s.download().unwrap(), host[100..300]);

        let s = buf.slice(4999..=4999).unwrap();
        assert_eq!((s.start(), s.len()), (4999, 1));
        assert_eq!(s.download().unwrap(), vec![4999]);

        let s = buf.slice(..).unwrap();
        assert_eq!((s.start(), s.len()), (0, 5000));
        assert_eq!(s.byte_offset(), 0);
        assert_eq!(GpuBuf::byte_size(&s), buf.byte_size());
        assert_eq!(s.download().unwrap(), host);

        let s = buf.slice(4097..).unwrap();
        assert_eq!((s.start(), s.len()), (4097, 903));
        let copy = s; // slices are Copy
        assert_eq!(copy.download().unwrap(), host[4097..]);

        // A slice sees later writes to its buffer.
        let s = buf.slice(10..20).unwrap();
        buf.write(15, &[9, 9, 9]).unwrap();
        assert_eq!(s.download().unwrap(), [10, 11, 12, 13, 14, 9, 9, 9, 18, 19]);

        // Odd-sized elements: slices of u8 at odd offsets.
        let bytes: Vec<u8> = (0..9999u32).map(|i| (i * 7 + 3) as u8).collect();
        let b = gpu.upload(&bytes).unwrap();
        let s = b.slice(4093..8199).unwrap();
        assert_eq!(s.download().unwrap(), bytes[4093..8199]);
        assert_eq!(s.byte_offset(), 4093);
        assert_clean(&gpu);
    }
}

#[test]
fn clones_share_memory_and_buffers_keep_the_device_alive() {
    let gpu = gpu();
    let a = gpu.upload(&[1u32, 2, 3, 4]).unwrap();
    let b = a.clone();
    b.write(1, &[20, 30]).unwrap();
    assert_eq!(a.download().unwrap(), vec![1, 20, 30, 4]);
    let before = gpu.stats().buffers;
    drop(a);
    assert_eq!(gpu.stats().buffers, before, "a clone keeps the buffer");
    assert_eq!(b.device().id(), gpu.id());
    assert_clean(&gpu);
    // Dropping every Device handle first leaves the buffer usable.
    let id = gpu.id();
    drop(gpu);
    assert_eq!(b.download().unwrap(), vec![1, 20, 30, 4]);
    let dev = b.device();
    assert_eq!(dev.id(), id);
    drop(b);
    assert_eq!(dev.stats().buffers, 0);
    assert_clean(&dev);
}

#[test]
fn staging_path_pipelines_odd_sizes_through_two_buffers() {
    let gpu = staged_gpu();
    let mut rng = Rng::new(5);
    assert_eq!(gpu.stats().staging_buffers, 0);
    for &n in &[
        1usize,
        4095,
        4096,
        4097,
        8191,
        3 * 4096 + 1,
        10 * 4096 + 3,
        (1 << 20) + 5,
    ] {
        let host: Vec<u8> = random(&mut rng, n);
        let s0 = gpu.stats();
        let buf = gpu.upload(&host).unwrap();
        let s1 = gpu.stats();
        let chunks = n.div_ceil(4096) as u64;
        // One submission per 4 KiB chunk.
        assert_eq!(
            s1.submissions - s0.submissions,
            chunks,
            "upload of {n} bytes in 4 KiB chunks"
        );
        assert!(s1.staging_buffers >= if n > 4096 { 2 } else { 1 });
        assert_same(&buf.download().unwrap(), &host, &format!("{n} bytes"));
        let s2 = gpu.stats();
        assert_eq!(
            s2.submissions - s1.submissions,
            chunks,
            "download of {n} bytes"
        );
        // Only a few staging buffers are kept however many chunks passed.
        assert!(s2.staging_buffers <= 4, "{s2:?}");
    }

    // Elements straddling chunk boundaries (12-byte and 6-byte elements do not
    // divide 4096), and sub-ranges starting at odd byte offsets.
    let pts: Vec<[f32; 3]> = random(&mut rng, 3 * 4096 / 12 * 4 + 5);
    let b = gpu.upload(&pts).unwrap();
    assert_same(&b.download().unwrap(), &pts, "[f32; 3]");
    let rgb: Vec<Rgb16> = random(&mut rng, 4097);
    let b = gpu.upload(&rgb).unwrap();
    assert_same(&b.download().unwrap(), &rgb, "Rgb16");
    let mut mirror = rgb.clone();
    let patch: Vec<Rgb16> = random(&mut rng, 1500);
    b.write(1300, &patch).unwrap(); // bytes 7800..16800: three chunks
    mirror[1300..2800].copy_from_slice(&patch);
    assert_same(
        &b.read_range(681..2801).unwrap(),
        &mirror[681..2801],
        "Rgb16 range",
    );
    assert_same(&b.download().unwrap(), &mirror, "Rgb16 after patch");

    let big: Vec<u8> = random(&mut rng, 5 * 4096 + 11);
    let b = gpu.upload(&big).unwrap();
    for (start, end) in [
        (4095, 4097),
        (4090, 12290),
        (1, 5 * 4096 + 10),
        (8192, 8193),
    ] {
        assert_same(
            &b.read_range(start..end).unwrap(),
            &big[start..end],
            &format!("read_range({start}..{end})"),
        );
    }
    let s = b.slice(4093..4096 * 3 + 5).unwrap();
    assert_same(&s.download().unwrap(), &big[4093..4096 * 3 + 5], "slice");
    let mut out = vec![0u8; big.len()];
    b.download_into(&mut out).unwrap();
    assert_same(&out, &big, "download_into");

    // HostVisible memory is mapped even on this device: no staging copies.
    let before = gpu.stats().submissions;
    let hv = gpu.upload_with(&big, Memory::HostVisible).unwrap();
    assert_same(&hv.download().unwrap(), &big, "HostVisible");
    assert_eq!(gpu.stats().submissions, before);

    // trim releases the staging buffers.
    drop((b, hv));
    gpu.trim().unwrap();
    assert_eq!(gpu.stats().staging_buffers, 0);
    assert_clean(&gpu);
}

#[test]
fn direct_host_access_needs_no_staging_on_lavapipe() {
    // The transfers work on any adapter; on lavapipe (all memory mapped and
    // cached) they take no staging buffer and no submission.
    let gpu = gpu();
    let mut rng = Rng::new(6);
    let host: Vec<u8> = random(&mut rng, (1 << 20) + 5);
    let buf = gpu.upload(&host).unwrap();
    buf.write(3, &host[..100]).unwrap();
    let mut want = host.clone();
    want.copy_within(..100, 3);
    assert_same(&buf.download().unwrap(), &want, "direct");
    let z = gpu.alloc::<f32>(12345).unwrap();
    assert_zero(&z.download().unwrap(), "direct alloc");
    let s = gpu.stats();
    if is_lavapipe(&gpu) {
        assert_eq!(s.staging_buffers, 0, "{s:?}");
        assert_eq!(s.submissions, 0, "{s:?}");
    } else {
        skipped(format_args!(
            "no staging on lavapipe: {:?} made {} submissions with {} staging buffers",
            gpu.info().name,
            s.submissions,
            s.staging_buffers
        ));
    }
    assert_clean(&gpu);
}

#[test]
fn host_access_waits_for_gpu_use() {
    const COPY: &str = r#"
        #version 450
        layout(local_size_x = 64) in;
        layout(set = 0, binding = 0) readonly buffer X { uint x[]; };
        layout(set = 0, binding = 1) buffer Y { uint y[]; };
        layout(push_constant) uniform P { uint n; };
        void main() {
            uint i = gl_GlobalInvocationID.x;
            if (i < n) {
                uint v = x[i];
                for (uint k = 0u; k < 16u; k++) v = v * 3u + 1u;
                y[i] = v;
            }
        }
    "#;
    let f = |mut v: u32| {
        for _ in 0..16 {
            v = v.wrapping_mul(3).wrapping_add(1);
        }
        v
    };
    for gpu in [gpu(), staged_gpu()] {
        let n = 1u32 << 18;
        let old: Vec<u32> = (0..n).collect();
        let x = gpu.upload(&old).unwrap();
        let y = gpu.alloc::<u32>(n as usize).unwrap();
        let k = gpu.kernel_glsl(COPY).unwrap();
        let mut b = gpu.batch().unwrap();
        b.run_with_push_constants(&k, &[&x, &y], n, &n.to_le_bytes())
            .unwrap();
        let ticket = b.submit_async().unwrap();
        // Overwriting the input right away waits for the kernel reading it.
        x.write(0, &vec![0u32; n as usize]).unwrap();
        // Reading the output right away waits for the kernel writing it.
        let got = y.download().unwrap();
        ticket.wait().unwrap();
        for (i, g) in got.iter().enumerate() {
            assert_eq!(*g, f(i as u32), "y[{i}]");
        }
        assert_zero(&x.download().unwrap(), "x after write");
        assert_clean(&gpu);
    }
}

#[test]
fn alloc_never_reuses_memory_the_gpu_still_writes() {
    // Each invocation spins, then writes a non-zero word: long enough that
    // the batch is still running when its buffer is dropped.
    const SCRIBBLE: &str = r#"
        #version 450
        layout(local_size_x = 64) in;
        layout(set = 0, binding = 0) buffer B { uint v[]; };
        layout(push_constant) uniform P { uint n; };
        void main() {
            uint i = gl_GlobalInvocationID.x;
            if (i >= n) return;
            uint x = i;
            for (uint k = 0u; k < 256u; k++) x = x * 1664525u + 1013904223u;
            v[i] = x | 1u;
        }
    "#;
    for gpu in [gpu(), staged_gpu()] {
        let n = 1u32 << 20;
        let k = gpu.kernel_glsl(SCRIBBLE).unwrap();
        for round in 0..3 {
            let victim = gpu.alloc::<u32>(n as usize).unwrap();
            let mut b = gpu.batch().unwrap();
            b.run_with_push_constants(&k, &[&victim], n, &n.to_le_bytes())
                .unwrap();
            let ticket = b.submit_async().unwrap();
            drop(victim);
            drop(ticket);
            let in_flight = gpu.stats().deferred;
            println!("round {round}: {in_flight} objects parked behind the running batch");
            // Same size at once: must not alias the memory still written.
            let fresh = gpu.alloc::<u32>(n as usize).unwrap();
            gpu.wait_idle().unwrap();
            let got = fresh.download().unwrap();
            if let Some(i) = got.iter().position(|&v| v != 0) {
                panic!(
                    "round {round}: fresh[{i}] = {:#x} (deferred was {in_flight})",
                    got[i]
                );
            }
        }
        gpu.trim().unwrap();
        let s = gpu.stats();
        assert_eq!((s.buffers, s.deferred, s.allocator_used_bytes), (0, 0, 0));
        assert_clean(&gpu);
    }
}

#[test]
fn tiny_staging_buffer_size_still_transfers() {
    for size in [0u64, 1, 4095] {
        let gpu = gpu_with(DeviceOptions {
            direct_host_access: false,
            staging_buffer_size: size,
            ..Default::default()
        });
        let mut rng = Rng::new(size + 10);
        let host: Vec<u8> = random(&mut rng, 3 * 4096 + 17);
        let b = gpu.upload(&host).unwrap();
        assert_same(
            &b.download().unwrap(),
            &host,
            &format!("staging size {size}"),
        );
        assert_same(
            &b.read_range(4000..9000).unwrap(),
            &host[4000..9000],
            "range",
        );
        assert_clean(&gpu);
    }
}

/// Blocking transfers through staging of more than one 32 MiB slot: the
/// host copies of each piece run on several threads (pieces of 16 MiB and
/// more); every byte arrives, into a new Vec, a reused slice and a range.
#[test]
fn large_staged_transfers_arrive_whole() {
    // Staging only, with the default 32 MiB staging buffers.
    let gpu = gpu_with(DeviceOptions {
        direct_host_access: false,
        ..Default::default()
    });
    let n = (80 << 20) / 4 + 3; // 80 MiB + 12 bytes: three pieces, a ragged end
    let data: Vec<u32> = (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let buf = gpu.upload(&data).unwrap();
    assert!(buf.download().unwrap() == data, "download changed the data");
    let mut into = vec![0u32; n];
    buf.download_into(&mut into).unwrap();
    assert!(into == data, "download_into changed the data");
    let mid = buf.read_range(5..(40 << 20) / 4 + 7).unwrap();
    assert!(
        mid[..] == data[5..(40 << 20) / 4 + 7],
        "read_range changed the data"
    );
    // A write that spans pieces, then read back whole.
    let patch: Vec<u32> = (0..(48 << 20) / 4).map(|i| !i).collect();
    buf.write(11, &patch).unwrap();
    let mut want = data.clone();
    want[11..11 + patch.len()].copy_from_slice(&patch);
    assert!(
        buf.download().unwrap() == want,
        "write then download changed the data"
    );
    assert_clean(&gpu);
}

#[test]
fn peak_device_memory_is_the_high_water_mark_of_live_buffers() {
    let gpu = gpu();
    gpu.wait_idle().unwrap();
    gpu.trim().unwrap();
    let base = gpu.stats().device_bytes;
    gpu.reset_peak_memory();
    assert_eq!(
        gpu.stats().peak_device_bytes,
        base,
        "a reset starts at the use now"
    );
    let mib = 1 << 20;
    let a = gpu.alloc::<u8>(3 * mib).unwrap();
    let b = gpu.alloc::<u8>(5 * mib).unwrap();
    let both = gpu.stats();
    assert!(
        both.device_bytes >= base + 8 * mib as u64,
        "two live buffers of 8 MiB: {both:?}"
    );
    drop(a);
    drop(b);
    gpu.wait_idle().unwrap();
    gpu.trim().unwrap();
    let c = gpu.alloc::<u8>(mib).unwrap();
    let s = gpu.stats();
    // The 8 MiB pair is gone, the peak still holds it.
    assert!(s.device_bytes < both.device_bytes, "{s:?}");
    assert_eq!(s.peak_device_bytes, both.device_bytes, "{s:?}");
    gpu.reset_peak_memory();
    assert_eq!(gpu.stats().peak_device_bytes, s.device_bytes);
    drop(c);
    gpu.wait_idle().unwrap();
    gpu.trim().unwrap();
    assert_eq!(gpu.stats().device_bytes, base, "every byte given back");
}
