//! A pipelined loop: upload chunk i + 1 while computing chunk i while
//! downloading chunk i − 1, with async transfers on the transfer queue and
//! semaphores (no CPU wait) between the copies and the compute. Teaches
//! `Device::upload_async` and `Buffer::download_async`, and how a batch
//! that uses their buffers is ordered after them on the GPU.
//!
//! The compute kernel's iteration count is calibrated at start-up so that
//! computing one chunk takes about as long as transferring it (upload +
//! download, measured). Then the same chunks run serially (upload, wait,
//! compute, wait, download, wait) and pipelined, and the example prints
//! serial time, pipelined time, transfer time and
//! hidden = (serial − pipelined) / transfer time (goal: ≥ 80% on the
//! GPU). Every chunk's result is checked against a host reference on a
//! sample of elements, in both runs.
//!
//! `cargo run --release --example 04_pipeline_overlap -- [--json PATH] [--chunk-mib N] [--chunks N]`

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use vkcompute::{Device, Download, Kernel, Ticket};

/// Each element: `iters` rounds of a 32-bit LCG (exact on the host too).
const LCG: &str = r#"
#version 450
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) buffer X { uint x[]; };
layout(push_constant) uniform P { uint n; uint iters; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= n) return;
    uint v = x[i];
    for (uint k = 0u; k < iters; k++) v = v * 1664525u + 1013904223u;
    x[i] = v;
}
"#;

fn lcg(mut v: u32, iters: u32) -> u32 {
    for _ in 0..iters {
        v = v.wrapping_mul(1664525).wrapping_add(1013904223);
    }
    v
}

fn chunk_data(c: usize, n: usize) -> Vec<u32> {
    (0..n as u32)
        .map(|i| i.wrapping_mul(2654435761) ^ (c as u32).wrapping_mul(0x9E37_79B9))
        .collect()
}

/// Checks a sample of `got` against the host reference.
fn check(c: usize, got: &[u32], input: &[u32], iters: u32) {
    let step = (got.len() / 4096).max(1);
    for i in (0..got.len()).step_by(step).chain([got.len() - 1]) {
        let want = lcg(input[i], iters);
        assert_eq!(got[i], want, "chunk {c} element {i}: wrong result");
    }
}

fn compute(
    gpu: &Device,
    k: &Kernel,
    buf: &vkcompute::Buffer<u32>,
    iters: u32,
) -> vkcompute::Result<Ticket> {
    let n = buf.len() as u32;
    let mut b = gpu.batch()?;
    let mut pc = [0u8; 8];
    pc[..4].copy_from_slice(&n.to_le_bytes());
    pc[4..].copy_from_slice(&iters.to_le_bytes());
    b.run_with_push_constants(k, &[buf], n, &pc)?;
    b.submit_async()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() -> vkcompute::Result<()> {
    let quick = std::env::var_os("VKCOMPUTE_QUICK").is_some();
    let mut json_path = None;
    let mut chunk_mib: usize = if quick { 1 } else { 32 };
    let mut chunks: usize = if quick { 6 } else { 16 };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> usize {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} needs a positive number"))
        };
        match a.as_str() {
            "--json" => json_path = args.next(),
            "--chunk-mib" => chunk_mib = num("--chunk-mib").max(1),
            "--chunks" => chunks = num("--chunks").max(3),
            other => {
                eprintln!("unknown argument {other:?}; usage: 04_pipeline_overlap [--json PATH] [--chunk-mib N] [--chunks N]");
                std::process::exit(2);
            }
        }
    }
    let gpu = Device::new()?;
    println!(
        "adapter: {} ({}), transfer-only queue: {}",
        gpu.info().name,
        gpu.info().driver_name,
        gpu.info().transfer_queue
    );
    let n = chunk_mib << 18; // u32 elements
    let k = gpu.kernel_glsl(LCG)?;
    let inputs: Vec<Vec<u32>> = (0..chunks).map(|c| chunk_data(c, n)).collect();

    // Transfer time of one chunk (upload + download), warm.
    let mut up_t = Vec::new();
    let mut down_t = Vec::new();
    for r in 0..4 {
        let t0 = Instant::now();
        let (buf, t) = gpu.upload_async(&inputs[0])?;
        t.wait()?;
        let t1 = Instant::now();
        let back = buf.download_async()?.wait()?;
        let t2 = Instant::now();
        assert!(back == inputs[0], "round trip changed the data");
        if r > 0 {
            up_t.push(t1 - t0);
            down_t.push(t2 - t1);
        }
    }
    let transfer_one = median(up_t) + median(down_t);

    // Calibrate: compute time of one chunk ≈ its transfer time.
    let probe = gpu.upload(&inputs[0])?;
    let time_iters = |iters: u32| -> vkcompute::Result<Duration> {
        let mut v = Vec::new();
        for _ in 0..3 {
            let t0 = Instant::now();
            compute(&gpu, &k, &probe, iters)?.wait()?;
            v.push(t0.elapsed());
        }
        Ok(median(v))
    };
    let mut iters: u32 = 16;
    let mut t_c = time_iters(iters)?;
    for _ in 0..4 {
        let ratio = transfer_one.as_secs_f64() / t_c.as_secs_f64().max(1e-9);
        if (0.9..=1.1).contains(&ratio) {
            break;
        }
        iters = ((iters as f64 * ratio).round() as u32).clamp(1, 1 << 22);
        t_c = time_iters(iters)?;
    }
    let balance = t_c.as_secs_f64() / transfer_one.as_secs_f64();
    println!(
        "chunk {} MiB × {chunks}: transfer {:.3} ms (upload + download), compute {:.3} ms at {iters} iterations (compute/transfer {:.2}; goal within 0.8–1.2)",
        chunk_mib,
        transfer_one.as_secs_f64() * 1e3,
        t_c.as_secs_f64() * 1e3,
        balance
    );

    // Serial: every step waits.
    let mut transfer_total = Duration::ZERO;
    let t0 = Instant::now();
    for (c, input) in inputs.iter().enumerate() {
        let a = Instant::now();
        let (buf, t) = gpu.upload_async(input)?;
        t.wait()?;
        transfer_total += a.elapsed();
        compute(&gpu, &k, &buf, iters)?.wait()?;
        let b = Instant::now();
        let out = buf.download_async()?.wait()?;
        transfer_total += b.elapsed();
        check(c, &out, input, iters);
    }
    let serial = t0.elapsed();

    // Pipelined: upload i + 1 and download i − 1 while chunk i computes.
    let t0 = Instant::now();
    let mut pending: VecDeque<(usize, Download<u32>)> = VecDeque::new();
    let mut next = Some(gpu.upload_async(&inputs[0])?.0);
    for c in 0..chunks {
        let buf = next.take().expect("chunk uploaded");
        // Waits for its upload on the GPU (semaphore), not here.
        let ticket = compute(&gpu, &k, &buf, iters)?;
        if c + 1 < chunks {
            next = Some(gpu.upload_async(&inputs[c + 1])?.0);
        }
        // Copies after the compute on the GPU (semaphore), not here.
        pending.push_back((c, buf.download_async()?));
        drop(ticket);
        if pending.len() > 1 {
            let (i, d) = pending.pop_front().expect("a download");
            check(i, &d.wait()?, &inputs[i], iters);
        }
    }
    while let Some((i, d)) = pending.pop_front() {
        check(i, &d.wait()?, &inputs[i], iters);
    }
    let pipelined = t0.elapsed();

    let hidden = (serial.as_secs_f64() - pipelined.as_secs_f64()) / transfer_total.as_secs_f64();
    println!("serial    {:>10.3} ms", serial.as_secs_f64() * 1e3);
    println!("pipelined {:>10.3} ms", pipelined.as_secs_f64() * 1e3);
    println!(
        "transfer  {:>10.3} ms (upload + download, serial run)",
        transfer_total.as_secs_f64() * 1e3
    );
    println!(
        "hidden = (serial − pipelined) / transfer = {:.1}% (goal ≥ 80%: {}); results checked",
        hidden * 100.0,
        if hidden >= 0.8 { "met" } else { "NOT met" }
    );
    if let Some(path) = json_path {
        let json = format!(
            "{{\"adapter\":\"{}\",\"driver\":\"{}\",\"transfer_queue\":{},\"chunk_bytes\":{},\"chunks\":{},\"iters\":{},\"compute_over_transfer\":{:.4},\"serial_ms\":{:.4},\"pipelined_ms\":{:.4},\"transfer_ms\":{:.4},\"hidden\":{:.4},\"goal_hidden\":0.8,\"results_checked\":true}}\n",
            gpu.info().name,
            gpu.info().driver_name,
            gpu.info().transfer_queue,
            n * 4,
            chunks,
            iters,
            balance,
            serial.as_secs_f64() * 1e3,
            pipelined.as_secs_f64() * 1e3,
            transfer_total.as_secs_f64() * 1e3,
            hidden
        );
        std::fs::write(&path, json).expect("write the JSON file");
        println!("wrote {path}");
    }
    Ok(())
}
