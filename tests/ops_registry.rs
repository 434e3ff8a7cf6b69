//! The built-in registry: kernels by name, one pipeline per (name,
//! specialization), and the shared-memory variants (used where an adapter
//! lacks subgroup arithmetic) agreeing with the subgroup ones.

mod common;
mod ops_support;

use ops_support::*;
use vkcompute::{ops, Error};

#[test]
fn names_and_unknown_names() {
    let gpu = common::gpu();
    let names = ops::builtin_names();
    for want in [
        "copy",
        "reduce_sg",
        "reduce_wg",
        "softmax_sg",
        "gemv_wg",
        "transpose",
    ] {
        assert!(names.contains(&want), "{want} missing: {names:?}");
    }
    assert!(matches!(
        ops::builtin_kernel(&gpu, "no_such_kernel", &[]),
        Err(Error::InvalidSpirv { .. })
    ));
    let before = gpu.cached_kernels();
    let a = ops::builtin_kernel(&gpu, "ew_unary_f32", &[(0, 2)]).unwrap();
    let b = ops::builtin_kernel(&gpu, "ew_unary_f32", &[(0, 2)]).unwrap();
    assert_eq!(gpu.cached_kernels(), before + 1, "built once");
    assert_eq!(a.label(), b.label());
    let s = ops::registry_stats(&gpu);
    assert_eq!((s.pipelines, s.built, s.hits), (1, 1, 1));
    common::assert_clean(&gpu);
}

/// Runs a reduction kernel variant by name: (sum, max, dot) of x, y.
fn reduce_with(gpu: &vkcompute::Device, name: &str, x: &[f32], y: &[f32]) -> Vec<f32> {
    let n = x.len() as u32;
    let (xs, ys) = (gpu.upload(x).unwrap(), gpu.upload(y).unwrap());
    let mut out = Vec::new();
    for op in 0..3u32 {
        let k = ops::builtin_kernel(gpu, name, &[(0, op)]).unwrap();
        let groups = 7u32;
        let scratch = gpu.upload(&vec![0u32; groups as usize + 1]).unwrap();
        let res = gpu.alloc::<f32>(1).unwrap();
        let pc: Vec<u8> = [n, n / 4].iter().flat_map(|w| w.to_le_bytes()).collect();
        let mut b = gpu.batch().unwrap();
        b.run_configured(
            &k,
            &[&xs, &xs, &ys, &ys, &scratch, &res],
            [groups, 1, 1],
            Some(&pc),
        )
        .unwrap();
        b.submit().unwrap();
        out.push(res.download().unwrap()[0]);
        assert_eq!(scratch.download().unwrap()[0], 0, "the counter is reset");
    }
    out
}

#[test]
fn shared_memory_variants_agree_with_the_subgroup_ones() {
    let gpu = common::gpu();
    let mut rng = common::Rng::new(21);
    let n = 100_003;
    let x = random(&mut rng, n, 2.0);
    let y = random(&mut rng, n, 2.0);
    let wg = reduce_with(&gpu, "reduce_wg", &x, &y);
    let mag: f64 = x.iter().map(|&v| f64::from(v).abs()).sum();
    let exact: f64 = x.iter().map(|&v| f64::from(v)).sum();
    assert!(
        (f64::from(wg[0]) - exact).abs() <= 1e-5 * mag,
        "sum {} vs {exact}",
        wg[0]
    );
    assert_eq!(wg[1], x.iter().copied().fold(f32::NEG_INFINITY, f32::max));
    let dmag: f64 = x
        .iter()
        .zip(&y)
        .map(|(&p, &q)| (f64::from(p) * f64::from(q)).abs())
        .sum();
    let dexact: f64 = x
        .iter()
        .zip(&y)
        .map(|(&p, &q)| f64::from(p) * f64::from(q))
        .sum();
    assert!((f64::from(wg[2]) - dexact).abs() <= 1e-5 * dmag);
    if gpu.info().subgroup_arithmetic {
        let sg = reduce_with(&gpu, "reduce_sg", &x, &y);
        assert_eq!(sg[1], wg[1]);
        assert!((f64::from(sg[0]) - exact).abs() <= 1e-5 * mag);
    } else {
        common::skipped("subgroup arithmetic: the adapter lacks it");
    }

    // Softmax and GEMV, shared-memory variants, by hand.
    let (rows, cols) = (3u32, 1000u32);
    let m = random(&mut rng, (rows * cols) as usize, 5.0);
    let v = random(&mut rng, cols as usize, 1.0);
    let (ms, vs) = (gpu.upload(&m).unwrap(), gpu.upload(&v).unwrap());
    let (so, yo) = (
        gpu.alloc::<f32>(m.len()).unwrap(),
        gpu.alloc::<f32>(rows as usize).unwrap(),
    );
    let soft = ops::builtin_kernel(&gpu, "softmax_wg", &[]).unwrap();
    let gemv = ops::builtin_kernel(&gpu, "gemv_wg", &[]).unwrap();
    // softmax: rows, cols, vec; gemv: m, n, vec, rows per group.
    let pc: Vec<u8> = [rows, cols, 1, 1]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    let mut b = gpu.batch().unwrap();
    b.run_configured(&soft, &[&ms, &ms, &so, &so], [rows, 1, 1], Some(&pc[..12]))
        .unwrap();
    b.run_configured(&gemv, &[&ms, &ms, &vs, &vs, &yo], [rows, 1, 1], Some(&pc))
        .unwrap();
    b.submit().unwrap();
    let got = so.download().unwrap();
    let gy = yo.download().unwrap();
    for (r, row) in m.chunks(cols as usize).enumerate() {
        let mx = row
            .iter()
            .map(|&q| f64::from(q))
            .fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = row.iter().map(|&q| (f64::from(q) - mx).exp()).sum();
        let want: Vec<f64> = row.iter().map(|&q| (f64::from(q) - mx).exp() / s).collect();
        assert_close(
            "softmax_wg",
            &got[r * cols as usize..(r + 1) * cols as usize],
            &want,
            1e-5,
        );
        let w: f64 = row
            .iter()
            .zip(&v)
            .map(|(&p, &q)| f64::from(p) * f64::from(q))
            .sum();
        let mg: f64 = row
            .iter()
            .zip(&v)
            .map(|(&p, &q)| (f64::from(p) * f64::from(q)).abs())
            .sum();
        assert!((f64::from(gy[r]) - w).abs() <= 1e-5 * mg, "gemv_wg row {r}");
    }
    common::assert_clean(&gpu);
}

#[test]
fn element_wise_kernels_stride_over_any_grid() {
    // The launch rule gives one item per invocation up to the grid limit
    // and strides beyond it: run the kernel with a grid far too small by
    // hand and check every element (vec4 part and tail).
    let gpu = common::gpu();
    let n = 10_003u32;
    let x: Vec<f32> = (0..n).map(|i| i as f32 - 5000.0).collect();
    let xs = gpu.upload(&x).unwrap();
    let out = gpu.alloc::<f32>(n as usize).unwrap();
    let relu = ops::builtin_kernel(&gpu, "ew_unary_f32", &[(0, 2)]).unwrap();
    let mut pc = Vec::new();
    for w in [n, n / 4, 0, 0] {
        pc.extend_from_slice(&w.to_le_bytes());
    }
    let mut b = gpu.batch().unwrap();
    b.run_configured(&relu, &[&xs, &xs, &out, &out], [3, 1, 1], Some(&pc))
        .unwrap();
    b.submit().unwrap();
    let got = out.download().unwrap();
    for (i, (&g, &v)) in got.iter().zip(&x).enumerate() {
        assert_eq!(g, v.max(0.0), "element {i}");
    }
    common::assert_clean(&gpu);
}
