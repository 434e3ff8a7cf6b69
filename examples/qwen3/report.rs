//! What the command line prints: the comparison with a transformers
//! reference file, decode timings, and a per-kernel profile of one step.

use std::path::Path;
use std::time::{Duration, Instant};

use vkcompute::Profiling;

use crate::model::{argmax, Model, Result as ModelResult};

/// Relative tolerance of the reference comparison.
pub const TOLERANCE: f64 = 1e-3;

/// A transformers reference run (see the crate-level docs of main.rs).
pub struct RefFile {
    /// The prompt's token ids.
    pub prompt: Vec<u32>,
    /// The reference's greedy tokens.
    pub tokens: Vec<u32>,
    /// `[tokens.len(), vocab]` logits.
    pub logits: Vec<Vec<f32>>,
}

impl RefFile {
    /// Reads and checks the file.
    pub fn read(path: &Path) -> Result<RefFile, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let st = safetensors::SafeTensors::deserialize(&bytes)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let get = |name: &str, dtype: safetensors::Dtype, rank: usize| {
            let t = st
                .tensor(name)
                .map_err(|e| format!("{}: tensor {name}: {e}", path.display()))?;
            if t.dtype() != dtype || t.shape().len() != rank {
                return Err(format!(
                    "{}: tensor {name} is {:?} {:?}; expected {dtype:?} of rank {rank}",
                    path.display(),
                    t.dtype(),
                    t.shape()
                ));
            }
            Ok((t.shape().to_vec(), t.data().to_vec()))
        };
        let ids = |b: &[u8]| -> Result<Vec<u32>, String> {
            b.chunks_exact(4)
                .map(|c| {
                    let v = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                    u32::try_from(v).map_err(|_| format!("negative token id {v}"))
                })
                .collect()
        };
        let (_, p) = get("prompt", safetensors::Dtype::I32, 1)?;
        let (_, t) = get("tokens", safetensors::Dtype::I32, 1)?;
        let (shape, l) = get("logits", safetensors::Dtype::F32, 2)?;
        let tokens = ids(&t)?;
        if shape[0] != tokens.len() || tokens.is_empty() {
            return Err(format!(
                "logits has {} rows, tokens {} (equal, at least 1)",
                shape[0],
                tokens.len()
            ));
        }
        let flat: Vec<f32> = l
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok(RefFile {
            prompt: ids(&p)?,
            tokens,
            logits: flat.chunks(shape[1]).map(<[f32]>::to_vec).collect(),
        })
    }
}

/// max|a - b| / max|b|.
pub fn rel_err(a: &[f32], b: &[f32]) -> f64 {
    let num = a
        .iter()
        .zip(b)
        .map(|(x, y)| (f64::from(*x) - f64::from(*y)).abs())
        .fold(0.0, f64::max);
    let den = b.iter().map(|y| f64::from(*y).abs()).fold(0.0, f64::max);
    num / den.max(f64::MIN_POSITIVE)
}

/// The gap between the largest and second largest of `x`, relative to
/// max|x|.
fn top2_margin(x: &[f32]) -> f64 {
    let mut best = f64::NEG_INFINITY;
    let mut second = f64::NEG_INFINITY;
    for &v in x {
        let v = f64::from(v);
        if v > best {
            second = best;
            best = v;
        } else if v > second {
            second = v;
        }
    }
    let den = x.iter().map(|y| f64::from(*y).abs()).fold(0.0, f64::max);
    (best - second) / den.max(f64::MIN_POSITIVE)
}

/// Prefills every sequence with the reference prompt and teacher-forces
/// its tokens; prints each row's error (sequence 0's logits) and the
/// verdict. True on PASS.
pub fn compare(m: &mut Model, r: &RefFile) -> ModelResult<bool> {
    let vocab = m.dims().vocab as usize;
    let b = m.batch() as usize;
    let mut ours = Vec::new();
    let mut first = Vec::new();
    for s in 0..m.batch() {
        first = m.prefill(s, &r.prompt)?;
    }
    ours.push(first);
    for i in 1..r.tokens.len() {
        m.set_tokens(&vec![r.tokens[i - 1]; b])?;
        m.step()?.wait()?;
        ours.push(m.logits()?[..vocab].to_vec());
    }
    let mut worst: f64 = 0.0;
    let (mut decided, mut agree) = (0, 0);
    println!("reference: {} rows, vocab {vocab}", r.tokens.len());
    for (i, (o, t)) in ours.iter().zip(&r.logits).enumerate() {
        if t.len() != vocab {
            return Err(crate::model::ModelError::Input {
                what: "reference logits",
                detail: format!(
                    "rows of {} values; the model's vocabulary is {vocab}",
                    t.len()
                ),
            });
        }
        let e = rel_err(o, t);
        worst = worst.max(e);
        if top2_margin(t) > TOLERANCE {
            decided += 1;
            agree += u32::from(argmax(o) == argmax(t));
        }
        println!("  row {i:3}: max|ours - ref| / max|ref| = {e:.3e}");
    }
    let pass = worst <= TOLERANCE;
    println!(
        "reference: worst {worst:.3e} against {TOLERANCE:e}: {}; {decided} rows have a top-2 \
         margin above the tolerance, our argmax equals theirs in {agree}",
        if pass { "PASS" } else { "FAIL" }
    );
    Ok(pass)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Device memory at its peaks: the most device-local memory bound to live
/// buffers during the prefills and during the decode steps
/// ([`vkcompute::Stats::peak_device_bytes`], a true high-water mark), and
/// the allocator's largest reservation seen.
#[derive(Debug, Default, Clone, Copy)]
pub struct Peaks {
    /// During the prefills (the first, cold one included).
    pub prefill: u64,
    /// During the decode steps.
    pub decode: u64,
    /// The allocator's reserved bytes, sampled.
    pub reserved: u64,
}

impl Peaks {
    /// Prints each peak beside the weights and the cache.
    pub fn print(&self, m: &Model, weight_bytes: u64) {
        let base = (weight_bytes + m.cache_bytes()) as f64;
        let gb = |b: u64| b as f64 / 1e9;
        let peak =
            |what: &str, b: u64| format!("{:.3} GB in {what} ({:.3}×)", gb(b), b as f64 / base);
        // No decode step ran (--decode 0): no decode peak to report.
        let decode = if self.decode > 0 {
            format!(", {}", peak("decode", self.decode))
        } else {
            String::new()
        };
        println!(
            "device memory: peak {}{decode} of weights {:.3} GB + KV cache {:.3} GB; \
             allocator reservation {:.3} GB at its largest sample",
            peak("prefill", self.prefill),
            gb(weight_bytes),
            gb(m.cache_bytes()),
            gb(self.reserved)
        );
    }
}

/// Warm prefills timed for the prefill line (after one cold run).
const PREFILL_REPS: usize = 5;

/// Prefill and decode timings (see main.rs), and the memory peaks of each
/// into `peaks`.
pub fn timings(m: &mut Model, prompt: &[u32], n: u32, peaks: &mut Peaks) -> ModelResult<()> {
    let b = m.batch();
    m.device().reset_peak_memory();
    let t = Instant::now();
    m.prefill(0, prompt)?;
    let cold = t.elapsed();
    // Warm prefills of sequence 0 (each records, submits and waits, as a
    // user's call does): the median of PREFILL_REPS is the headline.
    let mut warm_runs = Vec::with_capacity(PREFILL_REPS);
    for _ in 0..PREFILL_REPS {
        let t = Instant::now();
        m.prefill(0, prompt)?;
        warm_runs.push(t.elapsed());
    }
    warm_runs.sort();
    let prefill = warm_runs[warm_runs.len() / 2];
    for s in 1..b {
        m.prefill(s, prompt)?;
    }
    peaks.prefill = peaks.prefill.max(m.device().stats().peak_device_bytes);
    m.device().reset_peak_memory();
    println!(
        "prefill: {} tokens in {:.2} ms warm (min {:.2} / median / max {:.2} of {PREFILL_REPS}; \
         {:.0} tokens/s; first run {:.2} ms), path {}",
        prompt.len(),
        ms(prefill),
        ms(warm_runs[0]),
        ms(warm_runs[warm_runs.len() - 1]),
        prompt.len() as f64 / prefill.as_secs_f64(),
        ms(cold),
        m.prefill_path(prompt.len() as u32)
    );
    if n == 0 {
        return Ok(());
    }
    // Warm-up, then N steps each read back, as a generate loop does.
    let warm = 2.min(n);
    for _ in 0..warm {
        m.step()?.wait()?;
        m.tokens()?;
    }
    let mut times = Vec::with_capacity(n as usize);
    // The launching thread's host work per token, the wait excluded: the
    // step's launch (position checks, the graph launch) and the read-back
    // of the tokens after the wait.
    let mut host = Vec::with_capacity(n as usize);
    let mut generated = Vec::new();
    for _ in warm..n {
        let t = Instant::now();
        let ticket = m.step()?;
        let launched = t.elapsed();
        ticket.wait()?;
        let r = Instant::now();
        generated.push(m.tokens()?[0]);
        host.push(launched + r.elapsed());
        times.push(t.elapsed());
    }
    host.sort();
    let st = m.device().stats();
    peaks.decode = peaks.decode.max(st.peak_device_bytes);
    peaks.reserved = peaks.reserved.max(st.allocator_reserved_bytes);
    times.sort();
    if let (Some(min), Some(max)) = (times.first(), times.last()) {
        let med = times[times.len() / 2];
        let wb = m.step_weight_bytes() as f64;
        println!(
            "decode (B = {b}, token read back every step): min {:.3} / median {:.3} / max {:.3} ms \
             per step, {:.1} tokens/s, {:.1} GB/s of weights ({:.3} GB per step)",
            ms(*min),
            ms(med),
            ms(*max),
            f64::from(b) / med.as_secs_f64(),
            wb / 1e9 / med.as_secs_f64(),
            wb / 1e9
        );
        println!(
            "decode step: {} commands (dispatches, copies) in one graph launch",
            m.graph().num_commands()
        );
        if let (Some(lo), Some(hi)) = (host.first(), host.last()) {
            println!(
                "host time per token (launch + token read-back, the wait excluded): min {:.1} / \
                 median {:.1} / max {:.1} µs",
                lo.as_secs_f64() * 1e6,
                host[host.len() / 2].as_secs_f64() * 1e6,
                hi.as_secs_f64() * 1e6
            );
        }
        println!("sequence 0 generated: {generated:?}");
    }
    // Pipelined: N launches, one read at the end (positions restart).
    for s in 0..b {
        m.prefill(s, prompt)?;
    }
    let steps = n - warm;
    let t = Instant::now();
    let mut last = None;
    for _ in 0..steps {
        last = Some(m.step()?);
    }
    if let Some(l) = last {
        l.wait()?;
    }
    m.tokens()?;
    let per = t.elapsed() / steps.max(1);
    println!(
        "decode pipelined ({steps} launches, one read): {:.3} ms per step, {:.1} tokens/s, \
         {:.1} GB/s of weights",
        ms(per),
        f64::from(b) / per.as_secs_f64(),
        m.step_weight_bytes() as f64 / 1e9 / per.as_secs_f64()
    );
    Ok(())
}

/// Copy bandwidth (bytes read per second) of a large device buffer copy,
/// best of a few.
fn copy_bandwidth(m: &Model) -> ModelResult<f64> {
    let gpu = m.device();
    let n = ((gpu.info().device_local_memory / 16).min(1 << 30) / 4) as usize;
    let src = gpu.alloc::<f32>(n)?;
    let dst = gpu.alloc::<f32>(n)?;
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let mut b = gpu.batch_with(vkcompute::BatchOptions {
            profiling: Profiling::Batch,
            ..Default::default()
        })?;
        b.copy(&src, &dst)?;
        let t = b.submit_async()?;
        best = best.min(t.profile()?.total_ns);
    }
    Ok(n as f64 * 4.0 / (best * 1e-9))
}

/// One decode step's GPU time per kernel, and the weight-streaming floor.
pub fn profile(m: &mut Model, prompt: &[u32]) -> ModelResult<()> {
    for s in 0..m.batch() {
        m.prefill(s, prompt)?;
    }
    if let Some(p) = &m.prefill_profile {
        println!(
            "profile of the prefill of {} tokens (GPU timestamps, per kernel):",
            prompt.len()
        );
        let mut rows = p.by_label();
        rows.sort_by(|a, b| b.2.total_cmp(&a.2));
        for (label, count, ns) in rows.iter().take(14) {
            println!("  {label:<40} {count:5} {:10.1} µs", ns / 1e3);
        }
        println!("  total {:.1} µs", p.total_ns / 1e3);
    }
    m.step()?.wait()?;
    m.step()?.wait()?;
    let p = m.graph().last_profile()?;
    println!("profile of one decode step (GPU timestamps, per kernel):");
    let mut rows = p.by_label();
    rows.sort_by(|a, b| b.2.total_cmp(&a.2));
    for (label, count, ns) in rows {
        println!("  {label:<32} {count:5} {:10.1} µs", ns / 1e3);
    }
    // The same by place in the step: a command's key is its label and the
    // labels of the commands around it (the normed q|k|v and gate|up
    // launches share a kernel, as do o and down, but not their
    // neighbours), so each projection gets a row of its own.
    let mut places: Vec<(String, Vec<f64>)> = Vec::new();
    for (i, c) in p.commands.iter().enumerate() {
        let short = |l: &str| l.trim_start_matches("vkcompute ").to_string();
        let prev = i
            .checked_sub(1)
            .map_or("the start".into(), |j| short(&p.commands[j].label));
        let next = p
            .commands
            .get(i + 1)
            .map_or("the end".into(), |n| short(&n.label));
        let key = format!("{} ({prev} → · → {next})", short(&c.label));
        match places.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(c.gpu_ns),
            None => places.push((key, vec![c.gpu_ns])),
        }
    }
    println!("by place (a kernel between the kernels before and after it):");
    for (key, mut v) in places {
        v.sort_by(f64::total_cmp);
        println!(
            "  {key:<72} {:4} {:9.1} µs; per launch min {:.1} / median {:.1} / max {:.1} µs",
            v.len(),
            v.iter().sum::<f64>() / 1e3,
            v[0] / 1e3,
            v[v.len() / 2] / 1e3,
            v[v.len() - 1] / 1e3
        );
    }
    // The copy reads and writes: its read rate is half the memory traffic
    // it sustains, and a stream of reads alone can reach that traffic.
    let read = copy_bandwidth(m)?;
    let bytes = m.step_weight_bytes() as f64;
    println!(
        "  total {:.1} µs; weight-streaming floor {:.1} µs ({:.3} GB at the copy's {:.1} GB/s of \
         read + write traffic; {:.1} µs at its {:.1} GB/s of reads alone)",
        p.total_ns / 1e3,
        bytes / (2.0 * read) * 1e6,
        bytes / 1e9,
        2.0 * read / 1e9,
        bytes / read * 1e6,
        read / 1e9
    );
    Ok(())
}

/// Prints the driver's statistics (`ops::builtin_statistics`) of every
/// built-in whose name starts with `prefix` (the pipelines this process
/// built, else the unspecialized one, built now).
pub(crate) fn statistics(gpu: &vkcompute::Device, prefix: &str) -> ModelResult<()> {
    for name in vkcompute::ops::builtin_names() {
        if !name.starts_with(prefix) {
            continue;
        }
        for p in vkcompute::ops::builtin_statistics(gpu, name)? {
            for e in p.executables {
                let st: Vec<String> = e
                    .statistics
                    .iter()
                    .map(|x| format!("{}={}", x.name, x.value))
                    .collect();
                println!("statistics {name} {:?}: {}", p.spec, st.join(", "));
            }
        }
    }
    Ok(())
}
