//! Softmax, transpose and GEMV against f64 references; NaN and -inf in
//! softmax; typed errors for bad shapes.
//!
//! Bounds. Softmax: each output is exp(x - max) (a few ulps) times 1/sum;
//! the sum of a row of up to 8,192 elements goes through at most 32
//! sequential additions per invocation and a 256-wide fixed tree, under
//! 300 roundings in all, so 1e-5 relative holds with room. Rows longer than
//! 8,192 add cols/256 sequential (rescaled) terms per invocation: the bound
//! used is max(1e-5, 4 (cols/256 + 300) 2^-24). GEMV: each output is a dot
//! product of n terms; a lane adds every (4 w)-th of them in sequence (w the
//! lanes per row: the subgroup size, or 256 without subgroups), then a tree:
//! |y - exact| <= max(1e-5, 2 (n/(4 w) + 300) 2^-24) * sum |A_ij x_j|.
//! Transpose is exact.

mod common;
mod ops_support;

use ops_support::*;
use vkcompute::{ops, Error};

fn softmax_ref(x: &[f32], cols: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(cols) {
        let m = row
            .iter()
            .map(|&v| f64::from(v))
            .fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = row.iter().map(|&v| (f64::from(v) - m).exp()).sum();
        out.extend(row.iter().map(|&v| (f64::from(v) - m).exp() / s));
    }
    out
}

#[test]
fn softmax_matches_the_reference() {
    let gpu = common::gpu();
    let mut rng = common::Rng::new(11);
    // (rows, cols): every length as one row, a few matrices, rows on both
    // sides of the one-read limit, columns not a multiple of 4.
    let mut shapes: Vec<(u32, u32)> = LENGTHS.iter().map(|&n| (1, n as u32)).collect();
    shapes.extend([
        (3, 7),
        (64, 1000),
        (5, 8192),
        (3, 8193),
        (2, 10_001),
        (2, 12_288),
    ]);
    for (rows, cols) in shapes {
        let n = (rows * cols) as usize;
        let x = random(&mut rng, n, 8.0);
        let (xs, out) = (gpu.upload(&x).unwrap(), gpu.alloc::<f32>(n).unwrap());
        let mut b = gpu.batch().unwrap();
        ops::softmax(&mut b, &xs, &out, rows, cols).unwrap();
        b.submit().unwrap();
        let rel = 1e-5f64.max(4.0 * (f64::from(cols) / 256.0 + 300.0) * 2f64.powi(-24));
        let want = softmax_ref(&x, cols as usize);
        assert_close(
            &format!("softmax {rows}x{cols}"),
            &out.download().unwrap(),
            &want,
            rel,
        );
    }
    common::assert_clean(&gpu);
}

#[test]
fn softmax_nan_and_negative_infinity() {
    let gpu = common::gpu();
    let ninf = f32::NEG_INFINITY;
    for cols in [5u32, 8, 9000] {
        let c = cols as usize;
        // Row 0: a NaN; row 1: some -inf; row 2: only -inf; row 3: ordinary.
        let mut x = vec![0.5f32; 4 * c];
        x[c / 2] = f32::NAN;
        x[c] = ninf;
        x[c + c - 1] = ninf;
        for v in &mut x[2 * c..3 * c] {
            *v = ninf;
        }
        let (xs, out) = (gpu.upload(&x).unwrap(), gpu.alloc::<f32>(4 * c).unwrap());
        let mut b = gpu.batch().unwrap();
        ops::softmax(&mut b, &xs, &out, 4, cols).unwrap();
        b.submit().unwrap();
        let y = out.download().unwrap();
        assert!(y[..c].iter().all(|v| v.is_nan()), "a NaN makes its row NaN");
        let rest = 1.0 / (c - 2) as f64;
        for (i, &v) in y[c..2 * c].iter().enumerate() {
            if i == 0 || i == c - 1 {
                assert_eq!(v, 0.0, "-inf gives 0");
            } else {
                assert!((f64::from(v) - rest).abs() <= 1e-5 * rest, "{v} vs {rest}");
            }
        }
        assert!(
            y[2 * c..3 * c].iter().all(|v| v.is_nan()),
            "a row of -inf is NaN"
        );
        let even = 1.0 / c as f64;
        assert!(y[3 * c..]
            .iter()
            .all(|&v| (f64::from(v) - even).abs() <= 1e-5 * even));
    }
    common::assert_clean(&gpu);
}

#[test]
fn transpose_is_exact() {
    let gpu = common::gpu();
    let mut rng = common::Rng::new(12);
    let long = (1u32 << 20) + 3;
    for (rows, cols) in [
        (1u32, 1u32),
        (1, 7),
        (7, 1),
        (1000, 3),
        (33, 65),
        (1024, 1025),
        (1, long),
        (long, 1),
    ] {
        let n = (rows * cols) as usize;
        let x = random(&mut rng, n, 1.0);
        let (xs, out) = (gpu.upload(&x).unwrap(), gpu.alloc::<f32>(n).unwrap());
        let mut b = gpu.batch().unwrap();
        ops::transpose(&mut b, &xs, &out, rows, cols).unwrap();
        b.submit().unwrap();
        let y = out.download().unwrap();
        for r in 0..rows as usize {
            for c in 0..cols as usize {
                assert_eq!(
                    y[c * rows as usize + r],
                    x[r * cols as usize + c],
                    "{rows}x{cols} at ({r}, {c})"
                );
            }
        }
    }
    common::assert_clean(&gpu);
}

#[test]
fn gemv_matches_the_reference() {
    let gpu = common::gpu();
    let mut rng = common::Rng::new(13);
    let info = gpu.info();
    let lanes = if info.subgroup_arithmetic {
        f64::from(info.subgroup_size)
    } else {
        256.0
    };
    let mut shapes: Vec<(u32, u32)> = LENGTHS.iter().map(|&n| (1, n as u32)).collect();
    shapes.extend([
        (7, 1),
        (1000, 1),
        (7, 7),
        (300, 1000),
        (33, 1027),
        ((1 << 20) + 3, 1),
    ]);
    for (m, n) in shapes {
        let a = random(&mut rng, (m * n) as usize, 1.0);
        let x = random(&mut rng, n as usize, 1.0);
        let (av, xv) = (gpu.upload(&a).unwrap(), gpu.upload(&x).unwrap());
        let y = gpu.alloc::<f32>(m as usize).unwrap();
        let mut b = gpu.batch().unwrap();
        ops::gemv(&mut b, &av, &xv, &y, m, n).unwrap();
        b.submit().unwrap();
        let (mut want, mut mag) = (Vec::new(), Vec::new());
        for row in a.chunks(n as usize) {
            want.push(
                row.iter()
                    .zip(&x)
                    .map(|(&p, &q)| f64::from(p) * f64::from(q))
                    .sum::<f64>(),
            );
            mag.push(
                row.iter()
                    .zip(&x)
                    .map(|(&p, &q)| (f64::from(p) * f64::from(q)).abs())
                    .sum::<f64>(),
            );
        }
        let rel = 1e-5f64.max(2.0 * (f64::from(n) / (4.0 * lanes) + 300.0) * 2f64.powi(-24));
        assert_close_scaled(
            &format!("gemv {m}x{n}"),
            &y.download().unwrap(),
            &want,
            &mag,
            rel,
        );
    }
    common::assert_clean(&gpu);
}

#[test]
fn bad_shapes_are_typed_errors() {
    let gpu = common::gpu();
    let m = gpu.alloc::<f32>(12).unwrap();
    let v3 = gpu.alloc::<f32>(3).unwrap();
    let v4 = gpu.alloc::<f32>(4).unwrap();
    let mut b = gpu.batch().unwrap();
    let is_shape = |r: vkcompute::Result<()>| matches!(r, Err(Error::OpShape { .. }));
    assert!(is_shape(ops::softmax(&mut b, &m, &m, 5, 3)));
    assert!(is_shape(ops::softmax(&mut b, &m, &v4, 3, 4)));
    assert!(is_shape(ops::softmax(&mut b, &m, &m, 0, 12)));
    assert!(is_shape(ops::transpose(&mut b, &m, &v4, 3, 4)));
    assert!(is_shape(ops::transpose(&mut b, &m, &m, 4, 4)));
    assert!(
        is_shape(ops::gemv(&mut b, &m, &v3, &v3, 3, 4)),
        "x must hold n = 4"
    );
    assert!(
        is_shape(ops::gemv(&mut b, &m, &v4, &v4, 3, 4)),
        "y must hold m = 3"
    );
    assert!(
        is_shape(ops::gemv(&mut b, &m, &v4, &v3, 4, 4)),
        "A must hold m x n"
    );
    assert!(is_shape(ops::gemv(&mut b, &m, &v4, &v3, 0, 4)));
    assert!(b.is_empty());
    // The well-formed calls succeed.
    ops::gemv(&mut b, &m, &v4, &v3, 3, 4).unwrap();
    b.barrier(); // softmax in place overwrites what gemv reads
    ops::softmax(&mut b, &m, &m, 3, 4).unwrap();
    b.submit().unwrap();
    common::assert_clean(&gpu);
}
