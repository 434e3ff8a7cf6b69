//! `ops::linear` (skinny linear layers, W stored `[out, in]`) against a CPU
//! f64 reference: M in {1, 2, 3, 15, 17, 64}, odd K and N (and K that
//! take the 16-byte loads), f32 / F16 / Bf16 weights, every epilogue, the
//! residual in place, split-K forced off and on; every bad input as a
//! typed error; a graph launched twice.
//!
//! Error bound, per output, against the f32 weights before they were
//! rounded to the stored type: the kernel widens the stored weight exactly
//! and sums K products in f32 in some order (lane chunks, a subgroup tree,
//! split-K partials), so against the stored weights |ŝ − s| ≤ γ_K·Σ|x||ŵ|
//! with u = 2⁻²⁴; storing rounds each weight by at most u_w relative
//! (u_w = 0 for f32, 2⁻¹¹ for f16, 2⁻⁸ for bf16), which moves the exact
//! sum by at most u_w·Σ|x||w|, and |ŵ| ≤ (1 + u_w)|w|. So the bound on a
//! sum is δ = 1.01·(K·u·(1 + u_w) + u_w)·Σ|x||w|. The residual add rounds
//! once more (u·|y|). SiLU·mul: silu' lies in [−0.1, 1.1], so
//! |Δ(silu(g)·v)| ≤ 1.1·δ_g·(|v| + δ_v) + |silu(g)|·δ_v, plus 8u·|y| for
//! the exponential, the division and the product. Where the plan that ran
//! is a tensor-core kernel's (16-bit weights, `LinearPlan::rounds_x_to_f16`;
//! the rule picks one from 5 rows where it applies), x is rounded to f16
//! first (relative 2⁻¹¹, 2⁻¹⁰ allowed for either rounding mode): δ gains
//! 2⁻¹⁰·(1 + u_w)·Σ|x||w|.

mod common;

use std::cell::OnceCell;
use std::rc::Rc;

use vkcompute::ops::{self, Bf16, Epilogue, LinearPlan};
use vkcompute::{Buffer, Error};

mod linear_support;
use linear_support::{upload_w, Dt, Epi};

/// One layer's inputs, shared by every plan and weight type that runs
/// them, with their f64 products computed once (on first use).
struct Inputs {
    m: usize,
    k: usize,
    n: usize,
    epi: Epi,
    x: Vec<f32>,
    w: Vec<f32>,
    r: Vec<f32>,
    /// Per output: the dot product of x's row and W's row and the sum of
    /// its terms' magnitudes, then (SiLU·mul) the same for the up row.
    sums: OnceCell<Vec<[f64; 4]>>,
}

impl Inputs {
    fn new(
        m: usize,
        k: usize,
        n: usize,
        epi: Epi,
        x: Vec<f32>,
        w: Vec<f32>,
        r: Vec<f32>,
    ) -> Rc<Self> {
        Rc::new(Inputs {
            m,
            k,
            n,
            epi,
            x,
            w,
            r,
            sums: OnceCell::new(),
        })
    }

    fn outs(&self) -> usize {
        if self.epi == Epi::SiluMul {
            self.n / 2
        } else {
            self.n
        }
    }

    fn sums(&self) -> &[[f64; 4]] {
        self.sums.get_or_init(|| {
            let (k, outs) = (self.k, self.outs());
            let row = |r: usize| &self.w[r * k..(r + 1) * k];
            let mut v = Vec::with_capacity(self.m * outs);
            for i in 0..self.m {
                let xr = &self.x[i * k..(i + 1) * k];
                for j in 0..outs {
                    let (s, a) = dot(xr, row(j));
                    let (s2, a2) = if self.epi == Epi::SiluMul {
                        dot(xr, row(outs + j))
                    } else {
                        (0.0, 0.0)
                    };
                    v.push([s, a, s2, a2]);
                }
            }
            v
        })
    }
}

/// One layer recorded: the plan that ran it and its output.
struct Case {
    inputs: Rc<Inputs>,
    /// The plan's rows per pass (that of ops::linear's own plan where it
    /// chose).
    rows: u32,
    splits: u32,
    y: Buffer<f32>,
}

fn dot(x: &[f32], w: &[f32]) -> (f64, f64) {
    x.iter().zip(w).fold((0.0, 0.0), |(s, a), (&p, &q)| {
        let t = f64::from(p) * f64::from(q);
        (s + t, a + t.abs())
    })
}

fn silu(g: f64) -> f64 {
    g / (1.0 + (-g).exp())
}

fn check(c: &Case, got: &[f32], dt: Dt) {
    let inp = &c.inputs;
    let u = f64::powi(2.0, -24);
    let uw = dt.unit();
    let ran = LinearPlan {
        rows_per_pass: c.rows,
        splits: 1,
    };
    let tensor = ran.rounds_x_to_f16();
    let ux = if tensor { f64::powi(2.0, -10) } else { 0.0 };
    let delta = |abs: f64| 1.01 * (inp.k as f64 * u * (1.0 + uw) + uw + ux * (1.0 + uw)) * abs;
    let outs = inp.outs();
    assert_eq!(got.len(), inp.m * outs);
    let mut worst = (0.0f64, 0usize, 0.0f64);
    for (idx, &[s, a, s2, a2]) in inp.sums().iter().enumerate() {
        let (want, bound) = match inp.epi {
            Epi::None => (s, delta(a)),
            Epi::Residual | Epi::ResidualInPlace => {
                let y = s + f64::from(inp.r[idx]);
                (y, delta(a) + 1.01 * u * y.abs())
            }
            Epi::SiluMul => {
                let (g, v) = (s, s2);
                let (dg, dv) = (delta(a), delta(a2));
                let y = silu(g) * v;
                let b = 1.1 * dg * (v.abs() + dv) + silu(g).abs() * dv + 8.0 * u * y.abs();
                (y, b)
            }
        };
        let err = (f64::from(got[idx]) - want).abs();
        let ratio = err / (bound + 1e-30);
        if ratio > worst.0 || ratio.is_nan() {
            worst = (ratio, idx, want);
        }
    }
    let (r, idx, want) = worst;
    assert!(
        r <= 1.0,
        "{dt:?} {:?} m={} k={} n={} rows per pass={} splits={}: y[{}][{}] = {} but f64 \
         says {want} (error {r:.3}× the bound)",
        inp.epi,
        inp.m,
        inp.k,
        inp.n,
        c.rows,
        c.splits,
        idx / outs,
        idx % outs,
        got[idx],
    );
}

const SHAPES: [(usize, usize); 8] = [
    (1, 1),
    (17, 127),
    (127, 17),
    (255, 513),
    (513, 255),
    (12, 33),
    (256, 129),
    (520, 63),
];

fn every_case(dt: Dt) {
    let gpu = common::gpu();
    for m in [1usize, 2, 3, 15, 17, 33, 64] {
        let mut batch = gpu.batch().unwrap();
        let mut cases = Vec::new();
        let mut keep = Vec::new();
        for (si, &(k, n_odd)) in SHAPES.iter().enumerate() {
            for epi in [Epi::None, Epi::Residual, Epi::ResidualInPlace, Epi::SiluMul] {
                // SiLU·mul needs gate and up rows: N = 2·(odd).
                let n = if epi == Epi::SiluMul {
                    2 * n_odd
                } else {
                    n_odd
                };
                let outs = if epi == Epi::SiluMul { n / 2 } else { n };
                let mut rng = common::Rng::new((m * 1000 + si * 10) as u64 + epi as u64);
                let x = rng.vec_f32(m * k);
                let w = rng.vec_f32(n * k);
                let r = rng.vec_f32(m * outs);
                let gw = upload_w(&gpu, dt, &w);
                let inp = Inputs::new(m, k, n, epi, x, w, r);
                // Past 16 rows: the 16-row passes and the tiled kernel's
                // 64-row tiles, and its 32-row ones where they hold m.
                let passes: &[u32] = match m {
                    0..=16 => &[0],
                    17..=32 => &[16, 32, 64],
                    _ => &[16, 64],
                };
                for (&rows, splits) in passes.iter().flat_map(|r| [(r, 1u32), (r, 3)]) {
                    let y = if epi == Epi::ResidualInPlace {
                        gpu.upload(&inp.r).unwrap()
                    } else {
                        gpu.alloc::<f32>(m * outs).unwrap()
                    };
                    let gr = gpu.upload(&inp.r).unwrap();
                    let e = match epi {
                        Epi::None => Epilogue::None,
                        Epi::Residual => Epilogue::Residual(&gr),
                        Epi::ResidualInPlace => Epilogue::Residual(&y),
                        Epi::SiluMul => Epilogue::SiluMul,
                    };
                    let rows_per_pass = [1, 2, 4, 8, 16]
                        .into_iter()
                        .find(|&p| p >= m as u32)
                        .unwrap_or(rows);
                    let plan = LinearPlan {
                        rows_per_pass,
                        splits,
                    };
                    let gx = gpu.upload(&inp.x).unwrap();
                    let (mu, ku, nu) = (m as u32, k as u32, n as u32);
                    let gwb = gw.weights();
                    ops::linear_with_plan(&mut batch, &gx, gwb, &y, mu, ku, nu, e, plan).unwrap();
                    keep.push((gx, gr));
                    cases.push(Case {
                        inputs: Rc::clone(&inp),
                        rows: rows_per_pass,
                        splits,
                        y,
                    });
                }
                // The batch holds the weights until its work completes.
                drop(gw);
            }
        }
        batch.submit().unwrap();
        for c in &cases {
            check(c, &c.y.download().unwrap(), dt);
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

#[test]
#[cfg_attr(
    not(feature = "glsl"),
    ignore = "the skinny kernels and their Rust are the same without glsl: the default build runs it"
)]
fn the_chosen_plan_matches_the_cpu() {
    // ops::linear's own plan (on lavapipe, with no unit count: split-K
    // wherever fewer than 128 workgroups), at a larger K.
    let gpu = common::gpu();
    let (m, k, n) = (5usize, 4096usize, 96usize);
    let mut rng = common::Rng::new(7);
    let (x, w, r) = (
        rng.vec_f32(m * k),
        rng.vec_f32(n * k),
        rng.vec_f32(m * n / 2),
    );
    let plan = ops::choose_linear(
        5,
        4096,
        96,
        ops::DType::Bf16,
        true,
        &ops::MatmulCaps::of(gpu.info()),
    );
    assert!(plan.splits > 1, "{plan:?}");
    let gw = gpu
        .upload(&w.iter().map(|&v| Bf16::from_f32(v)).collect::<Vec<_>>())
        .unwrap();
    let (gx, y) = (
        gpu.upload(&x).unwrap(),
        gpu.alloc::<f32>(m * n / 2).unwrap(),
    );
    let mut batch = gpu.batch().unwrap();
    ops::linear(&mut batch, &gx, &gw, &y, 5, 4096, 96, Epilogue::SiluMul).unwrap();
    batch.submit().unwrap();
    let c = Case {
        inputs: Inputs::new(m, k, n, Epi::SiluMul, x, w, r),
        rows: plan.rows_per_pass,
        splits: plan.splits,
        y,
    };
    check(&c, &c.y.download().unwrap(), Dt::Bf16);
    common::assert_clean(&gpu);
}

/// 1, 2 and 3 rows (1, 2 and 4 per pass) with too few outputs to fill the GPU at full workgroups
/// but enough to fill it with narrower ones: `ops::linear` then lets
/// several subgroups share each unit's K in the workgroup (no split-K).
/// On lavapipe (8-lane subgroups, no unit count: 128 workgroups wanted)
/// N = 2,048 gives 16 full workgroups and 128 of 4 units, 8 parts each
/// (K = 2,048: 256 loads of 8 16-bit weights, 32 a part); N = 512 gives
/// 128 of one unit, 32 parts. Every epilogue, every weight type, 16-byte
/// and single-element loads.
#[test]
#[cfg_attr(
    not(feature = "glsl"),
    ignore = "the skinny kernels and their Rust are the same without glsl: the default build runs it"
)]
fn narrow_workgroups_share_k_and_match_the_cpu() {
    let shapes = [(2048usize, 2048usize), (2051, 2050), (8192, 512)];
    let unsplit = chosen_plans_match_the_cpu(&shapes, &[1, 2, 3], &[Dt::F32, Dt::F16, Dt::Bf16]);
    assert!(unsplit > 0, "no case ran without split-K");
}

#[test]
fn subgroup_32_kernels_match_the_cpu() {
    // 16-bit weights at 4 rows per pass and at 1 row (narrowed too: at 1
    // row with two chunks per step) take the `_sg32` kernels (CPS loop,
    // butterfly finish)
    // where subgroups have 32 lanes: Qwen3-4B's down projection (9728 →
    // 2560) and a merged gate|up, every row count they serve.
    let gpu = common::gpu();
    let lanes = gpu.info().subgroup_size;
    if lanes != 32 {
        common::skipped(format!(
            "the _sg32 kernels need subgroups of 32 lanes, this adapter's have {lanes}"
        ));
        return;
    }
    drop(gpu);
    let shapes = [(9728usize, 2560usize), (2560, 2 * 1536), (2056, 520)];
    let unsplit = chosen_plans_match_the_cpu(&shapes, &[1, 3, 4], &[Dt::F16, Dt::Bf16]);
    assert!(unsplit > 0, "no case ran without split-K");
}

/// Every shape, row count, weight type and epilogue through `ops::linear`
/// (the plan its rule chooses) against the CPU; returns how many cases ran
/// without split-K.
fn chosen_plans_match_the_cpu(shapes: &[(usize, usize)], ms: &[usize], dts: &[Dt]) -> usize {
    let gpu = common::gpu();
    let caps = ops::MatmulCaps::of(gpu.info());
    let mut batch = gpu.batch().unwrap();
    let mut cases = Vec::new();
    let mut keep = Vec::new();
    let mut unsplit = 0;
    for (si, &(k, n)) in shapes.iter().enumerate() {
        for &m in ms {
            for epi in [Epi::None, Epi::ResidualInPlace, Epi::SiluMul] {
                let silu_mul = epi == Epi::SiluMul;
                let outs = if silu_mul { n / 2 } else { n };
                // The same inputs (and reference) for every weight type.
                let mut rng = common::Rng::new((si * 100 + m * 10) as u64 + epi as u64);
                let (x, w, r) = (
                    rng.vec_f32(m * k),
                    rng.vec_f32(n * k),
                    rng.vec_f32(m * outs),
                );
                let inp = Inputs::new(m, k, n, epi, x, w, r);
                for &dt in dts {
                    let dtype = match dt {
                        Dt::F32 => ops::DType::F32,
                        Dt::F16 => ops::DType::F16,
                        Dt::Bf16 => ops::DType::Bf16,
                    };
                    let plan =
                        ops::choose_linear(m as u32, k as u32, n as u32, dtype, silu_mul, &caps);
                    // The rule picks per adapter: with many compute units a
                    // narrow shape may still split K; every case is checked
                    // whatever it runs, and some must run unsplit.
                    unsplit += usize::from(plan.splits == 1);
                    let gw = upload_w(&gpu, dt, &inp.w);
                    let (gx, y) = (gpu.upload(&inp.x).unwrap(), gpu.upload(&inp.r).unwrap());
                    let e = match epi {
                        Epi::ResidualInPlace => Epilogue::Residual(&y),
                        Epi::SiluMul => Epilogue::SiluMul,
                        _ => Epilogue::None,
                    };
                    let (mu, ku, nu) = (m as u32, k as u32, n as u32);
                    ops::linear(&mut batch, &gx, gw.weights(), &y, mu, ku, nu, e).unwrap();
                    keep.push(gx);
                    cases.push((
                        dt,
                        Case {
                            inputs: Rc::clone(&inp),
                            rows: plan.rows_per_pass,
                            splits: plan.splits,
                            y,
                        },
                    ));
                }
            }
        }
    }
    batch.submit().unwrap();
    for (dt, c) in &cases {
        check(c, &c.y.download().unwrap(), *dt);
    }
    common::assert_clean(&gpu);
    unsplit
}

#[test]
fn a_graph_runs_split_k_layers_again_and_again() {
    // Two layers in a graph, the second reading the first's output through
    // a barrier; its split-K scratch lives as long as the graph.
    let gpu = common::gpu();
    let (m, k, i) = (3usize, 264usize, 40usize);
    let mut rng = common::Rng::new(11);
    let (x, wgu, wd) = (
        rng.vec_f32(m * k),
        rng.vec_f32(2 * i * k),
        rng.vec_f32(k * i),
    );
    let (gx, gwgu, gwd) = (
        gpu.upload(&x).unwrap(),
        gpu.upload(&wgu).unwrap(),
        gpu.upload(&wd).unwrap(),
    );
    let h = gpu.alloc::<f32>(m * i).unwrap();
    let y = gpu.upload(&x).unwrap();
    let split = LinearPlan {
        rows_per_pass: 4,
        splits: 2,
    };
    let (mu, ku, iu) = (m as u32, k as u32, i as u32);
    let mut rec = gpu.graph_recorder().unwrap();
    ops::linear_with_plan(
        &mut rec,
        &gx,
        &gwgu,
        &h,
        mu,
        ku,
        2 * iu,
        Epilogue::SiluMul,
        split,
    )
    .unwrap();
    rec.barrier();
    ops::linear_with_plan(
        &mut rec,
        &h,
        &gwd,
        &y,
        mu,
        iu,
        ku,
        Epilogue::Residual(&y),
        split,
    )
    .unwrap();
    let graph = rec.finish().unwrap();
    // y starts as x; each launch adds the FFN of x.
    let _first = graph.launch().unwrap();
    graph.launch().unwrap().wait().unwrap();
    let hid = Case {
        inputs: Inputs::new(m, k, 2 * i, Epi::SiluMul, x.clone(), wgu, Vec::new()),
        rows: 4,
        splits: 2,
        y: h,
    };
    let hv = hid.y.download().unwrap();
    check(&hid, &hv, Dt::F32);
    // Two launches: y = (x + f) + f with f = h·Wdᵀ, two sums of I products
    // and two roundings of the residual add each.
    let yv = y.download().unwrap();
    let u = f64::powi(2.0, -24);
    for row in 0..m {
        for c in 0..k {
            let (f, a) = dot(&hv[row * i..(row + 1) * i], &wd[c * i..(c + 1) * i]);
            let want = f64::from(x[row * k + c]) + 2.0 * f;
            let bound = 2.0 * 1.01 * (i as f64 * u * a + u * (want.abs() + a));
            let got = f64::from(yv[row * k + c]);
            assert!(
                (got - want).abs() <= bound,
                "y[{row}][{c}] = {got}, f64 says {want} (bound {bound})"
            );
        }
    }
    assert_eq!(graph.num_replays(), 2);
    common::assert_clean(&gpu);
}

#[test]
fn bad_inputs_are_typed_errors() {
    let gpu = common::gpu();
    let x = gpu.alloc::<f32>(2 * 8).unwrap();
    let w = gpu.alloc::<f32>(6 * 8).unwrap();
    let y = gpu.alloc::<f32>(2 * 6).unwrap();
    let mut b = gpu.batch().unwrap();
    let shape_err = |r: vkcompute::Result<()>, want: &str| match r {
        Err(Error::OpShape { op, detail }) => {
            assert_eq!(op, "ops::linear");
            assert!(detail.contains(want), "{detail:?} lacks {want:?}");
        }
        other => panic!("expected an OpShape error about {want:?}, got {other:?}"),
    };
    shape_err(
        ops::linear(&mut b, &x, &w, &y, 0, 8, 6, Epilogue::None),
        "at least 1",
    );
    let big = gpu.alloc::<f32>(65 * 8).unwrap();
    let bigy = gpu.alloc::<f32>(65 * 6).unwrap();
    shape_err(
        ops::linear(&mut b, &big, &w, &bigy, 65, 8, 6, Epilogue::None),
        "limit of 64",
    );
    shape_err(
        ops::linear(&mut b, &x, &w, &y, 2, 8, 5, Epilogue::None),
        "W holds 48 elements; n·k = 40",
    );
    shape_err(
        ops::linear(&mut b, &x, &w, &y, 2, 8, 6, Epilogue::SiluMul),
        "y holds 12 elements; m·n/2 = 6",
    );
    let w5 = gpu.alloc::<f32>(5 * 8).unwrap();
    let y5 = gpu.alloc::<f32>(2 * 5).unwrap();
    shape_err(
        ops::linear(&mut b, &x, &w5, &y5, 2, 8, 5, Epilogue::SiluMul),
        "n = 5 is odd",
    );
    let short = gpu.alloc::<f32>(3).unwrap();
    shape_err(
        ops::linear(&mut b, &x, &w, &y, 2, 8, 6, Epilogue::Residual(&short)),
        "the residual holds 3 elements",
    );
    let sq = gpu.alloc::<f32>(2 * 2).unwrap();
    let wsq = gpu.alloc::<f32>(2 * 2).unwrap();
    shape_err(
        ops::linear(&mut b, &sq, &wsq, &sq, 2, 2, 2, Epilogue::None),
        "same buffer as x or W",
    );
    shape_err(
        ops::linear(&mut b, &sq, &wsq, &wsq, 2, 2, 2, Epilogue::None),
        "same buffer as x or W",
    );
    let ysq = gpu.alloc::<f32>(2 * 2).unwrap();
    shape_err(
        ops::linear(&mut b, &sq, &wsq, &ysq, 2, 2, 2, Epilogue::Residual(&sq)),
        "the residual is x",
    );
    for plan in [
        LinearPlan {
            rows_per_pass: 3,
            splits: 1,
        },
        LinearPlan {
            rows_per_pass: 4,
            splits: 0,
        },
    ] {
        shape_err(
            ops::linear_with_plan(&mut b, &x, &w, &y, 2, 8, 6, Epilogue::None, plan),
            "rows per pass must be",
        );
    }
    // The tiled kernel's 32-row tiles take at most 32 rows.
    let (x33, y33) = (
        gpu.alloc::<f32>(33 * 8).unwrap(),
        gpu.alloc::<f32>(33 * 6).unwrap(),
    );
    let p32 = LinearPlan {
        rows_per_pass: 32,
        splits: 1,
    };
    shape_err(
        ops::linear_with_plan(&mut b, &x33, &w, &y33, 33, 8, 6, Epilogue::None, p32),
        "32-row tiles",
    );
    // Nothing was recorded: the batch submits empty and clean.
    b.submit().unwrap();
    common::assert_clean(&gpu);
}
