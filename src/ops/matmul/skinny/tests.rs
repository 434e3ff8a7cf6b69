use super::launch::launch;
use super::sg32::uses_sg32;
use super::*;

/// An H100 without the Khronos cooperative matrices: the rules of the
/// skinny, tiled and coopmat2 kernels (with them, 5 to 64 rows of 16-bit
/// weights stream on the tensor cores: the last test).
fn h100() -> MatmulCaps {
    MatmulCaps {
        subgroup_size: 32,
        max_shared_memory: 49152,
        max_workgroup_invocations: 1024,
        compute_units: 132,
        coopmat_f16: true,
        coopmat_khr_f16: false,
        coopmat2_granularity: None,
        coopmat2_max_dimension: 0,
        coopmat2_decode: false,
    }
}

#[test]
fn rows_per_pass_hold_m() {
    let c = h100();
    for (m, want) in [
        (1, 1),
        (2, 2),
        (3, 4),
        (8, 8),
        (15, 16),
        (16, 16),
        (17, 32),
        (32, 32),
        (33, 64),
        (64, 64),
    ] {
        let p = choose_linear(m, 2560, 19456, DType::F32, true, &c);
        assert_eq!(p.rows_per_pass, want, "m = {m}");
        assert!(p.is_valid());
    }
}

#[test]
fn qwen3_4b_ffn_shapes() {
    let c = h100();
    // gate|up: 9728 outputs, 2 per subgroup, 8 subgroups per
    // workgroup: 608 workgroups, over 2 × 132: no split.
    let gu = choose_linear(1, 2560, 2 * 9728, DType::F32, true, &c);
    assert_eq!(gu.splits, 1);
    let l = launch(1, 2560, 2 * 9728, DType::F32, true, 32, gu);
    assert_eq!((l.upw, l.groups, l.mchunks, l.vec), (8, 608, 1, true));
    // down: 2560 outputs, 80 full workgroups, under 264: narrower
    // workgroups of 2 units (4 subgroups sharing each unit's K) number
    // 320, so no split-K (no second pass, no barrier).
    let down = choose_linear(1, 9728, 2560, DType::F32, false, &c);
    assert_eq!(down.splits, 1);
    let l = launch_narrowed(1, 9728, 2560, DType::F32, false, &c, down);
    assert_eq!((l.upw, l.ksub, l.groups, l.kchunk), (2, 4, 320, 2432));
    // An explicit split-K plan keeps full workgroups.
    let split = LinearPlan {
        rows_per_pass: 4,
        splits: 4,
    };
    let l = launch_narrowed(4, 9728, 2560, DType::Bf16, false, &c, split);
    assert_eq!((l.upw, l.ksub), (8, 1));
    assert_eq!(l.kchunk, 304, "9728 bf16 = 1216 loads of 8, in 4 slices");
}

#[test]
fn few_rows_take_narrower_workgroups_over_split_k() {
    let c = h100();
    // Qwen3-4B at one or two sequences, bf16 (K, N): the fused q|k|v
    // (192 full workgroups), o_proj and down (80) all reach 264 workgroups
    // with narrower ones; gate|up (608) needs none.
    for m in [1, 2] {
        for (k, n, silu, upw) in [
            (2560, 4096 + 2 * 1024, false, 4),
            (4096, 2560, false, 2),
            (9728, 2560, false, 2),
            (2560, 2 * 9728, true, 8),
        ] {
            let p = choose_linear(m, k, n, DType::Bf16, silu, &c);
            assert_eq!(p.splits, 1, "m = {m}, {k} -> {n}");
            let l = launch_narrowed(m, k, n, DType::Bf16, silu, &c, p);
            assert_eq!((l.upw, l.ksub), (upw, 8 / upw), "m = {m}, {k} -> {n}");
            assert!(u64::from(l.groups) >= 264);
        }
    }
    // Past 2 rows per pass: split-K (measured faster at 4 rows with the
    // subgroupAdd kernels), except 4 rows (m = 3, 4) of 16-bit weights on
    // the subgroup-32 kernels, which narrow.
    for m in [3, 4, 8] {
        let p = choose_linear(m, 9728, 2560, DType::Bf16, false, &c);
        assert_eq!(p.splits > 1, m == 8, "m = {m}");
        let p = choose_linear(m, 9728, 2560, DType::F32, false, &c);
        assert!(p.splits > 1, "m = {m}, f32");
    }
    // Too few outputs to reach 264 even at one unit per workgroup (256
    // units): split-K as before.
    let p = choose_linear(1, 2560, 1024, DType::Bf16, false, &c);
    assert!(p.splits > 1);
    // K too short for 8 parts of 128 loads: the narrowing stops where
    // each part keeps 4 loads per lane (K = 2048 bf16: 256 loads, 2 parts).
    let l = launch_narrowed(
        1,
        2048,
        2560,
        DType::Bf16,
        false,
        &c,
        LinearPlan {
            rows_per_pass: 1,
            splits: 1,
        },
    );
    assert_eq!((l.upw, l.ksub), (8, 1), "4 units of 2 parts give 160 < 264");
}

#[test]
fn past_16_rows_the_tiled_kernel_runs() {
    let c = h100();
    // gate|up at 64 rows: 9728 / 32 = 304 tiles, under 4 × 132 = 528:
    // 2 slices of 1280.
    let gu = choose_linear(64, 2560, 2 * 9728, DType::F32, true, &c);
    assert_eq!(
        gu,
        LinearPlan {
            rows_per_pass: 64,
            splits: 2
        }
    );
    assert_eq!(tiled_launch(2560, 2 * 9728, true, 2), (304, 1280));
    // down: 2560 / 64 = 40 tiles: 14 slices reach 528 (560 workgroups,
    // 5 per unit), and 16 keep 5 per unit (640 ≤ 660): 608 deep.
    let down = choose_linear(33, 9728, 2560, DType::Bf16, false, &c);
    assert_eq!(
        down,
        LinearPlan {
            rows_per_pass: 64,
            splits: 16
        }
    );
    assert_eq!(tiled_launch(9728, 2560, false, 16), (40, 608));
    // Enough tiles: no split. Short K: slices of at least 256.
    assert_eq!(
        choose_linear(17, 4096, 64 * 600, DType::F16, false, &c).splits,
        1
    );
    assert_eq!(choose_linear(64, 600, 64, DType::F32, false, &c).splits, 2);
    assert_eq!(choose_linear(64, 255, 64, DType::F32, false, &c).splits, 1);
    // Without a unit count: 256 tiles wanted.
    let lava = MatmulCaps {
        compute_units: 0,
        ..c
    };
    assert_eq!(
        choose_linear(20, 1 << 20, 64 * 32, DType::F32, false, &lava).splits,
        8
    );
    // Odd shapes: a partial tile, K slices rounded to 16.
    assert_eq!(tiled_launch(17, 65, false, 3), (2, 16));
    assert_eq!(tiled_launch(17, 66, true, 1), (2, 32));
    assert!(LinearPlan {
        rows_per_pass: 64,
        splits: 3
    }
    .is_valid());
    // 16 KiB of shared memory (Vulkan's least): the streaming kernel.
    let small = MatmulCaps {
        max_shared_memory: 16384,
        ..c
    };
    assert_eq!(tiled_shared_bytes(64), 17408);
    assert_eq!(tiled_shared_bytes(32), 13312);
    let p = choose_linear(64, 2560, 2 * 9728, DType::F32, true, &small);
    assert_eq!(p.rows_per_pass, 16);
    let p = choose_linear(32, 2560, 2 * 9728, DType::F32, true, &small);
    assert_eq!(p.rows_per_pass, 32);
}

#[test]
fn more_slices_fill_the_rounds_the_workgroups_take() {
    let c = h100();
    // 40 tiles × 14 = 560 workgroups: 5 per unit of 132; 16 slices (640)
    // still 5, 17 (680) would be 6.
    assert_eq!(fill_rounds(40, 14, 38, &c), 16);
    // 304 × 2 = 608: 5 per unit; 3 slices would be 7.
    assert_eq!(fill_rounds(304, 2, 10, &c), 2);
    // Capped by the deepest split K allows, never below the given count.
    assert_eq!(fill_rounds(40, 14, 15, &c), 15);
    assert_eq!(fill_rounds(40, 14, 3, &c), 14);
    // Without a unit count, unchanged.
    let lava = MatmulCaps {
        compute_units: 0,
        ..c
    };
    assert_eq!(fill_rounds(40, 14, 38, &lava), 14);
    assert_eq!(fill_rounds(0, 1, 38, &c), 1);
}

#[test]
fn split_k_needs_enough_k() {
    let c = h100();
    // One workgroup of output but K = 127: too short to split.
    let p = choose_linear(1, 127, 4, DType::F32, false, &c);
    assert_eq!(p.splits, 1);
    // 4096 vec4 loads: at most 4096 / 128 = 32 slices.
    let p = choose_linear(1, 16384, 4, DType::F32, false, &c);
    assert_eq!(p.splits, 32);
    // Unknown unit count: 128 workgroups wanted.
    let lava = MatmulCaps {
        subgroup_size: 8,
        compute_units: 0,
        ..c
    };
    let p = choose_linear(1, 1 << 20, 4, DType::F32, false, &lava);
    assert_eq!(p.splits, LINEAR_MAX_SPLITS);
}

#[test]
fn odd_k_loads_single_elements() {
    let p = LinearPlan {
        rows_per_pass: 4,
        splits: 3,
    };
    let l = launch(3, 513, 17, DType::F16, false, 32, p);
    assert!(!l.vec);
    assert_eq!(l.kchunk, 171);
    // f16 needs K a multiple of 8 for its 16-byte loads; f32 of 4.
    assert!(!launch(3, 12, 17, DType::F16, false, 32, p).vec);
    assert!(launch(3, 12, 17, DType::F32, false, 32, p).vec);
    assert!(launch(3, 16, 17, DType::Bf16, false, 32, p).vec);
    // A 64-lane subgroup: 4 units per workgroup.
    assert_eq!(launch(3, 16, 17, DType::F32, false, 64, p).upw, 4);
}

#[test]
fn kernel_names_exist_for_every_plan() {
    for dtype in [DType::F32, DType::F16, DType::Bf16] {
        for rows in [1, 2, 4, 8, 16] {
            for norm in [false, true] {
                let name = kernel_name(dtype, rows, norm, false, 1);
                assert!(crate::builtins::builtin_names().contains(&name), "{name}");
                for (one_wave, ksub) in [(false, 1), (true, 1), (false, 2)] {
                    let sg32 = sg32::kernel_applies(dtype, rows, norm, one_wave, &h100());
                    let name = kernel_name(dtype, rows, norm, sg32, ksub);
                    assert!(crate::builtins::builtin_names().contains(&name), "{name}");
                    assert_eq!(name.contains("_sg32"), sg32, "{name}");
                }
            }
        }
    }
    for dtype in [DType::F32, DType::F16, DType::Bf16] {
        for rows in [32, 64] {
            let name = tiled_kernel_name(dtype, rows);
            assert!(crate::builtins::builtin_names().contains(&name), "{name}");
        }
    }
    assert_eq!(tiled_kernel_name(DType::Bf16, 32), "linear_bf16_tiled_m32");
    let name = |d, rows, norm, sg32| kernel_name(d, rows, norm, sg32, 1);
    assert_eq!(name(DType::Bf16, 4, false, false), "linear_bf16");
    assert_eq!(name(DType::F32, 16, false, false), "linear_f32_m16");
    assert_eq!(name(DType::Bf16, 1, true, false), "linear_bf16_m1_norm");
    assert_eq!(name(DType::F16, 4, true, false), "linear_f16_norm");
    assert_eq!(name(DType::Bf16, 1, true, true), "linear_bf16_m1_norm_sg32");
    assert_eq!(name(DType::F16, 1, true, true), "linear_f16_m1_norm_sg32");
    assert_eq!(name(DType::Bf16, 4, true, true), "linear_bf16_norm_sg32");
    assert_eq!(name(DType::F16, 4, false, true), "linear_f16_sg32");
    // Narrower workgroups at 1 row: two chunks per lane and step.
    assert_eq!(name(DType::Bf16, 1, false, true), "linear_bf16_m1_sg32");
    let narrowed = |d| kernel_name(d, 1, false, true, 4);
    assert_eq!(narrowed(DType::Bf16), "linear_bf16_m1_sg32_c2");
    assert_eq!(narrowed(DType::F16), "linear_f16_m1_sg32_c2");
    assert_eq!(
        kernel_name(DType::Bf16, 4, false, true, 4),
        "linear_bf16_sg32"
    );
}

#[test]
fn subgroup_32_kernels_take_16_bit_weights_at_1_and_4_rows() {
    let c = h100();
    assert!(uses_sg32(DType::Bf16, 1, &c));
    assert!(uses_sg32(DType::F16, 4, &c));
    assert!(!uses_sg32(DType::F32, 1, &c));
    assert!(!uses_sg32(DType::Bf16, 2, &c));
    assert!(!uses_sg32(DType::Bf16, 8, &c));
    // One row: with the norm prologue only in one wave; four rows: always.
    assert!(sg32::kernel_applies(DType::Bf16, 1, false, false, &c));
    assert!(!sg32::kernel_applies(DType::Bf16, 1, true, false, &c));
    assert!(sg32::kernel_applies(DType::Bf16, 1, true, true, &c));
    assert!(sg32::kernel_applies(DType::Bf16, 4, true, false, &c));
    assert!(!sg32::kernel_applies(DType::F32, 1, false, false, &c));
    // Other subgroup sizes (lavapipe's 8, 64-lane waves) keep the
    // subgroupAdd kernels.
    for lanes in [4, 8, 16, 64] {
        let other = MatmulCaps {
            subgroup_size: lanes,
            ..c
        };
        assert!(!uses_sg32(DType::Bf16, 1, &other), "{lanes}");
    }
}

#[test]
fn four_rows_narrow_with_the_subgroup_32_kernels() {
    // The Qwen3-4B FFN's down projection at 4 rows: 640 units, 80
    // workgroups of 8; narrowed to 4 subgroups per unit with bf16 weights
    // on 32-lane subgroups, split over K with f32 weights or other lanes.
    let c = h100();
    let p = choose_linear(4, 9728, 2560, DType::Bf16, false, &c);
    assert_eq!(p.splits, 1);
    let single = LinearPlan {
        rows_per_pass: 4,
        splits: 1,
    };
    let l = launch_narrowed(4, 9728, 2560, DType::Bf16, false, &c, single);
    assert!(
        l.ksub > 1 && u64::from(l.groups) >= wanted_groups(&c),
        "{l:?}"
    );
    assert!(choose_linear(4, 9728, 2560, DType::F32, false, &c).splits > 1);
    let eight = MatmulCaps {
        subgroup_size: 8,
        ..c
    };
    let l = launch_narrowed(4, 9728, 2560, DType::Bf16, false, &eight, single);
    assert_eq!(l.ksub, 1);
}

#[test]
fn plans_out_of_range_are_invalid() {
    for (rows, splits) in [
        (3, 1),
        (48, 1),
        (128, 1),
        (0, 1),
        (4, 0),
        (4, LINEAR_MAX_SPLITS + 1),
    ] {
        let p = LinearPlan {
            rows_per_pass: rows,
            splits,
        };
        assert!(!p.is_valid(), "{p:?}");
    }
}

#[test]
fn only_the_tensor_core_plans_round_x_to_f16() {
    let plan = |rows_per_pass| LinearPlan {
        rows_per_pass,
        splits: 1,
    };
    for r in [
        LINEAR_TENSOR_TILES,
        LINEAR_TENSOR_STREAM,
        LINEAR_TENSOR_WINDOW,
    ] {
        assert!(plan(r).rounds_x_to_f16(), "{r}");
    }
    for r in [1, 2, 4, 8, 16, 32, LINEAR_TILED_ROWS, 3] {
        assert!(!plan(r).rounds_x_to_f16(), "{r}");
    }
}

#[test]
fn past_16_rows_16_bit_weights_take_the_tensor_cores_where_they_exist() {
    let cm2 = h100()
        .with_coopmat2(Some([16, 16, 16]), 256)
        .with_coopmat2_decode(true);
    for d in [DType::F16, DType::Bf16] {
        for m in [17, 32, 64, 100] {
            let p = choose_linear(m, 2560, 19456, d, true, &cm2);
            assert_eq!(p.rows_per_pass, LINEAR_TENSOR_TILES, "{d:?} m = {m}");
            assert!(p.is_valid());
        }
        // Up to 16 rows the skinny kernels stay.
        assert_eq!(
            choose_linear(16, 2560, 19456, d, true, &cm2).rows_per_pass,
            16
        );
        // Without the decoding loads, the tiled kernel.
        let plain = cm2.with_coopmat2_decode(false);
        assert_eq!(
            choose_linear(64, 2560, 19456, d, true, &plain).rows_per_pass,
            64
        );
    }
    // f32 weights never take it.
    assert_eq!(
        choose_linear(64, 2560, 19456, DType::F32, true, &cm2).rows_per_pass,
        64
    );
    // The down projection at 64 rows splits K over 6 layers.
    let down = choose_linear(64, 9728, 2560, DType::Bf16, false, &cm2);
    assert_eq!(
        down,
        LinearPlan {
            rows_per_pass: LINEAR_TENSOR_TILES,
            splits: 6
        }
    );
}

#[test]
fn five_to_64_rows_of_16_bit_weights_stream_on_the_tensor_cores() {
    let khr = h100().with_coopmat_khr_f16(true);
    let cm2 = khr
        .with_coopmat2(Some([16, 16, 16]), 256)
        .with_coopmat2_decode(true);
    for c in [khr, cm2] {
        for d in [DType::F16, DType::Bf16] {
            for m in [5, 16] {
                let p = choose_linear(m, 2560, 19456, d, true, &c);
                assert_eq!(p.rows_per_pass, LINEAR_TENSOR_STREAM, "{d:?} m = {m}");
                assert_eq!(p.splits, 3);
                assert!(p.is_valid());
                let down = choose_linear(m, 9728, 2560, d, false, &c);
                assert_eq!(down.rows_per_pass, LINEAR_TENSOR_STREAM, "{d:?} m = {m}");
                assert_eq!(down.splits, 14);
            }
            // From 17 to 64 rows x streams through the window: gate|up
            // splits only to fill the compute units, down as at 16 rows.
            for m in [17, 32, 33, 64] {
                let p = choose_linear(m, 2560, 19456, d, true, &c);
                assert_eq!(p.rows_per_pass, LINEAR_TENSOR_WINDOW, "{d:?} m = {m}");
                assert_eq!(p.splits, if m <= 32 { 2 } else { 3 });
                let down = choose_linear(m, 9728, 2560, d, false, &c);
                assert_eq!(down.rows_per_pass, LINEAR_TENSOR_WINDOW, "{d:?} m = {m}");
                assert_eq!(down.splits, 14);
            }
            // Up to 4 rows the skinny kernels stay (exact x); f32 weights,
            // K not in whole steps and past 64 rows do not stream.
            assert_eq!(choose_linear(1, 2560, 19456, d, true, &c).rows_per_pass, 1);
            assert_eq!(choose_linear(4, 2560, 19456, d, true, &c).rows_per_pass, 4);
            for m in [4, 40] {
                let p = choose_linear(m, 2560 + 64, 2560, d, false, &c);
                assert!(!tc_stream::is_stream_plan(p.rows_per_pass), "{p:?}");
            }
            let p = choose_linear(65, 2560, 2560, d, false, &c);
            assert!(!tc_stream::is_stream_plan(p.rows_per_pass), "{p:?}");
        }
        assert_eq!(
            choose_linear(8, 2560, 2560, DType::F32, false, &c).rows_per_pass,
            8
        );
    }
}

#[test]
fn the_normed_narrow_test_shapes_share_k_on_lavapipe() {
    // tests/ops_linear_normed.rs's narrow case runs these shapes at 1 and
    // 2 rows on lavapipe (subgroups of 8, no unit count): one K slice and
    // narrower workgroups, so the norm's sums of squares come from several
    // parts of K. Qwen3-4B's q|k|v at one row narrows on the H100 too.
    let lava = MatmulCaps {
        subgroup_size: 8,
        compute_units: 0,
        ..h100()
    };
    for (k, n, silu) in [
        (2048, 2048, false),
        (2051, 1025, false),
        (2048, 2 * 1024, true),
    ] {
        for m in [1, 2] {
            for dtype in [DType::F32, DType::F16, DType::Bf16] {
                let p = choose_linear(m, k, n, dtype, silu, &lava);
                assert_eq!(p.splits, 1, "{m}×{k}→{n} {dtype:?}");
                let l = launch_narrowed(m, k, n, dtype, silu, &lava, p);
                assert!(l.ksub > 1, "{m}×{k}→{n} {dtype:?}: {l:?}");
            }
        }
    }
    let c = h100();
    let p = choose_linear(1, 2560, 6144, DType::Bf16, false, &c);
    assert!(launch_narrowed(1, 2560, 6144, DType::Bf16, false, &c, p).ksub > 1);
}

#[test]
fn normed_one_row_layers_of_one_wave_keep_their_workgroups() {
    // Qwen3-4B at 1 row on 132 compute units: q|k|v (6144 outputs) has 192
    // workgroups of 8 units, gate|up (2 × 9728, SiLU·mul pairs) 608, the
    // LM head (151,936) 4748, o and down (2560) 80.
    let c = h100();
    let groups = |n: u32, silu: bool| {
        let p = LinearPlan {
            rows_per_pass: 1,
            splits: 1,
        };
        let l = launch(1, 2560, n, DType::Bf16, silu, c.subgroup_size, p);
        u64::from(l.groups) * u64::from(l.mchunks)
    };
    let one_wave = |dtype, rows, groups| sg32::normed_one_wave(dtype, rows, groups, &c);
    assert_eq!(groups(6144, false), 192);
    assert!(one_wave(DType::Bf16, 1, groups(6144, false)));
    assert!(one_wave(DType::F16, 1, groups(6144, false)));
    assert!(!one_wave(DType::F32, 1, groups(6144, false)));
    assert!(!one_wave(DType::Bf16, 2, groups(6144, false)));
    assert_eq!(groups(19456, true), 608);
    assert!(!one_wave(DType::Bf16, 1, groups(19456, true)));
    assert!(!one_wave(DType::Bf16, 1, groups(151936, false)));
    assert_eq!(groups(2560, false), 80);
    assert!(!one_wave(DType::Bf16, 1, groups(2560, false)));
    // The bounds: one and two workgroups per compute unit; none where the
    // adapter does not say its units.
    assert!(one_wave(DType::Bf16, 1, 132));
    assert!(one_wave(DType::Bf16, 1, 264));
    assert!(!one_wave(DType::Bf16, 1, 131));
    assert!(!one_wave(DType::Bf16, 1, 265));
    let unknown = MatmulCaps {
        compute_units: 0,
        ..c
    };
    assert!(!sg32::normed_one_wave(DType::Bf16, 1, 192, &unknown));
}

#[test]
fn the_norm_is_fused_at_four_rows_only_for_small_layers() {
    use super::normed::fuses_norm;
    let c = h100();
    let qkv = 6144 * 2560 * 2;
    let gate_up = 19456 * 2560 * 2;
    for rows in [1, 2] {
        assert!(fuses_norm(rows, gate_up, DType::Bf16, &c));
        assert!(fuses_norm(rows, gate_up, DType::F32, &c));
    }
    assert!(fuses_norm(4, qkv, DType::Bf16, &c));
    assert!(fuses_norm(4, qkv, DType::F16, &c));
    assert!(!fuses_norm(4, gate_up, DType::Bf16, &c));
    assert!(fuses_norm(4, NORM_FUSED_WIDE_MAX_BYTES, DType::Bf16, &c));
    assert!(!fuses_norm(
        4,
        NORM_FUSED_WIDE_MAX_BYTES + 1,
        DType::Bf16,
        &c
    ));
    // f32 weights and other subgroup sizes keep the norm apart past 2 rows,
    // and so do 8 and 16 rows per pass.
    assert!(!fuses_norm(4, qkv, DType::F32, &c));
    let lavapipe = MatmulCaps {
        subgroup_size: 8,
        compute_units: 0,
        ..c
    };
    assert!(!fuses_norm(4, qkv, DType::Bf16, &lavapipe));
    assert!(!fuses_norm(8, qkv, DType::Bf16, &c));
    assert!(!fuses_norm(16, 1024, DType::Bf16, &c));
}

#[test]
fn a_normed_layer_of_one_wave_keeps_its_workgroups() {
    // Qwen3-4B's q|k|v at 1 row: narrowed to 384 workgroups of 4 units
    // (2 subgroups each) without the norm, its 192 whole ones with it.
    let c = h100();
    let p = LinearPlan {
        rows_per_pass: 1,
        splits: 1,
    };
    let (l, one_wave) = layer_launch((1, 2560, 6144), DType::Bf16, false, false, &c, p);
    assert!(!one_wave);
    assert_eq!((l.groups, l.upw, l.ksub), (384, 4, 2));
    let (l, one_wave) = layer_launch((1, 2560, 6144), DType::Bf16, false, true, &c, p);
    assert!(one_wave);
    assert_eq!((l.groups, l.upw, l.ksub), (192, 8, 1));
    // Split over K, or past two workgroups per unit (gate|up), as before.
    let split = LinearPlan { splits: 2, ..p };
    let (l, one_wave) = layer_launch((1, 2560, 6144), DType::Bf16, false, true, &c, split);
    assert!(!one_wave);
    assert_eq!(
        l,
        launch_narrowed(1, 2560, 6144, DType::Bf16, false, &c, split)
    );
    let (l, one_wave) = layer_launch((1, 2560, 19456), DType::Bf16, true, true, &c, p);
    assert!(!one_wave);
    assert_eq!(l, launch_narrowed(1, 2560, 19456, DType::Bf16, true, &c, p));
}
