//! Tickets as futures under tokio, and what a future's wake-up costs.
//!
//! 1. Under tokio: 1,000 tasks await tickets of real batches (checked
//!    results), and a deadline resolves a ticket gated on the host.
//! 2. Wake-up latency, from a semaphore signal done on the host
//!    (`Event::set`, timed just before the call) to the waker
//!    running (it stamps the time): the waiter thread alone
//!    (`Event::wait_async`), and a ticket whose empty submission waits
//!    for the host value (an empty batch with `Batch::wait_event`; adds the
//!    GPU queue's own signal). Also from the signal to a tokio task resuming. p50/p90/p99.
//! 3. The waiter thread's CPU use while idle with one pending future, from
//!    `/proc/self/task/<tid>/schedstat` (ns on CPU) over 1 s.
//!
//! Goals: median wake-up ≤ 50 µs; idle waiter < 1% of a core.
//!
//! `cargo run --release -p vkcompute-measure --example async_tokio -- [--json PATH]`

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use vkcompute::{Device, Error, Event, Ticket};

const INC: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer C { uint c[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < c.length()) c[i] += 1u;
}
"#;

/// A waker that stamps when it runs and unparks the measuring thread.
struct Stamp {
    at: Mutex<Option<Instant>>,
    thread: std::thread::Thread,
}

impl Wake for Stamp {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        let now = Instant::now();
        let mut g = self.at.lock().unwrap();
        g.get_or_insert(now);
        drop(g);
        self.thread.unpark();
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

struct Dist {
    name: &'static str,
    us: Vec<f64>,
}

impl Dist {
    fn row(&self) -> String {
        let s = &self.us;
        format!(
            "{:<44} n={:<5} p50 {:>8.1}  p90 {:>8.1}  p99 {:>8.1}  max {:>8.1} µs",
            self.name,
            s.len(),
            percentile(s, 0.5),
            percentile(s, 0.9),
            percentile(s, 0.99),
            s.last().copied().unwrap_or(f64::NAN)
        )
    }
    fn json(&self) -> String {
        let s = &self.us;
        format!(
            "{{\"name\":\"{}\",\"n\":{},\"p50_us\":{:.2},\"p90_us\":{:.2},\"p99_us\":{:.2},\"max_us\":{:.2},\"min_us\":{:.2}}}",
            self.name,
            s.len(),
            percentile(s, 0.5),
            percentile(s, 0.9),
            percentile(s, 0.99),
            s.last().copied().unwrap_or(f64::NAN),
            s.first().copied().unwrap_or(f64::NAN)
        )
    }
}

/// A ticket of an empty batch that waits on the GPU for `event` to reach
/// `value`: complete once the host set it.
fn gate(gpu: &Device, event: &Event, value: u64) -> vkcompute::Result<Ticket> {
    let mut b = gpu.batch()?;
    b.wait_event(event, value)?;
    b.submit_async()
}

/// Signal → waker, `rounds` times. `make` gives the future for value `v`
/// (polled once before the signal, so it is registered with the waiter).
fn wake_latency<F, M>(tl: &Event, start: u64, rounds: u64, mut make: M) -> Vec<f64>
where
    F: Future<Output = vkcompute::Result<()>>,
    M: FnMut(u64) -> F,
{
    let mut out = Vec::with_capacity(rounds as usize);
    for v in start..start + rounds {
        let stamp = Arc::new(Stamp {
            at: Mutex::new(None),
            thread: std::thread::current(),
        });
        let waker = Waker::from(stamp.clone());
        let mut cx = Context::from_waker(&waker);
        let mut f = pin!(make(v));
        assert!(
            f.as_mut().poll(&mut cx).is_pending(),
            "value {v} completed before its signal"
        );
        // Let the waiter block in the driver, as it does in real use.
        std::thread::sleep(Duration::from_micros(300));
        let t0 = Instant::now();
        tl.set(v).expect("signal");
        let woke = loop {
            if let Some(t) = *stamp.at.lock().unwrap() {
                break t;
            }
            std::thread::park_timeout(Duration::from_millis(100));
        };
        match f.as_mut().poll(&mut cx) {
            Poll::Ready(Ok(())) => {}
            other => panic!("value {v}: woken but not ready: {other:?}"),
        }
        out.push(woke.saturating_duration_since(t0).as_secs_f64() * 1e6);
    }
    out.sort_by(f64::total_cmp);
    out
}

/// The waiter thread's id (its name is `vkcompute-waiter`, which `comm`
/// truncates).
fn waiter_tid() -> Option<String> {
    for e in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let tid = e.file_name().to_string_lossy().into_owned();
        let comm =
            std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).unwrap_or_default();
        // `comm` holds at most 15 bytes of the name.
        if comm.trim() == "vkcompute-waite" || comm.trim() == "vkcompute-waiter" {
            return Some(tid);
        }
    }
    None
}

/// Nanoseconds the thread has run, where it came from, and its voluntary
/// context switches (each one a wake-up): `schedstat` (ns) where the
/// kernel has it, else `stat` utime + stime (USER_HZ = 100 ticks/s on
/// Linux, so 10 ms resolution).
fn thread_cpu(tid: &str) -> Option<(u64, &'static str, u64)> {
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).ok()?;
    let switches = status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())?;
    if let Ok(sched) = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")) {
        let ns = sched.split_whitespace().next()?.parse().ok()?;
        return Some((ns, "schedstat", switches));
    }
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some((
        ticks * 10_000_000,
        "stat utime+stime (10 ms resolution)",
        switches,
    ))
}

fn main() -> vkcompute::Result<()> {
    let mut json_path = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--json" => json_path = args.next(),
            other => {
                eprintln!("unknown argument {other:?}; usage: async_tokio [--json PATH]");
                std::process::exit(2);
            }
        }
    }
    let quick = std::env::var_os("VKCOMPUTE_QUICK").is_some();
    let gpu = Device::new()?;
    println!("adapter: {} ({})", gpu.info().name, gpu.info().driver_name);

    // 1. Under tokio.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_time()
        .build()
        .expect("tokio runtime");
    let counter = gpu.alloc::<u32>(256)?;
    let inc = gpu.kernel_glsl(INC)?;
    let tasks = 1000;
    let done = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let mut b = gpu.batch()?;
        b.run(&inc, &[&counter], 256)?;
        let ticket = b.submit_async()?;
        let done = done.clone();
        handles.push(rt.spawn(async move {
            ticket.await?;
            done.fetch_add(1, Ordering::Relaxed);
            Ok::<(), Error>(())
        }));
    }
    rt.block_on(async {
        for h in handles {
            h.await.expect("task")?;
        }
        Ok::<(), Error>(())
    })?;
    let c = counter.download()?;
    assert!(
        c.iter().all(|&x| x == tasks as u32),
        "counter {:?}",
        &c[..4]
    );
    let gate_tl = gpu.event()?;
    let gated = gate(&gpu, &gate_tl, 1)?;
    let r = rt.block_on(gated.with_deadline(Duration::from_millis(20)));
    assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
    gate_tl.set(1)?;
    rt.block_on(gated)?;
    println!("tokio: {tasks} tasks awaited their tickets (results checked); a gated ticket timed out, then completed");

    // 2. Wake-up latency.
    let rounds: u64 = if quick { 50 } else { 2000 };
    let tl = gpu.event()?;
    let mut v = 0u64;
    // Warm-up (starts the waiter thread).
    let _ = wake_latency(&tl, v + 1, 20, |x| tl.wait_async(x));
    v += 20;
    let waiter = Dist {
        name: "host signal → waker (waiter thread)",
        us: wake_latency(&tl, v + 1, rounds, |x| tl.wait_async(x)),
    };
    v += rounds;
    let tickets: Vec<_> = (v + 1..v + 1 + rounds)
        .map(|x| gate(&gpu, &tl, x))
        .collect::<vkcompute::Result<_>>()?;
    let ticket = Dist {
        name: "host signal → waker (gated ticket)",
        us: wake_latency(&tl, v + 1, rounds, |x| {
            tickets[(x - v - 1) as usize].wait_async()
        }),
    };
    v += rounds;
    drop(tickets);
    let mut tokio_us = Vec::new();
    let shared = Arc::new(tl);
    for x in v + 1..v + 1 + rounds {
        let t = shared.clone();
        let task = rt.spawn(async move {
            t.wait_async(x).await?;
            Ok::<Instant, Error>(Instant::now())
        });
        // The task polls (and registers) well before the signal.
        std::thread::sleep(Duration::from_micros(300));
        let t0 = Instant::now();
        shared.set(x)?;
        let resumed = rt.block_on(task).expect("task")?;
        tokio_us.push(resumed.saturating_duration_since(t0).as_secs_f64() * 1e6);
    }
    let tl = Arc::try_unwrap(shared).expect("the tasks are done");
    tokio_us.sort_by(f64::total_cmp);
    let tokio_d = Dist {
        name: "host signal → task resumed (tokio, same task)",
        us: tokio_us,
    };
    v += rounds;
    for d in [&waiter, &ticket, &tokio_d] {
        println!("{}", d.row());
    }
    let median_ok = percentile(&waiter.us, 0.5) <= 50.0;
    println!(
        "goal: median host signal → waker ≤ 50 µs: {} ({:.1} µs)",
        if median_ok { "met" } else { "NOT met" },
        percentile(&waiter.us, 0.5)
    );

    // 3. Idle CPU of the waiter with one pending future.
    let idle = {
        let stamp = Arc::new(Stamp {
            at: Mutex::new(None),
            thread: std::thread::current(),
        });
        let waker = Waker::from(stamp.clone());
        let mut cx = Context::from_waker(&waker);
        let mut f = pin!(tl.wait_async(v + 1));
        assert!(f.as_mut().poll(&mut cx).is_pending());
        std::thread::sleep(Duration::from_millis(50));
        let tid = waiter_tid();
        let before = tid.as_deref().and_then(thread_cpu);
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_secs(1));
        let after = tid.as_deref().and_then(thread_cpu);
        let wall = t0.elapsed();
        tl.set(v + 1)?;
        while stamp.at.lock().unwrap().is_none() {
            std::thread::park_timeout(Duration::from_millis(100));
        }
        assert!(matches!(f.as_mut().poll(&mut cx), Poll::Ready(Ok(()))));
        match (before, after) {
            (Some((n0, src, s0)), Some((n1, _, s1))) => {
                let pct = (n1 - n0) as f64 / wall.as_nanos() as f64 * 100.0;
                println!(
                    "waiter idle with one pending future: {:.4}% of a core over {:.2} s ({src}), {} wake-ups (goal < 1%: {})",
                    pct,
                    wall.as_secs_f64(),
                    s1 - s0,
                    if pct < 1.0 { "met" } else { "NOT met" }
                );
                Some((pct, s1 - s0, src))
            }
            _ => {
                println!("waiter idle CPU: the waiter thread or its /proc files not found");
                None
            }
        }
    };

    if let Some(path) = json_path {
        let idle_json = match idle {
            Some((pct, w, src)) => format!(
                "{{\"percent_of_core\":{pct:.5},\"wakeups\":{w},\"seconds\":1.0,\"source\":\"{src}\"}}"
            ),
            None => "null".into(),
        };
        let json = format!(
            "{{\"adapter\":\"{}\",\"driver\":\"{}\",\"tokio_tasks_checked\":{},\"wake_latency\":[{},{},{}],\"goal_median_us\":50.0,\"median_met\":{},\"waiter_idle\":{}}}\n",
            gpu.info().name,
            gpu.info().driver_name,
            tasks,
            waiter.json(),
            ticket.json(),
            tokio_d.json(),
            median_ok,
            idle_json
        );
        std::fs::write(&path, json).expect("write the JSON file");
        println!("wrote {path}");
    }
    Ok(())
}
