//! Built-in matmul against a CPU f64 reference, on every kernel path, and
//! every bad shape as a typed error.
//!
//! Error bound: each C[i][j] is a sum of K products computed in f32 in some
//! order (FMA chains, then sums of partial chains). Whatever the order, the
//! classical bound is |ĉ − c| ≤ γ_K · Σ_k |a_ik|·|b_kj| with γ_K = K·u/(1 − K·u)
//! and u = 2⁻²⁴ (each product rounds at most once, each addition once, and
//! FMA only removes roundings). The tests allow 1.01·K·u·Σ|a||b| per entry
//! (plus 1e-30 for exact zeros); f16 inputs are exact in f32 and their
//! products exact in f32 (11 + 11 significant bits), so the same bound holds
//! for the widened path; tensor-core accumulation may truncate instead of
//! rounding, so the cooperative-matrix path gets 2·K·u.

mod common;

use vkcompute::ops::{
    self, MatmulCaps, MatmulDtype, MatmulKernel, MatmulPlan, SgemmTile, TileConfig,
};
use vkcompute::{Buffer, Device, Error};

/// Row-major f64 reference: (C, Σ|a||b| per entry).
fn reference(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut c = vec![0f64; m * n];
    let mut s = vec![0f64; m * n];
    for i in 0..m {
        for p in 0..k {
            let x = f64::from(a[i * k + p]);
            let row = &b[p * n..(p + 1) * n];
            let (ci, si) = (&mut c[i * n..(i + 1) * n], &mut s[i * n..(i + 1) * n]);
            for j in 0..n {
                let y = f64::from(row[j]);
                ci[j] += x * y;
                si[j] += (x * y).abs();
            }
        }
    }
    (c, s)
}

/// Fails with the worst entry if any exceeds `factor`·K·u·Σ|a||b|.
fn check(got: &[f32], a: &[f32], b: &[f32], (m, k, n): (usize, usize, usize), factor: f64) {
    let (want, abs) = reference(a, b, m, k, n);
    let u = f64::powi(2.0, -24);
    let mut worst = (0.0f64, 0usize);
    for idx in 0..m * n {
        let err = (f64::from(got[idx]) - want[idx]).abs();
        let bound = factor * k as f64 * u * abs[idx] + 1e-30;
        let ratio = err / bound;
        if ratio > worst.0 || ratio.is_nan() {
            worst = (ratio, idx);
        }
    }
    let (r, idx) = worst;
    assert!(
        r <= 1.0,
        "{m}×{k}×{n}: C[{}][{}] = {} but f64 says {} (error {:.3}× the bound)",
        idx / n,
        idx % n,
        got[idx],
        want[idx],
        r
    );
}

fn inputs(seed: u64, m: usize, k: usize, n: usize) -> (Vec<f32>, Vec<f32>) {
    let mut rng = common::Rng::new(seed);
    (rng.vec_f32(m * k), rng.vec_f32(k * n))
}

fn run_f32(
    gpu: &Device,
    m: u32,
    k: u32,
    n: u32,
    plan: Option<MatmulPlan>,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let (a, b) = inputs(
        u64::from(m * 31 + k * 7 + n),
        m as usize,
        k as usize,
        n as usize,
    );
    let (ga, gb) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
    let gc = gpu.alloc::<f32>((m * n) as usize).unwrap();
    let mut batch = gpu.batch().unwrap();
    match plan {
        None => ops::matmul(&mut batch, &ga, &gb, &gc, m, k, n).unwrap(),
        Some(p) => ops::matmul::matmul_with_plan(&mut batch, &ga, &gb, &gc, m, k, n, p).unwrap(),
    }
    batch.submit().unwrap();
    (gc.download().unwrap(), a, b)
}

#[test]
fn every_shape_matches_the_cpu() {
    let gpu = common::gpu();
    let caps = MatmulCaps::of(gpu.info());
    for (m, k, n) in [
        (1, 300, 200), // 1×K: the M = 1 GEMV kernel, 16-byte, K split
        (1, 300, 201), // the same, scalar
        (200, 300, 1), // K×1: the N = 1 GEMV kernel
        (1, 1, 1),
        (127, 255, 63),   // nothing a tile multiple
        (37, 1, 53),      // K = 1
        (64, 8, 64),      // exactly one small tile
        (513, 1025, 257), // many edge blocks and a K tail
    ] {
        let plan = ops::choose_matmul(m, k, n, MatmulDtype::F32, &caps);
        if m == 1 && n != 1 {
            if n % 4 == 0 {
                assert!(
                    matches!(plan.kernel, MatmulKernel::VecMat4 { .. }),
                    "{plan:?}"
                );
            } else {
                assert_eq!(plan.kernel, MatmulKernel::VecMat);
            }
        }
        if n == 1 {
            let want = if k % 4 == 0 {
                MatmulKernel::MatVec4
            } else {
                MatmulKernel::MatVec
            };
            assert_eq!(plan.kernel, want);
        }
        let (c, a, b) = run_f32(&gpu, m, k, n, None);
        check(&c, &a, &b, (m as usize, k as usize, n as usize), 1.01);
    }
    common::assert_clean(&gpu);
}

#[test]
fn each_tile_is_right_inside_and_at_the_edges() {
    let gpu = common::gpu();
    for tile in [TileConfig::LARGE, TileConfig::SMALL, TileConfig::NARROW] {
        let plan = MatmulPlan {
            kernel: MatmulKernel::Tiled(tile),
            widen_f16: false,
        };
        // Whole blocks only (the unguarded path), then every edge at once.
        for (m, k, n) in [(256, 16, 256), (130, 33, 259)] {
            let (c, a, b) = run_f32(&gpu, m, k, n, Some(plan));
            check(&c, &a, &b, (m as usize, k as usize, n as usize), 1.01);
        }
    }
    common::assert_clean(&gpu);
}

/// The 16-byte tiles the example's sweep times (`_v4`, `_v4w`, `_v4p` and `_v4wp` rows),
/// and one scalar 128-thread tile.
fn vec4_tiles() -> Vec<TileConfig> {
    let l = TileConfig::LARGE;
    let v4 = |t: TileConfig| TileConfig { vec4: true, ..t };
    let v4w = |t: TileConfig| TileConfig {
        compact_warps: true,
        ..v4(t)
    };
    let v4p = |t: TileConfig| TileConfig {
        frag_prefetch: true,
        ..v4(t)
    };
    vec![
        TileConfig { tn: 16, ..l },
        v4(l),
        v4(TileConfig { bk: 16, ..l }),
        v4(TileConfig { tn: 16, ..l }),
        v4(TileConfig { tm: 16, ..l }),
        v4(TileConfig {
            bk: 16,
            tn: 16,
            ..l
        }),
        v4(TileConfig {
            bn: 256,
            tn: 16,
            ..l
        }),
        v4(TileConfig {
            bm: 256,
            tm: 16,
            ..l
        }),
        // 16-deep slices within lavapipe's 32 KiB of shared memory.
        v4(TileConfig {
            bk: 16,
            ..TileConfig::NARROW
        }),
        v4w(l),
        v4w(TileConfig { bk: 16, ..l }),
        v4w(TileConfig {
            bn: 256,
            tn: 16,
            ..l
        }),
        v4w(TileConfig {
            bm: 256,
            tm: 16,
            ..l
        }),
        v4w(TileConfig { tm: 16, ..l }),
        v4p(v4w(l)),
        v4p(TileConfig { tn: 16, ..l }),
        v4p(TileConfig {
            bk: 16,
            ..TileConfig::NARROW
        }),
    ]
}

#[test]
fn vec4_tiles_are_right_aligned_and_not() {
    let gpu = common::gpu();
    let caps = MatmulCaps::of(gpu.info());
    for tile in vec4_tiles() {
        assert!(tile.is_valid(), "{tile:?}");
        if tile.shared_bytes() > caps.max_shared_memory
            || tile.threads() > caps.max_workgroup_invocations
        {
            common::skipped(format!(
                "tile {tile:?}: {} bytes of shared memory, {} threads; {} allows {} and {}",
                tile.shared_bytes(),
                tile.threads(),
                gpu.info().name,
                caps.max_shared_memory,
                caps.max_workgroup_invocations
            ));
            continue;
        }
        let plan = MatmulPlan {
            kernel: MatmulKernel::Tiled(tile),
            widen_f16: false,
        };
        // Whole blocks (the unguarded 16-byte path); K and N multiples of 4
        // with edges in M, N and a K tail (the guarded 16-byte path); then
        // shapes the 16-byte kernel must leave to the scalar one.
        for (m, k, n) in [
            (256, 32, 256),
            (130, 36, 260),
            (5, 4, 8),
            (130, 33, 259),
            (9, 12, 7),
        ] {
            assert_eq!(
                tile.vec4_applies(k, n),
                tile.vec4 && k % 4 == 0 && n % 4 == 0
            );
            let (c, a, b) = run_f32(&gpu, m, k, n, Some(plan));
            check(&c, &a, &b, (m as usize, k as usize, n as usize), 1.01);
        }
    }
    // The 64×64 tile moves 2 elements per thread: no whole vec4s.
    let bad = MatmulPlan {
        kernel: MatmulKernel::Tiled(TileConfig {
            vec4: true,
            ..TileConfig::SMALL
        }),
        widen_f16: false,
    };
    let buf = |len: usize| gpu.alloc::<f32>(len).unwrap();
    let (a, b, c) = (buf(16), buf(16), buf(16));
    let mut batch = gpu.batch().unwrap();
    shape_err(
        ops::matmul::matmul_with_plan(&mut batch, &a, &b, &c, 4, 4, 4, bad),
        "layout rules",
    );
    drop(batch);
    common::assert_clean(&gpu);
}

#[test]
fn a_chain_of_matmuls_in_one_batch() {
    // D = (A·B)·E with a barrier between: the second reads what the first wrote.
    let gpu = common::gpu();
    let (m, k, n, p) = (33usize, 20usize, 17usize, 9usize);
    let (a, b) = inputs(5, m, k, n);
    let e = common::Rng::new(6).vec_f32(n * p);
    let ga = gpu.upload(&a).unwrap();
    let gb = gpu.upload(&b).unwrap();
    let ge = gpu.upload(&e).unwrap();
    let gc = gpu.alloc::<f32>(m * n).unwrap();
    let gd = gpu.alloc::<f32>(m * p).unwrap();
    let mut batch = gpu.batch().unwrap();
    ops::matmul(&mut batch, &ga, &gb, &gc, m as u32, k as u32, n as u32).unwrap();
    batch.barrier();
    ops::matmul(&mut batch, &gc, &ge, &gd, m as u32, n as u32, p as u32).unwrap();
    batch.submit().unwrap();
    let c = gc.download().unwrap();
    check(&c, &a, &b, (m, k, n), 1.01);
    check(&gd.download().unwrap(), &c, &e, (m, n, p), 1.01);
    common::assert_clean(&gpu);
}

fn shape_err(r: vkcompute::Result<()>, needle: &str) {
    match r {
        Err(Error::MatmulShape { detail, .. }) => {
            assert!(detail.contains(needle), "{detail:?} lacks {needle:?}")
        }
        other => panic!("expected MatmulShape ({needle}), got {other:?}"),
    }
}

#[test]
fn bad_shapes_are_typed_errors() {
    let gpu = common::gpu();
    let buf = |len: usize| gpu.alloc::<f32>(len).unwrap();
    let (a, b, c) = (buf(6), buf(11), buf(8));
    let mut batch = gpu.batch().unwrap();
    shape_err(ops::matmul(&mut batch, &a, &b, &c, 2, 3, 4), "B holds 11");
    shape_err(ops::matmul(&mut batch, &a, &b, &c, 0, 3, 4), "at least 1");
    shape_err(ops::matmul(&mut batch, &a, &b, &c, 2, 0, 4), "at least 1");
    shape_err(ops::matmul(&mut batch, &a, &b, &c, 2, 3, 0), "at least 1");
    let b12 = buf(12);
    shape_err(
        ops::matmul(&mut batch, &b12, &b12, &c, 2, 3, 4),
        "A holds 12",
    );
    let (a6, c9) = (buf(6), buf(9));
    shape_err(
        ops::matmul(&mut batch, &a6, &b12, &c9, 2, 3, 4),
        "C holds 9",
    );
    // C may not be A or B.
    let sq = buf(4);
    shape_err(
        ops::matmul(&mut batch, &sq, &sq, &sq, 2, 2, 2),
        "same buffer",
    );
    // Over the 32-bit index range, before any length is compared.
    shape_err(
        ops::matmul(&mut batch, &a, &b, &c, 70_000, 70_000, 1),
        "32-bit index limit",
    );
    // A plan that does not fit the inputs or the kernel.
    let (a2, b3, c6) = (buf(2), buf(3), buf(6));
    let f16_plan = MatmulPlan {
        kernel: MatmulKernel::CoopMatF16(ops::CoopTile::DEFAULT),
        widen_f16: false,
    };
    shape_err(
        ops::matmul::matmul_with_plan(&mut batch, &a2, &b3, &c6, 2, 1, 3, f16_plan),
        "f16",
    );
    let matvec = MatmulPlan {
        kernel: MatmulKernel::MatVec,
        widen_f16: false,
    };
    shape_err(
        ops::matmul::matmul_with_plan(&mut batch, &a2, &b3, &c6, 2, 1, 3, matvec),
        "N = 1",
    );
    let bad_tile = MatmulPlan {
        kernel: MatmulKernel::Tiled(TileConfig {
            tm: 6,
            ..TileConfig::LARGE
        }),
        widen_f16: false,
    };
    shape_err(
        ops::matmul::matmul_with_plan(&mut batch, &a2, &b3, &c6, 2, 1, 3, bad_tile),
        "layout rules",
    );
    // A grid past maxComputeWorkGroupCount in x (64-column blocks).
    let limit = gpu.info().max_workgroup_count[0];
    let n = u64::from(limit) * 64 + 1;
    if n * 4 * 2 <= 1 << 28 {
        let n = n as u32;
        let (a, b, c) = (buf(2), buf(n as usize), buf(2 * n as usize));
        let plan = MatmulPlan {
            kernel: MatmulKernel::Tiled(TileConfig::SMALL),
            widen_f16: false,
        };
        shape_err(
            ops::matmul::matmul_with_plan(&mut batch, &a, &b, &c, 2, 1, n, plan),
            "maxComputeWorkGroupCount",
        );
    } else {
        common::skipped(format!(
            "grid-limit error: maxComputeWorkGroupCount[0] = {limit} needs too large a buffer"
        ));
    }
    assert!(batch.is_empty(), "a refused matmul recorded nothing");
    drop(batch);
    common::assert_clean(&gpu);
}

/// The bits of an f16 equal to `x`, for values f16 holds exactly (normal
/// or zero).
fn f16_bits(x: f32) -> u16 {
    if x == 0.0 {
        return 0;
    }
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32 - 127 + 15;
    assert!((1..31).contains(&exp), "{x} is not a normal f16");
    assert_eq!(bits & 0x1fff, 0, "{x} is not exact in f16");
    sign | ((exp as u16) << 10) | ((bits >> 13) & 0x3ff) as u16
}

fn f16_matmul(gpu: &Device, m: u32, k: u32, n: u32, factor: f64, plan: Option<MatmulPlan>) {
    // Multiples of 1/64 in [-1, 1): exact in f16.
    let mut rng = common::Rng::new(u64::from(m + k + n));
    let mut gen = |len: u32| -> Vec<f32> {
        (0..len)
            .map(|_| (rng.below(128) as f32 - 64.0) / 64.0)
            .collect()
    };
    let (a, b) = (gen(m * k), gen(k * n));
    let bits = |v: &[f32]| -> Vec<u16> { v.iter().map(|&x| f16_bits(x)).collect() };
    let ga: Buffer<u16> = gpu.upload(&bits(&a)).unwrap();
    let gb: Buffer<u16> = gpu.upload(&bits(&b)).unwrap();
    let gc = gpu.alloc::<f32>((m * n) as usize).unwrap();
    let mut batch = gpu.batch().unwrap();
    match plan {
        None => ops::matmul_f16(&mut batch, &ga, &gb, &gc, m, k, n).unwrap(),
        Some(p) => {
            ops::matmul::matmul_f16_with_plan(&mut batch, &ga, &gb, &gc, m, k, n, p).unwrap()
        }
    }
    batch.submit().unwrap();
    check(
        &gc.download().unwrap(),
        &a,
        &b,
        (m as usize, k as usize, n as usize),
        factor,
    );
}

#[test]
fn f16_inputs_widened_to_f32() {
    let gpu = common::gpu();
    if !gpu.info().storage_buffer16 {
        common::skipped(format!(
            "f16 matmul: {} lacks storageBuffer16BitAccess",
            gpu.info().name
        ));
        return;
    }
    // Without the workgroup-scope kernel (which takes any shape), K not a
    // multiple of 8 never takes the cooperative-matrix kernel: the plan
    // widens, and it is recorded by name.
    let caps = MatmulCaps::of(gpu.info()).with_coopmat2(None, 0);
    for (m, k, n) in [(127, 255, 63), (1, 33, 20), (20, 33, 1)] {
        let plan = ops::choose_matmul(m, k, n, MatmulDtype::F16, &caps);
        assert!(plan.widen_f16);
        f16_matmul(&gpu, m, k, n, 1.01, Some(plan));
    }
    let mut batch = gpu.batch().unwrap();
    let h = gpu.alloc::<u16>(6).unwrap();
    let c4 = gpu.alloc::<f32>(4).unwrap();
    let f32_plan = MatmulPlan {
        kernel: MatmulKernel::Tiled(TileConfig::SMALL),
        widen_f16: false,
    };
    shape_err(
        ops::matmul::matmul_f16_with_plan(&mut batch, &h, &h, &c4, 2, 3, 2, f32_plan),
        "f32 inputs",
    );
    // K = 3: never a cooperative-matrix shape.
    let coop = MatmulPlan {
        kernel: MatmulKernel::CoopMatF16(ops::CoopTile::DEFAULT),
        widen_f16: false,
    };
    shape_err(
        ops::matmul::matmul_f16_with_plan(&mut batch, &h, &h, &c4, 2, 3, 2, coop),
        "does not apply",
    );
    if MatmulCaps::of(gpu.info()).coopmat2_granularity.is_none() {
        let cm2 = MatmulPlan {
            kernel: MatmulKernel::CoopMat2F16(ops::Cm2Tile::SQUARE),
            widen_f16: false,
        };
        shape_err(
            ops::matmul::matmul_f16_with_plan(&mut batch, &h, &h, &c4, 2, 3, 2, cm2),
            "does not apply",
        );
    }
    let c = gpu.alloc::<f32>(5).unwrap();
    shape_err(
        ops::matmul_f16(&mut batch, &h, &h, &c, 2, 3, 2),
        "C holds 5",
    );
    drop(batch);
    common::assert_clean(&gpu);
}

#[test]
fn f16_on_cooperative_matrices() {
    let gpu = common::gpu();
    // The NV kernel's own rule: the caps without the workgroup-scope and
    // KHR kernels, which come first where they exist.
    let caps = MatmulCaps::of(gpu.info())
        .with_coopmat2(None, 0)
        .with_coopmat_khr_f16(false);
    let plan = ops::choose_matmul(256, 128, 256, MatmulDtype::F16, &caps);
    if !matches!(plan.kernel, MatmulKernel::CoopMatF16(_)) {
        common::skipped(format!(
            "cooperative-matrix matmul: {} has no usable 16×16×16 f16 shape \
             (NV shapes: {:?})",
            gpu.info().name,
            gpu.info().cooperative_matrix_nv_shapes
        ));
        return;
    }
    // Whole blocks, then edges in M and N (K, N multiples of 8).
    for (m, k, n) in [(256, 128, 256), (200, 72, 136), (17, 8, 24)] {
        let plan = ops::choose_matmul(m, k, n, MatmulDtype::F16, &caps);
        assert_eq!(
            plan.kernel,
            MatmulKernel::CoopMatF16(ops::CoopTile::DEFAULT)
        );
        f16_matmul(&gpu, m, k, n, 2.0, Some(plan));
    }
    for tile in [ops::CoopTile::WIDE, ops::CoopTile::TALL] {
        let plan = MatmulPlan {
            kernel: MatmulKernel::CoopMatF16(tile),
            widen_f16: false,
        };
        for (m, k, n) in [(256, 64, 256), (300, 40, 264)] {
            f16_matmul(&gpu, m, k, n, 2.0, Some(plan));
        }
    }
    common::assert_clean(&gpu);
}

#[test]
fn f16_on_khr_cooperative_matrices() {
    let gpu = common::gpu();
    let caps = MatmulCaps::of(gpu.info());
    if !caps.coopmat_khr_f16 || !ops::matmul::subgroup_coop_fits(256, 128, 256, &caps) {
        common::skipped(format!(
            "KHR cooperative-matrix matmul: {} lists no usable 16×16×16 f16 shape under \
             VK_KHR_cooperative_matrix (KHR shapes: {:?}; subgroup size {})",
            gpu.info().name,
            gpu.info().cooperative_matrix_shapes,
            caps.subgroup_size
        ));
        return;
    }
    // Every compiled tile by name: whole blocks, edges in M and N (K and N
    // multiples of 8), a K of one slice and of many.
    for tile in [
        ops::CoopTile::DEFAULT,
        ops::CoopTile::WIDE,
        ops::CoopTile::TALL,
    ] {
        let plan = MatmulPlan {
            kernel: MatmulKernel::CoopMatKhrF16(tile),
            widen_f16: false,
        };
        for (m, k, n) in [
            (256, 128, 256),
            (200, 72, 136),
            (17, 8, 24),
            (300, 1032, 264),
        ] {
            f16_matmul(&gpu, m, k, n, 2.0, Some(plan));
        }
    }
    common::assert_clean(&gpu);
}

#[test]
fn f16_on_workgroup_cooperative_matrices() {
    let gpu = common::gpu();
    let caps = MatmulCaps::of(gpu.info());
    if caps.coopmat2_granularity.is_none() {
        common::skipped(format!(
            "workgroup-scope cooperative-matrix matmul: {} has no usable \
             VK_NV_cooperative_matrix2 f16 shape for 256 invocations ({:?})",
            gpu.info().name,
            gpu.info().cooperative_matrix_features.nv2
        ));
        return;
    }
    // The default plan is the workgroup-scope kernel for any matrix shape.
    for (m, k, n) in [(15, 17, 127), (300, 200, 520)] {
        let plan = ops::choose_matmul(m, k, n, MatmulDtype::F16, &caps);
        assert!(
            matches!(plan.kernel, MatmulKernel::CoopMat2F16(_)),
            "{plan:?}"
        );
        f16_matmul(&gpu, m, k, n, 2.0, None);
    }
    // Every tile by name: ones, odd sides on both sides of a block and of
    // a slice, whole blocks, a long K with a partial last slice.
    let shapes = [
        (1, 1, 1),
        (1, 17, 15),
        (15, 1, 17),
        (17, 15, 1),
        (127, 129, 131),
        (128, 64, 256),
        (129, 72, 257),
        (257, 4097, 40),
    ];
    for tile in ops::Cm2Tile::ALL {
        if !tile.fits(&caps) {
            common::skipped(format!(
                "coopmat2 tile {tile:?}: the adapter's granularity {:?} does not divide it",
                caps.coopmat2_granularity
            ));
            continue;
        }
        let plan = MatmulPlan {
            kernel: MatmulKernel::CoopMat2F16(tile),
            widen_f16: false,
        };
        for (m, k, n) in shapes {
            f16_matmul(&gpu, m, k, n, 2.0, Some(plan));
        }
    }
    common::assert_clean(&gpu);
}

#[test]
fn choose_matmul_per_shape_and_adapter() {
    // Pure: no device. An H200-like adapter and a lavapipe-like one.
    let h200 = MatmulCaps::new(32, 49152, 1024, 132).with_coopmat_f16(true);
    let cpu = MatmulCaps::new(8, 32768, 1024, 0);
    let f32_kernel =
        |m, k, n, caps: &MatmulCaps| ops::choose_matmul(m, k, n, MatmulDtype::F32, caps).kernel;
    let large = MatmulKernel::Sgemm {
        tile: SgemmTile::LARGE,
        splits: 1,
    };
    assert_eq!(
        f32_kernel(8192, 8192, 8192, &h200),
        MatmulKernel::Tiled(ops::TileConfig::DEEP_VEC4)
    );
    assert_eq!(f32_kernel(4097, 4097, 4097, &h200), large);
    // Two 64×64 blocks: split-K, 7 slices of at least 32.
    assert_eq!(
        f32_kernel(127, 255, 63, &h200),
        MatmulKernel::Sgemm {
            tile: SgemmTile::MEDIUM,
            splits: 7
        }
    );
    assert_eq!(f32_kernel(8192, 8192, 1, &h200), MatmulKernel::MatVec4);
    assert_eq!(f32_kernel(8192, 8191, 1, &cpu), MatmulKernel::MatVec);
    // M = 1: 32 workgroups of 128 columns; 256 wanted → 8 K layers.
    assert_eq!(
        f32_kernel(1, 4096, 4096, &cpu),
        MatmulKernel::VecMat4 { splits: 8 }
    );
    assert_eq!(f32_kernel(1, 4096, 4095, &cpu), MatmulKernel::VecMat);
    let f16 = |m, k, n, caps: &MatmulCaps| ops::choose_matmul(m, k, n, MatmulDtype::F16, caps);
    assert_eq!(
        f16(8192, 8192, 8192, &h200).kernel,
        MatmulKernel::CoopMatF16(ops::CoopTile::DEFAULT)
    );
    let widened = f16(8192, 8192, 8192, &cpu);
    assert!(widened.widen_f16);
    assert_eq!(widened.kernel, large);
    assert!(f16(4096, 4095, 4096, &h200).widen_f16);
    // With VK_NV_cooperative_matrix2's workgroup-scope shape: any shape;
    // rows that are not 16-byte units (K = 4095) take the 128×256 tile with
    // four slices per step.
    let h100 = h200.with_coopmat2(Some([16, 16, 16]), 65535);
    assert_eq!(
        f16(4096, 4095, 4096, &h100).kernel,
        MatmulKernel::CoopMat2F16(ops::Cm2Tile::WIDE_U4)
    );
    assert_eq!(
        f16(4096, 4096, 4096, &h100).kernel,
        MatmulKernel::CoopMat2F16(ops::Cm2Tile::SQUARE_GROUPED)
    );
    assert_eq!(
        f16(1024, 1024, 1024, &h100).kernel,
        MatmulKernel::CoopMat2F16(ops::Cm2Tile::SMALL)
    );
}
