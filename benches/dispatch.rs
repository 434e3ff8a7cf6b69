//! Dispatch costs: CPU cost to record a dispatch, 1000 dependent and 1000
//! independent tiny dispatches (GPU time from timestamps, and wall time),
//! and the round trip of one tiny dispatch: submit → wait of a recorded
//! batch, and the whole of it with creating and recording the batch.
//!
//! `cargo bench --bench dispatch`; `VKCOMPUTE_QUICK=1` shrinks the workloads
//! (for lavapipe). The same workloads in hand-written ash are `benches/floor.rs`.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use vkcompute::{BatchOptions, Buffer, Device, DeviceOptions, Kernel, Profiling};

const AXPB: &str = include_str!("../shaders/axpb.comp");
const N: u32 = 1024;

fn quick() -> bool {
    std::env::var_os("VKCOMPUTE_QUICK").is_some()
}

fn steps() -> usize {
    if quick() {
        100
    } else {
        1000
    }
}

struct Setup {
    gpu: Device,
    k: Kernel,
    x: Buffer<f32>,
    many: Buffer<f32>,
    pc: [u8; 12],
}

fn setup(options: DeviceOptions) -> Setup {
    let gpu = Device::with_options(options).expect("device");
    let k = gpu.kernel_glsl(AXPB).expect("kernel");
    let x = gpu.upload(&vec![1.0f32; N as usize]).expect("upload");
    let many = gpu.alloc::<f32>(N as usize * steps()).expect("alloc");
    let mut pc = [0u8; 12];
    pc[..4].copy_from_slice(&1.0f32.to_le_bytes());
    pc[4..8].copy_from_slice(&1.0f32.to_le_bytes());
    pc[8..].copy_from_slice(&N.to_le_bytes());
    Setup {
        gpu,
        k,
        x,
        many,
        pc,
    }
}

/// Records `n` dispatches (with barriers when `chain`) into `b`.
fn record(s: &Setup, b: &mut vkcompute::Batch, n: usize, chain: bool) {
    for i in 0..n {
        if chain {
            b.run_with_push_constants(&s.k, &[&s.x], N, &s.pc).unwrap();
            b.barrier();
        } else {
            let off = i * N as usize;
            let slice = s.many.slice(off..off + N as usize).unwrap();
            b.run_with_push_constants(&s.k, &[&slice], N, &s.pc)
                .unwrap();
        }
    }
}

/// Checks the kernel's results once before anything is timed (a wrong
/// kernel must not produce a fast number): a chain of `n` over zeros
/// leaves `n` in every element of `x`; `n` independent dispatches over
/// zeros leave 1 in every element of `many`; one round-trip dispatch adds
/// 1. Leaves `x` at 1.0, as `setup` made it.
fn check_once(s: &Setup, n: usize) {
    s.x.write(0, &vec![0.0; N as usize]).unwrap();
    s.many.write(0, &vec![0.0; N as usize * steps()]).unwrap();
    let mut b = s.gpu.batch().unwrap();
    record(s, &mut b, n, true);
    record(s, &mut b, n, false);
    b.submit().unwrap();
    let x = s.x.download().unwrap();
    assert!(
        x.iter().all(|&v| v == n as f32),
        "chain of {n}: x = {:?}…",
        &x[..4]
    );
    let m = s.many.download().unwrap();
    let bad = m.iter().position(|&v| v != 1.0);
    assert_eq!(
        bad, None,
        "independent dispatches: element {bad:?} is not 1"
    );
    s.x.write(0, &vec![0.0; N as usize]).unwrap();
    let mut b = s.gpu.batch().unwrap();
    b.run_with_push_constants(&s.k, &[&s.x], N, &s.pc).unwrap();
    b.submit().unwrap();
    assert_eq!(s.x.download().unwrap(), vec![1.0; N as usize], "round trip");
}

fn bench(c: &mut Criterion) {
    let s = setup(DeviceOptions::default());
    let n = steps();
    check_once(&s, n);
    println!("adapter: {}", s.gpu.info().name);

    let mut g = c.benchmark_group("dispatch");
    g.sample_size(if quick() { 10 } else { 30 });
    g.measurement_time(Duration::from_secs(if quick() { 1 } else { 3 }));

    // CPU cost of recording, per dispatch: the same kernel on the same
    // buffer, as the floor records it (into a command buffer with the
    // pipeline and descriptor set already bound: one dispatch is recorded
    // before the timer starts). single_submit so nothing is submitted while
    // timing; the batch is dropped unsubmitted (without barriers the
    // dispatches would race).
    for (name, barrier) in [
        ("record_dispatch", false),
        ("record_dispatch_barrier", true),
    ] {
        g.bench_function(name, |bch| {
            bch.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let mut b = s.gpu.batch_with(BatchOptions::single_submit()).unwrap();
                    b.run_with_push_constants(&s.k, &[&s.x], N, &s.pc).unwrap();
                    if barrier {
                        b.barrier();
                    }
                    let t = Instant::now();
                    for _ in 0..n {
                        b.run_with_push_constants(&s.k, &[&s.x], N, &s.pc).unwrap();
                        if barrier {
                            b.barrier();
                        }
                    }
                    total += t.elapsed();
                    drop(b);
                }
                total / n as u32
            })
        });
    }

    // GPU time per dispatch from timestamps, and wall time per dispatch
    // (record + submit in chunks + wait).
    for (name, chain) in [("chain", true), ("independent", false)] {
        g.bench_function(format!("{name}_{n}_gpu_per_dispatch"), |bch| {
            bch.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    // Recorded in full, then submitted once: the GPU never
                    // waits for the CPU inside the timed span.
                    let opts = BatchOptions::single_submit().with_profiling(Profiling::Batch);
                    let mut b = s.gpu.batch_with(opts).unwrap();
                    record(&s, &mut b, n, chain);
                    let t = b.submit_async().unwrap();
                    let p = t.profile().unwrap();
                    total += Duration::from_nanos(p.total_ns as u64);
                }
                total / n as u32
            })
        });
        g.bench_function(format!("{name}_{n}_wall_per_dispatch"), |bch| {
            bch.iter_custom(|iters| {
                let t = Instant::now();
                for _ in 0..iters {
                    let mut b = s.gpu.batch().unwrap();
                    record(&s, &mut b, n, chain);
                    b.submit().unwrap();
                }
                t.elapsed() / n as u32
            })
        });
    }

    // One tiny dispatch, submit → wait: the batch is created and recorded
    // before the timer (the floor's round trip re-submits a command buffer
    // recorded once); ending it, submitting and waiting are timed.
    g.bench_function("round_trip_submit_wait", |bch| {
        bch.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let mut b = s.gpu.batch().unwrap();
                b.run_with_push_constants(&s.k, &[&s.x], N, &s.pc).unwrap();
                let t = Instant::now();
                b.submit().unwrap();
                total += t.elapsed();
            }
            total
        })
    });
    // One tiny dispatch: new batch, record, submit, wait (spin then block,
    // the default).
    g.bench_function("round_trip", |bch| {
        bch.iter(|| {
            let mut b = s.gpu.batch().unwrap();
            b.run_with_push_constants(&s.k, &[&s.x], N, &s.pc).unwrap();
            b.submit().unwrap();
        })
    });
    drop(s);
    let blocking = setup(DeviceOptions {
        wait_spin: Duration::ZERO,
        ..Default::default()
    });
    check_once(&blocking, n);
    g.bench_function("round_trip_blocking", |bch| {
        bch.iter(|| {
            let mut b = blocking.gpu.batch().unwrap();
            b.run_with_push_constants(&blocking.k, &[&blocking.x], N, &blocking.pc)
                .unwrap();
            b.submit().unwrap();
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
