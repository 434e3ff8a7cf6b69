//! The fused decode-layer ops against f64 references: `qk_norm_rope_append`
//! (per-head q/k RMSNorm, rotary and the KV-cache append in one dispatch)
//! at every cache type, head dims 64, 80, 96 and 128, GQA ratios 2 and 4,
//! positions 0 and past 1000, decode and prefill row counts, with and
//! without the norm, and positions past the cache (the flag word); a
//! recorded graph of it and the one-dispatch `attention_decode` replayed
//! with advancing positions; and the typed errors for bad input.
//!
//! Bounds. The f64 reference normalises in f64 and rotates by the angle
//! the kernel takes, one f32 product pos * inv_freq, with cos and sin in
//! f64. RMSNorm in f32 (at most 256 squares, 4 per invocation and a
//! 64-wide tree, inversesqrt within 2 ulp) is within 2e-5 relative (the
//! bound of `ops_nn_rows`); rotary adds at most 2^-19 (|x_i| + |x_i+h|)
//! (the derivation in `ops_nn_attention`). With the norm the bound is
//! 3e-5 (|n_i| + |n_i+h|) of the normed pair n, without it 2^-19
//! (|x_i| + |x_i+h|); a 16-bit cache adds one rounding. Values are copied
//! (f32) or rounded once (16-bit) and compared exactly. Decode attention:
//! as in `ops_nn_attention`, 1e-4 of the largest |v|.

mod common;
mod nn_support;

use nn_support::*;
use vkcompute::ops::nn::{self, DecodeShape, QkNorm, QkShape};
use vkcompute::ops::OpsError;
use vkcompute::{Device, Error};

/// One token's head rows after the reference's norm and rotary, and the
/// bound of each element.
struct Rotated {
    out: Vec<f64>,
    bound: Vec<f64>,
}

/// Norm (with weights `w`) and rotary of `x` (`[tokens, heads, dim]`),
/// token `t` at position `pos[t]`.
fn norm_rope_ref(
    x: &[f32],
    w: Option<&[f32]>,
    eps: f32,
    pos: &[u32],
    inv: &[f32],
    heads: usize,
) -> Rotated {
    let dim = inv.len() * 2;
    let h = dim / 2;
    let mut out = vec![0.0; x.len()];
    let mut bound = vec![0.0; x.len()];
    for (row, r) in x.chunks(dim).enumerate() {
        let n: Vec<f64> = match w {
            Some(w) => {
                let ms = r.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / dim as f64;
                let s = 1.0 / (ms + f64::from(eps)).sqrt();
                r.iter()
                    .zip(w)
                    .map(|(&v, &g)| f64::from(v) * s * f64::from(g))
                    .collect()
            }
            None => r.iter().map(|&v| f64::from(v)).collect(),
        };
        let rel = if w.is_some() { 3e-5 } else { 2f64.powi(-19) };
        let p = pos[row / heads];
        for (i, &f) in inv.iter().enumerate() {
            let a = f64::from(p as f32 * f);
            let (x0, x1) = (n[i], n[i + h]);
            out[row * dim + i] = x0 * a.cos() - x1 * a.sin();
            out[row * dim + i + h] = x1 * a.cos() + x0 * a.sin();
            let b = rel * (x0.abs() + x1.abs());
            bound[row * dim + i] = b;
            bound[row * dim + i + h] = b;
        }
    }
    Rotated { out, bound }
}

/// (batch, steps, q_heads, kv_heads, head_dim, max_seq, positions, norm)
type Case = (
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    &'static [u32],
    bool,
);

fn qk_at<C: TestElem>(gpu: &Device) {
    if !takes::<C>(gpu) {
        return;
    }
    let mut rng = common::Rng::new(41);
    let cases: [Case; 5] = [
        (1, 1, 4, 2, 80, 8, &[0], true),
        (2, 1, 8, 2, 128, 1100, &[1030, 5], true),
        (1, 5, 6, 3, 96, 1200, &[1100], false),
        (1, 4, 8, 4, 64, 40, &[0], true),
        // Positions at and past the end: nothing written, the flag counts.
        (3, 2, 4, 1, 64, 4, &[2, 3, 9], true),
    ];
    for (bsz, steps, hq, hkv, dim, smax, pos, with_norm) in cases {
        let shape = QkShape {
            batch: bsz as u32,
            steps: steps as u32,
            q_heads: hq as u32,
            kv_heads: hkv as u32,
            head_dim: dim as u32,
            max_seq: smax as u32,
        };
        let tokens = bsz * steps;
        let (n_q, n_kv, n_c) = (
            tokens * hq * dim,
            tokens * hkv * dim,
            bsz * hkv * smax * dim,
        );
        let (q, k, v) = (rng.vec_f32(n_q), rng.vec_f32(n_kv), rng.vec_f32(n_kv));
        let (qw, kw): (Vec<f32>, Vec<f32>) = (
            (0..dim).map(|_| 1.0 + 0.5 * rng.f32()).collect(),
            (0..dim).map(|_| 1.0 + 0.5 * rng.f32()).collect(),
        );
        let (k0, _) = inputs::<C>(&mut rng, n_c, 1.0);
        let (v0, _) = inputs::<C>(&mut rng, n_c, 1.0);
        let inv = nn::rope_inv_freq(dim as u32, 1_000_000.0, None).unwrap();
        let up = |x: &[f32]| gpu.upload(x).unwrap();
        let (qs, ks, vs, qws, kws, fs) = (up(&q), up(&k), up(&v), up(&qw), up(&kw), up(&inv));
        let (kc, vc) = (gpu.upload(&k0).unwrap(), gpu.upload(&v0).unwrap());
        let (ps, flag) = (gpu.upload(pos).unwrap(), gpu.upload(&[0u32]).unwrap());
        let eps = 1e-6;
        let norm = with_norm.then_some(QkNorm::new(&qws, &kws, eps));
        let mut b = gpu.batch().unwrap();
        nn::qk_norm_rope_append(
            &mut b, &qs, &ks, &vs, norm, &fs, &ps, &kc, &vc, &flag, shape,
        )
        .unwrap();
        assert_eq!(b.len(), 1, "one dispatch");
        b.submit().unwrap();

        let tok_pos: Vec<u32> = (0..tokens)
            .map(|t| pos[t / steps] + (t % steps) as u32)
            .collect();
        let wq = with_norm.then_some(&qw[..]);
        let wk = with_norm.then_some(&kw[..]);
        let rq = norm_rope_ref(&q, wq, eps, &tok_pos, &inv, hq);
        let rk = norm_rope_ref(&k, wk, eps, &tok_pos, &inv, hkv);
        let what = format!(
            "qk_norm_rope_append {} cache {bsz}x{steps} {hq}/{hkv}x{dim} at {pos:?}",
            C::NAME
        );
        let got_q = qs.download().unwrap();
        assert_within(&format!("{what}: q"), &got_q, &rq.out, 0.0, &|i| {
            rq.bound[i]
        });
        let got_k = ks.download().unwrap();
        assert_within(&format!("{what}: k"), &got_k, &rk.out, 0.0, &|i| {
            rk.bound[i]
        });
        // The check can fail: one position later disagrees far past the bound.
        let later: Vec<u32> = tok_pos.iter().map(|p| p + 1).collect();
        let off = norm_rope_ref(&q, wq, eps, &later, &inv, hq);
        let e = max_err(&got_q, &off.out);
        assert!(
            e > 1e-2,
            "{what}: the reference one position on agrees ({e})"
        );

        // The caches: the rotated keys and the values at each position in
        // range, everything else as it was.
        let mut want_k: Vec<f64> = k0.iter().map(|&c| f64::from(c.dec())).collect();
        let mut bound_k = vec![0.0; n_c];
        let mut want_v = v0.clone();
        let mut dropped = 0;
        for (t, &p) in tok_pos.iter().enumerate() {
            let (sb, p) = (t / steps, p as usize);
            for hh in 0..hkv {
                if p >= smax {
                    dropped += 1;
                    continue;
                }
                let src = (t * hkv + hh) * dim;
                let dst = ((sb * hkv + hh) * smax + p) * dim;
                for j in 0..dim {
                    want_k[dst + j] = rk.out[src + j];
                    bound_k[dst + j] = rk.bound[src + j] + C::U * rk.out[src + j].abs() + C::TINY;
                    want_v[dst + j] = C::enc(v[src + j]);
                }
            }
        }
        assert_within(
            &format!("{what}: k_cache"),
            &download(&kc),
            &want_k,
            0.0,
            &|i| bound_k[i],
        );
        assert!(vc.download().unwrap() == want_v, "{what}: v_cache");
        assert_eq!(
            flag.download().unwrap(),
            [dropped],
            "{what}: positions past the end"
        );
    }
}

#[test]
fn qk_norm_rope_append_matches_the_reference() {
    let gpu = common::gpu();
    each_dtype!(&gpu, qk_at);
    common::assert_clean(&gpu);
}

#[test]
fn a_graph_replays_the_fused_layer_with_advancing_positions() {
    let gpu = common::gpu();
    let mut rng = common::Rng::new(42);
    let (bsz, hq, hkv, dim, smax) = (2usize, 8usize, 2usize, 96usize, 1100usize);
    let qs_shape = QkShape {
        batch: bsz as u32,
        steps: 1,
        q_heads: hq as u32,
        kv_heads: hkv as u32,
        head_dim: dim as u32,
        max_seq: smax as u32,
    };
    let ds = DecodeShape {
        batch: bsz as u32,
        q_heads: hq as u32,
        kv_heads: hkv as u32,
        head_dim: dim as u32,
        max_seq: smax as u32,
    };
    let (n_q, n_kv, n_c) = (bsz * hq * dim, bsz * hkv * dim, bsz * hkv * smax * dim);
    let qs = gpu.alloc::<f32>(n_q).unwrap();
    let (ks, vs) = (
        gpu.alloc::<f32>(n_kv).unwrap(),
        gpu.alloc::<f32>(n_kv).unwrap(),
    );
    let qw: Vec<f32> = (0..dim).map(|_| 1.0 + 0.5 * rng.f32()).collect();
    let kw: Vec<f32> = (0..dim).map(|_| 1.0 + 0.5 * rng.f32()).collect();
    let (qws, kws) = (gpu.upload(&qw).unwrap(), gpu.upload(&kw).unwrap());
    let inv = nn::rope_inv_freq(dim as u32, 10_000.0, None).unwrap();
    let fs = gpu.upload(&inv).unwrap();
    let kc = gpu.upload(&rng.vec_f32(n_c)).unwrap();
    let vc = gpu.upload(&rng.vec_f32(n_c)).unwrap();
    let (ps, ls) = (
        gpu.upload(&[0u32; 2]).unwrap(),
        gpu.upload(&[1u32; 2]).unwrap(),
    );
    let (flag, out) = (gpu.upload(&[0u32]).unwrap(), gpu.alloc::<f32>(n_q).unwrap());
    let eps = 1e-6;
    let scale = 4.0 / (dim as f32).sqrt();
    let mut rec = gpu.graph_recorder().unwrap();
    let norm = QkNorm::new(&qws, &kws, eps);
    nn::qk_norm_rope_append(
        &mut rec,
        &qs,
        &ks,
        &vs,
        Some(norm),
        &fs,
        &ps,
        &kc,
        &vc,
        &flag,
        qs_shape,
    )
    .unwrap();
    rec.barrier();
    nn::attention_decode(&mut rec, &qs, &kc, &vc, &ls, &out, ds, scale).unwrap();
    assert_eq!(
        rec.len(),
        2,
        "two dispatches: the fused q/k side and attention"
    );
    let graph = rec.finish().unwrap();
    // Sequence 1 runs past its cache at the fourth launch (the flag counts
    // its kv heads; attention reads the clamped length), then both go on.
    let steps: [[u32; 2]; 6] = [
        [0, 1000],
        [1, 1001],
        [2, 1099],
        [3, 1100],
        [4, 63],
        [64, 64],
    ];
    let mut dropped = 0;
    for pos in steps {
        let (q, k, v) = (rng.vec_f32(n_q), rng.vec_f32(n_kv), rng.vec_f32(n_kv));
        qs.write(0, &q).unwrap();
        ks.write(0, &k).unwrap();
        vs.write(0, &v).unwrap();
        ps.write(0, &pos).unwrap();
        let lens = pos.map(|p| p + 1);
        ls.write(0, &lens).unwrap();
        let kc0 = kc.download().unwrap();
        graph.launch().unwrap().wait().unwrap();
        let what = format!("replay at {pos:?}");
        let rq = norm_rope_ref(&q, Some(&qw), eps, &pos, &inv, hq);
        let rk = norm_rope_ref(&k, Some(&kw), eps, &pos, &inv, hkv);
        let got_q = qs.download().unwrap();
        assert_within(&format!("{what}: q"), &got_q, &rq.out, 0.0, &|i| {
            rq.bound[i]
        });
        let (kcg, vcg) = (kc.download().unwrap(), vc.download().unwrap());
        for (b, &p) in pos.iter().enumerate() {
            for h in 0..hkv {
                let src = (b * hkv + h) * dim;
                let dst = ((b * hkv + h) * smax + p.min(smax as u32 - 1) as usize) * dim;
                if p as usize >= smax {
                    dropped += 1;
                    assert_eq!(
                        kcg[dst..dst + dim],
                        kc0[dst..dst + dim],
                        "{what}: untouched"
                    );
                    continue;
                }
                let want = &rk.out[src..src + dim];
                let bound = &rk.bound[src..src + dim];
                assert_within(
                    &format!("{what}: k_cache"),
                    &kcg[dst..dst + dim],
                    want,
                    0.0,
                    &|i| bound[i],
                );
                assert_eq!(vcg[dst..dst + dim], v[src..src + dim], "{what}: v_cache");
            }
        }
        assert_eq!(flag.download().unwrap(), [dropped], "{what}: flag");
        // Attention over what the GPU holds: one dispatch, exact at every
        // launch (its counters are back at zero each time).
        let (want, vmax) = decode_ref(&got_q, &kcg, &vcg, &lens, ds, scale);
        assert_within(
            &format!("{what}: attention"),
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
fn bad_inputs_are_typed_errors_naming_the_tensor() {
    const OP: &str = "ops::nn::qk_norm_rope_append";
    let gpu = common::gpu();
    let shape = QkShape {
        batch: 2,
        steps: 1,
        q_heads: 4,
        kv_heads: 2,
        head_dim: 64,
        max_seq: 8,
    };
    let a = |n: usize| gpu.alloc::<f32>(n).unwrap();
    let (q, k, v) = (a(2 * 4 * 64), a(2 * 2 * 64), a(2 * 2 * 64));
    let (w, inv, short) = (a(64), a(32), a(31));
    let (kc, vc) = (a(2 * 2 * 8 * 64), a(2 * 2 * 8 * 64));
    let pos = gpu.alloc::<u32>(2).unwrap();
    let flag = gpu.alloc::<u32>(1).unwrap();
    let norm = QkNorm::new(&w, &w, 1e-6);
    let mut b = gpu.batch().unwrap();
    nn::qk_norm_rope_append(
        &mut b,
        &q,
        &k,
        &v,
        Some(norm),
        &inv,
        &pos,
        &kc,
        &vc,
        &flag,
        shape,
    )
    .unwrap();
    type F = vkcompute::Buffer<f32>;
    let run = |b: &mut vkcompute::Batch,
               q: &F,
               k: &F,
               v: &F,
               n: Option<QkNorm<'_>>,
               f: &F,
               kc: &F,
               vc: &F,
               s: QkShape| {
        nn::qk_norm_rope_append(b, q, k, v, n, f, &pos, kc, vc, &flag, s).unwrap_err()
    };
    let e = run(&mut b, &k, &k, &v, None, &inv, &kc, &vc, shape);
    assert_eq!(shape_error(e), (OP, "q"));
    let e = run(&mut b, &q, &q, &v, None, &inv, &kc, &vc, shape);
    assert_eq!(shape_error(e), (OP, "k"));
    let e = run(&mut b, &q, &k, &inv, None, &inv, &kc, &vc, shape);
    assert_eq!(shape_error(e), (OP, "v"));
    let e = run(&mut b, &q, &k, &v, None, &short, &kc, &vc, shape);
    assert_eq!(shape_error(e), (OP, "inv_freq"));
    let e = run(&mut b, &q, &k, &v, None, &inv, &q, &vc, shape);
    assert_eq!(shape_error(e), (OP, "k_cache"));
    let e = run(&mut b, &q, &k, &v, None, &inv, &kc, &k, shape);
    assert_eq!(shape_error(e), (OP, "v_cache"));
    let bad_w = QkNorm::new(&w, &inv, 1e-6);
    let e = run(&mut b, &q, &k, &v, Some(bad_w), &inv, &kc, &vc, shape);
    assert_eq!(shape_error(e), (OP, "k_weight"));
    let e = nn::qk_norm_rope_append(
        &mut b, &q, &k, &v, None, &inv, &flag, &kc, &vc, &flag, shape,
    )
    .unwrap_err();
    assert_eq!(shape_error(e), (OP, "positions"));
    // Head counts that do not divide, an odd head_dim, one past the limit,
    // no steps: each a typed error naming what was wrong.
    let bad_shapes = [
        (
            QkShape {
                kv_heads: 3,
                ..shape
            },
            "not a multiple of kv_heads (3)",
        ),
        (
            QkShape {
                head_dim: 63,
                ..shape
            },
            "head_dim",
        ),
        (
            QkShape {
                head_dim: 258,
                ..shape
            },
            "256",
        ),
        (QkShape { steps: 0, ..shape }, "steps"),
    ];
    for (s, says) in bad_shapes {
        let e = run(&mut b, &q, &k, &v, None, &inv, &kc, &vc, s);
        assert!(matches!(e, Error::Ops(_)), "{s:?}: {e:?}");
        assert!(e.to_string().contains(says), "{s:?}: {e}");
    }
    assert_eq!(
        shape_error(run(
            &mut b,
            &q,
            &k,
            &v,
            None,
            &inv,
            &kc,
            &vc,
            QkShape {
                head_dim: 63,
                ..shape
            }
        )),
        (OP, "head_dim")
    );
    assert_eq!(
        shape_error(run(
            &mut b,
            &q,
            &k,
            &v,
            None,
            &inv,
            &kc,
            &vc,
            QkShape { steps: 0, ..shape }
        )),
        (OP, "steps")
    );
    // A bad epsilon, and tensors sharing bytes.
    let bad_eps = QkNorm::new(&w, &w, -1.0);
    let e = run(&mut b, &q, &k, &v, Some(bad_eps), &inv, &kc, &vc, shape);
    assert!(
        matches!(e, Error::Ops(OpsError::Param { param: "eps", .. })),
        "{e:?}"
    );
    let both = a(2 * 2 * 64 * 2);
    let (k2, v2) = (both.slice(0..256).unwrap(), both.slice(128..384).unwrap());
    let e = nn::qk_norm_rope_append(
        &mut b, &q, &k2, &v2, None, &inv, &pos, &kc, &vc, &flag, shape,
    )
    .unwrap_err();
    assert_eq!(shape_error(e), (OP, "k"));
    let e = run(&mut b, &q, &k, &v, None, &inv, &kc, &kc, shape);
    assert_eq!(shape_error(e), (OP, "k_cache"));
    // Only the first (valid) call was recorded.
    assert_eq!(b.len(), 1);
    b.submit().unwrap();
    common::assert_clean(&gpu);
}
