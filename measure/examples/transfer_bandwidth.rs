//! Host ↔ device bandwidth of 256 MiB from and into a user's `Vec`, and
//! where the time goes.
//!
//! Rows (GB/s, median of the repetitions, results checked):
//! - host memcpy Vec → new Vec, one thread: the host-side ceiling of one
//!   core (a fresh `Vec` also pays its page faults);
//! - GPU copy only (`Batch::copy`): between a host-visible buffer (pinned system
//!   memory) and a device-local one, both ways: the ceiling with no host copy;
//! - `Device::upload` / `Buffer::download`: the blocking staged path;
//! - `Device::upload_async` + wait / `Buffer::download_async` + wait: the
//!   pipelined path (pieces of 8 MiB, host copies on up to 4 threads,
//!   transfer-only queue where there is one);
//! - downloads into an existing `Vec` (`Buffer::download_into`,
//!   `Download::wait_into`): what PyTorch's `hp.copy_(dv)` measures, so the
//!   d2h ratio uses the `wait_into` row (a fresh `Vec` pays a page fault
//!   per 4 KiB on first touch).
//!
//! Pass PyTorch's pageable figures from `cuda_ops_anchor.py` of the same
//! run (`--torch-h2d GBPS --torch-d2h GBPS`) to print the ratios (the
//! goal: async ≥ 0.8× PyTorch's pageable copy, both directions).
//!
//! `cargo run --release -p vkcompute-measure --example transfer_bandwidth -- [--json PATH] [--mib N] [--torch-h2d X] [--torch-d2h Y] [--staged]`
//! (`--staged`: staging copies even where device-local memory is host-visible)

use std::time::{Duration, Instant};

use vkcompute::{Device, Memory};

fn gbps(bytes: usize, t: Duration) -> f64 {
    bytes as f64 / t.as_secs_f64() / 1e9
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Median time of `reps` runs of `f` after one warm-up run.
fn time(reps: usize, mut f: impl FnMut() -> vkcompute::Result<()>) -> vkcompute::Result<Duration> {
    f()?;
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t0 = Instant::now();
        f()?;
        v.push(t0.elapsed());
    }
    Ok(median(v))
}

fn main() -> vkcompute::Result<()> {
    let quick = std::env::var_os("VKCOMPUTE_QUICK").is_some();
    let mut json_path = None;
    let mut mib: usize = if quick { 16 } else { 256 };
    let mut torch_h2d: Option<f64> = None;
    let mut torch_d2h: Option<f64> = None;
    let mut staged = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().and_then(|v| v.parse::<f64>().ok());
        match a.as_str() {
            "--json" => json_path = args.next(),
            "--mib" => mib = val().map_or(mib, |v| (v as usize).max(1)),
            "--torch-h2d" => torch_h2d = val(),
            "--torch-d2h" => torch_d2h = val(),
            "--staged" => staged = true,
            other => {
                eprintln!("unknown argument {other:?}; usage: transfer_bandwidth [--json PATH] [--mib N] [--torch-h2d X] [--torch-d2h Y] [--staged]");
                std::process::exit(2);
            }
        }
    }
    let reps = if quick { 3 } else { 7 };
    // `--staged`: every host transfer goes through staging copies, even
    // where device-local memory is host-visible (lavapipe, ReBAR).
    let gpu = Device::with_options(vkcompute::DeviceOptions {
        direct_host_access: !staged,
        ..Default::default()
    })?;
    println!(
        "adapter: {} ({}), transfer-only queue: {}, {} MiB, median of {reps}",
        gpu.info().name,
        gpu.info().driver_name,
        gpu.info().transfer_queue,
        mib
    );
    let n = mib << 18;
    let bytes = n * 4;
    let data: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(2654435761)).collect();
    let mut rows: Vec<(&str, f64)> = Vec::new();

    // Host ceiling: one core copying into a fresh Vec.
    let t = time(reps, || {
        let v = data.clone();
        std::hint::black_box(&v);
        Ok(())
    })?;
    rows.push(("host memcpy into a new Vec (1 thread)", gbps(bytes, t)));

    // DMA only: pinned host-visible ↔ device-local, on the GPU.
    let host = gpu.upload_with(&data, Memory::HostVisible)?;
    let dev = gpu.alloc::<u32>(n)?;
    let t = time(reps, || {
        let mut b = gpu.batch()?;
        b.copy(&host, &dev)?;
        b.submit()
    })?;
    rows.push(("GPU copy host-visible → device-local", gbps(bytes, t)));
    let t = time(reps, || {
        let mut b = gpu.batch()?;
        b.copy(&dev, &host)?;
        b.submit()
    })?;
    rows.push(("GPU copy device-local → host-visible", gbps(bytes, t)));
    assert!(
        host.download()? == data,
        "GPU copy round trip changed the data"
    );
    drop((host, dev));

    // Blocking staged path.
    let mut last = None;
    let t = time(reps, || {
        last = Some(gpu.upload(&data)?);
        Ok(())
    })?;
    let up_sync = gbps(bytes, t);
    rows.push(("upload (blocking)", up_sync));
    let buf = last.take().expect("uploaded");
    let mut back = Vec::new();
    let t = time(reps, || {
        back = buf.download()?;
        Ok(())
    })?;
    assert!(back == data, "blocking download differs");
    let down_sync = gbps(bytes, t);
    rows.push(("download into a new Vec (blocking)", down_sync));
    // Into memory the host already touched, as PyTorch's `hp.copy_(dv)`.
    let mut into = vec![0u32; n];
    let t = time(reps, || buf.download_into(&mut into))?;
    assert!(into == data, "blocking download_into differs");
    let down_sync_into = gbps(bytes, t);
    rows.push(("download_into an existing Vec (blocking)", down_sync_into));
    drop(buf);

    // Async pipelined path.
    let t = time(reps, || {
        let (b, ticket) = gpu.upload_async(&data)?;
        ticket.wait()?;
        last = Some(b);
        Ok(())
    })?;
    let up_async = gbps(bytes, t);
    rows.push(("upload_async + wait", up_async));
    let buf = last.take().expect("uploaded");
    let t = time(reps, || {
        back = buf.download_async()?.wait()?;
        Ok(())
    })?;
    assert!(back == data, "async download differs");
    let down_async = gbps(bytes, t);
    rows.push(("download_async + wait into a new Vec", down_async));
    into.fill(0);
    let t = time(reps, || buf.download_async()?.wait_into(&mut into))?;
    assert!(into == data, "async download wait_into differs");
    let down_async_into = gbps(bytes, t);
    rows.push((
        "download_async + wait_into an existing Vec",
        down_async_into,
    ));

    for (name, v) in &rows {
        println!("{name:<44} {v:>7.2} GB/s");
    }
    let ratio = |ours: f64, torch: Option<f64>| torch.map(|t| ours / t);
    // Like with like: PyTorch's d2h copies into a host tensor it allocated
    // (and touched) before the timer, so ours is the `wait_into` row; its
    // h2d copies into an existing device tensor while ours allocates one.
    for (dir, ours, torch) in [
        ("h2d", up_async, torch_h2d),
        ("d2h", down_async_into, torch_d2h),
    ] {
        match ratio(ours, torch) {
            Some(r) => println!(
                "{dir}: async {ours:.2} GB/s vs PyTorch pageable {:.2} GB/s = {r:.2}× (goal ≥ 0.8×: {})",
                torch.unwrap_or_default(),
                if r >= 0.8 { "met" } else { "NOT met" }
            ),
            None => println!("{dir}: async {ours:.2} GB/s (pass --torch-{dir} GBPS for the ratio)"),
        }
    }
    if let Some(path) = json_path {
        let opt = |v: Option<f64>| v.map_or("null".to_string(), |x| format!("{x:.4}"));
        let rows_json: Vec<String> = rows
            .iter()
            .map(|(n, v)| format!("{{\"name\":\"{n}\",\"gbps\":{v:.4}}}"))
            .collect();
        let json = format!(
            "{{\"adapter\":\"{}\",\"driver\":\"{}\",\"transfer_queue\":{},\"bytes\":{},\"reps\":{},\"rows\":[{}],\"h2d_async_gbps\":{:.4},\"d2h_async_gbps\":{:.4},\"d2h_async_new_vec_gbps\":{:.4},\"d2h_sync_into_gbps\":{:.4},\"h2d_sync_gbps\":{:.4},\"d2h_sync_gbps\":{:.4},\"torch_h2d_pageable_gbps\":{},\"torch_d2h_pageable_gbps\":{},\"h2d_ratio\":{},\"d2h_ratio\":{},\"goal_ratio\":0.8,\"results_checked\":true}}\n",
            gpu.info().name,
            gpu.info().driver_name,
            gpu.info().transfer_queue,
            bytes,
            reps,
            rows_json.join(","),
            up_async,
            down_async_into,
            down_async,
            down_sync_into,
            up_sync,
            down_sync,
            opt(torch_h2d),
            opt(torch_d2h),
            opt(ratio(up_async, torch_h2d)),
            opt(ratio(down_async_into, torch_d2h)),
        );
        std::fs::write(&path, json).expect("write the JSON file");
        println!("wrote {path}");
    }
    Ok(())
}
