//! Scratch: instruction counts per recorded dispatch and per round trip.
use std::hint::black_box;
use std::time::Duration;
use vkcompute::{Batch, BatchOptions, Buffer, Device, DeviceOptions, Kernel};

const AXPB: &str = include_str!("../shaders/axpb.comp");
const N: u32 = 1024;

fn opts() -> BatchOptions {
    BatchOptions::single_submit().with_auto_barriers(false)
}

#[inline(never)]
fn measure_rec(b: &mut Batch, k: &Kernel, bufs: &[Buffer<f32>], pc: &[u8; 12]) {
    for buf in bufs {
        b.run_with_push_constants(k, &[buf], N, pc).unwrap();
    }
}

#[inline(never)]
fn measure_slices(b: &mut Batch, k: &Kernel, big: &Buffer<f32>, n: usize, pc: &[u8; 12]) {
    for i in 0..n {
        let off = i * N as usize;
        let s = big.slice(off..off + N as usize).unwrap();
        b.run_with_push_constants(k, &[&s], N, pc).unwrap();
    }
}

#[inline(never)]
fn measure_rt(gpu: &Device, k: &Kernel, x: &Buffer<f32>, pc: &[u8; 12], n: usize, manual: bool) {
    for _ in 0..n {
        let mut b = if manual {
            gpu.batch_with(BatchOptions::default().with_auto_barriers(false))
                .unwrap()
        } else {
            gpu.batch().unwrap()
        };
        b.run_with_push_constants(k, &[x], N, pc).unwrap();
        b.submit().unwrap();
    }
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let mode = a[1].as_str();
    let n: usize = a[2].parse().unwrap();
    let gpu = Device::with_options(DeviceOptions {
        wait_spin: Duration::ZERO,
        ..Default::default()
    })
    .unwrap();
    let k = gpu.kernel_glsl(AXPB).unwrap();
    let x = gpu.upload(&vec![0.0f32; N as usize]).unwrap();
    let mut pc = [0u8; 12];
    pc[..4].copy_from_slice(&1.0f32.to_le_bytes());
    pc[4..8].copy_from_slice(&1.0f32.to_le_bytes());
    pc[8..].copy_from_slice(&N.to_le_bytes());
    match mode {
        "rec" => {
            let bufs: Vec<Buffer<f32>> = (0..n)
                .map(|_| gpu.alloc::<f32>(N as usize).unwrap())
                .collect();
            // Warm: a whole pass once (set cache filled as it would be in a steady state? no: each new)
            let mut b = gpu.batch_with(opts()).unwrap();
            b.run_with_push_constants(&k, &[&x], N, &pc).unwrap();
            measure_rec(&mut b, &k, black_box(&bufs), &pc);
            drop(b);
        }
        "slice" => {
            let big = gpu.alloc::<f32>(N as usize * n).unwrap();
            // A warm pass first (set cache and pools in their steady state).
            let mut b = gpu.batch_with(opts()).unwrap();
            b.run_with_push_constants(&k, &[&x], N, &pc).unwrap();
            measure_slices(&mut b, &k, black_box(&big), n, &pc);
            drop(b);
            let mut b = gpu.batch_with(opts()).unwrap();
            b.run_with_push_constants(&k, &[&x], N, &pc).unwrap();
            measure_slices(&mut b, &k, black_box(&big), n, &pc);
            drop(b);
        }
        "rt" | "rtm" => {
            for _ in 0..3 {
                let mut b = gpu.batch().unwrap();
                b.run_with_push_constants(&k, &[&x], N, &pc).unwrap();
                b.submit().unwrap();
            }
            if mode == "rt" {
                measure_rt(&gpu, &k, &x, &pc, n, false);
            } else {
                measure_rt(&gpu, &k, &x, &pc, n, true);
            }
        }
        _ => panic!(),
    }
}
