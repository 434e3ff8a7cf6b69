//! The second half of the bad-input matrix (`tests/bad_input.rs`):
//! dispatches, foreign objects, transfers and tickets.

use super::*;

/// Records one good dispatch (c += 1) after a barrier: the batch stays usable.
fn good(b: &mut Batch, k: &Kernels, c: &Buffer<u32>) {
    b.barrier();
    b.run(&k.inc, &[c], c.len() as u32).unwrap();
}

/// Bad dispatches: binding counts and kinds, push constants, grids.
pub(super) fn dispatches(m: &mut Matrix, gpu: &Device, k: &Kernels) {
    let info = gpu.info().clone();
    let x = gpu.upload(&[1.0f32; 64]).unwrap();
    let y = gpu.alloc::<f32>(64).unwrap();
    let z = gpu.alloc::<f32>(64).unwrap();
    let c = gpu.alloc::<u32>(16).unwrap();
    let mut b = gpu.batch().unwrap();
    let mut goods = 0u32;

    // Binding counts.
    for bufs in [
        vec![],
        vec![&x as &dyn GpuBuf],
        vec![&x as &dyn GpuBuf, &y],
        vec![&x as &dyn GpuBuf, &y, &z, &c],
    ] {
        let got = bufs.len();
        bad!(m, format!("add with {got} buffers"), b.run(&k.add, &bufs, 64),
            Error::BindingCount { kernel, expected: 3, got: g } if kernel == k.add.label() && g == got);
        good(&mut b, k, &c);
        goods += 1;
    }
    bad!(
        m,
        "inc with 0 buffers",
        b.run(&k.inc, &[], 16),
        Error::BindingCount {
            expected: 1,
            got: 0,
            ..
        }
    );

    // Push constants: too short, too long, none, unexpected.
    for len in [0usize, 4, 7, 9, 12, 128] {
        let pc = vec![0u8; len];
        bad!(m, format!("saxpy with {len} push-constant bytes"),
            b.run_with_push_constants(&k.saxpy, &[&x, &y], 64, &pc),
            Error::PushConstantSize { expected: 8, got, .. } if got == len);
        good(&mut b, k, &c);
        goods += 1;
    }
    bad!(
        m,
        "inc with push constants",
        b.run_with_push_constants(&k.inc, &[&c], 16, &[0; 4]),
        Error::PushConstantSize {
            expected: 0,
            got: 4,
            ..
        }
    );
    bad!(
        m,
        "run_configured saxpy without push constants",
        b.run_configured(&k.saxpy, &[&x, &y], [1, 1, 1], None),
        Error::PushConstantSize {
            expected: 8,
            got: 0,
            ..
        }
    );

    // Zero invocations, zero dimensions, grids over the limit.
    bad!(
        m,
        "run 0 invocations",
        b.run(&k.inc, &[&c], 0),
        Error::EmptyDispatch {
            workgroups: [0, 0, 0],
            ..
        }
    );
    bad!(
        m,
        "saxpy 0 invocations",
        b.run_with_push_constants(&k.saxpy, &[&x, &y], 0, &saxpy_pc(1.0, 0)),
        Error::EmptyDispatch { .. }
    );
    for grid in [[0, 1, 1], [1, 0, 1], [1, 1, 0], [0, 0, 0], [5, 0, u32::MAX]] {
        bad!(m, format!("run_configured {grid:?}"), b.run_configured(&k.inc, &[&c], grid, None),
            Error::EmptyDispatch { workgroups, .. } if workgroups == grid);
    }
    let limit = info.max_workgroup_count;
    for d in 0..3 {
        if limit[d] == u32::MAX {
            skipped(format_args!(
                "maxComputeWorkGroupCount[{d}] is u32::MAX: no grid over it"
            ));
            continue;
        }
        let mut grid = [1u32; 3];
        grid[d] = limit[d] + 1;
        bad!(m, format!("run_configured {grid:?}"), b.run_configured(&k.inc, &[&c], grid, None),
            Error::WorkgroupLimit { requested, limit: l, .. }
                if requested == grid.map(u64::from) && l == limit);
    }
    let all_over = limit.map(|l| l.saturating_add(1));
    bad!(
        m,
        "run_configured all over",
        b.run_configured(&k.inc, &[&c], all_over, None),
        Error::WorkgroupLimit { .. }
    );
    bad!(m, "run_configured u32::MAX", b.run_configured(&k.inc, &[&c], [u32::MAX; 3], None),
        Error::WorkgroupLimit { requested, .. } if requested == [u64::from(u32::MAX); 3]);
    good(&mut b, k, &c);
    goods += 1;

    // Binding kinds: a uniform binding over maxUniformBufferRange, and
    // misaligned slices of either kind.
    let largest = info.max_memory_allocation_size.min(info.max_buffer_size);
    let ulimit = info.max_uniform_buffer_range;
    if ulimit.saturating_add(4) <= largest && ulimit <= 1 << 30 {
        // f32 elements: the binding declares vec4 (a u8 buffer would be an
        // element-type error).
        let too_big = gpu.alloc::<f32>(ulimit as usize / 4 + 1).unwrap();
        bad!(m, "uniform over maxUniformBufferRange", b.run(&k.uniform, &[&too_big, &z], 1),
            Error::BindingMismatch { binding: 0, detail, .. }
                if detail.contains("maxUniformBufferRange"));
        // Within the limit through a slice, it binds.
        let head = too_big.slice(..ulimit as usize / 4).unwrap();
        b.barrier();
        b.run(&k.uniform, &[&head, &z], 1).unwrap();
    } else {
        skipped(format_args!(
            "a uniform binding over maxUniformBufferRange ({ulimit} bytes) needs a buffer \
             over the largest allocation ({largest} bytes)"
        ));
    }
    let ualign = info.min_uniform_buffer_offset_alignment;
    let u = gpu.alloc::<f32>(256).unwrap();
    if ualign > 4 {
        let shifted = u.slice(1..).unwrap();
        bad!(m, "misaligned uniform slice", b.run(&k.uniform, &[&shifted, &z], 1),
            Error::BindingMismatch { binding: 0, detail, .. } if detail.contains("alignment"));
    } else {
        skipped(format_args!(
            "a misaligned uniform slice: minUniformBufferOffsetAlignment is {ualign}"
        ));
    }
    let salign = info.min_storage_buffer_offset_alignment;
    if salign > 4 {
        let shifted = z.slice(1..).unwrap();
        bad!(m, "misaligned storage slice", b.run(&k.uniform, &[&u, &shifted], 1),
            Error::BindingMismatch { binding: 1, detail, .. } if detail.contains("alignment"));
        let cs = c.slice(1..).unwrap();
        bad!(
            m,
            "misaligned storage slice (inc)",
            b.run(&k.inc, &[&cs], 1),
            Error::BindingMismatch { binding: 0, .. }
        );
    } else {
        skipped(format_args!(
            "a misaligned storage slice: minStorageBufferOffsetAlignment is {salign}"
        ));
    }
    let srange = info.max_storage_buffer_range;
    if srange.saturating_add(4) <= largest && srange <= 1 << 28 {
        let big = gpu.alloc::<u8>(srange as usize + 4).unwrap();
        bad!(m, "storage over maxStorageBufferRange", b.run(&k.sized, &[&big], 1),
            Error::BindingMismatch { binding: 0, detail, .. }
                if detail.contains("maxStorageBufferRange"));
    } else {
        skipped(format_args!(
            "a storage binding over maxStorageBufferRange ({srange} bytes) within the \
             largest allocation ({largest} bytes) and 256 MiB"
        ));
    }
    good(&mut b, k, &c);
    goods += 1;
    b.submit().unwrap();
    assert_eq!(c.download().unwrap(), vec![goods; 16]);
}

/// A buffer and a kernel from another Device in run, copy and fill.
pub(super) fn foreign(m: &mut Matrix, gpu: &Device, other: &Device, k: &Kernels) {
    let foreign_add = other.kernel_glsl(ADD).unwrap();
    let x = gpu.upload(&[1.0f32; 64]).unwrap();
    let z = gpu.alloc::<f32>(64).unwrap();
    let fx = other.upload(&[5.0f32; 64]).unwrap();
    let c = gpu.alloc::<u32>(4).unwrap();
    let mut b = gpu.batch().unwrap();
    bad!(m, "foreign kernel", b.run(&foreign_add, &[&x, &x, &z], 64),
        Error::ForeignKernel { kernel } if kernel == foreign_add.label());
    bad!(
        m,
        "foreign kernel, foreign buffers",
        b.run(&foreign_add, &[&fx, &fx, &fx], 64),
        Error::ForeignKernel { .. }
    );
    bad!(
        m,
        "foreign kernel, run_configured",
        b.run_configured(&foreign_add, &[&x, &x, &z], [1, 1, 1], None),
        Error::ForeignKernel { .. }
    );
    for (bufs, binding) in [
        ([&fx as &dyn GpuBuf, &x, &z], 0u32),
        ([&x as &dyn GpuBuf, &fx, &z], 1),
        ([&x as &dyn GpuBuf, &x, &fx], 2),
    ] {
        bad!(m, format!("foreign buffer at {binding}"), b.run(&k.add, &bufs, 64),
            Error::ForeignBuffer { kernel, binding: got } if kernel == k.add.label() && got == binding);
        good(&mut b, k, &c);
    }
    let fs = fx.slice(16..32).unwrap();
    bad!(
        m,
        "foreign slice",
        b.run(
            &k.add,
            &[&x.slice(0..16).unwrap(), &fs, &z.slice(0..16).unwrap()],
            16
        ),
        Error::ForeignBuffer { binding: 1, .. }
    );
    bad!(m, "copy from foreign", b.copy(&fx, &z),
        Error::ForeignBuffer { kernel, binding: 0 } if kernel == "copy");
    bad!(m, "copy to foreign", b.copy(&x, &fx),
        Error::ForeignBuffer { kernel, .. } if kernel == "copy");
    bad!(
        m,
        "copy foreign slice",
        b.copy(&fs, &z.slice(0..16).unwrap()),
        Error::ForeignBuffer { .. }
    );
    bad!(m, "fill foreign", b.fill(&fx, 1),
        Error::ForeignBuffer { kernel, .. } if kernel == "fill");
    bad!(
        m,
        "zero foreign slice",
        b.zero(&fs),
        Error::ForeignBuffer { .. }
    );
    good(&mut b, k, &c);
    b.submit().unwrap();
    assert_eq!(c.download().unwrap(), vec![4; 4]);
    // The other device is untouched.
    assert_eq!(fx.download().unwrap(), vec![5.0; 64]);
}

/// Copies of mismatched sizes and overlapping ranges, misaligned fills.
pub(super) fn transfers(m: &mut Matrix, gpu: &Device) {
    let a = gpu.upload(&(0..64).collect::<Vec<u32>>()).unwrap();
    let small = gpu.alloc::<u32>(32).unwrap();
    let bytes8 = gpu.upload(&[7u8; 13]).unwrap();
    let mut b = gpu.batch().unwrap();
    bad!(m, "copy 256 -> 128 bytes", b.copy(&a, &small),
        Error::BadTransfer { what: "copy", detail }
            if detail.contains("256") && detail.contains("128"));
    bad!(
        m,
        "copy 128 -> 256 bytes",
        b.copy(&small, &a),
        Error::BadTransfer { what: "copy", .. }
    );
    bad!(
        m,
        "copy slice 10 -> 11",
        b.copy(&a.slice(0..10).unwrap(), &small.slice(0..11).unwrap()),
        Error::BadTransfer { what: "copy", .. }
    );
    bad!(m, "copy a buffer onto itself", b.copy(&a, &a),
        Error::BadTransfer { what: "copy", detail } if detail.contains("overlap"));
    bad!(m, "copy overlapping slices",
        b.copy(&a.slice(0..32).unwrap(), &a.slice(16..48).unwrap()),
        Error::BadTransfer { what: "copy", detail } if detail.contains("overlap"));
    bad!(
        m,
        "copy overlapping slices backwards",
        b.copy(&a.slice(20..40).unwrap(), &a.slice(1..21).unwrap()),
        Error::BadTransfer { what: "copy", .. }
    );
    // Through a clone of the same buffer: still the same memory.
    let alias = a.clone();
    bad!(
        m,
        "copy onto a clone",
        b.copy(&a.slice(0..8).unwrap(), &alias.slice(4..12).unwrap()),
        Error::BadTransfer { what: "copy", .. }
    );
    bad!(m, "fill misaligned offset", b.fill(&bytes8.slice(1..9).unwrap(), 0),
        Error::BadTransfer { what: "fill", detail } if detail.contains("multiples of 4"));
    bad!(
        m,
        "fill misaligned size",
        b.fill(&bytes8.slice(0..6).unwrap(), 0),
        Error::BadTransfer { what: "fill", .. }
    );
    bad!(
        m,
        "zero misaligned",
        b.zero(&bytes8.slice(3..4).unwrap()),
        Error::BadTransfer { what: "fill", .. }
    );
    // The good neighbours of each: adjacent slices copy, whole odd-sized
    // buffers fill.
    b.copy(&a.slice(0..32).unwrap(), &a.slice(32..64).unwrap())
        .unwrap();
    b.fill(&bytes8, 0x0101_0101).unwrap();
    b.submit().unwrap();
    let got = a.download().unwrap();
    assert_eq!(&got[32..], &(0..32).collect::<Vec<u32>>()[..]);
    assert_eq!(bytes8.download().unwrap(), vec![1u8; 13]);
    assert_eq!(small.download().unwrap(), vec![0; 32]);
}

/// `profile()` on a ticket of an unprofiled batch.
pub(super) fn tickets(m: &mut Matrix, gpu: &Device) {
    let c = gpu.alloc::<u32>(4).unwrap();
    let inc = gpu.kernel_glsl(INC).unwrap();
    let mut b = gpu.batch().unwrap();
    b.run(&inc, &[&c], 4).unwrap();
    let t = b.submit_async().unwrap();
    bad!(m, "profile of an unprofiled batch", t.profile(),
        Error::Unsupported { what, .. } if what.contains("profil"));
    t.wait().unwrap();
    let empty = gpu.batch().unwrap().submit_async().unwrap();
    bad!(
        m,
        "profile of an empty unprofiled batch",
        empty.profile(),
        Error::Unsupported { .. }
    );
    empty.wait().unwrap();
    assert_eq!(c.download().unwrap(), vec![1; 4]);
}
