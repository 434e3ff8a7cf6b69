//! The f32 rows of the matmul example: checks at a small size, the
//! default against every candidate at full sizes and odd shapes
//! (`f32_bench.rs`), the older kernel's tiles, and GEMV, each beside
//! cuBLAS where the reference has it.

use super::*;

/// The f32 rows: checks at a small size, candidates at full sizes and odd
/// shapes, tiles, GEMV. Returns whether the default was within the rule
/// of the best candidate at every shape.
pub(crate) fn f32_rows(gpu: &Device, rep: &mut Report, quick: bool) -> Result<bool> {
    let info = gpu.info();
    let caps = MatmulCaps::of(info);
    let reps = if quick { 3 } else { 10 };
    let (s1, s2, odd, gemv, chk) = if quick {
        (128, 256, 129, 1024, 128)
    } else {
        (4096, 8192, 4097, 8192, 512)
    };
    // Checkable size: every entry against f64.
    f32_case(
        gpu,
        rep,
        &format!("check_sgemm{chk}"),
        (chk, chk, chk),
        None,
        2,
        true,
    )?;
    f32_case(
        gpu,
        rep,
        &format!("check_gemv{chk}"),
        (chk, chk, 1),
        None,
        2,
        true,
    )?;
    f32_case(
        gpu,
        rep,
        &format!("check_vecmat{chk}"),
        (1, chk, chk),
        None,
        2,
        true,
    )?;
    // The default against every candidate (spot checks): full sizes, the
    // odd one, the anchor's small shapes, a skinny one, M = 1.
    let shapes: &[(u32, u32, u32)] = if quick {
        &[
            (64, 64, 64),
            (s1, s1, s1),
            (odd, odd, odd),
            (127, 255, 63),
            (4, 64, 200),
            (1, s1, s1),
        ]
    } else {
        &[
            (1024, 1024, 1024),
            (2048, 2048, 2048),
            (s1, s1, s1),
            (s2, s2, s2),
            (odd, odd, odd),
            (127, 255, 63),
            (4, 4096, 9728),
            (1, s1, s1),
        ]
    };
    let mut rule_ok = true;
    for &shape in shapes {
        rule_ok &= f32_bench::bench_f32_shape(gpu, rep, shape, reps)?;
    }
    let v4 = |t: TileConfig| TileConfig { vec4: true, ..t };
    let v4w = |t: TileConfig| TileConfig {
        compact_warps: true,
        ..v4(t)
    };
    let v4p = |t: TileConfig| TileConfig {
        frag_prefetch: true,
        ..v4(t)
    };
    let tiles = [
        ("128x128x8", TileConfig::LARGE),
        (
            "128x128x16",
            TileConfig {
                bk: 16,
                ..TileConfig::LARGE
            },
        ),
        (
            "128x64x8_8x4",
            TileConfig {
                bn: 64,
                tn: 4,
                ..TileConfig::LARGE
            },
        ),
        (
            "64x128x8_4x8",
            TileConfig {
                bm: 64,
                tm: 4,
                ..TileConfig::LARGE
            },
        ),
        ("64x64x8", TileConfig::SMALL),
        // 128 threads of 8×16 (cuBLAS's FFMA SGEMM shape), scalar loads.
        (
            "128x128x8_8x16",
            TileConfig {
                tn: 16,
                ..TileConfig::LARGE
            },
        ),
        // `_v4`: 16-byte global loads and C stores, vec4 stores of B into
        // shared memory (shaders/matmul_f32_vec4.comp).
        ("128x128x8_v4", v4(TileConfig::LARGE)),
        (
            "128x128x16_v4",
            v4(TileConfig {
                bk: 16,
                ..TileConfig::LARGE
            }),
        ),
        (
            "128x128x8_8x16_v4",
            v4(TileConfig {
                tn: 16,
                ..TileConfig::LARGE
            }),
        ),
        (
            "128x128x8_16x8_v4",
            v4(TileConfig {
                tm: 16,
                ..TileConfig::LARGE
            }),
        ),
        (
            "128x128x16_8x16_v4",
            v4(TileConfig {
                bk: 16,
                tn: 16,
                ..TileConfig::LARGE
            }),
        ),
        (
            "128x256x8_8x16_v4",
            v4(TileConfig {
                bn: 256,
                tn: 16,
                ..TileConfig::LARGE
            }),
        ),
        (
            "256x128x8_16x8_v4",
            v4(TileConfig {
                bm: 256,
                tm: 16,
                ..TileConfig::LARGE
            }),
        ),
        // `_v4w`: the same with each 32 threads on a 4×8 patch of
        // micro-tiles (TileConfig::compact_warps).
        ("128x128x8_v4w", v4w(TileConfig::LARGE)),
        (
            "128x128x16_v4w",
            v4w(TileConfig {
                bk: 16,
                ..TileConfig::LARGE
            }),
        ),
        (
            "128x128x8_16x8_v4w",
            v4w(TileConfig {
                tm: 16,
                ..TileConfig::LARGE
            }),
        ),
        (
            "128x256x8_8x16_v4w",
            v4w(TileConfig {
                bn: 256,
                tn: 16,
                ..TileConfig::LARGE
            }),
        ),
        (
            "256x128x8_16x8_v4w",
            v4w(TileConfig {
                bm: 256,
                tm: 16,
                ..TileConfig::LARGE
            }),
        ),
        // `p`: fragments of step k + 1 read before the FMAs of step k
        // (TileConfig::frag_prefetch).
        ("128x128x8_v4wp", v4p(v4w(TileConfig::LARGE))),
        (
            "128x128x16_v4wp",
            v4p(v4w(TileConfig {
                bk: 16,
                ..TileConfig::LARGE
            })),
        ),
        (
            "128x128x8_8x16_v4p",
            v4p(TileConfig {
                tn: 16,
                ..TileConfig::LARGE
            }),
        ),
        (
            "64x64x16",
            TileConfig {
                bk: 16,
                ..TileConfig::SMALL
            },
        ),
    ];
    for (name, t) in tiles {
        if !t.is_valid()
            || t.shared_bytes() > caps.max_shared_memory
            || t.threads() > caps.max_workgroup_invocations
        {
            println!("skipped: tile {name} does not fit {}", info.name);
            continue;
        }
        let plan = MatmulPlan {
            kernel: MatmulKernel::Tiled(t),
            widen_f16: false,
        };
        f32_case(
            gpu,
            rep,
            &format!("sgemm{s1}_tile{name}"),
            (s1, s1, s1),
            Some(plan),
            reps,
            false,
        )?;
    }
    f32_case(
        gpu,
        rep,
        &format!("gemv{gemv}"),
        (gemv, gemv, 1),
        None,
        reps,
        false,
    )?;

    Ok(rule_ok)
}
