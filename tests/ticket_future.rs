//! Tickets as futures: under tokio and with no runtime, deadlines, device
//! loss, and dropping the device with futures pending.

mod common;
use common::glsl::INC;
use common::*;

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use vkcompute::{Device, Error, Event, Ticket};

/// The ticket of an empty batch that waits on the GPU for `event` to reach
/// `value`: complete once the host set it (and earlier work finished).
fn gate(gpu: &Device, event: &Event, value: u64) -> Ticket {
    let mut b = gpu.batch().unwrap();
    b.wait_event(event, value).unwrap();
    b.submit_async().unwrap()
}

/// Fails the test on any validation message except the layer's own
/// `UNASSIGNED-VkSemaphore-state-timeout`, which the Khronos layer on CI
/// (Debian's) raises now and then for a submission that waits on a value
/// the host signals later ("wait before signal", which Vulkan allows, and
/// which an empty batch gated by `Batch::wait_event` is): the message itself says "This is most
/// likely a validation bug".
fn assert_clean_but_gate_bug(gpu: &Device) {
    let msgs: Vec<String> = gpu
        .validation_messages()
        .into_iter()
        .filter(|m| !m.contains("UNASSIGNED-VkSemaphore-state-timeout"))
        .collect();
    assert!(
        msgs.is_empty(),
        "validation messages:\n{}",
        msgs.join("\n---\n")
    );
    let n = gpu.validation_message_count();
    assert!(
        n <= 64,
        "{n} validation messages (only 64 are kept to check)"
    );
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("a tokio runtime")
}

/// `batches` tickets of dispatches that each add 1 to every element of a
/// 64-element counter, all gated behind `gate` (nothing runs before the
/// host sets value 1 on the returned event).
fn gated_tickets(
    gpu: &Device,
    batches: usize,
) -> (Event, Ticket, Vec<Ticket>, vkcompute::Buffer<u32>) {
    let timeline = gpu.event().unwrap();
    let gate = gate(gpu, &timeline, 1);
    let counter = gpu.alloc::<u32>(64).unwrap();
    let inc = gpu.kernel_glsl(INC).unwrap();
    let tickets = (0..batches)
        .map(|_| {
            let mut b = gpu.batch().unwrap();
            b.run(&inc, &[&counter], 64).unwrap();
            b.submit_async().unwrap()
        })
        .collect();
    (timeline, gate, tickets, counter)
}

#[test]
fn ten_thousand_concurrent_futures_under_tokio() {
    let gpu = gpu();
    let counter = gpu.alloc::<u32>(64).unwrap();
    let inc = gpu.kernel_glsl(INC).unwrap();
    let tickets: Vec<Arc<Ticket>> = (0..100)
        .map(|_| {
            let mut b = gpu.batch().unwrap();
            b.run(&inc, &[&counter], 64).unwrap();
            Arc::new(b.submit_async().unwrap())
        })
        .collect();
    let rt = runtime();
    let done = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..10_000)
        .map(|i| {
            let t = tickets[i % tickets.len()].clone();
            let done = done.clone();
            rt.spawn(async move {
                let r = if i % 2 == 0 {
                    t.wait_async().await
                } else {
                    t.with_deadline(Duration::from_secs(120)).await
                };
                done.fetch_add(1, Ordering::Relaxed);
                r
            })
        })
        .collect();
    rt.block_on(async {
        for h in handles {
            h.await.expect("task").expect("future");
        }
    });
    assert_eq!(done.load(Ordering::Relaxed), 10_000);
    for t in &tickets {
        assert!(t.is_ready().unwrap());
    }
    // Owned tickets await too.
    let last = Arc::try_unwrap(tickets.into_iter().last().unwrap()).unwrap();
    rt.block_on(last).unwrap();
    assert_eq!(counter.download().unwrap(), vec![100u32; 64]);
    assert_clean(&gpu);
}

#[test]
fn a_deadline_resolves_a_ticket_that_never_completes() {
    let gpu = gpu();
    let timeline = gpu.event().unwrap();
    let ticket = gate(&gpu, &timeline, 7);
    let rt = runtime();
    let t0 = Instant::now();
    let r = rt.block_on(ticket.with_deadline(Duration::from_millis(150)));
    let took = t0.elapsed();
    match r {
        Err(Error::Timeout { waited }) => {
            assert!(waited >= Duration::from_millis(150), "{waited:?}");
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(
        took < Duration::from_secs(5),
        "the deadline fired late: {took:?}"
    );
    // The ticket stays valid; a host-side event wait times out the same way.
    assert!(!ticket.is_ready().unwrap());
    let r = rt.block_on(timeline.with_deadline(7, Duration::from_millis(20)));
    assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
    // Setting a value at or below the current one is refused.
    timeline.set(3).unwrap();
    assert!(matches!(
        timeline.set(3),
        Err(Error::EventValue {
            value: 3,
            current: 3,
            ..
        })
    ));
    assert!(!ticket.is_ready().unwrap());
    timeline.set(7).unwrap();
    rt.block_on(timeline.wait_async(7)).unwrap();
    rt.block_on(ticket).unwrap();
    assert_clean_but_gate_bug(&gpu);
}

#[test]
fn device_loss_resolves_pending_futures() {
    let gpu = gpu();
    let (timeline, gate, tickets, _counter) = gated_tickets(&gpu, 4);
    let rt = runtime();
    let mut all = vec![gate];
    all.extend(tickets);
    let handles: Vec<_> = all.into_iter().map(|t| rt.spawn(t)).collect();
    let host_wait = {
        let tl = Arc::new(timeline);
        let tl2 = tl.clone();
        (tl, rt.spawn(async move { tl2.wait_async(1).await }))
    };
    std::thread::sleep(Duration::from_millis(50));
    assert!(handles.iter().all(|h| !h.is_finished()));
    gpu.simulate_device_loss();
    rt.block_on(async {
        for h in handles {
            let r = tokio::time::timeout(Duration::from_secs(5), h)
                .await
                .expect("device loss did not reach a pending future")
                .expect("task");
            assert!(matches!(r, Err(Error::DeviceLost { .. })), "{r:?}");
        }
        let r = tokio::time::timeout(Duration::from_secs(5), host_wait.1)
            .await
            .expect("device loss did not reach a timeline future")
            .expect("task");
        assert!(matches!(r, Err(Error::DeviceLost { .. })), "{r:?}");
    });
    // A future made after the loss resolves at once.
    let (tl, _) = host_wait;
    let r = rt.block_on(tl.wait_async(1));
    assert!(matches!(r, Err(Error::DeviceLost { .. })), "{r:?}");
    // Dropping the timeline releases the gated work, so the device drains.
    drop(tl);
    drop(gpu);
}

#[test]
fn dropping_the_device_with_futures_pending_neither_hangs_nor_crashes() {
    let t0 = Instant::now();
    {
        // Tasks still pending when the user's device handle goes: they
        // finish once the work runs.
        let gpu = gpu();
        let (timeline, gate, tickets, counter) = gated_tickets(&gpu, 8);
        let rt = runtime();
        let handles: Vec<_> = tickets.into_iter().map(|t| rt.spawn(t)).collect();
        drop(gpu);
        std::thread::sleep(Duration::from_millis(20));
        timeline.set(1).unwrap();
        rt.block_on(async {
            for h in handles {
                h.await.expect("task").expect("future");
            }
        });
        drop(gate);
        assert_eq!(counter.download().unwrap(), vec![8u32; 64]);
    }
    {
        // The runtime goes first, dropping registered futures; then the
        // timeline (releasing the gated work) and the device.
        let gpu = gpu();
        let (timeline, gate, tickets, counter) = gated_tickets(&gpu, 8);
        let rt = runtime();
        for t in tickets {
            rt.spawn(t);
        }
        rt.spawn(async move { gate.with_deadline(Duration::from_secs(600)).await });
        std::thread::sleep(Duration::from_millis(20));
        rt.shutdown_timeout(Duration::from_secs(5));
        drop(timeline);
        drop(counter);
        assert_clean_but_gate_bug(&gpu);
        drop(gpu);
    }
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
}

/// A waker that unparks the thread that made it.
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// The smallest executor: poll, park until woken.
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
fn a_ticket_awaits_with_no_runtime() {
    let gpu = gpu();
    let (timeline, gate, tickets, counter) = gated_tickets(&gpu, 3);
    let signaller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        timeline.set(1).unwrap();
        timeline
    });
    for t in tickets {
        block_on(t).unwrap();
    }
    block_on(gate.wait_async()).unwrap();
    assert!(gate.is_ready().unwrap());
    drop(signaller.join().unwrap());
    assert_eq!(counter.download().unwrap(), vec![3u32; 64]);
    // An already complete ticket resolves on its first poll.
    block_on(gate).unwrap();
    assert_clean_but_gate_bug(&gpu);
}
