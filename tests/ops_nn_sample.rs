//! Sampling on the GPU: each draw checked against a host reference of the
//! same algorithm in f64 (top-k and top-p sets, then the token where the
//! kept mass, added in index order, passes u times its total, with u from
//! `sample_uniform`), at every element type; draw frequencies against the
//! probabilities; greedy, NaN and -inf rows; typed errors.
//!
//! Bounds. The kernel sums the kept mass in f32 over at most 32,003 terms;
//! the reference accepts a token when u times the total lies within its
//! cumulative interval widened by 1e-4 of the total.

mod common;
mod nn_support;

use nn_support::*;
use vkcompute::ops::nn::{self, SampleParams};
use vkcompute::Device;

/// Order-preserving key of a float, as the kernel computes it.
fn key(z: f32) -> u32 {
    let u = z.to_bits();
    if u & 0x8000_0000 != 0 {
        !u
    } else {
        u | 0x8000_0000
    }
}

/// The kept tokens of a row and the cumulative interval of each (in index
/// order), in f64, and the total kept mass.
fn reference(x: &[f32], p: SampleParams) -> (Vec<Option<(f64, f64)>>, f64) {
    let inv = 1.0 / p.temperature;
    let z: Vec<f32> = x.iter().map(|&v| v * inv).collect();
    let valid: Vec<usize> = (0..z.len()).filter(|&i| !z[i].is_nan()).collect();
    let mut keys: Vec<u32> = valid.iter().map(|&i| key(z[i])).collect();
    keys.sort_unstable_by(|a, b| b.cmp(a));
    let k = p.top_k as usize;
    let tau_k = if k != 0 && k < x.len() {
        keys[k - 1]
    } else {
        0
    };
    let m = valid
        .iter()
        .map(|&i| f64::from(z[i]))
        .fold(f64::NEG_INFINITY, f64::max);
    let w = |i: usize| (f64::from(z[i]) - m).exp();
    let mut tau = tau_k;
    if p.top_p < 1.0 {
        let mut kept: Vec<usize> = valid
            .iter()
            .copied()
            .filter(|&i| key(z[i]) >= tau_k)
            .collect();
        kept.sort_by(|&a, &b| key(z[b]).cmp(&key(z[a])));
        let total: f64 = kept.iter().map(|&i| w(i)).sum();
        let want = f64::from(p.top_p) * total;
        let mut cum = 0.0;
        for &i in &kept {
            cum += w(i);
            if cum >= want {
                tau = tau.max(key(z[i]));
                break;
            }
        }
    }
    let mut cum = 0.0;
    let mut out = vec![None; x.len()];
    for &i in &valid {
        if key(z[i]) >= tau {
            let next = cum + w(i);
            out[i] = Some((cum, next));
            cum = next;
        }
    }
    (out, cum)
}

fn sample_at<T: TestElem>(gpu: &Device) {
    if !takes::<T>(gpu) {
        return;
    }
    let mut rng = common::Rng::new(51);
    let params = [
        SampleParams {
            seed: 1,
            ..Default::default()
        },
        SampleParams {
            temperature: 0.7,
            top_k: 40,
            seed: 2,
            ..Default::default()
        },
        SampleParams {
            temperature: 1.3,
            top_p: 0.9,
            seed: 3,
            ..Default::default()
        },
        SampleParams {
            temperature: 1.0,
            top_k: 50,
            top_p: 0.8,
            seed: u64::MAX,
        },
        SampleParams {
            temperature: 2.0,
            top_k: 1,
            seed: 5,
            ..Default::default()
        },
    ];
    for vocab in [1usize, 7, 1000, 32_003] {
        for p in params {
            let rows = 3;
            let (x, xf) = inputs::<T>(&mut rng, rows * vocab, 6.0);
            let counters: Vec<u32> = (0..rows).map(|_| rng.next_u64() as u32).collect();
            let (xs, cs) = (gpu.upload(&x).unwrap(), gpu.upload(&counters).unwrap());
            let out = gpu.alloc::<u32>(rows).unwrap();
            let mut b = gpu.batch().unwrap();
            nn::sample(&mut b, &xs, &cs, &out, rows as u32, vocab as u32, p).unwrap();
            b.submit().unwrap();
            let got = out.download().unwrap();
            for r in 0..rows {
                let (kept, total) = reference(&xf[r * vocab..(r + 1) * vocab], p);
                let u = f64::from(nn::sample_uniform(p.seed, counters[r], r as u32));
                let target = u * total;
                let tok = got[r] as usize;
                let what = format!(
                    "sample {} vocab {vocab} row {r} {p:?}: token {tok}",
                    T::NAME
                );
                let (lo, hi) = kept[tok].unwrap_or_else(|| panic!("{what} is not kept"));
                let tol = 1e-4 * total;
                assert!(
                    lo - tol <= target && target <= hi + tol,
                    "{what}: u*total {target} not in [{lo}, {hi}]"
                );
                if p.top_k == 1 {
                    // Top-1 keeps the maximum (and values tied with it).
                    let row = &xf[r * vocab..(r + 1) * vocab];
                    let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    assert_eq!(row[tok], m, "{what}: top-1 draws the maximum");
                }
            }
        }
    }
}

#[test]
fn sampling_matches_the_reference() {
    let gpu = common::gpu();
    each_dtype!(&gpu, sample_at);
    common::assert_clean(&gpu);
}

/// 4,096 draws of one row (counters 0..4096) against its probabilities.
fn frequencies(gpu: &Device, logits: &[f32], p: SampleParams) -> Vec<f64> {
    let rows = 4096usize;
    let v = logits.len();
    let x: Vec<f32> = logits.iter().copied().cycle().take(rows * v).collect();
    let counters: Vec<u32> = (0..rows as u32).collect();
    let (xs, cs, out) = (
        gpu.upload(&x).unwrap(),
        gpu.upload(&counters).unwrap(),
        gpu.alloc::<u32>(rows).unwrap(),
    );
    let mut b = gpu.batch().unwrap();
    nn::sample(&mut b, &xs, &cs, &out, rows as u32, v as u32, p).unwrap();
    b.submit().unwrap();
    let mut f = vec![0.0; v];
    for t in out.download().unwrap() {
        f[t as usize] += 1.0 / rows as f64;
    }
    f
}

#[test]
fn draw_frequencies_follow_the_kept_probabilities() {
    let gpu = common::gpu();
    let logits = [0.0f32, 1.0, 2.0, 0.5, -1.0, 1.5];
    let e: Vec<f64> = logits.iter().map(|&l| f64::from(l).exp()).collect();
    // (params, kept tokens)
    let cases = [
        (
            SampleParams {
                seed: 9,
                ..Default::default()
            },
            vec![0, 1, 2, 3, 4, 5],
        ),
        (
            SampleParams {
                top_k: 3,
                seed: 9,
                ..Default::default()
            },
            vec![1, 2, 5],
        ),
        // Sorted probabilities: 2 (.37), 5 (.23), 1 (.14), ...: 0.5 needs two.
        (
            SampleParams {
                top_p: 0.5,
                seed: 9,
                ..Default::default()
            },
            vec![2, 5],
        ),
    ];
    for (p, kept) in cases {
        let f = frequencies(&gpu, &logits, p);
        let total: f64 = kept.iter().map(|&i| e[i]).sum();
        for (i, &fi) in f.iter().enumerate() {
            let want = if kept.contains(&i) { e[i] / total } else { 0.0 };
            // Five standard deviations of a frequency over 4,096 draws.
            let sd = (want * (1.0 - want) / 4096.0).sqrt();
            assert!(
                (fi - want).abs() <= 5.0 * sd + 1e-9,
                "{p:?}: token {i} drawn {fi}, want {want}"
            );
        }
    }
    // The same counters give the same draws; another seed other draws.
    let p = SampleParams {
        seed: 9,
        ..Default::default()
    };
    assert_eq!(frequencies(&gpu, &logits, p), frequencies(&gpu, &logits, p));
    let q = SampleParams { seed: 10, ..p };
    assert_ne!(frequencies(&gpu, &logits, p), frequencies(&gpu, &logits, q));
    common::assert_clean(&gpu);
}

#[test]
fn greedy_nan_and_infinite_rows() {
    let gpu = common::gpu();
    let (ninf, nan) = (f32::NEG_INFINITY, f32::NAN);
    // Row 0: NaN around the max; row 1: only -inf; row 2: only NaN;
    // row 3: a +inf logit (mass not finite: its argmax).
    let x = [
        nan,
        1.0,
        3.0,
        nan,
        2.0, //
        ninf,
        ninf,
        ninf,
        ninf,
        ninf, //
        nan,
        nan,
        nan,
        nan,
        nan, //
        0.0,
        f32::INFINITY,
        1.0,
        2.0,
        3.0,
    ];
    let (xs, cs, out) = (
        gpu.upload(&x).unwrap(),
        gpu.upload(&[1u32, 2, 3, 4]).unwrap(),
        gpu.alloc::<u32>(4).unwrap(),
    );
    let mut b = gpu.batch().unwrap();
    let p = SampleParams {
        top_k: 1,
        ..Default::default()
    };
    nn::sample(&mut b, &xs, &cs, &out, 4, 5, p).unwrap();
    b.submit().unwrap();
    assert_eq!(out.download().unwrap(), [2, 0, 0, 1]);
    // Without top-k, row 0 never draws a NaN.
    for seed in 0..20 {
        let mut b = gpu.batch().unwrap();
        nn::sample(
            &mut b,
            &xs,
            &cs,
            &out,
            4,
            5,
            SampleParams {
                seed,
                ..Default::default()
            },
        )
        .unwrap();
        b.submit().unwrap();
        assert!(
            [1, 2, 4].contains(&out.download().unwrap()[0]),
            "seed {seed}"
        );
    }
    // Temperature 0 is greedy (argmax: NaN wins there, as documented).
    let y = [0.5f32, 3.0, 3.0, -1.0];
    let ys = gpu.upload(&y).unwrap();
    let mut b = gpu.batch().unwrap();
    let greedy = SampleParams {
        temperature: 0.0,
        ..Default::default()
    };
    nn::sample(
        &mut b,
        &ys,
        &cs.slice(0..1).unwrap(),
        &out.slice(0..1).unwrap(),
        1,
        4,
        greedy,
    )
    .unwrap();
    b.submit().unwrap();
    assert_eq!(out.download().unwrap()[0], 1);
    common::assert_clean(&gpu);
}

#[test]
fn bad_input_is_a_typed_error() {
    let gpu = common::gpu();
    let x = gpu.alloc::<f32>(12).unwrap();
    let (c3, c4) = (gpu.alloc::<u32>(3).unwrap(), gpu.alloc::<u32>(4).unwrap());
    let mut b = gpu.batch().unwrap();
    let e = nn::sample(&mut b, &x, &c4, &c3, 3, 4, SampleParams::default()).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::sample", "counters"));
    let e = nn::sample(&mut b, &x, &c3, &c3, 3, 5, SampleParams::default()).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::sample", "logits"));
    let p = SampleParams {
        top_p: 0.0,
        ..Default::default()
    };
    let e = nn::sample(&mut b, &x, &c3, &c3, 3, 4, p).unwrap_err();
    assert!(
        e.to_string().contains("top_p") && e.to_string().contains("(0, 1]"),
        "{e}"
    );
    let p = SampleParams {
        temperature: f32::NAN,
        ..Default::default()
    };
    let e = nn::sample(&mut b, &x, &c3, &c3, 3, 4, p).unwrap_err();
    assert!(e.to_string().contains("temperature"), "{e}");
    let e = nn::sample(
        &mut b,
        &x,
        &c3,
        &c3,
        1,
        nn::MAX_VOCAB + 1,
        SampleParams::default(),
    )
    .unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::sample", "vocab"));
    assert!(b.is_empty());
    b.submit().unwrap();
    common::assert_clean(&gpu);
}
