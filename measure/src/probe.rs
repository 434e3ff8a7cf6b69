//! Pieces the kernel probes share (`measure/examples/cm2_probe`,
//! `linear_probe`, `matmul`, `attn_probe`, `prefill_attn`): deterministic
//! inputs, the distance of a variant's output from the default's, the
//! timing of rows warmed one by one and then interleaved round by round,
//! and the driver's statistics of a built-in's pipelines.

use std::time::{Duration, Instant};

/// The deterministic stream the probes' inputs come from: a xorshift of
/// `seed`, each state multiplied out to 64 bits (xorshift*); callers take
/// the high bits they need.
pub fn stream(seed: u64) -> impl Iterator<Item = u64> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    std::iter::repeat_with(move || {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    })
}

/// Deterministic values in [-1, 1) with full 24-bit significands (so
/// products and sums round, and error figures mean something): the
/// [`stream`] of `seed`.
pub fn values(seed: u64, len: usize) -> Vec<f32> {
    stream(seed)
        .take(len)
        .map(|r| ((r >> 40) as f32 / (1u64 << 23) as f32) - 1.0)
        .collect()
}

/// f16 bits and their exact f32 values: random sign, exponent over
/// [2⁻³, 2¹), random 10-bit significand (the [`stream`] of `seed`), so
/// products and sums of f16 inputs round.
pub fn f16_inputs(seed: u64, len: usize) -> (Vec<u16>, Vec<f32>) {
    let mut bits = Vec::with_capacity(len);
    let mut vals = Vec::with_capacity(len);
    for r in stream(seed).take(len).map(|r| r >> 32) {
        let sign = (r & 1) as u16;
        let exp = 12 + ((r >> 1) & 3) as u16; // biased 12..=15: [1/8, 2)
        let mant = ((r >> 3) & 0x3ff) as u16;
        bits.push((sign << 15) | (exp << 10) | mant);
        let v = (1.0 + f32::from(mant) / 1024.0) * 2f32.powi(i32::from(exp) - 15);
        vals.push(if sign == 1 { -v } else { v });
    }
    (bits, vals)
}

/// The largest |got − reference| over the largest |reference| (a NaN in
/// `got` counts as infinitely far): how far a variant's output is from
/// the default's.
pub fn relative_diff(got: &[f32], reference: &[f32]) -> f32 {
    let big = reference.iter().fold(0f32, |m, v| m.max(v.abs()));
    let diff = got
        .iter()
        .zip(reference)
        .map(|(g, r)| {
            if g.is_nan() {
                f32::INFINITY
            } else {
                (g - r).abs()
            }
        })
        .fold(0f32, f32::max);
    diff / big
}

/// Times `rows` rows: each is warmed by calling `record(row)` for `warm`,
/// then `rounds` rounds call every row in turn. `record` returns the GPU
/// ns of each launch it recorded; a round keeps their median. Returns,
/// per row, its rounds' medians sorted (min first).
pub fn interleaved_rounds<E>(
    rows: usize,
    warm: Duration,
    rounds: usize,
    mut record: impl FnMut(usize) -> Result<Vec<f64>, E>,
) -> Result<Vec<Vec<f64>>, E> {
    for row in 0..rows {
        let t = Instant::now();
        while t.elapsed() < warm {
            record(row)?;
        }
    }
    let mut times = vec![Vec::with_capacity(rounds); rows];
    for _ in 0..rounds {
        for (row, out) in times.iter_mut().enumerate() {
            let mut ns = record(row)?;
            ns.sort_by(f64::total_cmp);
            out.push(ns.get(ns.len() / 2).copied().unwrap_or(f64::NAN));
        }
    }
    for t in &mut times {
        t.sort_by(f64::total_cmp);
    }
    Ok(times)
}

/// (min, median, max) of sorted values.
pub fn min_median_max(sorted: &[f64]) -> (f64, f64, f64) {
    match sorted {
        [] => (f64::NAN, f64::NAN, f64::NAN),
        s => (s[0], s[s.len() / 2], s[s.len() - 1]),
    }
}

/// Prints the driver's pipeline statistics of every pipeline of built-in
/// `name` the device has built (the one without specialization where it
/// has built none), one line per executable: `statistics NAME SPEC
/// EXECUTABLE: name=value, ...`. Needs a device created with
/// `DeviceOptions::pipeline_statistics`.
pub fn print_statistics(gpu: &vkcompute::Device, name: &str) -> vkcompute::Result<()> {
    for p in vkcompute::ops::builtin_statistics(gpu, name)? {
        for e in p.executables {
            let st: Vec<String> = e
                .statistics
                .iter()
                .map(|x| format!("{}={}", x.name, x.value))
                .collect();
            println!(
                "statistics {name} {:?} {}: {}",
                p.spec,
                e.name,
                st.join(", ")
            );
        }
    }
    Ok(())
}

/// The value after `--name` on the command line, parsed, else `default`.
pub fn arg(name: &str, default: usize) -> usize {
    let a: Vec<String> = std::env::args().collect();
    a.iter()
        .position(|x| x == name)
        .and_then(|i| a.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// GPU time of one call that `record` records: `rounds` batches of
/// `calls` calls after one batch of warm-up, a barrier after each call,
/// each command whose label contains `label_part` timed by GPU timestamps
/// (`Profiling::Commands`). Returns the label of the command timed and
/// the times in µs, sorted.
pub fn profiled_calls(
    gpu: &vkcompute::Device,
    rounds: usize,
    calls: usize,
    label_part: &str,
    mut record: impl FnMut(&mut vkcompute::Batch) -> vkcompute::Result<()>,
) -> vkcompute::Result<(String, Vec<f64>)> {
    use vkcompute::{BatchOptions, Profiling};
    let mut times = Vec::new();
    let mut label = String::new();
    for r in 0..rounds + 1 {
        let mut b = gpu.batch_with(BatchOptions::default().with_profiling(Profiling::Commands))?;
        for _ in 0..calls {
            record(&mut b)?;
            b.barrier();
        }
        let p = b.submit_async()?.profile()?;
        if r == 0 {
            continue; // warm-up
        }
        for c in p.commands.iter().filter(|c| c.label.contains(label_part)) {
            label.clone_from(&c.label);
            times.push(c.gpu_ns / 1e3);
        }
    }
    times.sort_by(f64::total_cmp);
    Ok((label, times))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_deterministic_and_in_range() {
        let a = values(3, 1000);
        assert_eq!(a, values(3, 1000));
        assert_ne!(a, values(4, 1000));
        assert!(a.iter().all(|v| (-1.0..1.0).contains(v)));
        let (bits, vals) = f16_inputs(5, 100);
        assert!(vals.iter().all(|v| (0.125..2.0).contains(&v.abs())));
        assert_eq!(bits.len(), 100);
        assert_eq!(relative_diff(&[1.0, 2.5], &[1.0, 2.0]), 0.25);
        assert!(relative_diff(&[f32::NAN], &[1.0]).is_infinite());
    }

    #[test]
    fn rounds_keep_each_rounds_median_sorted() {
        let mut calls = [0usize; 2];
        let times = interleaved_rounds::<()>(2, Duration::ZERO, 3, |row| {
            calls[row] += 1;
            Ok(vec![30.0, 10.0 * calls[row] as f64, 20.0])
        })
        .unwrap();
        // Medians of [30, 10k, 20] for k = 1, 2, 3: 20, 20, 30.
        assert_eq!(times[0], vec![20.0, 20.0, 30.0]);
        assert_eq!(min_median_max(&times[1]), (20.0, 20.0, 30.0));
        assert!(min_median_max(&[]).0.is_nan());
    }
}
