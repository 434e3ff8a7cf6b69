//! Host-signalled events: a batch waits on the GPU for a value the host
//! sets later; the rules for values; many waits on one submission (none
//! dropped); dropping an event that batches wait for, or that a dropped
//! future waited on.

mod common;
use common::glsl::INC;
use common::*;

use std::time::Duration;

use vkcompute::{Error, MAX_EVENT_STEP};

const N: usize = 512;

#[test]
fn a_batch_waits_for_the_host_to_set_an_event() {
    let gpu = gpu();
    let k = gpu.kernel_glsl(INC).unwrap();
    let x = gpu.upload(&vec![41u32; N]).unwrap();
    let ev = gpu.event().unwrap();
    assert_eq!(ev.value().unwrap(), 0);
    for (stream, start) in [(gpu.default_stream(), 0u64), (gpu.stream().unwrap(), 1)] {
        let mut b = stream.batch().unwrap();
        b.wait_event(&ev, start + 1).unwrap();
        b.run(&k, &[&x], N as u32).unwrap();
        let t = b.submit_async().unwrap();
        std::thread::sleep(Duration::from_millis(30));
        assert!(
            !t.is_ready().unwrap(),
            "the batch ran before the event was set"
        );
        assert!(matches!(
            t.wait_timeout(Duration::from_millis(10)),
            Err(Error::Timeout { .. })
        ));
        assert_eq!(ev.signal().unwrap(), start + 1);
        t.wait().unwrap();
        ev.wait_timeout(start + 1, Duration::from_secs(1)).unwrap();
    }
    assert_eq!(x.download().unwrap(), vec![43u32; N]);
    assert_clean(&gpu);
}

#[test]
fn event_values_only_grow_within_vulkans_step() {
    let gpu = gpu();
    let ev = gpu.event().unwrap();
    let bad = |r: vkcompute::Result<()>| matches!(r, Err(Error::EventValue { .. }));
    assert!(bad(ev.set(0)), "setting the current value");
    ev.set(5).unwrap();
    assert!(bad(ev.set(3)), "setting a lower value");
    assert!(bad(ev.set(5 + MAX_EVENT_STEP + 1)), "a step past the limit");
    assert_eq!(ev.signal().unwrap(), 6);
    assert_eq!(ev.value().unwrap(), 6);
    let mut b = gpu.batch().unwrap();
    assert!(bad(b.wait_event(&ev, 6 + MAX_EVENT_STEP + 1).map(|_| ())));
    // A value already reached: no wait at all.
    b.wait_event(&ev, 2).unwrap();
    b.submit_async().unwrap().wait().unwrap();
    assert!(matches!(
        ev.wait_timeout(7, Duration::from_millis(5)),
        Err(Error::Timeout { .. })
    ));
    assert_clean(&gpu);
}

#[test]
fn a_batch_waits_for_every_one_of_many_events() {
    // More waits than a submission holds inline: none may be dropped.
    let gpu = gpu();
    let k = gpu.kernel_glsl(INC).unwrap();
    let x = gpu.upload(&vec![0u32; N]).unwrap();
    let events: Vec<_> = (0..20).map(|_| gpu.event().unwrap()).collect();
    let mut b = gpu.stream().unwrap().batch().unwrap();
    for e in &events {
        b.wait_event(e, 1).unwrap();
    }
    b.run(&k, &[&x], N as u32).unwrap();
    let t = b.submit_async().unwrap();
    // Set all but one, in an order unlike the waits'.
    for i in (0..events.len()).rev().filter(|&i| i != 7) {
        events[i].set(1).unwrap();
    }
    std::thread::sleep(Duration::from_millis(30));
    assert!(
        !t.is_ready().unwrap(),
        "the batch ran with one of its events unset"
    );
    events[7].set(1).unwrap();
    t.wait().unwrap();
    assert_eq!(x.download().unwrap(), vec![1u32; N]);
    assert_clean(&gpu);
}

#[test]
fn dropping_an_event_releases_the_batches_that_wait_for_it() {
    let gpu = gpu();
    let k = gpu.kernel_glsl(INC).unwrap();
    let x = gpu.upload(&vec![0u32; N]).unwrap();
    let ev = gpu.event().unwrap();
    let mut b = gpu.batch().unwrap();
    b.wait_event(&ev, 3).unwrap();
    b.run(&k, &[&x], N as u32).unwrap();
    let t = b.submit_async().unwrap();
    let clone = ev.clone();
    drop(ev);
    assert!(!t.is_ready().unwrap(), "a clone still holds the event");
    drop(clone);
    t.wait_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(x.download().unwrap(), vec![1u32; N]);
    gpu.wait_idle().unwrap();
    let s = gpu.stats();
    assert_eq!(s.deferred, 0, "the event's semaphore was not released");
    assert_clean(&gpu);
}

#[test]
fn an_event_a_dropped_future_waited_on_can_be_dropped() {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    let gpu = gpu();
    let ev = gpu.event().unwrap();
    {
        // Registered with the waiter thread, then dropped unresolved: the
        // waiter still lists the semaphore.
        let mut f = std::pin::pin!(ev.with_deadline(5, Duration::from_secs(600)));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(f.as_mut().poll(&mut cx).is_pending());
    }
    drop(ev);
    // The waiter keeps polling its wait set; the semaphore must outlive it.
    std::thread::sleep(Duration::from_millis(30));
    let k = gpu.kernel_glsl(INC).unwrap();
    let x = gpu.upload(&vec![1u32; N]).unwrap();
    let mut b = gpu.batch().unwrap();
    b.run(&k, &[&x], N as u32).unwrap();
    b.submit().unwrap();
    assert_eq!(x.download().unwrap(), vec![2u32; N]);
    // A fresh event still awaits to completion.
    let ev = gpu.event().unwrap();
    ev.set(2).unwrap();
    let mut f = std::pin::pin!(ev.wait_async(2));
    let mut cx = Context::from_waker(Waker::noop());
    assert!(matches!(f.as_mut().poll(&mut cx), Poll::Ready(Ok(()))));
    assert_clean(&gpu);
}
