//! The workgroup-scope cooperative-matrix tile ([`Cm2Tile`]) and the order
//! in which the matmul rules try its compiled shapes.

use super::MatmulCaps;

/// Tile shape of the workgroup-scope cooperative-matrix f16 kernel
/// (`shaders/matmul_f16_cm2.comp`, `VK_NV_cooperative_matrix2`): one
/// workgroup (128 invocations for the 128×128×64 tile, 256 for the others)
/// owns one `bm`×`bn` accumulator and loads `bk`-deep slices of A and B
/// with tensor layouts. Each tile is a compiled variant of its own
/// ([`Cm2Tile::kernel_name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cm2Tile {
    /// Block rows.
    pub bm: u32,
    /// Block columns.
    pub bn: u32,
    /// Slice depth along K.
    pub bk: u32,
    /// Block rows launched together: with 2 or more, the blocks run in
    /// groups of this many block rows, column by column within a group, so
    /// the blocks resident at one time share more of A's rows and B's
    /// columns in L2; 0 runs them in the grid's row order. Passed to the
    /// kernel as a specialization constant.
    pub group: u32,
    /// Whole slices per step of the interior K loop, each step's matrices
    /// declared separately: 2, or 4 where a kernel is compiled for it
    /// ([`Cm2Tile::WIDE_U4`]).
    pub unroll: u32,
}

impl Cm2Tile {
    /// 128×128 blocks, 64-deep slices, 128 invocations.
    pub const SQUARE: Cm2Tile = Cm2Tile {
        bm: 128,
        bn: 128,
        bk: 64,
        group: 0,
        unroll: 2,
    };
    /// 128×256 blocks, 64-deep slices.
    pub const WIDE: Cm2Tile = Cm2Tile {
        bm: 128,
        bn: 256,
        bk: 64,
        group: 0,
        unroll: 2,
    };
    /// 128×128 blocks, 32-deep slices.
    pub const SHALLOW: Cm2Tile = Cm2Tile {
        bm: 128,
        bn: 128,
        bk: 32,
        group: 0,
        unroll: 2,
    };
    /// 64×128 blocks, 64-deep slices: twice the blocks of
    /// [`Cm2Tile::SQUARE`] for matrices too small to fill the GPU.
    pub const SMALL: Cm2Tile = Cm2Tile {
        bm: 64,
        bn: 128,
        bk: 64,
        group: 0,
        unroll: 2,
    };
    /// [`Cm2Tile::WIDE`] launched in groups of 8 block rows.
    pub const WIDE_GROUPED: Cm2Tile = Cm2Tile {
        group: 8,
        ..Cm2Tile::WIDE
    };
    /// [`Cm2Tile::SQUARE`] launched in groups of 8 block rows: the default
    /// for large products ([`choose_matmul`](super::choose_matmul)).
    pub const SQUARE_GROUPED: Cm2Tile = Cm2Tile {
        group: 8,
        ..Cm2Tile::SQUARE
    };
    /// [`Cm2Tile::WIDE_GROUPED`] with four slices per interior step
    /// (`matmul_f16_cm2_128x256x64_u4`).
    pub const WIDE_U4: Cm2Tile = Cm2Tile {
        unroll: 4,
        ..Cm2Tile::WIDE_GROUPED
    };
    /// [`Cm2Tile::WIDE`] launched in groups of 4 block rows.
    pub const WIDE_G4: Cm2Tile = Cm2Tile {
        group: 4,
        ..Cm2Tile::WIDE
    };
    /// [`Cm2Tile::WIDE`] launched in groups of 16 block rows.
    pub const WIDE_G16: Cm2Tile = Cm2Tile {
        group: 16,
        ..Cm2Tile::WIDE
    };
    /// 256×128 blocks, 64-deep slices, in groups of 8 block rows
    /// (`matmul_f16_cm2_256x128x64`): the wide tile's accumulator turned.
    pub const TALL_GROUPED: Cm2Tile = Cm2Tile {
        bm: 256,
        bn: 128,
        bk: 64,
        group: 8,
        unroll: 2,
    };
    /// 64×64 blocks, 64-deep slices, 128 invocations: four times the
    /// blocks of [`Cm2Tile::SQUARE`]; batched with B stored N×K only (the
    /// batched rule's second choice there).
    pub const QUARTER: Cm2Tile = Cm2Tile {
        bm: 64,
        bn: 64,
        bk: 64,
        group: 0,
        unroll: 2,
    };
    /// Every compiled tile, and the launch orders and unrollings measured.
    pub const ALL: [Cm2Tile; 10] = [
        Cm2Tile::SQUARE,
        Cm2Tile::WIDE,
        Cm2Tile::SHALLOW,
        Cm2Tile::SMALL,
        Cm2Tile::WIDE_GROUPED,
        Cm2Tile::SQUARE_GROUPED,
        Cm2Tile::WIDE_U4,
        Cm2Tile::WIDE_G4,
        Cm2Tile::WIDE_G16,
        Cm2Tile::TALL_GROUPED,
    ];

    /// The built-in compiled for this tile (`shaders/matmul_f16_cm2.comp`
    /// and its `variant:` lines), or `None` for a tile with none. Pure.
    pub fn kernel_name(&self) -> Option<&'static str> {
        match (self.bm, self.bn, self.bk, self.unroll) {
            (128, 128, 64, 2) => Some("matmul_f16_cm2"),
            (128, 256, 64, 2) => Some("matmul_f16_cm2_128x256x64"),
            (128, 256, 64, 4) => Some("matmul_f16_cm2_128x256x64_u4"),
            (256, 128, 64, 2) => Some("matmul_f16_cm2_256x128x64"),
            (128, 128, 32, 2) => Some("matmul_f16_cm2_128x128x32"),
            (64, 128, 64, 2) => Some("matmul_f16_cm2_64x128x64"),
            _ => None,
        }
    }

    /// The batched built-in for this tile (`_batched`, B stored K×N), or
    /// with `b_nk` the one reading B stored N×K (`_batched_bt`), or `None`
    /// where none is compiled: [`Cm2Tile::SQUARE`], [`Cm2Tile::SMALL`] and
    /// [`Cm2Tile::WIDE`] in any launch order, and [`Cm2Tile::WIDE_U4`]
    /// and [`Cm2Tile::QUARTER`] with `b_nk`. Pure.
    pub fn batched_kernel_name(&self, b_nk: bool) -> Option<&'static str> {
        match (self.bm, self.bn, self.bk, self.unroll, b_nk) {
            (128, 128, 64, 2, false) => Some("matmul_f16_cm2_batched"),
            (128, 128, 64, 2, true) => Some("matmul_f16_cm2_batched_bt"),
            (64, 128, 64, 2, false) => Some("matmul_f16_cm2_64x128x64_batched"),
            (64, 128, 64, 2, true) => Some("matmul_f16_cm2_64x128x64_batched_bt"),
            (128, 256, 64, 2, false) => Some("matmul_f16_cm2_128x256x64_batched"),
            (128, 256, 64, 2, true) => Some("matmul_f16_cm2_128x256x64_batched_bt"),
            (128, 256, 64, 4, true) => Some("matmul_f16_cm2_128x256x64_batched_bt_u4"),
            (64, 64, 64, 2, true) => Some("matmul_f16_cm2_64x64x64_batched_bt"),
            _ => None,
        }
    }

    /// Whether the adapter's workgroup-scope f16 shapes allow this tile (a
    /// tile with a compiled kernel, plain or batched):
    /// `caps.coopmat2_granularity` (M, N, K) divides `bm`, `bn`, `bk`, and
    /// no side exceeds `caps.coopmat2_max_dimension`. Pure.
    pub fn fits(&self, caps: &MatmulCaps) -> bool {
        let Some([gm, gn, gk]) = caps.coopmat2_granularity else {
            return false;
        };
        let divides = |g: u32, x: u32| g > 0 && x % g == 0;
        (self.kernel_name().is_some() || self.batched_kernel_name(true).is_some())
            && divides(gm, self.bm)
            && divides(gn, self.bn)
            && divides(gk, self.bk)
            && self.bm.max(self.bn).max(self.bk) <= caps.coopmat2_max_dimension
    }
}

/// The coopmat2 tiles [`choose_matmul`](super::choose_matmul) (`batched` false) and the batched
/// rule try, in order. Where K and N are multiples of 8 (`aligned`:
/// 16-byte rows), the square tile in groups of 8 block rows, then the
/// 64×128 one. Otherwise the loads go unaligned and other tiles lead (H200,
/// 4097³: 99.7 TFLOP/s for [`Cm2Tile::WIDE_U4`] against 78.7 for the square
/// tile; B stored N×K through the batched kernel, 124.5 for
/// [`Cm2Tile::SMALL`] against 89.9): [`Cm2Tile::WIDE_U4`], then the square
/// and small tiles; batched, the small tile, then the square one. Pure.
pub(crate) fn cm2_order(aligned: bool, batched: bool) -> &'static [Cm2Tile] {
    match (aligned, batched) {
        (true, _) => &[Cm2Tile::SQUARE_GROUPED, Cm2Tile::SMALL],
        (false, false) => &[Cm2Tile::WIDE_U4, Cm2Tile::SQUARE, Cm2Tile::SMALL],
        (false, true) => &[Cm2Tile::SMALL, Cm2Tile::SQUARE],
    }
}
