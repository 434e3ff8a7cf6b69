//! Startup: `Device::new` + 12 distinct GLSL kernels (add, sub, mul, scale,
//! relu, sigmoid, tanh, swish, gelu, dot-partial, matmul-tile, saxpy), cold
//! (empty cache directory) and warm (directory filled by an earlier run).
//! Wall time, each start in a fresh process, timed by the process itself
//! from just before `Device::with_options` to the last kernel; drivers'
//! own shader caches off. See `measure/src/startup.rs`.
//!
//! `cargo bench --bench startup`; `VKCOMPUTE_QUICK=1` takes fewer samples.

use vkcompute_measure::bandwidth;
use vkcompute_measure::startup;

use std::time::Duration;

use criterion::{criterion_group, Criterion, SamplingMode};

fn bench(c: &mut Criterion) {
    let quick = bandwidth::quick();
    let mut g = c.benchmark_group("startup");
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_secs(if quick { 1 } else { 5 }));
    g.bench_function("device_12_kernels_cold", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| startup::cold().expect("cold start").total)
                .sum()
        })
    });
    let warm = startup::warm_dir().expect("filling the cache");
    g.bench_function("device_12_kernels_warm", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| startup::start_in_child(&warm).expect("warm start").total)
                .sum()
        })
    });
    g.bench_function("device_only_warm", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| startup::start_in_child(&warm).expect("warm start").device)
                .sum()
        })
    });
    // The floor: vkCreateInstance + vkCreateDevice alone, fresh process.
    g.bench_function("floor_instance_device", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| startup::floor_in_child().expect("floor start"))
                .sum()
        })
    });
    g.finish();
    let _ = std::fs::remove_dir_all(&warm);
}

criterion_group!(benches, bench);

fn main() {
    // A startup child runs one start and exits (see measure/src/startup.rs).
    if startup::child_main() {
        return;
    }
    benches();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
}
