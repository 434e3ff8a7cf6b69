//! `ops::linear_f16` (a linear layer on f16 operands with f32
//! accumulation) against an f64 reference, with each epilogue: none, a
//! residual from another buffer, a residual added in place, SiLU·mul of a
//! merged gate|up weight; odd shapes (1, 3, 70 and 130 rows; K 5 to 200;
//! outputs 6 to 256); and its typed errors. On an adapter with
//! workgroup-scope cooperative matrices the residual runs fused into the
//! tensor-core kernel (one test says which kernel each case took);
//! elsewhere, and for SiLU·mul, the product and the epilogue op.
//!
//! Bound: the inputs are multiples of 1/64 in [-1, 1), exact in f16, so
//! every product is exact in f32 and only the f32 sums round: at most
//! 1e-5 of the sum of |x·w| over K, plus 1e-5 of the result (the
//! residual's add, SiLU's exponential).

mod common;

use vkcompute::ops::{self, BatchedShape, Epilogue, MatmulCaps};
use vkcompute::{Device, Error};

/// x·Wᵀ in f64, and the sums of |x·w| (the bound's scale), `[m, n]`.
fn product(x: &[f64], w: &[f64], m: usize, k: usize, n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut p = vec![0.0; m * n];
    let mut s = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            for t in 0..k {
                let v = x[i * k + t] * w[j * k + t];
                p[i * n + j] += v;
                s[i * n + j] += v.abs();
            }
        }
    }
    (p, s)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Epi {
    None,
    Residual,
    InPlace,
    Silu,
}

fn check(what: &str, got: &[f32], want: &[f64], scale: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, ((&g, &w), &s)) in got.iter().zip(want).zip(scale).enumerate() {
        let bound = 1e-5 * s + 1e-5 * w.abs() + 1e-30;
        assert!(
            (f64::from(g) - w).abs() <= bound,
            "{what}: element {i}: {g} against {w} (bound {bound:e})"
        );
    }
}

fn run_case(gpu: &Device, (m, k, n): (u32, u32, u32), epi: Epi) {
    let (mu, ku, nu) = (m as usize, k as usize, n as usize);
    let mut rng = common::Rng::new(u64::from(m * 31 + k * 7 + n));
    let (xb, x) = rng.exact_f16(mu * ku);
    let (wb, w) = rng.exact_f16(nu * ku);
    let (p, s) = product(&x, &w, mu, ku, nu);
    let r: Vec<f32> = (0..mu * nu).map(|i| (i % 13) as f32 - 6.0).collect();
    let (gx, gw) = (gpu.upload(&xb).unwrap(), gpu.upload(&wb).unwrap());
    let outs = if epi == Epi::Silu { nu / 2 } else { nu };
    let y = gpu.upload(&vec![-7.0f32; mu * outs]).unwrap();
    let gr = gpu.upload(&r).unwrap();
    let mut b = gpu.batch().unwrap();
    if epi == Epi::InPlace {
        b.write(&y, 0, &r).unwrap();
    }
    let e = match epi {
        Epi::None => Epilogue::None,
        Epi::Residual => Epilogue::Residual(&gr),
        Epi::InPlace => Epilogue::Residual(&y),
        Epi::Silu => Epilogue::SiluMul,
    };
    ops::linear_f16(&mut b, &gx, &gw, &y, m, k, n, e).unwrap();
    b.submit().unwrap();
    let got = y.download().unwrap();
    let what = format!("linear_f16 {m}x{k}x{n} {epi:?}");
    let (want, scale): (Vec<f64>, Vec<f64>) = match epi {
        Epi::None => (p.clone(), s.clone()),
        Epi::Residual | Epi::InPlace => (
            p.iter().zip(&r).map(|(a, &b)| a + f64::from(b)).collect(),
            s.clone(),
        ),
        Epi::Silu => (0..mu * outs)
            .map(|o| {
                let (i, j) = (o / outs, o % outs);
                let (g, u) = (p[i * nu + j], p[i * nu + outs + j]);
                let (sg, su) = (s[i * nu + j], s[i * nu + outs + j]);
                let silu = g / (1.0 + (-g).exp());
                (silu * u, 1.1 * u.abs() * sg + silu.abs() * su)
            })
            .unzip(),
    };
    check(&what, &got, &want, &scale);
    // The check can fail: without the epilogue the result disagrees.
    if matches!(epi, Epi::Residual | Epi::InPlace) {
        let bare: Vec<f32> = p.iter().map(|&v| v as f32).collect();
        let off = bare
            .iter()
            .zip(&want)
            .any(|(&g, &w)| (f64::from(g) - w).abs() > 0.5);
        assert!(off, "{what}: the product alone meets the reference");
    }
}

const SHAPES: [(u32, u32, u32); 5] = [
    (1, 5, 6),
    (3, 200, 10),
    (70, 72, 130),
    (130, 64, 256),
    (130, 130, 66),
];

#[test]
fn every_epilogue_matches_the_reference() {
    let gpu = common::gpu();
    if !gpu.info().storage_buffer16 {
        common::skipped("f16 operands need storageBuffer16BitAccess");
        return;
    }
    for shape in SHAPES {
        for epi in [Epi::None, Epi::Residual, Epi::InPlace, Epi::Silu] {
            run_case(&gpu, shape, epi);
        }
    }
    common::assert_clean(&gpu);
}

/// Which kernel each residual case took: the residual fused into the
/// tensor-core product where the adapter has workgroup-scope cooperative
/// matrices (SiLU·mul runs as the product and a pass everywhere).
#[test]
fn residuals_fuse_where_the_adapter_has_the_tensor_cores() {
    let gpu = common::gpu();
    let caps = MatmulCaps::of(gpu.info());
    if caps.coopmat2_granularity.is_none() {
        common::skipped(
            "fused f16 residuals: the adapter lacks VK_NV_cooperative_matrix2's \
             workgroup-scope f16 shape (the cases ran the product, then the add)",
        );
        return;
    }
    for (m, k, n) in SHAPES {
        let shape = BatchedShape::packed(1, m, k, n).with_b_transposed();
        let name = ops::batched_tile(&shape, &caps).and_then(|t| ops::residual_kernel(&t));
        let name = name.unwrap_or_else(|| panic!("{m}x{k}x{n}: the residual is not fused"));
        println!("linear_f16 {m}x{k}x{n} residual: {name}");
    }
}

#[test]
fn bad_shapes_are_typed_errors() {
    let gpu = common::gpu();
    if !gpu.info().storage_buffer16 {
        common::skipped("f16 operands need storageBuffer16BitAccess");
        return;
    }
    let x = gpu.alloc::<u16>(4 * 8).unwrap();
    let w = gpu.alloc::<u16>(6 * 8).unwrap();
    let y = gpu.alloc::<f32>(4 * 6).unwrap();
    let mut b = gpu.batch().unwrap();
    let shape = |e: Error| match e {
        Error::MatmulShape { detail, .. } => detail,
        other => panic!("not a shape error: {other:?}"),
    };
    let e = ops::linear_f16(&mut b, &x, &w, &y, 0, 8, 6, Epilogue::None).unwrap_err();
    assert!(shape(e).contains("at least 1"));
    let e = ops::linear_f16(&mut b, &x, &w, &y, 4, 8, 5, Epilogue::SiluMul).unwrap_err();
    assert!(shape(e).contains("even n"));
    let e = ops::linear_f16(&mut b, &x, &w, &y, 5, 8, 6, Epilogue::None).unwrap_err();
    assert!(shape(e).contains("x holds 32"));
    let short = gpu.alloc::<f32>(5).unwrap();
    let e = ops::linear_f16(&mut b, &x, &w, &y, 4, 8, 6, Epilogue::Residual(&short)).unwrap_err();
    assert!(shape(e).contains("r holds 5"));
    let e = ops::linear_f16(&mut b, &x, &w, &short, 4, 8, 6, Epilogue::None).unwrap_err();
    assert!(shape(e).contains("y holds 5"));
    let alias = y.reinterpret::<u16>().unwrap();
    let e = ops::linear_f16(&mut b, &alias, &w, &y, 4, 6, 6, Epilogue::None).unwrap_err();
    assert!(shape(e).contains("same buffer"));
    assert!(b.is_empty());
    b.submit().unwrap();
    common::assert_clean(&gpu);
}
