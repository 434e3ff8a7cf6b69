//! Which matmul kernel runs for a shape on an adapter: plain logic, tested
//! without a GPU.

use super::sgemm::{choose_sgemm, SgemmTile};

mod cm2_tile;
use crate::adapter::AdapterInfo;
pub(crate) use cm2_tile::cm2_order;
pub use cm2_tile::Cm2Tile;

/// Element type of a matmul's inputs (the result is always f32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MatmulDtype {
    /// f32 A and B.
    F32,
    /// f16 A and B (IEEE binary16 bits in `u16`), f32 accumulation.
    F16,
}

/// Tile shape of the register-blocked f32 kernel (`shaders/matmul_f32.comp`):
/// a workgroup computes a `bm`×`bn` block of C from `bk`-deep slices, each
/// of its `(bm/tm)·(bn/tn)` threads a `tm`×`tn` micro-tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TileConfig {
    /// Block rows.
    pub bm: u32,
    /// Block columns.
    pub bn: u32,
    /// Slice depth along K.
    pub bk: u32,
    /// Micro-tile rows per thread (a multiple of 4).
    pub tm: u32,
    /// Micro-tile columns per thread (a multiple of 4).
    pub tn: u32,
    /// 16-byte global loads and stores (`shaders/matmul_f32_vec4.comp`)
    /// where the shape allows them ([`TileConfig::vec4_applies`]: K and N
    /// multiples of 4); other shapes run the scalar kernel with the same
    /// tile. Needs `bm·bk` and `bk·bn` to be multiples of 4·threads.
    pub vec4: bool,
    /// With `vec4` (where it applies): each 32 consecutive threads compute
    /// a 4×8 patch of micro-tiles rather than a 2×16 strip, where
    /// `bn/tn` is a multiple of 8 and `bm/tm` of 4 (else ignored). Changes
    /// only which thread computes what; the scalar kernel ignores it.
    pub compact_warps: bool,
    /// With `vec4` (where it applies): each thread reads the shared-memory
    /// fragments of step k + 1 before the FMAs of step k (register
    /// double-buffering). The scalar kernel ignores it.
    pub frag_prefetch: bool,
}

impl TileConfig {
    /// 128×128 blocks, 8-deep slices, 8×8 per thread (256 threads): the
    /// large-matrix tile, sized for NVIDIA (16.5 KiB of shared memory).
    pub const LARGE: TileConfig = TileConfig {
        bm: 128,
        bn: 128,
        bk: 8,
        tm: 8,
        tn: 8,
        vec4: false,
        compact_warps: false,
        frag_prefetch: false,
    };
    /// 128×128 blocks, 16-deep slices, 8×8 per invocation, 16-byte loads:
    /// the default for large f32 products whose K and N are multiples of 4.
    pub const DEEP_VEC4: TileConfig = TileConfig {
        bm: 128,
        bn: 128,
        bk: 16,
        tm: 8,
        tn: 8,
        vec4: true,
        compact_warps: false,
        frag_prefetch: false,
    };
    /// 64×64 blocks, 8-deep slices, 4×4 per thread (256 threads): small and
    /// skinny shapes, where 128×128 blocks would leave the GPU idle.
    pub const SMALL: TileConfig = TileConfig {
        bm: 64,
        bn: 64,
        bk: 8,
        tm: 4,
        tn: 4,
        vec4: false,
        compact_warps: false,
        frag_prefetch: false,
    };
    /// 64×32 blocks, 4×4 per thread (128 threads): adapters that allow
    /// fewer than 256 invocations per workgroup.
    pub const NARROW: TileConfig = TileConfig {
        bm: 64,
        bn: 32,
        bk: 8,
        tm: 4,
        tn: 4,
        vec4: false,
        compact_warps: false,
        frag_prefetch: false,
    };

    /// The built-in kernel compiled with this tile's shape fixed, if there
    /// is one (`shaders/matmul_f32.comp`'s `variant:` lines: the three
    /// tiles [`choose_matmul`] picks); other tiles run the kernel that
    /// takes its shape as specialization constants. Pure.
    pub fn fixed_kernel(&self) -> Option<&'static str> {
        if self.vec4 {
            return None;
        }
        match (self.bm, self.bn, self.bk, self.tm, self.tn) {
            (128, 128, 8, 8, 8) => Some("matmul_f32_128x128x8_8x8"),
            (64, 64, 8, 4, 4) => Some("matmul_f32_64x64x8_4x4"),
            (64, 32, 8, 4, 4) => Some("matmul_f32_64x32x8_4x4"),
            _ => None,
        }
    }

    /// Threads per workgroup.
    pub fn threads(&self) -> u32 {
        (self.bm / self.tm) * (self.bn / self.tn)
    }

    /// Shared memory the kernel declares, in bytes (two slices of A with
    /// rows padded by 4, two of B).
    pub fn shared_bytes(&self) -> u32 {
        4 * (2 * self.bk * (self.bm + 4) + 2 * self.bk * self.bn)
    }

    /// Whether the kernel's layout rules hold: micro-tiles in 4×4 pieces
    /// that divide the block, and slices that the threads move in whole
    /// runs along a row (with `vec4`, in whole 16-byte chunks).
    pub fn is_valid(&self) -> bool {
        let TileConfig {
            bm,
            bn,
            bk,
            tm,
            tn,
            vec4,
            ..
        } = *self;
        if [bm, bn, bk, tm, tn].contains(&0) || tm % 4 != 0 || tn % 4 != 0 {
            return false;
        }
        if bm % tm != 0 || bn % tn != 0 {
            return false;
        }
        let t = self.threads();
        if (bm * bk) % t != 0 || (bk * bn) % t != 0 {
            return false;
        }
        let (ea, eb) = ((bm * bk) / t, (bk * bn) / t);
        ea > 0 && eb > 0 && bk % ea == 0 && bn % eb == 0 && (!vec4 || (ea % 4 == 0 && eb % 4 == 0))
    }

    /// Whether a `k`×`n` B (and an A with `k` columns) runs the 16-byte
    /// kernel: `vec4` is set and K and N are multiples of 4, so every row
    /// of A, B and C starts 16-byte aligned and holds whole vec4s. A pure
    /// function of the tile and the shape.
    pub fn vec4_applies(&self, k: u32, n: u32) -> bool {
        self.vec4 && k % 4 == 0 && n % 4 == 0
    }
}

/// Tile shape of the cooperative-matrix f16 kernel
/// (`shaders/matmul_f16_coopmat.comp`): 8 subgroups in a
/// `(8/warps_n)`×`warps_n` arrangement, each computing `wm`×`wn` of C, in
/// `bk`-deep slices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CoopTile {
    /// Rows of C per subgroup (16, 32, 48 or 64).
    pub wm: u32,
    /// Columns of C per subgroup (16, 32, 48 or 64).
    pub wn: u32,
    /// Subgroups across (1, 2, 4 or 8).
    pub warps_n: u32,
    /// Slice depth along K (a multiple of 16).
    pub bk: u32,
}

impl CoopTile {
    /// 128×128 blocks, 64×32 per subgroup, 32-deep slices.
    pub const DEFAULT: CoopTile = CoopTile {
        wm: 64,
        wn: 32,
        warps_n: 4,
        bk: 32,
    };
    /// 128×256 blocks, 64×64 per subgroup, 16-deep slices.
    pub const WIDE: CoopTile = CoopTile {
        wm: 64,
        wn: 64,
        warps_n: 4,
        bk: 16,
    };
    /// 256×128 blocks, 64×64 per subgroup, 16-deep slices.
    pub const TALL: CoopTile = CoopTile {
        wm: 64,
        wn: 64,
        warps_n: 2,
        bk: 16,
    };

    /// The built-in kernel compiled with this tile's shape fixed, if there
    /// is one (`shaders/matmul_f16_coopmat.comp`'s `variant:` lines:
    /// [`CoopTile::DEFAULT`], [`CoopTile::WIDE`], [`CoopTile::TALL`]);
    /// other tiles run the kernel that takes its shape as specialization
    /// constants. Pure.
    pub fn fixed_kernel(&self) -> Option<&'static str> {
        match (self.wm, self.wn, self.warps_n, self.bk) {
            (64, 32, 4, 32) => Some("matmul_f16_coopmat_w64x32_n4_k32"),
            (64, 64, 4, 16) => Some("matmul_f16_coopmat_w64x64_n4_k16"),
            (64, 64, 2, 16) => Some("matmul_f16_coopmat_w64x64_n2_k16"),
            _ => None,
        }
    }

    /// The built-in of the `VK_KHR_cooperative_matrix` kernel compiled for
    /// this tile (`shaders/matmul_f16_khr.comp` and its `variant:` lines:
    /// [`CoopTile::DEFAULT`], [`CoopTile::WIDE`], [`CoopTile::TALL`]), or
    /// `None`: that kernel has no specialized form. Pure.
    pub fn khr_kernel(&self) -> Option<&'static str> {
        match (self.wm, self.wn, self.warps_n, self.bk) {
            (64, 32, 4, 32) => Some("matmul_f16_khr"),
            (64, 64, 4, 16) => Some("matmul_f16_khr_w64x64_n4_k16"),
            (64, 64, 2, 16) => Some("matmul_f16_khr_w64x64_n2_k16"),
            _ => None,
        }
    }

    /// Block rows.
    pub fn bm(&self) -> u32 {
        self.wm * (8 / self.warps_n.max(1))
    }

    /// Block columns.
    pub fn bn(&self) -> u32 {
        self.wn * self.warps_n
    }

    /// Shared memory the kernel declares, in bytes: two padded f16 slices
    /// of A and of B, and 1 KiB of f32 scratch per subgroup.
    pub fn shared_bytes(&self) -> u32 {
        let (bm, bn, bk) = (self.bm(), self.bn(), self.bk);
        2 * (2 * bm * (bk + 8)) + 2 * (2 * bk * (bn + 8)) + 4 * 8 * 256
    }

    /// Whether the kernel's layout rules hold (see the shader's header).
    pub fn is_valid(&self) -> bool {
        let piece = |w: u32| w > 0 && w <= 64 && w % 16 == 0;
        let chunks = |x: u32| x % 2048 == 0 && x <= 8192;
        piece(self.wm)
            && piece(self.wn)
            && [1, 2, 4, 8].contains(&self.warps_n)
            && self.bk > 0
            && self.bk % 16 == 0
            && chunks(self.bm() * self.bk)
            && chunks(self.bk * self.bn())
    }
}

/// The kernel a matmul runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MatmulKernel {
    /// The f32 SGEMM (`shaders/matmul_f32_big.comp`, the default f32
    /// path): a compiled [`SgemmTile`], 16-byte loads where K and N are
    /// multiples of 4, and `splits` requested K slices (1: none; more:
    /// split-K with a deterministic reduction pass; the launch runs
    /// [`super::sgemm_split`]'s slices, at most
    /// [`super::SGEMM_MAX_SPLITS`]).
    Sgemm {
        /// Block shape.
        tile: SgemmTile,
        /// Requested K slices.
        splits: u32,
    },
    /// The register-blocked shared-memory f32 kernel with this tile.
    Tiled(TileConfig),
    /// N = 1: one subgroup per row of A (`shaders/matvec_f32.comp`).
    MatVec,
    /// N = 1 with K a multiple of 4: the same with 16-byte loads
    /// (`shaders/matvec_f32_vec4.comp`).
    MatVec4,
    /// M = 1: columns of B walked in K slices (`shaders/vecmat_f32.comp`).
    VecMat,
    /// M = 1 with N a multiple of 4: 16-byte loads, [`VECMAT4_COLS`]
    /// columns per workgroup and K split over `splits` requested workgroup
    /// layers (`shaders/vecmat_f32_vec4.comp`; more than one: a partials
    /// buffer and an in-order reduction pass), at most
    /// [`VECMAT4_MAX_SPLITS`].
    VecMat4 {
        /// Requested K layers (the launch runs
        /// [`super::sgemm_split`]`(k, splits, 1)`'s slices).
        splits: u32,
    },
    /// f16 inputs on cooperative matrices with this tile
    /// (`shaders/matmul_f16_coopmat.comp`, `VK_NV_cooperative_matrix`).
    CoopMatF16(CoopTile),
    /// f16 inputs on `VK_KHR_cooperative_matrix`'s subgroup-scope matrices
    /// with this tile (`shaders/matmul_f16_khr.comp`; the tiles of
    /// [`CoopTile::khr_kernel`]).
    CoopMatKhrF16(CoopTile),
    /// f16 inputs on workgroup-scope cooperative matrices with tensor-layout
    /// loads (`shaders/matmul_f16_cm2.comp`, `VK_NV_cooperative_matrix2`),
    /// any M, K, N.
    CoopMat2F16(Cm2Tile),
}

/// What [`choose_matmul`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatmulPlan {
    /// The kernel that computes C.
    pub kernel: MatmulKernel,
    /// f16 inputs are first widened to f32 scratch buffers (f16 without a
    /// usable cooperative-matrix path).
    pub widen_f16: bool,
}

/// What of the adapter matters to the choice. Built by [`MatmulCaps::of`]
/// from a device, or (for planning without one) by [`MatmulCaps::new`] and
/// the `with_*` methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MatmulCaps {
    /// Subgroup size.
    pub subgroup_size: u32,
    /// maxComputeSharedMemorySize in bytes.
    pub max_shared_memory: u32,
    /// maxComputeWorkGroupInvocations.
    pub max_workgroup_invocations: u32,
    /// Streaming multiprocessors / compute units (0: unknown).
    pub compute_units: u32,
    /// The 16×16×16 f16 → f32 subgroup shape is usable by the built-in
    /// cooperative-matrix kernel (VK_NV_cooperative_matrix lists it).
    pub coopmat_f16: bool,
    /// The same shape is listed by VK_KHR_cooperative_matrix (the Khronos
    /// kernel, `shaders/matmul_f16_khr.comp`, applies).
    pub coopmat_khr_f16: bool,
    /// `VK_NV_cooperative_matrix2` is enabled with workgroup scope,
    /// flexible dimensions and tensor addressing, beside f16 arithmetic and
    /// 16-bit storage, and lists a workgroup-scope f16 · f16 + f32 → f32
    /// shape for 256 invocations: its (M, N, K) granularity (the finest
    /// such shape's). `None`: the workgroup-scope kernel does not apply.
    pub coopmat2_granularity: Option<[u32; 3]>,
    /// `cooperativeMatrixFlexibleDimensionsMaxDimension` (0 without the
    /// extension).
    pub coopmat2_max_dimension: u32,
    /// Beside [`MatmulCaps::coopmat2_granularity`], `cooperativeMatrixBlockLoads`
    /// is enabled: the workgroup-scope kernels that widen bf16 or f32
    /// operands to f16 inside their loads (`shaders/matmul_cm2_decode.comp`)
    /// apply.
    pub coopmat2_decode: bool,
}

impl MatmulCaps {
    /// Caps without cooperative matrices.
    pub fn new(
        subgroup_size: u32,
        max_shared_memory: u32,
        max_workgroup_invocations: u32,
        compute_units: u32,
    ) -> MatmulCaps {
        MatmulCaps {
            subgroup_size,
            max_shared_memory,
            max_workgroup_invocations,
            compute_units,
            coopmat_f16: false,
            coopmat_khr_f16: false,
            coopmat2_granularity: None,
            coopmat2_max_dimension: 0,
            coopmat2_decode: false,
        }
    }

    /// The same with [`MatmulCaps::coopmat_f16`] set.
    pub fn with_coopmat_f16(self, usable: bool) -> MatmulCaps {
        MatmulCaps {
            coopmat_f16: usable,
            ..self
        }
    }

    /// The same with [`MatmulCaps::coopmat_khr_f16`] set.
    pub fn with_coopmat_khr_f16(self, usable: bool) -> MatmulCaps {
        MatmulCaps {
            coopmat_khr_f16: usable,
            ..self
        }
    }

    /// The same with the workgroup-scope shape's granularity and the
    /// largest flexible dimension ([`MatmulCaps::coopmat2_granularity`]).
    pub fn with_coopmat2(self, granularity: Option<[u32; 3]>, max_dimension: u32) -> MatmulCaps {
        MatmulCaps {
            coopmat2_granularity: granularity,
            coopmat2_max_dimension: max_dimension,
            ..self
        }
    }

    /// The same with [`MatmulCaps::coopmat2_decode`] set.
    pub fn with_coopmat2_decode(self, usable: bool) -> MatmulCaps {
        MatmulCaps {
            coopmat2_decode: usable,
            ..self
        }
    }

    /// The caps of an adapter as a created device reports them.
    pub fn of(info: &AdapterInfo) -> MatmulCaps {
        let coopmat2 = info.cooperative_matrix_features.nv2.as_ref().filter(|v| {
            v.workgroup_scope
                && v.flexible_dimensions
                && v.tensor_addressing
                && v.workgroup_scope_max_workgroup_size >= 256
                && info.float16
                && info.storage_buffer16
        });
        let granularity = coopmat2.and_then(|v| v.f16_workgroup_granularity(256));
        MatmulCaps {
            subgroup_size: info.subgroup_size,
            max_shared_memory: info.max_shared_memory,
            max_workgroup_invocations: info.max_workgroup_invocations,
            compute_units: info.compute_units,
            coopmat_f16: info
                .cooperative_matrix_nv_shapes
                .iter()
                .any(|s| s.is_f16_f32_16x16x16())
                && info.float16,
            coopmat_khr_f16: info
                .cooperative_matrix_shapes
                .iter()
                .any(|s| s.is_f16_f32_16x16x16())
                && info.float16,
            coopmat2_granularity: granularity,
            coopmat2_max_dimension: coopmat2.map_or(0, |v| v.flexible_dimensions_max_dimension),
            coopmat2_decode: granularity.is_some() && coopmat2.is_some_and(|v| v.block_loads),
        }
    }
}

/// Columns of C each workgroup of [`MatmulKernel::VecMat4`] covers.
pub const VECMAT4_COLS: u32 = 128;

/// Most K layers [`MatmulKernel::VecMat4`] runs.
pub const VECMAT4_MAX_SPLITS: u32 = 64;

/// [`choose_matmul`] gives each K layer of [`MatmulKernel::VecMat4`] at
/// least this many rows (eight steps of its eight interleaved slices).
const VECMAT4_MIN_ROWS: u32 = 64;

/// K layers for the M = 1 kernel at k×n: enough workgroups for four per
/// compute unit (256 when the count is unknown), each layer at least
/// [`VECMAT4_MIN_ROWS`] deep, at most [`VECMAT4_MAX_SPLITS`]. Pure.
fn vecmat4_splits(k: u32, n: u32, caps: &MatmulCaps) -> u32 {
    let groups = u64::from(n.div_ceil(VECMAT4_COLS));
    let want = if caps.compute_units > 0 {
        4 * u64::from(caps.compute_units)
    } else {
        256
    };
    if groups >= want {
        return 1;
    }
    let most = (k / VECMAT4_MIN_ROWS).clamp(1, VECMAT4_MAX_SPLITS);
    (want.div_ceil(groups.max(1)) as u32).clamp(1, most)
}

/// Whether the subgroup-scope cooperative-matrix kernels (NV or KHR, tile
/// [`CoopTile::DEFAULT`]) apply to m×k×n on `caps`, the extension aside:
/// a 32-lane subgroup, 256 invocations, the tile's shared memory, K and N
/// multiples of 8 (16-byte rows) and M, N ≥ 16. Pure.
pub fn subgroup_coop_fits(m: u32, k: u32, n: u32, caps: &MatmulCaps) -> bool {
    caps.subgroup_size == 32
        && caps.max_workgroup_invocations >= 256
        && caps.max_shared_memory >= CoopTile::DEFAULT.shared_bytes()
        && k % 8 == 0
        && n % 8 == 0
        && m >= 16
        && n >= 16
}

/// Picks the kernel for C[m×n] = A[m×k]·B[k×n] with `dtype` inputs.
///
/// - N = 1 or M = 1 (f32, or f16 once widened): the GEMV kernels, which
///   are bound by memory bandwidth (16-byte loads when K, for N = 1, or N,
///   for M = 1, is a multiple of 4; for M = 1 then K split over workgroup
///   layers until the workgroups number four per compute unit, each layer
///   at least 64 rows, at most [`VECMAT4_MAX_SPLITS`]).
/// - f16 with `VK_NV_cooperative_matrix2`'s workgroup-scope f16 shape
///   ([`MatmulCaps::coopmat2_granularity`]), any M, K, N: the
///   workgroup-scope kernel, with the larger of [`Cm2Tile::SQUARE_GROUPED`]
///   (128×128 blocks of 128 invocations, launched in groups of 8 block rows;
///   where K or N is not a multiple of 8, [`Cm2Tile::WIDE_U4`] first, then
///   [`Cm2Tile::SQUARE`]) and [`Cm2Tile::SMALL`] that fits and gives nine tenths of
///   the compute units a block (of 64 when the count is unknown), else the
///   smallest that fits. The 128×256 tile ([`Cm2Tile::WIDE_GROUPED`]) is
///   a candidate only: on an H200 it runs at 226 / 240 TFLOP/s at 4096³ /
///   8192³ against 287 / 310 for the square tile.
/// - f16 with a usable 16×16×16 subgroup-scope shape, a 32-lane subgroup,
///   K and N multiples of 8 (16-byte rows) and M, N ≥ 16
///   ([`subgroup_coop_fits`]): the Khronos extension's kernel where
///   `VK_KHR_cooperative_matrix` lists the shape, else NVIDIA's older
///   extension's; other f16 shapes widen to f32.
/// - f32 (and widened f16): the SGEMM ([`MatmulKernel::Sgemm`]) with
///   [`super::choose_sgemm`]'s tile and K slices (128×128 blocks when they
///   give every compute unit one, else 64×64, split along K when even
///   those are fewer than the units); where the adapter takes no SGEMM
///   tile (under 256 invocations or 17 KiB of shared memory), the older
///   tiled kernel ([`MatmulKernel::Tiled`]) with 64×64 or 64×32 blocks.
pub fn choose_matmul(m: u32, k: u32, n: u32, dtype: MatmulDtype, caps: &MatmulCaps) -> MatmulPlan {
    let gemv = if n == 1 && k % 4 == 0 {
        Some(MatmulKernel::MatVec4)
    } else if n == 1 {
        Some(MatmulKernel::MatVec)
    } else if m == 1 && n % 4 == 0 {
        Some(MatmulKernel::VecMat4 {
            splits: vecmat4_splits(k, n, caps),
        })
    } else if m == 1 {
        Some(MatmulKernel::VecMat)
    } else {
        None
    };
    let want = if caps.compute_units > 0 {
        u64::from(caps.compute_units)
    } else {
        64
    };
    if dtype == MatmulDtype::F16 && gemv.is_none() {
        // A tile is enough once its blocks reach nine tenths of the compute
        // units; the grouped launch order needs 16-byte rows (K and N
        // multiples of 8) to pay.
        let order = cm2_order(k % 8 == 0 && n % 8 == 0, false);
        let fitting: Vec<Cm2Tile> = order.iter().copied().filter(|t| t.fits(caps)).collect();
        let blocks = |t: &Cm2Tile| u64::from(m.div_ceil(t.bm)) * u64::from(n.div_ceil(t.bn));
        let enough = (want * 9).div_ceil(10);
        let tile = fitting
            .iter()
            .find(|t| blocks(t) >= enough)
            .or(fitting.last())
            .copied();
        if let Some(tile) = tile {
            return MatmulPlan {
                kernel: MatmulKernel::CoopMat2F16(tile),
                widen_f16: false,
            };
        }
    }
    if dtype == MatmulDtype::F16 && gemv.is_none() && subgroup_coop_fits(m, k, n, caps) {
        // The Khronos extension's kernel where the adapter lists the shape
        // there (16-byte shared stores), else NVIDIA's older extension's.
        if caps.coopmat_khr_f16 {
            return MatmulPlan {
                kernel: MatmulKernel::CoopMatKhrF16(CoopTile::DEFAULT),
                widen_f16: false,
            };
        }
        if caps.coopmat_f16 {
            return MatmulPlan {
                kernel: MatmulKernel::CoopMatF16(CoopTile::DEFAULT),
                widen_f16: false,
            };
        }
    }
    let widen_f16 = dtype == MatmulDtype::F16;
    if let Some(kernel) = gemv {
        return MatmulPlan { kernel, widen_f16 };
    }
    // The older kernel's 128×128×16 tile with 16-byte loads where K and N
    // allow them and its blocks fill the compute units (H200, f32 without
    // TF32: 42.1 and 43.0 TFLOP/s at 4096³ and 8192³, 0.83 and 0.84 of
    // cuBLAS, against 37.4 and 37.8 for the SGEMM's 128×128×8 tile).
    let deep = TileConfig::DEEP_VEC4;
    let deep_blocks = u64::from(m.div_ceil(deep.bm)) * u64::from(n.div_ceil(deep.bn));
    if k % 4 == 0
        && n % 4 == 0
        && deep_blocks >= want
        && deep.shared_bytes() <= caps.max_shared_memory
        && caps.max_workgroup_invocations >= 256
    {
        return MatmulPlan {
            kernel: MatmulKernel::Tiled(deep),
            widen_f16,
        };
    }
    if let Some((tile, splits)) = choose_sgemm(m, k, n, caps) {
        return MatmulPlan {
            kernel: MatmulKernel::Sgemm { tile, splits },
            widen_f16,
        };
    }
    MatmulPlan {
        kernel: MatmulKernel::Tiled(choose_tile(m, n, caps)),
        widen_f16,
    }
}

/// The tile of the older register-blocked kernel (`shaders/matmul_f32.comp`,
/// [`MatmulKernel::Tiled`]) for an m×n product: 128×128 blocks when they
/// give every compute unit at least one block (or, with the count unknown,
/// at least 64 blocks), else 64×64; 64×32 where the adapter allows fewer
/// than 256 invocations. [`choose_matmul`] falls back to it where no
/// [`SgemmTile`] fits; the op batch's fused matmul epilogues (generated
/// from that kernel's source) use it always. Pure.
pub(crate) fn choose_tile(m: u32, n: u32, caps: &MatmulCaps) -> TileConfig {
    let want = if caps.compute_units > 0 {
        u64::from(caps.compute_units)
    } else {
        64
    };
    let fits = |t: &TileConfig| {
        t.threads() <= caps.max_workgroup_invocations && t.shared_bytes() <= caps.max_shared_memory
    };
    let blocks = |t: &TileConfig| u64::from(m.div_ceil(t.bm)) * u64::from(n.div_ceil(t.bn));
    if fits(&TileConfig::LARGE) && blocks(&TileConfig::LARGE) >= want {
        TileConfig::LARGE
    } else if fits(&TileConfig::SMALL) {
        TileConfig::SMALL
    } else {
        TileConfig::NARROW
    }
}

#[cfg(test)]
mod tests;
