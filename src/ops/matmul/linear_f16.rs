//! A linear layer on f16 operands ([`linear_f16`]): `y = epilogue(x·Wᵀ)`
//! for x `[m, k]` and W `[n, k]` (nn.Linear's `[out, in]`) held as IEEE
//! binary16 bits, f32 accumulation and an f32 `y`, any m, with
//! [`ops::linear`](super::linear)'s epilogues.
//!
//! ```
//! # fn main() -> vkcompute::Result<()> {
//! use vkcompute::{ops, Device};
//! use vkcompute::ops::{Epilogue, F16};
//! let gpu = Device::new()?;
//! let bits = |v: &[f32]| v.iter().map(|&x| F16::from_f32(x).0).collect::<Vec<u16>>();
//! let x = gpu.upload(&bits(&[1.0, 2.0]))?;                      // 1×2
//! let w = gpu.upload(&bits(&[1.0, 0.0, 1.0, 1.0, 0.5, -1.0]))?; // 3×2, [n, k]
//! let y = gpu.upload(&[10.0f32, 20.0, 30.0])?;                  // 1×3
//! let mut batch = gpu.batch()?;
//! ops::linear_f16(&mut batch, &x, &w, &y, 1, 2, 3, Epilogue::Residual(&y))?;
//! batch.submit()?;
//! assert_eq!(y.download()?, [11.0, 23.0, 28.5]);
//! # Ok(())
//! # }
//! ```
//!
//! Where the adapter has `VK_NV_cooperative_matrix2`'s workgroup-scope
//! f16 shape, an epilogue is fused into the tensor-core product
//! (`shaders/matmul_cm2_decode.comp`'s f16 builds, `linear_cm2_h16_*`):
//! [`Epilogue::Residual`] starts the accumulator from the residual's tile,
//! [`Epilogue::SiluMul`] computes a tile of the gate product and the
//! matching tile of the up product in one workgroup and stores
//! silu(gate)·up, so the product's f32 output is never stored and read
//! back. Without an epilogue, and on other adapters, the layer is
//! [`matmul_f16_batched`](super::matmul_f16_batched) (its tensor-core
//! kernels or the portable one) followed, for an epilogue, by
//! [`ops::add`](crate::ops::add) or
//! [`nn::silu_mul_halves`](crate::ops::nn::silu_mul_halves) over a scratch
//! product allocated for the call.
//!
//! [`fused_tile`] is the decision, pure.

use super::{batched_tile, same, shape_error, BatchedShape, Cm2Tile, Epilogue, MatmulCaps};
use crate::{Batch, Buffer, Error, Result};

/// A tensor-core block of the fused kernels: `bm` rows of x by `bn`
/// outputs (with [`Epilogue::SiluMul`], `bn` gate and `bn` up rows of W),
/// its kernel and its launch order (`group` block rows, 0: the grid's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FusedTile {
    /// Rows of x per block.
    pub bm: u32,
    /// Outputs per block.
    pub bn: u32,
    /// Block rows per launch group (the kernels' `GROUP_M`).
    pub group: u32,
    /// The built-in kernel.
    pub kernel: &'static str,
}

/// Depth of the fused kernels' K slices.
const BK: u32 = 64;

const SILU: FusedTile = FusedTile {
    bm: 128,
    bn: 64,
    group: 0,
    kernel: "linear_cm2_h16_128x64x64_silu",
};
const SILU_SMALL: FusedTile = FusedTile {
    bm: 64,
    bn: 64,
    group: 0,
    kernel: "linear_cm2_h16_64x64x64_silu",
};

impl FusedTile {
    fn fits(&self, caps: &MatmulCaps) -> bool {
        let Some([gm, gn, gk]) = caps.coopmat2_granularity else {
            return false;
        };
        let divides = |g: u32, x: u32| g > 0 && x % g == 0;
        divides(gm, self.bm)
            && divides(gn, self.bn)
            && divides(gk, BK)
            && self.bm.max(self.bn).max(BK) <= caps.coopmat2_max_dimension
    }
}

/// The fused kernel's block for a layer of `m` rows and `n` rows of W
/// with `epilogue`, or `None` where the layer runs unfused (no epilogue,
/// or no workgroup-scope shape for the blocks). A residual takes the
/// batched product's tile ([`batched_tile`]: 128×128 in groups of 8 block
/// rows where its blocks fill the GPU, else 64×128); SiLU·mul 128×64
/// (past 64 rows) where its blocks over `n / 2` outputs reach nine tenths
/// of the compute units (of 64 when the adapter does not say), else
/// 64×64. Pure.
pub fn fused_tile(m: u32, k: u32, n: u32, silu: bool, caps: &MatmulCaps) -> Option<FusedTile> {
    if !silu {
        let shape = BatchedShape::packed(1, m, k, n).with_b_transposed();
        return match batched_tile(&shape, caps)? {
            t if t == Cm2Tile::SQUARE_GROUPED || t == Cm2Tile::SQUARE => Some(FusedTile {
                bm: 128,
                bn: 128,
                group: t.group,
                kernel: "linear_cm2_h16_128x128x64_res",
            }),
            t if t == Cm2Tile::SMALL => Some(FusedTile {
                bm: 64,
                bn: 128,
                group: 0,
                kernel: "linear_cm2_h16_64x128x64_res",
            }),
            _ => None,
        };
    }
    let outs = n / 2;
    let units = if caps.compute_units > 0 {
        u64::from(caps.compute_units)
    } else {
        64
    };
    let enough = (units * 9).div_ceil(10);
    let blocks = |t: &FusedTile| u64::from(m.div_ceil(t.bm)) * u64::from(outs.div_ceil(t.bn));
    let fitting: Vec<FusedTile> = [SILU, SILU_SMALL]
        .into_iter()
        .filter(|t| t.fits(caps) && (t.bm == 64 || m > 64))
        .collect();
    fitting
        .iter()
        .find(|t| blocks(t) >= enough)
        .or(fitting.last())
        .copied()
}

/// Records `y = epilogue(x·Wᵀ)` for f16 `x` `[m, k]` and f16 `w` `[n, k]`
/// (IEEE binary16 bits in `u16`), f32 accumulation and f32 `y`: `[m, n]`,
/// or `[m, n / 2]` with [`Epilogue::SiluMul`] (W a merged gate|up weight,
/// gate rows first). [`Epilogue::Residual`]'s `r` is `[m, n]` f32 and may
/// be `y` (added in place). Any m, k, n; see the module for the kernels.
///
/// Errors: [`Error::MatmulShape`] for a zero size, an odd `n` with
/// SiLU·mul, a buffer shorter than its shape, `y` being `x`'s or `w`'s
/// buffer, or a grid past the adapter's; [`Error::Unsupported`] without
/// `storageBuffer16BitAccess`.
#[allow(clippy::too_many_arguments)]
pub fn linear_f16(
    batch: &mut Batch,
    x: &Buffer<u16>,
    w: &Buffer<u16>,
    y: &Buffer<f32>,
    m: u32,
    k: u32,
    n: u32,
    epilogue: Epilogue<'_>,
) -> Result<()> {
    let err = |detail: String| shape_error(m, k, n, format!("linear_f16: {detail}"));
    if m == 0 || k == 0 || n == 0 {
        return Err(err("m, k and n must be at least 1".into()));
    }
    let silu = matches!(epilogue, Epilogue::SiluMul);
    if silu && n % 2 != 0 {
        return Err(err(format!(
            "SiLU·mul takes a merged gate|up weight of an even n, not {n}"
        )));
    }
    let outs = if silu { n / 2 } else { n };
    let (m64, k64) = (u64::from(m), u64::from(k));
    let need = [
        ("x", x.len() as u64, m64 * k64),
        ("w", w.len() as u64, u64::from(n) * k64),
        ("y", y.len() as u64, m64 * u64::from(outs)),
    ];
    let residual = match epilogue {
        Epilogue::Residual(r) => Some(("r", r.len() as u64, m64 * u64::from(n))),
        _ => None,
    };
    for (name, got, want) in need.into_iter().chain(residual) {
        if got < want {
            return Err(err(format!(
                "{name} holds {got} elements; the layer needs {want}"
            )));
        }
    }
    if same(x, y) || same(w, y) {
        return Err(err(
            "y is the same buffer as x or w; the kernels read them while they write y".into(),
        ));
    }
    let gpu = x.device();
    if !gpu.info().storage_buffer16 {
        return Err(Error::Unsupported {
            what: "f16 linear inputs (storageBuffer16BitAccess)",
            adapter: gpu.info().name.clone(),
        });
    }
    let shape = BatchedShape::packed(1, m, k, n).with_b_transposed();
    let caps = MatmulCaps::of(gpu.info());
    let fused = match epilogue {
        Epilogue::None => None,
        _ => fused_tile(m, k, n, silu, &caps),
    };
    if let Some(t) = fused {
        let grid = [outs.div_ceil(t.bn), m.div_ceil(t.bm), 1];
        super::check_grid(&gpu, m, k, n, grid)?;
        let kernel = crate::builtins::get(&gpu.inner, t.kernel, &[(0, t.group)])?;
        let push: [u8; 28] = bytemuck::cast([m, k, n, 0u32, 0, 0, 0]);
        return match epilogue {
            Epilogue::Residual(r) => batch
                .run_configured(&kernel, &[x, w, y, r], grid, Some(&push))
                .map(|_| ()),
            _ => batch
                .run_configured(&kernel, &[x, w, y], grid, Some(&push))
                .map(|_| ()),
        };
    }
    match epilogue {
        Epilogue::None => super::matmul_f16_batched(batch, x, w, y, shape),
        Epilogue::Residual(r) => {
            let c = gpu.alloc::<f32>(m as usize * n as usize)?;
            super::matmul_f16_batched(batch, x, w, &c, shape)?;
            crate::ops::add(batch, r, &c, y)
        }
        Epilogue::SiluMul => {
            let c = gpu.alloc::<f32>(m as usize * n as usize)?;
            super::matmul_f16_batched(batch, x, w, &c, shape)?;
            crate::ops::nn::silu_mul_halves(batch, &c, y, m, outs)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h200() -> MatmulCaps {
        MatmulCaps::new(32, 49152, 1024, 132).with_coopmat2(Some([16, 16, 16]), 256)
    }

    #[test]
    fn residual_tiles_follow_the_batched_product() {
        let c = h200();
        // Qwen3-4B's prefill of 512: o (2560 outputs from 4096) and down
        // (2560 from 9728): 80 square blocks, too few: 64×128.
        let o = fused_tile(512, 4096, 2560, false, &c).unwrap();
        assert_eq!(
            (o.bm, o.bn, o.kernel),
            (64, 128, "linear_cm2_h16_64x128x64_res")
        );
        // 4096 rows × 4096: enough square blocks, in groups of 8.
        let big = fused_tile(4096, 4096, 4096, false, &c).unwrap();
        assert_eq!((big.bm, big.bn, big.group), (128, 128, 8));
        // K not a multiple of 8: the small tile leads.
        let odd = fused_tile(4096, 4097, 4096, false, &c).unwrap();
        assert_eq!((odd.bm, odd.bn), (64, 128));
        // No workgroup-scope shape: unfused.
        assert_eq!(
            fused_tile(
                512,
                4096,
                2560,
                false,
                &MatmulCaps::new(32, 49152, 1024, 132)
            ),
            None
        );
    }

    #[test]
    fn silu_tiles_fill_the_gpu_or_are_the_smallest() {
        let c = h200();
        // gate|up at 512 rows: 4 × 152 blocks of 128×64.
        assert_eq!(fused_tile(512, 2560, 19456, true, &c), Some(SILU));
        // 64 rows: 128-row blocks would multiply zeros.
        assert_eq!(fused_tile(64, 2560, 19456, true, &c), Some(SILU_SMALL));
        // 200 rows × 512 outputs: 2 × 4 = 8 blocks of 128×64, 4 × 4 of
        // 64×64: neither fills the GPU, the smallest.
        assert_eq!(fused_tile(200, 64, 1024, true, &c), Some(SILU_SMALL));
        // A granularity of 128 columns divides neither SiLU block.
        let wide = c.with_coopmat2(Some([16, 128, 16]), 256);
        assert_eq!(fused_tile(512, 2560, 19456, true, &wide), None);
        // A flexible-dimension limit under 64.
        let narrow = c.with_coopmat2(Some([16, 16, 16]), 32);
        assert_eq!(fused_tile(512, 2560, 19456, true, &narrow), None);
    }
}
