//! The skinny kernels' launch shapes (pure): units, workgroups and K
//! slices for a plan, the narrower workgroups that fill the GPU without
//! split-K, and the tiled kernel's tiles.

use super::*;

/// The launch shape a plan gives for a layer: what the kernel's push
/// constants and grid need. Pure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Launch {
    /// Units (a subgroup's rows of W) per workgroup.
    pub(super) upw: u32,
    /// Workgroups along the columns.
    pub(super) groups: u32,
    /// Row chunks of x.
    pub(super) mchunks: u32,
    /// 16-byte loads (K fits them).
    pub(super) vec: bool,
    /// Chunks (16-byte, or elements without `vec`) of each K slice.
    pub(super) kchunk: u32,
    /// Subgroups that share a unit, each taking a part of its K slice (1:
    /// one subgroup per unit).
    pub(super) ksub: u32,
}

/// Elements of W per 16-byte load.
pub(super) fn per_load(dtype: DType) -> u32 {
    if dtype == DType::F32 {
        4
    } else {
        8
    }
}

pub(super) fn launch(
    m: u32,
    k: u32,
    n: u32,
    dtype: DType,
    silu: bool,
    subgroup: u32,
    p: LinearPlan,
) -> Launch {
    let upw = (THREADS / subgroup.clamp(1, THREADS)).max(1);
    let units = if silu {
        (n / 2).div_ceil(ROWS_PER_UNIT / 2)
    } else {
        n.div_ceil(ROWS_PER_UNIT)
    };
    let vec = k % per_load(dtype) == 0;
    let chunks = if vec { k / per_load(dtype) } else { k };
    Launch {
        upw,
        groups: units.div_ceil(upw),
        mchunks: m.div_ceil(p.rows_per_pass),
        vec,
        kchunk: chunks.div_ceil(p.splits),
        ksub: 1,
    }
}

/// Work items of shared units one workgroup holds (`KSUB_ITEMS` in
/// `shaders/linear.glsl`).
const KSUB_ITEMS: u32 = 64;

/// Workgroups a layer wants at least: twice the compute units (128 when
/// the adapter does not say).
pub(super) fn wanted_groups(caps: &MatmulCaps) -> u64 {
    if caps.compute_units > 0 {
        2 * u64::from(caps.compute_units)
    } else {
        128
    }
}

/// The most rows per pass that take narrower workgroups before split-K.
/// H200, the FFN stack with bf16 weights at 4 rows: 2.98 ms per forward
/// with narrower workgroups (call c8), 2.85 with split-K under this limit
/// (c9); at 1 row the decode of Qwen3-4B lost its 180 reduce passes. The
/// subgroup-32 kernels narrow up to `sg32::SG32_NARROW_MAX_ROWS`.
pub(super) const NARROW_MAX_ROWS: u32 = 2;

/// [`launch`] with narrower workgroups where they reach the wanted count
/// without split-K: at most [`NARROW_MAX_ROWS`] rows per pass (with the
/// subgroup-32 kernels `sg32::SG32_NARROW_MAX_ROWS`) and one K slice, the widest of
/// halving units per workgroup (the freed subgroups sharing each unit's K,
/// each still reading at least 4 chunks of 16 bytes per lane) whose
/// workgroups number at least [`wanted_groups`]; else `launch` as it is.
/// Pure.
pub(super) fn launch_narrowed(
    m: u32,
    k: u32,
    n: u32,
    dtype: DType,
    silu: bool,
    caps: &MatmulCaps,
    p: LinearPlan,
) -> Launch {
    let l = launch(m, k, n, dtype, silu, caps.subgroup_size, p);
    let want = wanted_groups(caps);
    if p.rows_per_pass > narrow_max_rows(dtype, caps)
        || p.splits > 1
        || u64::from(l.groups) * u64::from(l.mchunks) >= want
    {
        return l;
    }
    let units = if silu {
        (n / 2).div_ceil(ROWS_PER_UNIT / 2)
    } else {
        n.div_ceil(ROWS_PER_UNIT)
    };
    let per_part = caps.subgroup_size.max(1) * MIN_CHUNKS_PER_LANE;
    let full = l.upw;
    let mut upw = full / 2;
    while upw >= 1 && full % upw == 0 {
        let ksub = full / upw;
        if l.kchunk / ksub < per_part || full > KSUB_ITEMS {
            break;
        }
        let g = units.div_ceil(upw);
        if u64::from(g) * u64::from(l.mchunks) >= want {
            return Launch {
                upw,
                groups: g,
                ksub,
                ..l
            };
        }
        upw /= 2;
    }
    l
}

/// The launch of a skinny layer (`norm`: with the RMSNorm inside) and
/// whether it is a normed layer's one wave ([`sg32::normed_one_wave`]:
/// its workgroups kept as they are, for the normed subgroup-32 kernel);
/// else [`launch_narrowed`]. Pure.
pub(super) fn layer_launch(
    (m, k, n): (u32, u32, u32),
    dtype: DType,
    silu: bool,
    norm: bool,
    caps: &MatmulCaps,
    p: LinearPlan,
) -> (Launch, bool) {
    let plain = launch(m, k, n, dtype, silu, caps.subgroup_size, p);
    let groups = u64::from(plain.groups) * u64::from(plain.mchunks);
    let one_wave =
        norm && p.splits == 1 && sg32::normed_one_wave(dtype, p.rows_per_pass, groups, caps);
    if one_wave {
        (plain, true)
    } else {
        (launch_narrowed(m, k, n, dtype, silu, caps, p), false)
    }
}

/// More K slices for `tiles` column tiles split `splits` ways, up to
/// `most`, while the workgroups per compute unit (rounded up) stay as
/// they are: each unit runs as many workgroups as before, each over a
/// shorter slice of K. (Qwen3-4B's down projection at 64 rows: 40 tiles,
/// 14 slices are 560 workgroups, 5 per unit of 132 where 16 slices fit
/// too; the f32 FFN stack took 13.95 ms with 14, 13.59 with 16, 13.80
/// with 13 and 14.13 with 12, on the H200.) Unchanged where the adapter
/// does not say its unit count. Pure.
pub(super) fn fill_rounds(tiles: u32, splits: u32, most: u32, caps: &MatmulCaps) -> u32 {
    let units = caps.compute_units;
    if units == 0 || tiles == 0 {
        return splits;
    }
    let (tiles, units) = (u64::from(tiles), u64::from(units));
    let per_unit = (tiles * u64::from(splits)).div_ceil(units);
    let fit = u32::try_from(per_unit * units / tiles).unwrap_or(u32::MAX);
    fit.clamp(splits, most.max(splits))
}

/// The tiled kernel's launch: column tiles and the K depth of a slice (a
/// multiple of its 16-deep steps). Pure.
pub(super) fn tiled_launch(k: u32, n: u32, silu: bool, splits: u32) -> (u32, u32) {
    let tiles = if silu {
        (n / 2).div_ceil(TILE_N / 2)
    } else {
        n.div_ceil(TILE_N)
    };
    let kslice = k.div_ceil(splits.max(1)).div_ceil(TILE_K) * TILE_K;
    (tiles, kslice)
}
