//! Automatic barriers: a batch (or a graph recording) finds the barriers its
//! commands need from each kernel's reflection and each copy's, fill's and
//! host write's byte ranges, records exactly those, and logs why.
//!
//! Every hazard test runs twice: with automatic barriers on (one barrier,
//! logged with the hazard it resolves, the right numbers, no validation
//! message) and with them off and no barrier written (the synchronization
//! validation layer must then report the hazard, which proves the test can
//! fail). The devices for the second run log messages without failing, so
//! they are made here rather than through the clean-teardown guard.

mod common;
use common::glsl::{bytes, ADD_PARAM, DOUBLE, INC, NEXT, STEP};

use vkcompute::{
    BarrierCause, Batch, BatchOptions, Buffer, Device, DeviceOptions, HazardKind, Kernel,
};

const N: usize = 64;

/// The synchronization validation's hazard messages all start so.
const SYNC_HAZARD: &str = "SYNC-HAZARD";

fn opts(auto: bool) -> BatchOptions {
    BatchOptions::default()
        .with_auto_barriers(auto)
        .with_record_plan(true)
}

/// A device whose validation messages are logged, not raised: the runs
/// with automatic barriers off plant the hazards on it.
fn logging_device() -> Device {
    Device::with_options(DeviceOptions {
        validation: Some(true),
        validation_errors: Some(false),
        validation_stderr: Some(false),
        ..Default::default()
    })
    .expect(
        "a Vulkan device with validation (install mesa-vulkan-drivers and vulkan-validationlayers)",
    )
}

fn sync_hazards(gpu: &Device) -> Vec<String> {
    gpu.validation_messages()
        .into_iter()
        .filter(|m| m.contains(SYNC_HAZARD))
        .collect()
}

/// The kernels the scenarios use, on one device.
struct Kernels {
    inc: Kernel,
    double: Kernel,
    next: Kernel,
}

impl Kernels {
    fn new(gpu: &Device) -> Kernels {
        Kernels {
            inc: gpu.kernel_glsl(INC).unwrap(),
            double: gpu.kernel_glsl(DOUBLE).unwrap(),
            next: gpu.kernel_glsl(NEXT).unwrap(),
        }
    }
}

fn iota(gpu: &Device) -> Buffer<u32> {
    gpu.upload(&(0..N as u32).collect::<Vec<_>>()).unwrap()
}

/// A scenario records into `b` (no barrier written) and returns the buffer
/// whose contents it checks.
type Scenario = fn(&Device, &Kernels, &mut Batch) -> Buffer<u32>;

/// Runs `scenario` with automatic barriers on (expecting exactly one
/// barrier, for a `kind` hazard before command `before`, the contents
/// `want`, and no validation message), then off on a logging device
/// (expecting the synchronization validation to report a hazard).
fn hazard_case(name: &str, scenario: Scenario, kind: HazardKind, before: u64, want: Vec<u32>) {
    let gpu = common::gpu();
    let k = Kernels::new(&gpu);
    let mut b = gpu.batch_with(opts(true)).unwrap();
    let out = scenario(&gpu, &k, &mut b);
    let log = b.barrier_log().to_vec();
    assert_eq!(b.barrier_count(), 1, "{name}: barriers {log:#?}");
    assert_eq!(log.len(), 1, "{name}");
    assert_eq!(log[0].before_command, before, "{name}: {log:#?}");
    match &log[0].cause {
        BarrierCause::Hazard { kind: got, .. } => assert_eq!(*got, kind, "{name}"),
        other => panic!("{name}: barrier for {other:?}"),
    }
    b.submit().unwrap();
    assert_eq!(out.download().unwrap(), want, "{name}: contents");
    drop((k, out));
    gpu.finish();

    let gpu = logging_device();
    let k = Kernels::new(&gpu);
    let mut b = gpu.batch_with(opts(false)).unwrap();
    let out = scenario(&gpu, &k, &mut b);
    assert_eq!(b.barrier_count(), 0, "{name}: off records none");
    b.submit().unwrap();
    drop(out);
    let found = sync_hazards(&gpu);
    assert!(
        !found.is_empty(),
        "{name}: with automatic barriers off the validation layer reported no hazard \
         (messages: {:?})",
        gpu.validation_messages()
    );
}

#[test]
fn dispatch_then_copy_of_what_it_wrote() {
    hazard_case(
        "dispatch → copy",
        |gpu, k, b| {
            let a = iota(gpu);
            let c = gpu.alloc::<u32>(N).unwrap();
            b.run(&k.inc, &[&a], N as u32).unwrap();
            b.copy(&a, &c).unwrap();
            c
        },
        HazardKind::ReadAfterWrite,
        1,
        (1..=N as u32).collect(),
    );
}

#[test]
fn fill_then_dispatch_on_it() {
    hazard_case(
        "fill → dispatch",
        |gpu, k, b| {
            let a = iota(gpu);
            b.fill(&a, 5).unwrap();
            b.run(&k.inc, &[&a], N as u32).unwrap();
            a
        },
        HazardKind::WriteAfterWrite,
        1,
        vec![6; N],
    );
}

#[test]
fn dispatch_then_fill_of_what_it_wrote() {
    hazard_case(
        "dispatch → fill",
        |gpu, k, b| {
            let a = iota(gpu);
            let d = gpu.alloc::<u32>(N).unwrap();
            b.run(&k.double, &[&a, &d], N as u32).unwrap();
            b.fill(&d, 7).unwrap();
            d
        },
        HazardKind::WriteAfterWrite,
        1,
        vec![7; N],
    );
}

#[test]
fn fill_of_what_a_dispatch_read() {
    hazard_case(
        "dispatch reads → fill",
        |gpu, k, b| {
            let a = iota(gpu);
            let d = gpu.alloc::<u32>(N).unwrap();
            b.run(&k.double, &[&a, &d], N as u32).unwrap();
            b.fill(&a, 0).unwrap();
            d
        },
        HazardKind::WriteAfterRead,
        1,
        (0..N as u32).map(|i| i * 2).collect(),
    );
}

#[test]
fn copy_then_copy_of_its_destination() {
    hazard_case(
        "copy → copy",
        |gpu, _, b| {
            let a = iota(gpu);
            let m = gpu.alloc::<u32>(N).unwrap();
            let c = gpu.alloc::<u32>(N).unwrap();
            b.copy(&a, &m).unwrap();
            b.copy(&m, &c).unwrap();
            c
        },
        HazardKind::ReadAfterWrite,
        1,
        (0..N as u32).collect(),
    );
}

#[test]
fn copy_then_dispatch_on_its_destination() {
    hazard_case(
        "copy → dispatch",
        |gpu, k, b| {
            let a = iota(gpu);
            let m = gpu.alloc::<u32>(N).unwrap();
            let d = gpu.alloc::<u32>(N).unwrap();
            b.copy(&a, &m).unwrap();
            b.run(&k.double, &[&m, &d], N as u32).unwrap();
            d
        },
        HazardKind::ReadAfterWrite,
        1,
        (0..N as u32).map(|i| i * 2).collect(),
    );
}

#[test]
fn dispatch_reading_what_a_dispatch_wrote() {
    hazard_case(
        "dispatch → dispatch (another binding)",
        |gpu, k, b| {
            let a = iota(gpu);
            let m = gpu.alloc::<u32>(N).unwrap();
            let d = gpu.alloc::<u32>(N).unwrap();
            b.run(&k.next, &[&a, &m], N as u32).unwrap();
            b.run(&k.double, &[&m, &d], N as u32).unwrap();
            d
        },
        HazardKind::ReadAfterWrite,
        1,
        (0..N as u32).map(|i| (i + 1) * 2).collect(),
    );
}

#[test]
fn slice_hazards_follow_the_bytes_bound() {
    // A dispatch on the second half, then a copy out of it: a hazard; the
    // first half's copy in the same batch is free.
    hazard_case(
        "dispatch on a slice → copy of it",
        |gpu, k, b| {
            let a = iota(gpu);
            let c = gpu.alloc::<u32>(N / 2).unwrap();
            let e = gpu.alloc::<u32>(N / 2).unwrap();
            let hi = a.slice(N / 2..).unwrap();
            let lo = a.slice(..N / 2).unwrap();
            b.run(&k.inc, &[&hi], (N / 2) as u32).unwrap();
            b.copy(&lo, &e).unwrap();
            b.copy(&hi, &c).unwrap();
            c
        },
        HazardKind::ReadAfterWrite,
        2,
        (N as u32 / 2 + 1..=N as u32).collect(),
    );
}

/// A chain of `steps` dependent dispatches ping-ponging between two
/// buffers (no barrier written): returns the result and the barriers.
/// With the log on, every step after the first must have its own
/// compute → compute barrier right before it, whatever the chunking (a
/// chunk boundary does not order the chunks' commands: they follow each
/// other on one queue with no wait between them).
/// The buffers go into `kept`: kept alive, the next run's buffers live at
/// other addresses (a batch's hazard table, reused by the thread's next
/// batch, must carry nothing of this one over).
fn ping_pong(
    gpu: &Device,
    k: &Kernels,
    options: BatchOptions,
    steps: usize,
    kept: &mut Vec<Buffer<u32>>,
) -> (Vec<u32>, u64) {
    let a = gpu.upload(&vec![0u32; N]).unwrap();
    let c = gpu.alloc::<u32>(N).unwrap();
    let mut b = gpu.batch_with(options).unwrap();
    let (mut src, mut dst) = (&a, &c);
    for _ in 0..steps {
        b.run(&k.next, &[src, dst], N as u32).unwrap();
        std::mem::swap(&mut src, &mut dst);
    }
    let barriers = b.barrier_count();
    if options.auto_barriers {
        // Checked before submitting: a missing barrier is a hazard the
        // validation layer may not see (push descriptors, older layers).
        assert_eq!(barriers, steps as u64 - 1, "{options:?}: barriers");
    }
    if options.auto_barriers && options.record_plan {
        let log = b.barrier_log();
        let before: Vec<u64> = log.iter().map(|p| p.before_command).collect();
        assert_eq!(
            before,
            (1..steps as u64).collect::<Vec<_>>(),
            "{options:?}: a barrier before each dependent step"
        );
        let compute = vkcompute::ash::vk::PipelineStageFlags::COMPUTE_SHADER;
        let shader = vkcompute::ash::vk::AccessFlags::SHADER_READ
            | vkcompute::ash::vk::AccessFlags::SHADER_WRITE;
        for p in log {
            assert!(p.src_stages.contains(compute), "{options:?}: {p:?}");
            assert!(p.dst_stages.contains(compute), "{options:?}: {p:?}");
            assert!(p.dst_access.contains(shader), "{options:?}: {p:?}");
        }
    }
    b.submit().unwrap();
    let got = src.download().unwrap();
    kept.extend([a, c]);
    (got, barriers)
}

#[test]
fn a_dependent_chain_gets_the_right_numbers_under_any_chunking() {
    let gpu = common::gpu();
    let k = Kernels::new(&gpu);
    let steps = 40;
    let mut kept = Vec::new();
    for options in [
        opts(true),
        opts(true).with_record_plan(false),
        BatchOptions {
            first_chunk: 1,
            max_chunk: 2,
            ..opts(true)
        },
        BatchOptions {
            first_chunk: 1,
            max_chunk: 1,
            ..opts(true)
        },
        BatchOptions {
            first_chunk: 3,
            max_chunk: 5,
            ..opts(true)
        },
        BatchOptions::single_submit().with_record_plan(true),
    ] {
        let (got, barriers) = ping_pong(&gpu, &k, options, steps, &mut kept);
        assert_eq!(got, vec![steps as u32; N], "{options:?}");
        assert_eq!(barriers, steps as u64 - 1, "{options:?}");
    }
    drop((k, kept));
    gpu.finish();
    let gpu = logging_device();
    let k = Kernels::new(&gpu);
    ping_pong(&gpu, &k, opts(false), steps, &mut Vec::new());
    assert!(
        !sync_hazards(&gpu).is_empty(),
        "the chain without barriers raised no hazard: {:?}",
        gpu.validation_messages()
    );
}

#[test]
fn in_place_chain_gets_one_barrier_per_step() {
    let gpu = common::gpu();
    let k = Kernels::new(&gpu);
    let a = gpu.upload(&vec![0u32; N]).unwrap();
    let mut b = gpu.batch_with(opts(true)).unwrap();
    for _ in 0..100 {
        b.run(&k.inc, &[&a], N as u32).unwrap();
    }
    assert_eq!(b.barrier_count(), 99);
    for (i, p) in b.barrier_log().iter().enumerate() {
        assert_eq!(p.before_command, i as u64 + 1);
        // The narrow compute → compute barrier.
        assert_eq!(
            p.src_stages,
            vkcompute::ash::vk::PipelineStageFlags::COMPUTE_SHADER
        );
        assert_eq!(p.dst_stages, p.src_stages);
        match &p.cause {
            BarrierCause::Hazard {
                kind,
                earlier_command,
                bytes,
                ..
            } => {
                assert_eq!(*kind, HazardKind::WriteAfterWrite);
                assert_eq!(*earlier_command, i as u64);
                assert_eq!(*bytes, 0..(N * 4) as u64);
            }
            other => panic!("{other:?}"),
        }
    }
    b.submit().unwrap();
    assert_eq!(a.download().unwrap(), vec![100; N]);
}

#[test]
fn independent_commands_get_no_barrier() {
    let gpu = common::gpu();
    let k = Kernels::new(&gpu);
    let a = iota(&gpu);
    let bufs: Vec<Buffer<u32>> = (0..8).map(|_| iota(&gpu)).collect();
    let many = gpu.upload(&vec![0u32; N * 16]).unwrap();
    let (d1, d2, f, c) = (
        gpu.alloc::<u32>(N).unwrap(),
        gpu.alloc::<u32>(N).unwrap(),
        gpu.alloc::<u32>(N).unwrap(),
        gpu.alloc::<u32>(N).unwrap(),
    );
    let mut b = gpu.batch_with(opts(true)).unwrap();
    for x in &bufs {
        b.run(&k.inc, &[x], N as u32).unwrap();
    }
    // Disjoint slices of one buffer.
    for i in 0..16 {
        let s = many.slice(i * N..(i + 1) * N).unwrap();
        b.run(&k.inc, &[&s], N as u32).unwrap();
    }
    // Reads after reads.
    b.run(&k.double, &[&a, &d1], N as u32).unwrap();
    b.run(&k.next, &[&a, &d2], N as u32).unwrap();
    b.copy(&a, &c).unwrap();
    b.fill(&f, 3).unwrap();
    assert_eq!(b.barrier_count(), 0, "{:#?}", b.barrier_log());
    b.submit().unwrap();
    for x in &bufs {
        assert_eq!(x.download().unwrap(), (1..=N as u32).collect::<Vec<_>>());
    }
    assert_eq!(many.download().unwrap(), vec![1; N * 16]);
    assert_eq!(
        d1.download().unwrap(),
        (0..N as u32).map(|i| i * 2).collect::<Vec<_>>()
    );
    assert_eq!(d2.download().unwrap(), (1..=N as u32).collect::<Vec<_>>());
    assert_eq!(c.download().unwrap(), (0..N as u32).collect::<Vec<_>>());
    assert_eq!(f.download().unwrap(), vec![3; N]);
}

#[test]
fn one_buffer_bound_twice_in_one_dispatch_is_not_a_hazard() {
    let gpu = common::gpu();
    let k = Kernels::new(&gpu);
    let a = iota(&gpu);
    let mut b = gpu.batch_with(opts(true)).unwrap();
    // Read through one binding and written through the other, in place.
    b.run(&k.double, &[&a, &a], N as u32).unwrap();
    assert_eq!(b.barrier_count(), 0);
    // The next such dispatch depends on the first: one barrier.
    b.run(&k.double, &[&a, &a], N as u32).unwrap();
    assert_eq!(b.barrier_count(), 1);
    b.submit().unwrap();
    assert_eq!(
        a.download().unwrap(),
        (0..N as u32).map(|i| i * 4).collect::<Vec<_>>()
    );
}

#[test]
fn explicit_barriers_work_and_are_never_doubled() {
    let gpu = common::gpu();
    let k = Kernels::new(&gpu);
    let a = gpu.upload(&vec![0u32; N]).unwrap();
    let c = gpu.alloc::<u32>(N).unwrap();
    let mut b = gpu.batch_with(opts(true)).unwrap();
    b.run(&k.inc, &[&a], N as u32).unwrap();
    b.barrier();
    b.barrier();
    b.run(&k.inc, &[&a], N as u32).unwrap();
    b.barrier();
    // The copy is owed the request's barrier, and needs no other.
    b.copy(&a, &c).unwrap();
    let log = b.barrier_log().to_vec();
    assert_eq!(log.len(), 2, "{log:#?}");
    assert!(log.iter().all(|p| p.cause == BarrierCause::Requested));
    assert_eq!(b.barrier_count(), 2);
    b.submit().unwrap();
    assert_eq!(c.download().unwrap(), vec![2; N]);

    // Off, the same requests give the same barriers.
    let mut b = gpu.batch_with(opts(false)).unwrap();
    b.run(&k.inc, &[&a], N as u32).unwrap();
    b.barrier();
    b.run(&k.inc, &[&a], N as u32).unwrap();
    b.barrier();
    b.copy(&a, &c).unwrap();
    assert_eq!(b.barrier_log(), &log[..]);
    b.submit().unwrap();
    assert_eq!(c.download().unwrap(), vec![4; N]);
}

#[test]
fn a_barrier_for_one_stage_leaves_independent_work_of_the_other_free() {
    let gpu = common::gpu();
    let k = Kernels::new(&gpu);
    let a = gpu.upload(&vec![0u32; N]).unwrap();
    let (e, f) = (gpu.alloc::<u32>(N).unwrap(), iota(&gpu));
    let mut b = gpu.batch_with(opts(true)).unwrap();
    b.run(&k.inc, &[&a], N as u32).unwrap();
    b.run(&k.inc, &[&a], N as u32).unwrap(); // compute → compute
    b.copy(&f, &e).unwrap(); // independent transfer: none
    b.copy(&a, &f).unwrap(); // reads a, writes what the last copy read
    let log = b.barrier_log().to_vec();
    assert_eq!(log.len(), 2, "{log:#?}");
    assert_eq!(
        log.iter().map(|p| p.before_command).collect::<Vec<_>>(),
        [1, 3]
    );
    b.submit().unwrap();
    assert_eq!(e.download().unwrap(), (0..N as u32).collect::<Vec<_>>());
    assert_eq!(f.download().unwrap(), vec![2; N]);
}

#[test]
fn host_writes_and_reads_are_tracked_by_their_bytes() {
    let gpu = common::gpu();
    let k = Kernels::new(&gpu);
    let a = gpu.upload(&vec![0u32; N]).unwrap();
    let other = gpu.alloc::<u32>(N).unwrap();
    let mut b = gpu.batch_with(opts(true)).unwrap();
    b.run(&k.inc, &[&a], N as u32).unwrap();
    b.write(&other, 0, &vec![9u32; N]).unwrap(); // independent
    let first = b.read(&a).unwrap(); // reads what the dispatch wrote
    b.write(&a, 0, &[100u32; 4]).unwrap(); // overwrites what was read
    b.run(&k.inc, &[&a], N as u32).unwrap(); // reads what was written
    let second = b.read(&a).unwrap();
    let kinds: Vec<HazardKind> = b
        .barrier_log()
        .iter()
        .map(|p| match &p.cause {
            BarrierCause::Hazard { kind, .. } => *kind,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            HazardKind::ReadAfterWrite,
            HazardKind::WriteAfterRead,
            HazardKind::WriteAfterWrite,
            HazardKind::ReadAfterWrite
        ]
    );
    b.submit().unwrap();
    assert_eq!(first.wait().unwrap(), vec![1; N]);
    let mut want = vec![2u32; N];
    want[..4].fill(101);
    assert_eq!(second.wait().unwrap(), want);
    assert_eq!(other.download().unwrap(), vec![9; N]);
}

#[test]
fn graph_recordings_find_their_barriers() {
    let gpu = common::gpu();
    let k = Kernels::new(&gpu);
    let a = gpu.upload(&vec![0u32; N]).unwrap();
    let c = gpu.alloc::<u32>(N).unwrap();
    let mut rec = gpu.graph_recorder().unwrap();
    assert!(rec.auto_barriers());
    rec.set_record_plan(true);
    rec.run(&k.inc, &[&a], N as u32).unwrap();
    rec.copy(&a, &c).unwrap();
    assert_eq!(rec.barrier_count(), 1, "{:#?}", rec.barrier_log());
    let graph = rec.finish().unwrap();
    for _ in 0..3 {
        graph.launch().unwrap().wait().unwrap();
    }
    assert_eq!(c.download().unwrap(), vec![3; N]);
    drop((graph, k));
    gpu.finish();

    let gpu = logging_device();
    let k = Kernels::new(&gpu);
    let a = gpu.upload(&vec![0u32; N]).unwrap();
    let c = gpu.alloc::<u32>(N).unwrap();
    let mut rec = gpu.graph_recorder().unwrap();
    rec.set_auto_barriers(false);
    rec.run(&k.inc, &[&a], N as u32).unwrap();
    rec.copy(&a, &c).unwrap();
    assert_eq!(rec.barrier_count(), 0);
    let graph = rec.finish().unwrap();
    graph.launch().unwrap().wait().unwrap();
    assert!(
        !sync_hazards(&gpu).is_empty(),
        "the graph without barriers raised no hazard: {:?}",
        gpu.validation_messages()
    );
}

#[test]
fn params_read_by_a_graph_need_no_barrier() {
    let gpu = common::gpu();
    let add = gpu.kernel_glsl(ADD_PARAM).unwrap();
    let p = gpu.params(1u32).unwrap();
    let (x, y) = (
        gpu.upload(&vec![0u32; N]).unwrap(),
        gpu.upload(&vec![0u32; N]).unwrap(),
    );
    let mut rec = gpu.graph_recorder().unwrap();
    rec.set_record_plan(true);
    rec.run(&add, &[&p, &x], N as u32).unwrap();
    rec.run(&add, &[&p, &y], N as u32).unwrap(); // independent
    assert_eq!(rec.barrier_count(), 0, "{:#?}", rec.barrier_log());
    rec.run(&add, &[&p, &x], N as u32).unwrap(); // x again: one barrier
    assert_eq!(rec.barrier_count(), 1, "{:#?}", rec.barrier_log());
    let graph = rec.finish().unwrap();
    graph.launch().unwrap().wait().unwrap();
    p.set(10);
    graph.launch().unwrap().wait().unwrap();
    assert_eq!(x.download().unwrap(), vec![22; N]);
    assert_eq!(y.download().unwrap(), vec![11; N]);
}

/// The `batch` example's signal chain (scale three times, clamp, partial
/// sums), with its hand-written barriers (`manual`) or none and automatic
/// barriers: the result and the barriers recorded.
fn example_batch(gpu: &Device, manual: bool) -> (Vec<f32>, u64) {
    const PARTIAL: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) writeonly buffer S { float sums[]; };
void main() {
    uint g = gl_GlobalInvocationID.x;
    if (g >= sums.length()) return;
    float s = 0.0;
    for (uint i = 0; i < 16; i++) s += x[g * 16 + i];
    sums[g] = s;
}
"#;
    let n = 1024u32;
    let step = gpu.kernel_glsl(STEP).unwrap();
    let partial = gpu.kernel_glsl(PARTIAL).unwrap();
    let x = gpu
        .upload(&(0..n).map(|i| (i % 7) as f32).collect::<Vec<_>>())
        .unwrap();
    let sums = gpu.alloc::<f32>((n / 16) as usize).unwrap();
    let mut b = gpu.batch_with(opts(!manual)).unwrap();
    for (a, c) in [(0.5f32, 0.25f32), (2.0, -1.0), (1.0, 0.5)] {
        b.run_with_push_constants(&step, &[&x], n, &bytes(&[a.to_bits(), c.to_bits(), n]))
            .unwrap();
        if manual {
            b.barrier();
        }
    }
    b.run_with_push_constants(&step, &[&x], n, &bytes(&[1f32.to_bits(), 0, n]))
        .unwrap();
    if manual {
        b.barrier();
    }
    b.run(&partial, &[&x, &sums], n / 16).unwrap();
    let barriers = b.barrier_count();
    b.submit().unwrap();
    (sums.download().unwrap(), barriers)
}

/// The `graph` example's and `gpu_report`'s chain (in place, a barrier
/// after each step) and independent dispatches over slices of one buffer.
fn example_chain_and_independent(gpu: &Device, manual: bool) -> (Vec<u32>, Vec<u32>, u64) {
    let inc = gpu.kernel_glsl(INC).unwrap();
    let x = gpu.upload(&vec![0u32; N]).unwrap();
    let many = gpu.upload(&vec![0u32; N * 32]).unwrap();
    let mut b = gpu.batch_with(opts(!manual)).unwrap();
    for _ in 0..32 {
        b.run(&inc, &[&x], N as u32).unwrap();
        if manual {
            b.barrier();
        }
    }
    for i in 0..32 {
        let s = many.slice(i * N..(i + 1) * N).unwrap();
        b.run(&inc, &[&s], N as u32).unwrap();
    }
    let barriers = b.barrier_count();
    b.submit().unwrap();
    (x.download().unwrap(), many.download().unwrap(), barriers)
}

#[test]
fn examples_need_no_more_barriers_than_written_by_hand() {
    let gpu = common::gpu();
    let (want, by_hand) = example_batch(&gpu, true);
    let (got, auto) = example_batch(&gpu, false);
    assert_eq!(got, want);
    assert!(auto <= by_hand, "auto {auto} > by hand {by_hand}");
    assert_eq!(auto, 4);
    let (x, many, by_hand) = example_chain_and_independent(&gpu, true);
    let (x2, many2, auto) = example_chain_and_independent(&gpu, false);
    assert_eq!((x2, many2), (x, many));
    assert!(auto <= by_hand, "auto {auto} > by hand {by_hand}");
    assert_eq!(auto, 31);
}

#[test]
fn switching_off_mid_batch_stops_tracking() {
    let gpu = common::gpu();
    let k = Kernels::new(&gpu);
    let a = gpu.upload(&vec![0u32; N]).unwrap();
    let mut b = gpu.batch().unwrap();
    assert!(b.auto_barriers(), "on by default");
    assert!(b.barrier_log().is_empty(), "no log unless asked");
    b.run(&k.inc, &[&a], N as u32).unwrap();
    b.run(&k.inc, &[&a], N as u32).unwrap();
    assert_eq!(b.barrier_count(), 1);
    b.set_auto_barriers(false);
    b.barrier();
    b.run(&k.inc, &[&a], N as u32).unwrap();
    assert_eq!(b.barrier_count(), 2);
    b.submit().unwrap();
    assert_eq!(a.download().unwrap(), vec![3; N]);
}

#[test]
fn a_split_launch_is_one_command_for_hazards() {
    let gpu = common::gpu();
    let inc = gpu.kernel_glsl(INC).unwrap();
    let info = gpu.info();
    // One workgroup of 64 past the adapter's row: two pieces.
    let n = (u64::from(info.max_workgroup_count[0]) + 1) * 64;
    let bytes = n * 4;
    let largest = info
        .max_storage_buffer_range
        .min(info.max_memory_allocation_size)
        .min(info.max_buffer_size);
    if n > u64::from(u32::MAX) || bytes > largest {
        common::skipped(format!(
            "a launch past maxComputeWorkGroupCount[0] = {} workgroups of 64 needs {n} \
             invocations over a {bytes}-byte binding (at most {} invocations, {largest} bytes)",
            info.max_workgroup_count[0],
            u32::MAX
        ));
        return;
    }
    let n = n as usize;
    let a = gpu.upload(&vec![0u32; n]).unwrap();
    let mut b = gpu.batch_with(opts(true)).unwrap();
    b.run(&inc, &[&a], n as u32).unwrap();
    assert_eq!(b.len(), 2, "the launch was split");
    assert_eq!(b.barrier_count(), 0, "{:#?}", b.barrier_log());
    b.run(&inc, &[&a], n as u32).unwrap();
    assert_eq!(b.barrier_count(), 1, "{:#?}", b.barrier_log());
    assert_eq!(b.barrier_log()[0].before_command, 2);
    b.submit().unwrap();
    let got = a.download().unwrap();
    assert!(
        got.iter().all(|&v| v == 2),
        "first wrong: {:?}",
        got.iter().position(|&v| v != 2)
    );
}

#[test]
fn the_log_follows_set_record_plan() {
    let gpu = common::gpu();
    let inc = gpu.kernel_glsl(INC).unwrap();
    let a = gpu.upload(&vec![0u32; N]).unwrap();
    let mut b = gpu.batch().unwrap();
    b.run(&inc, &[&a], N as u32).unwrap();
    b.run(&inc, &[&a], N as u32).unwrap(); // counted, not logged
    b.set_record_plan(true);
    b.run(&inc, &[&a], N as u32).unwrap(); // logged
    b.set_record_plan(false);
    b.run(&inc, &[&a], N as u32).unwrap(); // counted, not logged
    assert_eq!(b.barrier_count(), 3);
    let log: Vec<u64> = b.barrier_log().iter().map(|p| p.before_command).collect();
    assert_eq!(log, [2], "stopping keeps what was logged, and logs no more");
    b.submit().unwrap();
    assert_eq!(a.download().unwrap(), vec![4; N]);
}

#[test]
fn a_uniform_written_in_the_batch_is_visible_to_the_next_dispatch() {
    let gpu = common::gpu();
    let add = gpu.kernel_glsl(ADD_PARAM).unwrap();
    let p = gpu.upload(&[0u32; 4]).unwrap();
    let c = gpu.upload(&vec![0u32; N]).unwrap();
    let mut b = gpu.batch_with(opts(true)).unwrap();
    b.write(&p, 0, &[5u32]).unwrap();
    b.run(&add, &[&p, &c], N as u32).unwrap(); // reads the uniform
    b.fill(&p, 7).unwrap(); // overwrites what it read
    b.run(&add, &[&p, &c], N as u32).unwrap();
    assert_eq!(b.barrier_count(), 3, "{:#?}", b.barrier_log());
    b.submit().unwrap();
    assert_eq!(c.download().unwrap(), vec![12; N]);
}
