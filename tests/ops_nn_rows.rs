//! The row-wise transformer ops (RMSNorm per row and per head, LayerNorm,
//! SiLU·mul, argmax, embedding gather) against f64 references, at every
//! element type, on odd shapes; and their typed errors for bad input.
//!
//! Bounds. Inputs are representable in the element type, so the reference
//! sees what the GPU reads. A 16-bit result carries one rounding (`U`
//! relative: 2^-11 for f16, 2^-8 for bf16) on top of the f32 arithmetic.
//! RMSNorm: the sum of squares of n <= 5,000 terms goes through at most 20
//! sequential additions per invocation and a 256-wide tree, inversesqrt is
//! within 2 ulp: 2e-5 relative covers it with room. LayerNorm: the same for
//! the mean and the variance; the error is relative to |normed w| + |b|.
//! SiLU·mul: exp within 3 + 2|x| ulp (|x| <= 8), a division and two
//! multiplications: 1e-5 relative.

mod common;
mod nn_support;

use nn_support::*;
use vkcompute::ops::nn::{self, NnElement};
use vkcompute::{Device, Error};

fn rms_ref(x: &[f32], w: &[f32], cols: usize, eps: f32) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(cols) {
        let ms = row.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / cols as f64;
        let inv = 1.0 / (ms + f64::from(eps)).sqrt();
        out.extend(
            row.iter()
                .zip(w)
                .map(|(&v, &g)| f64::from(v) * inv * f64::from(g)),
        );
    }
    out
}

fn rms_at<T: TestElem>(gpu: &Device) {
    if !takes::<T>(gpu) {
        return;
    }
    let mut rng = common::Rng::new(21);
    // (rows, cols): one element, odd rows and widths, per-head shapes
    // (tokens x heads rows of head_dim: 7 x 4 of 72, 3 x 8 of 128), a hidden
    // row (held in registers), a wider row (streamed and read again).
    for (rows, cols) in [
        (1, 1),
        (3, 7),
        (33, 64),
        (28, 72),
        (24, 128),
        (2, 80),
        (1, 2560),
        (3, 4099),
    ] {
        let n = rows * cols;
        let (x, xf) = inputs::<T>(&mut rng, n, 4.0);
        let (w, wf) = inputs::<T>(&mut rng, cols, 2.0);
        let eps = 1e-6;
        let xs = gpu.upload(&x).unwrap();
        let ws = gpu.upload(&w).unwrap();
        let out = gpu.alloc::<T>(n).unwrap();
        let mut b = gpu.batch().unwrap();
        nn::rms_norm(&mut b, &xs, &ws, &out, rows as u32, cols as u32, eps).unwrap();
        // In place too.
        b.barrier();
        nn::rms_norm(&mut b, &xs, &ws, &xs, rows as u32, cols as u32, eps).unwrap();
        b.submit().unwrap();
        let want = rms_ref(&xf, &wf, cols, eps);
        let what = format!("rms_norm {} {rows}x{cols}", T::NAME);
        let tiny = T::TINY;
        assert_within(&what, &download(&out), &want, T::U + 2e-5, &|_| tiny);
        assert_within(
            &format!("{what} in place"),
            &download(&xs),
            &want,
            T::U + 2e-5,
            &|_| tiny,
        );
    }
}

#[test]
fn rms_norm_matches_the_reference() {
    let gpu = common::gpu();
    each_dtype!(&gpu, rms_at);
    common::assert_clean(&gpu);
}

fn layer_at<T: TestElem>(gpu: &Device) {
    if !takes::<T>(gpu) {
        return;
    }
    let mut rng = common::Rng::new(22);
    for (rows, cols) in [(1, 1), (3, 7), (5, 72), (2, 768), (3, 4099)] {
        let n = rows * cols;
        // An offset so the mean matters.
        let (_, xf) = inputs::<T>(&mut rng, n, 3.0);
        let x: Vec<T> = xf.iter().map(|&v| T::enc(v + 5.0)).collect();
        let xf: Vec<f32> = x.iter().map(|&v| v.dec()).collect();
        let (w, wf) = inputs::<T>(&mut rng, cols, 2.0);
        let (bias, bf) = inputs::<T>(&mut rng, cols, 1.0);
        let eps = 1e-5;
        let (xs, ws, bs) = (
            gpu.upload(&x).unwrap(),
            gpu.upload(&w).unwrap(),
            gpu.upload(&bias).unwrap(),
        );
        let out = gpu.alloc::<T>(n).unwrap();
        let mut b = gpu.batch().unwrap();
        nn::layer_norm(&mut b, &xs, &ws, &bs, &out, rows as u32, cols as u32, eps).unwrap();
        b.submit().unwrap();
        let mut want = Vec::new();
        let mut mag = Vec::new();
        for row in xf.chunks(cols) {
            let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / cols as f64;
            let var = row
                .iter()
                .map(|&v| (f64::from(v) - mean).powi(2))
                .sum::<f64>()
                / cols as f64;
            let inv = 1.0 / (var + f64::from(eps)).sqrt();
            for c in 0..cols {
                let nw = (f64::from(row[c]) - mean) * inv * f64::from(wf[c]);
                want.push(nw + f64::from(bf[c]));
                mag.push(nw.abs() + f64::from(bf[c]).abs());
            }
        }
        let what = format!("layer_norm {} {rows}x{cols}", T::NAME);
        assert_within(&what, &download(&out), &want, 0.0, &|i| {
            (T::U + 2e-5) * mag[i] + T::TINY
        });
    }
}

#[test]
fn layer_norm_matches_the_reference() {
    let gpu = common::gpu();
    each_dtype!(&gpu, layer_at);
    common::assert_clean(&gpu);
}

fn silu_ref(g: f32, u: f32) -> f64 {
    let g = f64::from(g);
    g / (1.0 + (-g).exp()) * f64::from(u)
}

fn silu_at<T: TestElem>(gpu: &Device) {
    if !takes::<T>(gpu) {
        return;
    }
    let mut rng = common::Rng::new(23);
    for (rows, cols) in [(1, 1), (3, 7), (7, 257), (2, 11_008)] {
        let n = rows * cols;
        let (g, gf) = inputs::<T>(&mut rng, n, 8.0);
        let (u, uf) = inputs::<T>(&mut rng, n, 2.0);
        let (gs, us, out) = (
            gpu.upload(&g).unwrap(),
            gpu.upload(&u).unwrap(),
            gpu.alloc::<T>(n).unwrap(),
        );
        // The same numbers as halves of one [rows, 2 cols] buffer.
        let mut both = Vec::with_capacity(2 * n);
        for r in 0..rows {
            both.extend_from_slice(&g[r * cols..(r + 1) * cols]);
            both.extend_from_slice(&u[r * cols..(r + 1) * cols]);
        }
        let (bs, out2) = (gpu.upload(&both).unwrap(), gpu.alloc::<T>(n).unwrap());
        let mut b = gpu.batch().unwrap();
        nn::silu_mul(&mut b, &gs, &us, &out, rows as u32, cols as u32).unwrap();
        nn::silu_mul_halves(&mut b, &bs, &out2, rows as u32, cols as u32).unwrap();
        b.submit().unwrap();
        let want: Vec<f64> = gf.iter().zip(&uf).map(|(&g, &u)| silu_ref(g, u)).collect();
        let what = format!("silu_mul {} {rows}x{cols}", T::NAME);
        assert_within(&what, &download(&out), &want, T::U + 1e-5, &|_| T::TINY);
        assert_within(
            &format!("{what} halves"),
            &download(&out2),
            &want,
            T::U + 1e-5,
            &|_| T::TINY,
        );
    }
}

#[test]
fn silu_mul_matches_the_reference() {
    let gpu = common::gpu();
    each_dtype!(&gpu, silu_at);
    common::assert_clean(&gpu);
}

fn argmax_ref(row: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        let b = row[best];
        let wins = if v.is_nan() || b.is_nan() {
            v.is_nan() && !b.is_nan()
        } else {
            v > b
        };
        if wins {
            best = i;
        }
    }
    best as u32
}

fn argmax_at<T: TestElem>(gpu: &Device) {
    if !takes::<T>(gpu) {
        return;
    }
    let mut rng = common::Rng::new(24);
    // Wide rows (a vocabulary's logits) are split over workgroups: the
    // ties and NaNs below then fall in different chunks.
    for (rows, cols) in [
        (1, 1),
        (1, 17),
        (3, 7),
        (17, 17),
        (5, 1000),
        (2, 32_003),
        (1, 151_936),
        (4, 151_936),
    ] {
        let n = rows * cols;
        // Few distinct values, so ties are common.
        let mut x: Vec<T> = (0..n).map(|_| T::enc(rng.below(9) as f32 - 4.0)).collect();
        if cols > 7 {
            // Row 0's max duplicated late.
            x[cols - 1] = T::enc(100.0);
            x[3] = T::enc(100.0);
        }
        if cols > 7 && rows > 1 {
            // Row 1: a NaN after the max.
            x[cols + cols / 2] = T::enc(f32::NAN);
            x[cols + cols / 3] = T::enc(f32::NAN);
        }
        if rows > 2 {
            // Row 2: only -inf.
            for v in &mut x[2 * cols..3 * cols] {
                *v = T::enc(f32::NEG_INFINITY);
            }
        }
        if rows > 3 {
            // Row 3: a tie of three maxima inside a later chunk and past it.
            for c in [cols / 2 + 1, cols / 2 + 2, cols - 7] {
                x[3 * cols + c] = T::enc(200.0);
            }
        }
        let xf: Vec<f32> = x.iter().map(|&v| v.dec()).collect();
        let (xs, out) = (gpu.upload(&x).unwrap(), gpu.alloc::<u32>(rows).unwrap());
        let mut b = gpu.batch().unwrap();
        nn::argmax(&mut b, &xs, &out, rows as u32, cols as u32).unwrap();
        b.submit().unwrap();
        let want: Vec<u32> = xf.chunks(cols).map(argmax_ref).collect();
        assert_eq!(
            out.download().unwrap(),
            want,
            "argmax {} {rows}x{cols}",
            T::NAME
        );
        if cols > 7 {
            assert_eq!(want[0], 3, "the first of two maxima");
        }
        if cols > 7 && rows > 1 {
            assert_eq!(want[1] as usize, cols / 3, "the first NaN");
        }
        if rows > 3 {
            assert_eq!(want[3] as usize, cols / 2 + 1, "the first of three maxima");
        }
    }
}

#[test]
fn argmax_matches_the_reference_with_ties_and_nan() {
    let gpu = common::gpu();
    each_dtype!(&gpu, argmax_at);
    common::assert_clean(&gpu);
}

fn embed_at<T: TestElem>(gpu: &Device) {
    if !takes::<T>(gpu) {
        return;
    }
    let mut rng = common::Rng::new(25);
    for (vocab, dim, tokens) in [(1, 1, 1), (7, 72, 5), (1000, 257, 33)] {
        let (table, _) = inputs::<T>(&mut rng, vocab * dim, 1.0);
        let mut ids: Vec<u32> = (0..tokens)
            .map(|_| rng.below(vocab as u64) as u32)
            .collect();
        let mut bad = 0;
        if tokens > 1 {
            ids[1] = vocab as u32; // one past the end
            ids[tokens - 1] = u32::MAX;
            bad = 2;
        }
        let ts = gpu.upload(&table).unwrap();
        let is = gpu.upload(&ids).unwrap();
        let out = gpu.upload(&vec![T::enc(9.0); tokens * dim]).unwrap();
        let flag = gpu.upload(&[0u32]).unwrap();
        let mut b = gpu.batch().unwrap();
        nn::embedding(&mut b, &ts, &is, &out, &flag, vocab as u32, dim as u32).unwrap();
        b.submit().unwrap();
        let got = out.download().unwrap();
        for (t, &id) in ids.iter().enumerate() {
            let row = &got[t * dim..(t + 1) * dim];
            if (id as usize) < vocab {
                assert_eq!(
                    row,
                    &table[id as usize * dim..(id as usize + 1) * dim],
                    "token {t}"
                );
            } else {
                assert!(row.iter().all(|&v| v.dec() == 0.0), "token {t}: zeros");
            }
        }
        assert_eq!(
            flag.download().unwrap(),
            [bad],
            "{} out-of-range ids counted",
            T::NAME
        );
    }
}

#[test]
fn embedding_gathers_rows_and_flags_ids_past_the_vocabulary() {
    let gpu = common::gpu();
    each_dtype!(&gpu, embed_at);
    common::assert_clean(&gpu);
}

#[test]
fn bad_shapes_are_typed_errors_naming_the_tensor() {
    let gpu = common::gpu();
    let x = gpu.alloc::<f32>(12).unwrap();
    let w3 = gpu.alloc::<f32>(3).unwrap();
    let w4 = gpu.alloc::<f32>(4).unwrap();
    let ids = gpu.alloc::<u32>(3).unwrap();
    let mut b = gpu.batch().unwrap();
    let e = nn::rms_norm(&mut b, &x, &w3, &x, 3, 4, 1e-6).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::rms_norm", "weight"));
    let e = nn::rms_norm(&mut b, &x, &w4, &x, 4, 4, 1e-6).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::rms_norm", "x"));
    let e = nn::rms_norm(&mut b, &x, &w4, &x, 0, 4, 1e-6).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::rms_norm", "rows"));
    let e = nn::rms_norm(&mut b, &x, &w4, &x, 3, 4, -1.0).unwrap_err();
    assert!(
        matches!(
            &e,
            Error::Ops(vkcompute::ops::OpsError::Param { param: "eps", .. })
        ),
        "{e:?}"
    );
    let e = nn::layer_norm(&mut b, &x, &w4, &w3, &x, 3, 4, 1e-5).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::layer_norm", "bias"));
    let e = nn::silu_mul(&mut b, &x, &w4, &x, 3, 4).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::silu_mul", "up"));
    let e = nn::silu_mul_halves(&mut b, &x, &x.slice(0..6).unwrap(), 3, 2).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::silu_mul_halves", "out"));
    let e = nn::silu_mul_halves(&mut b, &x, &w4, 3, 2).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::silu_mul_halves", "out"));
    let e = nn::argmax(&mut b, &x, &ids, 4, 3).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::argmax", "out"));
    let e = nn::embedding(&mut b, &x, &ids, &x, &ids, 4, 4).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::embedding", "table"));
    let e = nn::embedding(&mut b, &x, &ids, &w4, &ids, 3, 4).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::embedding", "out"));
    // Nothing was recorded.
    assert!(b.is_empty());
    b.submit().unwrap();
    common::assert_clean(&gpu);
}

/// The element type is part of the signature: a `Buffer<F16>` weight for
/// an f32 activation does not compile, so no run-time check is needed.
#[test]
fn element_types_are_fixed_by_the_signature() {
    fn dtype_of<T: NnElement>(_: &vkcompute::Buffer<T>) -> nn::NnDtype {
        T::NN
    }
    let gpu = common::gpu();
    let h = gpu.alloc::<vkcompute::ops::Bf16>(1).unwrap();
    assert_eq!(dtype_of(&h), nn::NnDtype::Bf16);
    assert_eq!(dtype_of(&gpu.alloc::<f32>(1).unwrap()), nn::NnDtype::F32);
}
