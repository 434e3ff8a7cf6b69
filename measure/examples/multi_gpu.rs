//! Multi-GPU: one device per adapter (`Device::all`), one thread per device.
//! Two workloads are sharded across the devices, every result is checked,
//! and the wall time of the whole job is compared with the same job on one
//! device (device 0):
//!
//! - saxpy over N f32 (`--n`, default 256 Mi), `--reps` times (default 10)
//!   in one batch: bandwidth-bound, so it should scale with the devices;
//! - a batch of `--steps` (default 1000) dependent saxpy dispatches over
//!   `--chain-n` f32 (default 16 Mi): each device runs its own chain over
//!   its shard; one device runs one chain over everything.
//!
//! ```text
//! cargo run --release -p vkcompute-measure --example multi_gpu -- [--n N] [--chain-n N] [--steps S] [--reps R]
//!     [--per-adapter K] [--include-cpu]
//! ```
//!
//! CPU adapters (lavapipe) are left out when a GPU exists (`--include-cpu`
//! keeps them). `--per-adapter K` opens K devices on each adapter, to
//! exercise the sharding on a machine with one adapter (scaling then means
//! nothing). `VKCOMPUTE_QUICK=1` shrinks the defaults (lavapipe, CI).

use vkcompute_measure::bandwidth;

use std::sync::Barrier;
use std::time::{Duration, Instant};

use bandwidth::Saxpy;
use vkcompute::{AdapterType, Device, DeviceOptions};

/// Timed trials of each workload (the median is shown).
const TRIALS: usize = 5;
/// Untimed full-size runs first, for at least this long: an H200 coming
/// out of idle ran this saxpy 2.4 times slower for its first second or so
/// (seen in `docs/runs/2026-11-22-h200x2-*`), which two warm-up runs did not
/// cover.
const WARM_UP: Duration = Duration::from_secs(1);

/// What one device did for one workload.
struct Shard {
    device: usize,
    elements: usize,
    gpu: Duration,
    /// (start, end) of each trial.
    trials: Vec<(Instant, Instant)>,
}

impl Shard {
    fn wall(&self) -> Duration {
        median(self.trials.iter().map(|(a, b)| *b - *a).collect())
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Splits `n` (a multiple of 4) into `k` contiguous shards, multiples of 4.
fn shards(n: usize, k: usize) -> Vec<(usize, usize)> {
    let quads = n / 4;
    (0..k)
        .map(|i| {
            let a = quads * i / k;
            let b = quads * (i + 1) / k;
            (4 * a, 4 * (b - a))
        })
        .collect()
}

/// Runs `reps` dependent saxpys over `(start, len)` on `gpu`, [`TRIALS`]
/// times, each after a start barrier; checks the result.
fn run_shard(
    index: usize,
    gpu: &Device,
    (start, len): (usize, usize),
    reps: usize,
    go: &Barrier,
) -> vkcompute::Result<Shard> {
    let s = Saxpy::new(gpu, len, start, None, None, 1)?;
    let warm = Instant::now();
    let mut warm_runs = 0;
    while warm_runs < 2 || warm.elapsed() < WARM_UP {
        s.run_wall(reps)?;
        warm_runs += 1;
    }
    let mut trials = Vec::with_capacity(TRIALS);
    for _ in 0..TRIALS {
        go.wait();
        let t0 = Instant::now();
        s.run_wall(reps)?;
        trials.push((t0, Instant::now()));
    }
    let gpu_time = s.run_gpu(reps)? * reps as u32;
    if let Err(e) = s.check(start, (TRIALS + 1 + warm_runs) * reps) {
        panic!("device {index}: {e}");
    }
    Ok(Shard {
        device: index,
        elements: len,
        gpu: gpu_time,
        trials,
    })
}

/// Runs one workload on `devices` (one shard each, in parallel) and on
/// device 0 alone; prints per-device and total figures and the scaling.
fn workload(
    title: &str,
    devices: &[Device],
    n: usize,
    reps: usize,
    bytes_per_element: u64,
) -> vkcompute::Result<f64> {
    println!("{title}");
    // The one-device baseline, before and after the sharded run; the faster
    // of the two counts, so drift cannot inflate the scaling.
    let before = run_shard(0, &devices[0], (0, n), reps, &Barrier::new(1))?;
    let parts = shards(n, devices.len());
    let go = Barrier::new(devices.len());
    let results: Vec<vkcompute::Result<Shard>> = std::thread::scope(|s| {
        let handles: Vec<_> = devices
            .iter()
            .zip(&parts)
            .enumerate()
            .map(|(i, (gpu, &part))| {
                let go = &go;
                s.spawn(move || run_shard(i, gpu, part, reps, go))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("worker panicked"))
            .collect()
    });
    let shards: Vec<Shard> = results.into_iter().collect::<vkcompute::Result<_>>()?;
    let gbps = |elements: usize, d: Duration| {
        (elements as u64 * bytes_per_element * reps as u64) as f64 / d.as_secs_f64() / 1e9
    };
    for sh in &shards {
        let wall = sh.wall();
        println!(
            "  device {} ({}): {} elements, wall {:.2} ms ({:.1} GB/s), gpu {:.2} ms ({:.1} GB/s)",
            sh.device,
            devices[sh.device].info().name,
            sh.elements,
            wall.as_secs_f64() * 1e3,
            gbps(sh.elements, wall),
            sh.gpu.as_secs_f64() * 1e3,
            gbps(sh.elements, sh.gpu)
        );
    }
    // Each trial: from the first device's start to the last one's end.
    let total = median(
        (0..TRIALS)
            .map(|t| {
                let first = shards.iter().map(|s| s.trials[t].0).min();
                let last = shards.iter().map(|s| s.trials[t].1).max();
                last.expect("a shard") - first.expect("a shard")
            })
            .collect(),
    );
    println!(
        "  all {} device(s): wall {:.2} ms, {:.1} GB/s (median of {TRIALS})",
        devices.len(),
        total.as_secs_f64() * 1e3,
        gbps(n, total)
    );
    // Each shard alone, one after another: tells contention between the
    // devices (or devices sharing a GPU) from a slow device.
    if devices.len() > 1 {
        for (i, (gpu, &part)) in devices.iter().zip(&parts).enumerate() {
            let alone = run_shard(i, gpu, part, reps, &Barrier::new(1))?;
            println!(
                "  device {i} alone: wall {:.2} ms, gpu {:.2} ms",
                alone.wall().as_secs_f64() * 1e3,
                alone.gpu.as_secs_f64() * 1e3
            );
        }
    }
    let after = run_shard(0, &devices[0], (0, n), reps, &Barrier::new(1))?;
    let one = if before.wall() <= after.wall() {
        before
    } else {
        after
    };
    let one_wall = one.wall();
    println!(
        "  one device (device 0, all {n} elements, faster of before/after): wall {:.2} ms, {:.1} GB/s; gpu {:.2} ms",
        one_wall.as_secs_f64() * 1e3,
        gbps(n, one_wall),
        one.gpu.as_secs_f64() * 1e3
    );
    let scaling = one_wall.as_secs_f64() / total.as_secs_f64();
    println!("  scaling: {scaling:.2}× one device");
    Ok(scaling)
}

fn main() -> vkcompute::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |flag: &str| -> Option<usize> {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .map(|v| {
                v.parse()
                    .unwrap_or_else(|_| panic!("{flag} wants a number, got {v}"))
            })
    };
    let quick = bandwidth::quick();
    let n = arg("--n").unwrap_or(if quick { 4 << 20 } else { 256 << 20 }) & !3;
    let chain_n = arg("--chain-n").unwrap_or(if quick { 64 << 10 } else { 16 << 20 }) & !3;
    let steps = arg("--steps").unwrap_or(1000);
    let reps = arg("--reps").unwrap_or(if quick { 3 } else { 10 });
    let per_adapter = arg("--per-adapter").unwrap_or(1).max(1);
    let include_cpu = args.iter().any(|a| a == "--include-cpu");

    let mut devices = Vec::new();
    for _ in 0..per_adapter {
        devices.extend(Device::all(DeviceOptions::default())?);
    }
    let has_gpu = devices
        .iter()
        .any(|d| d.info().adapter_type != AdapterType::Cpu);
    if has_gpu && !include_cpu {
        for d in devices
            .iter()
            .filter(|d| d.info().adapter_type == AdapterType::Cpu)
        {
            println!(
                "leaving out CPU adapter {} (--include-cpu keeps it)",
                d.info().name
            );
        }
        devices.retain(|d| d.info().adapter_type != AdapterType::Cpu);
    }
    // Devices on the same adapter sort together; device 0 is the baseline.
    devices.sort_by_key(|d| d.info().index);
    if devices.is_empty() {
        return Err(vkcompute::Error::NoAdapter);
    }
    let adapters = {
        let mut v: Vec<usize> = devices.iter().map(|d| d.info().index).collect();
        v.dedup();
        v.len()
    };
    for d in &devices {
        let u = d.info().device_uuid;
        println!(
            "adapter {}: {} deviceUUID {}",
            d.info().index,
            d.info().name,
            u.iter().map(|b| format!("{b:02x}")).collect::<String>()
        );
    }
    println!(
        "multi_gpu: {} device(s) on {adapters} adapter(s): {}",
        devices.len(),
        devices
            .iter()
            .map(|d| format!("{} ({:?})", d.info().name, d.info().adapter_type))
            .collect::<Vec<_>>()
            .join(", ")
    );

    let s1 = workload(
        &format!("saxpy over {n} f32, {reps} reps in one batch (12 bytes per element)"),
        &devices,
        n,
        reps,
        12,
    )?;
    let s2 = workload(
        &format!("chain of {steps} dependent saxpy dispatches over {chain_n} f32"),
        &devices,
        chain_n,
        steps,
        12,
    )?;
    if adapters < 2 {
        println!(
            "scaling needs at least 2 adapters; this machine has {adapters} (figures above show the work split, not a speed-up)"
        );
    } else {
        println!(
            "scaling on {} devices: saxpy {s1:.2}×, dependent chain {s2:.2}× (goal with 2 GPUs: ≥ 1.9×)",
            devices.len()
        );
    }
    let messages: usize = devices.iter().map(Device::validation_message_count).sum();
    if devices[0].validation_enabled() {
        println!("validation messages: {messages}");
    }
    if messages > 0 {
        for d in &devices {
            for m in d.validation_messages() {
                eprintln!("{m}");
            }
        }
        std::process::exit(1);
    }
    Ok(())
}
