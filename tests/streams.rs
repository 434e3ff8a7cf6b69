//! Streams: ordering within a stream, across streams by tickets (joined or
//! not), the automatic wait for buffers two streams share, the transfer
//! queue, device loss, and (on a GPU with several compute queues) overlap
//! between streams. Lavapipe has one queue, so its streams share it: there
//! these tests check ordering and results; overlap is skipped.

mod common;
use common::glsl::{INC, SPIN};
use common::*;

use std::time::{Duration, Instant};

use vkcompute::{BatchOptions, Buffer, Device, DeviceOptions, Error, Kernel, Stream, Ticket};

const N: usize = 256;

/// `times` batches on `stream`, each adding 1 to every element of `buf`;
/// no host wait. Returns the last batch's ticket.
fn inc_batches(stream: &Stream, k: &Kernel, buf: &Buffer<u32>, times: u32) -> Ticket {
    let mut last = None;
    for _ in 0..times {
        let mut b = stream.batch().unwrap();
        b.run(k, &[buf], buf.len() as u32).unwrap();
        last = Some(b.submit_async().unwrap());
    }
    last.expect("times > 0")
}

#[test]
fn batches_on_a_stream_run_in_order_and_streams_are_independent() {
    let gpu = gpu();
    let k = gpu.kernel_glsl(INC).unwrap();
    let (a, b) = (gpu.stream().unwrap(), gpu.stream().unwrap());
    let xa = gpu.upload(&vec![0u32; N]).unwrap();
    let xb = gpu.upload(&vec![100u32; N]).unwrap();
    // Interleaved submissions, each stream a dependent chain.
    let mut ta = None;
    let mut tb = None;
    for _ in 0..12 {
        ta = Some(inc_batches(&a, &k, &xa, 1));
        tb = Some(inc_batches(&b, &k, &xb, 1));
    }
    let (ta, tb) = (ta.unwrap(), tb.unwrap());
    b.synchronize().unwrap();
    a.synchronize().unwrap();
    assert!(ta.is_ready().unwrap() && tb.is_ready().unwrap());
    assert_eq!(ta.queue_id(), a.queue_id());
    assert_eq!(xa.download().unwrap(), vec![12u32; N]);
    assert_eq!(xb.download().unwrap(), vec![112u32; N]);
    assert_clean(&gpu);
}

#[test]
fn wait_for_orders_a_batch_after_another_stream_on_the_gpu() {
    let gpu = gpu();
    let k = gpu.kernel_glsl(INC).unwrap();
    let (a, b) = (gpu.stream().unwrap(), gpu.stream().unwrap());
    let x = gpu.upload(&vec![0u32; N]).unwrap();
    let y = gpu.alloc::<u32>(N).unwrap();
    let gate = gpu.event().unwrap();
    // a: held by the event, then x += 3.
    let mut first = a.batch().unwrap();
    first.wait_event(&gate, 1).unwrap();
    first.run(&k, &[&x], N as u32).unwrap();
    let ta = first.submit_async().unwrap();
    let ta = ta.join(&inc_batches(&a, &k, &x, 2)).unwrap();
    // b: after a (named), y = x, then y += 1.
    let mut second = b.batch().unwrap();
    second.wait_for(&ta).unwrap();
    second.copy(&x, &y).unwrap().barrier();
    second.run(&k, &[&y], N as u32).unwrap();
    let tb = second.submit_async().unwrap();
    std::thread::sleep(Duration::from_millis(30));
    assert!(!ta.is_ready().unwrap(), "a ran before its event was set");
    assert!(
        !tb.is_ready().unwrap(),
        "b ran before the ticket it waits for"
    );
    gate.set(1).unwrap();
    tb.wait().unwrap();
    assert!(ta.is_ready().unwrap());
    assert_eq!(y.download().unwrap(), vec![4u32; N]);
    assert_eq!(x.download().unwrap(), vec![3u32; N]);
    assert_clean(&gpu);
}

#[test]
fn waiting_on_a_ticket_never_blocks_another_stream() {
    let gpu = gpu();
    let k = gpu.kernel_glsl(INC).unwrap();
    let (a, c) = (gpu.stream().unwrap(), gpu.stream().unwrap());
    if a.shares_queue_with(&c) {
        skipped("one compute queue: streams share it, so a blocked stream holds up the other");
        return;
    }
    let gate = gpu.event().unwrap();
    let x = gpu.upload(&vec![0u32; N]).unwrap();
    let z = gpu.upload(&vec![0u32; N]).unwrap();
    let mut blocked = a.batch().unwrap();
    blocked.wait_event(&gate, 1).unwrap();
    blocked.run(&k, &[&x], N as u32).unwrap();
    let ta = blocked.submit_async().unwrap();
    // c shares nothing with a: it completes while a is held.
    let tc = inc_batches(&c, &k, &z, 3);
    tc.wait_timeout(Duration::from_secs(10))
        .expect("a stream on another queue was held up by a blocked stream");
    assert!(!ta.is_ready().unwrap());
    gate.set(1).unwrap();
    ta.wait().unwrap();
    assert_eq!(z.download().unwrap(), vec![3u32; N]);
    assert_eq!(x.download().unwrap(), vec![1u32; N]);
    assert_clean(&gpu);
}

#[test]
fn a_joined_ticket_waits_for_all() {
    let gpu = gpu();
    let k = gpu.kernel_glsl(INC).unwrap();
    let (a, b, c) = (
        gpu.stream().unwrap(),
        gpu.stream().unwrap(),
        gpu.stream().unwrap(),
    );
    let (e1, e2) = (gpu.event().unwrap(), gpu.event().unwrap());
    let x1 = gpu.upload(&vec![10u32; N]).unwrap();
    let x2 = gpu.upload(&vec![20u32; N]).unwrap();
    let y1 = gpu.alloc::<u32>(N).unwrap();
    let y2 = gpu.alloc::<u32>(N).unwrap();
    let held = |s: &Stream, e: &vkcompute::Event, x: &Buffer<u32>| {
        let mut bt = s.batch().unwrap();
        bt.wait_event(e, 1).unwrap();
        bt.run(&k, &[x], N as u32).unwrap();
        bt.submit_async().unwrap()
    };
    let ta = held(&a, &e1, &x1);
    let tb = held(&b, &e2, &x2);
    let both = Ticket::join_all(&[&ta, &tb]).unwrap();
    assert_eq!(both.queue_id(), ta.queue_id());
    assert!(both.timeline_value() >= ta.timeline_value());
    let mut last = c.batch().unwrap();
    last.wait_for(&both).unwrap();
    last.copy(&x1, &y1).unwrap();
    last.copy(&x2, &y2).unwrap();
    let tc = last.submit_async().unwrap();
    e1.set(1).unwrap();
    ta.wait().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(
        !both.is_ready().unwrap(),
        "the join completed with one part pending"
    );
    assert!(!tc.is_ready().unwrap(), "a batch ran before all of a join");
    e2.set(1).unwrap();
    tc.wait().unwrap();
    assert!(both.is_ready().unwrap() && tb.is_ready().unwrap());
    assert_eq!(y1.download().unwrap(), vec![11u32; N]);
    assert_eq!(y2.download().unwrap(), vec![21u32; N]);
    // An empty batch that names a ticket completes after it.
    let mut empty = c.batch().unwrap();
    empty.wait_for(&tc).unwrap();
    empty.submit_async().unwrap().wait().unwrap();
    assert!(matches!(
        Ticket::join_all(&[]),
        Err(Error::BadTicket { .. })
    ));
    assert_clean(&gpu);
}

#[test]
fn buffers_shared_by_streams_are_ordered_by_submission() {
    // The rule: a use of a buffer that another stream also uses waits on
    // the GPU for that stream's earlier conflicting use (a write for every
    // earlier use, a read for earlier writes). No ticket is named here; the
    // validation layer's synchronization checks and the values tell.
    let gpu = gpu();
    let k = gpu.kernel_glsl(INC).unwrap();
    let (a, b) = (gpu.stream().unwrap(), gpu.stream().unwrap());
    let x = gpu.upload(&vec![0u32; N]).unwrap();
    let y = gpu.alloc::<u32>(N).unwrap();
    let z = gpu.alloc::<u32>(N).unwrap();
    let gate = gpu.event().unwrap();
    // a: held, then x += 5 over five batches (writes).
    let mut first = a.batch().unwrap();
    first.wait_event(&gate, 1).unwrap();
    first.run(&k, &[&x], N as u32).unwrap();
    let _held = first.submit_async().unwrap();
    let ta = inc_batches(&a, &k, &x, 4);
    // b reads x (read after write) ...
    let mut read = b.batch().unwrap();
    read.copy(&x, &y).unwrap();
    let tb = read.submit_async().unwrap();
    // ... then a reads x into z while b overwrites x (write after read).
    let mut snap = a.batch().unwrap();
    snap.copy(&x, &z).unwrap();
    let _snap = snap.submit_async().unwrap();
    let mut over = b.batch().unwrap();
    over.fill(&x, 99).unwrap();
    let tover = over.submit_async().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(
        !tb.is_ready().unwrap(),
        "a read ran before the writes it follows"
    );
    gate.set(1).unwrap();
    tover.wait().unwrap();
    ta.wait().unwrap();
    assert_eq!(y.download().unwrap(), vec![5u32; N]);
    assert_eq!(z.download().unwrap(), vec![5u32; N]);
    assert_eq!(x.download().unwrap(), vec![99u32; N]);
    assert_clean(&gpu);
}

#[test]
fn streams_reading_one_buffer_do_not_wait_for_each_other_but_a_writer_does() {
    let gpu = gpu();
    let (a, b) = (gpu.stream().unwrap(), gpu.stream().unwrap());
    if a.shares_queue_with(&b) {
        skipped("one compute queue: a held stream holds up the other whatever they use");
        return;
    }
    let gate = gpu.event().unwrap();
    let r = gpu.upload(&vec![7u32; N]).unwrap();
    let (ya, yb) = (gpu.alloc::<u32>(N).unwrap(), gpu.alloc::<u32>(N).unwrap());
    // a reads r, held by the event.
    let mut held = a.batch().unwrap();
    held.wait_event(&gate, 1).unwrap();
    held.copy(&r, &ya).unwrap();
    let ta = held.submit_async().unwrap();
    // b reads r too: no conflict, so it completes while a is held.
    let mut read = b.batch().unwrap();
    read.copy(&r, &yb).unwrap();
    read.submit_async()
        .unwrap()
        .wait_timeout(Duration::from_secs(10))
        .expect("a read waited for another stream's read of the same buffer");
    // A write of r must wait for a's read.
    let mut write = b.batch().unwrap();
    write.fill(&r, 1).unwrap();
    let tw = write.submit_async().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(
        !tw.is_ready().unwrap(),
        "a write ran before another stream's read of the buffer"
    );
    gate.set(1).unwrap();
    tw.wait().unwrap();
    ta.wait().unwrap();
    assert_eq!(ya.download().unwrap(), vec![7u32; N]);
    assert_eq!(yb.download().unwrap(), vec![7u32; N]);
    assert_eq!(r.download().unwrap(), vec![1u32; N]);
    assert_clean(&gpu);
}

#[test]
fn host_and_transfer_queue_access_follow_stream_work() {
    let gpu = gpu();
    let k = gpu.kernel_glsl(INC).unwrap();
    let s = gpu.stream().unwrap();
    if !gpu.info().transfer_queue {
        skipped("no transfer-only queue (host transfers run on the compute queue here)");
    }
    for round in 0..3u32 {
        let x = gpu.upload(&vec![round; 4096]).unwrap();
        // Stream work, then a host read with no wait in between: the copy
        // (on the transfer queue where there is one) waits on the GPU for
        // the stream's queue.
        drop(inc_batches(&s, &k, &x, 7));
        assert_eq!(x.download().unwrap(), vec![round + 7; 4096]);
        // A host write, then stream work that reads it.
        x.write(0, &vec![1000 + round; 4096]).unwrap();
        let t = inc_batches(&s, &k, &x, 1);
        let mut ty = gpu.batch().unwrap();
        ty.wait_for(&t).unwrap();
        ty.run(&k, &[&x], 4096).unwrap();
        drop(ty.submit_async().unwrap());
        assert_eq!(x.download().unwrap(), vec![1002 + round; 4096]);
    }
    assert_clean(&gpu);
}

#[test]
fn streams_take_free_queues_first_and_give_them_back() {
    let gpu = gpu();
    let queues = gpu.stream_queue_count();
    assert!(queues >= 1);
    let default = gpu.default_stream();
    let streams: Vec<Stream> = (0..queues + 2).map(|_| gpu.stream().unwrap()).collect();
    // While there are free queues, each new stream gets its own (the
    // default stream holds the first).
    for (i, s) in streams.iter().enumerate().take(queues - 1) {
        assert!(
            !s.shares_queue_with(&default),
            "stream {i} shares the default queue"
        );
        for t in &streams[..i] {
            assert!(!s.shares_queue_with(t));
        }
    }
    if queues == 1 {
        skipped("one compute queue: every stream shares it");
        assert!(streams.iter().all(|s| s.shares_queue_with(&default)));
    }
    // A dropped stream's queue is the next one handed out.
    let freed = streams[0].queue_id();
    drop(streams);
    let again = gpu.stream().unwrap();
    if queues > 1 {
        assert_eq!(again.queue_id(), freed);
    }
    assert_clean(&gpu);
}

#[test]
fn device_loss_reaches_stream_batches() {
    let gpu = gpu();
    let k = gpu.kernel_glsl(INC).unwrap();
    let s = gpu.stream().unwrap();
    let x = gpu.upload(&vec![0u32; N]).unwrap();
    let t = inc_batches(&s, &k, &x, 2);
    t.wait().unwrap();
    let gate = gpu.event().unwrap();
    let mut pending = s.batch().unwrap();
    pending.run(&k, &[&x], N as u32).unwrap();
    gpu.simulate_device_loss();
    let lost = |r: vkcompute::Result<()>| matches!(r, Err(Error::DeviceLost { .. }));
    assert!(lost(pending.submit_async().map(|_| ())));
    assert!(lost(s.batch().map(|_| ())));
    assert!(lost(gpu.stream().map(|_| ())));
    assert!(lost(t.wait()));
    assert!(lost(s.synchronize()));
    assert!(lost(gate.set(1)));
    assert!(lost(gpu.event().map(|_| ())));
}

/// Median of `v` (sorted in place).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One short batch on `s` (recorded before the timer): submit → done, µs.
fn short_batch_us(s: &Stream, k: &Kernel, buf: &Buffer<u32>) -> f64 {
    let mut b = s.batch_with(BatchOptions::single_submit()).unwrap();
    b.run(k, &[buf], buf.len() as u32).unwrap();
    let t0 = Instant::now();
    b.submit_async().unwrap().wait().unwrap();
    t0.elapsed().as_secs_f64() * 1e6
}

#[test]
fn a_spinning_kernel_does_not_delay_a_short_batch_on_another_stream() {
    // The default device asks for two compute queues (the default
    // stream's and one other streams share); two streams of their own
    // need a third, so this test asks for four.
    let gpu = gpu_with(DeviceOptions {
        compute_queues: Some(4),
        ..DeviceOptions::default()
    });
    if is_lavapipe(&gpu) || gpu.stream_queue_count() < 3 {
        let queues = gpu.stream_queue_count();
        skipped(format!(
            "overlap between streams needs 3 or more compute queues; the adapter gave {queues}"
        ));
        return;
    }
    let (long_s, short_s) = (gpu.stream().unwrap(), gpu.stream().unwrap());
    assert!(!long_s.shares_queue_with(&short_s));
    let spin = gpu.kernel_glsl(SPIN).unwrap();
    let inc = gpu.kernel_glsl(INC).unwrap();
    let seeds = gpu.upload(&vec![1u32; 64]).unwrap();
    let small = gpu.upload(&vec![0u32; 1024]).unwrap();
    let long = |iters: u32| {
        let mut b = long_s.batch().unwrap();
        b.run_with_push_constants(&spin, &[&seeds], 64, &iters.to_le_bytes())
            .unwrap();
        b.submit_async().unwrap()
    };
    // Calibrate the spin to about 30 ms.
    let t0 = Instant::now();
    long(1 << 20).wait().unwrap();
    let per = t0.elapsed().as_secs_f64() / f64::from(1 << 20);
    let iters = ((0.03 / per) as u64).clamp(1 << 20, u64::from(u32::MAX)) as u32;
    let tries = 21;
    let mut solo: Vec<f64> = (0..tries)
        .map(|_| short_batch_us(&short_s, &inc, &small))
        .collect();
    let mut busy = Vec::new();
    let mut attempts = 0;
    while busy.len() < tries {
        attempts += 1;
        assert!(
            attempts <= tries + 20,
            "the spinning kernel ended before the short batch in {} of {attempts} tries",
            attempts - busy.len()
        );
        let tl = long(iters);
        std::thread::sleep(Duration::from_millis(2));
        let us = short_batch_us(&short_s, &inc, &small);
        // Counts only when the long kernel was still running throughout.
        if !tl.is_ready().unwrap() {
            busy.push(us);
        }
        tl.wait().unwrap();
    }
    let (solo, busy) = (median(&mut solo), median(&mut busy));
    println!(
        "short batch solo {solo:.1} µs, beside a spinning kernel {busy:.1} µs, ratio {:.2}",
        busy / solo
    );
    // Overlap is proven above without timing: every counted short batch
    // completed while the spinning kernel (about 30 ms) was still running,
    // which a stream held up behind it cannot do. The times are printed,
    // not held to a ratio: under the validation layer a submission costs
    // ~100 µs and varies 3× run to run (H100, 2026-11-25), so a ratio
    // would test the layer. The ratio goal (≤ 2× solo) is measured without
    // validation by `measure/examples/streams.rs` (docs/PERF.md). A short batch
    // that waited for the spin would take about 30 ms; 5 ms is far below
    // that and far above the ~350 µs seen beside the spin under validation.
    assert!(
        busy < 5_000.0,
        "a short batch took {busy:.1} µs beside a spinning kernel on another stream (solo {solo:.1} µs)"
    );
    // Every short batch ran once: solo tries and every attempt beside the spin.
    let runs = (tries + attempts) as u32;
    assert_eq!(small.download().unwrap(), vec![runs; 1024]);
    assert_clean(&gpu);
}

// The public types of streams and ordering are Send + Sync.
const _: () = {
    const fn check<T: Send + Sync>() {}
    check::<Stream>();
    check::<Ticket>();
    check::<vkcompute::Event>();
    check::<Device>();
};

#[test]
fn compute_queues_option_sets_how_many_queues_streams_spread_over() {
    // One queue asked for: every stream shares it, and work stays correct.
    let one = gpu_with(vkcompute::DeviceOptions {
        compute_queues: Some(1),
        ..Default::default()
    });
    assert_eq!(one.stream_queue_count(), 1);
    let (a, b) = (one.stream().unwrap(), one.stream().unwrap());
    assert!(a.shares_queue_with(&b) && a.shares_queue_with(&one.default_stream()));
    let k = one.kernel_glsl(INC).unwrap();
    let x = one.upload(&[0u32; 64]).unwrap();
    for s in [&a, &b] {
        let mut batch = s.batch().unwrap();
        batch.run(&k, &[&x], 64).unwrap();
        batch.submit().unwrap();
    }
    assert_eq!(x.download().unwrap(), vec![2u32; 64]);
    assert_clean(&one);
    drop((a, b, x, k));
    // The default: DEFAULT_COMPUTE_QUEUES, within what the family has.
    let gpu = gpu();
    let n = gpu.stream_queue_count();
    assert!(
        (1..=vkcompute::DEFAULT_COMPUTE_QUEUES as usize).contains(&n),
        "{n}"
    );
    if n < vkcompute::DEFAULT_COMPUTE_QUEUES as usize {
        skipped(format!(
            "the compute family has {n} queue(s), fewer than the default {}",
            vkcompute::DEFAULT_COMPUTE_QUEUES
        ));
    }
    assert_clean(&gpu);
}
