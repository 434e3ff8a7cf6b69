//! Tickets: waiting, polling, timeouts, dropping tickets and buffers while
//! their work is in flight, and host reads that wait for the GPU.

mod common;
use common::glsl::SPIN;
use common::*;
use vkcompute_measure::spin::xorshift_n;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use vkcompute::{BatchOptions, Buffer, Device, Error, Kernel, Ticket};

/// x[i] = x[i] * 3 + c.
const TRIPLE_PLUS: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer X { uint x[]; };
layout(push_constant) uniform P { uint c; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < x.length()) x[i] = x[i] * 3u + c;
}
"#;

/// Rounds per invocation in one dispatch of the long job (below
/// lavapipe's loop cap).
const ITERS: u32 = 60_000;
/// Invocations of the long job: one dispatch takes about 0.5 s on lavapipe
/// on two cores (measured 0.53 s alone), about 1 ms on an H200.
const LONG_N: usize = 16_384;
/// How long the long job runs at least, so that waits of a few ms
/// reliably find it running on any device.
const LONG_JOB: Duration = Duration::from_millis(500);
/// At most this many dispatches in one long job.
const MAX_DISPATCHES: u32 = 20_000;

struct LongJob {
    buf: Buffer<u32>,
    want: Vec<u32>,
    ticket: Ticket,
}

/// Records `dispatches` runs of SPIN over `buf`, each after a barrier, in
/// one submission.
fn submit_spin(gpu: &Device, k: &Kernel, buf: &Buffer<u32>, dispatches: u32) -> Ticket {
    let mut b = gpu.batch_with(BatchOptions::single_submit()).unwrap();
    for _ in 0..dispatches {
        b.run_with_push_constants(k, &[buf], LONG_N as u32, &ITERS.to_le_bytes())
            .unwrap();
        b.barrier();
    }
    b.submit_async().unwrap()
}

/// How many dispatches of ITERS rounds over LONG_N invocations take at
/// least LONG_JOB on this adapter: one dispatch is timed (twice where it is
/// quick, so the second runs at raised clocks), once per test binary.
fn long_job_dispatches(gpu: &Device) -> u32 {
    static DISPATCHES: OnceLock<u32> = OnceLock::new();
    *DISPATCHES.get_or_init(|| {
        let k = gpu.kernel_glsl(SPIN).unwrap();
        let buf = gpu.upload(&vec![1u32; LONG_N]).unwrap();
        let mut once = Duration::MAX;
        for _ in 0..2 {
            let start = Instant::now();
            submit_spin(gpu, &k, &buf, 1).wait().unwrap();
            once = once.min(start.elapsed());
            if once > LONG_JOB / 10 {
                break;
            }
        }
        let n = LONG_JOB.as_secs_f64() / once.as_secs_f64().max(1e-9);
        let dispatches = (n.ceil() as u32).clamp(1, MAX_DISPATCHES);
        println!(
            "long job on {:?}: one dispatch in {once:?}, {dispatches} dispatches",
            gpu.info().name
        );
        dispatches
    })
}

/// Submits the long job (at least ~0.5 s of GPU work) on fresh seeds and
/// returns without waiting.
fn long_job(gpu: &Device, seed: u64) -> LongJob {
    let dispatches = long_job_dispatches(gpu);
    let k = gpu.kernel_glsl(SPIN).unwrap();
    let mut rng = Rng::new(seed);
    let seeds: Vec<u32> = (0..LONG_N).map(|_| rng.next_u64() as u32 | 1).collect();
    let buf = gpu.upload(&seeds).unwrap();
    let ticket = submit_spin(gpu, &k, &buf, dispatches);
    LongJob {
        want: xorshift_n(&seeds, u64::from(ITERS) * u64::from(dispatches)),
        buf,
        ticket,
    }
}

#[test]
fn cpu_reference_matches_plain_iteration() {
    let mut v = 12345u32;
    for _ in 0..1000 {
        v ^= v << 13;
        v ^= v >> 17;
        v ^= v << 5;
    }
    assert_eq!(xorshift_n(&[12345], 1000), vec![v]);
    assert_eq!(xorshift_n(&[7], 0), vec![7]);
    // Counts as large as a long job's total compose: n = a + b.
    let a = u64::from(ITERS) * 7919;
    let b = u64::from(ITERS) * u64::from(MAX_DISPATCHES);
    assert_eq!(
        xorshift_n(&xorshift_n(&[v, 1], a), b),
        xorshift_n(&[v, 1], a + b)
    );
}

#[test]
fn short_job_matches_the_reference() {
    let gpu = gpu();
    let k = gpu.kernel_glsl(SPIN).unwrap();
    let seeds: Vec<u32> = (1..=1000).collect();
    let buf = gpu.upload(&seeds).unwrap();
    let mut b = gpu.batch().unwrap();
    b.run_with_push_constants(&k, &[&buf], 1000, &777u32.to_le_bytes())
        .unwrap();
    b.submit_async().unwrap().wait().unwrap();
    assert_eq!(buf.download().unwrap(), xorshift_n(&seeds, 777));
    assert_clean(&gpu);
}

#[test]
fn submit_async_then_wait_and_poll() {
    let gpu = gpu();
    let k = gpu.kernel_glsl(TRIPLE_PLUS).unwrap();
    let x = gpu.upload(&(0..5000u32).collect::<Vec<_>>()).unwrap();
    let mut b = gpu.batch().unwrap();
    b.run_with_push_constants(&k, &[&x], 5000, &7u32.to_le_bytes())
        .unwrap();
    let t1 = b.submit_async().unwrap();
    t1.wait().unwrap();
    assert!(t1.is_ready().unwrap());
    t1.wait().unwrap(); // waiting again returns at once
    t1.wait_timeout(Duration::ZERO).unwrap();
    let want: Vec<u32> = (0..5000).map(|v| v * 3 + 7).collect();
    assert_eq!(x.download().unwrap(), want);

    // Polling alone eventually sees completion.
    let mut b = gpu.batch().unwrap();
    b.run_with_push_constants(&k, &[&x], 5000, &1u32.to_le_bytes())
        .unwrap();
    let t2 = b.submit_async().unwrap();
    assert!(t2.timeline_value() > t1.timeline_value());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !t2.is_ready().unwrap() {
        assert!(Instant::now() < deadline, "is_ready never became true");
        std::thread::sleep(Duration::from_millis(1));
    }
    let want: Vec<u32> = want.iter().map(|v| v * 3 + 1).collect();
    assert_eq!(x.download().unwrap(), want);

    // An empty batch gives a ticket that is ready.
    let t3 = gpu.batch().unwrap().submit_async().unwrap();
    t3.wait().unwrap();
    assert!(t3.is_ready().unwrap());
    assert_clean(&gpu);
}

#[test]
fn wait_timeout_on_a_long_job() {
    let gpu = gpu();
    let job = long_job(&gpu, 1);
    assert!(
        !job.ticket.is_ready().unwrap(),
        "the long job finished at once"
    );
    let start = Instant::now();
    match job.ticket.wait_timeout(Duration::from_millis(30)) {
        Err(Error::Timeout { waited }) => {
            assert!(waited >= Duration::from_millis(25), "{waited:?}");
            assert!(
                start.elapsed() < Duration::from_millis(400),
                "{:?}",
                start.elapsed()
            );
        }
        other => panic!("expected Timeout, got {other:?}"),
    }
    // A zero timeout does not block either.
    assert!(matches!(
        job.ticket.wait_timeout(Duration::ZERO),
        Err(Error::Timeout { .. })
    ));
    assert!(!job.ticket.is_ready().unwrap());
    // The ticket stays valid: a full wait succeeds with the right result.
    let start = Instant::now();
    job.ticket.wait().unwrap();
    let took = start.elapsed();
    assert!(job.ticket.is_ready().unwrap());
    job.ticket.wait_timeout(Duration::ZERO).unwrap();
    assert_eq!(job.buf.download().unwrap(), job.want);
    println!("long job finished {took:?} after the timeouts");
    assert_clean(&gpu);
}

#[test]
fn dropping_an_unfinished_ticket_does_not_block() {
    let gpu = gpu();
    let LongJob { buf, want, ticket } = long_job(&gpu, 2);
    assert!(!ticket.is_ready().unwrap());
    let start = Instant::now();
    drop(ticket);
    let dropped = start.elapsed();
    // The buffer's download waits for the work the dropped ticket tracked.
    let start = Instant::now();
    let got = buf.download().unwrap();
    let waited = start.elapsed();
    assert_eq!(got, want);
    println!("drop took {dropped:?}, the download then waited {waited:?}");
    assert!(dropped < Duration::from_millis(50), "drop took {dropped:?}");
    assert!(
        dropped * 4 < waited,
        "drop ({dropped:?}) should return long before the work ends ({waited:?})"
    );
    assert_clean(&gpu);
}

#[test]
fn download_right_after_submit_async_sees_the_result() {
    let gpu = gpu();
    let job = long_job(&gpu, 3);
    // No wait: the download itself waits for the batch.
    assert_eq!(job.buf.download().unwrap(), job.want);
    assert!(job.ticket.is_ready().unwrap());

    // The same for a chain of quick batches, each read back at once.
    let k = gpu.kernel_glsl(TRIPLE_PLUS).unwrap();
    let x = gpu.upload(&vec![1u32; 3000]).unwrap();
    let mut want = 1u32;
    for c in 0..20u32 {
        let mut b = gpu.batch().unwrap();
        b.run_with_push_constants(&k, &[&x], 3000, &c.to_le_bytes())
            .unwrap();
        let _ticket = b.submit_async().unwrap();
        want = want.wrapping_mul(3).wrapping_add(c);
        assert_eq!(x.read_range(2990..).unwrap(), vec![want; 10], "batch {c}");
    }
    // Writing from the host also waits for the batch, not just reading.
    let mut b = gpu.batch().unwrap();
    b.run_with_push_constants(&k, &[&x], 3000, &0u32.to_le_bytes())
        .unwrap();
    let _ticket = b.submit_async().unwrap();
    x.write(0, &[5, 5]).unwrap();
    let got = x.download().unwrap();
    assert_eq!(&got[..2], &[5, 5]);
    assert!(got[2..].iter().all(|&v| v == want.wrapping_mul(3)));
    assert_clean(&gpu);
}

#[test]
fn dropping_buffers_while_their_batch_runs() {
    let gpu = gpu();
    let base = gpu.stats();
    let LongJob { buf, ticket, .. } = long_job(&gpu, 4);
    let k = gpu.kernel_glsl(TRIPLE_PLUS).unwrap();
    let extra = gpu.upload(&vec![2u32; 4096]).unwrap();
    let mut b = gpu.batch().unwrap();
    b.run_with_push_constants(&k, &[&extra], 4096, &1u32.to_le_bytes())
        .unwrap();
    let ticket2 = b.submit_async().unwrap();
    // The only handles go away while the GPU still uses them.
    drop(buf);
    drop(extra);
    drop(ticket);
    drop(ticket2);
    let s = gpu.stats();
    assert!(s.deferred >= 2, "nothing parked while in flight: {s:?}");
    assert_eq!(
        s.buffers,
        base.buffers + 2,
        "buffers freed under the GPU: {s:?}"
    );

    // Keep using the device: new buffers of the same sizes (the allocator
    // must not hand out the parked memory), new batches, reads and writes.
    let again = gpu.upload(&vec![9u32; LONG_N]).unwrap();
    let other = gpu.upload(&vec![4u32; 4096]).unwrap();
    let mut b = gpu.batch().unwrap();
    b.run_with_push_constants(&k, &[&again], LONG_N as u32, &2u32.to_le_bytes())
        .unwrap();
    b.run_with_push_constants(&k, &[&other], 4096, &0u32.to_le_bytes())
        .unwrap();
    b.submit().unwrap();
    assert_eq!(again.download().unwrap(), vec![29; LONG_N]);
    assert_eq!(other.download().unwrap(), vec![12; 4096]);

    // Once idle, everything parked is released.
    gpu.wait_idle().unwrap();
    drop((again, other));
    let s = gpu.stats();
    assert_eq!(s.buffers, base.buffers, "{s:?}");
    assert_eq!(s.deferred, 0, "{s:?}");
    assert_clean(&gpu);
}

/// Submits `count` quick batches, each on its own buffer.
fn many(gpu: &Device, k: &Kernel, count: u32) -> Vec<(Buffer<u32>, Ticket, u32)> {
    (0..count)
        .map(|i| {
            let x = gpu.upload(&vec![i; 2048]).unwrap();
            let mut b = gpu.batch().unwrap();
            b.run_with_push_constants(k, &[&x], 2048, &i.to_le_bytes())
                .unwrap();
            b.barrier();
            b.run_with_push_constants(k, &[&x], 2048, &1u32.to_le_bytes())
                .unwrap();
            let t = b.submit_async().unwrap();
            (x, t, (i * 3 + i) * 3 + 1)
        })
        .collect()
}

#[test]
fn tickets_dropped_in_any_order() {
    let gpu = gpu();
    let k = gpu.kernel_glsl(TRIPLE_PLUS).unwrap();

    // Reverse order.
    let mut jobs = many(&gpu, &k, 12);
    let mut tickets: Vec<Ticket> = Vec::new();
    let mut bufs = Vec::new();
    for (x, t, want) in jobs.drain(..) {
        tickets.push(t);
        bufs.push((x, want));
    }
    while let Some(t) = tickets.pop() {
        drop(t);
    }
    for (x, want) in &bufs {
        assert_eq!(x.download().unwrap(), vec![*want; 2048]);
    }

    // Random order, some waited on first, some not.
    let mut rng = Rng::new(17);
    let mut jobs = many(&gpu, &k, 16);
    while !jobs.is_empty() {
        let i = rng.below(jobs.len() as u64) as usize;
        let (x, t, want) = jobs.swap_remove(i);
        if rng.below(2) == 0 {
            t.wait().unwrap();
        }
        drop(t);
        assert_eq!(x.download().unwrap(), vec![want; 2048]);
    }

    // Waiting on the last ticket means every earlier one is done too.
    let jobs = many(&gpu, &k, 10);
    jobs.last().unwrap().1.wait().unwrap();
    for (x, t, want) in &jobs {
        assert!(t.is_ready().unwrap());
        assert_eq!(x.download().unwrap(), vec![*want; 2048]);
    }
    // Tickets and buffers dropped in an order unrelated to submission.
    let mut jobs = many(&gpu, &k, 10);
    let mut rng = Rng::new(3);
    while !jobs.is_empty() {
        let i = rng.below(jobs.len() as u64) as usize;
        drop(jobs.swap_remove(i));
    }
    gpu.wait_idle().unwrap();
    assert_eq!(gpu.stats().deferred, 0);
    assert_clean(&gpu);
}

#[test]
fn a_ticket_outlives_its_batch_buffers_and_device_handle() {
    let gpu = gpu();
    let keep = gpu.clone();
    let job = long_job(&gpu, 5);
    let LongJob { buf, want, ticket } = job;
    drop(gpu);
    let reader = buf.clone();
    drop(buf);
    ticket.wait().unwrap();
    assert_eq!(reader.download().unwrap(), want);
    assert_eq!(reader.device().id(), keep.id());
    drop(ticket);
    assert_clean(&keep);
}
