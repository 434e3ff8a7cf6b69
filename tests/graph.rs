//! Graphs: record once, launch many times; capture pools; per-launch
//! parameters; dropping handles and graphs while launches are in flight.

mod common;

use std::time::Instant;

use vkcompute::{
    CapturePool, Device, DeviceOptions, Error, Graph, Kernel, Params, Profiling, Stats,
};

/// x[i] += 1 over 64 elements.
const STEP: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer X { uint x[]; };
void main() { x[gl_GlobalInvocationID.x] += 1u; }
"#;

/// out[p.launch] = x[0] + (x[63] - 63): twice the steps the chain made
/// (x starts as 0..64), read at both ends; the index is a uniform parameter.
const RECORD: &str = r#"
#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) readonly buffer X { uint x[]; };
layout(set = 0, binding = 1) buffer O { uint o[]; };
layout(set = 0, binding = 2) uniform P { uint launch; } p;
void main() { o[p.launch] = x[0] + x[63] - 63u; }
"#;

/// x[i] += 1 after a long loop the compiler cannot drop (an LCG run `iters`
/// times; it never lands on the sentinel), so launches stay in flight on
/// lavapipe.
const SLOW_STEP: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer X { uint x[]; };
layout(push_constant) uniform P { uint iters; };
void main() {
    uint acc = 0u;
    for (uint k = 0u; k < iters; k++) { acc = acc * 1664525u + 1013904223u; }
    x[gl_GlobalInvocationID.x] += acc == 0xDEADBEEFu ? 1000u : 1u;
}
"#;

fn quick() -> bool {
    std::env::var("VKCOMPUTE_QUICK").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Stats with the submission count left out (launches submit; nothing else
/// may move).
fn objects(s: Stats) -> Stats {
    let mut s = s;
    s.submissions = 0;
    s
}

/// A graph of `chain` dependent STEP dispatches on `x`, then RECORD into
/// `out` at the launch's parameter.
fn chain_graph(
    gpu: &Device,
    step: &Kernel,
    record: &Kernel,
    x: &vkcompute::Buffer<u32>,
    out: &vkcompute::Buffer<u32>,
    p: &Params<u32>,
    chain: usize,
) -> Graph {
    let mut rec = gpu.graph_recorder().unwrap();
    for _ in 0..chain {
        rec.run(step, &[x], 64).unwrap();
        rec.barrier();
    }
    rec.run(record, &[x, out, p], 1).unwrap();
    rec.barrier();
    rec.finish().unwrap()
}

/// A graph of `steps` SLOW_STEP dispatches on `x` (`iters` loop rounds
/// each), a barrier after each: launches that stay in flight on lavapipe.
fn slow_graph(gpu: &Device, x: &vkcompute::Buffer<u32>, steps: usize, iters: u32) -> Graph {
    let slow = gpu.kernel_glsl(SLOW_STEP).unwrap();
    let mut rec = gpu.graph_recorder().unwrap();
    for _ in 0..steps {
        rec.run_with_push_constants(&slow, &[x], 64, &iters.to_le_bytes())
            .unwrap();
        rec.barrier();
    }
    rec.finish().unwrap()
}

/// 100 dependent dispatches and a parameter-indexed write, launched many
/// times with every launch in flight at once: launch L (parameter L) must
/// see the chain advanced by 100 × (L + 1) and write twice that to out[L].
fn hundred_dispatches_launched_many_times(options: DeviceOptions, launches: u32) {
    let gpu = common::gpu_with(options);
    let step = gpu.kernel_glsl(STEP).unwrap();
    let record = gpu.kernel_glsl(RECORD).unwrap();
    let x = gpu.upload(&(0..64u32).collect::<Vec<_>>()).unwrap();
    let out = gpu.alloc::<u32>(launches as usize).unwrap();
    let p = gpu.params(0u32).unwrap();
    let graph = chain_graph(&gpu, &step, &record, &x, &out, &p, 100);
    assert_eq!(graph.num_commands(), 101);
    assert_eq!(graph.buffer_count(), 3, "x, out and the parameter");
    let start = Instant::now();
    let mut last = None;
    for l in 0..launches {
        p.set(l);
        last = Some(graph.launch().unwrap());
    }
    // Changing the value after the last launch must not reach it.
    p.set(u32::MAX);
    last.unwrap().wait().unwrap();
    let got = out.download().unwrap();
    for (l, v) in got.iter().enumerate() {
        assert_eq!(*v, 2 * 100 * (l as u32 + 1), "launch {l}");
    }
    let xs = x.download().unwrap();
    for (i, v) in xs.iter().enumerate() {
        assert_eq!(*v, i as u32 + 100 * launches, "x[{i}]");
    }
    assert_eq!(graph.num_replays(), u64::from(launches));
    println!(
        "{launches} launches of 101 dispatches (push descriptors: {}): {:?}",
        gpu.info().push_descriptor,
        start.elapsed()
    );
    common::assert_clean(&gpu);
}

#[test]
fn hundred_dependent_dispatches_launched_with_per_launch_params() {
    // VKCOMPUTE_QUICK (CI on lavapipe) launches 200 times instead of 1,000.
    let launches = if quick() { 200 } else { 1000 };
    hundred_dispatches_launched_many_times(DeviceOptions::default(), launches);
}

#[test]
fn pooled_descriptor_sets_are_owned_by_the_graph() {
    // The set cache is not used (the graph owns its sets), so churning the
    // cache with other buffers between launches cannot touch them.
    let gpu = common::gpu_with(DeviceOptions {
        push_descriptors: Some(false),
        ..Default::default()
    });
    let step = gpu.kernel_glsl(STEP).unwrap();
    let record = gpu.kernel_glsl(RECORD).unwrap();
    let x = gpu.upload(&(0..64u32).collect::<Vec<_>>()).unwrap();
    let out = gpu.alloc::<u32>(8).unwrap();
    let p = gpu.params(0u32).unwrap();
    let before = gpu.stats().cached_descriptor_sets;
    let graph = chain_graph(&gpu, &step, &record, &x, &out, &p, 10);
    assert_eq!(gpu.stats().cached_descriptor_sets, before);
    for l in 0..8u32 {
        p.set(l);
        drop(graph.launch().unwrap());
        // Fill the cache with sets of buffers that die at once.
        for _ in 0..40 {
            let tmp = gpu.alloc::<u32>(64).unwrap();
            let mut b = gpu.batch().unwrap();
            b.run(&step, &[&tmp], 64).unwrap();
            b.submit().unwrap();
        }
    }
    let got = out.download().unwrap();
    assert_eq!(got, (1..=8u32).map(|l| 2 * 10 * l).collect::<Vec<_>>());
    common::assert_clean(&gpu);
}

#[test]
fn a_graph_keeps_what_it_uses_after_every_user_handle_is_dropped() {
    let gpu = common::gpu();
    let base = gpu.stats().buffers;
    let graph = {
        let step = gpu.kernel_glsl(STEP).unwrap();
        let x = gpu.upload(&[7u32; 64]).unwrap();
        let y = gpu.alloc::<u32>(64).unwrap();
        let mut rec = gpu.graph_recorder().unwrap();
        rec.run(&step, &[&x], 64).unwrap();
        rec.barrier();
        rec.copy(&x, &y).unwrap();
        rec.finish().unwrap()
        // step, x, y dropped here
    };
    assert_eq!(graph.buffer_count(), 2);
    assert_eq!(graph.kernel_count(), 1);
    assert_eq!(
        gpu.stats().buffers,
        base + 2,
        "the graph holds both buffers"
    );
    let mut last = None;
    for _ in 0..10 {
        last = Some(graph.launch().unwrap());
    }
    last.unwrap().wait().unwrap();
    drop(graph);
    gpu.wait_idle().unwrap();
    assert_eq!(gpu.stats().buffers, base, "released with the graph");
    assert_eq!(gpu.stats().deferred, 0);

    // The same with only the output kept: the results are exact.
    let (graph, y) = {
        let step = gpu.kernel_glsl(STEP).unwrap();
        let x = gpu.upload(&[7u32; 64]).unwrap();
        let y = gpu.alloc::<u32>(64).unwrap();
        let mut rec = gpu.graph_recorder().unwrap();
        rec.run(&step, &[&x], 64).unwrap();
        rec.barrier();
        rec.copy(&x, &y).unwrap();
        (rec.finish().unwrap(), y)
    };
    for _ in 0..10 {
        drop(graph.launch().unwrap());
    }
    // The download waits for the launches that use `y`.
    assert_eq!(y.download().unwrap(), vec![17u32; 64]);
    common::assert_clean(&gpu);
}

#[test]
fn dropping_a_graph_with_launches_in_flight_neither_blocks_nor_frees_early() {
    let gpu = common::gpu();
    let base = gpu.stats();
    let x = gpu.alloc::<u32>(64).unwrap();
    let graph = slow_graph(&gpu, &x, 4, 200_000);
    let launches = 20;
    let mut last = None;
    for _ in 0..launches {
        last = Some(graph.launch().unwrap());
    }
    let last = last.unwrap();
    let t = Instant::now();
    drop(graph);
    let drop_time = t.elapsed();
    // The drop returned while the work still ran: it did not wait for it.
    assert!(
        !last.is_ready().unwrap(),
        "the launches finished before the drop returned ({drop_time:?}); make the kernel slower"
    );
    assert!(
        gpu.stats().deferred > 0,
        "the recorder waits for the launches"
    );
    last.wait().unwrap();
    assert_eq!(x.download().unwrap(), vec![4 * launches; 64]);
    drop(x);
    gpu.wait_idle().unwrap();
    let after = gpu.stats();
    assert_eq!(after.buffers, base.buffers);
    assert_eq!(after.deferred, 0);
    common::assert_clean(&gpu);
}

#[test]
fn launches_create_nothing_and_touch_no_counter_but_submissions() {
    let gpu = common::gpu();
    let step = gpu.kernel_glsl(STEP).unwrap();
    let record = gpu.kernel_glsl(RECORD).unwrap();
    let x = gpu.upload(&(0..64u32).collect::<Vec<_>>()).unwrap();
    let out = gpu.alloc::<u32>(4).unwrap();
    let p = gpu.params(0u32).unwrap();
    let graph = chain_graph(&gpu, &step, &record, &x, &out, &p, 3);
    // One launch and wait first. A wait that finds the work unfinished
    // readies a recorder for the next batch (a pool object, made once), so
    // whether this wait or a later one makes it depends on timing: the
    // counts are taken around the launches alone, before the last wait.
    graph.launch().unwrap().wait().unwrap();
    let before = gpu.stats();
    let mut last = None;
    for i in 0..1000u32 {
        p.set(i % 4);
        last = Some(graph.launch().unwrap());
    }
    let after = gpu.stats();
    last.unwrap().wait().unwrap();
    assert_eq!(objects(after), objects(before));
    assert_eq!(after.submissions - before.submissions, 1000);
    // Launch 1 + i wrote 2 × 3 × (i + 2) into out[i % 4]; the last of each:
    let want: Vec<u32> = (996..1000u32).map(|i| 2 * 3 * (i + 2)).collect();
    assert_eq!(out.download().unwrap(), want);
    common::assert_clean(&gpu);
}

#[test]
fn a_pool_is_shared_by_several_graphs() {
    let gpu = common::gpu();
    let pool = CapturePool::new(&gpu);
    let step = gpu.kernel_glsl(STEP).unwrap();
    let shared = gpu.alloc::<u32>(64).unwrap();
    let a_only = gpu.alloc::<u32>(64).unwrap();
    let mut ra = gpu.graph_recorder_in(&pool).unwrap();
    assert!(ra.pool().is_some());
    ra.run(&step, &[&shared], 64).unwrap();
    ra.barrier();
    ra.run(&step, &[&a_only], 64).unwrap();
    let a = ra.finish().unwrap();
    let mut rb = gpu.graph_recorder_in(a.pool().unwrap()).unwrap();
    rb.run(&step, &[&shared], 64).unwrap();
    let b = rb.finish().unwrap();
    assert!(a.has_pool() && b.has_pool());
    assert!(std::sync::Arc::ptr_eq(a.pool().unwrap(), b.pool().unwrap()));
    assert_eq!(pool.buffer_count(), 2);
    assert_eq!(pool.kernel_count(), 1);
    let extra = gpu.alloc::<u32>(4).unwrap();
    pool.keep(&extra).unwrap();
    assert_eq!(pool.buffer_count(), 3);
    let base = gpu.stats().buffers;
    drop((step, a_only, extra));
    assert_eq!(gpu.stats().buffers, base, "the pool holds them");
    drop(a);
    a_only_is_still_held(&gpu, base);
    drop(b.launch().unwrap());
    b.launch().unwrap().wait().unwrap();
    // `a` never ran; `b` ran twice on `shared`.
    assert_eq!(shared.download().unwrap(), vec![2u32; 64]);
    drop((b, pool));
    gpu.wait_idle().unwrap();
    assert_eq!(gpu.stats().buffers, base - 2, "a_only and extra released");

    let no_pool = {
        let step = gpu.kernel_glsl(STEP).unwrap();
        let mut r = gpu.graph_recorder().unwrap();
        r.run(&step, &[&shared], 64).unwrap();
        r.finish().unwrap()
    };
    assert!(!no_pool.has_pool() && no_pool.pool().is_none());
    let other = common::gpu();
    assert!(matches!(
        other.graph_recorder_in(&CapturePool::new(&gpu)),
        Err(Error::ForeignObject { .. })
    ));
    common::assert_clean(&gpu);
    common::assert_clean(&other);
}

fn a_only_is_still_held(gpu: &Device, base: i64) {
    assert_eq!(
        gpu.stats().buffers,
        base,
        "the pool (held by graph b) keeps a's buffers"
    );
}

#[test]
fn a_failed_launch_leaves_the_graph_launchable() {
    let gpu = common::gpu();
    let other = common::gpu();
    let step = gpu.kernel_glsl(STEP).unwrap();
    let x = gpu.alloc::<u32>(64).unwrap();
    let mut rec = gpu.graph_recorder().unwrap();
    rec.run(&step, &[&x], 64).unwrap();
    let graph = rec.finish().unwrap();

    let k2 = other.kernel_glsl(STEP).unwrap();
    let y = other.alloc::<u32>(64).unwrap();
    let mut b = other.batch().unwrap();
    b.run(&k2, &[&y], 64).unwrap();
    let foreign = b.submit_async().unwrap();
    let submissions = gpu.stats().submissions;
    assert!(matches!(
        graph.launch_after(&foreign),
        Err(Error::ForeignObject { .. })
    ));
    assert_eq!(graph.num_replays(), 0);
    assert_eq!(gpu.stats().submissions, submissions, "nothing submitted");
    let first = graph.launch().unwrap();
    let second = graph.launch_after(&first).unwrap();
    second.wait().unwrap();
    assert_eq!(graph.num_replays(), 2);
    assert_eq!(x.download().unwrap(), vec![2u32; 64]);
    foreign.wait().unwrap();

    let empty = gpu.graph_recorder().unwrap();
    assert!(matches!(empty.finish(), Err(Error::EmptyGraph)));
    assert!(matches!(
        gpu.params_with_slots(0u32, 0),
        Err(Error::ParamsSlots { requested: 0, .. })
    ));
    common::assert_clean(&gpu);
    common::assert_clean(&other);
}

#[test]
fn prewarm_runs_once_and_runs_no_commands() {
    let gpu = common::gpu();
    let step = gpu.kernel_glsl(STEP).unwrap();
    let record = gpu.kernel_glsl(RECORD).unwrap();
    let x = gpu.upload(&(0..64u32).collect::<Vec<_>>()).unwrap();
    let out = gpu.alloc::<u32>(2).unwrap();
    let p = gpu.params_with_slots(1u32, 4).unwrap();
    assert_eq!(p.slots(), 4);
    let graph = chain_graph(&gpu, &step, &record, &x, &out, &p, 2);
    assert!(!graph.is_prewarmed());
    let s0 = gpu.stats().submissions;
    graph.prewarm().unwrap();
    assert!(graph.is_prewarmed());
    let s1 = gpu.stats().submissions;
    graph.prewarm().unwrap();
    assert_eq!(
        gpu.stats().submissions,
        s1,
        "the second prewarm does nothing"
    );
    assert_eq!(s1 - s0, 1);
    assert_eq!(graph.num_replays(), 0);
    assert_eq!(out.download().unwrap(), vec![0, 0], "no command ran");
    // More launches than slots: the ring waits for its slots and every
    // launch still reads its own value.
    for l in 0..10u32 {
        p.set(l % 2);
        drop(graph.launch().unwrap());
    }
    gpu.wait_idle().unwrap();
    // Launch l made the chain 2 × (l + 1) steps long; out[l % 2] = twice that.
    assert_eq!(out.download().unwrap(), vec![2 * 2 * 9, 2 * 2 * 10]);
    assert_eq!(p.get(), 1);
    common::assert_clean(&gpu);
}

#[test]
fn device_loss_reaches_launches_and_dropping_still_works() {
    let gpu = common::gpu();
    let step = gpu.kernel_glsl(STEP).unwrap();
    let x = gpu.alloc::<u32>(64).unwrap();
    let p = gpu.params(0u32).unwrap();
    let mut rec = gpu.graph_recorder().unwrap();
    rec.run(&step, &[&x], 64).unwrap();
    let graph = rec.finish().unwrap();
    let before = graph.launch().unwrap();
    before.wait().unwrap();
    gpu.simulate_device_loss();
    assert!(graph.launch().unwrap_err().is_device_lost());
    assert!(graph.launch_after(&before).unwrap_err().is_device_lost());
    assert!(graph.prewarm().unwrap_err().is_device_lost());
    assert!(before.wait().unwrap_err().is_device_lost());
    assert_eq!(graph.num_replays(), 1);
    drop((graph, p, x, step));
}

/// x[i] += k, k read from a uniform parameter shared by several graphs.
const ADD_SHARED: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer X { uint x[]; };
layout(set = 0, binding = 1) uniform S { uint k; } shared_p;
void main() { x[gl_GlobalInvocationID.x] += shared_p.k; }
"#;

#[test]
fn threads_launch_graphs_sharing_a_parameter() {
    let gpu = common::gpu();
    let add = gpu.kernel_glsl(ADD_SHARED).unwrap();
    let record = gpu.kernel_glsl(RECORD).unwrap();
    let shared = gpu.params(3u32).unwrap();
    let launches = 50u32;
    std::thread::scope(|s| {
        for t in 0..4 {
            let (gpu, add, record, shared) = (&gpu, &add, &record, &shared);
            s.spawn(move || {
                // x starts as 0..64 as RECORD expects; out[l] = 2 × 3 × (l + 1).
                let x = gpu.upload(&(0..64u32).collect::<Vec<_>>()).unwrap();
                let out = gpu.alloc::<u32>(launches as usize).unwrap();
                let own = gpu.params(0u32).unwrap();
                let mut rec = gpu.graph_recorder().unwrap();
                rec.run(add, &[&x, shared], 64).unwrap();
                rec.barrier();
                rec.run(record, &[&x, &out, &own], 1).unwrap();
                let graph = rec.finish().unwrap();
                for l in 0..launches {
                    own.set(l);
                    drop(graph.launch().unwrap());
                }
                let got = out.download().unwrap();
                let want: Vec<u32> = (0..launches).map(|l| 2 * 3 * (l + 1)).collect();
                assert_eq!(got, want, "thread {t}");
            });
        }
    });
    common::assert_clean(&gpu);
}

#[test]
fn a_profiled_graph_times_its_latest_launch() {
    let gpu = common::gpu();
    let step = gpu.kernel_glsl(STEP).unwrap();
    let x = gpu.alloc::<u32>(64).unwrap();
    let record = |profiling| {
        let mut rec = gpu.graph_recorder_with(profiling).unwrap();
        for _ in 0..10 {
            rec.run(&step, &[&x], 64).unwrap();
            rec.barrier();
        }
        rec.finish().unwrap()
    };
    let plain = record(Profiling::Off);
    let whole = record(Profiling::Batch);
    let each = record(Profiling::Commands);
    assert!(matches!(
        whole.last_profile(),
        Err(Error::Unsupported { .. })
    ));
    for round in 0..3 {
        let t = whole.launch().unwrap();
        t.wait().unwrap();
        let p = whole.last_profile().unwrap();
        assert!(p.total_ns > 0.0, "round {round}: {p:?}");
        assert!(p.commands.is_empty());
        drop(each.launch().unwrap());
        let p = each.last_profile().unwrap();
        assert_eq!(p.commands.len(), 10, "round {round}");
        assert!(p.total_ns > 0.0);
    }
    drop(plain.launch().unwrap());
    assert!(matches!(
        plain.last_profile(),
        Err(Error::Unsupported { .. })
    ));
    assert_eq!(x.download().unwrap(), vec![10 * 7; 64]);
    drop((whole, each));
    gpu.wait_idle().unwrap();
    assert_eq!(gpu.stats().query_pools, 0, "released with the graphs");
    common::assert_clean(&gpu);
}

/// Waits on launches are paced by the graph's learned duration: zero until
/// a wait sees a launch complete, then about a launch's time; a wait on
/// work already done teaches nothing; paced waits (and one on a joined
/// ticket, which is not paced) return with the work done, also on a
/// device whose waits never spin.
#[test]
fn waits_on_launches_learn_the_launch_duration() {
    for spin in [None, Some(std::time::Duration::ZERO)] {
        let gpu = match spin {
            None => common::gpu(),
            Some(s) => common::gpu_with(DeviceOptions {
                wait_spin: s,
                ..Default::default()
            }),
        };
        let x = gpu.alloc::<u32>(64).unwrap();
        let iters = if quick() { 20_000u32 } else { 100_000 };
        let graph = slow_graph(&gpu, &x, 2, iters);
        assert_eq!(graph.learned_duration(), std::time::Duration::ZERO);
        let mut steps = 0;
        for i in 0..4 {
            let t = Instant::now();
            graph.launch().unwrap().wait().unwrap();
            let whole = t.elapsed();
            steps += 2;
            assert_eq!(x.download().unwrap(), vec![steps; 64], "launch {i}");
            let learned = graph.learned_duration();
            assert!(
                !learned.is_zero() && learned <= whole,
                "launch {i} (spin {spin:?}): learned {learned:?}, the launch and wait took {whole:?}"
            );
        }
        // Work already done when the wait begins: nothing learned.
        let learned = graph.learned_duration();
        let t = graph.launch().unwrap();
        while !t.is_ready().unwrap() {
            std::thread::yield_now();
        }
        t.wait().unwrap();
        assert_eq!(graph.learned_duration(), learned);
        // A joined ticket waits unpaced.
        let a = graph.launch().unwrap();
        let b = graph.launch().unwrap();
        a.join(&b).unwrap().wait().unwrap();
        steps += 6;
        assert_eq!(x.download().unwrap(), vec![steps; 64]);
        drop(graph);
        drop(x);
        common::assert_clean(&gpu);
    }
}
