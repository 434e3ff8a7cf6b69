//! Reductions (sum, max, dot) against f64 references at lengths 1, 7, 1000
//! and 1 Mi + 3; the same bits on every run; NaN and -inf behaviour; typed
//! errors.
//!
//! Error bounds: the GPU adds in f32 along a fixed tree. Each element passes
//! through at most (elements per invocation) sequential additions plus
//! log2(invocations) tree levels, which for every length here is under 80
//! additions, so |sum - exact| <= 80 * 2^-24 * sum |x_i| < 5e-6 * sum |x_i|
//! (a bound relative to the sum of magnitudes, not to the sum, which may
//! cancel to near zero). The tests use 1e-5 * sum |x_i| (and
//! 1e-5 * sum |a_i b_i| for dot; each product adds one more rounding).
//! Max is exact.

mod common;
mod ops_support;

use ops_support::*;
use vkcompute::{ops, Buffer, Device, Error};

fn reduce(
    gpu: &Device,
    f: impl Fn(&mut vkcompute::Batch, &Buffer<f32>) -> vkcompute::Result<()>,
) -> f32 {
    let out = gpu.alloc::<f32>(1).unwrap();
    let mut b = gpu.batch().unwrap();
    f(&mut b, &out).unwrap();
    b.submit().unwrap();
    out.download().unwrap()[0]
}

#[test]
fn sum_max_dot_match_the_reference() {
    let gpu = common::gpu();
    let mut rng = common::Rng::new(7);
    for n in LENGTHS {
        let x = random(&mut rng, n, 3.0);
        let y = random(&mut rng, n, 3.0);
        let (xs, ys) = (gpu.upload(&x).unwrap(), gpu.upload(&y).unwrap());
        let exact: f64 = x.iter().map(|&v| f64::from(v)).sum();
        let mag: f64 = x.iter().map(|&v| f64::from(v).abs()).sum();
        let s = reduce(&gpu, |b, o| ops::sum(b, &xs, o));
        assert!(
            (f64::from(s) - exact).abs() <= 1e-5 * mag,
            "sum n={n}: got {s}, want {exact}"
        );
        let m = reduce(&gpu, |b, o| ops::max(b, &xs, o));
        let want = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        assert_eq!(m, want, "max n={n}");
        let d = reduce(&gpu, |b, o| ops::dot(b, &xs, &ys, o));
        let exact: f64 = x
            .iter()
            .zip(&y)
            .map(|(&p, &q)| f64::from(p) * f64::from(q))
            .sum();
        let mag: f64 = x
            .iter()
            .zip(&y)
            .map(|(&p, &q)| (f64::from(p) * f64::from(q)).abs())
            .sum();
        assert!(
            (f64::from(d) - exact).abs() <= 1e-5 * mag,
            "dot n={n}: got {d}, want {exact}"
        );
    }
    common::assert_clean(&gpu);
}

#[test]
fn the_same_input_gives_the_same_bits() {
    let gpu = common::gpu();
    let mut rng = common::Rng::new(8);
    let n = (1 << 20) + 3;
    let x = random(&mut rng, n, 1.0);
    let y = random(&mut rng, n, 1.0);
    let (xs, ys) = (gpu.upload(&x).unwrap(), gpu.upload(&y).unwrap());
    // Several reductions in one batch, concurrently, and again in another.
    let run = || {
        let outs: Vec<_> = (0..3).map(|_| gpu.alloc::<f32>(1).unwrap()).collect();
        let mut b = gpu.batch().unwrap();
        ops::sum(&mut b, &xs, &outs[0]).unwrap();
        ops::dot(&mut b, &xs, &ys, &outs[1]).unwrap();
        ops::sum(&mut b, &xs, &outs[2]).unwrap();
        b.submit().unwrap();
        outs.iter()
            .map(|o| o.download().unwrap()[0].to_bits())
            .collect::<Vec<u32>>()
    };
    let first = run();
    assert_eq!(first[0], first[2], "two sums in one batch");
    for _ in 0..3 {
        assert_eq!(run(), first);
    }
    common::assert_clean(&gpu);
}

#[test]
fn nan_and_negative_infinity() {
    let gpu = common::gpu();
    for n in [1usize, 7, 1000, 4099] {
        for at in [0, n / 2, n - 1] {
            let mut x = vec![1.0f32; n];
            x[at] = f32::NAN;
            let xs = gpu.upload(&x).unwrap();
            assert!(
                reduce(&gpu, |b, o| ops::max(b, &xs, o)).is_nan(),
                "max NaN n={n} at {at}"
            );
            assert!(
                reduce(&gpu, |b, o| ops::sum(b, &xs, o)).is_nan(),
                "sum NaN n={n} at {at}"
            );
            // -inf among finite values: max ignores it, sum is -inf.
            x[at] = f32::NEG_INFINITY;
            let xs = gpu.upload(&x).unwrap();
            let want = if n == 1 { f32::NEG_INFINITY } else { 1.0 };
            assert_eq!(reduce(&gpu, |b, o| ops::max(b, &xs, o)), want);
            assert_eq!(reduce(&gpu, |b, o| ops::sum(b, &xs, o)), f32::NEG_INFINITY);
        }
        let xs = gpu.upload(&vec![f32::NEG_INFINITY; n]).unwrap();
        assert_eq!(
            reduce(&gpu, |b, o| ops::max(b, &xs, o)),
            f32::NEG_INFINITY,
            "all -inf"
        );
    }
    common::assert_clean(&gpu);
}

#[test]
fn bad_sizes_are_typed_errors() {
    let gpu = common::gpu();
    let x = gpu.alloc::<f32>(10).unwrap();
    let y = gpu.alloc::<f32>(11).unwrap();
    let two = gpu.alloc::<f32>(2).unwrap();
    let one = gpu.alloc::<f32>(1).unwrap();
    let mut b = gpu.batch().unwrap();
    assert!(matches!(
        ops::sum(&mut b, &x, &two),
        Err(Error::OpShape { .. })
    ));
    assert!(matches!(
        ops::max(&mut b, &x, &two),
        Err(Error::OpShape { .. })
    ));
    assert!(matches!(
        ops::dot(&mut b, &x, &y, &one),
        Err(Error::OpShape { .. })
    ));
    assert!(b.is_empty());
    common::assert_clean(&gpu);
}
