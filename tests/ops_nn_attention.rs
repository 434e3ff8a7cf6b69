//! Rotary embedding, KV-cache append and decode attention against f64
//! references, at every element type, on odd shapes (head dims 30, 36, 64,
//! 72, 80, 96, 100, 128, 256; sequence lengths 1, 7, 33, 257, 600, 8200;
//! GQA ratios 1, 2, 4, 8 and 16; batches of 1 to 8); a recorded graph
//! replayed with new positions and lengths; and the typed errors for bad
//! input.
//!
//! Bounds. Rotary: the reference takes the angle as the kernel (and Hugging
//! Face) does, one f32 product pos * inv_freq, and then cos and sin in f64.
//! The kernel reduces that angle by 2pi with an error below 2^-21 (the rope
//! unit tests check this on every 61st f32 up to 2^20.6, past the largest
//! angle here) to |r| <= pi + 2^-22 |angle|; sin and cos there are allowed 2^-20
//! each (Vulkan only promises 2^-11, but lavapipe is accurate and NVIDIA's
//! fast sin/cos are documented within 2^-21.19 on [-pi, pi]); the two f32
//! products and their sum add 2^-23 (|x_i| + |x_i+h|). Together that is
//! under 2^-19 (|x_i| + |x_i+h|), the bound, plus one rounding to the
//! element type. The same f64 reference with the angle taken exactly would
//! differ by up to 2^-24 pos inv_freq (|x_i| + |x_i+h|), far more than this
//! at large positions: a kernel that fuses the product into the reduction
//! fails here. Decode attention: the output is a
//! convex combination of value rows; f32 scores of at most 256 products
//! and sums of at most 8200 weights keep the error under 1e-4 of the largest
//! |v|, plus one rounding.

mod common;
mod nn_support;

use nn_support::*;
use vkcompute::ops::nn::{self, DecodeShape, KvShape, RopeScaling};
use vkcompute::Device;

/// Rotary reference: pairs (i, i + h) rotated by `sign` times the angle;
/// `interleaved` pairs (2i, 2i + 1) instead (the other convention).
fn rope_ref(
    x: &[f32],
    pos: &[u32],
    inv: &[f32],
    heads: usize,
    dim: usize,
    sign: f64,
    interleaved: bool,
) -> Vec<f64> {
    let h = dim / 2;
    let mut out = vec![0.0; x.len()];
    for (row, chunk) in x.chunks(dim).enumerate() {
        let p = pos[row / heads];
        for (i, &f) in inv.iter().enumerate() {
            let a = f64::from(p as f32 * f) * sign;
            let (lo, hi) = if interleaved {
                (2 * i, 2 * i + 1)
            } else {
                (i, i + h)
            };
            let (x0, x1) = (f64::from(chunk[lo]), f64::from(chunk[hi]));
            out[row * dim + lo] = x0 * a.cos() - x1 * a.sin();
            out[row * dim + hi] = x1 * a.cos() + x0 * a.sin();
        }
    }
    out
}

/// The bound for element `i` of a rotary output of `x`.
fn rope_bound(x: &[f32], dim: usize, i: usize, tiny: f64) -> f64 {
    let h = dim / 2;
    let (row, j) = (i / dim, i % dim);
    let k = if j < h { j + h } else { j - h };
    (f64::from(x[i].abs()) + f64::from(x[row * dim + k].abs())) * 2f64.powi(-19) + tiny
}

fn rotary_at<T: TestElem>(gpu: &Device) {
    if !takes::<T>(gpu) {
        return;
    }
    let mut rng = common::Rng::new(31);
    let llama = RopeScaling::Llama3 {
        factor: 8.0,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position_embeddings: 8192,
    };
    // (tokens, heads, head_dim, theta, scaling)
    let cases = [
        (1, 1, 2, 10_000.0, None),
        (7, 3, 64, 10_000.0, None),
        (33, 2, 72, 1_000_000.0, None),
        (5, 4, 80, 10_000.0, None),
        (7, 8, 128, 500_000.0, Some(&llama)),
        (3, 2, 256, 10_000.0, None),
    ];
    for (tokens, heads, dim, theta, scaling) in cases {
        let n = tokens * heads * dim;
        let (x, xf) = inputs::<T>(&mut rng, n, 2.0);
        let mut pos: Vec<u32> = (0..tokens).map(|_| rng.below(100_000) as u32).collect();
        pos[0] = 0;
        let inv = nn::rope_inv_freq(dim as u32, theta, scaling).unwrap();
        let xs = gpu.upload(&x).unwrap();
        let out = gpu.alloc::<T>(n).unwrap();
        let (fs, ps) = (gpu.upload(&inv).unwrap(), gpu.upload(&pos).unwrap());
        let mut b = gpu.batch().unwrap();
        let (t, h, d) = (tokens as u32, heads as u32, dim as u32);
        nn::rotary(&mut b, &xs, &out, &fs, &ps, t, h, d).unwrap();
        b.barrier();
        nn::rotary(&mut b, &xs, &xs, &fs, &ps, t, h, d).unwrap(); // in place
        b.submit().unwrap();
        let want = rope_ref(&xf, &pos, &inv, heads, dim, 1.0, false);
        let what = format!("rotary {} {tokens}x{heads}x{dim}", T::NAME);
        let bound = |i| rope_bound(&xf, dim, i, T::TINY);
        let got = download(&out);
        assert_within(&what, &got, &want, T::U, &bound);
        assert_within(
            &format!("{what} in place"),
            &download(&xs),
            &want,
            T::U,
            &bound,
        );
        // The check can fail: the other rotation sense and the interleaved
        // convention disagree with the output far past the bound.
        if dim > 2 || tokens > 1 {
            for (name, sign, inter) in [("reversed", -1.0, false), ("interleaved", 1.0, true)] {
                let wrong = rope_ref(&xf, &pos, &inv, heads, dim, sign, inter);
                let e = max_err(&got, &wrong);
                assert!(e > 0.1, "{what}: the {name} reference agrees ({e})");
            }
        }
    }
}

#[test]
fn rotary_matches_the_reference_and_not_its_variants() {
    let gpu = common::gpu();
    each_dtype!(&gpu, rotary_at);
    common::assert_clean(&gpu);
}

#[test]
fn a_graph_replays_rotary_with_new_positions() {
    let gpu = common::gpu();
    let mut rng = common::Rng::new(32);
    let (tokens, heads, dim) = (3usize, 2usize, 64usize);
    let n = tokens * heads * dim;
    let x = rng.vec_f32(n);
    let inv = nn::rope_inv_freq(dim as u32, 10_000.0, None).unwrap();
    let (xs, out) = (gpu.upload(&x).unwrap(), gpu.alloc::<f32>(n).unwrap());
    let (fs, ps) = (gpu.upload(&inv).unwrap(), gpu.upload(&[0u32; 3]).unwrap());
    let mut rec = gpu.graph_recorder().unwrap();
    let (t, h, d) = (tokens as u32, heads as u32, dim as u32);
    nn::rotary(&mut rec, &xs, &out, &fs, &ps, t, h, d).unwrap();
    let graph = rec.finish().unwrap();
    // The last positions are Llama 3.1's longest context and past it.
    for pos in [
        [5u32, 6, 7],
        [1000, 2000, 40_000],
        [131_071, 500_000, 1_000_000],
    ] {
        ps.write(0, &pos).unwrap();
        graph.launch().unwrap().wait().unwrap();
        let want = rope_ref(&x, &pos, &inv, heads, dim, 1.0, false);
        let bound = |i| rope_bound(&x, dim, i, 0.0);
        assert_within(
            &format!("replay at {pos:?}"),
            &out.download().unwrap(),
            &want,
            2e-7,
            &bound,
        );
    }
    drop(graph);
    common::assert_clean(&gpu);
}

/// (batch, steps, kv_heads, head_dim, max_seq, positions)
type KvCase = (usize, usize, usize, usize, usize, &'static [u32]);

fn kv_at<T: TestElem>(gpu: &Device) {
    if !takes::<T>(gpu) {
        return;
    }
    let mut rng = common::Rng::new(33);
    let cases: [KvCase; 3] = [
        (1, 1, 1, 64, 1, &[0]),
        (3, 1, 2, 72, 33, &[0, 32, 33]),
        (3, 7, 4, 128, 40, &[5, 30, 39]),
    ];
    for (bsz, steps, heads, dim, max_seq, pos) in cases {
        let n_new = bsz * steps * heads * dim;
        let n_cache = bsz * heads * max_seq * dim;
        let (kn, _) = inputs::<T>(&mut rng, n_new, 1.0);
        let (vn, _) = inputs::<T>(&mut rng, n_new, 1.0);
        let (k0, _) = inputs::<T>(&mut rng, n_cache, 1.0);
        let (v0, _) = inputs::<T>(&mut rng, n_cache, 1.0);
        let (kns, vns) = (gpu.upload(&kn).unwrap(), gpu.upload(&vn).unwrap());
        let (kc, vc) = (gpu.upload(&k0).unwrap(), gpu.upload(&v0).unwrap());
        let (ps, flag) = (gpu.upload(pos).unwrap(), gpu.upload(&[0u32]).unwrap());
        let shape = KvShape {
            batch: bsz as u32,
            steps: steps as u32,
            kv_heads: heads as u32,
            head_dim: dim as u32,
            max_seq: max_seq as u32,
        };
        let mut b = gpu.batch().unwrap();
        nn::kv_append(&mut b, &kns, &vns, &kc, &vc, &ps, &flag, shape).unwrap();
        b.submit().unwrap();
        let (mut kw, mut vw) = (k0.clone(), v0.clone());
        let mut dropped = 0;
        for (b, &p0) in pos.iter().enumerate() {
            for s in 0..steps {
                for h in 0..heads {
                    let p = p0 as usize + s;
                    if p >= max_seq {
                        dropped += 1;
                        continue;
                    }
                    let src = ((b * steps + s) * heads + h) * dim;
                    let dst = ((b * heads + h) * max_seq + p) * dim;
                    kw[dst..dst + dim].copy_from_slice(&kn[src..src + dim]);
                    vw[dst..dst + dim].copy_from_slice(&vn[src..src + dim]);
                }
            }
        }
        let what = format!("kv_append {} {bsz}x{steps}x{heads}x{dim}", T::NAME);
        assert!(kc.download().unwrap() == kw, "{what}: keys");
        assert!(vc.download().unwrap() == vw, "{what}: values");
        assert_eq!(
            flag.download().unwrap(),
            [dropped],
            "{what}: positions past the end"
        );
    }
}

#[test]
fn kv_append_writes_at_each_sequences_position() {
    let gpu = common::gpu();
    each_dtype!(&gpu, kv_at);
    common::assert_clean(&gpu);
}

/// (batch, q_heads, kv_heads, head_dim, max_seq, lens)
type DecodeCase = (u32, u32, u32, u32, u32, &'static [u32]);

fn decode_at<T: TestElem>(gpu: &Device) {
    if !takes::<T>(gpu) {
        return;
    }
    let mut rng = common::Rng::new(34);
    let cases: [DecodeCase; 15] = [
        (1, 1, 1, 64, 1, &[1]),
        (3, 4, 4, 72, 40, &[7, 1, 33]),
        (1, 8, 4, 80, 300, &[257]),
        (3, 8, 2, 128, 260, &[33, 257, 0]),
        (1, 16, 1, 256, 70, &[65]),
        (3, 4, 1, 64, 64, &[100, 64, 2]), // a length past max_seq is clamped
        // Head dims that no subgroup size divides, and value rows that
        // leave invocations idle: ratios 1 and 8.
        (1, 8, 8, 100, 90, &[90]),
        (1, 16, 2, 36, 200, &[200]),
        // A dim that is no multiple of 4: rows read an element at a time.
        (2, 6, 2, 30, 150, &[150, 9]),
        // Ratio 2 with a dim of 96.
        (2, 8, 4, 96, 50, &[50, 17]),
        // Qwen3-4B's heads over a short cache: the 4 query heads of a kv
        // head go to 4 workgroups.
        (2, 32, 8, 128, 64, &[3, 64]),
        // 64 head groups keep 8 heads each and take 8 chunks: a chunk
        // spans up to 75 positions, more than one tile of 64.
        (8, 64, 8, 64, 600, &[600, 599, 130, 65, 64, 16, 1, 0]),
        // The same over groups of 4 and of 3 heads: chunks of up to 75
        // positions.
        (8, 32, 8, 32, 600, &[600, 599, 130, 65, 64, 16, 1, 0]),
        (8, 24, 8, 32, 600, &[600, 77, 64, 3, 599, 130, 1, 0]),
        // One head group of 16 over 129 chunks: the fused merge takes the
        // chunks' weights 128 chunks at a time (two blocks).
        (1, 16, 1, 64, 8200, &[8200]),
    ];
    for (bsz, hq, hkv, d, smax, lens) in cases {
        let shape = DecodeShape {
            batch: bsz,
            q_heads: hq,
            kv_heads: hkv,
            head_dim: d,
            max_seq: smax,
        };
        let n_q = (bsz * hq * d) as usize;
        let n_c = (bsz * hkv * smax * d) as usize;
        let (q, qf) = inputs::<T>(&mut rng, n_q, 1.0);
        let (k, kf) = inputs::<T>(&mut rng, n_c, 1.0);
        let (v, vf) = inputs::<T>(&mut rng, n_c, 2.0);
        let (qs, ks, vs) = (
            gpu.upload(&q).unwrap(),
            gpu.upload(&k).unwrap(),
            gpu.upload(&v).unwrap(),
        );
        let (ls, out) = (gpu.upload(lens).unwrap(), gpu.alloc::<T>(n_q).unwrap());
        // A large scale makes the softmax peaked, so the chunks' maxima matter.
        let scale = 4.0 / (d as f32).sqrt();
        let mut b = gpu.batch().unwrap();
        nn::attention_decode(&mut b, &qs, &ks, &vs, &ls, &out, shape, scale).unwrap();
        b.submit().unwrap();
        let (want, vmax) = decode_ref(&qf, &kf, &vf, lens, shape, scale);
        let what = format!(
            "attention_decode {} {bsz}x{hq}/{hkv}x{d} lens {lens:?}",
            T::NAME
        );
        assert_within(&what, &download(&out), &want, T::U, &|i| {
            1e-4 * vmax[i] + T::TINY
        });
    }
}

#[test]
fn decode_attention_matches_the_reference() {
    let gpu = common::gpu();
    each_dtype!(&gpu, decode_at);
    common::assert_clean(&gpu);
}

#[test]
fn a_graph_replays_decode_with_new_lengths() {
    let gpu = common::gpu();
    let mut rng = common::Rng::new(35);
    let shape = DecodeShape {
        batch: 2,
        q_heads: 4,
        kv_heads: 2,
        head_dim: 64,
        max_seq: 200,
    };
    let (q, k, v) = (
        rng.vec_f32(2 * 4 * 64),
        rng.vec_f32(2 * 2 * 200 * 64),
        rng.vec_f32(2 * 2 * 200 * 64),
    );
    let (qs, ks, vs) = (
        gpu.upload(&q).unwrap(),
        gpu.upload(&k).unwrap(),
        gpu.upload(&v).unwrap(),
    );
    let (ls, out) = (
        gpu.upload(&[1u32, 1]).unwrap(),
        gpu.alloc::<f32>(q.len()).unwrap(),
    );
    let mut rec = gpu.graph_recorder().unwrap();
    nn::attention_decode(&mut rec, &qs, &ks, &vs, &ls, &out, shape, 0.125).unwrap();
    let graph = rec.finish().unwrap();
    for lens in [[1u32, 200], [65, 7], [128, 129]] {
        ls.write(0, &lens).unwrap();
        graph.launch().unwrap().wait().unwrap();
        let (want, vmax) = decode_ref(&q, &k, &v, &lens, shape, 0.125);
        assert_within(
            &format!("replay at {lens:?}"),
            &out.download().unwrap(),
            &want,
            0.0,
            &|i| 1e-4 * vmax[i],
        );
    }
    drop(graph);
    common::assert_clean(&gpu);
}

#[test]
fn bad_shapes_are_typed_errors_naming_the_tensor() {
    let gpu = common::gpu();
    let x = gpu.alloc::<f32>(2 * 3 * 64).unwrap();
    let inv = gpu.alloc::<f32>(32).unwrap();
    let pos = gpu.alloc::<u32>(2).unwrap();
    let mut b = gpu.batch().unwrap();
    nn::rotary(&mut b, &x, &x, &inv, &pos, 2, 3, 64).unwrap();
    let e = nn::rotary(&mut b, &x, &x, &inv, &pos, 3, 2, 64).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::rotary", "positions"));
    let e = nn::rotary(&mut b, &x, &x, &inv, &pos, 2, 1, 192).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::rotary", "inv_freq"));
    let e = nn::rotary(&mut b, &x, &x, &inv, &pos, 2, 2, 96).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::rotary", "inv_freq"));
    let big = gpu.alloc::<f32>(2 * 384).unwrap();
    let e = nn::rotary(&mut b, &big, &big, &inv, &pos, 2, 1, 384).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::rotary", "head_dim"));
    let e = nn::rotary(&mut b, &x, &x, &inv, &pos, 2, 2, 95).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::rotary", "head_dim"));

    let flag = gpu.alloc::<u32>(1).unwrap();
    let cache = gpu.alloc::<f32>(2 * 3 * 10 * 64).unwrap();
    let kv = KvShape {
        batch: 2,
        steps: 1,
        kv_heads: 3,
        head_dim: 64,
        max_seq: 10,
    };
    let e = nn::kv_append(
        &mut b,
        &x,
        &x,
        &cache,
        &cache,
        &pos,
        &flag,
        KvShape { max_seq: 11, ..kv },
    )
    .unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::kv_append", "k_cache"));
    let e = nn::kv_append(&mut b, &x, &inv, &cache, &cache, &pos, &flag, kv).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::kv_append", "v_new"));
    let e = nn::kv_append(&mut b, &x, &x, &cache, &cache, &flag, &flag, kv).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::kv_append", "positions"));

    // q [2, 3, 64] against caches of 2 kv heads: 3 does not divide by 2.
    let dq = DecodeShape {
        batch: 2,
        q_heads: 3,
        kv_heads: 3,
        head_dim: 64,
        max_seq: 10,
    };
    let e = nn::attention_decode(
        &mut b,
        &x,
        &cache,
        &cache,
        &pos,
        &x,
        DecodeShape { kv_heads: 2, ..dq },
        0.1,
    )
    .unwrap_err();
    let (op, tensor) = shape_error(e.clone());
    assert_eq!((op, tensor), ("ops::nn::attention_decode", "q_heads"));
    assert!(
        e.to_string().contains("not a multiple of kv_heads (2)"),
        "{e}"
    );
    let e = nn::attention_decode(
        &mut b,
        &x,
        &cache,
        &cache,
        &pos,
        &x,
        DecodeShape {
            head_dim: 384,
            q_heads: 1,
            kv_heads: 1,
            max_seq: 1,
            ..dq
        },
        0.1,
    )
    .unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::attention_decode", "head_dim"));
    let e = nn::attention_decode(&mut b, &x, &cache, &cache, &flag, &x, dq, 0.1).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::attention_decode", "lens"));
    let e = nn::attention_decode(&mut b, &x, &x, &cache, &pos, &x, dq, 0.1).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::attention_decode", "k_cache"));
    let e = nn::attention_decode(&mut b, &x, &cache, &cache, &pos, &x, dq, f32::NAN).unwrap_err();
    assert!(
        matches!(
            e,
            vkcompute::Error::Ops(vkcompute::ops::OpsError::Param { param: "scale", .. })
        ),
        "{e:?}"
    );
    // Only the first (valid) rotary was recorded.
    assert_eq!(b.len(), 1);
    b.submit().unwrap();
    common::assert_clean(&gpu);
}
