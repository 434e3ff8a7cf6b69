//! Batched f16 products: `count` independent C_i = A_i·B_i of one shape in
//! one launch (what `torch.bmm` computes), the matrices at fixed element
//! strides in three buffers; each B stored K×N or, as nn.Linear keeps its
//! `[out, in]` weight, N×K (read transposed in place, no copy).

use super::{check_grid, same, shape_error, Cm2Tile, MatmulCaps};
use crate::{Batch, Buffer, Error, Result};

/// The shape of a batched product ([`matmul_f16_batched`]): `count`
/// products of `m`×`k` by `k`×`n`, row-major, matrix `i` of A starting at
/// element `i * stride_a` of its buffer (likewise B and C). With
/// `b_transposed`, each B is stored `n`×`k` row-major instead (nn.Linear's
/// `[out, in]` weight, read as its transpose without a copy).
///
/// A stride of 0 for A or B uses one matrix for every product (a shared
/// weight); C's stride must keep the outputs apart (at least `m * n`, or
/// any value when `count` is 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BatchedShape {
    /// Number of products.
    pub count: u32,
    /// Rows of each A and C.
    pub m: u32,
    /// Columns of each A, rows of each B.
    pub k: u32,
    /// Columns of each B and C.
    pub n: u32,
    /// Elements from one A to the next.
    pub stride_a: u32,
    /// Elements from one B to the next.
    pub stride_b: u32,
    /// Elements from one C to the next.
    pub stride_c: u32,
    /// Each B is stored `n`×`k` row-major (C_i = A_i·B_iᵀ of the stored
    /// matrices); `stride_b` still counts elements from one B to the next.
    pub b_transposed: bool,
}

impl BatchedShape {
    /// `count` products stored back to back (strides `m·k`, `k·n`, `m·n`).
    /// Products over 2³² − 1 elements saturate the strides, which
    /// [`matmul_f16_batched`] then refuses.
    pub fn packed(count: u32, m: u32, k: u32, n: u32) -> BatchedShape {
        let sat = |x: u32, y: u32| x.saturating_mul(y);
        BatchedShape {
            count,
            m,
            k,
            n,
            stride_a: sat(m, k),
            stride_b: sat(k, n),
            stride_c: sat(m, n),
            b_transposed: false,
        }
    }

    /// The same with each B stored `n`×`k` row-major
    /// ([`BatchedShape::b_transposed`]); lengths and strides are unchanged
    /// (a B holds `k·n` elements either way).
    pub fn with_b_transposed(self) -> BatchedShape {
        BatchedShape {
            b_transposed: true,
            ..self
        }
    }

    /// Elements each buffer must hold at least: A, B, C. Pure.
    pub fn lens(&self) -> [u64; 3] {
        let last = u64::from(self.count.saturating_sub(1));
        let (m, k, n) = (u64::from(self.m), u64::from(self.k), u64::from(self.n));
        [
            last * u64::from(self.stride_a) + m * k,
            last * u64::from(self.stride_b) + k * n,
            last * u64::from(self.stride_c) + m * n,
        ]
    }

    /// What is wrong with this shape, if anything (zero sizes, overlapping
    /// outputs, indices past 32 bits). Pure.
    pub fn problem(&self) -> Option<String> {
        if self.count == 0 || self.m == 0 || self.k == 0 || self.n == 0 {
            return Some(format!(
                "count, M, K and N must be at least 1 (count {})",
                self.count
            ));
        }
        let mn = u64::from(self.m) * u64::from(self.n);
        if self.count > 1 && u64::from(self.stride_c) < mn {
            return Some(format!(
                "stride_c {} is less than M·N = {mn}: the products' outputs would overlap",
                self.stride_c
            ));
        }
        let most = self.lens().into_iter().max().unwrap_or(0);
        if most > u64::from(u32::MAX) {
            return Some(format!(
                "the matrices reach element {most}, past 2^32 - 1 (the kernels index in 32 bits)"
            ));
        }
        None
    }
}

/// Records `shape.count` products C_i = A_i·B_i of f16 matrices (IEEE
/// binary16 bits in `u16`) with f32 accumulation and f32 C, in one launch.
///
/// Runs the workgroup-scope cooperative-matrix kernel
/// (`VK_NV_cooperative_matrix2`, tensor cores) where the adapter has its
/// f16 shape, with [`batched_tile`]'s tile, and otherwise a 16×16-tile
/// kernel that needs only `storageBuffer16BitAccess` (else
/// [`Error::Unsupported`]). Both read B stored K×N or, with
/// [`BatchedShape::b_transposed`], N×K. Any M, K, N and strides.
///
/// Errors ([`Error::MatmulShape`]): a zero size, C's stride overlapping
/// its outputs, a buffer shorter than [`BatchedShape::lens`], indices past
/// 32 bits, C being A's or B's buffer, a count over the adapter's grid
/// depth (`maxComputeWorkGroupCount[2]`).
pub fn matmul_f16_batched(
    batch: &mut Batch,
    a: &Buffer<u16>,
    b: &Buffer<u16>,
    c: &Buffer<f32>,
    shape: BatchedShape,
) -> Result<()> {
    let caps = MatmulCaps::of(a.device().info());
    matmul_f16_batched_with_tile(batch, a, b, c, shape, batched_tile(&shape, &caps))
}

/// [`matmul_f16_batched`] with an explicit workgroup-scope tile (for
/// tuning), or `None` for the portable 16×16-tile kernel. The tile needs a
/// batched kernel ([`Cm2Tile::batched_kernel_name`] for the shape's B
/// layout) and must fit the adapter ([`Cm2Tile::fits`]), else
/// [`Error::MatmulShape`]; its launch order (`group`) is passed to the
/// kernel. Otherwise the errors of [`matmul_f16_batched`].
pub fn matmul_f16_batched_with_tile(
    batch: &mut Batch,
    a: &Buffer<u16>,
    b: &Buffer<u16>,
    c: &Buffer<f32>,
    shape: BatchedShape,
    tile: Option<Cm2Tile>,
) -> Result<()> {
    let BatchedShape { m, k, n, .. } = shape;
    if let Some(p) = shape.problem() {
        return Err(shape_error(m, k, n, format!("batched: {p}")));
    }
    let have = [a.len() as u64, b.len() as u64, c.len() as u64];
    for ((name, need), got) in ["A", "B", "C"].into_iter().zip(shape.lens()).zip(have) {
        if got < need {
            return Err(shape_error(
                m,
                k,
                n,
                format!(
                    "batched: {name} holds {got} elements; {} products at its stride need {need}",
                    shape.count
                ),
            ));
        }
    }
    if same(a, c) || same(b, c) {
        return Err(shape_error(
            m,
            k,
            n,
            "batched: C is the same buffer as A or B; the kernels read A and B while they write C"
                .into(),
        ));
    }
    let gpu = a.device();
    if !gpu.info().storage_buffer16 {
        return Err(Error::Unsupported {
            what: "f16 matmul inputs (storageBuffer16BitAccess)",
            adapter: gpu.info().name.clone(),
        });
    }
    let bt = shape.b_transposed;
    let (name, bm, bn, group) = match tile {
        Some(t) => {
            let caps = MatmulCaps::of(gpu.info());
            let Some(name) = t.batched_kernel_name(bt).filter(|_| t.fits(&caps)) else {
                return Err(shape_error(
                    m,
                    k,
                    n,
                    format!(
                        "batched: workgroup-scope tile {t:?} does not apply: it needs a batched \
                         kernel for B stored {} and VK_NV_cooperative_matrix2 with a 256-invocation \
                         f16 shape whose granularity ({:?}) divides the tile, sides up to {}",
                        if bt { "N×K" } else { "K×N" },
                        caps.coopmat2_granularity,
                        caps.coopmat2_max_dimension
                    ),
                ));
            };
            (name, t.bm, t.bn, t.group)
        }
        None if bt => ("matmul_f16_batched_bt", 16, 16, 0),
        None => ("matmul_f16_batched", 16, 16, 0),
    };
    let grid = [n.div_ceil(bn), m.div_ceil(bm), shape.count];
    check_grid(&gpu, m, k, n, grid)?;
    let spec: &[(u32, u32)] = if tile.is_some() { &[(0, group)] } else { &[] };
    let kernel = crate::builtins::get(&gpu.inner, name, spec)?;
    let push: [u8; 24] = bytemuck::cast([m, k, n, shape.stride_a, shape.stride_b, shape.stride_c]);
    batch.run_configured(&kernel, &[a, b, c], grid, Some(&push))?;
    Ok(())
}

/// The cooperative-matrix tile for a batched product, or `None` where the
/// adapter has no workgroup-scope f16 shape for it. The rule of
/// [`super::choose_matmul`]'s f16 tiles, over the blocks of all `count`
/// products: where K and N are multiples of 8 (16-byte rows), the larger
/// of the square tile ([`Cm2Tile::SQUARE_GROUPED`], launched in groups of
/// 8 block rows) and a smaller one that fits the adapter and whose blocks
/// reach nine tenths of the compute units (of 64 when the count is
/// unknown), else the smallest that fits; the smaller tile is
/// [`Cm2Tile::QUARTER`] for B stored N×K and [`Cm2Tile::SMALL`] for B
/// stored K×N. Otherwise [`Cm2Tile::SMALL`] first, then
/// [`Cm2Tile::SQUARE`]. On an H200 at the Qwen3-4B prefill's 512 rows
/// (B stored N×K) the 64×64 tile ran o and down at 146.9 and 155.2
/// TFLOP/s against 124.8 and 129.0 for 64×128 (whose 160 blocks are 1.2
/// waves of 132 units), the square tile q|k|v and gate|up at 199.7 and
/// 244.6 against 171.0 and 162.2 for 64×64 (docs/runs/2026-11-27r-h200-r7).
/// Pure.
pub fn batched_tile(shape: &BatchedShape, caps: &MatmulCaps) -> Option<Cm2Tile> {
    let blocks = |t: &Cm2Tile| {
        u64::from(shape.m.div_ceil(t.bm))
            * u64::from(shape.n.div_ceil(t.bn))
            * u64::from(shape.count)
    };
    let want = if caps.compute_units > 0 {
        u64::from(caps.compute_units)
    } else {
        64
    };
    let enough = (want * 9).div_ceil(10);
    let aligned = shape.k % 8 == 0 && shape.n % 8 == 0;
    let order = if aligned && shape.b_transposed {
        &[Cm2Tile::SQUARE_GROUPED, Cm2Tile::QUARTER]
    } else {
        super::plan::cm2_order(aligned, true)
    };
    let fitting: Vec<Cm2Tile> = order.iter().copied().filter(|t| t.fits(caps)).collect();
    fitting
        .iter()
        .find(|t| blocks(t) >= enough)
        .or(fitting.last())
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_lengths_and_problems() {
        let s = BatchedShape::packed(32, 512, 128, 512);
        assert_eq!(s.lens(), [32 * 512 * 128, 32 * 128 * 512, 32 * 512 * 512]);
        assert_eq!(s.problem(), None);
        let shared_b = BatchedShape { stride_b: 0, ..s };
        assert_eq!(shared_b.lens()[1], 128 * 512);
        assert_eq!(shared_b.problem(), None);
        let overlap = BatchedShape { stride_c: 100, ..s };
        assert!(overlap.problem().unwrap().contains("overlap"));
        let one = BatchedShape {
            count: 1,
            stride_c: 0,
            ..s
        };
        assert_eq!(one.problem(), None);
        assert!(BatchedShape::packed(0, 1, 1, 1).problem().is_some());
        let huge = BatchedShape::packed(70_000, 256, 256, 1);
        assert!(huge.problem().unwrap().contains("2^32"));
    }

    #[test]
    fn b_transposed_keeps_lengths_and_problems() {
        let s = BatchedShape::packed(3, 5, 7, 9);
        assert!(!s.b_transposed);
        let t = s.with_b_transposed();
        assert!(t.b_transposed);
        assert_eq!(
            BatchedShape {
                b_transposed: false,
                ..t
            },
            s
        );
        assert_eq!(t.lens(), s.lens());
        assert_eq!(t.problem(), None);
        let overlap = BatchedShape { stride_c: 1, ..t };
        assert!(overlap.problem().unwrap().contains("overlap"));
    }

    #[test]
    fn tile_follows_the_compute_units() {
        let plain = MatmulCaps::new(32, 49152, 1024, 132);
        let caps = plain.with_coopmat2(Some([16, 16, 16]), 256);
        // 132 units: a tile is enough from 119 blocks.
        // 32 × (512×512): 512 square blocks: the square tile in groups.
        let bmm = BatchedShape::packed(32, 512, 128, 512);
        assert_eq!(batched_tile(&bmm, &caps), Some(Cm2Tile::SQUARE_GROUPED));
        assert_eq!(
            batched_tile(&bmm.with_b_transposed(), &caps),
            Some(Cm2Tile::SQUARE_GROUPED)
        );
        // One 4096×4096: 1024 square blocks; one 1536×1536: 144, still
        // enough.
        let big = BatchedShape::packed(1, 4096, 4096, 4096);
        assert_eq!(batched_tile(&big, &caps), Some(Cm2Tile::SQUARE_GROUPED));
        let smaller = BatchedShape::packed(1, 1536, 1536, 1536).with_b_transposed();
        assert_eq!(batched_tile(&smaller, &caps), Some(Cm2Tile::SQUARE_GROUPED));
        // B stored N×K with too few square blocks: 64×64. The Qwen3-4B
        // prefill's o and down (80 square blocks of 512 × 2560) and its k
        // and v (512 × 1024: 32).
        for (k, n) in [(4096, 2560), (9728, 2560), (2560, 1024)] {
            let s = BatchedShape::packed(1, 512, k, n).with_b_transposed();
            assert_eq!(batched_tile(&s, &caps), Some(Cm2Tile::QUARTER), "{k} {n}");
            // Stored K×N: no 64×64 build, 64×128.
            let kn = BatchedShape::packed(1, 512, k, n);
            assert_eq!(batched_tile(&kn, &caps), Some(Cm2Tile::SMALL), "{k} {n}");
        }
        // Its q|k|v and gate|up: enough square blocks.
        for n in [6144, 19456] {
            let s = BatchedShape::packed(1, 512, 2560, n).with_b_transposed();
            assert_eq!(batched_tile(&s, &caps), Some(Cm2Tile::SQUARE_GROUPED));
        }
        // K or N not a multiple of 8: the small tile leads.
        let odd_k = BatchedShape::packed(1, 4096, 4097, 4096).with_b_transposed();
        assert_eq!(batched_tile(&odd_k, &caps), Some(Cm2Tile::SMALL));
        let odd_n = BatchedShape::packed(1, 4096, 4096, 4100);
        assert_eq!(batched_tile(&odd_n, &caps), Some(Cm2Tile::SMALL));
        let odd_few = BatchedShape::packed(1, 256, 4097, 256);
        assert_eq!(batched_tile(&odd_few, &caps), Some(Cm2Tile::SQUARE));
        // 4 × (256×256): 16 square blocks, 32 small ones, too few: the
        // smallest tile. One 1024×1024: 64 square, 128 small: small.
        let few = BatchedShape::packed(4, 256, 64, 256);
        assert_eq!(batched_tile(&few, &caps), Some(Cm2Tile::SMALL));
        let k1 = BatchedShape::packed(1, 1024, 1024, 1024);
        assert_eq!(batched_tile(&k1, &caps), Some(Cm2Tile::SMALL));
        // Unknown unit count: 64 (enough from 58 blocks).
        let unknown = MatmulCaps::new(32, 49152, 1024, 0).with_coopmat2(Some([16, 16, 16]), 256);
        let eight = BatchedShape::packed(4, 512, 64, 1024);
        assert_eq!(
            batched_tile(&eight, &unknown),
            Some(Cm2Tile::SQUARE_GROUPED)
        );
        let two = BatchedShape::packed(2, 256, 64, 1024);
        assert_eq!(batched_tile(&two, &unknown), Some(Cm2Tile::SMALL));
        // A flexible-dimension limit under 128: nothing of ours fits.
        let narrow = plain.with_coopmat2(Some([16, 16, 16]), 64);
        assert_eq!(batched_tile(&big, &narrow), None);
        // No coopmat2: the portable kernel.
        assert_eq!(batched_tile(&bmm, &plain), None);
    }

    #[test]
    fn every_chosen_tile_has_a_batched_kernel() {
        for t in [
            Cm2Tile::WIDE_GROUPED,
            Cm2Tile::SQUARE_GROUPED,
            Cm2Tile::SQUARE,
            Cm2Tile::SMALL,
        ] {
            let plain = t.batched_kernel_name(false).unwrap();
            let bt = t.batched_kernel_name(true).unwrap();
            assert_ne!(plain, bt);
            assert!(bt.ends_with("_bt"), "{bt}");
        }
        assert_eq!(
            Cm2Tile::WIDE_U4.batched_kernel_name(true),
            Some("matmul_f16_cm2_128x256x64_batched_bt_u4")
        );
        assert_eq!(Cm2Tile::WIDE_U4.batched_kernel_name(false), None);
        assert_eq!(Cm2Tile::SHALLOW.batched_kernel_name(true), None);
    }
}
