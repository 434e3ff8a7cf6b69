//! Async transfers: upload → compute → download with no CPU wait, from
//! several threads, through the mapping, through staging on the compute
//! queue, and on the transfer-only queue where the adapter has one.

mod common;
use common::*;

use std::future::Future;
use std::time::Duration;

use vkcompute::{Device, DeviceOptions, Error, Kernel};

/// x[i] = x[i] * 3 + c.
const TRIPLE_PLUS: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer X { uint x[]; };
layout(push_constant) uniform P { uint c; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < x.length()) x[i] = x[i] * 3u + c;
}
"#;

fn staged() -> DeviceOptions {
    DeviceOptions {
        direct_host_access: false,
        ..DeviceOptions::default()
    }
}

/// One round: upload, two dependent dispatches, download; nothing waits on
/// the CPU before the download's `wait`.
fn round(gpu: &Device, k: &Kernel, seed: u32, n: usize) {
    let data: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(seed) ^ seed).collect();
    let (buf, upload) = gpu.upload_async(&data).unwrap();
    drop(upload); // batches that use the buffer wait for the copy on the GPU
    let mut b = gpu.batch().unwrap();
    b.run_with_push_constants(k, &[&buf], n as u32, &seed.to_le_bytes())
        .unwrap();
    b.barrier();
    b.run_with_push_constants(k, &[&buf], n as u32, &1u32.to_le_bytes())
        .unwrap();
    let ticket = b.submit_async().unwrap();
    let down = buf.download_async().unwrap();
    assert_eq!(down.len(), n);
    // A batch submitted after the download runs after its copies: it must
    // not change what the download returns.
    let mut later = gpu.batch().unwrap();
    later
        .run_with_push_constants(k, &[&buf], n as u32, &7u32.to_le_bytes())
        .unwrap();
    let later = later.submit_async().unwrap();
    let got = down.wait().unwrap();
    for (i, (&g, &x)) in got.iter().zip(&data).enumerate() {
        let want = (x.wrapping_mul(3).wrapping_add(seed))
            .wrapping_mul(3)
            .wrapping_add(1);
        assert_eq!(g, want, "element {i} of round {seed}");
    }
    drop(ticket);
    later.wait().unwrap();
}

fn eight_threads(gpu: &Device, n: usize) {
    let k = gpu.kernel_glsl(TRIPLE_PLUS).unwrap();
    std::thread::scope(|s| {
        for t in 0..8u32 {
            let (gpu, k) = (gpu.clone(), k.clone());
            s.spawn(move || {
                for r in 0..4 {
                    round(&gpu, &k, 1 + t * 16 + r, n);
                }
            });
        }
    });
}

#[test]
fn upload_through_the_mapping_compute_download_from_eight_threads() {
    let gpu = gpu();
    eight_threads(&gpu, 10_000);
    assert_clean(&gpu);
}

#[test]
fn upload_compute_download_from_eight_threads_through_staging() {
    let gpu = gpu_with(staged());
    eight_threads(&gpu, 10_000);
    if gpu.info().transfer_queue {
        println!("transfer-only queue in use: {}", gpu.info().name);
    } else {
        skipped(format!(
            "{} has no transfer-only queue: the staged path ran on the compute queue",
            gpu.info().name
        ));
    }
    assert_clean(&gpu);
}

#[test]
fn large_transfers_copy_in_pieces_on_several_threads() {
    // 40 MiB: five 8 MiB pieces, above the parallel-copy threshold.
    let gpu = gpu_with(staged());
    let n = 10 << 20;
    let mut rng = Rng::new(3);
    let data: Vec<u32> = (0..n).map(|_| rng.next_u64() as u32).collect();
    let (buf, ticket) = gpu.upload_async(&data).unwrap();
    ticket.wait().unwrap();
    let got = buf.download_async().unwrap().wait().unwrap();
    assert!(got == data, "round trip of 40 MiB changed the data");
    // Into an existing slice: a wrong length is a typed error that leaves
    // the download usable; afterwards it is consumed.
    let mut into = vec![0u32; n];
    let mut d = buf.download_async().unwrap();
    let e = d.wait_into(&mut into[1..]).unwrap_err();
    assert!(
        matches!(e, Error::LengthMismatch { expected, got, .. } if expected == n as u64 && got == n as u64 - 1),
        "{e}"
    );
    d.wait_into(&mut into).unwrap();
    assert!(into == data, "wait_into changed the data");
    assert!(matches!(
        d.wait_into(&mut into),
        Err(Error::Consumed { .. })
    ));
    drop(d);
    // A poll right after the start drains whatever pieces completed into
    // the download's own Vec (none, some or all, as timing falls); then
    // `wait_into` must deliver those and the rest.
    for _ in 0..4 {
        into.fill(0);
        let mut d = buf.download_async().unwrap();
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match std::pin::Pin::new(&mut d).poll(&mut cx) {
            std::task::Poll::Ready(v) => {
                assert!(v.unwrap() == data, "polled download changed the data")
            }
            std::task::Poll::Pending => {
                d.wait_into(&mut into).unwrap();
                assert!(into == data, "wait_into after a poll changed the data");
            }
        }
    }
    // Awaited under tokio, and an odd size (not a multiple of 4 bytes).
    let bytes: Vec<u8> = (0..(9 << 20) + 3).map(|i| (i * 7 % 251) as u8).collect();
    let (buf, _t) = gpu.upload_async(&bytes).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let got = rt.block_on(buf.download_async().unwrap()).unwrap();
    assert!(got == bytes, "odd-sized round trip changed the data");
    assert_clean(&gpu);
}

#[test]
fn a_dropped_download_frees_its_staging_and_loss_reaches_downloads() {
    let gpu = gpu_with(staged());
    let data = vec![5u32; 1 << 16];
    let (buf, _t) = gpu.upload_async(&data).unwrap();
    for _ in 0..8 {
        drop(buf.download_async().unwrap());
    }
    gpu.trim().unwrap();
    let s = gpu.stats();
    assert_eq!(s.staging_buffers, 0, "{s:?}");
    assert_eq!(s.deferred, 0, "{s:?}");
    // Device loss: a pending download and a new transfer report it.
    let timeline = gpu.event().unwrap();
    let mut gb = gpu.batch().unwrap();
    gb.wait_event(&timeline, 1).unwrap();
    let gate = gb.submit_async().unwrap();
    let k = gpu.kernel_glsl(TRIPLE_PLUS).unwrap();
    let mut b = gpu.batch().unwrap();
    b.run_with_push_constants(&k, &[&buf], data.len() as u32, &1u32.to_le_bytes())
        .unwrap();
    let _t2 = b.submit_async().unwrap();
    let down = buf.download_async().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let pending = rt.block_on(async {
        tokio::time::timeout(Duration::from_millis(50), buf.download_async().unwrap()).await
    });
    assert!(pending.is_err(), "a download behind a gate completed");
    gpu.simulate_device_loss();
    assert!(matches!(down.wait(), Err(Error::DeviceLost { .. })));
    assert!(matches!(
        gpu.upload_async(&data),
        Err(Error::DeviceLost { .. })
    ));
    assert!(matches!(
        buf.download_async(),
        Err(Error::DeviceLost { .. })
    ));
    assert!(matches!(rt.block_on(gate), Err(Error::DeviceLost { .. })));
    drop(timeline);
}
