//! Batched f16 products: `count` independent C_i = A_i·B_i of one shape in
//! one launch (what `torch.bmm` computes), the matrices at fixed element
//! strides in three buffers.

use super::{check_grid, same, shape_error, Cm2Tile, MatmulCaps};
use crate::{Batch, Buffer, Error, Result};

/// The shape of a batched product ([`matmul_f16_batched`]): `count`
/// products of `m`×`k` by `k`×`n`, row-major, matrix `i` of A starting at
/// element `i * stride_a` of its buffer (likewise B and C).
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
/// f16 shape — 128×128 blocks, or 64×128 when those give fewer blocks than
/// the compute units — and otherwise a 16×16-tile kernel that needs only
/// `storageBuffer16BitAccess` (else [`Error::Unsupported`]). Any M, K, N
/// and strides.
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
    let caps = MatmulCaps::of(gpu.info());
    let (name, bm, bn) = match batched_tile(&shape, &caps) {
        Some(t) if t == Cm2Tile::SMALL => ("matmul_f16_cm2_64x128x64_batched", t.bm, t.bn),
        Some(t) => ("matmul_f16_cm2_batched", t.bm, t.bn),
        None => ("matmul_f16_batched", 16, 16),
    };
    let grid = [n.div_ceil(bn), m.div_ceil(bm), shape.count];
    check_grid(&gpu, m, k, n, grid)?;
    let kernel = crate::builtins::get(&gpu.inner, name, &[])?;
    let push: [u8; 24] = bytemuck::cast([m, k, n, shape.stride_a, shape.stride_b, shape.stride_c]);
    batch.run_configured(&kernel, &[a, b, c], grid, Some(&push))?;
    Ok(())
}

/// The cooperative-matrix tile for a batched product, or `None` where the
/// adapter has no workgroup-scope f16 shape for it: [`Cm2Tile::SQUARE`],
/// or [`Cm2Tile::SMALL`] when the square blocks of all products number
/// fewer than the compute units (64 when unknown). Pure.
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
    let square = Cm2Tile::SQUARE.fits(caps).then_some(Cm2Tile::SQUARE);
    let small = Cm2Tile::SMALL.fits(caps).then_some(Cm2Tile::SMALL);
    match (square, small) {
        (Some(s), Some(t)) if blocks(&s) < want => Some(t),
        (Some(s), _) => Some(s),
        (None, t) => t,
    }
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
    fn tile_follows_the_compute_units() {
        let plain = MatmulCaps::new(32, 49152, 1024, 132);
        let caps = plain.with_coopmat2(Some([16, 16, 16]), 256);
        // 32 × (512×512): 512 square blocks, enough.
        let bmm = BatchedShape::packed(32, 512, 128, 512);
        assert_eq!(batched_tile(&bmm, &caps), Some(Cm2Tile::SQUARE));
        // 4 × (256×256): 16 square blocks, too few: the small tile.
        let few = BatchedShape::packed(4, 256, 64, 256);
        assert_eq!(batched_tile(&few, &caps), Some(Cm2Tile::SMALL));
        // No coopmat2: the portable kernel.
        assert_eq!(batched_tile(&bmm, &plain), None);
    }
}
