//! A batch is one unit of its stream's order, whatever the chunking: a
//! batch that submits while an earlier batch of the same stream is still
//! open (it submitted chunks as it grew) runs after the whole open batch,
//! never between its chunks. Two and three interleaved batches, from one
//! thread and from two, a batch dropped in the middle, the typed error of a
//! wait that could never end (the open batch belongs to the waiting
//! thread), host access to a buffer a deferred batch uses, tickets named
//! by other batches, futures and graph launches.

mod common;
use common::glsl::INC;
use common::*;

use std::future::Future;
use std::pin::pin;
use std::sync::mpsc;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use vkcompute::{Batch, BatchOptions, Buffer, Device, Error, Kernel, Stream};

const N: usize = 64;

/// x[i] *= 2.
const DOUBLE: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer X { uint x[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < x.length()) x[i] *= 2u;
}
"#;

/// Options that submit a chunk after 4 commands, then every 8.
fn early_chunks() -> BatchOptions {
    BatchOptions {
        first_chunk: 4,
        max_chunk: 8,
        ..Default::default()
    }
}

struct Kit {
    inc: Kernel,
    double: Kernel,
    x: Buffer<u32>,
}

fn kit(gpu: &Device) -> Kit {
    Kit {
        inc: gpu.kernel_glsl(INC).unwrap(),
        double: gpu.kernel_glsl(DOUBLE).unwrap(),
        x: gpu.upload(&[0u32; N]).unwrap(),
    }
}

/// A batch on `s` with `times` × `x += 1`, chunked early, left open (its
/// first chunks are submitted as it grows).
fn open_incs(s: &Stream, k: &Kit, times: u32) -> Batch {
    let mut b = s.batch_with(early_chunks()).unwrap();
    for _ in 0..times {
        b.run(&k.inc, &[&k.x], N as u32).unwrap().barrier();
    }
    b
}

/// A batch on `s` with `times` × `x *= 2`.
fn doubles(s: &Stream, k: &Kit, times: u32, options: BatchOptions) -> Batch {
    let mut b = s.batch_with(options).unwrap();
    for _ in 0..times {
        b.run(&k.double, &[&k.x], N as u32).unwrap().barrier();
    }
    b
}

fn all(x: &Buffer<u32>) -> u32 {
    let v = x.download().unwrap();
    assert!(v.iter().all(|&e| e == v[0]), "elements differ: {v:?}");
    v[0]
}

#[test]
fn two_batches_interleaved_on_one_thread_run_whole() {
    let gpu = gpu();
    let k = kit(&gpu);
    for s in [gpu.default_stream(), gpu.stream().unwrap()] {
        k.x.write(0, &[0u32; N]).unwrap();
        let a = open_incs(&s, &k, 40);
        let tb = doubles(&s, &k, 1, BatchOptions::default())
            .submit_async()
            .unwrap();
        let ta = a.submit_async().unwrap();
        ta.wait().unwrap();
        tb.wait().unwrap();
        // A whole, then B: (0 + 40) * 2. Interleaved chunks give 56.
        assert_eq!(all(&k.x), 80, "batch B ran between batch A's chunks");
    }
    assert_clean(&gpu);
}

#[test]
fn two_batches_interleaved_on_two_threads_run_whole() {
    let gpu = gpu();
    let k = Arc::new(kit(&gpu));
    let s = gpu.stream().unwrap();
    let a = open_incs(&s, &k, 40);
    let (sent, got) = mpsc::channel();
    let (k2, s2) = (k.clone(), s.clone());
    let other = std::thread::spawn(move || {
        let tb = doubles(&s2, &k2, 1, BatchOptions::default())
            .submit_async()
            .unwrap();
        sent.send(()).unwrap();
        // Blocks until the main thread ends batch A (its owner is another
        // thread, so this is no deadlock).
        tb.wait().unwrap();
    });
    got.recv().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let ta = a.submit_async().unwrap();
    other.join().unwrap();
    ta.wait().unwrap();
    assert_eq!(all(&k.x), 80, "batch B ran between batch A's chunks");
    assert_clean(&gpu);
}

#[test]
fn three_batches_interleaved_run_in_the_order_they_first_submitted() {
    let gpu = gpu();
    let k = kit(&gpu);
    let s = gpu.stream().unwrap();
    // A open; B whole; C submits chunks while A is open, then records more
    // (still open when A ends), then submits.
    let a = open_incs(&s, &k, 40);
    let tb = doubles(&s, &k, 1, BatchOptions::default())
        .submit_async()
        .unwrap();
    let mut c = open_incs(&s, &k, 10);
    let ta = a.submit_async().unwrap();
    for _ in 0..10 {
        c.run(&k.inc, &[&k.x], N as u32).unwrap().barrier();
    }
    let tc = c.submit_async().unwrap();
    tc.wait().unwrap();
    assert!(ta.is_ready().unwrap() && tb.is_ready().unwrap());
    assert_eq!(all(&k.x), 40 * 2 + 20);
    assert_clean(&gpu);
}

#[test]
fn three_batches_from_two_threads_run_whole() {
    let gpu = gpu();
    let k = Arc::new(kit(&gpu));
    let s = gpu.stream().unwrap();
    let a = open_incs(&s, &k, 40);
    let (k2, s2) = (k.clone(), s.clone());
    let (sent, got) = mpsc::channel();
    let other = std::thread::spawn(move || {
        let tb = doubles(&s2, &k2, 1, BatchOptions::default())
            .submit_async()
            .unwrap();
        let tc = open_incs(&s2, &k2, 20).submit_async().unwrap();
        sent.send(()).unwrap();
        tb.join(&tc).unwrap().wait().unwrap();
    });
    got.recv().unwrap();
    let ta = a.submit_async().unwrap();
    other.join().unwrap();
    ta.wait().unwrap();
    assert_eq!(all(&k.x), 40 * 2 + 20);
    assert_clean(&gpu);
}

#[test]
fn a_batch_dropped_in_the_middle_keeps_its_submitted_chunks_in_place() {
    let gpu = gpu();
    let k = kit(&gpu);
    let s = gpu.stream().unwrap();
    let a = open_incs(&s, &k, 40);
    // D: one chunk of 4 doublings submitted (held back behind A), 2 more
    // recorded and discarded by the drop.
    let mut d = doubles(&s, &k, 6, early_chunks());
    d.barrier();
    drop(d);
    // A batch dropped before it submitted anything takes no place.
    drop(doubles(&s, &k, 3, BatchOptions::default()));
    let tb = doubles(&s, &k, 1, BatchOptions::default())
        .submit_async()
        .unwrap();
    drop(a.submit_async().unwrap());
    tb.wait().unwrap();
    assert_eq!(all(&k.x), 40 * 16 * 2);

    // The open batch itself dropped: what it submitted stays, and the
    // batch held back behind it is submitted by the drop.
    k.x.write(0, &[0u32; N]).unwrap();
    let a = open_incs(&s, &k, 40);
    let tb = doubles(&s, &k, 1, BatchOptions::default())
        .submit_async()
        .unwrap();
    drop(a);
    tb.wait().unwrap();
    let v = all(&k.x);
    assert!(
        v % 2 == 0 && (4..40).contains(&(v / 2)),
        "A's submitted chunks then B: {v}"
    );
    assert_clean(&gpu);
}

#[test]
fn waiting_on_a_batch_held_back_by_this_threads_open_batch_is_an_error() {
    let gpu = gpu();
    let k = kit(&gpu);
    let s = gpu.stream().unwrap();
    let a = open_incs(&s, &k, 40);
    let mut b = doubles(&s, &k, 1, BatchOptions::default());
    let rb = b.read(&k.x).unwrap();
    let tb = b.submit_async().unwrap();
    assert!(!tb.is_ready().unwrap());
    assert!(rb.is_submitted());
    let held = |e: Error| matches!(e, Error::BatchHeldOpen { .. });
    let e = tb.wait().unwrap_err();
    assert!(held(e.clone()), "{e}");
    assert!(e.to_string().contains("stream"), "{e}");
    assert!(held(tb.wait_timeout(Duration::from_secs(5)).unwrap_err()));
    assert!(held(block_on(tb.wait_async()).unwrap_err()));
    assert!(held(s.synchronize().unwrap_err()));
    // Host access to a buffer the held-back batch uses would read data
    // that batch has not written yet.
    assert!(held(k.x.download().unwrap_err()));
    // Another stream cannot order after a ticket that has no value yet;
    // the same stream can (it runs after B anyway).
    let other = gpu.stream().unwrap();
    let mut c = other.batch().unwrap();
    assert!(held(c.wait_for(&tb).unwrap_err()));
    let mut same = s.batch().unwrap();
    same.wait_for(&tb).unwrap();
    same.run(&k.inc, &[&k.x], N as u32).unwrap();
    let tsame = same.submit_async().unwrap();
    let ta = a.submit_async().unwrap();
    tb.wait().unwrap();
    assert_eq!(rb.wait().unwrap(), vec![80u32; N]);
    assert!(tb.timeline_value() > ta.timeline_value());
    tsame.wait().unwrap();
    block_on(tb.wait_async()).unwrap();
    drop(c);
    assert_eq!(all(&k.x), 40 * 2 + 1);
    assert_clean(&gpu);
}

#[test]
fn a_graph_launch_is_a_batch_of_its_stream() {
    let gpu = gpu();
    let k = kit(&gpu);
    let s = gpu.stream().unwrap();
    let mut rec = s.graph_recorder().unwrap();
    rec.run(&k.double, &[&k.x], N as u32).unwrap();
    let g = Arc::new(rec.finish().unwrap());
    // Same thread: the launch could never be placed behind A.
    let a = open_incs(&s, &k, 40);
    let e = g.launch().unwrap_err();
    assert!(matches!(e, Error::BatchHeldOpen { .. }), "{e}");
    // Another thread: the launch waits for A to end.
    let g2 = g.clone();
    let other = std::thread::spawn(move || g2.launch().unwrap().wait().unwrap());
    std::thread::sleep(Duration::from_millis(50));
    drop(a.submit_async().unwrap());
    other.join().unwrap();
    assert_eq!(all(&k.x), 80);
    drop(g);
    assert_clean(&gpu);
}

struct Unpark(std::thread::Thread);
impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `f` to completion on this thread.
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

#[test]
fn an_op_batch_execute_is_a_batch_of_the_default_stream() {
    let gpu = gpu();
    let k = kit(&gpu);
    let s = gpu.default_stream();
    let mut ops = gpu.ops();
    let y = ops.upload(&[1.0f32, 2.0, 3.0]).unwrap();
    let z = ops.add(&y, &y).unwrap();
    let a = open_incs(&s, &k, 40);
    // The execute's batch goes to the default stream behind A.
    let t = ops.execute().unwrap();
    assert!(!t.is_ready().unwrap());
    let e = t.wait().unwrap_err();
    assert!(matches!(e, Error::BatchHeldOpen { .. }), "{e}");
    assert!(t.timeline_value() == 0);
    let ta = a.submit_async().unwrap();
    t.wait().unwrap();
    assert!(t.timeline_value() > ta.timeline_value());
    assert_eq!(ops.read(&z).unwrap(), [2.0, 4.0, 6.0]);
    assert_eq!(all(&k.x), 40);
    assert_clean(&gpu);
}

#[test]
fn another_thread_waits_for_a_held_back_batch_with_futures_and_deadlines() {
    let gpu = gpu();
    let k = kit(&gpu);
    let s = gpu.stream().unwrap();
    let a = open_incs(&s, &k, 40);
    let tb = doubles(&s, &k, 1, BatchOptions::default())
        .submit_async()
        .unwrap();
    let (sent, got) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let e = tb.wait_timeout(Duration::from_millis(20)).unwrap_err();
        assert!(matches!(e, Error::Timeout { .. }), "{e}");
        let e = block_on(tb.with_deadline(Duration::ZERO)).unwrap_err();
        assert!(matches!(e, Error::Timeout { .. }), "{e}");
        sent.send(()).unwrap();
        // Woken when A ends and B reaches the queue, then by the GPU.
        block_on(tb.wait_async()).unwrap();
        tb
    });
    got.recv().unwrap();
    let ta = a.submit_async().unwrap();
    let tb = waiter.join().unwrap();
    assert!(tb.is_ready().unwrap() && ta.is_ready().unwrap());
    assert_eq!(all(&k.x), 80);
    assert_clean(&gpu);
}
