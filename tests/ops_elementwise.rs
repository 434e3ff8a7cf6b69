//! Element-wise built-ins against f64 references: every op at lengths 1, 7,
//! 1000 and 1 Mi + 3, relative error at most 1e-5; in-place forms; f16
//! storage where the adapter has it; typed errors for mismatched lengths;
//! the registry compiles each kernel once.

mod common;
mod ops_support;

use ops_support::*;
use vkcompute::ops::{self, Binary, Unary, F16};
use vkcompute::Error;

type Ref1 = fn(f64) -> f64;
type Ref2 = fn(f64, f64) -> f64;

fn unary_cases() -> Vec<(Unary, Ref1)> {
    vec![
        (Unary::Copy, |x| x),
        (Unary::Scale(-2.5), |x| -2.5 * x),
        (Unary::Relu, |x| x.max(0.0)),
        (Unary::Sigmoid, sigmoid_ref),
        (Unary::Tanh, f64::tanh),
        (Unary::Swish, |x| x * sigmoid_ref(x)),
        (Unary::Gelu, gelu_ref),
        (Unary::GeluTanh, gelu_tanh_ref),
    ]
}

fn binary_cases() -> Vec<(Binary, Ref2)> {
    vec![
        (Binary::Add, |a, b| a + b),
        (Binary::Sub, |a, b| a - b),
        (Binary::Mul, |a, b| a * b),
        (Binary::Axpy(0.75), |a, b| 0.75 * a + b),
    ]
}

#[test]
fn unary_ops_match_the_f64_reference() {
    let gpu = common::gpu();
    let mut rng = common::Rng::new(1);
    for n in LENGTHS {
        // Wide enough to reach both branches of tanh and gelu's tails.
        let x = random(&mut rng, n, 6.0);
        let xs = gpu.upload(&x).unwrap();
        let cases = unary_cases();
        let outs: Vec<_> = cases.iter().map(|_| gpu.alloc::<f32>(n).unwrap()).collect();
        let mut b = gpu.batch().unwrap();
        for ((op, _), out) in cases.iter().zip(&outs) {
            ops::unary(&mut b, *op, &xs, out).unwrap();
        }
        b.submit().unwrap();
        for ((op, f), out) in cases.iter().zip(&outs) {
            let want: Vec<f64> = x.iter().map(|&v| f(f64::from(v))).collect();
            assert_close(
                &format!("{op:?} n={n}"),
                &out.download().unwrap(),
                &want,
                1e-5,
            );
        }
    }
    common::assert_clean(&gpu);
}

#[test]
fn binary_ops_saxpy_and_fill_match_the_reference() {
    let gpu = common::gpu();
    let mut rng = common::Rng::new(2);
    for n in LENGTHS {
        let a = random(&mut rng, n, 4.0);
        let c = random(&mut rng, n, 4.0);
        let (av, cv) = (gpu.upload(&a).unwrap(), gpu.upload(&c).unwrap());
        let cases = binary_cases();
        let outs: Vec<_> = cases.iter().map(|_| gpu.alloc::<f32>(n).unwrap()).collect();
        let y = gpu.upload(&c).unwrap();
        let filled = gpu.alloc::<f32>(n).unwrap();
        let mut b = gpu.batch().unwrap();
        for ((op, _), out) in cases.iter().zip(&outs) {
            ops::binary(&mut b, *op, &av, &cv, out).unwrap();
        }
        ops::saxpy(&mut b, -1.5, &av, &y).unwrap();
        ops::fill(&mut b, 0.25, &filled).unwrap();
        b.submit().unwrap();
        // add, sub and mul round once (relative 2^-24 of the result); axpy
        // may cancel, so its bound is relative to |alpha a| + |b|.
        for ((op, f), out) in cases.iter().zip(&outs) {
            let want: Vec<f64> = a
                .iter()
                .zip(&c)
                .map(|(&p, &q)| f(f64::from(p), f64::from(q)))
                .collect();
            let got = out.download().unwrap();
            if let Binary::Axpy(alpha) = op {
                let mag: Vec<f64> = a
                    .iter()
                    .zip(&c)
                    .map(|(&p, &q)| f64::from(alpha * p).abs() + f64::from(q).abs())
                    .collect();
                assert_close_scaled(&format!("{op:?} n={n}"), &got, &want, &mag, 1e-5);
            } else {
                assert_close(&format!("{op:?} n={n}"), &got, &want, 1e-5);
            }
        }
        let want: Vec<f64> = a
            .iter()
            .zip(&c)
            .map(|(&p, &q)| -1.5 * f64::from(p) + f64::from(q))
            .collect();
        let mag: Vec<f64> = a
            .iter()
            .zip(&c)
            .map(|(&p, &q)| 1.5 * f64::from(p).abs() + f64::from(q).abs())
            .collect();
        assert_close_scaled(
            &format!("saxpy n={n}"),
            &y.download().unwrap(),
            &want,
            &mag,
            1e-5,
        );
        assert!(filled.download().unwrap().iter().all(|&v| v == 0.25));
    }
    common::assert_clean(&gpu);
}

#[test]
fn in_place_ops_and_slices() {
    let gpu = common::gpu();
    let mut rng = common::Rng::new(3);
    let x = random(&mut rng, 1003, 2.0);
    let buf = gpu.upload(&x).unwrap();
    let mut b = gpu.batch().unwrap();
    ops::relu(&mut b, &buf, &buf).unwrap();
    b.barrier();
    ops::scale(&mut b, 2.0, &buf, &buf).unwrap();
    b.submit().unwrap();
    let want: Vec<f64> = x.iter().map(|&v| 2.0 * f64::from(v.max(0.0))).collect();
    assert_close(
        "relu then scale in place",
        &buf.download().unwrap(),
        &want,
        1e-6,
    );

    // A slice at an aligned offset, with a tail of 3.
    let align = (gpu.info().min_storage_buffer_offset_alignment / 4).max(1) as usize;
    let src = gpu.upload(&x).unwrap();
    let dst = gpu.alloc::<f32>(1003).unwrap();
    let (s, d) = (src.slice(align..).unwrap(), dst.slice(align..).unwrap());
    let mut b = gpu.batch().unwrap();
    ops::tanh(&mut b, &s, &d).unwrap();
    b.submit().unwrap();
    let want: Vec<f64> = x[align..].iter().map(|&v| f64::from(v).tanh()).collect();
    assert_close("tanh on a slice", &d.download().unwrap(), &want, 1e-5);
    common::assert_clean(&gpu);
}

#[test]
fn f16_storage_where_the_adapter_has_it() {
    let gpu = common::gpu();
    let info = gpu.info();
    let a: Vec<F16> = (0..1003)
        .map(|i| F16::from_f32((i as f32 - 500.0) / 97.0))
        .collect();
    let c: Vec<F16> = (0..1003)
        .map(|i| F16::from_f32((i % 13) as f32 / 4.0 - 1.5))
        .collect();
    let (av, cv) = (gpu.upload(&a).unwrap(), gpu.upload(&c).unwrap());
    let (sum, act) = (
        gpu.alloc::<F16>(1003).unwrap(),
        gpu.alloc::<F16>(1003).unwrap(),
    );
    let mut b = gpu.batch().unwrap();
    let r = ops::add(&mut b, &av, &cv, &sum);
    if !(info.float16 && info.storage_buffer16) {
        assert!(matches!(r, Err(Error::Unsupported { .. })), "{r:?}");
        common::skipped("f16 storage: the adapter lacks shaderFloat16 or 16-bit storage");
        return;
    }
    r.unwrap();
    ops::gelu(&mut b, &av, &act).unwrap();
    b.submit().unwrap();
    // The result is rounded to half precision: within 2^-11 relative, or
    // half a subnormal step (2^-25) below 2^-14.
    let f = |v: &[F16]| v.iter().map(|h| h.to_f32()).collect::<Vec<f32>>();
    let (af, cf) = (f(&a), f(&c));
    let want: Vec<f64> = af
        .iter()
        .zip(&cf)
        .map(|(&p, &q)| f64::from(p) + f64::from(q))
        .collect();
    assert_close("f16 add", &f(&sum.download().unwrap()), &want, 1.0 / 2048.0);
    let want: Vec<f64> = af.iter().map(|&p| gelu_ref(f64::from(p))).collect();
    let scale: Vec<f64> = want.iter().map(|w| w.abs() + 2f64.powi(-14)).collect();
    assert_close_scaled(
        "f16 gelu",
        &f(&act.download().unwrap()),
        &want,
        &scale,
        1.0 / 1024.0,
    );
    common::assert_clean(&gpu);
}

#[test]
fn mismatched_lengths_are_typed_errors() {
    let gpu = common::gpu();
    let a = gpu.alloc::<f32>(10).unwrap();
    let b9 = gpu.alloc::<f32>(9).unwrap();
    let mut b = gpu.batch().unwrap();
    let shape = |r: vkcompute::Result<()>| match r {
        Err(Error::OpShape { op, detail }) => format!("{op}: {detail}"),
        other => panic!("expected OpShape, got {other:?}"),
    };
    let e = shape(ops::add(&mut b, &a, &b9, &a));
    assert!(
        e.contains("ops::add") && e.contains("9") && e.contains("10"),
        "{e}"
    );
    shape(ops::mul(&mut b, &a, &a, &b9));
    shape(ops::relu(&mut b, &a, &b9));
    shape(ops::saxpy(&mut b, 1.0, &a, &b9));
    assert!(b.is_empty(), "nothing is recorded on error");
    common::assert_clean(&gpu);
}

#[test]
fn the_registry_builds_each_kernel_once() {
    let gpu = common::gpu();
    let x = gpu.upload(&[1.0f32, -2.0, 3.0]).unwrap();
    let y = gpu.alloc::<f32>(3).unwrap();
    let mut b = gpu.batch().unwrap();
    ops::relu(&mut b, &x, &y).unwrap();
    b.barrier();
    ops::add(&mut b, &x, &x, &y).unwrap();
    b.submit().unwrap();
    let (kernels, stats) = (gpu.cached_kernels(), ops::registry_stats(&gpu));
    assert_eq!(stats.built, 2, "{stats:?}");
    for _ in 0..2 {
        let mut b = gpu.batch().unwrap();
        ops::relu(&mut b, &x, &y).unwrap();
        b.barrier();
        ops::add(&mut b, &x, &x, &y).unwrap();
        b.submit().unwrap();
    }
    assert_eq!(gpu.cached_kernels(), kernels, "no new pipeline");
    let again = ops::registry_stats(&gpu);
    assert_eq!(again.built, 2);
    assert_eq!(again.pipelines, 2);
    assert_eq!(again.hits, stats.hits + 4);
    assert_eq!(y.download().unwrap(), [2.0, -4.0, 6.0]);
    // A different op of the same kernel is another specialization.
    let mut b = gpu.batch().unwrap();
    ops::sigmoid(&mut b, &x, &y).unwrap();
    b.submit().unwrap();
    assert_eq!(ops::registry_stats(&gpu).built, 3);
    assert_eq!(gpu.cached_kernels(), kernels + 1);
    common::assert_clean(&gpu);
}
