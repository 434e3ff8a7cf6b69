//! CPU work overlapping GPU work: submit a batch, keep computing on the CPU,
//! poll the ticket, then wait and read the result. Teaches
//! `submit_async` and its `Ticket` (`is_ready`, `wait`). Next:
//! `04_pipeline_overlap.rs`.
//!
//! `cargo run --release --example 03_async`

use std::time::{Duration, Instant};

use vkcompute::Device;

// A deliberately heavy kernel: many iterations of a contracting map per element.
const HEAVY: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer X { float x[]; };
layout(push_constant) uniform P { uint n; uint iters; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= n) return;
    float v = x[i];
    for (uint k = 0; k < iters; k++) v = v * 0.999 + 0.001 * sin(float(k));
    x[i] = v;
}
"#;

fn contract(mut v: f32, iters: u32) -> f32 {
    for k in 0..iters {
        v = v * 0.999 + 0.001 * (k as f32).sin();
    }
    v
}

fn main() -> vkcompute::Result<()> {
    let quick = std::env::var_os("VKCOMPUTE_QUICK").is_some();
    let gpu = Device::new()?;
    println!("adapter: {}", gpu.info().name);
    let n: u32 = if quick { 4096 } else { 1 << 20 };
    let iters: u32 = if quick { 200 } else { 2000 };
    let init: Vec<f32> = (0..n).map(|i| 0.1 + 0.8 * (i as f32 / n as f32)).collect();
    let x = gpu.upload(&init)?;
    let k = gpu.kernel_glsl(HEAVY)?;
    let mut pc = [0u8; 8];
    pc[..4].copy_from_slice(&n.to_le_bytes());
    pc[4..].copy_from_slice(&iters.to_le_bytes());

    let mut batch = gpu.batch()?;
    batch.run_with_push_constants(&k, &[&x], n, &pc)?;
    let start = Instant::now();
    let ticket = batch.submit_async()?;

    // CPU work while the GPU runs: the reference for a sample of elements.
    let sample: Vec<usize> = (0..n as usize).step_by(97).collect();
    let want: Vec<f32> = sample.iter().map(|&i| contract(init[i], iters)).collect();
    let cpu_done = start.elapsed();
    let mut polls = 0u32;
    while !ticket.is_ready()? {
        polls += 1;
        std::thread::sleep(Duration::from_micros(100));
    }
    ticket.wait()?;
    let gpu_done = start.elapsed();
    println!(
        "CPU reference done after {:.2} ms; GPU done after {:.2} ms ({polls} polls)",
        cpu_done.as_secs_f64() * 1e3,
        gpu_done.as_secs_f64() * 1e3
    );

    let got = x.download()?;
    let worst = sample
        .iter()
        .zip(&want)
        .map(|(&i, &w)| (got[i] - w).abs())
        .fold(0f32, f32::max);
    let ok = worst < 1e-3;
    println!(
        "max |error| over {} sampled elements: {worst:e} -> {}",
        sample.len(),
        if ok { "correct" } else { "WRONG" }
    );
    if !ok || gpu.validation_message_count() > 0 {
        for m in gpu.validation_messages() {
            eprintln!("{m}");
        }
        std::process::exit(1);
    }
    Ok(())
}
