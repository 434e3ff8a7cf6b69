//! `ops::linear` on the tensor cores (past 16 rows with f16 or bf16
//! weights, where the adapter has coopmat2 with block loads): m of 17, 32,
//! 64 and 100, every epilogue, interior and edge blocks, the chosen plan
//! and split-K forced, against an f64 reference of the stored weights.
//! Skipped, with the reason, on adapters without the kernel (lavapipe),
//! where a forced tensor-core plan must be a typed error instead.
//!
//! The error bound is `linear_support::tensor`'s.

mod common;

use vkcompute::ops::{self, DType, Epilogue, LinearPlan, MatmulCaps, LINEAR_TENSOR_TILES};
use vkcompute::{Buffer, Error};

mod linear_support;
use linear_support::tensor::{check, stored};
use linear_support::{runs_or_unsupported, upload_w, Dt, Epi, GpuW};

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
                    // Up to 64 rows, where K is whole slices of 64 and the
                    // outputs pieces of 16, the adapter's Khronos shape may
                    // take the layer first (the streaming kernel).
                    let streams =
                        ops::matmul::stream_chosen(mu, ku, nu, dtype, epi == Epi::SiluMul, &caps);
                    let want = if streams && mu >= ops::matmul::WINDOW_MIN_ROWS {
                        ops::LINEAR_TENSOR_WINDOW
                    } else if streams {
                        ops::LINEAR_TENSOR_STREAM
                    } else {
                        LINEAR_TENSOR_TILES
                    };
                    assert_eq!(chosen.rows_per_pass, want, "m = {m}");
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
                        let w = gw.weights();
                        match plan {
                            None => ops::linear(&mut batch, &gx, w, &y, mu, ku, nu, e),
                            Some(p) => {
                                ops::linear_with_plan(&mut batch, &gx, w, &y, mu, ku, nu, e, p)
                            }
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
    let has = ops::matmul::tensor_applies(20, DType::Bf16, &caps);
    let needs = "cooperativeMatrixBlockLoads";
    runs_or_unsupported(r, batch, &y, (has, "tensor-core linear"), 1.0, needs);
    // f32 weights never take the tensor-core plan.
    let wf = gpu.upload(&vec![0.25f32; n * k]).unwrap();
    let mut batch = gpu.batch().unwrap();
    match ops::linear_with_plan(&mut batch, &x, &wf, &y, 20, 8, 6, Epilogue::None, plan) {
        Err(Error::OpShape { detail, .. }) => assert!(detail.contains("f16 or bf16"), "{detail}"),
        other => panic!("want OpShape for f32 weights, got {other:?}"),
    }
    common::assert_clean(&gpu);
}
