//! `ops::linear` on the tensor cores (past 16 rows with f16 or bf16
//! weights, where the adapter has coopmat2 with block loads): m of 17, 32,
//! 64 and 100, every epilogue, interior and edge blocks, the chosen plan
//! and split-K forced, against an f64 reference of the stored weights.
//! Skipped, with the reason, on adapters without the kernel (lavapipe),
//! where a forced tensor-core plan must be a typed error instead.
//!
//! Error bound, per output: the kernel rounds each x to f16 (relative
//! 2⁻¹¹, 2⁻¹⁰ allowed for either rounding mode), widens each stored weight
//! to f16 exactly (the weights here lie inside f16's normal range) and sums
//! K products in f32: δ = (2⁻¹⁰ + 2·K·2⁻²⁴)·Σ|x||w|. The residual add
//! rounds once more (2⁻²⁴·|y|); SiLU·mul as in ops_linear:
//! 1.1·δ_g·(|v| + δ_v) + |silu(g)|·δ_v + 8·2⁻²⁴·|y|.

mod common;

use vkcompute::ops::{self, DType, Epilogue, LinearPlan, MatmulCaps, LINEAR_TENSOR_TILES};
use vkcompute::{Buffer, Error};

mod linear_support;
use linear_support::{upload_w, Dt, Epi, GpuW};

/// The stored weights' values (f16 or bf16 rounding of `w`).
fn stored(dt: Dt, w: &[f32]) -> Vec<f32> {
    match dt {
        Dt::F16 => w.iter().map(|&v| ops::F16::from_f32(v).to_f32()).collect(),
        Dt::Bf16 => w.iter().map(|&v| ops::Bf16::from_f32(v).to_f32()).collect(),
        Dt::F32 => w.to_vec(),
    }
}

fn dot(x: &[f32], w: &[f32]) -> (f64, f64) {
    x.iter().zip(w).fold((0.0, 0.0), |(s, a), (&p, &q)| {
        let t = f64::from(p) * f64::from(q);
        (s + t, a + t.abs())
    })
}

/// Checks `got` ([m, outs]) against the reference; panics with the worst.
#[allow(clippy::too_many_arguments)]
fn check(
    what: &str,
    x: &[f32],
    w: &[f32],
    r: &[f32],
    (m, k, n): (usize, usize, usize),
    epi: Epi,
    got: &[f32],
) {
    let u = f64::powi(2.0, -24);
    let delta = |abs: f64| (f64::powi(2.0, -10) + 2.0 * k as f64 * u) * abs;
    let outs = if epi == Epi::SiluMul { n / 2 } else { n };
    assert_eq!(got.len(), m * outs, "{what}");
    let mut worst = (0.0f64, 0usize, 0.0f64);
    for i in 0..m {
        let xr = &x[i * k..(i + 1) * k];
        let row = |j: usize| &w[j * k..(j + 1) * k];
        for j in 0..outs {
            let (want, bound) = match epi {
                Epi::None => {
                    let (s, a) = dot(xr, row(j));
                    (s, delta(a))
                }
                Epi::Residual | Epi::ResidualInPlace => {
                    let (s, a) = dot(xr, row(j));
                    let y = s + f64::from(r[i * outs + j]);
                    (y, delta(a) + u * y.abs())
                }
                Epi::SiluMul => {
                    let (g, ga) = dot(xr, row(j));
                    let (v, va) = dot(xr, row(outs + j));
                    let (dg, dv) = (delta(ga), delta(va));
                    let s = g / (1.0 + (-g).exp());
                    let y = s * v;
                    (
                        y,
                        1.1 * dg * (v.abs() + dv) + s.abs() * dv + 8.0 * u * y.abs(),
                    )
                }
            };
            let idx = i * outs + j;
            let ratio = (f64::from(got[idx]) - want).abs() / (bound + 1e-30);
            if ratio > worst.0 || ratio.is_nan() {
                worst = (ratio, idx, want);
            }
        }
    }
    let (ratio, idx, want) = worst;
    assert!(
        ratio <= 1.0,
        "{what}: y[{}][{}] = {} but f64 says {want} (error {ratio:.3}× the bound)",
        idx / outs,
        idx % outs,
        got[idx]
    );
}

#[test]
fn tensor_core_linear_matches_the_reference() {
    let gpu = common::gpu();
    let caps = MatmulCaps::of(gpu.info());
    if !ops::matmul::tensor_applies(17, DType::Bf16, &caps) {
        common::skipped(
            "ops::linear on tensor-core tiles: needs VK_NV_cooperative_matrix2's \
             workgroup-scope f16 shape and cooperativeMatrixBlockLoads",
        );
        return;
    }
    // (K, N): whole 64-deep slices and whole blocks; odd K and N (clamped
    // loads, edge blocks); a K that split-K cuts into uneven layers.
    let shapes = [(256usize, 384usize), (100, 130), (1000, 200)];
    for dt in [Dt::F16, Dt::Bf16] {
        let dtype = if dt == Dt::F16 {
            DType::F16
        } else {
            DType::Bf16
        };
        for m in [17usize, 32, 64, 100] {
            for (si, &(k, n_half)) in shapes.iter().enumerate() {
                for epi in [Epi::None, Epi::Residual, Epi::ResidualInPlace, Epi::SiluMul] {
                    let n = if epi == Epi::SiluMul {
                        2 * n_half
                    } else {
                        n_half
                    };
                    let outs = if epi == Epi::SiluMul { n / 2 } else { n };
                    let mut rng = common::Rng::new((m * 1000 + si * 10) as u64 + epi as u64);
                    let x = rng.vec_f32(m * k);
                    let w = rng.vec_f32(n * k);
                    let r = rng.vec_f32(m * outs);
                    let ws = stored(dt, &w);
                    let gw = upload_w(&gpu, dt, &w);
                    let (mu, ku, nu) = (m as u32, k as u32, n as u32);
                    let chosen = ops::choose_linear(mu, ku, nu, dtype, epi == Epi::SiluMul, &caps);
                    assert_eq!(chosen.rows_per_pass, LINEAR_TENSOR_TILES, "m = {m}");
                    let forced = LinearPlan {
                        rows_per_pass: LINEAR_TENSOR_TILES,
                        splits: 3,
                    };
                    for plan in [None, Some(forced)] {
                        let gx = gpu.upload(&x).unwrap();
                        let gr = gpu.upload(&r).unwrap();
                        let y = if epi == Epi::ResidualInPlace {
                            gpu.upload(&r).unwrap()
                        } else {
                            gpu.alloc::<f32>(m * outs).unwrap()
                        };
                        let e = match epi {
                            Epi::None => Epilogue::None,
                            Epi::Residual => Epilogue::Residual(&gr),
                            Epi::ResidualInPlace => Epilogue::Residual(&y),
                            Epi::SiluMul => Epilogue::SiluMul,
                        };
                        let mut batch = gpu.batch().unwrap();
                        macro_rules! go {
                            ($w:expr) => {
                                match plan {
                                    None => ops::linear(&mut batch, &gx, $w, &y, mu, ku, nu, e),
                                    Some(p) => ops::linear_with_plan(
                                        &mut batch, &gx, $w, &y, mu, ku, nu, e, p,
                                    ),
                                }
                            };
                        }
                        match &gw {
                            GpuW::F16(b) => go!(b),
                            GpuW::Bf16(b) => go!(b),
                            GpuW::F32(b) => go!(b),
                        }
                        .unwrap();
                        batch.submit().unwrap();
                        let what = format!("{dt:?} {epi:?} m={m} k={k} n={n} plan {plan:?}");
                        check(&what, &x, &ws, &r, (m, k, n), epi, &y.download().unwrap());
                    }
                }
            }
        }
    }
    common::assert_clean(&gpu);
}

#[test]
fn a_forced_tensor_core_plan_is_a_typed_error_without_the_kernel() {
    let gpu = common::gpu();
    let caps = MatmulCaps::of(gpu.info());
    let (m, k, n) = (20usize, 8usize, 6usize);
    let x = gpu.upload(&vec![0.5f32; m * k]).unwrap();
    let w = upload_w(&gpu, Dt::Bf16, &vec![0.25f32; n * k]);
    let y: Buffer<f32> = gpu.alloc(m * n).unwrap();
    let GpuW::Bf16(wb) = &w else {
        unreachable!("uploaded as bf16")
    };
    let plan = LinearPlan {
        rows_per_pass: LINEAR_TENSOR_TILES,
        splits: 1,
    };
    let mut batch = gpu.batch().unwrap();
    let r = ops::linear_with_plan(&mut batch, &x, wb, &y, 20, 8, 6, Epilogue::None, plan);
    if ops::matmul::tensor_applies(20, DType::Bf16, &caps) {
        common::skipped(
            "the Unsupported error for tensor-core linear: this adapter has the kernel",
        );
        r.unwrap();
        batch.submit().unwrap();
        assert!(y.download().unwrap().iter().all(|&v| v == 1.0));
    } else {
        match r {
            Err(Error::Unsupported { what, .. }) => {
                assert!(what.contains("cooperativeMatrixBlockLoads"), "{what}")
            }
            other => panic!("want Unsupported, got {other:?}"),
        }
        assert!(batch.is_empty(), "a refused layer recorded nothing");
    }
    // f32 weights never take the tensor-core plan.
    let wf = gpu.upload(&vec![0.25f32; n * k]).unwrap();
    let mut batch = gpu.batch().unwrap();
    match ops::linear_with_plan(&mut batch, &x, &wf, &y, 20, 8, 6, Epilogue::None, plan) {
        Err(Error::OpShape { detail, .. }) => assert!(detail.contains("f16 or bf16"), "{detail}"),
        other => panic!("want OpShape for f32 weights, got {other:?}"),
    }
    common::assert_clean(&gpu);
}
