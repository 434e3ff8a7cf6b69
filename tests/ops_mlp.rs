//! `ops::swiglu_mlp` (a SwiGLU MLP block with its residual, the RMSNorm
//! before it optional) against a CPU f64 reference on the stored weights:
//! 1 to 5 rows, K and I that take the 16-byte loads and odd ones (the
//! element paths, a last workgroup with fewer features), f32 / F16 / Bf16
//! weights, y beside x and in place, the default plan (two linear layers)
//! and the fused kernel where the adapter has f32 atomic adds; a graph launched several times with new x between launches (the
//! fused kernel's accumulator must be clear at each start); the bad inputs
//! as typed errors.
//!
//! Error bound: the reference uses the weights as stored, so what is left
//! is f32 arithmetic: each h feature is a K-term sum (relative error at
//! most about K·u, u = 2⁻²⁴, of Σ|n||w|, and the norm's scale a few u
//! more), SiLU·mul a few u, and the down projection an I-term sum with
//! atomics in any order (I·u of Σ|h||w_d|) plus the residual add. The
//! test allows 4·(K + I + 16)·u times the magnitudes' sums per output,
//! which a wrong feature group, a skipped norm or a stale accumulator
//! exceeds by orders of magnitude.

mod common;

use vkcompute::ops::{self, MlpPlan, OpsError, Weights};
use vkcompute::{Device, Error};

mod linear_support;
use linear_support::{tensor::stored, upload_w, Dt, GpuW};

const EPS: f32 = 1e-6;

/// One block's inputs, the weights as stored.
struct Case {
    m: usize,
    k: usize,
    i: usize,
    x: Vec<f32>,
    g: Vec<f32>,
    wgu: Vec<f32>,
    wd: Vec<f32>,
}

impl Case {
    fn new(m: usize, k: usize, i: usize, dt: Dt, seed: u64) -> Case {
        let mut rng = common::Rng::new(seed);
        let x = (0..m * k)
            .map(|e| rng.f32() * (1.0 + (e / k) as f32 * 0.5))
            .collect();
        let g = (0..k).map(|_| 0.5 + rng.f32()).collect();
        Case {
            m,
            k,
            i,
            x,
            g,
            wgu: stored(dt, &rng.vec_f32(2 * i * k)),
            wd: stored(dt, &rng.vec_f32(k * i)),
        }
    }

    /// The reference output and each output's error allowance.
    fn reference(&self, x: &[f32], norm: bool) -> (Vec<f64>, Vec<f64>) {
        let (k, i) = (self.k, self.i);
        let u = f64::powi(2.0, -24);
        let mut want = Vec::new();
        let mut tol = Vec::new();
        for r in 0..self.m {
            let xr = &x[r * k..(r + 1) * k];
            let n: Vec<f64> = if norm {
                let ms = xr.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / k as f64;
                let s = 1.0 / (ms + f64::from(EPS)).sqrt();
                xr.iter()
                    .zip(&self.g)
                    .map(|(&v, &g)| f64::from(v) * s * f64::from(g))
                    .collect()
            } else {
                xr.iter().map(|&v| f64::from(v)).collect()
            };
            let dot = |row: usize| -> (f64, f64) {
                let w = &self.wgu[row * k..(row + 1) * k];
                let s = n.iter().zip(w).map(|(a, &b)| a * f64::from(b)).sum();
                let a = n
                    .iter()
                    .zip(w)
                    .map(|(a, &b)| (a * f64::from(b)).abs())
                    .sum();
                (s, a)
            };
            let mut h = Vec::with_capacity(i);
            let mut h_err = Vec::with_capacity(i);
            for j in 0..i {
                let ((gs, ga), (us, ua)) = (dot(j), dot(i + j));
                let sig = 1.0 / (1.0 + (-gs).exp());
                h.push(gs * sig * us);
                // The sums' errors, carried through silu(g)·u (|d silu| ≤ 1.1).
                let e = 4.0 * (k as f64 + 16.0) * u;
                h_err.push(
                    e * (ga * 1.1 * us.abs() + (gs * sig).abs() * ua)
                        + 16.0 * u * (gs * sig * us).abs(),
                );
            }
            for (&xo, w) in xr.iter().zip(self.wd.chunks(i)) {
                let s: f64 = h.iter().zip(w).map(|(a, &b)| a * f64::from(b)).sum();
                let a: f64 = h
                    .iter()
                    .zip(w)
                    .map(|(a, &b)| (a * f64::from(b)).abs())
                    .sum();
                let e: f64 = h_err
                    .iter()
                    .zip(w)
                    .map(|(a, &b)| a * f64::from(b).abs())
                    .sum();
                let xv = f64::from(xo);
                want.push(xv + s);
                tol.push(e + 4.0 * (i as f64 + 16.0) * u * (a + xv.abs()) + 1e-30);
            }
        }
        (want, tol)
    }
}

fn weights(w: &GpuW) -> Weights<'_> {
    w.weights()
}

/// Compares `got` with the reference, naming the case on failure.
fn assert_close(got: &[f32], (want, tol): &(Vec<f64>, Vec<f64>), what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (e, ((&g, &w), &t)) in got.iter().zip(want).zip(tol).enumerate() {
        let d = (f64::from(g) - w).abs();
        assert!(
            d <= t,
            "{what}: element {e}: got {g}, want {w} (off {d:e}, allowed {t:e})"
        );
    }
}

/// Whether the fused kernel runs here; prints `skipped:` when not.
fn fused_here(gpu: &Device) -> bool {
    let has = gpu.info().float32_atomic_add;
    if !has {
        common::skipped(format!(
            "the fused MLP kernel: {} has no shaderBufferFloat32AtomicAdd",
            gpu.info().name
        ));
    }
    has
}

fn run_case(gpu: &Device, c: &Case, dt: Dt, norm: bool, in_place: bool, plan: MlpPlan) {
    let x = gpu.upload(&c.x).unwrap();
    let g = gpu.upload(&c.g).unwrap();
    let (wgu, wd) = (upload_w(gpu, dt, &c.wgu), upload_w(gpu, dt, &c.wd));
    let sep = gpu.alloc::<f32>(c.x.len()).unwrap();
    let y = if in_place { &x } else { &sep };
    let mut b = gpu.batch().unwrap();
    let (m, k, i) = (c.m as u32, c.k as u32, c.i as u32);
    let nrm = norm.then_some((&g, EPS));
    ops::swiglu_mlp_with_plan(
        &mut b,
        &x,
        nrm,
        weights(&wgu),
        weights(&wd),
        y,
        (m, k, i),
        plan,
    )
    .unwrap();
    b.submit().unwrap();
    let what = format!("m {m} k {k} i {i} {dt:?} norm {norm} in place {in_place} {plan:?}");
    assert_close(&y.download().unwrap(), &c.reference(&c.x, norm), &what);
}

#[test]
fn matches_the_reference_fused_and_unfused() {
    let gpu = common::gpu();
    let fused = fused_here(&gpu);
    let mut seed = 1;
    for dt in [Dt::F32, Dt::F16, Dt::Bf16] {
        // (m, k, i): 16-byte loads everywhere; odd K (element loads of x
        // and gate|up); I with a short last group and, for 16-bit
        // weights, element loads of the down weight.
        for (m, k, i) in [
            (1, 64, 128),
            (2, 37, 100),
            (3, 64, 100),
            (4, 40, 72),
            (5, 24, 64),
        ] {
            for norm in [false, true] {
                for in_place in [false, true] {
                    seed += 1;
                    let c = Case::new(m, k, i, dt, seed);
                    let chosen = ops::choose_mlp(m as u32);
                    assert!(!chosen.fused, "the default is the two linear layers");
                    run_case(&gpu, &c, dt, norm, in_place, chosen);
                    if fused && m <= 4 {
                        run_case(&gpu, &c, dt, norm, in_place, MlpPlan::fused(m as u32));
                        // Several passes of fewer rows (each its own
                        // workgroups, one accumulator and counter).
                        let passes = MlpPlan {
                            rows_per_pass: 1,
                            ..MlpPlan::fused(1)
                        };
                        if m > 1 {
                            run_case(&gpu, &c, dt, norm, in_place, passes);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn a_graph_relaunched_with_new_inputs_stays_exact() {
    let gpu = common::gpu();
    let fused = fused_here(&gpu);
    let (m, k, i) = (2usize, 48usize, 192usize);
    let c = Case::new(m, k, i, Dt::Bf16, 99);
    let x = gpu.upload(&c.x).unwrap();
    let g = gpu.upload(&c.g).unwrap();
    let (wgu, wd) = (
        upload_w(&gpu, Dt::Bf16, &c.wgu),
        upload_w(&gpu, Dt::Bf16, &c.wd),
    );
    let y = gpu.alloc::<f32>(m * k).unwrap();
    let plan = if fused {
        MlpPlan::fused(m as u32)
    } else {
        ops::choose_mlp(m as u32)
    };
    let mut rec = gpu.graph_recorder().unwrap();
    let shape = (m as u32, k as u32, i as u32);
    ops::swiglu_mlp_with_plan(
        &mut rec,
        &x,
        Some((&g, EPS)),
        weights(&wgu),
        weights(&wd),
        &y,
        shape,
        plan,
    )
    .unwrap();
    let graph = rec.finish().unwrap();
    let mut rng = common::Rng::new(7);
    for launch in 0..4 {
        let xs: Vec<f32> = if launch == 0 {
            c.x.clone()
        } else {
            rng.vec_f32(m * k)
        };
        x.write(0, &xs).unwrap();
        graph.launch().unwrap().wait().unwrap();
        let what = format!("launch {launch} of the graph, {plan:?}");
        assert_close(&y.download().unwrap(), &c.reference(&xs, true), &what);
    }
}

#[test]
fn bad_input_is_a_typed_error() {
    let gpu = common::gpu();
    let (m, k, i) = (1u32, 8u32, 16u32);
    let x = gpu.alloc::<f32>(8).unwrap();
    let y = gpu.alloc::<f32>(8).unwrap();
    let g = gpu.alloc::<f32>(8).unwrap();
    let wgu = gpu.alloc::<f32>(2 * 16 * 8).unwrap();
    let wd = gpu.alloc::<f32>(8 * 16).unwrap();
    let wd16 = gpu.alloc::<ops::Bf16>(8 * 16).unwrap();
    let short = gpu.alloc::<f32>(7).unwrap();
    let shape_err = |r: vkcompute::Result<()>, needle: &str| match r {
        Err(Error::OpShape { op, detail }) => {
            assert_eq!(op, "ops::swiglu_mlp");
            assert!(detail.contains(needle), "{detail}");
        }
        other => panic!("want OpShape naming {needle:?}, got {other:?}"),
    };
    let mut b = gpu.batch().unwrap();
    shape_err(
        ops::swiglu_mlp(&mut b, &x, None, &wgu, &wd, &y, 0, k, i),
        "at least 1",
    );
    shape_err(
        ops::swiglu_mlp(&mut b, &x, None, &wgu, &wd, &y, 65, k, i),
        "limit of 64",
    );
    shape_err(
        ops::swiglu_mlp(&mut b, &short, None, &wgu, &wd, &y, m, k, i),
        "x holds 7",
    );
    shape_err(
        ops::swiglu_mlp(&mut b, &x, None, &wgu, &wd, &short, m, k, i),
        "y holds 7",
    );
    shape_err(
        ops::swiglu_mlp(&mut b, &x, None, &wd, &wd, &y, m, k, i),
        "w_gate_up holds 128",
    );
    shape_err(
        ops::swiglu_mlp(&mut b, &x, None, &wgu, &wgu, &y, m, k, i),
        "w_down holds 256",
    );
    shape_err(
        ops::swiglu_mlp(&mut b, &x, None, &wgu, &wd16, &y, m, k, i),
        "one dtype",
    );
    // One feature: the down weight holds m·k elements, as y does.
    let (wgu1, wd1) = (
        gpu.alloc::<f32>(2 * 8).unwrap(),
        gpu.alloc::<f32>(8).unwrap(),
    );
    shape_err(
        ops::swiglu_mlp(&mut b, &x, None, &wgu1, &wd1, &wd1, m, k, 1),
        "y is a weight",
    );
    shape_err(
        ops::swiglu_mlp(&mut b, &x, Some((&short, EPS)), &wgu, &wd, &y, m, k, i),
        "norm weight holds 7",
    );
    shape_err(
        ops::swiglu_mlp(&mut b, &x, Some((&g, EPS)), &wgu, &wd, &g, m, k, i),
        "y is the norm weight",
    );
    match ops::swiglu_mlp(&mut b, &x, Some((&g, -1.0)), &wgu, &wd, &y, m, k, i) {
        Err(Error::Ops(OpsError::Param { param, .. })) => assert_eq!(param, "eps"),
        other => panic!("want the eps error, got {other:?}"),
    }
    if gpu.info().float32_atomic_add {
        let (x5, y5) = (gpu.alloc::<f32>(40).unwrap(), gpu.alloc::<f32>(40).unwrap());
        let r = ops::swiglu_mlp_with_plan(
            &mut b,
            &x5,
            None,
            &wgu,
            &wd,
            &y5,
            (5, k, i),
            MlpPlan::fused(5),
        );
        shape_err(r, "fused kernel's limit of 4");
    }
    let odd = MlpPlan {
        fused: true,
        rows_per_pass: 3,
    };
    let r = ops::swiglu_mlp_with_plan(&mut b, &x, None, &wgu, &wd, &y, (m, k, i), odd);
    if gpu.info().float32_atomic_add {
        shape_err(r, "no fused kernel");
    } else {
        match r {
            Err(Error::Unsupported { what, .. }) => {
                assert!(what.contains("shaderBufferFloat32AtomicAdd"), "{what}")
            }
            other => panic!("want Unsupported, got {other:?}"),
        }
    }
    assert!(b.is_empty(), "a refused block records nothing");
}
