//! The transformer ops of an op batch (RMSNorm, LayerNorm, SiLU·mul,
//! causal softmax, rotary, prefill attention, embedding) mixed with fused element-wise ops, against f64
//! references, with fusion on and off; and their typed errors at record
//! time.
//!
//! Bounds: as in ops_nn_rows.rs and ops_nn_prefill.rs for f32 (2e-5
//! relative per op), compounded over the chain: 1e-4 relative to the
//! magnitude of each output.

mod common;
mod nn_support;

use nn_support::*;
use vkcompute::ops::{nn, OpBatchOptions, OpsError};
use vkcompute::Error;

/// f64 reference of the chain the test records.
fn chain_ref(x: &[f32], w: &[f32], lw: &[f32], lb: &[f32], rows: usize, cols: usize) -> Vec<f64> {
    let mut out = Vec::new();
    for r in 0..rows {
        let row: Vec<f64> = x[r * cols..(r + 1) * cols]
            .iter()
            .map(|&v| f64::from(v))
            .collect();
        let ms = row.iter().map(|v| v * v).sum::<f64>() / cols as f64;
        let inv = 1.0 / (ms + 1e-6).sqrt();
        let y: Vec<f64> = row
            .iter()
            .zip(w)
            .map(|(v, &g)| v * inv * f64::from(g))
            .collect();
        // layer_norm(y)
        let mean = y.iter().sum::<f64>() / cols as f64;
        let var = y.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / cols as f64;
        let li = 1.0 / (var + 1e-5).sqrt();
        let l: Vec<f64> = (0..cols)
            .map(|c| (y[c] - mean) * li * f64::from(lw[c]) + f64::from(lb[c]))
            .collect();
        // silu(2 y) * (l + 1)
        let s: Vec<f64> = (0..cols)
            .map(|c| {
                let g = 2.0 * y[c];
                g / (1.0 + (-g).exp()) * (l[c] + 1.0)
            })
            .collect();
        out.push(s);
    }
    // causal softmax, one block of `rows` queries
    let mut res = Vec::new();
    for (r, row) in out.iter().enumerate() {
        let seen = cols - rows + r + 1;
        let m = row[..seen]
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = row[..seen].iter().map(|v| (v - m).exp()).sum();
        res.extend((0..cols).map(|c| {
            if c < seen {
                (row[c] - m).exp() / sum
            } else {
                0.0
            }
        }));
    }
    res
}

#[test]
fn transformer_ops_run_in_an_op_batch() {
    let gpu = common::gpu();
    let mut rng = common::Rng::new(61);
    let (rows, cols) = (5usize, 72usize);
    let x = rng.vec_f32(rows * cols);
    let w: Vec<f32> = rng.vec_f32(cols).iter().map(|v| v + 1.0).collect();
    let (lw, lb) = (rng.vec_f32(cols), rng.vec_f32(cols));
    let want = chain_ref(&x, &w, &lw, &lb, rows, cols);
    for fusion in [true, false] {
        let mut ops = gpu.ops_with(OpBatchOptions::default().with_fusion(fusion));
        let xs = ops.upload_matrix(&x, rows as u32, cols as u32).unwrap();
        let ws = ops.upload(&w).unwrap();
        let (lws, lbs) = (ops.upload(&lw).unwrap(), ops.upload(&lb).unwrap());
        let ones = ops
            .upload_matrix(&vec![1.0f32; rows * cols], rows as u32, cols as u32)
            .unwrap();
        let y = ops.rms_norm(&xs, &ws, 1e-6).unwrap();
        let l = ops.layer_norm(&y, &lws, &lbs, 1e-5).unwrap();
        let gate = ops.scale(&y, 2.0).unwrap();
        let up = ops.add(&l, &ones).unwrap();
        let s = ops.silu_mul(&gate, &up).unwrap();
        let p = ops.causal_softmax(&s, rows as u32).unwrap();
        for round in 0..2 {
            ops.execute_blocking().unwrap();
            let got = ops.read(&p).unwrap();
            let what = format!("op batch chain (fusion {fusion}, execute {round})");
            assert_within(&what, &got, &want, 1e-4, &|_| 1e-12);
        }
    }
    common::assert_clean(&gpu);
}

#[test]
fn bad_shapes_are_refused_at_record_time() {
    let gpu = common::gpu();
    let mut ops = gpu.ops();
    let x = ops.upload_matrix(&[0.5f32; 12], 3, 4).unwrap();
    let w3 = ops.upload(&[1.0f32; 3]).unwrap();
    let w4 = ops.upload(&[1.0f32; 4]).unwrap();
    let e = ops.rms_norm(&x, &w3, 1e-6).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::rms_norm", "weight"));
    let e = ops.rms_norm(&x, &w4, f32::NAN).unwrap_err();
    assert!(
        matches!(e, Error::Ops(OpsError::Param { param: "eps", .. })),
        "{e:?}"
    );
    let e = ops.layer_norm(&x, &w4, &w3, 1e-5).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::layer_norm", "bias"));
    let e = ops.silu_mul(&x, &w4).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::silu_mul", "up"));
    let e = ops.causal_softmax(&x, 5).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::causal_softmax", "q_len"));
    let e = ops.causal_softmax(&x, 2).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::causal_softmax", "x"));
    assert_eq!(ops.num_operations(), 0, "nothing recorded");
    drop(ops);
    common::assert_clean(&gpu);
}

/// The same inputs through the free ops in one batch: the reference for
/// the op batch's rotary, prefill attention and embedding (the free ops
/// are checked against f64 in ops_nn_attention.rs, ops_nn_prefill.rs and
/// ops_nn_rows.rs; the op batch must give the same bits).
#[allow(clippy::too_many_arguments)]
fn free_ops(
    gpu: &vkcompute::Device,
    table: &[f32],
    ids: &[u32],
    inv: &[f32],
    pos: &[u32],
    k: &[f32],
    v: &[f32],
    s: nn::PrefillShape,
) -> (Vec<f32>, Vec<f32>, u32) {
    let dim = (table.len() / 11) as u32;
    let tokens = ids.len();
    let (ts, is, fs) = (
        gpu.upload(table).unwrap(),
        gpu.upload(ids).unwrap(),
        gpu.upload(&[0u32]).unwrap(),
    );
    let x = gpu.alloc::<f32>(tokens * dim as usize).unwrap();
    let q = gpu.alloc::<f32>(x.len()).unwrap();
    let (invs, ps) = (gpu.upload(inv).unwrap(), gpu.upload(pos).unwrap());
    let (ks, vs) = (gpu.upload(k).unwrap(), gpu.upload(v).unwrap());
    let out = gpu.alloc::<f32>(x.len()).unwrap();
    let mut b = gpu.batch().unwrap();
    nn::embedding(&mut b, &ts, &is, &x, &fs, 11, dim).unwrap();
    b.barrier();
    nn::rotary(
        &mut b,
        &x,
        &q,
        &invs,
        &ps,
        tokens as u32,
        s.q_heads,
        s.head_dim,
    )
    .unwrap();
    b.barrier();
    nn::attention_prefill(&mut b, &q, &ks, &vs, &out, s, 0.25).unwrap();
    b.submit().unwrap();
    (
        q.download().unwrap(),
        out.download().unwrap(),
        fs.download().unwrap()[0],
    )
}

#[test]
fn rotary_prefill_and_embedding_replay_with_new_words() {
    let gpu = common::gpu();
    let mut rng = common::Rng::new(62);
    // 6 tokens of 2 query heads x 16: embedded, rotated, attended.
    let s = nn::PrefillShape {
        batch: 1,
        tokens: 6,
        q_heads: 2,
        kv_heads: 1,
        head_dim: 16,
    };
    let dim = 32u32;
    let table = rng.vec_f32(11 * dim as usize);
    let inv = nn::rope_inv_freq(16, 10_000.0, None).unwrap();
    let (k, v) = (rng.vec_f32(6 * 16), rng.vec_f32(6 * 16));
    let ids_buf = gpu.upload(&[0u32; 6]).unwrap();
    let pos_buf = gpu.upload(&[0u32; 6]).unwrap();
    let flag = gpu.upload(&[0u32]).unwrap();
    let mut ops = gpu.ops();
    let tab = ops.upload_matrix(&table, 11, dim).unwrap();
    let invt = ops.upload(&inv).unwrap();
    let (kt, vt) = (ops.upload(&k).unwrap(), ops.upload(&v).unwrap());
    let x = ops.embedding(&tab, &ids_buf, &flag).unwrap();
    let q = ops.rotary(&x, &invt, &pos_buf, 2, 16).unwrap();
    let out = ops.attention_prefill(&q, &kt, &vt, s, 0.25).unwrap();
    for (ids, pos) in [
        ([1u32, 2, 3, 4, 5, 6], [0u32, 1, 2, 3, 4, 5]),
        ([10, 0, 99, 7, 7, 3], [40, 41, 42, 43, 44, 45]),
    ] {
        ids_buf.write(0, &ids).unwrap();
        pos_buf.write(0, &pos).unwrap();
        flag.write(0, &[0]).unwrap();
        let done = ops.execute_blocking();
        let (want_q, want_out, want_flag) = free_ops(&gpu, &table, &ids, &inv, &pos, &k, &v, s);
        // The execute's ticket reports the ids past the vocabulary.
        match done {
            Ok(()) => assert_eq!(want_flag, 0, "{ids:?}: nothing reported"),
            Err(Error::Ops(OpsError::Flagged { op, count, .. })) => {
                assert_eq!((op, count), ("ops::nn::embedding", u64::from(want_flag)))
            }
            Err(e) => panic!("{ids:?}: {e}"),
        }
        assert_eq!(ops.read(&q).unwrap(), want_q, "rotary at {pos:?}");
        assert_eq!(ops.read(&out).unwrap(), want_out, "prefill after {ids:?}");
        assert_eq!(
            flag.download().unwrap()[0],
            want_flag,
            "ids past the vocabulary"
        );
    }
    assert_eq!(flag.download().unwrap()[0], 1, "99 is past the 11 rows");
    drop(ops);
    common::assert_clean(&gpu);
}

#[test]
fn word_buffers_and_attention_shapes_are_checked_at_record_time() {
    let gpu = common::gpu();
    let mut ops = gpu.ops();
    let x = ops.upload(&[0.5f32; 64]).unwrap();
    let inv = ops.upload(&[1.0f32; 8]).unwrap();
    let pos3 = gpu.upload(&[0u32; 3]).unwrap();
    let pos4 = gpu.upload(&[0u32; 4]).unwrap();
    let e = ops.rotary(&x, &inv, &pos3, 1, 16).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::rotary", "positions"));
    let e = ops.rotary(&x, &inv, &pos4, 1, 15).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::rotary", "head_dim"));
    let e = ops.embedding(&x, &pos3, &pos4).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::embedding", "table"));
    let s = nn::PrefillShape {
        batch: 1,
        tokens: 4,
        q_heads: 2,
        kv_heads: 2,
        head_dim: 8,
    };
    let e = ops.attention_prefill(&x, &x, &inv, s, 1.0).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::attention_prefill", "v"));
    let e = ops
        .attention_prefill(&x, &x, &x, nn::PrefillShape { kv_heads: 3, ..s }, 1.0)
        .unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::attention_prefill", "q_heads"));
    let other = vkcompute::Device::new().unwrap();
    let foreign = other.upload(&[0u32; 4]).unwrap();
    let e = ops.rotary(&x, &inv, &foreign, 1, 16).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::rotary", "positions"));
    assert_eq!(ops.num_operations(), 0, "nothing recorded");
    drop((ops, foreign, other));
    common::assert_clean(&gpu);
}

#[test]
fn a_decode_step_appends_and_attends_in_an_op_batch() {
    let gpu = common::gpu();
    let mut rng = common::Rng::new(63);
    let (b, hq, hkv, d, smax) = (2usize, 4usize, 2usize, 64usize, 40usize);
    let kv = nn::KvShape {
        batch: b as u32,
        steps: 1,
        kv_heads: hkv as u32,
        head_dim: d as u32,
        max_seq: smax as u32,
    };
    let ds = nn::DecodeShape {
        batch: b as u32,
        q_heads: hq as u32,
        kv_heads: hkv as u32,
        head_dim: d as u32,
        max_seq: smax as u32,
    };
    let n_cache = b * hkv * smax * d;
    let (mut k_host, mut v_host) = (rng.vec_f32(n_cache), rng.vec_f32(n_cache));
    let (kc, vc) = (gpu.upload(&k_host).unwrap(), gpu.upload(&v_host).unwrap());
    let (kn, vn) = (
        gpu.alloc::<f32>(b * hkv * d).unwrap(),
        gpu.alloc::<f32>(b * hkv * d).unwrap(),
    );
    let q = gpu.alloc::<f32>(b * hq * d).unwrap();
    let (pos, lens, flag) = (
        gpu.upload(&[0u32; 2]).unwrap(),
        gpu.upload(&[0u32; 2]).unwrap(),
        gpu.upload(&[0u32]).unwrap(),
    );
    let mut ops = gpu.ops();
    let (kct, vct) = (ops.import(&kc).unwrap(), ops.import(&vc).unwrap());
    let (knt, vnt, qt) = (
        ops.import(&kn).unwrap(),
        ops.import(&vn).unwrap(),
        ops.import(&q).unwrap(),
    );
    ops.kv_append_(&kct, &knt, &pos, &flag, kv).unwrap();
    ops.kv_append_(&vct, &vnt, &pos, &flag, kv).unwrap();
    let out = ops
        .attention_decode(&qt, &kct, &vct, &lens, ds, 0.125)
        .unwrap();
    for step in [[3u32, 0], [4, 39], [5, 40]] {
        let (k_new, v_new, q_new) = (
            rng.vec_f32(b * hkv * d),
            rng.vec_f32(b * hkv * d),
            rng.vec_f32(b * hq * d),
        );
        kn.write(0, &k_new).unwrap();
        vn.write(0, &v_new).unwrap();
        q.write(0, &q_new).unwrap();
        pos.write(0, &step).unwrap();
        lens.write(0, &[step[0] + 1, step[1] + 1]).unwrap();
        flag.write(0, &[0]).unwrap();
        let done = ops.execute_blocking();
        // The append on the host.
        let mut dropped = 0;
        for (s, &p) in step.iter().enumerate() {
            for h in 0..hkv {
                let src = (s * hkv + h) * d;
                if p as usize >= smax {
                    dropped += 2; // keys and values
                    continue;
                }
                let dst = ((s * hkv + h) * smax + p as usize) * d;
                k_host[dst..dst + d].copy_from_slice(&k_new[src..src + d]);
                v_host[dst..dst + d].copy_from_slice(&v_new[src..src + d]);
            }
        }
        // The execute's ticket reports what its appends dropped.
        match done {
            Ok(()) => assert_eq!(dropped, 0, "step {step:?}: nothing reported"),
            Err(Error::Ops(OpsError::Flagged { op, count, .. })) => {
                assert_eq!((op, count), ("ops::nn::kv_append", u64::from(dropped)))
            }
            Err(e) => panic!("step {step:?}: {e}"),
        }
        assert!(kc.download().unwrap() == k_host, "keys after step {step:?}");
        assert!(
            vc.download().unwrap() == v_host,
            "values after step {step:?}"
        );
        assert_eq!(
            flag.download().unwrap(),
            [dropped],
            "positions past the end"
        );
        // The free op on the same caches gives the same bits.
        let (kr, vr) = (gpu.upload(&k_host).unwrap(), gpu.upload(&v_host).unwrap());
        let want = gpu.alloc::<f32>(q_new.len()).unwrap();
        let mut bt = gpu.batch().unwrap();
        nn::attention_decode(&mut bt, &q, &kr, &vr, &lens, &want, ds, 0.125).unwrap();
        bt.submit().unwrap();
        assert_eq!(
            ops.read(&out).unwrap(),
            want.download().unwrap(),
            "attention at step {step:?}"
        );
    }
    let e = ops
        .attention_decode(&qt, &kct, &qt, &lens, ds, 0.125)
        .unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::attention_decode", "v_cache"));
    let e = ops.kv_append_(&kct, &qt, &pos, &flag, kv).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::kv_append", "k_new"));
    drop(ops);
    common::assert_clean(&gpu);
}
