//! The default f32 SGEMM (`shaders/matmul_f32_big.comp`): its tiles, its
//! split-K launch arithmetic and the rule that picks a tile and a slice
//! count. Plain logic, tested without a GPU.
//!
//! The kernel is the classic register-blocked shape: 256 invocations in a
//! 16×16 grid, each computing a micro-tile of C in registers (8×8 in two
//! 4×4 pieces 64 apart for the 128×128 tiles, 4×4 for 64×64; a subgroup
//! on a 16×2 strip of micro-tiles, or an 8×4 patch), A stored
//! transposed in shared memory so both operands are read as vec4s,
//! double-buffered shared slices with the next slice prefetched into
//! registers, 16-byte global loads where K and N are multiples of 4 (a
//! scalar variant of the same tile otherwise), unguarded interior blocks and
//! guarded edges. A split-K launch has each of `slices` workgroup layers
//! multiply one K slice into a partial product; a second pass
//! (`shaders/linear_reduce.comp`) adds them in slice order, so the result
//! does not depend on scheduling.

use super::plan::MatmulCaps;

/// Invocations per workgroup of every SGEMM tile.
pub const SGEMM_THREADS: u32 = 256;

/// Most K slices a split-K SGEMM launch runs.
pub const SGEMM_MAX_SPLITS: u32 = 16;

/// [`choose_sgemm`] splits K only into slices at least this deep (two
/// slices of the 64×64×16 tile), so each workgroup still overlaps the load
/// of its next slice with the multiply of the current one.
pub const SGEMM_MIN_SLICE: u32 = 32;

/// Block shape of the SGEMM kernel (`shaders/matmul_f32_big.comp`): a
/// workgroup of [`SGEMM_THREADS`] computes a `bm`×`bn` block of C from
/// `bk`-deep slices. Only the compiled tiles ([`SgemmTile::ALL`]) exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SgemmTile {
    /// Block rows.
    pub bm: u32,
    /// Block columns.
    pub bn: u32,
    /// Slice depth along K.
    pub bk: u32,
    /// Each 32 consecutive invocations compute an 8×4 patch of micro-tiles
    /// (8 distinct vec4s of B and 4 of A per k) instead of a 16×2 strip
    /// (16 and 2). Compiled for 128×128×8 only ([`SgemmTile::COMPACT`]).
    pub compact: bool,
}

impl SgemmTile {
    /// 128×128 blocks, 8-deep slices, 8×8 per invocation: large matrices.
    pub const LARGE: SgemmTile = SgemmTile {
        bm: 128,
        bn: 128,
        bk: 8,
        compact: false,
    };
    /// [`SgemmTile::LARGE`] with 8×4 patches of micro-tiles per subgroup
    /// ([`SgemmTile::compact`]): a tuning candidate.
    pub const COMPACT: SgemmTile = SgemmTile {
        compact: true,
        ..SgemmTile::LARGE
    };
    /// 128×128 blocks, 16-deep slices (half the barriers of
    /// [`SgemmTile::LARGE`], twice its shared memory): a tuning candidate.
    pub const DEEP: SgemmTile = SgemmTile {
        bm: 128,
        bn: 128,
        bk: 16,
        compact: false,
    };
    /// 64×64 blocks, 16-deep slices, 4×4 per invocation: four times the
    /// blocks of [`SgemmTile::LARGE`], for matrices too small to fill the
    /// GPU with those (and the tile split-K runs).
    pub const MEDIUM: SgemmTile = SgemmTile {
        bm: 64,
        bn: 64,
        bk: 16,
        compact: false,
    };
    /// Every compiled tile.
    pub const ALL: [SgemmTile; 4] = [
        SgemmTile::LARGE,
        SgemmTile::COMPACT,
        SgemmTile::DEEP,
        SgemmTile::MEDIUM,
    ];

    /// The built-in compiled for this tile with 16-byte loads (`vec4`,
    /// only for K and N multiples of 4: [`sgemm_vec4_applies`]) or scalar
    /// ones, or `None` for a tile with none. Pure.
    pub fn kernel_name(&self, vec4: bool) -> Option<&'static str> {
        Some(match ((self.bm, self.bn, self.bk, self.compact), vec4) {
            ((128, 128, 8, false), true) => "matmul_f32_big",
            ((128, 128, 8, false), false) => "matmul_f32_big_128x128x8_scalar",
            ((128, 128, 8, true), true) => "matmul_f32_big_128x128x8_compact",
            ((128, 128, 8, true), false) => "matmul_f32_big_128x128x8_compact_scalar",
            ((128, 128, 16, false), true) => "matmul_f32_big_128x128x16",
            ((128, 128, 16, false), false) => "matmul_f32_big_128x128x16_scalar",
            ((64, 64, 16, false), true) => "matmul_f32_big_64x64x16",
            ((64, 64, 16, false), false) => "matmul_f32_big_64x64x16_scalar",
            _ => return None,
        })
    }

    /// Shared memory the kernel declares, in bytes: two slices of A
    /// (transposed, rows padded by 4) and two of B.
    pub fn shared_bytes(&self) -> u32 {
        4 * 2 * self.bk * ((self.bm + 4) + self.bn)
    }

    /// Whether this is a compiled tile and the adapter takes it: 256
    /// invocations per workgroup and its shared memory. Pure.
    pub fn fits(&self, caps: &MatmulCaps) -> bool {
        self.kernel_name(true).is_some()
            && caps.max_workgroup_invocations >= SGEMM_THREADS
            && self.shared_bytes() <= caps.max_shared_memory
    }

    /// Blocks of C an `m`×`n` product takes with this tile.
    pub fn blocks(&self, m: u32, n: u32) -> u64 {
        u64::from(m.div_ceil(self.bm.max(1))) * u64::from(n.div_ceil(self.bn.max(1)))
    }
}

/// Whether an A with `k` columns and a `k`×`n` B run the 16-byte variant:
/// K and N multiples of 4, so every row of A, B and C starts 16-byte
/// aligned and holds whole vec4s. Pure.
pub fn sgemm_vec4_applies(k: u32, n: u32) -> bool {
    k % 4 == 0 && n % 4 == 0
}

/// How a K of some depth is cut for one launch ([`sgemm_split`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SgemmSplit {
    /// Workgroup layers, each multiplying one K slice (1: no split-K, the
    /// kernel writes C itself).
    pub slices: u32,
    /// K per slice: a multiple of the tile's `bk` when `slices` > 1 (so
    /// every slice starts 16-byte aligned); K itself when `slices` = 1.
    pub depth: u32,
}

/// The launch of `splits` requested K slices over `k` with `bk`-deep tile
/// slices: slices of equal depth rounded up to a multiple of `bk`, as many
/// as that depth needs (so no slice is empty; fewer than `splits` when K
/// is short). Pure.
pub fn sgemm_split(k: u32, splits: u32, bk: u32) -> SgemmSplit {
    let one = SgemmSplit {
        slices: 1,
        depth: k,
    };
    if splits <= 1 || bk == 0 {
        return one;
    }
    let (k64, bk64) = (u64::from(k), u64::from(bk));
    let depth = k64.div_ceil(u64::from(splits)).div_ceil(bk64) * bk64;
    let slices = k64.div_ceil(depth.max(1));
    if slices <= 1 {
        return one;
    }
    SgemmSplit {
        slices: slices as u32,
        depth: depth as u32,
    }
}

/// The SGEMM tile and requested K slices for an f32 m×k×n product on
/// `caps`, or `None` where the adapter takes no SGEMM tile (fewer than 256
/// invocations or too little shared memory: the older tiled kernel then
/// runs). With "enough" meaning the compute-unit count (64 when the adapter
/// does not say):
///
/// - [`SgemmTile::LARGE`] when its blocks are enough;
/// - [`SgemmTile::LARGE`] with split-K when its blocks reach a quarter of
///   "enough" and M and N each fill a block: slices for twice "enough" workgroups in all (H200, f32
///   1024³: 64 blocks in 4 slices ran at 29.6 TFLOP/s against 25.0 for
///   64×64 blocks in one);
/// - else [`SgemmTile::MEDIUM`], split along K unless its blocks reach
///   eight times "enough": slices for eight times "enough" workgroups (a
///   few rows or columns: H200, 4×4096×9728 ran 1.52 TFLOP/s in 16 slices
///   against 0.83 in one);
///
/// each slice at least [`SGEMM_MIN_SLICE`] deep, at most
/// [`SGEMM_MAX_SPLITS`]; one slice where K is too short.
///
/// GEMV shapes (M = 1 or N = 1) are [`super::choose_matmul`]'s to route
/// elsewhere; this rule answers for any shape. Pure.
pub fn choose_sgemm(m: u32, k: u32, n: u32, caps: &MatmulCaps) -> Option<(SgemmTile, u32)> {
    let large = SgemmTile::LARGE;
    let medium = SgemmTile::MEDIUM;
    let want = if caps.compute_units > 0 {
        u64::from(caps.compute_units)
    } else {
        64
    };
    if !medium.fits(caps) {
        return large.fits(caps).then_some((large, 1));
    }
    let most = (k / SGEMM_MIN_SLICE).clamp(1, SGEMM_MAX_SPLITS);
    if large.fits(caps) && m >= large.bm && n >= large.bn {
        let blocks = large.blocks(m, n);
        if blocks >= want {
            return Some((large, 1));
        }
        if 4 * blocks >= want {
            // A power of two, rounded down: slices of equal depth (H200,
            // 1024³: 4 slices 29.6 TFLOP/s, 5 slices 25.3).
            let asked = ((2 * want).div_ceil(blocks.max(1)) as u32).clamp(1, most);
            let splits = 1 << (31 - asked.leading_zeros());
            return Some((large, splits));
        }
    }
    let blocks = medium.blocks(m, n);
    if blocks >= 8 * want {
        return Some((medium, 1));
    }
    let splits = ((8 * want).div_ceil(blocks.max(1)) as u32).clamp(1, most);
    Some((medium, splits))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h100() -> MatmulCaps {
        MatmulCaps::new(32, 49152, 1024, 132)
    }

    #[test]
    fn tiles_name_their_variants_and_fit_48_kib() {
        for t in SgemmTile::ALL {
            assert!(t.kernel_name(true).is_some(), "{t:?}");
            assert!(t.kernel_name(false).is_some(), "{t:?}");
            assert_ne!(t.kernel_name(true), t.kernel_name(false));
            // Each invocation moves whole 16-byte chunks of A and B.
            assert_eq!((t.bm * t.bk) % (4 * SGEMM_THREADS), 0, "{t:?}");
            assert_eq!((t.bk * t.bn) % (4 * SGEMM_THREADS), 0, "{t:?}");
            assert!(t.shared_bytes() <= 48 * 1024, "{t:?}");
            assert!(t.fits(&h100()));
        }
        assert_eq!(SgemmTile::LARGE.shared_bytes(), 16640);
        assert_eq!(SgemmTile::MEDIUM.shared_bytes(), 16896);
        let odd = SgemmTile {
            bm: 96,
            ..SgemmTile::LARGE
        };
        assert_eq!(odd.kernel_name(true), None);
        assert!(!odd.fits(&h100()));
        let compact_medium = SgemmTile {
            compact: true,
            ..SgemmTile::MEDIUM
        };
        assert_eq!(compact_medium.kernel_name(false), None);
        // 128 invocations, or 16 KiB of shared memory: no SGEMM tile.
        assert!(!SgemmTile::LARGE.fits(&MatmulCaps::new(32, 49152, 128, 132)));
        assert!(!SgemmTile::LARGE.fits(&MatmulCaps::new(32, 16384, 1024, 132)));
        assert!(!SgemmTile::DEEP.fits(&MatmulCaps::new(8, 32768, 1024, 0)));
    }

    #[test]
    fn vec4_needs_k_and_n_multiples_of_4() {
        assert!(sgemm_vec4_applies(4096, 4096));
        assert!(sgemm_vec4_applies(4, 8));
        assert!(!sgemm_vec4_applies(4097, 4096));
        assert!(!sgemm_vec4_applies(4096, 4097));
        assert!(!sgemm_vec4_applies(255, 63));
    }

    #[test]
    fn split_slices_are_whole_tile_slices_and_never_empty() {
        assert_eq!(
            sgemm_split(4096, 1, 16),
            SgemmSplit {
                slices: 1,
                depth: 4096
            }
        );
        assert_eq!(
            sgemm_split(4096, 4, 16),
            SgemmSplit {
                slices: 4,
                depth: 1024
            }
        );
        // 255 in 7: 37 rounded up to 48, which takes 6 slices.
        assert_eq!(
            sgemm_split(255, 7, 16),
            SgemmSplit {
                slices: 6,
                depth: 48
            }
        );
        // Shorter than one tile slice: no split.
        assert_eq!(
            sgemm_split(5, 4, 16),
            SgemmSplit {
                slices: 1,
                depth: 5
            }
        );
        for k in [1u32, 15, 17, 127, 129, 300, 4097] {
            for splits in 1..=SGEMM_MAX_SPLITS {
                for bk in [8, 16] {
                    let s = sgemm_split(k, splits, bk);
                    assert!(s.slices >= 1 && s.slices <= splits, "{k} {splits} {s:?}");
                    let covered = u64::from(s.slices) * u64::from(s.depth);
                    assert!(covered >= u64::from(k), "{k} {splits} {s:?}");
                    if s.slices > 1 {
                        assert_eq!(s.depth % bk, 0, "{k} {splits} {s:?}");
                        // The last slice holds at least one k.
                        assert!((s.slices - 1) * s.depth < k, "{k} {splits} {s:?}");
                    } else {
                        assert_eq!(s.depth, k);
                    }
                }
            }
        }
    }

    #[test]
    fn large_shapes_take_128_tiles_and_no_split() {
        let caps = h100();
        for (m, k, n) in [(4096, 4096, 4096), (8192, 8192, 8192), (4097, 4097, 4097)] {
            assert_eq!(choose_sgemm(m, k, n, &caps), Some((SgemmTile::LARGE, 1)));
        }
        // 2048²: 256 blocks of 128×128 on 132 units.
        assert_eq!(
            choose_sgemm(2048, 2048, 2048, &caps),
            Some((SgemmTile::LARGE, 1))
        );
        // Exactly one block per unit is enough.
        assert_eq!(
            choose_sgemm(128 * 12, 64, 128 * 11, &caps),
            Some((SgemmTile::LARGE, 1))
        );
    }

    #[test]
    fn medium_shapes_split_k() {
        let caps = h100();
        // 1024²: 64 blocks of 128×128 (under 132, over a quarter): ⌈264 / 64⌉
        // = 5, rounded down to 4.
        assert_eq!(
            choose_sgemm(1024, 1024, 1024, &caps),
            Some((SgemmTile::LARGE, 4))
        );
        // 36 blocks of 128×128: ⌈264 / 36⌉ = 8 slices.
        assert_eq!(
            choose_sgemm(64 * 12, 4096, 64 * 11, &caps),
            Some((SgemmTile::LARGE, 8))
        );
        // Skinny: 4 rows fill no 128-row block; 152 blocks of 64×64,
        // ⌈1056 / 152⌉ = 7 slices.
        assert_eq!(
            choose_sgemm(4, 4096, 9728, &caps),
            Some((SgemmTile::MEDIUM, 7))
        );
    }

    #[test]
    fn small_grids_split_k_to_eight_times_the_units() {
        let caps = h100();
        // 127×63: 2 blocks; 1056 wanted, but 255 / 32 = 7 slices at most.
        assert_eq!(
            choose_sgemm(127, 255, 63, &caps),
            Some((SgemmTile::MEDIUM, 7))
        );
        // 512²: 16 blocks of 128×128, 64 of 64×64; ⌈1056 / 64⌉ = 17, at most 16.
        assert_eq!(
            choose_sgemm(512, 4096, 512, &caps),
            Some((SgemmTile::MEDIUM, 16))
        );
        // One block and a deep K: capped at the maximum.
        assert_eq!(
            choose_sgemm(64, 65536, 64, &caps),
            Some((SgemmTile::MEDIUM, SGEMM_MAX_SPLITS))
        );
        // K under two minimum slices: no split.
        for k in [1, 15, 17, 63] {
            assert_eq!(
                choose_sgemm(100, k, 100, &caps),
                Some((SgemmTile::MEDIUM, 1))
            );
        }
        // Unknown unit count: 64 wanted; 25 medium blocks, 300 / 32 = 9 slices at most.
        let unknown = MatmulCaps::new(8, 32768, 1024, 0);
        assert_eq!(
            choose_sgemm(300, 300, 300, &unknown),
            Some((SgemmTile::MEDIUM, 9))
        );
        assert_eq!(
            choose_sgemm(1024, 64, 1024, &unknown),
            Some((SgemmTile::LARGE, 1))
        );
    }

    #[test]
    fn adapters_without_the_tiles_get_none() {
        assert_eq!(
            choose_sgemm(4096, 4096, 4096, &MatmulCaps::new(32, 49152, 128, 132)),
            None
        );
        assert_eq!(
            choose_sgemm(4096, 4096, 4096, &MatmulCaps::new(32, 16384, 1024, 132)),
            None
        );
    }
}
