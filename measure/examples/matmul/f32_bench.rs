//! The f32 candidates of the matmul example: per shape, the default plan
//! beside every SGEMM tile (one slice and, for grids smaller than the GPU,
//! split-K) and the older tiled kernel's tiles, each timed (median GPU time
//! per repetition, split-K's reduction pass included; the faster of two
//! interleaved rounds), spot-checked against
//! f64 and named by the kernel it ran; then the default over the best
//! (rule: ≤ [`super::f16_bench::RULE_LIMIT`]).

use super::*;
use vkcompute::ops::matmul::{sgemm_split, sgemm_vec4_applies, SGEMM_MAX_SPLITS};
use vkcompute::ops::SgemmTile;

/// What an f32 plan runs at k×n, in words: the built-in kernel(s) and, for
/// split-K, the slices (`kernel + linear_reduce (S slices)`).
pub(crate) fn f32_plan_name(plan: &MatmulPlan, k: u32, n: u32) -> String {
    match plan.kernel {
        MatmulKernel::Sgemm { tile, splits } => {
            let name = tile
                .kernel_name(sgemm_vec4_applies(k, n))
                .unwrap_or("no compiled SGEMM");
            let s = sgemm_split(k, splits, tile.bk).slices;
            if s > 1 {
                format!("{name} + linear_reduce ({s} K slices)")
            } else {
                name.to_string()
            }
        }
        MatmulKernel::Tiled(t) => {
            let vec4 = t.vec4_applies(k, n);
            let base = match t.fixed_kernel() {
                Some(name) if !vec4 => name.to_string(),
                _ => format!(
                    "{}_{}x{}x{}_{}x{}",
                    if vec4 {
                        "matmul_f32_vec4"
                    } else {
                        "matmul_f32"
                    },
                    t.bm,
                    t.bn,
                    t.bk,
                    t.tm,
                    t.tn
                ),
            };
            let extra = match (vec4 && t.compact_warps, vec4 && t.frag_prefetch) {
                (true, true) => "_wp",
                (true, false) => "_w",
                (false, true) => "_p",
                (false, false) => "",
            };
            format!("{base}{extra}")
        }
        MatmulKernel::VecMat4 { splits } => {
            let s = sgemm_split(k, splits, 1).slices;
            if s > 1 {
                format!("vecmat_f32_vec4 + linear_reduce ({s} K layers)")
            } else {
                "vecmat_f32_vec4".into()
            }
        }
        MatmulKernel::VecMat => "vecmat_f32".into(),
        other => format!("{other:?}"),
    }
}

/// A row-key form of a candidate: `big128x128x8_s1` (SGEMM tile,
/// `_compact` with 8×4 patches, `_scalar` without 16-byte loads, the K
/// slices that run) or
/// `tile128x128x8_8x8` (older kernel, `_v4` with 16-byte loads).
fn short_name(plan: &MatmulPlan, k: u32, n: u32) -> String {
    match plan.kernel {
        MatmulKernel::Sgemm { tile, splits } => format!(
            "big{}x{}x{}{}_s{}",
            tile.bm,
            tile.bn,
            tile.bk,
            if sgemm_vec4_applies(k, n) {
                ""
            } else {
                "_scalar"
            },
            sgemm_split(k, splits, tile.bk).slices
        ),
        MatmulKernel::Tiled(t) => format!(
            "tile{}x{}x{}_{}x{}{}",
            t.bm,
            t.bn,
            t.bk,
            t.tm,
            t.tn,
            if t.vec4_applies(k, n) { "_v4" } else { "" }
        ),
        MatmulKernel::VecMat4 { splits } => {
            format!("vecmat4_s{}", sgemm_split(k, splits, 1).slices)
        }
        MatmulKernel::VecMat => "vecmat".into(),
        other => format!("{other:?}"),
    }
}

/// The f32 plans worth timing at m×k×n on `caps`: the default first; for
/// M = 1 the GEMV kernels (16-byte ones at 1 to 64 K layers); else each
/// SGEMM tile that fits (split-K at 2, 4, 8 and 16 slices as well
/// where the 64×64 blocks are fewer than twice the compute units), then
/// the older kernel's 128×128 and 64×64 tiles and its best 16-byte one.
/// Each plan once.
fn candidates(m: u32, k: u32, n: u32, caps: &MatmulCaps) -> Vec<MatmulPlan> {
    let plan = |kernel| MatmulPlan {
        kernel,
        widen_f16: false,
    };
    let mut out = vec![ops::choose_matmul(m, k, n, MatmulDtype::F32, caps)];
    if m == 1 {
        // The GEMV kernels: the scalar one, the 16-byte one in K layers.
        out.push(plan(MatmulKernel::VecMat));
        if n % 4 == 0 {
            for splits in [1, 4, 8, 16, 32, 64] {
                out.push(plan(MatmulKernel::VecMat4 { splits }));
            }
        }
        return distinct(out, k, n);
    }
    let units = u64::from(caps.compute_units.max(64));
    let small = SgemmTile::MEDIUM.blocks(m, n) < 2 * units;
    for tile in SgemmTile::ALL.into_iter().filter(|t| t.fits(caps)) {
        let splits: &[u32] = if small { &[1, 2, 4, 8, 16] } else { &[1] };
        for &s in splits.iter().filter(|&&s| s <= SGEMM_MAX_SPLITS) {
            out.push(plan(MatmulKernel::Sgemm { tile, splits: s }));
        }
    }
    let old = [
        TileConfig::LARGE,
        TileConfig::SMALL,
        TileConfig {
            bk: 16,
            vec4: true,
            ..TileConfig::LARGE
        },
    ];
    for t in old {
        if t.is_valid()
            && t.threads() <= caps.max_workgroup_invocations
            && t.shared_bytes() <= caps.max_shared_memory
        {
            out.push(plan(MatmulKernel::Tiled(t)));
        }
    }
    distinct(out, k, n)
}

/// The plans that run different kernels (split-K asking for slices that K
/// cuts the same way is the same launch), first of each kept.
fn distinct(mut plans: Vec<MatmulPlan>, k: u32, n: u32) -> Vec<MatmulPlan> {
    let mut seen: Vec<String> = Vec::new();
    plans.retain(|p| {
        let name = f32_plan_name(p, k, n);
        let new = !seen.contains(&name);
        seen.push(name);
        new
    });
    plans
}

/// Times every candidate at m×k×n (each spot-checked: 16 entries against
/// f64, bound K·u·Σ|a||b|), one row each naming the kernel that ran, then
/// `sgemm{shape}_default_over_best`. Returns whether the default is
/// within [`f16_bench::RULE_LIMIT`] of the best.
pub(crate) fn bench_f32_shape(
    gpu: &Device,
    rep: &mut Report,
    (m, k, n): (u32, u32, u32),
    reps: usize,
) -> Result<bool> {
    let caps = MatmulCaps::of(gpu.info());
    let shape = if m == k && k == n {
        format!("{m}")
    } else {
        format!("_{m}x{k}x{n}")
    };
    let (a, b) = (values(1, (m * k) as usize), values(2, (k * n) as usize));
    let (ga, gb) = (gpu.upload(&a)?, gpu.upload(&b)?);
    let gc = gpu.alloc::<f32>((m as usize) * (n as usize))?;
    let flops = 2.0 * f64::from(m) * f64::from(k) * f64::from(n);
    let bound = f64::from(k) * f64::powi(2.0, -24);
    let plans = candidates(m, k, n, &caps);
    // Small shapes take more repetitions; every candidate is timed in two
    // interleaved rounds (the first also warms the clocks), keeping the
    // faster median.
    let reps = if flops < 1e10 { reps.max(50) } else { reps };
    let mut times = vec![f64::INFINITY; plans.len()];
    let mut errors = vec![0f64; plans.len()];
    for _round in 0..2 {
        for (i, p) in plans.iter().enumerate() {
            let ns = time_ns(gpu, reps, |batch| {
                ops::matmul::matmul_with_plan(batch, &ga, &gb, &gc, m, k, n, *p)
            })?;
            let c = gc.download()?;
            let err = max_error(&a, &b, &c, (m as usize, k as usize, n as usize), false);
            errors[i] = errors[i].max(err);
            times[i] = times[i].min(ns);
        }
    }
    for (i, p) in plans.iter().enumerate() {
        let who = if i == 0 { "default" } else { "candidate" };
        let key = if i == 0 {
            "default".to_string()
        } else {
            short_name(p, k, n)
        };
        rep.push(
            &format!("sgemm{shape}_{key}"),
            flops / times[i] / 1e3,
            "TFLOPs",
            Some(errors[i]),
            bound,
            format!(
                " {who}: {}, {:.1} µs ({:?})",
                f32_plan_name(p, k, n),
                times[i] / 1e3,
                p.kernel
            ),
        );
    }
    let best = (0..times.len())
        .filter(|&i| times[i].is_finite())
        .min_by(|&x, &y| times[x].total_cmp(&times[y]))
        .unwrap_or(0);
    let ratio = times[0] / times[best];
    let ok = ratio <= f16_bench::RULE_LIMIT;
    rep.push(
        &format!("sgemm{shape}_default_over_best"),
        ratio,
        "x",
        None,
        0.0,
        format!(
            " default {} ÷ best {} (median times; rule: ≤ {}){}",
            f32_plan_name(&plans[0], k, n),
            f32_plan_name(&plans[best], k, n),
            f16_bench::RULE_LIMIT,
            if ok { "" } else { " RULE BROKEN" }
        ),
    );
    Ok(ok)
}
