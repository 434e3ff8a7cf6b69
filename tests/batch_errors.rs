//! Batches at the adapter's limits: launches that spread past a row of
//! workgroups (the `run_spread` opt-in), and every typed error a bad dispatch or transfer gets
//! (binding counts, push-constant sizes, empty and oversized grids,
//! misaligned slices, ranges over the binding limits, foreign buffers and
//! kernels), with the batch staying usable after each. Limits come from
//! the adapter's `AdapterInfo`; a check the adapter cannot make prints
//! `skipped: <reason>`.

mod common;
use common::glsl::{bytes, saxpy_pc, ADD, INC, SAXPY, UNIFORM};
use common::*;

use vkcompute::{Batch, Buffer, Device, Error, GpuBuf, Kernel};

/// Writes data[i] = i + 1 for i < n, on a u32 view.
const MARK: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer D { uint data[]; };
layout(push_constant) uniform P { uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) data[i] = i + 1u;
}
"#;

/// Writes each invocation's linear index (the formula `Batch::run_spread` documents).
const INDEX: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) writeonly buffer O { uint o[]; };
layout(set = 0, binding = 1) buffer M { uint meta[]; };
layout(push_constant) uniform P { uint n; };
void main() {
    uint idx = gl_GlobalInvocationID.x
             + gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x)
             + gl_GlobalInvocationID.z * (gl_NumWorkGroups.x * gl_WorkGroupSize.x * gl_NumWorkGroups.y);
    if (idx == 0u) {
        meta[0] = gl_NumWorkGroups.x;
        meta[1] = gl_NumWorkGroups.y;
        meta[2] = gl_NumWorkGroups.z;
    }
    if (idx >= n) return;
    o[idx] = idx;
}
"#;

/// Sets bit `idx` of `bits` for each invocation's linear index (the
/// formula `Batch::run_spread` documents) below n; meta[0..3] = the grid, meta[3]
/// counts indices reached twice.
const MARK_BIT: &str = r#"
#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer Bits { uint bits[]; };
layout(set = 0, binding = 1) buffer M { uint meta[]; };
layout(push_constant) uniform P { uint n; };
void main() {
    uint idx = gl_GlobalInvocationID.x
             + gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x)
             + gl_GlobalInvocationID.z * (gl_NumWorkGroups.x * gl_WorkGroupSize.x * gl_NumWorkGroups.y);
    if (idx == 0u) {
        meta[0] = gl_NumWorkGroups.x;
        meta[1] = gl_NumWorkGroups.y;
        meta[2] = gl_NumWorkGroups.z;
    }
    if (idx >= n) return;
    uint bit = 1u << (idx & 31u);
    if ((atomicOr(bits[idx >> 5u], bit) & bit) != 0u) atomicAdd(meta[3], 1u);
}
"#;

/// The largest buffer the adapter lets one allocation hold.
fn largest_buffer(gpu: &Device) -> u64 {
    gpu.info()
        .max_memory_allocation_size
        .min(gpu.info().max_buffer_size)
}

/// The largest buffer one storage binding of the adapter may cover.
fn largest_binding(gpu: &Device) -> u64 {
    let info = gpu.info();
    info.max_storage_buffer_range
        .min(info.max_memory_allocation_size)
        .min(info.max_buffer_size)
}

/// Checks a grid `Batch::run` chose for `n` invocations of `local` each:
/// within the limits, spread into y, covering `n`.
fn assert_spread(gpu: &Device, m: &[u32], n: u32, local: u64) {
    let limit = gpu.info().max_workgroup_count;
    assert!(
        m[0] <= limit[0] && m[1] <= limit[1] && m[2] <= limit[2],
        "{m:?} over {limit:?}"
    );
    assert!(m[1] > 1, "the grid did not spread into y: {m:?}");
    let total = u64::from(m[0]) * u64::from(m[1]) * u64::from(m[2]) * local;
    assert!(total >= u64::from(n), "{m:?} covers {total} < {n}");
}

#[test]
fn large_launch_spreads_into_y() {
    let gpu = gpu();
    let max_x = u64::from(gpu.info().max_workgroup_count[0]);
    let largest = largest_binding(&gpu);

    // Every invocation writes its index: 1000 invocations past a full row
    // of workgroups of 64 (65535 * 64 + 1000 on lavapipe).
    let n = max_x * 64 + 1000;
    if n > u64::from(u32::MAX) {
        skipped(format_args!(
            "an index per invocation past {max_x} workgroups of 64 in x: {n} invocations \
             are over u32::MAX (the bitmap check below spreads with workgroups of 1)"
        ));
    } else if (n + 64) * 4 > largest {
        skipped(format_args!(
            "an index per invocation past {max_x} workgroups of 64 in x: {} bytes are over \
             the largest binding ({largest} bytes)",
            (n + 64) * 4
        ));
    } else {
        let n = n as u32;
        let k = gpu.kernel_glsl(INDEX).unwrap();
        let out = gpu.alloc::<u32>(n as usize + 64).unwrap();
        let meta = gpu.alloc::<u32>(3).unwrap();
        let mut b = gpu.batch().unwrap();
        b.fill(&out, 0xffff_ffff).unwrap();
        b.barrier();
        b.run_spread(&k, &[&out, &meta], n, &bytes(&[n])).unwrap();
        b.submit().unwrap();
        assert_spread(&gpu, &meta.download().unwrap(), n, 64);
        let o = out.download().unwrap();
        for (i, v) in o[..n as usize].iter().enumerate() {
            assert_eq!(*v, i as u32, "element {i}");
        }
        assert!(
            o[n as usize..].iter().all(|&v| v == 0xffff_ffff),
            "wrote past n"
        );
    }

    // Workgroups of one invocation spread into y past max_x invocations
    // (2^31 - 1 on NVIDIA, 65535 on lavapipe): each sets its bit, once.
    let n = max_x + 1000;
    let words = n.div_ceil(32) + 1;
    if n > u64::from(u32::MAX) {
        skipped(format_args!(
            "spreading into y: maxComputeWorkGroupCount[0] = {max_x} leaves no u32 \
             invocation count that needs a second row"
        ));
    } else if words * 4 > largest {
        skipped(format_args!(
            "spreading into y: a bitmap of {n} invocations ({} bytes) is over the largest \
             binding ({largest} bytes)",
            words * 4
        ));
    } else {
        let n = n as u32;
        let k = gpu.kernel_glsl(MARK_BIT).unwrap();
        let bits = gpu.alloc::<u32>(words as usize).unwrap();
        let meta = gpu.alloc::<u32>(4).unwrap();
        let t = std::time::Instant::now();
        let mut b = gpu.batch().unwrap();
        b.run_spread(&k, &[&bits, &meta], n, &bytes(&[n])).unwrap();
        b.submit().unwrap();
        println!("{n} invocations of one in {:?}", t.elapsed());
        let m = meta.download().unwrap();
        assert_spread(&gpu, &m[..3], n, 1);
        assert_eq!(m[3], 0, "invocations sharing an index");
        let got = bits.download().unwrap();
        let full = (n / 32) as usize;
        if let Some(w) = got[..full].iter().position(|&w| w != u32::MAX) {
            panic!("indices {}.. missed: word {w} is {:#x}", w * 32, got[w]);
        }
        let partial = (1u32 << (n % 32)) - 1;
        assert_eq!(got[full], partial, "the last word (n = {n})");
        assert!(got[full + 1..].iter().all(|&w| w == 0), "marked past n");
    }
    assert_clean(&gpu);
}

/// Records one good dispatch (c += 1) after a barrier.
fn good(b: &mut Batch, inc: &Kernel, c: &Buffer<u32>) {
    b.barrier();
    b.run(inc, &[c], c.len() as u32).unwrap();
}

#[test]
fn bad_dispatches_are_typed_errors_and_the_batch_stays_usable() {
    let gpu = gpu();
    let saxpy = gpu.kernel_glsl(SAXPY).unwrap();
    let add = gpu.kernel_glsl(ADD).unwrap();
    let inc = gpu.kernel_glsl(INC).unwrap();
    let x = gpu.upload(&[1.0f32; 100]).unwrap();
    let y = gpu.upload(&[2.0f32; 100]).unwrap();
    let counter = gpu.alloc::<u32>(10).unwrap();
    let pc = saxpy_pc(1.0, 100);
    let mut b = gpu.batch().unwrap();
    let mut goods = 0;

    let one: [&dyn GpuBuf; 1] = [&x];
    let three: [&dyn GpuBuf; 3] = [&x, &y, &y];
    for bufs in [&one[..], &three[..], &[][..]] {
        match b.run_with_push_constants(&saxpy, bufs, 100, &pc) {
            Err(Error::BindingCount {
                expected: 2, got, ..
            }) => assert_eq!(got, bufs.len()),
            other => panic!("expected BindingCount, got {other:?}"),
        }
        good(&mut b, &inc, &counter);
        goods += 1;
    }
    for len in [4usize, 12, 0] {
        let r = b.run_with_push_constants(&saxpy, &[&x, &y], 100, &vec![0u8; len]);
        match r {
            Err(Error::PushConstantSize {
                expected: 8, got, ..
            }) => assert_eq!(got, len),
            other => panic!("expected PushConstantSize, got {other:?}"),
        }
        good(&mut b, &inc, &counter);
        goods += 1;
    }
    assert!(matches!(
        b.run(&saxpy, &[&x, &y], 100),
        Err(Error::PushConstantSize {
            expected: 8,
            got: 0,
            ..
        })
    ));
    assert!(matches!(
        b.run_configured(&add, &[&x, &y, &y], [1, 1, 1], Some(&[0u8; 4])),
        Err(Error::PushConstantSize {
            expected: 0,
            got: 4,
            ..
        })
    ));
    good(&mut b, &inc, &counter);
    goods += 1;

    assert!(matches!(
        b.run(&add, &[&x, &y, &y], 0),
        Err(Error::EmptyDispatch { .. })
    ));
    assert!(matches!(
        b.run_with_push_constants(&saxpy, &[&x, &y], 0, &pc),
        Err(Error::EmptyDispatch { .. })
    ));
    for grid in [[0, 1, 1], [1, 0, 1], [1, 1, 0]] {
        match b.run_configured(&add, &[&x, &y, &y], grid, None) {
            Err(Error::EmptyDispatch { workgroups, .. }) => assert_eq!(workgroups, grid),
            other => panic!("expected EmptyDispatch for {grid:?}, got {other:?}"),
        }
    }
    good(&mut b, &inc, &counter);
    goods += 1;
    // One workgroup over maxComputeWorkGroupCount in each dimension
    // (65536 on lavapipe; 2^31 in x on NVIDIA).
    let limit = gpu.info().max_workgroup_count;
    for dim in 0..3 {
        let Some(over) = limit[dim].checked_add(1) else {
            skipped(format_args!(
                "a grid over maxComputeWorkGroupCount[{dim}] = {} cannot be expressed in u32",
                limit[dim]
            ));
            continue;
        };
        let mut grid = [1u32; 3];
        grid[dim] = over;
        match b.run_configured(&add, &[&x, &y, &y], grid, None) {
            Err(Error::WorkgroupLimit {
                requested,
                limit: l,
                ..
            }) => {
                assert_eq!(requested, grid.map(u64::from));
                assert_eq!(l, limit);
            }
            other => panic!("expected WorkgroupLimit for {grid:?}, got {other:?}"),
        }
        good(&mut b, &inc, &counter);
        goods += 1;
    }
    // The largest legal grids are accepted (recorded, not run: the batch is dropped).
    {
        let mut spare = gpu.batch().unwrap();
        spare
            .run_configured(&add, &[&x, &y, &y], [limit[0], 1, 1], None)
            .unwrap();
        spare.barrier();
        spare
            .run_configured(&add, &[&x, &y, &y], [1, limit[1], limit[2]], None)
            .unwrap();
    }

    // Slice offsets must be multiples of minStorageBufferOffsetAlignment
    // (16 bytes on lavapipe): an offset of 1 f32 (4 bytes) is misaligned
    // wherever the alignment is over 4, one of 2 f32 where it is over 8.
    let align = gpu.info().min_storage_buffer_offset_alignment as usize;
    if align > 4 {
        let misaligned = x.slice(1..50).unwrap();
        match b.run_with_push_constants(&saxpy, &[&misaligned, &y], 49, &pc) {
            Err(Error::BindingMismatch {
                binding: 0, detail, ..
            }) => assert!(detail.contains("alignment"), "{detail}"),
            other => panic!("expected BindingMismatch, got {other:?}"),
        }
        let off = if align > 8 { 2 } else { 1 };
        let misaligned = y.slice(off..50).unwrap();
        assert!(matches!(
            b.run_with_push_constants(&saxpy, &[&x, &misaligned], (50 - off) as u32, &pc),
            Err(Error::BindingMismatch { binding: 1, .. })
        ));
        good(&mut b, &inc, &counter);
        goods += 1;
    } else {
        skipped(format_args!(
            "misaligned f32 slices: minStorageBufferOffsetAlignment is {align} bytes"
        ));
    }
    // The first f32 at a multiple of the alignment (4 elements = 16 bytes
    // on lavapipe): aligned, accepted.
    let start = (align / 4).max(1);
    let rest = (100 - start) as u32;
    let aligned = y.slice(start..100).unwrap();
    b.barrier();
    b.run_with_push_constants(&saxpy, &[&x, &aligned], rest, &saxpy_pc(1.0, rest))
        .unwrap();

    // Transfers.
    let short = gpu.alloc::<f32>(99).unwrap();
    match b.copy(&x, &short) {
        Err(Error::BadTransfer {
            what: "copy",
            detail,
        }) => {
            assert!(detail.contains("400") && detail.contains("396"), "{detail}")
        }
        other => panic!("expected BadTransfer, got {other:?}"),
    }
    good(&mut b, &inc, &counter);
    goods += 1;
    let bytes_buf = gpu.alloc::<u8>(64).unwrap();
    for (s, d) in [(0..32, 16..48), (16..48, 0..32), (0..32, 0..32)] {
        let r = b.copy(
            &bytes_buf.slice(s.clone()).unwrap(),
            &bytes_buf.slice(d.clone()).unwrap(),
        );
        assert!(
            matches!(r, Err(Error::BadTransfer { what: "copy", .. })),
            "{s:?} -> {d:?}: {r:?}"
        );
        good(&mut b, &inc, &counter);
        goods += 1;
    }
    assert!(matches!(
        b.copy(&x, &x),
        Err(Error::BadTransfer { what: "copy", .. })
    ));
    for range in [1..9, 2..6, 0..3, 4..7] {
        let r = b.fill(&bytes_buf.slice(range.clone()).unwrap(), 0);
        assert!(
            matches!(r, Err(Error::BadTransfer { what: "fill", .. })),
            "fill {range:?}: {r:?}"
        );
        good(&mut b, &inc, &counter);
        goods += 1;
    }
    let halves = gpu.alloc::<u16>(16).unwrap();
    assert!(matches!(
        b.fill(&halves.slice(1..5).unwrap(), 0),
        Err(Error::BadTransfer { .. })
    ));
    b.barrier();
    b.fill(&halves.slice(2..6).unwrap(), 0x0007_0007).unwrap();
    good(&mut b, &inc, &counter);
    goods += 1;

    assert_eq!(b.len(), goods as u64 + 2);
    b.submit().unwrap();
    assert_eq!(counter.download().unwrap(), vec![goods; 10]);
    let mut want_y = vec![2.0f32; 100];
    for v in &mut want_y[start..] {
        *v += 1.0;
    }
    assert_eq!(y.download().unwrap(), want_y);
    let mut want_h = vec![0u16; 16];
    want_h[2..6].fill(7);
    assert_eq!(halves.download().unwrap(), want_h);
    assert_clean(&gpu);
}

#[test]
fn bindings_over_the_range_limits() {
    let gpu = gpu();
    let range = gpu.info().max_storage_buffer_range;
    if is_lavapipe(&gpu) {
        assert_eq!(range, 128 << 20, "lavapipe's maxStorageBufferRange");
    } else {
        skipped(format_args!(
            "lavapipe's 128 MiB maxStorageBufferRange: the adapter is {:?} ({range} bytes)",
            gpu.info().name
        ));
    }
    let largest = largest_buffer(&gpu);
    if range.saturating_add(4) <= largest {
        storage_range_checks(&gpu, range);
    } else {
        skipped(format_args!(
            "a storage binding over maxStorageBufferRange ({range} bytes) needs a buffer \
             over maxMemoryAllocationSize/maxBufferSize ({largest} bytes)"
        ));
    }

    // Uniform bindings are held to maxUniformBufferRange.
    let uni = gpu.kernel_glsl(UNIFORM).unwrap();
    let ulimit = gpu.info().max_uniform_buffer_range;
    let out = gpu.alloc::<f32>(1).unwrap();
    let mut b = gpu.batch().unwrap();
    if ulimit.saturating_add(4) <= largest {
        let too_big = gpu.alloc::<f32>(ulimit as usize / 4 + 1).unwrap();
        match b.run(&uni, &[&too_big, &out], 1) {
            Err(Error::BindingMismatch { detail, .. }) => {
                assert!(detail.contains("maxUniformBufferRange"), "{detail}")
            }
            other => panic!("expected BindingMismatch, got {other:?}"),
        }
    } else {
        skipped(format_args!(
            "a uniform binding over maxUniformBufferRange ({ulimit} bytes) needs a buffer \
             over maxMemoryAllocationSize/maxBufferSize ({largest} bytes)"
        ));
    }
    let mut u = vec![0.0f32; 64];
    u[13] = 42.0;
    let ok = gpu.upload(&u).unwrap();
    b.run(&uni, &[&ok, &out], 1).unwrap();
    b.submit().unwrap();
    assert_eq!(out.download().unwrap(), vec![42.0]);
    assert_clean(&gpu);
}

/// Storage bindings of a buffer 4 bytes over maxStorageBufferRange: the
/// whole buffer and a slice one byte over are refused, slices of at most
/// the limit bind.
fn storage_range_checks(gpu: &Device, range: u64) {
    let mark = gpu.kernel_glsl(MARK).unwrap();
    let align = gpu.info().min_storage_buffer_offset_alignment as usize;
    let range = range as usize;
    let big = match gpu.alloc::<u8>(range + 4) {
        Ok(b) => b,
        Err(Error::OutOfMemory { detail, .. }) => {
            skipped(format_args!(
                "a buffer of maxStorageBufferRange + 4 bytes: out of memory ({detail})"
            ));
            return;
        }
        Err(e) => panic!("allocating {} bytes: {e:?}", range + 4),
    };
    let mut b = gpu.batch().unwrap();
    match b.run_with_push_constants(&mark, &[&big], 16, &bytes(&[16])) {
        Err(Error::BindingMismatch {
            binding: 0, detail, ..
        }) => assert!(detail.contains("maxStorageBufferRange"), "{detail}"),
        other => panic!("expected BindingMismatch, got {other:?}"),
    }
    // Slices of at most the limit bind, at offset 0 and at an aligned offset.
    let head = big.slice(0..range).unwrap();
    b.run_with_push_constants(&mark, &[&head], 16, &bytes(&[16]))
        .unwrap();
    // One byte over the limit is still too much.
    let over = big.slice(0..range + 1).unwrap();
    assert!(matches!(
        b.run_with_push_constants(&mark, &[&over], 16, &bytes(&[16])),
        Err(Error::BindingMismatch { .. })
    ));
    // Within the limit at an offset of 4 bytes: misaligned (alignment 16 on lavapipe).
    if align > 4 {
        let shifted = big.slice(4..).unwrap();
        match b.run_with_push_constants(&mark, &[&shifted], 16, &bytes(&[16])) {
            Err(Error::BindingMismatch { detail, .. }) => {
                assert!(detail.contains("alignment"), "{detail}")
            }
            other => panic!("expected BindingMismatch, got {other:?}"),
        }
    } else {
        skipped(format_args!(
            "a misaligned 4-byte offset: minStorageBufferOffsetAlignment is {align} bytes"
        ));
    }
    // An aligned offset (16 bytes on lavapipe) leaves a slice within the limit.
    let tail_at = align.max(16);
    let tail = big.slice(tail_at..).unwrap();
    b.barrier();
    b.run_with_push_constants(&mark, &[&tail], 2, &bytes(&[2]))
        .unwrap();
    b.submit().unwrap();
    let len = 72.max(tail_at + 16);
    let got = big.read_range(0..len).unwrap();
    let mut want = vec![0u8; len];
    for i in 0..16u32 {
        want[i as usize * 4..i as usize * 4 + 4].copy_from_slice(&(i + 1).to_le_bytes());
    }
    want[tail_at..tail_at + 4].copy_from_slice(&1u32.to_le_bytes());
    want[tail_at + 4..tail_at + 8].copy_from_slice(&2u32.to_le_bytes());
    assert_eq!(got, want);
}

#[test]
fn foreign_buffers_and_kernels() {
    let gpu = gpu();
    let other = common::gpu();
    let add = gpu.kernel_glsl(ADD).unwrap();
    let inc = gpu.kernel_glsl(INC).unwrap();
    let foreign_add = other.kernel_glsl(ADD).unwrap();
    let x = gpu.upload(&[1.0f32; 64]).unwrap();
    let z = gpu.alloc::<f32>(64).unwrap();
    let fx = other.upload(&[5.0f32; 64]).unwrap();
    let counter = gpu.alloc::<u32>(4).unwrap();
    let mut b = gpu.batch().unwrap();

    match b.run(&foreign_add, &[&x, &x, &z], 64) {
        Err(Error::ForeignKernel { kernel }) => assert_eq!(kernel, foreign_add.label()),
        other => panic!("expected ForeignKernel, got {other:?}"),
    }
    good(&mut b, &inc, &counter);
    for (bufs, binding) in [
        ([&fx as &dyn GpuBuf, &x, &z], 0),
        ([&x as &dyn GpuBuf, &fx, &z], 1),
        ([&x as &dyn GpuBuf, &x, &fx], 2),
    ] {
        match b.run(&add, &bufs, 64) {
            Err(Error::ForeignBuffer { binding: got, .. }) => assert_eq!(got, binding),
            other => panic!("expected ForeignBuffer, got {other:?}"),
        }
        good(&mut b, &inc, &counter);
    }
    let fslice = fx.slice(16..32).unwrap();
    let r = b.run(
        &add,
        &[&x.slice(0..16).unwrap(), &fslice, &z.slice(0..16).unwrap()],
        16,
    );
    assert!(
        matches!(r, Err(Error::ForeignBuffer { binding: 1, .. })),
        "{r:?}"
    );
    assert!(matches!(b.copy(&fx, &z), Err(Error::ForeignBuffer { .. })));
    assert!(matches!(b.copy(&x, &fx), Err(Error::ForeignBuffer { .. })));
    assert!(matches!(b.fill(&fx, 0), Err(Error::ForeignBuffer { .. })));
    good(&mut b, &inc, &counter);
    b.barrier();
    b.run(&add, &[&x, &x, &z], 64).unwrap();
    b.submit().unwrap();
    assert_eq!(counter.download().unwrap(), vec![5; 4]);
    assert_eq!(z.download().unwrap(), vec![2.0; 64]);

    // The other device is untouched and works on its own.
    let fz = other.alloc::<f32>(64).unwrap();
    let mut ob = other.batch().unwrap();
    ob.run(&foreign_add, &[&fx, &fx, &fz], 64).unwrap();
    ob.submit().unwrap();
    assert_eq!(fz.download().unwrap(), vec![10.0; 64]);
    assert_clean(&other);
    assert_clean(&gpu);
}

#[test]
fn a_refused_binding_does_not_leave_stale_descriptors_bound() {
    // Dispatch 1 binds (x, y, z). Dispatch 2, (x2, y, foreign), is refused
    // at its third binding after its first two were checked: dispatch 3,
    // (x2, y, z), must bind x2 and not take the set for "already bound".
    for push in [true, false] {
        let gpu = gpu_with(vkcompute::DeviceOptions {
            push_descriptors: Some(push),
            ..Default::default()
        });
        let other = gpu_with(Default::default());
        let add = gpu.kernel_glsl(ADD).unwrap();
        let x = gpu.upload(&[1.0f32, 2.0]).unwrap();
        let x2 = gpu.upload(&[100.0f32, 200.0]).unwrap();
        let y = gpu.upload(&[10.0f32, 20.0]).unwrap();
        let z = gpu.alloc::<f32>(2).unwrap();
        let foreign = other.alloc::<f32>(2).unwrap();
        let mut b = gpu.batch().unwrap();
        b.run(&add, &[&x, &y, &z], 2).unwrap();
        b.barrier();
        let refused = b.run(&add, &[&x2, &y, &foreign], 2);
        assert!(
            matches!(refused, Err(Error::ForeignBuffer { binding: 2, .. })),
            "{refused:?}"
        );
        b.run(&add, &[&x2, &y, &z], 2).unwrap();
        b.submit().unwrap();
        assert_eq!(
            z.download().unwrap(),
            vec![110.0, 220.0],
            "push descriptors: {push}"
        );
        assert_clean(&gpu);
        assert_clean(&other);
    }
}
