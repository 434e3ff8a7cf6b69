//! The main demo: y = a*x + y on the GPU, checked against the CPU, timed.
//! Teaches the first steps: a device, buffers uploaded, a GLSL kernel, a
//! batch with one dispatch and its push constants, the GPU time of a
//! profiled batch, and reading the result back. Next: `02_batch.rs`.
//!
//! Run with `cargo run --release --example 01_saxpy [-- <elements>]`.
//! `VKCOMPUTE_DEVICE=<index|name>` picks the adapter, `VKCOMPUTE_VALIDATION=1`
//! turns on the validation layer (the example then fails on any message).

use std::time::Instant;

use vkcompute::{BatchOptions, Device, Profiling};

const SAXPY: &str = include_str!("../shaders/saxpy.comp");

fn main() -> vkcompute::Result<()> {
    let quick = std::env::var_os("VKCOMPUTE_QUICK").is_some();
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(if quick { 1 << 16 } else { 1 << 24 });
    let gpu = Device::new()?;
    let info = gpu.info();
    println!(
        "adapter: {} ({:?}), driver {} {}, Vulkan {}.{}.{}",
        info.name,
        info.adapter_type,
        info.driver_name,
        info.driver_info,
        info.api_version.0,
        info.api_version.1,
        info.api_version.2
    );

    let a = 2.5f32;
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.001).collect();
    let y0: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();

    let t = Instant::now();
    let xs = gpu.upload(&x)?;
    let ys = gpu.upload(&y0)?;
    let upload = t.elapsed();
    let kernel = gpu.kernel_glsl(SAXPY)?;

    let mut pc = [0u8; 8];
    pc[..4].copy_from_slice(&a.to_le_bytes());
    pc[4..].copy_from_slice(&n.to_le_bytes());

    // Warm up once (submitted and waited: the pipeline, the binding set and
    // the recorder are then ready), restore y, then time one profiled run.
    let mut warm = gpu.batch()?;
    warm.run_spread(&kernel, &[&xs, &ys], n, &pc)?;
    warm.submit()?;
    ys.write(0, &y0)?;
    let mut batch = gpu.batch_with(BatchOptions::default().with_profiling(Profiling::Batch))?;
    batch.run_spread(&kernel, &[&xs, &ys], n, &pc)?;
    let t = Instant::now();
    let ticket = batch.submit_async()?;
    ticket.wait()?;
    let wall = t.elapsed();
    let gpu_ns = ticket.profile()?.total_ns;

    let t = Instant::now();
    let y = ys.download()?;
    let download = t.elapsed();

    let mut worst = 0f32;
    for i in 0..n as usize {
        let want = a * x[i] + y0[i];
        worst = worst.max((y[i] - want).abs());
    }
    let ok = worst <= 1e-5;
    let bytes = 3.0 * 4.0 * f64::from(n);
    println!(
        "saxpy over {n} floats: max |error| = {worst:e} -> {}",
        if ok { "correct" } else { "WRONG" }
    );
    println!(
        "kernel: {:.1} µs GPU ({:.1} GB/s), {:.1} µs submit+wait wall",
        gpu_ns / 1e3,
        bytes / gpu_ns,
        wall.as_secs_f64() * 1e6
    );
    println!(
        "upload of x and y: {:.2} ms, download of y: {:.2} ms",
        upload.as_secs_f64() * 1e3,
        download.as_secs_f64() * 1e3
    );
    // Drop everything, then read the validation log, so messages from the
    // device's teardown count too.
    let validation = gpu.validation_enabled();
    let log = gpu.validation_log();
    drop((xs, ys, kernel, gpu));
    if validation {
        println!("validation messages (teardown included): {}", log.count());
    }
    if !ok || log.count() > 0 {
        for m in log.messages() {
            eprintln!("{m}");
        }
        std::process::exit(1);
    }
    Ok(())
}
