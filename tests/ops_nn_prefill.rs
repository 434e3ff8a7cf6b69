//! Causal prefill attention and causal softmax against f64 references, at
//! every element type, on odd shapes (tokens 1, 7, 19, 33, 40, 45, 70, 257;
//! head dims 5, 24, 64, 72, 80, 128, 130, 256; GQA ratios 1, 2, 4; batches
//! 1, 2 and 3), and their typed errors.
//!
//! Bounds. Prefill: each output is a convex combination of value rows;
//! f32 scores of at most 256 products and online sums over at most 257
//! keys keep the error under 1e-4 of the largest |v| seen, plus one
//! rounding to the element type. On the tensor-core kernel (f16 where the
//! adapter has it) the probabilities weighting the values are rounded to
//! f16 (relative 2^-11 each, and the sum divided by is the sum of those
//! rounded values), which moves a weighted mean by at most 2^-11 · 2 of
//! the largest |v|: 2^-10 · max|v| more. Causal softmax: as
//! `ops::softmax` (1e-5 relative for rows this short) plus one rounding.

mod common;
mod nn_support;

use nn_support::*;
use vkcompute::ops::nn::{self, PrefillShape};
use vkcompute::ops::{Bf16, F16};
use vkcompute::Device;

/// Prefill attention in f64, with the largest |v| each output mixes.
fn prefill_ref(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    s: PrefillShape,
    scale: f32,
) -> (Vec<f64>, Vec<f64>) {
    let (t, hq, hkv, d) = (
        s.tokens as usize,
        s.q_heads as usize,
        s.kv_heads as usize,
        s.head_dim as usize,
    );
    let mut out = vec![0.0; q.len()];
    let mut vmax = vec![0.0; q.len()];
    for b in 0..s.batch as usize {
        for h in 0..hq {
            let kvh = h / (hq / hkv);
            for i in 0..t {
                let qr = &q[((b * t + i) * hq + h) * d..][..d];
                let krow = |j: usize| ((b * t + j) * hkv + kvh) * d;
                let sc: Vec<f64> = (0..=i)
                    .map(|j| {
                        let kr = &k[krow(j)..][..d];
                        qr.iter()
                            .zip(kr)
                            .map(|(&a, &c)| f64::from(a) * f64::from(c))
                            .sum::<f64>()
                            * f64::from(scale)
                    })
                    .collect();
                let m = sc.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let w: Vec<f64> = sc.iter().map(|&x| (x - m).exp()).collect();
                let total: f64 = w.iter().sum();
                let o = ((b * t + i) * hq + h) * d;
                for e in 0..d {
                    let mut a = 0.0;
                    let mut vm: f64 = 0.0;
                    for (j, &wj) in w.iter().enumerate() {
                        let x = f64::from(v[krow(j) + e]);
                        a += wj * x;
                        vm = vm.max(x.abs());
                    }
                    out[o + e] = a / total;
                    vmax[o + e] = vm;
                }
            }
        }
    }
    (out, vmax)
}

fn prefill_at<T: TestElem>(gpu: &Device) {
    if !takes::<T>(gpu) {
        return;
    }
    let mut rng = common::Rng::new(41);
    // (batch, tokens, q_heads, kv_heads, head_dim)
    let cases = [
        (1, 1, 1, 1, 64),
        (3, 7, 4, 2, 72),
        (1, 33, 8, 2, 80),
        (1, 257, 4, 1, 128),
        (2, 20, 2, 2, 256),
        // Tile edges: several key tiles with a partial last one, head dims
        // that are not multiples of 4, each tile width the adapter allows.
        (2, 70, 4, 4, 24),
        (2, 19, 2, 1, 5),
        (1, 45, 8, 2, 130),
        (2, 40, 4, 2, 128),
        // Several 64-query tiles at a head width of exactly 64, three
        // sequences (the tensor-core kernel's tiles and batch offsets).
        (3, 150, 4, 2, 64),
    ];
    for (bsz, tokens, hq, hkv, d) in cases {
        let shape = PrefillShape {
            batch: bsz,
            tokens,
            q_heads: hq,
            kv_heads: hkv,
            head_dim: d,
        };
        let n_q = (bsz * tokens * hq * d) as usize;
        let n_kv = (bsz * tokens * hkv * d) as usize;
        let (q, qf) = inputs::<T>(&mut rng, n_q, 1.0);
        let (k, kf) = inputs::<T>(&mut rng, n_kv, 1.0);
        let (v, vf) = inputs::<T>(&mut rng, n_kv, 2.0);
        let (qs, ks, vs) = (
            gpu.upload(&q).unwrap(),
            gpu.upload(&k).unwrap(),
            gpu.upload(&v).unwrap(),
        );
        let out = gpu.alloc::<T>(n_q).unwrap();
        // A large scale makes the softmax peaked, so the rescaling matters.
        let scale = 4.0 / (d as f32).sqrt();
        let mut b = gpu.batch().unwrap();
        nn::attention_prefill(&mut b, &qs, &ks, &vs, &out, shape, scale).unwrap();
        b.submit().unwrap();
        let (want, vmax) = prefill_ref(&qf, &kf, &vf, shape, scale);
        let p16 = if nn::attention_prefill_on_tensor_cores::<T>(gpu.info(), d) {
            1.0 / 1024.0
        } else {
            0.0
        };
        let what = format!(
            "attention_prefill {} {bsz}x{tokens}x{hq}/{hkv}x{d}",
            T::NAME
        );
        assert_within(&what, &download(&out), &want, T::U, &|i| {
            (1e-4 + p16) * vmax[i] + T::TINY
        });
        // The check can fail: attention over every key (no causal mask)
        // disagrees.
        if tokens > 1 {
            let unmasked = unmasked_ref(&qf, &kf, &vf, shape, scale);
            assert!(
                max_err(&download(&out), &unmasked) > 0.05,
                "{what}: the unmasked reference agrees"
            );
        }
    }
}

/// Attention over all keys of the sequence (what a missing mask computes).
fn unmasked_ref(q: &[f32], k: &[f32], v: &[f32], s: PrefillShape, scale: f32) -> Vec<f64> {
    let (t, hq, hkv, d) = (
        s.tokens as usize,
        s.q_heads as usize,
        s.kv_heads as usize,
        s.head_dim as usize,
    );
    let mut out = vec![0.0; q.len()];
    for b in 0..s.batch as usize {
        for h in 0..hq {
            let kvh = h / (hq / hkv);
            for i in 0..t {
                let qr = &q[((b * t + i) * hq + h) * d..][..d];
                let krow = |j: usize| ((b * t + j) * hkv + kvh) * d;
                let sc: Vec<f64> = (0..t)
                    .map(|j| {
                        qr.iter()
                            .zip(&k[krow(j)..][..d])
                            .map(|(&a, &c)| f64::from(a) * f64::from(c))
                            .sum::<f64>()
                            * f64::from(scale)
                    })
                    .collect();
                let m = sc.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let w: Vec<f64> = sc.iter().map(|&x| (x - m).exp()).collect();
                let total: f64 = w.iter().sum();
                for e in 0..d {
                    let a: f64 = w
                        .iter()
                        .enumerate()
                        .map(|(j, &wj)| wj * f64::from(v[krow(j) + e]))
                        .sum();
                    out[((b * t + i) * hq + h) * d + e] = a / total;
                }
            }
        }
    }
    out
}

#[test]
fn prefill_attention_matches_the_reference() {
    let gpu = common::gpu();
    each_dtype!(&gpu, prefill_at);
    common::assert_clean(&gpu);
}

/// Which kernel the f16 cases above ran: where the adapter has the
/// tensor-core prefill, it takes f16 heads up to 128 wide and nothing else.
#[test]
fn f16_prefill_takes_the_tensor_cores_where_the_adapter_has_them() {
    let gpu = common::gpu();
    let info = gpu.info();
    if !nn::attention_prefill_on_tensor_cores::<F16>(info, 128) {
        common::skipped(
            "tensor-core prefill attention: the adapter lacks VK_NV_cooperative_matrix2's \
             workgroup-scope f16 products with reductions, conversions and per-element \
             operations (the f16 cases ran the f32-arithmetic kernel)",
        );
        return;
    }
    println!("f16 prefill attention: the tensor-core kernel (nn_attn_prefill_tc)");
    for d in [1, 5, 64, 65, 128] {
        assert!(nn::attention_prefill_on_tensor_cores::<F16>(info, d), "{d}");
    }
    assert!(!nn::attention_prefill_on_tensor_cores::<F16>(info, 129));
    assert!(!nn::attention_prefill_on_tensor_cores::<f32>(info, 128));
    assert!(!nn::attention_prefill_on_tensor_cores::<Bf16>(info, 128));
}

fn causal_softmax_at<T: TestElem>(gpu: &Device) {
    if !takes::<T>(gpu) {
        return;
    }
    let mut rng = common::Rng::new(42);
    // (q_len, cols, blocks)
    for (q_len, cols, blocks) in [(1, 1, 1), (7, 7, 2), (7, 40, 3), (33, 33, 1), (5, 300, 2)] {
        let rows = q_len * blocks;
        let n = (rows * cols) as usize;
        let (x, xf) = inputs::<T>(&mut rng, n, 8.0);
        let (xs, out) = (gpu.upload(&x).unwrap(), gpu.alloc::<T>(n).unwrap());
        let mut b = gpu.batch().unwrap();
        nn::causal_softmax(&mut b, &xs, &out, rows, cols, q_len).unwrap();
        b.barrier();
        nn::causal_softmax(&mut b, &xs, &xs, rows, cols, q_len).unwrap();
        b.submit().unwrap();
        let mut want = Vec::with_capacity(n);
        for (r, row) in xf.chunks(cols as usize).enumerate() {
            let seen = (cols - q_len) as usize + r % q_len as usize + 1;
            let m = row[..seen]
                .iter()
                .map(|&v| f64::from(v))
                .fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = row[..seen].iter().map(|&v| (f64::from(v) - m).exp()).sum();
            want.extend(row.iter().enumerate().map(|(c, &v)| {
                if c < seen {
                    (f64::from(v) - m).exp() / s
                } else {
                    0.0
                }
            }));
        }
        let what = format!("causal_softmax {} {rows}x{cols} q_len {q_len}", T::NAME);
        assert_within(&what, &download(&out), &want, T::U + 1e-5, &|_| T::TINY);
        assert_within(
            &format!("{what} in place"),
            &download(&xs),
            &want,
            T::U + 1e-5,
            &|_| T::TINY,
        );
    }
}

#[test]
fn causal_softmax_matches_the_reference() {
    let gpu = common::gpu();
    each_dtype!(&gpu, causal_softmax_at);
    common::assert_clean(&gpu);
}

#[test]
fn bad_shapes_are_typed_errors_naming_the_tensor() {
    let gpu = common::gpu();
    let q = gpu.alloc::<f32>(2 * 7 * 6 * 64).unwrap();
    let kv = gpu.alloc::<f32>(2 * 7 * 2 * 64).unwrap();
    let out = gpu.alloc::<f32>(2 * 7 * 6 * 64).unwrap();
    let s = PrefillShape {
        batch: 2,
        tokens: 7,
        q_heads: 6,
        kv_heads: 2,
        head_dim: 64,
    };
    let mut b = gpu.batch().unwrap();
    let e = nn::attention_prefill(
        &mut b,
        &q,
        &kv,
        &kv,
        &out,
        PrefillShape { kv_heads: 4, ..s },
        0.1,
    )
    .unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::attention_prefill", "q_heads"));
    let e = nn::attention_prefill(&mut b, &q, &kv, &q, &out, s, 0.1).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::attention_prefill", "v"));
    let e = nn::attention_prefill(&mut b, &q, &kv, &kv, &q, s, 0.1).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::attention_prefill", "out"));
    let e = nn::attention_prefill(
        &mut b,
        &q,
        &kv,
        &kv,
        &out,
        PrefillShape { tokens: 8, ..s },
        0.1,
    )
    .unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::attention_prefill", "q"));
    let e = nn::causal_softmax(&mut b, &q, &q, 7, 6 * 64 * 2, 8).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::causal_softmax", "rows"));
    let e = nn::causal_softmax(&mut b, &q, &q, 2 * 7 * 6 * 64, 1, 2).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::causal_softmax", "q_len"));
    assert!(b.is_empty());
    b.submit().unwrap();
    common::assert_clean(&gpu);
}
