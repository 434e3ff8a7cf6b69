//! `ops::linear_chain` (skinny linear layers in one persistent dispatch)
//! against an f64 CPU reference of the same layers one after another: a
//! decoder's tail (o projection with the residual in place, the RMSNorm-ed
//! gate|up projection with SiLU·mul, down with the residual in place, the
//! next RMSNorm-ed q|k|v projection) at 1 and 3 rows, f32 / F16 / Bf16
//! weights, output counts that are not a multiple of the 4-row units; a
//! stage wide enough to take several passes of a workgroup; the plan taken
//! beside the layers recorded one by one; a recorded graph launched with
//! new inputs; the bad inputs as typed errors.
//!
//! lavapipe runs the one dispatch on one workgroup (it does not keep
//! several of these resident at once, and nothing tells the library how
//! many it would); on adapters with a residency rule the default plan and
//! a few workgroup counts run too.
//!
//! Error bound, per output: the reference takes the stored (rounded)
//! weights and each stage's input as the reference computed it, in f64.
//! The kernel's f32 sums of K products (and of the norm's K squares) are
//! off by at most about (3K/2 + 8)·u relative of Σ|x̂||w| (u = 2⁻²⁴, see
//! tests/ops_linear_normed.rs); an earlier stage's error enters through
//! x. The bound taken, 1e-4·Σ|x̂||w| + 1e-6 per output plus the residual,
//! covers both at these sizes (K ≤ 256: 3K/2·u < 3e-5) and is far below
//! what a wrong row, a missing residual or a stale read gives.

mod common;

use vkcompute::ops::{self, ChainPlan, ChainStage, Epilogue, Weights};
use vkcompute::{Buffer, Device, Error};

mod linear_support;
use linear_support::{upload_w, Dt, GpuW};

const EPS: f32 = 1e-5;

fn weights(w: &GpuW) -> Weights<'_> {
    match w {
        GpuW::F32(b) => b.into(),
        GpuW::F16(b) => b.into(),
        GpuW::Bf16(b) => b.into(),
    }
}

/// The value a weight holds once stored in `dt`.
fn stored(dt: Dt, v: f32) -> f64 {
    f64::from(match dt {
        Dt::F32 => v,
        Dt::F16 => ops::F16::from_f32(v).to_f32(),
        Dt::Bf16 => ops::Bf16::from_f32(v).to_f32(),
    })
}

/// One stage on the CPU: (y, bound) where bound is Σ|x̂||w| per output.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Plain,
    Residual,
    SiluMul,
}

struct Layer {
    k: usize,
    n: usize,
    kind: Kind,
    norm: Option<Vec<f32>>,
    w: Vec<f32>,
    gw: GpuW,
    gnorm: Option<Buffer<f32>>,
}

impl Layer {
    fn new(
        gpu: &Device,
        rng: &mut common::Rng,
        dt: Dt,
        (k, n): (usize, usize),
        kind: Kind,
        norm: bool,
    ) -> Layer {
        let w: Vec<f32> = rng.vec_f32(n * k).iter().map(|v| v * 0.5).collect();
        let norm = norm.then(|| (0..k).map(|_| 0.5 + rng.f32()).collect::<Vec<f32>>());
        Layer {
            k,
            n,
            kind,
            gnorm: norm.as_ref().map(|g| gpu.upload(g).unwrap()),
            gw: upload_w(gpu, dt, &w),
            w,
            norm,
        }
    }

    /// The layer on m rows of `x` (f64), with `res` the residual rows.
    fn cpu(&self, dt: Dt, m: usize, x: &[f64], res: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let (k, n) = (self.k, self.n);
        let mut xs = x.to_vec();
        if let Some(g) = &self.norm {
            for r in 0..m {
                let row = &mut xs[r * k..(r + 1) * k];
                let ms = row.iter().map(|v| v * v).sum::<f64>() / k as f64;
                let s = 1.0 / (ms + f64::from(EPS)).sqrt();
                for (v, &gi) in row.iter_mut().zip(g) {
                    *v *= s * f64::from(gi);
                }
            }
        }
        let dot = |r: usize, j: usize| -> (f64, f64) {
            let mut acc = 0.0;
            let mut mag = 0.0;
            for i in 0..k {
                let p = xs[r * k + i] * stored(dt, self.w[j * k + i]);
                acc += p;
                mag += p.abs();
            }
            (acc, mag)
        };
        let outs = if self.kind == Kind::SiluMul { n / 2 } else { n };
        let mut y = vec![0.0; m * outs];
        let mut bound = vec![0.0; m * outs];
        for r in 0..m {
            for j in 0..outs {
                let (v, b) = match self.kind {
                    Kind::Plain => dot(r, j),
                    Kind::Residual => {
                        let (a, b) = dot(r, j);
                        (a + res[r * n + j], b + res[r * n + j].abs())
                    }
                    Kind::SiluMul => {
                        let (g, bg) = dot(r, j);
                        let (u, bu) = dot(r, outs + j);
                        let s = g / (1.0 + (-g).exp());
                        (s * u, bg * u.abs() + bu * s.abs() + bg * bu)
                    }
                };
                y[r * outs + j] = v;
                bound[r * outs + j] = b;
            }
        }
        (y, bound)
    }
}

/// A decoder's tail: a (m × q) → o with the residual in h (m × d), then
/// gate|up (normed) into mlp (m × i), down with the residual into h, then
/// q|k|v (normed) into qkv (m × nq).
struct Tail {
    dt: Dt,
    m: usize,
    layers: Vec<Layer>,
    a: Vec<f32>,
    h: Vec<f32>,
    ga: Buffer<f32>,
    gh: Buffer<f32>,
    gmlp: Buffer<f32>,
    gqkv: Buffer<f32>,
}

impl Tail {
    fn new(
        gpu: &Device,
        dt: Dt,
        m: usize,
        (q, d, i, nq): (usize, usize, usize, usize),
        seed: u64,
    ) -> Tail {
        let mut rng = common::Rng::new(seed);
        let layers = vec![
            Layer::new(gpu, &mut rng, dt, (q, d), Kind::Residual, false),
            Layer::new(gpu, &mut rng, dt, (d, 2 * i), Kind::SiluMul, true),
            Layer::new(gpu, &mut rng, dt, (i, d), Kind::Residual, false),
            Layer::new(gpu, &mut rng, dt, (d, nq), Kind::Plain, true),
        ];
        let a = rng.vec_f32(m * q);
        let h = rng.vec_f32(m * d);
        Tail {
            dt,
            m,
            ga: gpu.upload(&a).unwrap(),
            gh: gpu.upload(&h).unwrap(),
            gmlp: gpu.alloc::<f32>(m * i).unwrap(),
            gqkv: gpu.alloc::<f32>(m * nq).unwrap(),
            layers,
            a,
            h,
        }
    }

    fn stages(&self) -> Vec<ChainStage<'_>> {
        let m = self.m as u32;
        let l = &self.layers;
        let mkn = |x: &Layer| (m, x.k as u32, x.n as u32);
        let mut s = vec![
            ChainStage::new(
                &self.ga,
                weights(&l[0].gw),
                &self.gh,
                mkn(&l[0]),
                Epilogue::Residual(&self.gh),
            ),
            ChainStage::new(
                &self.gh,
                weights(&l[1].gw),
                &self.gmlp,
                mkn(&l[1]),
                Epilogue::SiluMul,
            ),
            ChainStage::new(
                &self.gmlp,
                weights(&l[2].gw),
                &self.gh,
                mkn(&l[2]),
                Epilogue::Residual(&self.gh),
            ),
            ChainStage::new(
                &self.gh,
                weights(&l[3].gw),
                &self.gqkv,
                mkn(&l[3]),
                Epilogue::None,
            ),
        ];
        s[1] = s[1].normed(l[1].gnorm.as_ref().unwrap(), EPS);
        s[3] = s[3].normed(l[3].gnorm.as_ref().unwrap(), EPS);
        s
    }

    /// The reference: (h, bound of h, qkv, bound of qkv) after the chain.
    fn cpu(&self) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
        let (dt, m, l) = (self.dt, self.m, &self.layers);
        let a: Vec<f64> = self.a.iter().map(|&v| f64::from(v)).collect();
        let h0: Vec<f64> = self.h.iter().map(|&v| f64::from(v)).collect();
        let (h1, _) = l[0].cpu(dt, m, &a, &h0);
        let (mlp, _) = l[1].cpu(dt, m, &h1, &[]);
        let (h2, bh) = l[2].cpu(dt, m, &mlp, &h1);
        let (qkv, bq) = l[3].cpu(dt, m, &h2, &[]);
        (h2, bh, qkv, bq)
    }

    /// Fails unless the device's h and qkv match the reference.
    fn check(&self, what: &str) {
        let (h, bh, qkv, bq) = self.cpu();
        for (name, got, want, bound) in [
            ("h", self.gh.download().unwrap(), h, bh),
            ("qkv", self.gqkv.download().unwrap(), qkv, bq),
        ] {
            assert_eq!(got.len(), want.len());
            for (i, ((&g, &w), &b)) in got.iter().zip(&want).zip(&bound).enumerate() {
                let tol = 1e-4 * b + 1e-6;
                assert!(
                    (f64::from(g) - w).abs() <= tol,
                    "{what}: {name}[{i}] = {g}, reference {w} (tolerance {tol:.3e})"
                );
            }
        }
    }

    fn reset(&self) {
        self.gh.write(0, &self.h).unwrap();
    }
}

fn run(gpu: &Device, tail: &Tail, plan: ChainPlan) {
    tail.reset();
    let fault = gpu.upload(&[0u32]).unwrap();
    let mut batch = gpu.batch().unwrap();
    ops::linear_chain_with_plan(&mut batch, &tail.stages(), Some((&fault, 0)), plan).unwrap();
    batch.submit().unwrap();
    assert_eq!(
        fault.download().unwrap(),
        [0],
        "{plan:?}: a barrier wait ran out"
    );
}

/// The plans to run on this adapter: the layers one by one, one
/// workgroup, and where the adapter has a residency rule, its default and
/// a few counts under it.
fn plans(gpu: &Device) -> Vec<ChainPlan> {
    let mut p = vec![ChainPlan::Separate, ChainPlan::Persistent { workgroups: 1 }];
    match ops::chain_residency(gpu.info()) {
        Some(n) => {
            for w in [2, 5, n] {
                if w <= n {
                    p.push(ChainPlan::Persistent { workgroups: w });
                }
            }
        }
        None => common::skipped(format!(
            "{}: no residency rule, so the one dispatch runs on one workgroup only",
            gpu.info().name
        )),
    }
    p
}

#[test]
fn decoder_tail_matches_reference() {
    let gpu = common::gpu();
    let quick = std::env::var("VKCOMPUTE_QUICK").is_ok();
    let plans = plans(&gpu);
    for dt in [Dt::F32, Dt::F16, Dt::Bf16] {
        for m in [1usize, 3] {
            // q, d, i, n_qkv: K multiples of 8, outputs not all of 4.
            let tail = Tail::new(&gpu, dt, m, (48, 40, 56, 54), 11 + m as u64);
            for &plan in &plans {
                if quick && dt == Dt::F16 && plan != ChainPlan::Separate && m == 3 {
                    continue;
                }
                run(&gpu, &tail, plan);
                tail.check(&format!("{dt:?} m = {m} {plan:?}"));
            }
        }
    }
    common::assert_clean(&gpu);
}

#[test]
fn default_plan_follows_the_adapter() {
    let gpu = common::gpu();
    let tail = Tail::new(&gpu, Dt::Bf16, 1, (64, 64, 64, 96), 5);
    tail.reset();
    let mut batch = gpu.batch().unwrap();
    let plan = ops::linear_chain(&mut batch, &tail.stages(), None).unwrap();
    batch.submit().unwrap();
    tail.check(&format!("default {plan:?}"));
    let want = match ops::chain_residency(gpu.info()) {
        Some(workgroups) => ChainPlan::Persistent { workgroups },
        None => ChainPlan::Separate,
    };
    assert_eq!(plan, want);
    eprintln!("{}: the default plan is {plan:?}", gpu.info().name);
    // K = 36 is not a whole number of 16-byte loads of bf16: the layers
    // one by one, and the one dispatch refused by name.
    let odd = Tail::new(&gpu, Dt::Bf16, 1, (36, 40, 56, 8), 6);
    odd.reset();
    let mut batch = gpu.batch().unwrap();
    assert_eq!(
        ops::linear_chain(&mut batch, &odd.stages(), None).unwrap(),
        ChainPlan::Separate
    );
    batch.submit().unwrap();
    odd.check("k = 36, separate");
    let mut batch = gpu.batch().unwrap();
    let e = ops::linear_chain_with_plan(
        &mut batch,
        &odd.stages(),
        None,
        ChainPlan::Persistent { workgroups: 1 },
    )
    .unwrap_err();
    assert!(
        matches!(&e, Error::OpShape { op: "ops::linear_chain", detail } if detail.contains("multiple of 8")),
        "{e}"
    );
    common::assert_clean(&gpu);
}

/// Stages wider than one pass of a workgroup: 1000 and 600 outputs.
#[test]
fn wide_stages_take_several_passes() {
    let gpu = common::gpu();
    let mut rng = common::Rng::new(9);
    let (k, n1, n2) = (64usize, 1000usize, 600usize);
    let l1 = Layer::new(&gpu, &mut rng, Dt::F32, (k, n1), Kind::Plain, true);
    let l2 = Layer::new(&gpu, &mut rng, Dt::F32, (n1, n2), Kind::Plain, false);
    let x = rng.vec_f32(k);
    let gx = gpu.upload(&x).unwrap();
    let (y1, y2) = (gpu.alloc::<f32>(n1).unwrap(), gpu.alloc::<f32>(n2).unwrap());
    let xd: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    let (r1, _) = l1.cpu(Dt::F32, 1, &xd, &[]);
    let (r2, b2) = l2.cpu(Dt::F32, 1, &r1, &[]);
    let mut p = plans(&gpu);
    p.retain(|p| *p != ChainPlan::Separate);
    for plan in p {
        let stages = [
            ChainStage::new(
                &gx,
                weights(&l1.gw),
                &y1,
                (1, k as u32, n1 as u32),
                Epilogue::None,
            )
            .normed(l1.gnorm.as_ref().unwrap(), EPS),
            ChainStage::new(
                &y1,
                weights(&l2.gw),
                &y2,
                (1, n1 as u32, n2 as u32),
                Epilogue::None,
            ),
        ];
        let mut batch = gpu.batch().unwrap();
        ops::linear_chain_with_plan(&mut batch, &stages, None, plan).unwrap();
        batch.submit().unwrap();
        for (i, (&g, (&w, &b))) in y2
            .download()
            .unwrap()
            .iter()
            .zip(r2.iter().zip(&b2))
            .enumerate()
        {
            let tol = 1e-4 * b + 1e-6;
            assert!(
                (f64::from(g) - w).abs() <= tol,
                "{plan:?}: y[{i}] = {g}, reference {w}"
            );
        }
    }
    common::assert_clean(&gpu);
}

/// A graph of the chain launched three times, h written between launches:
/// the barrier's state is left ready for the next launch.
#[test]
fn graph_replays_with_new_inputs() {
    let gpu = common::gpu();
    let mut tail = Tail::new(&gpu, Dt::Bf16, 1, (48, 40, 56, 54), 21);
    let plan = match ops::chain_residency(gpu.info()) {
        Some(n) => ChainPlan::Persistent { workgroups: n },
        None => ChainPlan::Persistent { workgroups: 1 },
    };
    let fault = gpu.upload(&[0u32]).unwrap();
    let mut rec = gpu.graph_recorder().unwrap();
    ops::linear_chain_with_plan(&mut rec, &tail.stages(), Some((&fault, 0)), plan).unwrap();
    let graph = rec.finish().unwrap();
    let mut rng = common::Rng::new(3);
    for step in 0..3 {
        tail.h = rng.vec_f32(tail.h.len());
        tail.reset();
        graph.launch().unwrap().wait().unwrap();
        tail.check(&format!("launch {step} of {plan:?}"));
    }
    assert_eq!(fault.download().unwrap(), [0]);
    common::assert_clean(&gpu);
}

#[test]
fn bad_chains_are_typed_errors() {
    let gpu = common::gpu();
    let tail = Tail::new(&gpu, Dt::F32, 1, (48, 40, 56, 54), 1);
    let stages = tail.stages();
    let chain_err = |stages: &[ChainStage<'_>], plan: ChainPlan, want: &str| {
        let mut batch = gpu.batch().unwrap();
        let e = ops::linear_chain_with_plan(&mut batch, stages, None, plan).unwrap_err();
        match &e {
            Error::OpShape {
                op: "ops::linear_chain",
                detail,
            } => {
                assert!(detail.contains(want), "{detail:?} should say {want:?}")
            }
            other => panic!("want an ops::linear_chain shape error saying {want:?}: {other}"),
        }
    };
    chain_err(&[], ChainPlan::Separate, "1 to 4");
    let five = [stages[0], stages[1], stages[2], stages[3], stages[3]];
    chain_err(&five, ChainPlan::Separate, "1 to 4");
    // Stage 2 claims 57 inputs: its x and W hold other counts.
    let mut bad = stages.clone();
    bad[2].mkn.1 = 57;
    chain_err(&bad, ChainPlan::Separate, "stage 2");
    // Stage 1 reads stage 0's output as its weights.
    let x = gpu.upload(&[1.0f32; 8]).unwrap();
    let w0 = gpu.upload(&[0.5f32; 64]).unwrap();
    let (y0, y1) = (gpu.alloc::<f32>(8).unwrap(), gpu.alloc::<f32>(1).unwrap());
    let aliased = [
        ChainStage::new(&x, &w0, &y0, (1, 8, 8), Epilogue::None),
        ChainStage::new(&y0, &y0, &y1, (1, 8, 1), Epilogue::None),
    ];
    chain_err(
        &aliased,
        ChainPlan::Separate,
        "stage 1: its weights are stage 0's y",
    );
    let bad_eps = [
        stages[0],
        stages[1].normed(tail.layers[1].gnorm.as_ref().unwrap(), -1.0),
    ];
    chain_err(&bad_eps, ChainPlan::Separate, "stage 1: eps");
    chain_err(
        &stages,
        ChainPlan::Persistent { workgroups: 0 },
        "0 workgroups",
    );
    let fault = gpu.upload(&[0u32; 2]).unwrap();
    let mut batch = gpu.batch().unwrap();
    let e = ops::linear_chain(&mut batch, &stages, Some((&fault, 2))).unwrap_err();
    assert!(
        matches!(&e, Error::OpShape { detail, .. } if detail.contains("fault word 2")),
        "{e}"
    );
    common::assert_clean(&gpu);
}
