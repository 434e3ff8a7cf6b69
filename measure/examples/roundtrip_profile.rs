//! One-dispatch round trips (as gpu_report's `ours.submit_wait()`): a new
//! batch (`Device::batch`, default options), one `axpb` dispatch on a
//! 1024-f32 buffer, `submit_async`, `Ticket::wait`, the ticket dropped; N
//! times after 3 untimed ones. A target for `valgrind --tool=callgrind`
//! (count the phases with `--toggle-collect=*rt_setup*`,
//! `*rt_submit*`, `*rt_wait*` and `*rt_drop_ticket*`) and `strace -c -f`;
//! `docs/runs/2026-11-26-callgrind-roundtrip/README.md` has the commands.
//!
//! `cargo run --release -p vkcompute-measure --example roundtrip_profile [-- <round trips>]`
//!
//! `SPIN=1` keeps the default spin-then-block wait (else `wait_spin` is
//! zero: a blocking wait, whose instruction count does not depend on how
//! long the GPU takes). `ISOLATE=<MiB>` writes one byte per 64 of a buffer
//! of that size before each round trip, so that the round trip finds the
//! caches cold, as an isolated one does: under `--cache-sim=yes`, the
//! last-level misses per round trip count the cache lines it touches.
//! `SETTLE=1` sleeps 10 ms between the submission and the wait, so that
//! the wait always finds the work done: the housekeeping a wait does while
//! the GPU works then never runs, and the counts do not depend on when the
//! driver's thread ran.

use std::time::Duration;

use vkcompute::{Batch, Device, DeviceOptions, Kernel, Ticket};

const AXPB: &str = include_str!("../../shaders/axpb.comp");
const N: u32 = 1024;

#[inline(never)]
fn rt_batch(gpu: &Device) -> Batch {
    gpu.batch().expect("batch")
}

#[inline(never)]
fn rt_record(b: &mut Batch, k: &Kernel, x: &vkcompute::Buffer<f32>, pc: &[u8; 12]) {
    b.run_with_push_constants(k, &[x], N, pc).expect("record");
}

#[inline(never)]
fn rt_submit(b: Batch) -> Ticket {
    b.submit_async().expect("submit")
}

#[inline(never)]
fn rt_wait(t: &Ticket) {
    t.wait().expect("wait");
}

#[inline(never)]
fn rt_drop_ticket(t: Ticket) {
    drop(t);
}

/// A new batch with one dispatch recorded (outside gpu_report's timing).
#[inline(never)]
fn rt_setup(gpu: &Device, k: &Kernel, x: &vkcompute::Buffer<f32>, pc: &[u8; 12]) -> Batch {
    let mut b = rt_batch(gpu);
    rt_record(&mut b, k, x, pc);
    b
}

/// One round trip; with `settle`, the GPU finishes before the wait starts.
#[inline(never)]
fn rt_one(gpu: &Device, k: &Kernel, x: &vkcompute::Buffer<f32>, pc: &[u8; 12], settle: bool) {
    let b = rt_setup(gpu, k, x, pc);
    let t = rt_submit(b);
    if settle {
        std::thread::sleep(Duration::from_millis(10));
    }
    rt_wait(&t);
    rt_drop_ticket(t);
}

#[inline(never)]
fn thrash(buf: &mut [u8]) {
    for i in (0..buf.len()).step_by(64) {
        buf[i] = buf[i].wrapping_add(1);
    }
    std::hint::black_box(&buf);
}

#[inline(never)]
fn round_trips(
    gpu: &Device,
    k: &Kernel,
    x: &vkcompute::Buffer<f32>,
    pc: &[u8; 12],
    n: usize,
    cold: &mut [u8],
    settle: bool,
) {
    for _ in 0..n {
        if !cold.is_empty() {
            thrash(cold);
        }
        rt_one(gpu, k, x, pc, settle);
    }
}

fn main() -> vkcompute::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let spin = std::env::var_os("SPIN").is_some_and(|v| v != "0");
    let mut options = DeviceOptions::default();
    if !spin {
        options.wait_spin = Duration::ZERO;
    }
    let gpu = Device::with_options(options)?;
    let k = gpu.kernel_glsl(AXPB)?;
    let x = gpu.upload(&vec![0.0f32; N as usize])?;
    let mut pc = [0u8; 12];
    pc[..4].copy_from_slice(&1.0f32.to_le_bytes());
    pc[4..8].copy_from_slice(&1.0f32.to_le_bytes());
    pc[8..].copy_from_slice(&N.to_le_bytes());
    let mib: usize = std::env::var("ISOLATE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut cold = vec![0u8; mib << 20];
    let settle = std::env::var_os("SETTLE").is_some_and(|v| v != "0");
    round_trips(&gpu, &k, &x, &pc, 3, &mut [], settle);
    let t = std::time::Instant::now();
    round_trips(&gpu, &k, &x, &pc, n, &mut cold, settle);
    let per = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    println!(
        "{per:.2} us per round trip ({n}, spin: {spin}); Batch {} B, Ticket {} B",
        std::mem::size_of::<Batch>(),
        std::mem::size_of::<Ticket>()
    );
    Ok(())
}
