//! Batches that stay correct at their edges: host writes and reads ordered
//! as recorded whatever the chunking, poisoning after a half-recorded
//! command, dropping a batch with chunks in flight, x-only launches past a
//! row of workgroups, push constants at the adapter's limit, typed push
//! constants, binding lists and raw handles.

mod common;
use common::glsl::{bytes, ADD, INC};
use common::*;

use vkcompute::{bindings, BatchOptions, Buffer, Device, DeviceOptions, Error, GpuBuf, Stats};

/// log[row * n * 2 + i] = small[i], log[row * n * 2 + n + i] = big[i * 312].
const LOG_ROW: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer S { uint small_[]; };
layout(set = 0, binding = 1) readonly buffer B { uint big[]; };
layout(set = 0, binding = 2) buffer L { uint log_[]; };
layout(push_constant) uniform P { uint row; uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= n) return;
    log_[row * n * 2u + i] = small_[i];
    log_[row * n * 2u + n + i] = big[i * 312u];
}
"#;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Row {
    row: u32,
    n: u32,
}

const N: usize = 64;
/// Over 64 KiB: written through a staging buffer, not inline.
const BIG: usize = 20_000;
const STEPS: u32 = 24;

#[test]
fn host_writes_in_a_batch_are_seen_by_exactly_the_later_commands() {
    let gpu = gpu();
    let k = gpu.kernel_glsl(LOG_ROW).unwrap();
    let options = [
        (
            "first_chunk = 1",
            BatchOptions {
                first_chunk: 1,
                max_chunk: 1,
                ..Default::default()
            },
        ),
        (
            "first_chunk = 2",
            BatchOptions {
                first_chunk: 2,
                max_chunk: 4,
                ..Default::default()
            },
        ),
        ("default", BatchOptions::default()),
        ("single_submit", BatchOptions::single_submit()),
    ];
    for (name, opts) in options {
        let small = gpu.alloc::<u32>(N).unwrap();
        let big = gpu.alloc::<u32>(BIG).unwrap();
        let log = gpu.alloc::<u32>(STEPS as usize * N * 2).unwrap();
        // A u16 buffer written at an odd element: unaligned, staged.
        let odd = gpu.alloc::<u16>(9).unwrap();
        let mut b = gpu.batch_with(opts).unwrap();
        let mut reads = Vec::new();
        for j in 0..STEPS {
            b.write(&small, 0, &[j + 1; N]).unwrap();
            b.write(&big, 0, &vec![j + 1; BIG]).unwrap();
            b.write(&odd, 1 + (j as usize % 8), &[j as u16 + 1])
                .unwrap();
            b.run_with(
                &k,
                &[&small, &big, &log],
                N as u32,
                &Row {
                    row: j,
                    n: N as u32,
                },
            )
            .unwrap();
            // Read between this step's kernel and the next step's write.
            reads.push(b.read_range(&big, 300..303).unwrap());
            // A host write that must not reach this step's kernel.
            b.write(&small, 0, &[0xdead; N]).unwrap();
        }
        let whole = b.read(&small).unwrap();
        if name == "single_submit" {
            assert!(!whole.is_submitted(), "single_submit submitted early");
        }
        b.submit().unwrap();
        let l = log.download().unwrap();
        for j in 0..STEPS as usize {
            let row = &l[j * N * 2..(j + 1) * N * 2];
            assert!(
                row.iter().all(|&v| v == j as u32 + 1),
                "{name}: step {j} saw {:?}",
                &row[..4]
            );
        }
        for (j, r) in reads.into_iter().enumerate() {
            assert_eq!(r.wait().unwrap(), vec![j as u32 + 1; 3], "{name}: read {j}");
        }
        assert_eq!(whole.wait().unwrap(), vec![0xdead; N], "{name}");
        let o = odd.download().unwrap();
        // Element 1 + (j % 8) holds the last j written there.
        for (e, v) in o.iter().enumerate().skip(1) {
            let last = (0..STEPS)
                .filter(|j| 1 + (*j as usize % 8) == e)
                .max()
                .unwrap();
            assert_eq!(*v, last as u16 + 1, "{name}: u16 element {e}");
        }
    }
    assert_clean(&gpu);
}

#[test]
fn a_batch_upload_is_seen_by_later_commands_in_any_chunk() {
    let gpu = gpu();
    let inc = gpu.kernel_glsl(INC).unwrap();
    for first_chunk in [1, 0] {
        let mut b = gpu
            .batch_with(BatchOptions {
                first_chunk,
                max_chunk: 1,
                ..Default::default()
            })
            .unwrap();
        let up = b.upload(&(0..1000u32).collect::<Vec<_>>()).unwrap();
        b.run(&inc, &[&up], 1000).unwrap();
        let r = b.read(&up).unwrap();
        b.run(&inc, &[&up], 1000).unwrap();
        b.submit().unwrap();
        let want: Vec<u32> = (1..1001).collect();
        assert_eq!(r.wait().unwrap(), want, "first_chunk {first_chunk}");
        let want: Vec<u32> = (2..1002).collect();
        assert_eq!(up.download().unwrap(), want, "first_chunk {first_chunk}");
    }
    let mut b = gpu.batch().unwrap();
    assert!(matches!(
        b.upload::<u32>(&[]),
        Err(Error::ZeroLength { .. })
    ));
    drop(b);
    assert_clean(&gpu);
}

#[test]
fn batch_reads_and_writes_are_checked() {
    let gpu = gpu();
    let other = gpu_with(Default::default());
    let buf = gpu.alloc::<u32>(8).unwrap();
    let foreign = other.alloc::<u32>(8).unwrap();
    let mut b = gpu.batch().unwrap();
    assert!(matches!(
        b.write(&buf, 6, &[1, 2, 3]),
        Err(Error::OutOfRange {
            what: "Batch::write",
            start: 6,
            end: 9,
            len: 8
        })
    ));
    assert!(matches!(
        b.write(&foreign, 0, &[1]),
        Err(Error::ForeignBuffer { .. })
    ));
    assert!(matches!(b.read(&foreign), Err(Error::ForeignBuffer { .. })));
    assert!(matches!(
        b.read_range(&buf, 4..9),
        Err(Error::OutOfRange { .. })
    ));
    // A read never submitted says so.
    let r = b.read(&buf).unwrap();
    drop(b);
    assert!(matches!(r.wait(), Err(Error::NotSubmitted { .. })));
    assert_clean(&gpu);
    assert_clean(&other);
}

/// Counts of what a workload could leak.
fn held(s: &Stats) -> (i64, u64, i64, i64) {
    (s.buffers, s.buffer_bytes, s.allocations, s.deferred)
}

#[test]
fn a_failed_descriptor_bind_poisons_the_batch() {
    for push in [true, false] {
        let gpu = gpu_with(DeviceOptions {
            push_descriptors: Some(push),
            ..Default::default()
        });
        let add = gpu.kernel_glsl(ADD).unwrap();
        let inc = gpu.kernel_glsl(INC).unwrap();
        let x = gpu.upload(&[1.0f32, 2.0]).unwrap();
        let x2 = gpu.upload(&[100.0f32, 200.0]).unwrap();
        let y = gpu.upload(&[10.0f32, 20.0]).unwrap();
        let z = gpu.alloc::<f32>(2).unwrap();
        let c = gpu.alloc::<u32>(2).unwrap();
        let mut b = gpu.batch().unwrap();
        b.run(&add, &[&x, &y, &z], 2).unwrap();
        b.barrier();
        b.inject_bind_failure(0);
        let first = b.run(&add, &[&x2, &y, &z], 2).map(|_| ()).unwrap_err();
        assert!(
            matches!(first, Error::Vulkan { result, .. }
                if result == vkcompute::ash::vk::Result::ERROR_OUT_OF_POOL_MEMORY),
            "{first:?}"
        );
        assert!(b.poisoned().is_some());
        // The state says (x, y, z) is bound; a poisoned batch must not
        // record against it, nor anything else.
        let again = b.run(&add, &[&x, &y, &z], 2).map(|_| ()).unwrap_err();
        assert_eq!(again.to_string(), first.to_string());
        let copy = b.copy(&x, &y).map(|_| ()).unwrap_err();
        assert_eq!(copy.to_string(), first.to_string());
        assert!(b.write(&c, 0, &[5]).is_err() && b.read(&c).is_err());
        let submit = b.submit().unwrap_err();
        assert_eq!(
            submit.to_string(),
            first.to_string(),
            "push descriptors: {push}"
        );
        // Nothing of the poisoned chunk ran.
        assert_eq!(z.download().unwrap(), vec![0.0, 0.0]);
        // The device is fine: a new batch works.
        let mut b = gpu.batch().unwrap();
        b.run(&inc, &[&c], 2).unwrap();
        b.submit().unwrap();
        assert_eq!(c.download().unwrap(), vec![1, 1]);
        assert_clean(&gpu);
    }
}

#[test]
fn a_copy_whose_second_piece_fails_poisons_the_batch() {
    let gpu = gpu();
    let inc = gpu.kernel_glsl(INC).unwrap();
    let c = gpu.alloc::<u32>(4).unwrap();
    // One piece: its only bind fails.
    let src = gpu.alloc::<u8>(1 << 20).unwrap();
    let dst = gpu.alloc::<u8>(1 << 20).unwrap();
    let mut b = gpu.batch().unwrap();
    b.run(&inc, &[&c], 4).unwrap();
    b.barrier();
    b.inject_bind_failure(0);
    let e = b.copy(&src, &dst).map(|_| ()).unwrap_err();
    assert!(matches!(e, Error::Vulkan { .. }), "{e:?}");
    assert!(b.run(&inc, &[&c], 4).is_err());
    drop(b);
    assert_eq!(c.download().unwrap(), vec![0; 4], "the poisoned chunk ran");

    // Two pieces (a copy over maxStorageBufferRange): the second fails
    // after the first was recorded with the copy pipeline bound.
    let range = gpu.info().max_storage_buffer_range;
    let size = range + 4096;
    let largest = gpu
        .info()
        .max_memory_allocation_size
        .min(gpu.info().max_buffer_size);
    if size > 256 << 20 || size > largest {
        skipped(format_args!(
            "a two-piece kernel copy needs buffers over maxStorageBufferRange ({range} bytes): \
             too large for this test"
        ));
    } else {
        let src = gpu.alloc::<u8>(size as usize).unwrap();
        let dst = gpu.alloc::<u8>(size as usize).unwrap();
        let mut b = gpu.batch().unwrap();
        b.run(&inc, &[&c], 4).unwrap();
        b.barrier();
        b.inject_bind_failure(1);
        let e = b.copy(&src, &dst).map(|_| ()).unwrap_err();
        assert!(matches!(e, Error::Vulkan { .. }), "{e:?}");
        assert_eq!(b.poisoned().map(|p| p.to_string()), Some(e.to_string()));
        // The copy pipeline is bound in the open chunk, not INC's: the
        // batch must refuse rather than dispatch INC's bindings on it.
        let again = b.run(&inc, &[&c], 4).map(|_| ()).unwrap_err();
        assert_eq!(again.to_string(), e.to_string());
        assert!(b.submit_async().is_err());
        assert_eq!(c.download().unwrap(), vec![0; 4], "the poisoned chunk ran");
    }
    let mut b = gpu.batch().unwrap();
    b.run(&inc, &[&c], 4).unwrap();
    b.submit().unwrap();
    assert_eq!(c.download().unwrap(), vec![1; 4]);
    assert_clean(&gpu);
}

#[test]
fn dropping_a_batch_with_submitted_chunks_completes_them_and_leaks_nothing() {
    let gpu = gpu();
    let inc = gpu.kernel_glsl(INC).unwrap();
    let keep = gpu.alloc::<u32>(256).unwrap();
    gpu.trim().unwrap();
    let before = gpu.stats();
    {
        let tmp = gpu.alloc::<u32>(1 << 16).unwrap();
        let mut b = gpu
            .batch_with(BatchOptions {
                first_chunk: 2,
                max_chunk: 2,
                ..Default::default()
            })
            .unwrap();
        for _ in 0..4 {
            b.run(&inc, &[&tmp], 1 << 16).unwrap();
            b.barrier();
            b.run(&inc, &[&keep], 256).unwrap();
            b.barrier();
        }
        // Eight commands submitted in chunks of two, then two more; the
        // third extra command stays in the open chunk.
        b.run(&inc, &[&keep], 256).unwrap();
        b.barrier();
        b.run(&inc, &[&keep], 256).unwrap();
        b.barrier();
        b.run(&inc, &[&keep], 256).unwrap();
        // The user's handle goes first; the submitted chunks still use it.
        drop(tmp);
        drop(b);
    }
    gpu.wait_idle().unwrap();
    // Five chunks of two were submitted (four from the loop, one of the
    // first two extra commands); the last command was discarded.
    assert_eq!(keep.download().unwrap(), vec![6; 256]);
    gpu.trim().unwrap();
    assert_eq!(held(&gpu.stats()), held(&before), "{:?}", gpu.stats());
    assert_clean(&gpu);
}

/// Adds 1 to data[i] for every i < n, atomically, so an index reached
/// twice shows as 2; x-only indexing.
const PLAIN_X: &str = r#"
#version 450
layout(local_size_x_id = 0) in;
layout(set = 0, binding = 0) buffer D { uint data[]; };
layout(push_constant) uniform P { uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) atomicAdd(data[i], 1u);
}
"#;

/// The same with the linear index `run_spread` documents.
const SPREAD: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer D { uint data[]; };
layout(push_constant) uniform P { uint n; };
void main() {
    uint idx = gl_GlobalInvocationID.x
             + gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x)
             + gl_GlobalInvocationID.z * (gl_NumWorkGroups.x * gl_WorkGroupSize.x * gl_NumWorkGroups.y);
    if (idx < n) atomicAdd(data[idx], 1u);
}
"#;

fn plain_x(gpu: &Device, local: u32) -> vkcompute::Kernel {
    vkcompute::Kernel::builder(gpu)
        .glsl(PLAIN_X)
        .local_size_x(local)
        .build()
        .unwrap()
}

/// First element of `data` (n elements, then a tail) not updated once.
fn check_once(data: &[u32], n: usize) {
    if let Some(i) = data[..n].iter().position(|&v| v != 1) {
        panic!("element {i} updated {} times", data[i]);
    }
    assert!(data[n..].iter().all(|&v| v == 0), "updated past n");
}

#[test]
fn x_only_kernels_are_split_along_x_never_spread_behind_their_back() {
    let gpu = gpu();
    let info = gpu.info().clone();
    let max_x = info.max_workgroup_count[0];
    let n: u32 = (16 << 20) + 5;
    let data = gpu.alloc::<u32>(n as usize + 64).unwrap();
    let pc = bytes(&[n]);

    // Workgroups of 64: past one row on lavapipe (65,535 x 64 < 16 Mi + 5).
    // `run` splits the launch along x (tests/batch_split.rs has more); a
    // kernel reading gl_NumWorkGroups cannot be split and is refused.
    let k64 = plain_x(&gpu, 64);
    let spread = gpu.kernel_glsl(SPREAD).unwrap();
    let mut b = gpu.batch().unwrap();
    if u64::from(n).div_ceil(64) > u64::from(max_x) {
        let e = b
            .run_with_push_constants(&spread, &[&data], n, &pc)
            .map(|_| ())
            .unwrap_err();
        assert!(
            matches!(&e, Error::LaunchTooLarge { invocations, local_size_x: 64, limit, reason, .. }
                if *invocations == u64::from(n) && *limit == max_x && reason.contains("gl_NumWorkGroups")),
            "{e:?}"
        );
        b.run_with_push_constants(&k64, &[&data], n, &pc).unwrap();
        b.submit().unwrap();
        check_once(&data.download().unwrap(), n as usize);
        // A spread-aware kernel opts in and covers every index once.
        let mut b = gpu.batch().unwrap();
        b.zero(&data).unwrap();
        b.barrier();
        b.run_spread(&spread, &[&data], n, &pc).unwrap();
        b.submit().unwrap();
        check_once(&data.download().unwrap(), n as usize);
    } else {
        skipped(format_args!(
            "16 Mi + 5 invocations of 64 fit in one row of {max_x} workgroups here"
        ));
        drop(b);
    }

    // The widest workgroup the adapter allows: 16 Mi + 5 in one row when it
    // fits (lavapipe: 1024 x 65,535), every element updated exactly once.
    let wide = info.max_workgroup_size[0].min(info.max_workgroup_invocations);
    if u64::from(n).div_ceil(u64::from(wide)) <= u64::from(max_x) {
        let k = plain_x(&gpu, wide);
        let mut b = gpu.batch().unwrap();
        b.zero(&data).unwrap();
        b.barrier();
        b.run_with_push_constants(&k, &[&data], n, &pc).unwrap();
        b.submit().unwrap();
        check_once(&data.download().unwrap(), n as usize);
    } else {
        skipped(format_args!(
            "16 Mi + 5 invocations need more than {max_x} workgroups of {wide}"
        ));
    }
    assert_clean(&gpu);
}

/// out[i] = the i-th push-constant word, for a block of the adapter's
/// largest size.
fn max_pc_kernel(words: u32) -> String {
    format!(
        r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) writeonly buffer O {{ uint o[]; }};
layout(push_constant) uniform P {{ uint w[{words}]; }};
void main() {{
    uint i = gl_GlobalInvocationID.x;
    if (i < {words}u) o[i] = w[i];
}}
"#
    )
}

#[test]
fn push_constants_reach_the_adapters_limit() {
    let gpu = gpu();
    let limit = gpu.info().max_push_constants_size;
    let words = limit / 4;
    let k = gpu.kernel_glsl(&max_pc_kernel(words)).unwrap();
    assert_eq!(k.push_constant_size(), limit);
    let out = gpu.alloc::<u32>(words as usize).unwrap();
    let values: Vec<u32> = (0..words).map(|i| i * 7 + 3).collect();
    let mut b = gpu.batch().unwrap();
    b.run_with_push_constants(&k, &[&out], words, &bytes(&values))
        .unwrap();
    b.submit().unwrap();
    assert_eq!(
        out.download().unwrap(),
        values,
        "{limit} bytes of push constants"
    );
    // One word more is refused when the kernel is made.
    match gpu.kernel_glsl(&max_pc_kernel(words + 1)) {
        Err(Error::KernelLimit { got, limit: l, .. }) => {
            assert_eq!((got, l), (u64::from(limit) + 4, u64::from(limit)))
        }
        other => panic!("expected KernelLimit, got {other:?}"),
    }
    assert_clean(&gpu);
}

#[test]
fn typed_push_constants_and_binding_lists() {
    let gpu = gpu();
    let k = gpu.kernel_glsl(LOG_ROW).unwrap();
    let small = gpu.upload(&[3u32; N]).unwrap();
    let big = gpu.upload(&vec![4u32; BIG]).unwrap();
    let log = gpu.alloc::<u32>(2 * N * 2).unwrap();
    // Built outside an array literal, mixing a Buffer and a slice.
    let whole = log.slice(..).unwrap();
    let list = bindings![&small, &big, &whole];
    // Built at run time.
    let v: Vec<&dyn GpuBuf> = (0..3)
        .map(|i| -> &dyn GpuBuf {
            match i {
                0 => &small,
                1 => &big,
                _ => &log,
            }
        })
        .collect();
    let mut b = gpu.batch().unwrap();
    b.run_with(
        &k,
        &list,
        N as u32,
        &Row {
            row: 0,
            n: N as u32,
        },
    )
    .unwrap();
    b.run_with(
        &k,
        &v,
        N as u32,
        &Row {
            row: 1,
            n: N as u32,
        },
    )
    .unwrap();
    // A wrongly sized parameter block is the usual typed error.
    assert!(matches!(
        b.run_with(&k, &list, N as u32, &7u32),
        Err(Error::PushConstantSize {
            expected: 8,
            got: 4,
            ..
        })
    ));
    b.submit().unwrap();
    let l = log.download().unwrap();
    for row in 0..2 {
        let r = &l[row * 2 * N..(row + 1) * 2 * N];
        assert!(r[..N].iter().all(|&x| x == 3) && r[N..].iter().all(|&x| x == 4));
    }
    let empty = bindings![];
    assert!(empty.is_empty());
    assert_clean(&gpu);
}

#[test]
fn raw_handles_name_the_live_objects() {
    use vkcompute::ash::vk::{self, Handle};
    let gpu = gpu();
    let raw = gpu.raw();
    assert_ne!(raw.device.handle().as_raw(), 0);
    assert_ne!(raw.compute_queue.as_raw(), 0);
    assert_ne!(raw.physical_device.as_raw(), 0);
    // SAFETY: a plain query on the live instance and adapter.
    let props = unsafe {
        raw.instance
            .get_physical_device_properties(raw.physical_device)
    };
    assert_eq!(
        props.limits.max_push_constants_size,
        gpu.info().max_push_constants_size
    );
    // SAFETY: a plain query on the live instance and adapter.
    let families = unsafe {
        raw.instance
            .get_physical_device_queue_family_properties(raw.physical_device)
    };
    assert!(families[raw.compute_family as usize]
        .queue_flags
        .contains(vk::QueueFlags::COMPUTE));
    let buf: Buffer<u32> = gpu.alloc(10).unwrap();
    let r = buf.raw();
    assert_ne!(r.buffer, vk::Buffer::null());
    assert_eq!((r.offset, r.size), (0, 40));
    let s = buf.slice(4..8).unwrap().raw();
    assert_eq!((s.buffer, s.offset, s.size), (r.buffer, 16, 16));
    let k = gpu.kernel_glsl(INC).unwrap();
    let rk = k.raw();
    assert_ne!(rk.pipeline, vk::Pipeline::null());
    assert_ne!(rk.pipeline_layout, vk::PipelineLayout::null());
    assert_ne!(rk.set_layout, vk::DescriptorSetLayout::null());
    assert_clean(&gpu);
}
