//! `ops::linear` streaming W through the tensor cores
//! ([`ops::LINEAR_TENSOR_STREAM`] and [`ops::LINEAR_TENSOR_WINDOW`]: f16
//! or bf16 weights, up to 64 rows, on adapters with the Khronos
//! cooperative matrices' f16 shape): every workgroup size (16 and 32 rows
//! of x over a span, 32 and 64 through the window, full and partial), every
//! epilogue, outputs that leave subgroups and workgroups without rows of
//! W, the plan's K layers and more (in place with K layers: added into y
//! with f32 atomic adds where the adapter has them), against an f64
//! reference of the stored weights (the bound of `linear_support::tensor`:
//! x is rounded to f16).
//! Skipped, with the reason, on adapters without the kernel (lavapipe),
//! where a forced plan must be a typed error instead; shapes the kernel
//! does not take are typed errors everywhere.

mod common;

use vkcompute::ops::{
    self, DType, Epilogue, LinearPlan, MatmulCaps, LINEAR_TENSOR_STREAM, LINEAR_TENSOR_WINDOW,
};
use vkcompute::{Buffer, Error};

mod linear_support;
use linear_support::tensor::{check, stored};
use linear_support::{runs_or_unsupported, upload_w, Dt, Epi, GpuW};

fn plan(splits: u32) -> LinearPlan {
    LinearPlan {
        rows_per_pass: LINEAR_TENSOR_STREAM,
        splits,
    }
}

fn window(splits: u32) -> LinearPlan {
    LinearPlan {
        rows_per_pass: LINEAR_TENSOR_WINDOW,
        splits,
    }
}

#[test]
fn streaming_tensor_core_linear_matches_the_reference() {
    let gpu = common::gpu();
    let caps = MatmulCaps::of(gpu.info());
    if !ops::matmul::stream_applies(4, 256, 256, DType::Bf16, false, &caps) {
        common::skipped(
            "ops::linear streaming on tensor cores: needs VK_KHR_cooperative_matrix's \
             16×16×16 f16 shape and 32-lane subgroups",
        );
        return;
    }
    // (K, outputs): one 128-deep step and 48 outputs (subgroups without
    // rows); three steps, 272 outputs (a second workgroup holding one
    // piece of 16, a subgroup with one group of rows); a K past one span
    // (896 deep at 16 rows, 384 at 32) that the layers cut unevenly.
    // The span plan from 33 rows and the window plan at every row count
    // run the window form.
    let shapes = [(128usize, 48usize), (384, 272), (1152, 160)];
    let cases = [
        (false, vec![1usize, 3, 16, 17, 32, 33, 64]),
        (true, vec![1, 17, 32, 48, 64]),
    ];
    for (dt, (win, ms)) in [Dt::F16, Dt::Bf16]
        .into_iter()
        .flat_map(|d| cases.iter().map(move |c| (d, c)))
    {
        for &m in ms {
            for (si, &(k, outs)) in shapes.iter().enumerate() {
                for epi in [Epi::None, Epi::Residual, Epi::ResidualInPlace, Epi::SiluMul] {
                    let n = if epi == Epi::SiluMul { 2 * outs } else { outs };
                    let mut rng = common::Rng::new((m * 1000 + si * 10) as u64 + epi as u64);
                    let x = rng.vec_f32(m * k);
                    let w = rng.vec_f32(n * k);
                    let r = rng.vec_f32(m * outs);
                    let ws = stored(dt, &w);
                    let gw = upload_w(&gpu, dt, &w);
                    let (mu, ku, nu) = (m as u32, k as u32, n as u32);
                    let silu = epi == Epi::SiluMul;
                    let own = if *win {
                        ops::matmul::window_splits(mu, ku, nu, silu, &caps)
                    } else {
                        ops::matmul::stream_splits(mu, ku, nu, silu, &caps)
                    };
                    let tries = if *win {
                        vec![1, own, own + 2]
                    } else {
                        vec![own, own + 2]
                    };
                    for splits in tries {
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
                        let p = if *win { window(splits) } else { plan(splits) };
                        let mut batch = gpu.batch().unwrap();
                        let w = gw.weights();
                        ops::linear_with_plan(&mut batch, &gx, w, &y, mu, ku, nu, e, p).unwrap();
                        batch.submit().unwrap();
                        let what = format!(
                            "{dt:?} {epi:?} m={m} k={k} n={n} splits {splits} window {win}"
                        );
                        check(&what, &x, &ws, &r, (m, k, n), epi, &y.download().unwrap());
                    }
                }
            }
        }
    }
    common::assert_clean(&gpu);
}

#[test]
fn a_forced_streaming_plan_is_a_typed_error_where_it_cannot_run() {
    let gpu = common::gpu();
    let caps = MatmulCaps::of(gpu.info());
    let refuse = |m: usize, k: usize, n: usize, dt: Dt, want: &str, p: LinearPlan| {
        let x = gpu.upload(&vec![0.5f32; m * k]).unwrap();
        let w = upload_w(&gpu, dt, &vec![0.25f32; n * k]);
        let y: Buffer<f32> = gpu.alloc(m * n).unwrap();
        let (mu, ku, nu) = (m as u32, k as u32, n as u32);
        let mut batch = gpu.batch().unwrap();
        let e = Epilogue::None;
        let r = ops::linear_with_plan(&mut batch, &x, w.weights(), &y, mu, ku, nu, e, p);
        match r {
            Err(Error::OpShape { detail, .. }) => assert!(detail.contains(want), "{detail}"),
            other => panic!("want OpShape naming {want:?}, got {other:?}"),
        }
        assert!(batch.is_empty(), "a refused layer recorded nothing");
    };
    for p in [plan(1), window(1)] {
        refuse(4, 128, 16, Dt::F32, "f16 or bf16", p);
        refuse(4, 192, 16, Dt::Bf16, "whole steps of 128", p);
        refuse(4, 128, 24, Dt::Bf16, "whole pieces of 16", p);
        // The skinny kernels' limit of 64 rows (LINEAR_MAX_M) speaks first.
        refuse(65, 128, 16, Dt::Bf16, "m = 65 rows of x, over", p);
    }
    refuse(4, 128, 16, Dt::F32, "LINEAR_TENSOR_WINDOW", window(1));
    // One layer of 1024 for 16 rows of x: past the 896-deep span (the
    // window takes it).
    refuse(4, 1024, 16, Dt::Bf16, "span of 896", plan(1));
    refuse(20, 1024, 16, Dt::Bf16, "at least 3 layers", plan(2));

    // A shape it takes: runs where the adapter has the kernel, else
    // Unsupported naming the extension.
    let x = gpu.upload(&vec![0.5f32; 4 * 128]).unwrap();
    let GpuW::Bf16(w) = upload_w(&gpu, Dt::Bf16, &vec![0.25f32; 16 * 128]) else {
        unreachable!("uploaded as bf16")
    };
    let y: Buffer<f32> = gpu.alloc(4 * 16).unwrap();
    let mut batch = gpu.batch().unwrap();
    let r = ops::linear_with_plan(&mut batch, &x, &w, &y, 4, 128, 16, Epilogue::None, plan(1));
    let has = ops::matmul::stream_applies(4, 128, 16, DType::Bf16, false, &caps);
    let needs = "VK_KHR_cooperative_matrix";
    runs_or_unsupported(r, batch, &y, (has, "tensor-core streaming"), 16.0, needs);
    // The same through the window form.
    let y: Buffer<f32> = gpu.alloc(4 * 16).unwrap();
    let mut batch = gpu.batch().unwrap();
    let r = ops::linear_with_plan(
        &mut batch,
        &x,
        &w,
        &y,
        4,
        128,
        16,
        Epilogue::None,
        window(1),
    );
    let has = ops::matmul::window_applies(4, 128, 16, DType::Bf16, false, &caps);
    runs_or_unsupported(
        r,
        batch,
        &y,
        (has, "the streaming kernel's window form"),
        16.0,
        needs,
    );
    common::assert_clean(&gpu);
}
