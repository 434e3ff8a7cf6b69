//! `ops::linear_normed` (an RMSNorm prologue fused into the skinny linear
//! layer) against a CPU f64 reference of `rms_norm` then `linear`: M in
//! {1, 2, 3, 5, 16, 17, 64}, odd K and N (and K that take the 16-byte
//! loads), f32 / F16 / Bf16 weights, every epilogue, the plan chosen and
//! split-K forced on, the 16-row passes and the tiled fallback past 16
//! rows; the result beside `nn::rms_norm` then `ops::linear`; the bad
//! inputs as typed errors.
//!
//! Error bound, per output: the reference normalises x in f64 with the
//! norm weight g and multiplies with the f32 weights before they were
//! rounded to the stored type. The kernel sums K squares in f32 (relative
//! error at most K·u, u = 2⁻²⁴), divides, adds eps and takes an inverse
//! square root (a few u), then rounds x·scale·g twice: each normalised
//! element is off by at most (K/2 + 8)·u relative, all of a row's in the
//! same direction up to the last 2u. Adding that to the products' own
//! bound (see tests/ops_linear.rs): δ = 1.01·((3K/2 + 8)·u·(1 + u_w) +
//! u_w)·Σ|x̂||w|, x̂ the normalised row; the residual add rounds once more
//! and SiLU·mul propagates δ as in tests/ops_linear.rs. Where the chosen
//! plan is a tensor-core kernel (16-bit weights: past 16 rows on coopmat2
//! adapters, from 2 rows where the streaming kernel applies), which rounds
//! x̂ to f16, δ gains 2⁻¹⁰·(1 + u_w)·Σ|x̂||w|.

mod common;

use vkcompute::ops::{self, nn, Epilogue, LinearPlan, OpsError};
use vkcompute::{Batch, Buffer, Device, Error};

mod linear_support;
use linear_support::{upload_w, Dt, Epi, GpuW};

const EPS: f32 = 1e-6;

/// One layer's inputs, kept for the reference.
struct Case {
    m: usize,
    k: usize,
    n: usize,
    epi: Epi,
    x: Vec<f32>,
    g: Vec<f32>,
    w: Vec<f32>,
    r: Vec<f32>,
}

impl Case {
    fn new(m: usize, k: usize, n: usize, epi: Epi, seed: u64) -> Case {
        let mut rng = common::Rng::new(seed);
        let outs = if epi == Epi::SiluMul { n / 2 } else { n };
        // Rows of different sizes, so a wrong row's scale shows.
        let x = (0..m * k)
            .map(|i| rng.f32() * (1.0 + (i / k) as f32 * 0.75))
            .collect();
        let g = (0..k).map(|_| 0.5 + rng.f32()).collect();
        Case {
            m,
            k,
            n,
            epi,
            x,
            g,
            w: rng.vec_f32(n * k),
            r: rng.vec_f32(m * outs),
        }
    }

    fn outs(&self) -> usize {
        if self.epi == Epi::SiluMul {
            self.n / 2
        } else {
            self.n
        }
    }

    /// RMSNorm of row i in f64.
    fn normed(&self, i: usize) -> Vec<f64> {
        let xr = &self.x[i * self.k..(i + 1) * self.k];
        let ms = xr.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / self.k as f64;
        let s = 1.0 / (ms + f64::from(EPS)).sqrt();
        xr.iter()
            .zip(&self.g)
            .map(|(&v, &g)| f64::from(v) * s * f64::from(g))
            .collect()
    }

    /// The f64 reference and each output's error bound (`x16`: x̂ rounded
    /// to f16 by the tensor-core kernel).
    fn reference(&self, dt: Dt, x16: bool) -> Vec<(f64, f64)> {
        let u = f64::powi(2.0, -24);
        let uw = dt.unit();
        let ux = if x16 { f64::powi(2.0, -10) } else { 0.0 };
        let k = self.k as f64;
        let delta =
            |abs: f64| 1.01 * ((1.5 * k + 8.0) * u * (1.0 + uw) + uw + ux * (1.0 + uw)) * abs;
        let outs = self.outs();
        let mut out = Vec::with_capacity(self.m * outs);
        for i in 0..self.m {
            let xn = self.normed(i);
            let dot = |r: usize| {
                let row = &self.w[r * self.k..(r + 1) * self.k];
                xn.iter().zip(row).fold((0.0, 0.0), |(s, a), (&p, &q)| {
                    let t = p * f64::from(q);
                    (s + t, a + t.abs())
                })
            };
            for j in 0..outs {
                out.push(match self.epi {
                    Epi::None => {
                        let (s, a) = dot(j);
                        (s, delta(a))
                    }
                    Epi::Residual | Epi::ResidualInPlace => {
                        let (s, a) = dot(j);
                        let y = s + f64::from(self.r[i * outs + j]);
                        (y, delta(a) + 1.01 * u * y.abs())
                    }
                    Epi::SiluMul => {
                        let (g, ga) = dot(j);
                        let (v, va) = dot(outs + j);
                        let (dg, dv) = (delta(ga), delta(va));
                        let sg = g / (1.0 + (-g).exp());
                        let y = sg * v;
                        (
                            y,
                            1.1 * dg * (v.abs() + dv) + sg.abs() * dv + 8.0 * u * y.abs(),
                        )
                    }
                });
            }
        }
        out
    }
}

/// A recorded layer: the output and what it was recorded with.
struct Recorded {
    y: Buffer<f32>,
    what: String,
    /// The plan that ran is a tensor-core kernel's (x̂ rounded to f16).
    x16: bool,
    /// Inputs the batch reads (kept until it completes).
    _keep: Vec<Buffer<f32>>,
}

/// Records `c` with `linear_normed_with_plan` (`plan`) or, when `plan` is
/// `None`, `linear_normed`'s own plan.
fn record(gpu: &Device, b: &mut Batch, c: &Case, gw: &GpuW, plan: Option<LinearPlan>) -> Recorded {
    let gx = gpu.upload(&c.x).unwrap();
    let gg = gpu.upload(&c.g).unwrap();
    let gr = gpu.upload(&c.r).unwrap();
    let y = if c.epi == Epi::ResidualInPlace {
        gpu.upload(&c.r).unwrap()
    } else {
        gpu.alloc::<f32>(c.m * c.outs()).unwrap()
    };
    let e = match c.epi {
        Epi::None => Epilogue::None,
        Epi::Residual => Epilogue::Residual(&gr),
        Epi::ResidualInPlace => Epilogue::Residual(&y),
        Epi::SiluMul => Epilogue::SiluMul,
    };
    let (m, k, n) = (c.m as u32, c.k as u32, c.n as u32);
    macro_rules! go {
        ($w:expr) => {
            match plan {
                Some(p) => ops::linear_normed_with_plan(b, &gx, &gg, EPS, $w, &y, m, k, n, e, p),
                None => ops::linear_normed(b, &gx, &gg, EPS, $w, &y, m, k, n, e),
            }
        };
    }
    match gw {
        GpuW::F32(w) => go!(w),
        GpuW::F16(w) => go!(w),
        GpuW::Bf16(w) => go!(w),
    }
    .unwrap();
    let dtype = match gw {
        GpuW::F32(_) => ops::DType::F32,
        GpuW::F16(_) => ops::DType::F16,
        GpuW::Bf16(_) => ops::DType::Bf16,
    };
    let caps = ops::MatmulCaps::of(gpu.info());
    let silu = c.epi == Epi::SiluMul;
    let ran = plan.unwrap_or_else(|| ops::choose_linear(m, k, n, dtype, silu, &caps));
    Recorded {
        what: format!("m={m} k={k} n={n} {:?} plan {plan:?}", c.epi),
        y,
        x16: ran.rounds_x_to_f16(),
        _keep: vec![gx, gg, gr],
    }
}

/// Checks `got` against the reference; panics with the worst output.
fn check(c: &Case, dt: Dt, got: &[f32], what: &str, x16: bool) {
    let want = c.reference(dt, x16);
    assert_eq!(got.len(), want.len(), "{what}");
    let mut worst = (0.0f64, 0usize);
    for (i, (&g, &(w, bound))) in got.iter().zip(&want).enumerate() {
        let ratio = (f64::from(g) - w).abs() / (bound + 1e-30);
        if ratio > worst.0 || ratio.is_nan() {
            worst = (ratio, i);
        }
    }
    let (r, i) = worst;
    assert!(
        r <= 1.0,
        "{dt:?} {what}: y[{i}] = {} but f64 says {} (error {r:.3}× the bound)",
        got[i],
        want[i].0
    );
}

/// (K, N): odd ones (one element per load), and K multiples of 4 and 8.
const SHAPES: [(usize, usize); 5] = [(1, 3), (17, 33), (255, 17), (12, 9), (520, 63)];

fn every_case(dt: Dt) {
    let gpu = common::gpu();
    for m in [1usize, 2, 3, 5, 16, 17, 64] {
        let mut batch = gpu.batch().unwrap();
        let mut cases = Vec::new();
        let mut recs = Vec::new();
        for (si, &(k, n_odd)) in SHAPES.iter().enumerate() {
            for epi in [Epi::None, Epi::Residual, Epi::ResidualInPlace, Epi::SiluMul] {
                let n = if epi == Epi::SiluMul {
                    2 * n_odd
                } else {
                    n_odd
                };
                let c = Case::new(m, k, n, epi, (m * 1000 + si * 10) as u64 + epi as u64);
                let gw = upload_w(&gpu, dt, &c.w);
                // The chosen plan; split-K forced at the streaming kernel's
                // rows per pass (16 past 16 rows: fused, several passes);
                // past 16 rows the tiled fallback at 64-row tiles.
                let rows = [1, 2, 4, 8, 16]
                    .into_iter()
                    .find(|&p| p >= m as u32)
                    .unwrap_or(16);
                let mut plans = vec![
                    None,
                    Some(LinearPlan {
                        rows_per_pass: rows,
                        splits: 3,
                    }),
                ];
                if m > 16 {
                    plans.push(Some(LinearPlan {
                        rows_per_pass: 64,
                        splits: 2,
                    }));
                }
                for plan in plans {
                    recs.push((cases.len(), record(&gpu, &mut batch, &c, &gw, plan)));
                }
                // The batch holds the weights until its work completes.
                drop(gw);
                cases.push(c);
            }
        }
        batch.submit().unwrap();
        for (i, r) in &recs {
            check(&cases[*i], dt, &r.y.download().unwrap(), &r.what, r.x16);
        }
    }
    common::assert_clean(&gpu);
}

#[test]
#[cfg_attr(
    not(feature = "glsl"),
    ignore = "the skinny kernels and their Rust are the same without glsl: the default build runs it"
)]
fn f32_weights_match_the_cpu() {
    every_case(Dt::F32);
}

#[test]
#[cfg_attr(
    not(feature = "glsl"),
    ignore = "the skinny kernels and their Rust are the same without glsl: the default build runs it"
)]
fn f16_weights_match_the_cpu() {
    every_case(Dt::F16);
}

#[test]
#[cfg_attr(
    not(feature = "glsl"),
    ignore = "the skinny kernels and their Rust are the same without glsl: the default build runs it"
)]
fn bf16_weights_match_the_cpu() {
    every_case(Dt::Bf16);
}

/// Narrower workgroups (one K slice, several subgroups sharing each
/// unit's K): the norm's sums of squares come from the parts of K and are
/// added with the products'. Every weight type, 16-byte and single-element
/// loads (K = 2,051), each epilogue; the unit test
/// `the_normed_narrow_test_shapes_share_k_on_lavapipe` pins that these
/// shapes narrow on lavapipe.
#[test]
#[cfg_attr(
    not(feature = "glsl"),
    ignore = "the skinny kernels and their Rust are the same without glsl: the default build runs it"
)]
fn narrow_workgroups_with_the_norm_match_the_cpu() {
    let gpu = common::gpu();
    for dt in [Dt::F32, Dt::F16, Dt::Bf16] {
        let mut batch = gpu.batch().unwrap();
        let mut runs = Vec::new();
        for (k, n_odd) in [(2048usize, 2048usize), (2051, 1025)] {
            for m in [1usize, 2] {
                for epi in [Epi::None, Epi::ResidualInPlace, Epi::SiluMul] {
                    let n = if epi == Epi::SiluMul {
                        n_odd & !1
                    } else {
                        n_odd
                    };
                    let c = Case::new(m, k, n, epi, (m * 31 + k + n) as u64 + epi as u64);
                    let gw = upload_w(&gpu, dt, &c.w);
                    let r = record(&gpu, &mut batch, &c, &gw, None);
                    runs.push((c, r, gw));
                }
            }
        }
        batch.submit().unwrap();
        for (c, r, _gw) in &runs {
            check(c, dt, &r.y.download().unwrap(), &r.what, r.x16);
        }
    }
    common::assert_clean(&gpu);
}

/// Normed 1-row layers whose workgroups number one to two per compute
/// unit run them unnarrowed on the normed subgroup-32 kernel (as
/// Qwen3-4B's q|k|v does on an H200) where subgroups have 32 lanes and the
/// adapter says its unit count: N sized to 1.5 workgroups (of 32 outputs,
/// 16 SiLU·mul pairs) per unit, 16-bit weights, every epilogue.
#[test]
fn one_wave_normed_layers_match_the_cpu() {
    let gpu = common::gpu();
    let (lanes, units) = (gpu.info().subgroup_size, gpu.info().compute_units);
    if lanes != 32 || units == 0 {
        common::skipped(format!(
            "the normed _sg32 kernel needs subgroups of 32 lanes ({lanes} here) and a compute \
             unit count (the adapter says {units})"
        ));
        return;
    }
    let n = 32 * (3 * units as usize / 2);
    for dt in [Dt::F16, Dt::Bf16] {
        let mut batch = gpu.batch().unwrap();
        let mut runs = Vec::new();
        for epi in [Epi::None, Epi::ResidualInPlace, Epi::SiluMul] {
            let c = Case::new(1, 2056, n, epi, n as u64 + epi as u64);
            let gw = upload_w(&gpu, dt, &c.w);
            let r = record(&gpu, &mut batch, &c, &gw, None);
            runs.push((c, r, gw));
        }
        batch.submit().unwrap();
        for (c, r, _gw) in &runs {
            check(c, dt, &r.y.download().unwrap(), &r.what, r.x16);
        }
    }
    common::assert_clean(&gpu);
}

/// The fused layer beside `nn::rms_norm` then `ops::linear` (two
/// dispatches and a barrier), both against the reference, and within the
/// sum of their bounds of each other: Qwen3-like shapes at a reduced
/// width, bf16 weights, the plans ops::linear picks (narrower workgroups
/// at 1 row with N = 512 and K = 2,048 on lavapipe, split-K at 5 rows),
/// and K = 16,384.
#[test]
fn matches_rms_norm_then_linear() {
    let gpu = common::gpu();
    let mut batch = gpu.batch().unwrap();
    let mut runs = Vec::new();
    for (m, k, n, epi) in [
        (1usize, 2048usize, 512usize, Epi::None),
        (2, 2048, 2048, Epi::SiluMul),
        (5, 1024, 96, Epi::Residual),
        (3, 16384, 8, Epi::None),
    ] {
        let c = Case::new(m, k, n, epi, (m * 7 + k + n) as u64);
        let gw = upload_w(&gpu, Dt::Bf16, &c.w);
        let fused = record(&gpu, &mut batch, &c, &gw, None);
        // The two-dispatch form.
        let (gx, gg, gr) = (
            gpu.upload(&c.x).unwrap(),
            gpu.upload(&c.g).unwrap(),
            gpu.upload(&c.r).unwrap(),
        );
        let xn = gpu.alloc::<f32>(m * k).unwrap();
        let y = gpu.alloc::<f32>(m * c.outs()).unwrap();
        let (mu, ku, nu) = (m as u32, k as u32, n as u32);
        nn::rms_norm(&mut batch, &gx, &gg, &xn, mu, ku, EPS).unwrap();
        batch.barrier();
        let e = match epi {
            Epi::Residual => Epilogue::Residual(&gr),
            Epi::SiluMul => Epilogue::SiluMul,
            _ => Epilogue::None,
        };
        let GpuW::Bf16(w) = &gw else {
            unreachable!("uploaded as bf16")
        };
        ops::linear(&mut batch, &xn, w, &y, mu, ku, nu, e).unwrap();
        runs.push((c, fused, y, vec![gx, gg, gr, xn]));
    }
    batch.submit().unwrap();
    for (c, fused, y, _keep) in &runs {
        let a = fused.y.download().unwrap();
        let b = y.download().unwrap();
        check(c, Dt::Bf16, &a, &fused.what, fused.x16);
        check(c, Dt::Bf16, &b, "rms_norm then linear", false);
        for (i, ((&p, &q), &(_, bound))) in a
            .iter()
            .zip(&b)
            .zip(&c.reference(Dt::Bf16, false))
            .enumerate()
        {
            assert!(
                (f64::from(p) - f64::from(q)).abs() <= 2.0 * bound,
                "{}: y[{i}] fused {p}, two dispatches {q}",
                fused.what
            );
        }
    }
    common::assert_clean(&gpu);
}

/// Bad norm inputs are typed errors that name the op and the tensor or
/// parameter, and record nothing; the layer's own checks still apply.
#[test]
fn bad_norm_inputs_are_typed_errors() {
    let gpu = common::gpu();
    let (m, k, n) = (2u32, 8u32, 4u32);
    let x = gpu.upload(&[1.0f32; 16]).unwrap();
    let g = gpu.upload(&[1.0f32; 8]).unwrap();
    let g_short = gpu.upload(&[1.0f32; 7]).unwrap();
    let w = gpu.upload(&[1.0f32; 32]).unwrap();
    let y = gpu.alloc::<f32>(8).unwrap();
    let mut batch = gpu.batch().unwrap();
    let e = ops::linear_normed(
        &mut batch,
        &x,
        &g_short,
        EPS,
        &w,
        &y,
        m,
        k,
        n,
        Epilogue::None,
    )
    .unwrap_err();
    match &e {
        Error::Ops(OpsError::Shape { op, tensor, detail }) => {
            assert_eq!(*op, "ops::linear_normed");
            assert_eq!(*tensor, "norm_weight");
            assert!(detail.contains('7') && detail.contains("k = 8"), "{detail}");
        }
        other => panic!("wrong error: {other:?}"),
    }
    for eps in [0.0f32, -1e-6, f32::NAN, f32::INFINITY] {
        let e = ops::linear_normed(&mut batch, &x, &g, eps, &w, &y, m, k, n, Epilogue::None)
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::Ops(OpsError::Param {
                    op: "ops::linear_normed",
                    param: "eps",
                    ..
                })
            ),
            "eps {eps}: {e:?}"
        );
    }
    // y may not be the norm weight.
    let g_as_y = gpu.alloc::<f32>(8).unwrap();
    // (m, k, n) = (1, 8, 8): x [8], W [64], y and the norm weight [8].
    let x1 = gpu.upload(&[1.0f32; 8]).unwrap();
    let w1 = gpu.upload(&[1.0f32; 64]).unwrap();
    let e = ops::linear_normed(
        &mut batch,
        &x1,
        &g_as_y,
        EPS,
        &w1,
        &g_as_y,
        1,
        8,
        8,
        Epilogue::None,
    );
    assert!(
        matches!(e, Err(Error::Ops(OpsError::Shape { tensor: "y", .. }))),
        "{e:?}"
    );
    // The layer's own checks: m = 0 and a wrong W.
    let e = ops::linear_normed(&mut batch, &x, &g, EPS, &w, &y, 0, k, n, Epilogue::None);
    assert!(matches!(e, Err(Error::OpShape { .. })), "{e:?}");
    let e = ops::linear_normed(&mut batch, &x, &g, EPS, &w1, &y, m, k, n, Epilogue::None);
    assert!(matches!(e, Err(Error::OpShape { .. })), "{e:?}");
    assert_eq!(batch.len(), 0, "a failed call recorded a command");
    drop(batch);
    common::assert_clean(&gpu);
}
