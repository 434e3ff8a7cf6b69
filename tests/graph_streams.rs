//! Graphs on streams: launches on several streams stay ordered with each
//! other, tickets from other streams (joined or not) gate a launch, the
//! buffers a launch uses are marked on its queue (host access and other
//! streams wait for it), and waits named while recording are refused.
//! Lavapipe has one queue, so its streams share it: there these tests check
//! results and ordering; on a GPU with several compute queues the same
//! checks cover the GPU-side waits between queues.

mod common;

use std::time::{Duration, Instant};

use vkcompute::{Buffer, Device, Error, Graph, Kernel, Params, Stream, Ticket};

/// x[i] += 1 over 64 elements, after a loop the compiler cannot drop (an
/// LCG run `iters` times that never lands on the sentinel), so launches
/// stay in flight while later ones are submitted.
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

/// out[p.launch] = x[0] + (x[63] - 63): twice the steps made so far (x
/// starts as 0..64), read at both ends.
const RECORD: &str = r#"
#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) readonly buffer X { uint x[]; };
layout(set = 0, binding = 1) buffer O { uint o[]; };
layout(set = 0, binding = 2) uniform P { uint launch; } p;
void main() { o[p.launch] = x[0] + x[63] - 63u; }
"#;

/// c[i] += 1 for every element.
const INC: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer C { uint c[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < c.length()) c[i] += 1u;
}
"#;

const ITERS: u32 = 20_000;

/// `steps` dependent slow steps on `x`, then RECORD into `out` at `p`.
fn chain(
    gpu: &Device,
    slow: &Kernel,
    record: &Kernel,
    x: &Buffer<u32>,
    out: &Buffer<u32>,
    p: &Params<u32>,
    steps: usize,
) -> Graph {
    let mut rec = gpu.graph_recorder().unwrap();
    for _ in 0..steps {
        rec.run_with_push_constants(slow, &[x], 64, &ITERS.to_le_bytes())
            .unwrap();
        rec.barrier();
    }
    rec.run(record, &[x, out, p], 1).unwrap();
    rec.finish().unwrap()
}

/// Waits until `t` is ready or a few seconds pass; whether it became ready.
fn ready_within(t: &Ticket, limit: Duration) -> bool {
    t.wait_timeout(limit).is_ok()
}

#[test]
fn launches_alternating_over_streams_run_in_launch_order() {
    let gpu = common::gpu();
    let slow = gpu.kernel_glsl(SLOW_STEP).unwrap();
    let record = gpu.kernel_glsl(RECORD).unwrap();
    let streams = [gpu.stream().unwrap(), gpu.stream().unwrap()];
    let launches = 12u32;
    let steps = 3;
    let x = gpu.upload(&(0..64u32).collect::<Vec<_>>()).unwrap();
    let out = gpu.alloc::<u32>(launches as usize).unwrap();
    let p = gpu.params(0u32).unwrap();
    let graph = chain(&gpu, &slow, &record, &x, &out, &p, steps);
    let mut tickets = Vec::new();
    for l in 0..launches {
        p.set(l);
        // Two streams in turn, and every third launch the graph's own
        // (the device's default stream).
        let t = if l % 3 == 2 {
            graph.launch().unwrap()
        } else {
            let s = &streams[l as usize % 2];
            let t = graph.launch_on(s).unwrap();
            assert_eq!(
                t.queue_id(),
                s.queue_id(),
                "the ticket is of the stream's queue"
            );
            t
        };
        tickets.push(t);
    }
    p.set(u32::MAX);
    // Any launch's completion implies its predecessors' (each waited for the
    // one before on the GPU): waiting for the last alone is enough.
    tickets.last().unwrap().wait().unwrap();
    for (l, t) in tickets.iter().enumerate() {
        assert!(t.is_ready().unwrap(), "launch {l} not done after the last");
    }
    let got = out.download().unwrap();
    for (l, v) in got.iter().enumerate() {
        assert_eq!(
            *v,
            2 * steps as u32 * (l as u32 + 1),
            "launch {l} saw another number of steps before it: launches overlapped or ran out of order"
        );
    }
    let xs = x.download().unwrap();
    assert_eq!(xs[0], steps as u32 * launches);
    assert_eq!(graph.num_replays(), u64::from(launches));
    common::assert_clean(&gpu);
}

#[test]
fn a_graph_recorded_on_a_stream_launches_there() {
    let gpu = common::gpu();
    let inc = gpu.kernel_glsl(INC).unwrap();
    let s = gpu.stream().unwrap();
    let x = gpu.alloc::<u32>(64).unwrap();
    let mut rec = s.graph_recorder().unwrap();
    rec.run(&inc, &[&x], 64).unwrap();
    let graph = rec.finish().unwrap();
    assert_eq!(graph.queue_id(), s.queue_id());
    // A batch on the stream, then the launch: the stream's order alone puts
    // the launch after the batch.
    let mut b = s.batch().unwrap();
    b.fill(&x, 40).unwrap();
    drop(b.submit_async().unwrap());
    let t = graph.launch().unwrap();
    assert_eq!(t.queue_id(), s.queue_id());
    t.wait().unwrap();
    assert_eq!(x.download().unwrap(), vec![41; 64]);
    common::assert_clean(&gpu);
}

#[test]
fn launch_after_waits_for_a_ticket_of_another_stream() {
    let gpu = common::gpu();
    let inc = gpu.kernel_glsl(INC).unwrap();
    let (a, b) = (gpu.stream().unwrap(), gpu.stream().unwrap());
    let gate = gpu.event().unwrap();
    let u = gpu.alloc::<u32>(64).unwrap();
    let v = gpu.alloc::<u32>(64).unwrap();
    // Stream a: held on the GPU until the host sets the gate.
    let mut first = a.batch().unwrap();
    first.wait_event(&gate, 1).unwrap();
    first.run(&inc, &[&u], 64).unwrap();
    let ta = first.submit_async().unwrap();
    // A graph on stream b that shares no buffer with a's batch: only the
    // ticket orders it.
    let mut rec = b.graph_recorder().unwrap();
    rec.run(&inc, &[&v], 64).unwrap();
    let graph = rec.finish().unwrap();
    let t = graph.launch_after(&ta).unwrap();
    assert_eq!(t.queue_id(), b.queue_id());
    assert!(
        !ready_within(&t, Duration::from_millis(100)),
        "the launch completed before the ticket it waits for"
    );
    gate.set(1).unwrap();
    t.wait().unwrap();
    assert!(ta.is_ready().unwrap());
    assert_eq!(u.download().unwrap(), vec![1; 64]);
    assert_eq!(v.download().unwrap(), vec![1; 64]);
    // On the default stream too (launch_on_after names the stream).
    let d = gpu.default_stream();
    let t2 = graph.launch_on_after(&d, &t).unwrap();
    assert_eq!(t2.queue_id(), d.queue_id());
    t2.wait().unwrap();
    assert_eq!(v.download().unwrap(), vec![2; 64]);
    common::assert_clean(&gpu);
}

#[test]
fn launch_after_a_joined_ticket_waits_for_every_stream() {
    let gpu = common::gpu();
    let inc = gpu.kernel_glsl(INC).unwrap();
    let (a, b, c) = (
        gpu.stream().unwrap(),
        gpu.stream().unwrap(),
        gpu.stream().unwrap(),
    );
    let gates = [gpu.event().unwrap(), gpu.event().unwrap()];
    let bufs = [gpu.alloc::<u32>(64).unwrap(), gpu.alloc::<u32>(64).unwrap()];
    let mut tickets = Vec::new();
    for ((s, gate), buf) in [&a, &b].into_iter().zip(&gates).zip(&bufs) {
        let mut batch = s.batch().unwrap();
        batch.wait_event(gate, 1).unwrap();
        batch.run(&inc, &[buf], 64).unwrap();
        tickets.push(batch.submit_async().unwrap());
    }
    let joined = tickets[0].join(&tickets[1]).unwrap();
    let out = gpu.alloc::<u32>(64).unwrap();
    let mut rec = c.graph_recorder().unwrap();
    rec.run(&inc, &[&out], 64).unwrap();
    let graph = rec.finish().unwrap();
    let t = graph.launch_after(&joined).unwrap();
    // The second gate first: the launch still waits for the first stream.
    gates[1].set(1).unwrap();
    assert!(
        !ready_within(&t, Duration::from_millis(100)),
        "the launch completed with one of the joined tickets pending"
    );
    gates[0].set(1).unwrap();
    t.wait().unwrap();
    assert!(tickets.iter().all(|t| t.is_ready().unwrap()));
    for b in &bufs {
        assert_eq!(b.download().unwrap(), vec![1; 64]);
    }
    assert_eq!(out.download().unwrap(), vec![1; 64]);
    common::assert_clean(&gpu);
}

#[test]
fn a_launch_marks_its_buffers_on_its_queue() {
    let gpu = common::gpu();
    let base = gpu.stats();
    let slow = gpu.kernel_glsl(SLOW_STEP).unwrap();
    let (a, b) = (gpu.stream().unwrap(), gpu.stream().unwrap());
    let x = gpu.alloc::<u32>(64).unwrap();
    let y = gpu.alloc::<u32>(64).unwrap();
    let mut rec = gpu.graph_recorder().unwrap();
    for _ in 0..4 {
        rec.run_with_push_constants(&slow, &[&x], 64, &(10 * ITERS).to_le_bytes())
            .unwrap();
        rec.barrier();
    }
    let graph = rec.finish().unwrap();
    // Host access after a launch on another stream waits for it.
    drop(graph.launch_on(&a).unwrap());
    assert_eq!(x.download().unwrap(), vec![4; 64]);
    // Another stream's batch reading the buffer waits for the launch (the
    // shared-buffer rule), with no ticket named.
    drop(graph.launch_on(&a).unwrap());
    let mut copy = b.batch().unwrap();
    copy.copy(&x, &y).unwrap();
    copy.submit().unwrap();
    assert_eq!(y.download().unwrap(), vec![8; 64]);
    // Dropping the graph and the buffer while a launch runs on stream a
    // frees nothing early and does not block.
    let last = graph.launch_on(&a).unwrap();
    let t = Instant::now();
    drop(graph);
    drop(x);
    let dropped = t.elapsed();
    assert!(
        !last.is_ready().unwrap(),
        "the launch finished before the drops returned ({dropped:?}); make the kernel slower"
    );
    assert!(gpu.stats().deferred > 0, "nothing waits for the launch");
    last.wait().unwrap();
    drop(y);
    gpu.wait_idle().unwrap();
    let after = gpu.stats();
    assert_eq!(after.buffers, base.buffers);
    assert_eq!(after.deferred, 0);
    common::assert_clean(&gpu);
}

#[test]
fn waits_named_while_recording_a_graph_are_refused() {
    let gpu = common::gpu();
    let inc = gpu.kernel_glsl(INC).unwrap();
    let x = gpu.alloc::<u32>(64).unwrap();
    let s = gpu.stream().unwrap();
    let mut b = s.batch().unwrap();
    b.fill(&x, 1).unwrap();
    let t = b.submit_async().unwrap();
    let ev = gpu.event().unwrap();
    let mut rec = gpu.graph_recorder().unwrap();
    assert!(matches!(
        rec.wait_for(&t),
        Err(Error::WaitInGraph {
            what: "Batch::wait_for"
        })
    ));
    rec.run(&inc, &[&x], 64).unwrap();
    assert!(matches!(
        rec.wait_event(&ev, 1),
        Err(Error::WaitInGraph {
            what: "Batch::wait_event"
        })
    ));
    // The recording goes on, and the ticket is named at launch instead.
    rec.barrier();
    rec.run(&inc, &[&x], 64).unwrap();
    let graph = rec.finish().unwrap();
    graph.launch_after(&t).unwrap().wait().unwrap();
    assert_eq!(x.download().unwrap(), vec![3; 64]);
    // A stream of another device is refused, and nothing was launched.
    let other = common::gpu();
    let foreign = other.stream().unwrap();
    assert!(matches!(
        graph.launch_on(&foreign),
        Err(Error::ForeignObject { .. })
    ));
    assert_eq!(graph.num_replays(), 1);
    common::assert_clean(&gpu);
    common::assert_clean(&other);
}

/// Launches on two streams from two threads at once: each thread's
/// launches of one shared graph stay ordered with the other's.
#[test]
fn threads_launch_one_graph_on_their_own_streams() {
    let gpu = common::gpu();
    let inc = gpu.kernel_glsl(INC).unwrap();
    let x = gpu.alloc::<u32>(64).unwrap();
    let mut rec = gpu.graph_recorder().unwrap();
    for _ in 0..8 {
        rec.run(&inc, &[&x], 64).unwrap();
        rec.barrier();
    }
    let graph = rec.finish().unwrap();
    let per_thread = 25u32;
    let streams: Vec<Stream> = (0..2).map(|_| gpu.stream().unwrap()).collect();
    std::thread::scope(|sc| {
        for s in &streams {
            let graph = &graph;
            sc.spawn(move || {
                for _ in 0..per_thread {
                    drop(graph.launch_on(s).unwrap());
                }
            });
        }
    });
    for s in &streams {
        s.synchronize().unwrap();
    }
    // Lost updates would show if two launches ever overlapped.
    assert_eq!(x.download().unwrap(), vec![8 * 2 * per_thread; 64]);
    assert_eq!(graph.num_replays(), u64::from(2 * per_thread));
    common::assert_clean(&gpu);
}

/// Two graphs sharing one `Params`, launched alternately on two streams:
/// each launch reads the value it was launched with (the copies into the
/// shared fixed buffer are ordered across the streams' queues).
#[test]
fn graphs_sharing_a_parameter_on_two_streams_each_read_their_value() {
    let gpu = common::gpu();
    let slow = gpu.kernel_glsl(SLOW_STEP).unwrap();
    let record = gpu.kernel_glsl(RECORD).unwrap();
    let (a, b) = (gpu.stream().unwrap(), gpu.stream().unwrap());
    let launches = 16u32;
    let p = gpu.params_with_slots(0u32, 4).unwrap();
    let xs = [
        gpu.upload(&(0..64u32).collect::<Vec<_>>()).unwrap(),
        gpu.upload(&(0..64u32).collect::<Vec<_>>()).unwrap(),
    ];
    let out = gpu.alloc::<u32>(launches as usize).unwrap();
    let graphs = [
        chain(&gpu, &slow, &record, &xs[0], &out, &p, 1),
        chain(&gpu, &slow, &record, &xs[1], &out, &p, 1),
    ];
    for l in 0..launches {
        // Launch l writes out[l]; graph l % 2 on stream l / 2 % 2, so every
        // pairing of graph and stream occurs.
        p.set(l);
        let s = if (l / 2) % 2 == 0 { &a } else { &b };
        drop(graphs[l as usize % 2].launch_on(s).unwrap());
    }
    p.set(u32::MAX);
    a.synchronize().unwrap();
    b.synchronize().unwrap();
    let got = out.download().unwrap();
    for (l, v) in got.iter().enumerate() {
        // Graph l % 2 has made l / 2 + 1 steps by launch l.
        assert_eq!(
            *v,
            2 * (l as u32 / 2 + 1),
            "launch {l} read another launch's value"
        );
    }
    common::assert_clean(&gpu);
}
