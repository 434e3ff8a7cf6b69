//! Records many dispatches into one batch (never submitted): a target for
//! CPU profilers (`valgrind --tool=callgrind`, `perf record`).
//!
//! `cargo run --release -p vkcompute-measure --example record_profile [-- <dispatches>]`
//!
//! `BARRIER=1` adds a barrier after each dispatch; `NEW_BUFFERS=<k>` binds
//! a different one of `k` buffers to each dispatch in turn (the binding
//! path: pushed descriptors, or the set cache with
//! `VKCOMPUTE_PUSH_DESCRIPTORS=0`); `AUTO_BARRIERS=0` records without
//! automatic hazard tracking.

use vkcompute::{BatchOptions, Device};

const AXPB: &str = include_str!("../../shaders/axpb.comp");

fn main() -> vkcompute::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let gpu = Device::new()?;
    let k = gpu.kernel_glsl(AXPB)?;
    let x = gpu.alloc::<f32>(1024)?;
    let k_bufs: usize = std::env::var("NEW_BUFFERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let bufs = (0..k_bufs)
        .map(|_| gpu.alloc::<f32>(1024))
        .collect::<vkcompute::Result<Vec<_>>>()?;
    let mut pc = [0u8; 12];
    pc[8..].copy_from_slice(&1024u32.to_le_bytes());
    let barrier = std::env::var_os("BARRIER").is_some();
    let t = std::time::Instant::now();
    let auto = std::env::var_os("AUTO_BARRIERS").map_or(true, |v| v != "0");
    let mut b = gpu.batch_with(BatchOptions::single_submit().with_auto_barriers(auto))?;
    for i in 0..n {
        let buf = if bufs.is_empty() {
            &x
        } else {
            &bufs[i % bufs.len()]
        };
        b.run_with_push_constants(&k, &[buf], 1024, &pc)?;
        if barrier {
            b.barrier();
        }
    }
    let per = t.elapsed().as_nanos() as f64 / n as f64;
    println!("{per:.1} ns per dispatch (barriers: {barrier}, buffers: {k_bufs})");
    drop(b);
    Ok(())
}
