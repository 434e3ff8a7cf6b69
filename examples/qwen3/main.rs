//! Runs a Hugging Face Qwen3 or Llama checkpoint with the crate's ops:
//! load, prefill, greedy (or sampled) decode of B sequences with one graph
//! launch per step, and timings.
//!
//! ```text
//! cargo run --release --example qwen3 -- DIR [--prompt 1,2,3 | --prompt-len N] [--decode N]
//!     [--batch B] [--sample T,K,P,SEED] [--reference FILE] [--kv-16]
//!     [--profile] [--prefill exact|f16|auto] [--decode-matmul exact|auto]
//! cargo run --release --example qwen3 -- --tiny OUTDIR [same options]
//! ```
//!
//! `--tiny OUTDIR` writes a tiny random Qwen3 checkpoint (bf16) there and
//! runs it. `--reference FILE` compares our logits with a safetensors file
//! of the transformers model's (`prompt` I32 `[P]`, `tokens` I32 `[N]`,
//! `logits` F32 `[N, vocab]`; row 0 at the last prompt position, row i the
//! step that consumed `tokens[i-1]`), teacher-forcing its tokens; exit code
//! 1 when the worst row's max|ours - ref| / max|ref| exceeds 1e-3.
//! The KV cache is in f32 (the mode to compare with a reference at 1e-3 on
//! 16-bit weights, with no conversions in the step) unless `--kv-16` (the
//! weights' 16-bit dtype: half the cache memory, one more dispatch per
//! decode layer, the attention output's widening; three more with
//! `--two-op-attention`).
//! `--prefill` picks the prefill's projections: `exact` (f32 activations
//! through `ops::linear`, 64 prompt rows per call), `f16` (f16 products
//! over all prompt rows at once, f32 accumulation; tensor cores where the
//! adapter has `VK_NV_cooperative_matrix2`, else a portable kernel) or
//! `auto` (the default: `f16` for prompts past 64 tokens where there are
//! tensor cores and 16-bit weights, else `exact`). The `--reference` comparison always prefills
//! exactly; the timings use the chosen path and name it.
//! `--decode-matmul` picks the decode step's projections: `auto` (the
//! default: `ops::choose_linear`'s own plan for the batch's rows, which
//! from 5 sequences with 16-bit weights takes the tensor-core streaming
//! kernel where the adapter has the Khronos cooperative matrices, rounding
//! each projection's input rows to f16) or `exact` (f32 activations in
//! every product). With `--reference` the decode is exact.
//! `--profile` prints one decode step's GPU time per kernel beside the
//! weight-streaming floor at the copy bandwidth measured in the same run,
//! after the timed runs (which stay unprofiled: before 2026-11-27 they
//! ran the profiled graph, 8 % slower on an H200).
//! `--statistics` prints, at the end, what the driver made of the decode
//! attention kernels (registers, shared memory: the statistics of
//! `vkcompute::ops::builtin_statistics`, for the specializations the run
//! built).
//! `--wait-spin-us N` sets how long a wait spins before it blocks
//! (`DeviceOptions::wait_spin`; the default is the crate's).
//! `--two-op-attention` records each decode layer's q/k norms, rotary and
//! KV append as a dispatch of its own before attention, instead of inside
//! attention's dispatch (`nn::attention_decode_qkv`, the default where the
//! adapter has subgroup arithmetic).
//! `--fused-mlp` records each decode layer's MLP as one fused
//! `ops::swiglu_mlp` dispatch (up to 4 sequences, on adapters with f32
//! atomic adds) instead of the norm fused into gate|up, then down with the
//! residual (on an H200 the fused form made the step slower).

mod attend;
mod buffers;
#[allow(dead_code)]
mod checkpoint;
#[allow(dead_code)]
mod config;
#[allow(dead_code)]
mod model;
mod prefill;
mod prefill16;
mod project;
mod report;
mod state;
#[allow(dead_code)]
mod tiny;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use vkcompute::ops::nn::SampleParams;
use vkcompute::{Device, DeviceOptions};

use checkpoint::Checkpoint;
use config::{Arch, WeightDtype};
use model::{DecodeMatmul, Model, ModelOptions, PrefillMatmul};

/// The command line.
struct Args {
    dir: PathBuf,
    tiny: bool,
    prompt: Vec<u32>,
    decode: u32,
    batch: u32,
    sample: Option<SampleParams>,
    reference: Option<PathBuf>,
    profile: bool,
    /// The prompt is `--prompt-len`'s generated ids.
    prompt_len: bool,
    kv_f32: bool,
    /// `--two-op-attention`: the q/k op and attention as two dispatches.
    fused_qk: bool,
    /// `--fused-mlp`: the decode step's MLP as one fused dispatch.
    fused_mlp: bool,
    prefill: PrefillMatmul,
    decode_matmul: DecodeMatmul,
    /// `DeviceOptions::wait_spin` when given (`--wait-spin-us`).
    wait_spin: Option<std::time::Duration>,
    /// `--statistics`: the driver's statistics of the decode step's
    /// attention kernels at the end.
    statistics: bool,
}

const USAGE: &str =
    "usage: qwen3 DIR | --tiny OUTDIR [--prompt 1,2,3 | --prompt-len N] [--decode N] [--batch B] \
                     [--sample T,K,P,SEED] [--reference FILE] [--kv-16] [--profile] \
                     [--prefill exact|f16|auto] [--decode-matmul exact|auto] [--wait-spin-us N] \
                     [--two-op-attention] [--fused-mlp] [--statistics]";

fn parse_list<T: std::str::FromStr>(s: &str, what: &str) -> Result<Vec<T>, String> {
    s.split(',')
        .map(|x| {
            x.trim()
                .parse()
                .map_err(|_| format!("{what}: bad value {x:?}"))
        })
        .collect()
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut a = Args {
        dir: PathBuf::new(),
        tiny: false,
        prompt: vec![1, 2, 3],
        decode: 32,
        batch: 1,
        sample: None,
        reference: None,
        profile: false,
        kv_f32: true,
        fused_qk: true,
        fused_mlp: false,
        prompt_len: false,
        prefill: PrefillMatmul::Auto,
        decode_matmul: DecodeMatmul::Auto,
        wait_spin: None,
        statistics: false,
    };
    let mut dir = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut val = |name: &str| it.next().cloned().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--tiny" => {
                a.tiny = true;
                dir = Some(val("--tiny")?);
            }
            "--prompt" => a.prompt = parse_list(&val("--prompt")?, "--prompt")?,
            "--prompt-len" => {
                // A prompt of N seeded pseudo-random token ids below 1000
                // (every vocabulary here is larger), for prefill timing and
                // for decoding at a given position.
                a.prompt_len = true;
                let n: u32 = val("--prompt-len")?
                    .parse()
                    .map_err(|_| "--prompt-len: not a number")?;
                let mut x = 0x9e37_79b9_7f4a_7c15u64;
                a.prompt = (0..n)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        // Reduced below the vocabulary once it is known.
                        (x % 1000) as u32
                    })
                    .collect();
            }
            "--decode" => {
                a.decode = val("--decode")?
                    .parse()
                    .map_err(|_| "--decode: not a number")?
            }
            "--batch" => {
                a.batch = val("--batch")?
                    .parse()
                    .map_err(|_| "--batch: not a number")?
            }
            "--sample" => {
                let v: Vec<f64> = parse_list(&val("--sample")?, "--sample")?;
                let [t, k, p, seed] = v[..] else {
                    return Err("--sample takes T,K,P,SEED".into());
                };
                a.sample = Some(SampleParams {
                    temperature: t as f32,
                    top_k: k as u32,
                    top_p: p as f32,
                    seed: seed as u64,
                });
            }
            "--reference" => a.reference = Some(PathBuf::from(val("--reference")?)),
            "--profile" => a.profile = true,
            "--statistics" => a.statistics = true,
            "--kv-16" => a.kv_f32 = false,
            "--two-op-attention" => a.fused_qk = false,
            "--fused-mlp" => a.fused_mlp = true,
            "--prefill" => {
                let v = val("--prefill")?;
                a.prefill = PrefillMatmul::parse(&v)
                    .ok_or(format!("--prefill: {v:?} is not exact, f16 or auto"))?;
            }
            "--decode-matmul" => {
                let v = val("--decode-matmul")?;
                a.decode_matmul = DecodeMatmul::parse(&v)
                    .ok_or(format!("--decode-matmul: {v:?} is not exact or auto"))?;
            }
            "--wait-spin-us" => {
                let us: u64 = val("--wait-spin-us")?
                    .parse()
                    .map_err(|_| "--wait-spin-us: not a number")?;
                a.wait_spin = Some(std::time::Duration::from_micros(us));
            }
            s if s.starts_with("--") => return Err(format!("unknown option {s}\n{USAGE}")),
            s => dir = Some(s.to_string()),
        }
    }
    a.dir = PathBuf::from(dir.ok_or(USAGE)?);
    if a.prompt.is_empty() {
        return Err("--prompt: empty".into());
    }
    Ok(a)
}

fn run(args: &[String]) -> Result<bool, Box<dyn std::error::Error>> {
    let mut a = parse(args)?;
    if a.tiny {
        let c = tiny::tiny_config(Arch::Qwen3, WeightDtype::Bf16);
        tiny::write_checkpoint(&a.dir, &c, 1, 1)?;
        println!(
            "wrote a tiny random Qwen3 checkpoint to {}",
            a.dir.display()
        );
    }
    let refdata = match &a.reference {
        Some(p) => {
            let r = report::RefFile::read(p)?;
            a.prompt = r.prompt.clone();
            Some(r)
        }
        None => None,
    };
    let mut options = DeviceOptions::default();
    if let Some(spin) = a.wait_spin {
        options.wait_spin = spin;
    }
    options.pipeline_statistics = a.statistics;
    let gpu = Device::with_options(options)?;
    println!(
        "device: {}; waits spin {} µs before blocking",
        gpu.info().name,
        gpu.options().wait_spin.as_micros()
    );
    let t = Instant::now();
    let ck = Checkpoint::open(&a.dir)?;
    let vocab = ck.config.vocab;
    for t in &mut a.prompt {
        if a.prompt_len && *t >= vocab {
            *t %= vocab;
        }
    }
    println!(
        "checkpoint: {:?} {} layers, hidden {}, vocab {}, {} ({:.2} GB), opened in {:.1} ms",
        ck.config.arch,
        ck.config.layers,
        ck.config.hidden,
        ck.config.vocab,
        ck.config.dtype.name(),
        ck.total_bytes() as f64 / 1e9,
        t.elapsed().as_secs_f64() * 1e3
    );
    let steps = a
        .decode
        .max(refdata.as_ref().map_or(0, |r| r.tokens.len() as u32));
    let opts = ModelOptions {
        batch: a.batch,
        max_seq: a.prompt.len() as u32 + steps + 8,
        prefill_chunk: 64,
        prefill_matmul: PrefillMatmul::Exact,
        sample: a.sample,
        // Timed unprofiled; `--profile` turns profiling on for its own
        // steps at the end (timestamps around every command slow a step).
        profile: false,
        kv_f32: a.kv_f32,
        fused_qk: a.fused_qk,
        fused_mlp: a.fused_mlp,
        // The reference is compared at f32 activations.
        decode_matmul: if refdata.is_some() {
            DecodeMatmul::Exact
        } else {
            a.decode_matmul
        },
    };
    let mut m = Model::load(&gpu, &ck, opts)?;
    drop(ck);
    println!(
        "decode products ({:?}) at {} rows: q|k|v, o, gate|up, down, LM head: {}{}",
        opts.decode_matmul,
        opts.batch,
        m.decode_plans().map(project::plan_name).join("; "),
        if m.decode_rounds_x_to_f16() {
            " (tensor cores: inputs rounded to f16)"
        } else {
            " (f32 activations)"
        }
    );
    let ls = m.load_stats();
    println!(
        "load: {:.3} s total, weights {:.3} GB uploaded in {:.3} s = {:.2} GB/s",
        ls.total.as_secs_f64(),
        ls.weight_bytes as f64 / 1e9,
        ls.upload.as_secs_f64(),
        ls.weight_bytes as f64 / 1e9 / ls.upload.as_secs_f64()
    );
    let mut peaks = report::Peaks {
        reserved: gpu.stats().allocator_reserved_bytes,
        ..Default::default()
    };
    let mut ok = true;
    if let Some(r) = &refdata {
        ok = report::compare(&mut m, r)?;
    }
    m.set_prefill_matmul(a.prefill);
    report::timings(&mut m, &a.prompt, a.decode, &mut peaks)?;
    if a.decode > 0 {
        let prompts = vec![a.prompt.clone(); a.batch as usize];
        for (s, t) in m.generate(&prompts, a.decode)?.iter().enumerate() {
            println!("generate, sequence {s}: {t:?}");
        }
    }
    if a.profile {
        m.start_profiling()?;
        report::profile(&mut m, &a.prompt)?;
    }
    if a.statistics {
        report::statistics(&gpu, "nn_attn_decode1_qk")?;
    }
    peaks.reserved = peaks.reserved.max(gpu.stats().allocator_reserved_bytes);
    peaks.print(&m, ls.weight_bytes);
    Ok(ok)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
