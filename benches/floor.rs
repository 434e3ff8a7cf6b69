//! The driver floor: what the same dispatch workloads cost in minimal
//! hand-written ash (see `measure/src/floor.rs`), so vkcompute's figures can be
//! read as ratios to the driver itself.
//!
//! - `floor/record_dispatch/*`: CPU time per recorded dispatch (push
//!   constants + dispatch, with or without a compute→compute barrier), in
//!   command buffers of N dispatches.
//! - `floor/chain_1000_{gpu,wall}/nN`: N dependent dispatches (a barrier
//!   between each), one submission; GPU time from timestamps, or wall time
//!   from the start of recording to the end of the wait. Time per chain.
//! - `floor/independent_1000_{gpu,wall}/nN`: the same without barriers.
//! - `floor/round_trip_{block,spin}`: submit + wait of one pre-recorded tiny
//!   dispatch, blocking in vkWaitSemaphores or spinning on the counter.
//!
//! N is 1000, or 100 with `VKCOMPUTE_BENCH_QUICK=1` (lavapipe CI). On
//! lavapipe, `LP_NUM_THREADS=0` (dispatches run on the queue thread) makes
//! the GPU figures steady; with worker threads on a 2-core VM a chain of
//! 1000 takes 11 or 65 ms from one minute to the next.
//! `VKCOMPUTE_VALIDATION=1` runs it under the validation layer and fails on
//! any warning or error; `VKCOMPUTE_DEVICE` picks the adapter.

use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput};

use vkcompute_measure::floor;

use floor::Floor;

fn quick() -> bool {
    std::env::var("VKCOMPUTE_BENCH_QUICK").is_ok_and(|v| v.trim() == "1")
}

fn record_dispatch(c: &mut Criterion, f: &mut Floor, n: usize) {
    let mut g = c.benchmark_group("floor/record_dispatch");
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    for (name, barrier) in [("push_dispatch", false), ("push_dispatch_barrier", true)] {
        // One criterion iteration is one dispatch; they are recorded in
        // command buffers of `n` (the last one of a sample may hold fewer).
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut left = iters as usize;
                let mut total = Duration::ZERO;
                while left > 0 {
                    let k = left.min(n);
                    total += f.record_cost(k, barrier);
                    left -= k;
                }
                total
            })
        });
    }
    g.finish();
}

type Run = fn(&mut Floor, usize) -> (Duration, Duration);

/// Keeps the GPU busy with dependent chains for 300 ms, so every GPU group
/// starts from the same state (an H200's SM clock drops from 1980 to about
/// 1400 MHz within seconds of light load). Round trips on the H200 still
/// flip between about 13 µs and 40-57 µs (spin) in windows of seconds:
/// compare them only with figures from the same run.
fn prime(f: &mut Floor, n: usize) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(300) {
        f.chain_gpu(n);
    }
}

fn gpu_runs(c: &mut Criterion, f: &mut Floor, n: usize) {
    let runs: [(&str, Run); 2] = [
        ("chain_1000", Floor::chain_gpu),
        ("independent_1000", Floor::independent_gpu),
    ];
    for (name, run) in runs {
        for (suffix, pick_gpu) in [("gpu", true), ("wall", false)] {
            prime(f, n);
            let mut g = c.benchmark_group(format!("floor/{name}_{suffix}"));
            g.sample_size(10)
                .sampling_mode(SamplingMode::Flat)
                .throughput(Throughput::Elements(n as u64))
                .warm_up_time(Duration::from_millis(300))
                .measurement_time(Duration::from_secs(2));
            g.bench_function(format!("n{n}"), |b| {
                b.iter_custom(|iters| {
                    (0..iters)
                        .map(|_| {
                            let (gpu, wall) = run(f, n);
                            if pick_gpu {
                                gpu
                            } else {
                                wall
                            }
                        })
                        .sum()
                })
            });
            g.finish();
        }
    }
}

fn round_trips(c: &mut Criterion, f: &mut Floor, n: usize) {
    for (name, spin) in [("block", false), ("spin", true)] {
        prime(f, n);
        let mut g = c.benchmark_group(format!("floor/round_trip_{name}"));
        g.sample_size(20)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1));
        g.bench_function("tiny_dispatch", |b| {
            b.iter_custom(|iters| (0..iters).map(|_| f.round_trip(spin)).sum())
        });
        g.finish();
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let n = if quick() { 100 } else { 1000 };
    let mut f = Floor::new();
    println!("floor: {}; n = {n}", f.description);
    record_dispatch(&mut c, &mut f, n);
    gpu_runs(&mut c, &mut f, n);
    round_trips(&mut c, &mut f, n);
    let messages = f.validation_messages();
    drop(f); // destroys everything; panics if validation reported anything
    if messages == 0 {
        c.final_summary();
    }
}
