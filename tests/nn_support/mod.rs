//! Helpers shared by the transformer-op tests (`ops_nn_*`): the three
//! element types with their host conversions and unit roundoffs, a check
//! that the adapter takes a type, and tolerance checks against f64
//! references.
#![allow(dead_code)]

use vkcompute::ops::nn::NnElement;
use vkcompute::ops::{Bf16, F16};
use vkcompute::{Buffer, Device};

/// An element type the tests run every op at.
pub trait TestElem: NnElement + std::fmt::Debug + PartialEq {
    /// Its name in messages.
    const NAME: &'static str;
    /// Unit roundoff of one rounding to this type (half an ulp, relative).
    const U: f64;
    /// Half the smallest subnormal: the absolute error of one rounding
    /// near zero.
    const TINY: f64;
    /// The nearest value of this type (round to nearest even).
    fn enc(x: f32) -> Self;
    /// Its exact f32 value.
    fn dec(self) -> f32;
}

impl TestElem for f32 {
    const NAME: &'static str = "f32";
    const U: f64 = 1.0 / (1u64 << 24) as f64;
    const TINY: f64 = 1e-45;
    fn enc(x: f32) -> Self {
        x
    }
    fn dec(self) -> f32 {
        self
    }
}

impl TestElem for F16 {
    const NAME: &'static str = "f16";
    const U: f64 = 1.0 / 2048.0;
    const TINY: f64 = 3.0e-8;
    fn enc(x: f32) -> Self {
        F16::from_f32(x)
    }
    fn dec(self) -> f32 {
        self.to_f32()
    }
}

impl TestElem for Bf16 {
    const NAME: &'static str = "bf16";
    const U: f64 = 1.0 / 256.0;
    const TINY: f64 = 1e-40;
    fn enc(x: f32) -> Self {
        Bf16(bf16_from_f32(x))
    }
    fn dec(self) -> f32 {
        f32::from_bits(u32::from(self.0) << 16)
    }
}

/// bf16 bits of `x`, round to nearest even (NaN stays NaN).
pub fn bf16_from_f32(x: f32) -> u16 {
    let u = x.to_bits();
    if x.is_nan() {
        return ((u >> 16) | 0x40) as u16;
    }
    ((u + 0x7fff + ((u >> 16) & 1)) >> 16) as u16
}

/// Whether `gpu` runs the ops on `T`; says `skipped: ...` when not.
pub fn takes<T: TestElem>(gpu: &Device) -> bool {
    if T::NAME == "f32" || gpu.info().storage_buffer16 {
        return true;
    }
    crate::common::skipped(format!(
        "{} tensors: the adapter lacks storageBuffer16BitAccess",
        T::NAME
    ));
    false
}

/// `n` values uniform in (-scale, scale), already representable in `T`
/// (so the f64 reference sees exactly what the GPU reads), as `T` and as f32.
pub fn inputs<T: TestElem>(
    rng: &mut crate::common::Rng,
    n: usize,
    scale: f32,
) -> (Vec<T>, Vec<f32>) {
    let t: Vec<T> = (0..n).map(|_| T::enc(rng.f32() * scale)).collect();
    let f = t.iter().map(|&v| v.dec()).collect();
    (t, f)
}

/// Downloads a buffer of `T` as f32.
pub fn download<T: TestElem>(b: &Buffer<T>) -> Vec<f32> {
    b.download().unwrap().into_iter().map(T::dec).collect()
}

/// Fails unless `|got[i] - want[i]| <= rel * |want[i]| + abs[i]` for every
/// `i`, naming the first index that is not.
pub fn assert_within(what: &str, got: &[f32], want: &[f64], rel: f64, abs: &dyn Fn(usize) -> f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(g) - w).abs();
        let bound = rel * w.abs() + abs(i);
        assert!(
            err <= bound || (g.is_nan() && w.is_nan()),
            "{what}: [{i}] = {g}, want {w} (error {err:e} > bound {bound:e})"
        );
    }
}

/// The largest `|got[i] - want[i]|`.
pub fn max_err(got: &[f32], want: &[f64]) -> f64 {
    got.iter()
        .zip(want)
        .map(|(&g, &w)| (f64::from(g) - w).abs())
        .fold(0.0, f64::max)
}

/// Runs `$f::<T>(&gpu)` for f32, F16 and Bf16.
#[macro_export]
macro_rules! each_dtype {
    ($gpu:expr, $f:ident) => {{
        $f::<f32>($gpu);
        $f::<vkcompute::ops::F16>($gpu);
        $f::<vkcompute::ops::Bf16>($gpu);
    }};
}

/// The `Error::Ops(OpsError::Shape)` of a failed call: its (op, tensor),
/// with the message checked to name both.
pub fn shape_error(e: vkcompute::Error) -> (&'static str, &'static str) {
    let msg = e.to_string();
    match e {
        vkcompute::Error::Ops(vkcompute::ops::OpsError::Shape { op, tensor, .. }) => {
            assert!(msg.contains(op) && msg.contains(tensor), "{msg}");
            (op, tensor)
        }
        other => panic!("expected an OpsError::Shape, got {other:?}"),
    }
}

/// Decode attention in f64 (one query per head against a `[batch, kv_heads,
/// max_seq, dim]` cache, lengths `lens`), with (max |v| over the rows used)
/// per output, the bound's scale.
pub fn decode_ref(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    lens: &[u32],
    s: vkcompute::ops::nn::DecodeShape,
    scale: f32,
) -> (Vec<f64>, Vec<f64>) {
    let (hq, hkv, d, smax) = (
        s.q_heads as usize,
        s.kv_heads as usize,
        s.head_dim as usize,
        s.max_seq as usize,
    );
    let mut out = Vec::new();
    let mut vmax = Vec::new();
    for (b, &len) in lens.iter().enumerate() {
        let n = (len as usize).min(smax);
        for h in 0..hq {
            let kvh = h / (hq / hkv);
            let qr = &q[(b * hq + h) * d..][..d];
            let base = (b * hkv + kvh) * smax * d;
            let sc: Vec<f64> = (0..n)
                .map(|p| {
                    let kr = &k[base + p * d..][..d];
                    qr.iter()
                        .zip(kr)
                        .map(|(&a, &c)| f64::from(a) * f64::from(c))
                        .sum::<f64>()
                        * f64::from(scale)
                })
                .collect();
            let m = sc.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let w: Vec<f64> = sc.iter().map(|&x| (x - m).exp()).collect();
            let total: f64 = w.iter().sum();
            let mut vm: f64 = 0.0;
            for j in 0..d {
                let mut a = 0.0;
                for (p, &wp) in w.iter().enumerate() {
                    let x = f64::from(v[base + p * d + j]);
                    a += wp * x;
                    vm = vm.max(x.abs());
                }
                out.push(if n == 0 { 0.0 } else { a / total });
            }
            vmax.extend(std::iter::repeat(vm).take(d));
        }
    }
    (out, vmax)
}
