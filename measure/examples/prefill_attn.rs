//! Causal prefill attention at Qwen3-4B's shapes (one sequence of 512
//! tokens, 32 query heads over 8 kv heads of 128), GPU time per call of
//! `nn::attention_prefill` on f32 tensors and on f16 ones (the tensor-core
//! kernel where the adapter has it, which the line names). Each dtype: one
//! call checked against an f64 CPU reference on every seventh query row and
//! the last three, then ROUNDS batches of CALLS calls (after one batch of
//! warm-up), a barrier between calls, every call timed by GPU timestamps
//! (`Profiling::Commands`); printed as min / median / max µs with the
//! kernel that ran and TFLOP/s at the median (4 · heads · dim per
//! query-key pair the causal mask keeps). `scripts/cuda_reference.py
//! --prefill-attention` times PyTorch's scaled_dot_product_attention at
//! the same shape.
//!
//! `--statistics` then prints the driver's pipeline statistics (registers,
//! local and shared memory) of the prefill kernels that ran. `--kernel
//! NAME` adds an f16 row for built-in NAME, another build of the
//! tensor-core kernel (64 queries per workgroup), run directly with the
//! op's push constants and grid, checked and timed the same way.
//!
//! `cargo run --release -p vkcompute-measure --example prefill_attn [-- --tokens T --rounds R --calls C --statistics --kernel NAME]`

use vkcompute::ops::nn::{self, NnElement, PrefillShape};
use vkcompute::ops::F16;
use vkcompute::{Batch, Buffer, Device};
use vkcompute_measure::probe::arg;

const Q_HEADS: u32 = 32;
const KV_HEADS: u32 = 8;
const DIM: u32 = 128;

/// The checked query rows: every seventh and the last three.
fn checked_rows(tokens: usize) -> Vec<usize> {
    (0..tokens)
        .filter(|&i| i % 7 == 0 || i + 3 >= tokens)
        .collect()
}

/// f64 causal attention of query rows `rows` (all heads), `[row, head, dim]`.
fn reference(q: &[f32], k: &[f32], v: &[f32], rows: &[usize], scale: f64) -> Vec<f64> {
    let (d, hq, hkv) = (DIM as usize, Q_HEADS as usize, KV_HEADS as usize);
    let mut out = Vec::with_capacity(rows.len() * hq * d);
    for &i in rows {
        for h in 0..hq {
            let kvh = h / (hq / hkv);
            let qr = &q[(i * hq + h) * d..][..d];
            let s: Vec<f64> = (0..=i)
                .map(|j| {
                    let kr = &k[(j * hkv + kvh) * d..][..d];
                    scale
                        * qr.iter()
                            .zip(kr)
                            .map(|(&a, &b)| f64::from(a) * f64::from(b))
                            .sum::<f64>()
                })
                .collect();
            let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
            let z: f64 = e.iter().sum();
            let mut o = vec![0.0; d];
            for (j, w) in e.iter().enumerate() {
                let vr = &v[(j * hkv + kvh) * d..][..d];
                for (a, &x) in o.iter_mut().zip(vr) {
                    *a += w / z * f64::from(x);
                }
            }
            out.extend(o);
        }
    }
    out
}

/// The inputs as `T` and as the exact f32 values of those `T`s.
trait Elem: NnElement {
    const NAME: &'static str;
    fn enc(x: f32) -> Self;
    fn dec(self) -> f32;
}

impl Elem for f32 {
    const NAME: &'static str = "f32";
    fn enc(x: f32) -> Self {
        x
    }
    fn dec(self) -> f32 {
        self
    }
}

impl Elem for F16 {
    const NAME: &'static str = "f16";
    fn enc(x: f32) -> Self {
        F16::from_f32(x)
    }
    fn dec(self) -> f32 {
        self.to_f32()
    }
}

/// Records one call: the op, or built-in `kernel` with the op's push
/// constants and grid (64-query tiles by heads).
#[allow(clippy::too_many_arguments)]
fn record<T: Elem>(
    b: &mut Batch,
    kernel: Option<&str>,
    [q, k, v, out]: [&Buffer<T>; 4],
    shape: PrefillShape,
    scale: f32,
) -> vkcompute::Result<()> {
    let Some(name) = kernel else {
        return nn::attention_prefill(b, q, k, v, out, shape, scale);
    };
    let kernel = vkcompute::ops::builtin_kernel(&q.device(), name, &[])?;
    let pc = [
        shape.tokens,
        shape.q_heads,
        shape.kv_heads,
        shape.head_dim,
        scale.to_bits(),
    ];
    let grid = [shape.tokens.div_ceil(64), shape.batch * shape.q_heads, 1];
    b.run_configured(
        &kernel,
        &[q, k, v, out],
        grid,
        Some(bytemuck::cast_slice(&pc)),
    )?;
    Ok(())
}

fn run<T: Elem>(
    gpu: &Device,
    kernel: Option<&str>,
    tokens: u32,
    rounds: usize,
    calls: usize,
) -> vkcompute::Result<()> {
    let shape = PrefillShape {
        batch: 1,
        tokens,
        q_heads: Q_HEADS,
        kv_heads: KV_HEADS,
        head_dim: DIM,
    };
    let enc = |n: u32, seed: u64| -> Vec<T> {
        vkcompute_measure::probe::values(seed, n as usize)
            .into_iter()
            .map(T::enc)
            .collect()
    };
    let (qh, kh, vh) = (
        enc(tokens * Q_HEADS * DIM, 1),
        enc(tokens * KV_HEADS * DIM, 2),
        enc(tokens * KV_HEADS * DIM, 3),
    );
    let (q, k, v) = (gpu.upload(&qh)?, gpu.upload(&kh)?, gpu.upload(&vh)?);
    let out = gpu.alloc::<T>((tokens * Q_HEADS * DIM) as usize)?;
    let scale = 1.0 / (DIM as f32).sqrt();
    let mut b = gpu.batch()?;
    record(&mut b, kernel, [&q, &k, &v, &out], shape, scale)?;
    b.submit()?;
    let got = out.download()?;
    let dec = |x: &[T]| x.iter().map(|&e| e.dec()).collect::<Vec<f32>>();
    let rows = checked_rows(tokens as usize);
    let want = reference(&dec(&qh), &dec(&kh), &dec(&vh), &rows, f64::from(scale));
    let row = (Q_HEADS * DIM) as usize;
    let got: Vec<f32> = rows
        .iter()
        .flat_map(|&i| got[i * row..(i + 1) * row].iter().map(|&e| e.dec()))
        .collect();
    let peak = want.iter().fold(0.0f64, |a, x| a.max(x.abs()));
    let err = got
        .iter()
        .zip(&want)
        .fold(0.0f64, |a, (&g, w)| a.max((f64::from(g) - w).abs()));
    // f16: one rounding of the output and the probabilities' (2^-10 of
    // the largest |v|); f32: the kernel's 1e-4.
    let tol = if T::NAME == "f32" { 1e-4 } else { 3e-3 };
    assert!(
        err <= tol * peak.max(1e-3),
        "{} prefill attention: max error {err:.3e} of {peak:.3e}",
        T::NAME
    );
    let (label, times) =
        vkcompute_measure::probe::profiled_calls(gpu, rounds, calls, "attn", |b| {
            record(b, kernel, [&q, &k, &v, &out], shape, scale)
        })?;
    let med = times[times.len() / 2];
    let pairs = f64::from(tokens) * f64::from(tokens + 1) / 2.0;
    let flops = 4.0 * f64::from(Q_HEADS * DIM) * pairs;
    println!(
        "{} {label} at {tokens} tokens: {:.2} / {med:.2} / {:.2} µs per call (min / median / max of {}), {:.1} TFLOP/s, max error {err:.2e} of {peak:.2e} ({} rows checked)",
        T::NAME,
        times[0],
        times[times.len() - 1],
        times.len(),
        flops / med / 1e6,
        rows.len()
    );
    Ok(())
}

fn main() -> vkcompute::Result<()> {
    let tokens = arg("--tokens", 512) as u32;
    let rounds = arg("--rounds", 5);
    let calls = arg("--calls", 20);
    let stats = std::env::args().any(|a| a == "--statistics");
    let gpu = Device::with_options(vkcompute::DeviceOptions {
        pipeline_statistics: stats,
        ..vkcompute::DeviceOptions::default()
    })?;
    let info = gpu.info();
    println!("device: {} ({})", info.name, info.driver_info);
    println!(
        "f16 on tensor cores: {}",
        nn::attention_prefill_on_tensor_cores::<F16>(info, DIM)
    );
    run::<f32>(&gpu, None, tokens, rounds, calls)?;
    if info.storage_buffer16 {
        run::<F16>(&gpu, None, tokens, rounds, calls)?;
    } else {
        println!("f16: skipped: the adapter lacks storageBuffer16BitAccess");
    }
    let args: Vec<String> = std::env::args().collect();
    for (i, _) in args.iter().enumerate().filter(|(_, a)| *a == "--kernel") {
        let name = args.get(i + 1).map(String::as_str).unwrap_or("");
        run::<F16>(&gpu, Some(name), tokens, rounds, calls)?;
    }
    if stats {
        for name in vkcompute::ops::builtin_names()
            .into_iter()
            .filter(|n| n.starts_with("nn_attn_prefill"))
        {
            // A kernel the adapter cannot build (the tensor-core one
            // elsewhere) has no statistics: say so and go on.
            if let Err(e) = vkcompute_measure::probe::print_statistics(&gpu, name) {
                println!("statistics {name}: none ({e})");
            }
        }
    }
    Ok(())
}
