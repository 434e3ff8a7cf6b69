//! One large batch submitted once (as gpu_report's "independent of 1000,
//! per dispatch, one submission" row, `ours.wall_single_submit`): a batch
//! that records everything and submits once with automatic barriers off,
//! N `axpb` dispatches each on its own 1024-f32 slice of one buffer, then
//! `submit_async`, `Ticket::wait` and the ticket dropped; 3 untimed passes,
//! then PASSES passes (default 4). A target for
//! `valgrind --tool=callgrind`: count the phases with
//! `--toggle-collect=*ss_batch*`, `*ss_record*`, `*ss_submit*`, `*ss_wait*`
//! and `*ss_drop_ticket*`. The wait is blocking (`wait_spin` zero) and, with
//! `SETTLE=1`, starts 20 ms after the submission, so its count does not
//! depend on how long the device takes.
//!
//! `cargo run --release -p vkcompute-measure --example submit_profile [-- <dispatches>]`

use std::time::Duration;

use vkcompute::{Batch, BatchOptions, Buffer, Device, DeviceOptions, Kernel, Ticket};

const AXPB: &str = include_str!("../../shaders/axpb.comp");
const N: u32 = 1024;

#[inline(never)]
fn ss_batch(gpu: &Device) -> Batch {
    gpu.batch_with(BatchOptions::single_submit().with_auto_barriers(false))
        .expect("batch")
}

#[inline(never)]
fn ss_record(b: &mut Batch, k: &Kernel, many: &Buffer<f32>, n: usize, pc: &[u8; 12]) {
    for i in 0..n {
        let off = i * N as usize;
        let slice = many.slice(off..off + N as usize).expect("slice");
        b.run_with_push_constants(k, &[&slice], N, pc)
            .expect("record");
    }
}

#[inline(never)]
fn ss_submit(b: Batch) -> Ticket {
    b.submit_async().expect("submit")
}

#[inline(never)]
fn ss_wait(t: &Ticket) {
    t.wait().expect("wait");
}

#[inline(never)]
fn ss_drop_ticket(t: Ticket) {
    drop(t);
}

#[inline(never)]
fn ss_one(gpu: &Device, k: &Kernel, many: &Buffer<f32>, n: usize, pc: &[u8; 12], settle: bool) {
    let mut b = ss_batch(gpu);
    ss_record(&mut b, k, many, n, pc);
    let t = ss_submit(b);
    if settle {
        std::thread::sleep(Duration::from_millis(20));
    }
    ss_wait(&t);
    ss_drop_ticket(t);
}

fn main() -> vkcompute::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let passes: usize = std::env::var("PASSES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let settle = std::env::var_os("SETTLE").is_some();
    let gpu = Device::with_options(DeviceOptions {
        wait_spin: Duration::ZERO,
        ..Default::default()
    })?;
    let k = gpu.kernel_glsl(AXPB)?;
    let many = gpu.upload(&vec![0.0f32; N as usize * n])?;
    let mut pc = [0u8; 12];
    pc[..4].copy_from_slice(&1.0f32.to_le_bytes());
    pc[4..8].copy_from_slice(&1.0f32.to_le_bytes());
    pc[8..].copy_from_slice(&N.to_le_bytes());
    for _ in 0..3 {
        ss_one(&gpu, &k, &many, n, &pc, settle);
    }
    for _ in 0..passes {
        ss_one(&gpu, &k, &many, n, &pc, settle);
    }
    // Every element had 1 added per pass.
    let want = (3 + passes) as f32;
    let got = many.download()?;
    assert!(
        got.iter().all(|&v| v == want),
        "submit_profile: expected {want} everywhere, got {:?}",
        &got[..4]
    );
    println!("submit_profile: {passes} passes of {n} dispatches after 3, results checked");
    Ok(())
}
