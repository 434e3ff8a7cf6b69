use super::*;

fn h200() -> MatmulCaps {
    MatmulCaps::new(32, 49152, 1024, 132).with_coopmat_f16(true)
}

/// An H100 whose driver lists VK_NV_cooperative_matrix2 with a
/// 16×16×16-granular workgroup-scope f16 shape.
fn h100_cm2() -> MatmulCaps {
    MatmulCaps::new(32, 49152, 1024, 132)
        .with_coopmat_f16(true)
        .with_coopmat2(Some([16, 16, 16]), 65535)
}

fn lavapipe() -> MatmulCaps {
    MatmulCaps::new(8, 32768, 1024, 0)
}

/// The SGEMM's tile and requested K slices of a plan.
fn sgemm(p: MatmulPlan) -> (SgemmTile, u32) {
    match p.kernel {
        MatmulKernel::Sgemm { tile, splits } => (tile, splits),
        other => panic!("expected the SGEMM, got {other:?}"),
    }
}

fn tiled(p: MatmulPlan) -> TileConfig {
    match p.kernel {
        MatmulKernel::Tiled(t) => t,
        other => panic!("expected the tiled kernel, got {other:?}"),
    }
}

#[test]
fn built_in_tiles_obey_the_kernel_rules() {
    for t in [TileConfig::LARGE, TileConfig::SMALL, TileConfig::NARROW] {
        assert!(t.is_valid(), "{t:?}");
        assert!(t.shared_bytes() <= 16384 + 512, "{t:?}");
    }
    assert_eq!(TileConfig::LARGE.threads(), 256);
    assert_eq!(TileConfig::NARROW.threads(), 128);
    let bad = TileConfig {
        tm: 6,
        ..TileConfig::LARGE
    };
    assert!(!bad.is_valid());
    let bad = TileConfig {
        bk: 1,
        ..TileConfig::LARGE
    };
    assert!(
        !bad.is_valid(),
        "a 1-deep slice has fewer elements than threads"
    );
}

#[test]
fn vec4_needs_whole_chunks_and_an_aligned_shape() {
    let v4 = |t: TileConfig| TileConfig { vec4: true, ..t };
    let large = v4(TileConfig::LARGE);
    assert!(large.is_valid());
    assert_eq!(large.shared_bytes(), TileConfig::LARGE.shared_bytes());
    // 128 threads of 8×16: 8 elements of A and of B each.
    assert!(v4(TileConfig {
        tn: 16,
        ..TileConfig::LARGE
    })
    .is_valid());
    // 2 elements per thread (64×64×8 on 256 threads; 64×32 on 128):
    // not whole vec4s.
    assert!(!v4(TileConfig::SMALL).is_valid());
    assert!(!v4(TileConfig::NARROW).is_valid());
    assert!(v4(TileConfig {
        bk: 16,
        ..TileConfig::NARROW
    })
    .is_valid());
    assert!(large.vec4_applies(4096, 4096));
    assert!(large.vec4_applies(4, 8));
    assert!(!large.vec4_applies(4097, 4096));
    assert!(!large.vec4_applies(4096, 4097));
    assert!(!large.vec4_applies(255, 63));
    assert!(!TileConfig::LARGE.vec4_applies(4096, 4096));
}

#[test]
fn coop_tiles_obey_the_kernel_rules() {
    for t in [CoopTile::DEFAULT, CoopTile::WIDE, CoopTile::TALL] {
        assert!(t.is_valid(), "{t:?}");
        // Within the 48 KiB NVIDIA gives a workgroup without opting in.
        assert!(t.shared_bytes() <= 48 * 1024, "{t:?}: {}", t.shared_bytes());
    }
    assert_eq!((CoopTile::DEFAULT.bm(), CoopTile::DEFAULT.bn()), (128, 128));
    assert_eq!((CoopTile::WIDE.bm(), CoopTile::WIDE.bn()), (128, 256));
    assert_eq!((CoopTile::TALL.bm(), CoopTile::TALL.bn()), (256, 128));
    assert_eq!(CoopTile::DEFAULT.shared_bytes(), 46080);
    // 32-deep slices of 128×256 blocks: valid, but over 48 KiB.
    let big = CoopTile {
        bk: 32,
        ..CoopTile::WIDE
    };
    assert!(big.is_valid() && big.shared_bytes() > 48 * 1024);
    // 64-deep: 8 chunks of B per thread, over the kernel's 4.
    let deep = CoopTile {
        bk: 64,
        ..CoopTile::WIDE
    };
    assert!(!deep.is_valid());
    let odd = CoopTile {
        wm: 40,
        ..CoopTile::DEFAULT
    };
    assert!(!odd.is_valid());
}

#[test]
fn large_square_f32_takes_the_deep_vec4_tile_or_the_128_sgemm_tile() {
    // K and N multiples of 4: the older kernel's 128×128×16 tile with
    // 16-byte loads (the fastest measured there).
    for s in [2048, 4096, 8192] {
        assert_eq!(
            tiled(choose_matmul(s, s, s, MatmulDtype::F32, &h200())),
            TileConfig::DEEP_VEC4
        );
    }
    // Unaligned: the SGEMM's 128×128 tile.
    assert_eq!(
        sgemm(choose_matmul(4097, 4097, 4097, MatmulDtype::F32, &h200())),
        (SgemmTile::LARGE, 1)
    );
    // f16 widened to f32 takes the same.
    let p = choose_matmul(4096, 4097, 4096, MatmulDtype::F16, &h200());
    assert!(p.widen_f16);
    assert_eq!(sgemm(p), (SgemmTile::LARGE, 1));
}

#[test]
fn small_f32_grids_split_k() {
    let c = h200();
    let f32 = |m, k, n, caps: &MatmulCaps| sgemm(choose_matmul(m, k, n, MatmulDtype::F32, caps));
    // 1024²: 64 blocks of 128×128 < 132 units but over a quarter: ⌈264 / 64⌉
    // = 5 slices, rounded down to 4.
    assert_eq!(f32(1024, 1024, 1024, &c), (SgemmTile::LARGE, 4));
    // 16 rows of blocks × 8 columns = 128 < 132 units; K = 64 allows 2 slices.
    assert_eq!(f32(2048, 64, 1024, &c), (SgemmTile::LARGE, 2));
    // 16 × 9 = 144 blocks: the deep tile.
    assert_eq!(
        tiled(choose_matmul(2048, 64, 1152, MatmulDtype::F32, &c)),
        TileConfig::DEEP_VEC4
    );
    // 2 medium blocks: K = 255 allows 7 slices of at least 32.
    assert_eq!(f32(127, 255, 63, &c), (SgemmTile::MEDIUM, 7));
    // 45 medium blocks: ⌈1056 / 45⌉ = 24, at most 16.
    assert_eq!(f32(513, 1025, 257, &c), (SgemmTile::MEDIUM, 16));
    // A few rows: 152 medium blocks, ⌈1056 / 152⌉ = 7.
    assert_eq!(f32(4, 4096, 9728, &c), (SgemmTile::MEDIUM, 7));
    // A K too short to split.
    assert_eq!(f32(127, 17, 63, &c), (SgemmTile::MEDIUM, 1));
    // Unknown unit count: 64 blocks decide.
    let l = lavapipe();
    // (the deep tile's double-buffered shared memory is over 32 KiB there)
    assert_eq!(f32(1024, 8, 1024, &l), (SgemmTile::LARGE, 1));
    assert_eq!(f32(512, 8, 1024, &l), (SgemmTile::LARGE, 1));
    assert_eq!(f32(300, 300, 300, &l), (SgemmTile::MEDIUM, 9));
}

#[test]
fn the_older_tile_rule_stays_for_fused_epilogues() {
    let c = h200();
    assert_eq!(choose_tile(4096, 4096, &c), TileConfig::LARGE);
    assert_eq!(choose_tile(127, 63, &c), TileConfig::SMALL);
    assert_eq!(choose_tile(513, 257, &c), TileConfig::SMALL);
    // 16 rows of blocks × 8 columns = 128 < 132 units.
    assert_eq!(choose_tile(2048, 1024, &c), TileConfig::SMALL);
    assert_eq!(choose_tile(2048, 1152, &c), TileConfig::LARGE);
    // Unknown unit count: 64 blocks decide.
    let l = lavapipe();
    assert_eq!(choose_tile(1024, 1024, &l), TileConfig::LARGE);
    assert_eq!(choose_tile(512, 1024, &l), TileConfig::SMALL);
}

#[test]
fn narrow_when_256_invocations_are_not_allowed() {
    let c = MatmulCaps {
        max_workgroup_invocations: 128,
        ..h200()
    };
    assert_eq!(
        tiled(choose_matmul(4096, 4096, 4096, MatmulDtype::F32, &c)),
        TileConfig::NARROW
    );
}

#[test]
fn vectors_take_the_gemv_kernels() {
    for (caps, dtype) in [
        (h200(), MatmulDtype::F32),
        (lavapipe(), MatmulDtype::F32),
        (h200(), MatmulDtype::F16),
    ] {
        let p = choose_matmul(8192, 8192, 1, dtype, &caps);
        assert_eq!(p.kernel, MatmulKernel::MatVec4);
        assert_eq!(
            choose_matmul(8192, 8190, 1, dtype, &caps).kernel,
            MatmulKernel::MatVec
        );
        assert_eq!(p.widen_f16, dtype == MatmulDtype::F16);
        assert!(matches!(
            choose_matmul(1, 4096, 4096, dtype, &caps).kernel,
            MatmulKernel::VecMat4 { .. }
        ));
        assert_eq!(
            choose_matmul(1, 4096, 4094, dtype, &caps).kernel,
            MatmulKernel::VecMat
        );
    }
    // 1×1 output: N = 1 wins.
    assert_eq!(
        choose_matmul(1, 7, 1, MatmulDtype::F32, &h200()).kernel,
        MatmulKernel::MatVec
    );
}

#[test]
fn m1_splits_k_until_four_workgroups_per_unit() {
    let h = h200();
    // 4096 columns: 32 workgroups; 528 wanted → 17 layers.
    assert_eq!(vecmat4_splits(4096, 4096, &h), 17);
    assert_eq!(
        choose_matmul(1, 4096, 4096, MatmulDtype::F32, &h).kernel,
        MatmulKernel::VecMat4 { splits: 17 }
    );
    // Layers of at least 64 rows: K = 300 allows 4; K < 128 none.
    assert_eq!(vecmat4_splits(300, 4096, &h), 4);
    assert_eq!(vecmat4_splits(127, 4096, &h), 1);
    // Capped at the maximum; none where the columns alone are enough.
    assert_eq!(vecmat4_splits(1 << 20, 128, &h), VECMAT4_MAX_SPLITS);
    assert_eq!(vecmat4_splits(4096, 128 * 528, &h), 1);
    // Unknown unit count: 256 workgroups wanted.
    assert_eq!(vecmat4_splits(4096, 4096, &lavapipe()), 8);
}

#[test]
fn f16_uses_coopmat_only_where_it_applies() {
    let c = h200();
    let coop = MatmulPlan {
        kernel: MatmulKernel::CoopMatF16(CoopTile::DEFAULT),
        widen_f16: false,
    };
    assert_eq!(choose_matmul(8192, 8192, 8192, MatmulDtype::F16, &c), coop);
    assert_eq!(choose_matmul(4097, 4096, 4104, MatmulDtype::F16, &c), coop);
    // K or N not a multiple of 8: widened to f32.
    for (m, k, n) in [(4096, 4097, 4096), (4096, 4096, 4097), (8, 64, 64)] {
        let p = choose_matmul(m, k, n, MatmulDtype::F16, &c);
        assert!(
            p.widen_f16 && matches!(p.kernel, MatmulKernel::Sgemm { .. }),
            "{m}×{k}×{n}: {p:?}"
        );
    }
    // No coopmat shape, or a 64-lane subgroup: widened.
    let p = choose_matmul(4096, 4096, 4096, MatmulDtype::F16, &lavapipe());
    assert!(p.widen_f16);
    let wave64 = MatmulCaps {
        subgroup_size: 64,
        ..h200()
    };
    assert!(choose_matmul(4096, 4096, 4096, MatmulDtype::F16, &wave64).widen_f16);
    // f32 never widens.
    assert!(!choose_matmul(4096, 4096, 4096, MatmulDtype::F32, &c).widen_f16);
}

fn cm2(p: MatmulPlan) -> Cm2Tile {
    match p.kernel {
        MatmulKernel::CoopMat2F16(t) if !p.widen_f16 => t,
        other => panic!("expected the coopmat2 kernel, got {other:?}"),
    }
}

#[test]
fn cm2_tiles_name_their_compiled_variants() {
    for t in Cm2Tile::ALL {
        assert!(t.kernel_name().is_some(), "{t:?}");
        assert!(t.fits(&h100_cm2()), "{t:?}");
    }
    let odd = Cm2Tile {
        bm: 96,
        ..Cm2Tile::SQUARE
    };
    assert_eq!(odd.kernel_name(), None);
    assert!(!odd.fits(&h100_cm2()));
    // Four slices per step: the wide tile's u4 kernel only.
    assert_eq!(
        Cm2Tile::WIDE_U4.kernel_name(),
        Some("matmul_f16_cm2_128x256x64_u4")
    );
    let square_u4 = Cm2Tile {
        unroll: 4,
        ..Cm2Tile::SQUARE
    };
    assert_eq!(square_u4.kernel_name(), None);
    assert!(!square_u4.fits(&h100_cm2()));
    // A 32-granular shape rules out nothing of ours; a 128-granular K
    // rules out the 64-deep slices; a small maximum rules out 256.
    let coarse = h100_cm2().with_coopmat2(Some([32, 32, 128]), 65535);
    assert!(Cm2Tile::ALL.iter().all(|t| !t.fits(&coarse)));
    let short = h100_cm2().with_coopmat2(Some([16, 16, 16]), 128);
    assert!(!Cm2Tile::WIDE.fits(&short) && Cm2Tile::SQUARE.fits(&short));
    assert!(!Cm2Tile::SQUARE.fits(&h200()), "no coopmat2 on the caps");
}

#[test]
fn f16_takes_coopmat2_for_any_shape_where_it_exists() {
    let c = h100_cm2();
    // Large: 128×128 blocks of 128 invocations, in groups of 8 block rows.
    assert_eq!(
        cm2(choose_matmul(8192, 8192, 8192, MatmulDtype::F16, &c)),
        Cm2Tile::SQUARE_GROUPED
    );
    assert_eq!(
        cm2(choose_matmul(4096, 4096, 4096, MatmulDtype::F16, &c)),
        Cm2Tile::SQUARE_GROUPED
    );
    // 2048²: 256 square blocks fill 132 units.
    assert_eq!(
        cm2(choose_matmul(2048, 2048, 2048, MatmulDtype::F16, &c)),
        Cm2Tile::SQUARE_GROUPED
    );
    // 4097³: rows are not 16-byte units: the 128×256 tile, four slices
    // per step.
    assert_eq!(
        cm2(choose_matmul(4097, 4097, 4097, MatmulDtype::F16, &c)),
        Cm2Tile::WIDE_U4
    );
    // 1025 × 1025 × 1025: 45 wide blocks, 81 square ones, 153 small.
    assert_eq!(
        cm2(choose_matmul(1025, 1025, 1025, MatmulDtype::F16, &c)),
        Cm2Tile::SMALL
    );
    // 1024²: 64 square blocks fall short; 128 small ones reach nine
    // tenths of 132.
    assert_eq!(
        cm2(choose_matmul(1024, 1024, 1024, MatmulDtype::F16, &c)),
        Cm2Tile::SMALL
    );
    // The wide tile is never the default.
    for s in [512, 2048, 4096, 8192, 16384] {
        assert_ne!(
            cm2(choose_matmul(s, s, s, MatmulDtype::F16, &c)),
            Cm2Tile::WIDE_GROUPED
        );
    }
    // Odd shapes and K, N not multiples of 8: still coopmat2.
    for (m, k, n) in [(15, 17, 127), (4097, 4097, 4097), (17, 1, 15), (2, 3, 2)] {
        cm2(choose_matmul(m, k, n, MatmulDtype::F16, &c));
    }
    // Vectors stay on the GEMV kernels; f32 never takes it.
    assert!(choose_matmul(4096, 4096, 1, MatmulDtype::F16, &c).widen_f16);
    assert!(choose_matmul(1, 4096, 4096, MatmulDtype::F16, &c).widen_f16);
    assert_eq!(
        tiled(choose_matmul(4096, 4096, 4096, MatmulDtype::F32, &c)),
        TileConfig::DEEP_VEC4
    );
    // Without a fitting granularity: the subgroup-scope kernel.
    let coarse = c.with_coopmat2(Some([32, 32, 128]), 65535);
    assert_eq!(
        choose_matmul(4096, 4096, 4096, MatmulDtype::F16, &coarse).kernel,
        MatmulKernel::CoopMatF16(CoopTile::DEFAULT)
    );
}

#[test]
fn khr_comes_before_nv_and_after_coopmat2() {
    let both = h200().with_coopmat_khr_f16(true);
    assert_eq!(
        choose_matmul(4096, 4096, 4096, MatmulDtype::F16, &both).kernel,
        MatmulKernel::CoopMatKhrF16(CoopTile::DEFAULT)
    );
    let khr_only = both.with_coopmat_f16(false);
    assert_eq!(
        choose_matmul(200, 72, 136, MatmulDtype::F16, &khr_only).kernel,
        MatmulKernel::CoopMatKhrF16(CoopTile::DEFAULT)
    );
    // Its shape rules are the NV kernel's.
    assert!(choose_matmul(4096, 4097, 4096, MatmulDtype::F16, &khr_only).widen_f16);
    assert!(choose_matmul(8, 64, 64, MatmulDtype::F16, &khr_only).widen_f16);
    assert!(!subgroup_coop_fits(
        4096,
        4096,
        4104,
        &MatmulCaps {
            subgroup_size: 64,
            ..khr_only
        }
    ));
    // Workgroup scope first where it exists.
    let all = h100_cm2().with_coopmat_khr_f16(true);
    assert!(matches!(
        choose_matmul(4096, 4096, 4096, MatmulDtype::F16, &all).kernel,
        MatmulKernel::CoopMat2F16(_)
    ));
    for t in [CoopTile::DEFAULT, CoopTile::WIDE, CoopTile::TALL] {
        assert!(t.khr_kernel().is_some(), "{t:?}");
    }
    assert_eq!(
        CoopTile {
            bk: 64,
            ..CoopTile::DEFAULT
        }
        .khr_kernel(),
        None
    );
}

#[test]
fn caps_read_the_finest_256_invocation_f16_workgroup_shape() {
    use crate::adapter::{fake, AdapterType};
    use crate::coopmat::{CoopComponent, CoopMat2Info, CoopMatFlexibleShape};
    let shape = |g: u32, invocations: u32, c: CoopComponent| CoopMatFlexibleShape {
        m_granularity: g,
        n_granularity: g,
        k_granularity: 16,
        a: CoopComponent::F16,
        b: CoopComponent::F16,
        c,
        result: c,
        saturating_accumulation: false,
        workgroup_scope: true,
        workgroup_invocations: invocations,
    };
    let mut info = fake(0, "gpu", AdapterType::Discrete, 1 << 30);
    info.float16 = true;
    info.storage_buffer16 = true;
    let nv2 = CoopMat2Info {
        workgroup_scope: true,
        flexible_dimensions: true,
        tensor_addressing: true,
        workgroup_scope_max_workgroup_size: 256,
        flexible_dimensions_max_dimension: 65535,
        flexible_shapes: vec![
            shape(64, 256, CoopComponent::F32),
            shape(32, 256, CoopComponent::F32),
            shape(16, 128, CoopComponent::F32),
            shape(16, 256, CoopComponent::F16),
        ],
        ..CoopMat2Info::default()
    };
    info.cooperative_matrix_features.nv2 = Some(nv2.clone());
    let caps = MatmulCaps::of(&info);
    assert_eq!(caps.coopmat2_granularity, Some([32, 32, 16]));
    assert_eq!(caps.coopmat2_max_dimension, 65535);
    // Without tensor addressing, or 16-bit storage: no workgroup-scope kernel.
    info.cooperative_matrix_features.nv2 = Some(CoopMat2Info {
        tensor_addressing: false,
        ..nv2.clone()
    });
    assert_eq!(MatmulCaps::of(&info).coopmat2_granularity, None);
    info.cooperative_matrix_features.nv2 = Some(nv2);
    info.storage_buffer16 = false;
    assert_eq!(MatmulCaps::of(&info).coopmat2_granularity, None);
}
