//! `ops::convert` between f32, F16 and Bf16 (all nine pairs) bit for bit
//! against the host's conversions (`F16::from_f32`, `Bf16::from_f32`, and
//! exact widening) on special values (signed zeros, infinities, NaN,
//! overflow, half subnormals, rounding ties) and random ones, every bit
//! pattern of the 16-bit sources, and slices whose lengths leave a tail
//! past the kernel's groups of 8; and `ops::increment` on u32 counters;
//! with their typed errors.

mod common;

use vkcompute::ops::nn::NnElement;
use vkcompute::ops::{self, Bf16, F16};
use vkcompute::{Device, Error};

/// Host conversions of an element type.
trait Host: NnElement + std::fmt::Debug {
    fn from_f32(x: f32) -> Self;
    fn to_f32(self) -> f32;
}

impl Host for f32 {
    fn from_f32(x: f32) -> Self {
        x
    }
    fn to_f32(self) -> f32 {
        self
    }
}

impl Host for F16 {
    fn from_f32(x: f32) -> Self {
        F16::from_f32(x)
    }
    fn to_f32(self) -> f32 {
        F16::to_f32(self)
    }
}

impl Host for Bf16 {
    fn from_f32(x: f32) -> Self {
        Bf16::from_f32(x)
    }
    fn to_f32(self) -> f32 {
        Bf16::to_f32(self)
    }
}

/// Values that exercise every branch of the narrowing: signed zeros,
/// infinities, NaN, the half's overflow boundary, its subnormals and
/// underflow, ties at both widths, and 1000 random magnitudes.
fn inputs() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -2.5,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        65504.0,
        65519.0,
        65520.0,
        1e9,
        6.0e-5,
        5.96e-8,
        2.98e-8,
        1e-10,
        f32::from_bits(0x3f80_1000), // a half tie
        f32::from_bits(0x3f81_8000), // a bf16 tie, odd
        f32::from_bits(0x3f80_8000), // a bf16 tie, even
        f32::MIN_POSITIVE,
        f32::MAX,
    ];
    let mut rng = common::Rng::new(42);
    for _ in 0..1000 {
        let m = rng.f32();
        let e = (rng.below(40) as i32) - 28;
        v.push(m * 2f32.powi(e));
    }
    v
}

fn same_bits(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

/// Converts `xs` to `D` on the GPU and on the host; they must agree bit
/// for bit (NaN for NaN).
fn converts_as_the_host<S: Host, D: Host>(gpu: &Device, xs: &[S]) {
    let x = gpu.upload(xs).unwrap();
    let y = gpu.alloc::<D>(xs.len()).unwrap();
    let mut b = gpu.batch().unwrap();
    ops::convert(&mut b, &x, &y).unwrap();
    b.submit().unwrap();
    let got = y.download().unwrap();
    for (i, (s, g)) in xs.iter().zip(&got).enumerate() {
        let want = D::from_f32(s.to_f32());
        assert!(
            same_bits(g.to_f32(), want.to_f32()),
            "{} -> {}: element {i} ({:?}): got {g:?}, want {want:?}",
            std::any::type_name::<S>(),
            std::any::type_name::<D>(),
            s.to_f32()
        );
    }
}

/// `inputs()`, first rounded to `S`, converted to `D`.
fn pair<S: Host, D: Host>(gpu: &Device) {
    let xs: Vec<S> = inputs().into_iter().map(S::from_f32).collect();
    converts_as_the_host::<S, D>(gpu, &xs);
}

#[test]
fn all_nine_pairs_match_the_host_bit_for_bit() {
    let gpu = common::gpu();
    if !gpu.info().storage_buffer16 {
        pair::<f32, f32>(&gpu);
        common::skipped("16-bit pairs need storageBuffer16BitAccess");
        return;
    }
    pair::<f32, f32>(&gpu);
    pair::<f32, F16>(&gpu);
    pair::<f32, Bf16>(&gpu);
    pair::<F16, f32>(&gpu);
    pair::<F16, F16>(&gpu);
    pair::<F16, Bf16>(&gpu);
    pair::<Bf16, f32>(&gpu);
    pair::<Bf16, F16>(&gpu);
    pair::<Bf16, Bf16>(&gpu);
    common::assert_clean(&gpu);
}

/// The elements past which `ops::convert` takes 16-byte groups: one per
/// invocation the adapter holds at once (compute units × invocations per
/// unit, 65,536 where the adapter does not say).
fn wave(gpu: &Device) -> usize {
    let i = gpu.info();
    match i.compute_units as usize * i.max_threads_per_compute_unit as usize {
        0 => 65_536,
        w => w,
    }
}

/// Every 16-bit pattern of `S` (element i has bits i % 65,536) converted to
/// `D`, the patterns repeated past [`wave`] so that the conversion takes
/// its 16-byte groups.
fn every_pattern<S: Host, D: Host>(gpu: &Device, from_bits: impl Fn(u16) -> S) {
    let reps = wave(gpu) / 65_536 + 1;
    let xs: Vec<S> = (0..reps * 65_536).map(|i| from_bits(i as u16)).collect();
    converts_as_the_host::<S, D>(gpu, &xs);
}

#[test]
fn every_16_bit_pattern_converts_as_the_host_does() {
    let gpu = common::gpu();
    if !gpu.info().storage_buffer16 {
        common::skipped("16-bit sources need storageBuffer16BitAccess");
        return;
    }
    every_pattern::<Bf16, F16>(&gpu, Bf16);
    every_pattern::<Bf16, f32>(&gpu, Bf16);
    every_pattern::<Bf16, Bf16>(&gpu, Bf16);
    every_pattern::<F16, Bf16>(&gpu, F16);
    every_pattern::<F16, f32>(&gpu, F16);
    every_pattern::<F16, F16>(&gpu, F16);
    common::assert_clean(&gpu);
}

/// Converts `x[at..at + len]` into `y[at..at + len]` of buffers of `total`
/// elements; the elements outside the slice keep their sentinel.
fn slice_case<S: Host, D: Host>(gpu: &Device, total: usize, at: usize, len: usize) {
    let all = inputs();
    let xs: Vec<S> = (0..total)
        .map(|i| S::from_f32(all[i % all.len()]))
        .collect();
    let sentinel = D::from_f32(-7.0);
    let x = gpu.upload(&xs).unwrap();
    let y = gpu.upload(&vec![sentinel; total]).unwrap();
    let mut b = gpu.batch().unwrap();
    ops::convert(
        &mut b,
        &x.slice(at..at + len).unwrap(),
        &y.slice(at..at + len).unwrap(),
    )
    .unwrap();
    b.submit().unwrap();
    let got = y.download().unwrap();
    for (i, g) in got.iter().enumerate() {
        let want = if (at..at + len).contains(&i) {
            D::from_f32(xs[i].to_f32())
        } else {
            sentinel
        };
        assert!(
            same_bits(g.to_f32(), want.to_f32()),
            "{} -> {} over [{at}, {}) of {total}: element {i}: got {g:?}, want {want:?}",
            std::any::type_name::<S>(),
            std::any::type_name::<D>(),
            at + len
        );
    }
}

#[test]
fn slices_with_tails_past_the_groups_of_eight() {
    let gpu = common::gpu();
    // Slices start 16 to 64 bytes in (at multiples of the adapter's offset
    // alignment, 16 bytes or more on every adapter this runs on, for both
    // element sizes); lengths with no group of 8, whole groups, and
    // groups with a tail of 1 to 7: past the adapter's wave (16-byte
    // groups), and short ones (element by element).
    let w = wave(&gpu);
    let lens = [1usize, 5, 23, 1003, w + 1, w + 7, w + 8, w + 16, w + 23];
    let total = w + 1100;
    for len in lens {
        slice_case::<f32, f32>(&gpu, total, 4, len);
    }
    if !gpu.info().storage_buffer16 {
        common::skipped("16-bit slices need storageBuffer16BitAccess");
        return;
    }
    for len in lens {
        slice_case::<f32, F16>(&gpu, total, 8, len);
        slice_case::<f32, Bf16>(&gpu, total, 16, len);
        slice_case::<F16, f32>(&gpu, total, 8, len);
        slice_case::<Bf16, F16>(&gpu, total, 16, len);
        slice_case::<Bf16, f32>(&gpu, total, 8, len);
        slice_case::<F16, Bf16>(&gpu, total, 16, len);
    }
    common::assert_clean(&gpu);
}

#[test]
fn convert_works_on_slices() {
    let gpu = common::gpu();
    let x = gpu
        .upload(&[1.5f32, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5])
        .unwrap();
    let y = gpu.upload(&[0.0f32; 8]).unwrap();
    let mut b = gpu.batch().unwrap();
    ops::convert(&mut b, &x.slice(4..8).unwrap(), &y.slice(0..4).unwrap()).unwrap();
    b.submit().unwrap();
    assert_eq!(
        y.download().unwrap(),
        [5.5, 6.5, 7.5, 8.5, 0.0, 0.0, 0.0, 0.0]
    );
    common::assert_clean(&gpu);
}

#[test]
fn convert_refuses_bad_shapes() {
    let gpu = common::gpu();
    let x = gpu.upload(&[1.0f32; 8]).unwrap();
    let y = gpu.alloc::<f32>(7).unwrap();
    let mut b = gpu.batch().unwrap();
    let e = ops::convert(&mut b, &x, &y).unwrap_err();
    assert!(
        matches!(
            e,
            Error::OpShape {
                op: "ops::convert",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("x has 8 elements and y 7"), "{e}");
    let e = ops::convert(&mut b, &x.slice(0..4).unwrap(), &x.slice(2..6).unwrap()).unwrap_err();
    assert!(e.to_string().contains("overlaps"), "{e}");
    b.submit().unwrap();
    common::assert_clean(&gpu);
}

#[test]
fn increment_adds_in_place_and_wraps() {
    let gpu = common::gpu();
    let x = gpu.upload(&[0u32, 5, u32::MAX, 7, 9]).unwrap();
    let mut b = gpu.batch().unwrap();
    ops::increment(&mut b, &x, 1).unwrap();
    b.barrier();
    ops::increment(&mut b, &x.slice(4..5).unwrap(), 10).unwrap();
    b.submit().unwrap();
    assert_eq!(x.download().unwrap(), [1, 6, 0, 8, 20]);
    let big: Vec<u32> = (0..100_000).collect();
    let x = gpu.upload(&big).unwrap();
    let mut b = gpu.batch().unwrap();
    ops::increment(&mut b, &x, 3).unwrap();
    b.submit().unwrap();
    let got = x.download().unwrap();
    assert!(got.iter().enumerate().all(|(i, &v)| v == i as u32 + 3));
    common::assert_clean(&gpu);
}
