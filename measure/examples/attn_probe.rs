//! Decode attention at Qwen3-4B's shapes (one sequence, 32 query heads over
//! 8 kv heads of 128, bf16 caches of 4,104 positions), GPU time per call
//! at the lengths a decode meets: 35, 600 and 4,000 positions. Each length:
//! one call checked against an f64 CPU reference, then ROUNDS batches of
//! CALLS calls, a barrier between calls, every call timed by GPU
//! timestamps (`Profiling::Commands`); printed as min / median / max µs
//! with the kernel that ran and the cache bytes a call reads over that
//! time.
//!
//! `--statistics` then prints the driver's pipeline statistics (registers,
//! local and shared memory) of every `nn_attn_*` kernel: the decode ones at
//! each head group a plan can give (1, 2, 4, 8, 16), the others
//! unspecialized.
//!
//! `cargo run --release -p vkcompute-measure --example attn_probe [-- --rounds R --calls C --statistics]`

use vkcompute::ops::nn::{self, DecodeShape};
use vkcompute::ops::Bf16;
use vkcompute::Device;
use vkcompute_measure::probe::arg;

const Q_HEADS: u32 = 32;
const KV_HEADS: u32 = 8;
const DIM: u32 = 128;
const MAX_SEQ: u32 = 4104;

/// `probe::values` of `seed`, rounded to bf16.
fn values(n: usize, seed: u64) -> Vec<Bf16> {
    vkcompute_measure::probe::values(seed, n)
        .into_iter()
        .map(Bf16::from_f32)
        .collect()
}

/// f64 decode attention of one sequence of `len` positions.
fn reference(q: &[Bf16], k: &[Bf16], v: &[Bf16], len: usize, scale: f64) -> Vec<f64> {
    let (d, ratio) = (DIM as usize, (Q_HEADS / KV_HEADS) as usize);
    let mut out = vec![0.0; Q_HEADS as usize * d];
    for h in 0..Q_HEADS as usize {
        let kvh = h / ratio;
        let base = kvh * MAX_SEQ as usize * d;
        let qh = &q[h * d..(h + 1) * d];
        let s: Vec<f64> = (0..len)
            .map(|p| {
                let row = &k[base + p * d..base + (p + 1) * d];
                scale
                    * qh.iter()
                        .zip(row)
                        .map(|(a, b)| f64::from(a.to_f32()) * f64::from(b.to_f32()))
                        .sum::<f64>()
            })
            .collect();
        let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
        let z: f64 = e.iter().sum();
        for (p, w) in e.iter().enumerate() {
            let row = &v[base + p * d..base + (p + 1) * d];
            for (o, x) in out[h * d..(h + 1) * d].iter_mut().zip(row) {
                *o += w / z * f64::from(x.to_f32());
            }
        }
    }
    out
}

fn main() -> vkcompute::Result<()> {
    let rounds = arg("--rounds", 5);
    let calls = arg("--calls", 20);
    let stats = std::env::args().any(|a| a == "--statistics");
    let gpu = Device::with_options(vkcompute::DeviceOptions {
        pipeline_statistics: stats,
        ..vkcompute::DeviceOptions::default()
    })?;
    let info = gpu.info();
    println!("device: {} ({})", info.name, info.driver_info);
    let shape = DecodeShape {
        batch: 1,
        q_heads: Q_HEADS,
        kv_heads: KV_HEADS,
        head_dim: DIM,
        max_seq: MAX_SEQ,
    };
    let cache = (KV_HEADS * MAX_SEQ * DIM) as usize;
    let (qh, kh, vh) = (
        values((Q_HEADS * DIM) as usize, 1),
        values(cache, 2),
        values(cache, 3),
    );
    let (q, k, v) = (gpu.upload(&qh)?, gpu.upload(&kh)?, gpu.upload(&vh)?);
    let out = gpu.alloc::<Bf16>((Q_HEADS * DIM) as usize)?;
    let lens = gpu.upload(&[0u32])?;
    let scale = 1.0 / (DIM as f32).sqrt();
    for len in [35u32, 600, 4000] {
        lens.write(0, &[len])?;
        let mut b = gpu.batch()?;
        nn::attention_decode(&mut b, &q, &k, &v, &lens, &out, shape, scale)?;
        b.submit()?;
        let got = out.download()?;
        let want = reference(&qh, &kh, &vh, len as usize, f64::from(scale));
        let peak = want.iter().fold(0.0f64, |a, x| a.max(x.abs()));
        let err = got
            .iter()
            .zip(&want)
            .fold(0.0f64, |a, (g, w)| a.max((f64::from(g.to_f32()) - w).abs()));
        assert!(
            err <= 1e-2 * peak.max(1e-3),
            "attention at {len} positions: max error {err:.3e} of {peak:.3e}"
        );
        let (label, times) =
            vkcompute_measure::probe::profiled_calls(&gpu, rounds, calls, "attn", |b| {
                nn::attention_decode(b, &q, &k, &v, &lens, &out, shape, scale)
            })?;
        let med = times[times.len() / 2];
        let bytes = 2.0 * f64::from(KV_HEADS * len * DIM) * 2.0;
        println!(
            "{label} at {len} positions: {:.2} / {med:.2} / {:.2} µs per call (min / median / max of {}), {:.1} GB/s of cache, max error {err:.2e} of {peak:.2e}",
            times[0],
            times[times.len() - 1],
            times.len(),
            bytes / med / 1e3
        );
    }
    if stats {
        for name in vkcompute::ops::builtin_names()
            .into_iter()
            .filter(|n| n.starts_with("nn_attn_"))
        {
            // The decode kernels at every head group a plan can give (the
            // `GROUP` specialization constant), beside those the calls built.
            if name.starts_with("nn_attn_decode") {
                for g in [1, 2, 4, 8, 16] {
                    vkcompute::ops::builtin_kernel(&gpu, name, &[(0, g)])?;
                }
            }
            // The tensor-core prefill kernel builds only where the adapter
            // has VK_NV_cooperative_matrix2: say so and go on.
            if let Err(e) = vkcompute_measure::probe::print_statistics(&gpu, name) {
                println!("statistics {name}: none ({e})");
            }
        }
    }
    Ok(())
}
