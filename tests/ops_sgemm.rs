//! The f32 SGEMM (`MatmulKernel::Sgemm`, `shaders/matmul_f32_big.comp`):
//! every compiled tile, with and without split-K, with 16-byte and scalar
//! loads, on shapes that are no tile multiple, against an f64 reference;
//! the default plan's split-K; the M = 1 16-byte kernel with and without
//! K layers (`MatmulKernel::VecMat4`, the same partials-and-reduce
//! scheme); bad plans as typed errors.
//!
//! Error bound per entry: |ĉ − c| ≤ γ_K·Σ_k |a_ik|·|b_kj| with γ_K ≈ K·u,
//! u = 2⁻²⁴, whatever the order of the K − 1 additions (FMA chains per
//! slice, then the slices added in order: still K − 1 roundings at most).
//! The test allows 1.01·K·u·Σ|a||b| (≤ K²·u·max|a|·max|b|), plus 1e-30 for
//! exact zeros. A wrong index or a lost slice is off by about |c|, far
//! above it.

mod common;

use vkcompute::ops::matmul::{choose_sgemm, sgemm_split, SGEMM_MAX_SPLITS, VECMAT4_MAX_SPLITS};
use vkcompute::ops::{self, MatmulCaps, MatmulDtype, MatmulKernel, MatmulPlan, SgemmTile};
use vkcompute::{Device, Error};

/// Worst |ĉ − c| / (K·u·Σ|a||b|) over C, against f64.
fn worst_ratio(got: &[f32], a: &[f32], b: &[f32], (m, k, n): (usize, usize, usize)) -> f64 {
    let u = f64::powi(2.0, -24);
    let mut worst = 0f64;
    for i in 0..m {
        for j in 0..n {
            let (mut c, mut s) = (0f64, 0f64);
            for p in 0..k {
                let t = f64::from(a[i * k + p]) * f64::from(b[p * n + j]);
                c += t;
                s += t.abs();
            }
            let r = (f64::from(got[i * n + j]) - c).abs() / (k as f64 * u * s + 1e-30);
            if r.is_nan() || r > worst {
                worst = if r.is_nan() { f64::INFINITY } else { r };
            }
        }
    }
    worst
}

/// Runs `plan` on random inputs; returns C, A and B.
fn run(gpu: &Device, (m, k, n): (u32, u32, u32), plan: Option<MatmulPlan>) -> [Vec<f32>; 3] {
    let mut rng = common::Rng::new(u64::from(m) * 1_000_003 + u64::from(k) * 1_009 + u64::from(n));
    let a = rng.vec_f32((m * k) as usize);
    let b = rng.vec_f32((k * n) as usize);
    let (ga, gb) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
    let gc = gpu.alloc::<f32>((m * n) as usize).unwrap();
    let mut batch = gpu.batch().unwrap();
    match plan {
        None => ops::matmul(&mut batch, &ga, &gb, &gc, m, k, n).unwrap(),
        Some(p) => ops::matmul::matmul_with_plan(&mut batch, &ga, &gb, &gc, m, k, n, p).unwrap(),
    }
    batch.submit().unwrap();
    [gc.download().unwrap(), a, b]
}

fn sgemm(tile: SgemmTile, splits: u32) -> MatmulPlan {
    MatmulPlan {
        kernel: MatmulKernel::Sgemm { tile, splits },
        widen_f16: false,
    }
}

/// Checks `plan` at `shape` against the bound.
fn check(gpu: &Device, shape: (u32, u32, u32), plan: MatmulPlan) {
    let [c, a, b] = run(gpu, shape, Some(plan));
    let (m, k, n) = shape;
    let r = worst_ratio(&c, &a, &b, (m as usize, k as usize, n as usize));
    assert!(
        r <= 1.01,
        "{m}×{k}×{n} with {plan:?}: an entry is off by {r:.3}× K·u·Σ|a||b|"
    );
}

/// The tiles this adapter takes (the 128×128×16 one needs 33 KiB of
/// shared memory, more than lavapipe's 32 KiB).
fn tiles(gpu: &Device) -> Vec<SgemmTile> {
    let caps = MatmulCaps::of(gpu.info());
    SgemmTile::ALL
        .into_iter()
        .filter(|t| {
            let fits = t.fits(&caps);
            if !fits {
                common::skipped(format!(
                    "SGEMM tile {t:?}: {} bytes of shared memory; {} allows {}",
                    t.shared_bytes(),
                    gpu.info().name,
                    caps.max_shared_memory
                ));
            }
            fits
        })
        .collect()
}

#[test]
fn every_tile_matches_f64_on_odd_shapes_with_and_without_split_k() {
    let gpu = common::gpu();
    let tiles = tiles(&gpu);
    assert!(!tiles.is_empty(), "no SGEMM tile fits {}", gpu.info().name);
    let dims = [1u32, 15, 17, 127, 129, 300];
    // Every M, K, N of `dims`: each tile with one slice and with split-K
    // (3 slices asked; K = 1, 15 and 17 stay unsplit with 16-deep slices),
    // the plans taking turns so each shape costs one run. Only K = N = 300
    // here are multiples of 4 (16-byte loads); the rest load scalars.
    let plans: Vec<MatmulPlan> = tiles
        .iter()
        .flat_map(|&t| [sgemm(t, 1), sgemm(t, 3)])
        .collect();
    let mut i = 0;
    for m in dims {
        for k in dims {
            for n in dims {
                check(&gpu, (m, k, n), plans[i % plans.len()]);
                i += 1;
            }
        }
    }
    // 16-byte loads: K and N multiples of 4, edges in every dimension, a
    // K tail, every tile with and without split-K.
    for (m, k, n) in [(1, 4, 4), (17, 12, 16), (129, 300, 132), (130, 36, 260)] {
        for &p in &plans {
            check(&gpu, (m, k, n), p);
        }
    }
    common::assert_clean(&gpu);
}

#[test]
fn long_dimensions_of_4097_match_f64() {
    let gpu = common::gpu();
    let tiles = tiles(&gpu);
    for &t in &tiles {
        // K = 4097 (scalar), unsplit and in the most slices; K = 4096
        // (16-byte) in the most slices; M = 4097 (33 block rows).
        check(&gpu, (5, 4097, 7), sgemm(t, 1));
        check(&gpu, (5, 4097, 7), sgemm(t, SGEMM_MAX_SPLITS));
        check(&gpu, (3, 4096, 8), sgemm(t, SGEMM_MAX_SPLITS));
        check(&gpu, (4097, 9, 6), sgemm(t, 1));
        check(&gpu, (4097, 16, 4), sgemm(t, 2));
    }
    common::assert_clean(&gpu);
}

#[test]
fn the_default_splits_small_grids_and_is_deterministic() {
    let gpu = common::gpu();
    let caps = MatmulCaps::of(gpu.info());
    let shape = (127, 255, 63);
    let plan = ops::choose_matmul(shape.0, shape.1, shape.2, MatmulDtype::F32, &caps);
    let Some((tile, splits)) = choose_sgemm(shape.0, shape.1, shape.2, &caps) else {
        common::skipped(format!("no SGEMM tile fits {}", gpu.info().name));
        return;
    };
    assert_eq!(plan.kernel, MatmulKernel::Sgemm { tile, splits });
    // Two blocks of 64×64 are fewer than any adapter's "enough".
    assert!(sgemm_split(shape.1, splits, tile.bk).slices > 1, "{plan:?}");
    let [c1, a, b] = run(&gpu, shape, None);
    let r = worst_ratio(&c1, &a, &b, (127, 255, 63));
    assert!(r <= 1.01, "default split-K plan: off by {r:.3}× the bound");
    // The slices are added in a fixed order: the same bits every time.
    let [c2, _, _] = run(&gpu, shape, None);
    assert_eq!(
        c1.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        c2.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
    // A large square takes one slice, and matches as well.
    let big = (260, 64, 200);
    let [c, a, b] = run(&gpu, big, None);
    assert!(worst_ratio(&c, &a, &b, (260, 64, 200)) <= 1.01);
    common::assert_clean(&gpu);
}

#[test]
fn m1_vec4_kernel_matches_f64_with_and_without_k_layers() {
    let gpu = common::gpu();
    let plan = |splits| MatmulPlan {
        kernel: MatmulKernel::VecMat4 { splits },
        widen_f16: false,
    };
    for (k, n) in [(1, 4), (15, 8), (17, 132), (300, 200), (4097, 12)] {
        for splits in [1, 3, VECMAT4_MAX_SPLITS] {
            check(&gpu, (1, k, n), plan(splits));
        }
    }
    // The default at M = 1 (K layers where the columns are few).
    let [c, a, b] = run(&gpu, (1, 1000, 260), None);
    assert!(worst_ratio(&c, &a, &b, (1, 1000, 260)) <= 1.01);
    common::assert_clean(&gpu);
}

#[test]
fn bad_sgemm_plans_are_typed_errors() {
    let gpu = common::gpu();
    let buf = |len: usize| gpu.alloc::<f32>(len).unwrap();
    let (a, b, c) = (buf(64), buf(64), buf(64));
    let mut batch = gpu.batch().unwrap();
    let expect = |r: vkcompute::Result<()>, needle: &str| match r {
        Err(Error::MatmulShape { detail, .. }) => {
            assert!(detail.contains(needle), "{detail:?} lacks {needle:?}")
        }
        other => panic!("expected MatmulShape ({needle}), got {other:?}"),
    };
    for splits in [0, SGEMM_MAX_SPLITS + 1] {
        let r = ops::matmul::matmul_with_plan(
            &mut batch,
            &a,
            &b,
            &c,
            8,
            8,
            8,
            sgemm(SgemmTile::LARGE, splits),
        );
        expect(r, "K slices");
    }
    let odd = SgemmTile {
        bm: 96,
        ..SgemmTile::LARGE
    };
    let r = ops::matmul::matmul_with_plan(&mut batch, &a, &b, &c, 8, 8, 8, sgemm(odd, 1));
    expect(r, "compiled tiles");
    let vm = |splits| MatmulPlan {
        kernel: MatmulKernel::VecMat4 { splits },
        widen_f16: false,
    };
    // M = 1 with N = 64 (a multiple of 4), then N = 6, then M = 8.
    let a1 = buf(1);
    for splits in [0, VECMAT4_MAX_SPLITS + 1] {
        let r = ops::matmul::matmul_with_plan(&mut batch, &a1, &b, &c, 1, 1, 64, vm(splits));
        expect(r, "K slices");
    }
    let (b6, c6) = (buf(6), buf(6));
    let r = ops::matmul::matmul_with_plan(&mut batch, &a1, &b6, &c6, 1, 1, 6, vm(1));
    expect(r, "multiple of 4");
    let r = ops::matmul::matmul_with_plan(&mut batch, &a, &b, &c, 8, 8, 8, vm(1));
    expect(r, "M = 1");
    drop(batch);
    common::assert_clean(&gpu);
}
