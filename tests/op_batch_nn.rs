//! The transformer ops of an op batch (RMSNorm, LayerNorm, SiLU·mul,
//! causal softmax) mixed with fused element-wise ops, against f64
//! references, with fusion on and off; and their typed errors at record
//! time.
//!
//! Bounds: as in ops_nn_rows.rs and ops_nn_prefill.rs for f32 (2e-5
//! relative per op), compounded over the chain: 1e-4 relative to the
//! magnitude of each output.

mod common;
mod nn_support;

use nn_support::*;
use vkcompute::ops::{OpBatchOptions, OpsError};
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
