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
//! The layer is [`matmul_f16_batched`](super::matmul_f16_batched)'s
//! product (its tensor-core kernels where the adapter has
//! `VK_NV_cooperative_matrix2`'s workgroup-scope f16 shape, else the
//! portable one). [`Epilogue::Residual`] is fused into the tensor-core
//! product ([`residual_kernel`]: the residual's tile is added to the
//! accumulator before the store), so no f32 product is stored and read
//! back; elsewhere, and for [`Epilogue::SiluMul`], the product goes to a
//! scratch buffer allocated for the call and [`ops::add`](crate::ops::add)
//! or [`nn::silu_mul_halves`](crate::ops::nn::silu_mul_halves) follows. (A
//! SiLU·mul fused into the tensor-core kernel, `matmul_cm2_decode.comp`'s
//! structure with f16 operands, ran ten times slower than the product and
//! the separate pass on an H200: docs/runs/2026-11-27r-h200-r3.)

use super::{batched_tile, same, shape_error, BatchedShape, Cm2Tile, Epilogue, MatmulCaps};
use crate::{Batch, Buffer, Error, Result};

/// The tensor-core kernel that adds a residual for the batched product's
/// tile `t` (B stored N×K), or `None` where none is built. Pure.
pub fn residual_kernel(t: &Cm2Tile) -> Option<&'static str> {
    match t.batched_kernel_name(true)? {
        "matmul_f16_cm2_batched_bt" => Some("matmul_f16_cm2_batched_bt_res"),
        "matmul_f16_cm2_64x128x64_batched_bt" => Some("matmul_f16_cm2_64x128x64_batched_bt_res"),
        "matmul_f16_cm2_64x64x64_batched_bt" => Some("matmul_f16_cm2_64x64x64_batched_bt_res"),
        _ => None,
    }
}

/// Records `y = epilogue(x·Wᵀ)` for f16 `x` `[m, k]` and f16 `w` `[n, k]`
/// (IEEE binary16 bits in `u16`), f32 accumulation and f32 `y`: `[m, n]`,
/// or `[m, n / 2]` with [`Epilogue::SiluMul`] (W a merged gate|up weight,
/// gate rows first). [`Epilogue::Residual`]'s `r` is `[m, n]` f32 and may
/// be `y` (added in place). Any m, k, n; see the module for the kernels.
///
/// Errors: [`Error::MatmulShape`] for a zero size, an odd `n` with
/// SiLU·mul, a buffer shorter than its shape, indices past 32 bits, `y`
/// being `x`'s or `w`'s buffer, or a grid past the adapter's;
/// [`Error::Unsupported`] without `storageBuffer16BitAccess`.
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
    let shape = BatchedShape::packed(1, m, k, n).with_b_transposed();
    if let Some(p) = shape.problem() {
        return Err(err(p));
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
    if let Epilogue::Residual(r) = epilogue {
        let caps = MatmulCaps::of(gpu.info());
        let fused = batched_tile(&shape, &caps).and_then(|t| Some((t, residual_kernel(&t)?)));
        if let Some((t, name)) = fused {
            let grid = [n.div_ceil(t.bn), m.div_ceil(t.bm), 1];
            super::check_grid(&gpu, m, k, n, grid)?;
            let kernel = crate::builtins::get(&gpu.inner, name, &[(0, t.group)])?;
            let push: [u8; 24] = bytemuck::cast([m, k, n, 0u32, 0, 0]);
            batch.run_configured(&kernel, &[x, w, y, r], grid, Some(&push))?;
            return Ok(());
        }
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

    #[test]
    fn every_batched_tile_of_b_stored_n_by_k_has_its_residual_kernel() {
        let c = MatmulCaps::new(32, 49152, 1024, 132).with_coopmat2(Some([16, 16, 16]), 256);
        // The tiles the batched rule picks for B stored N×K, aligned or not.
        for (m, k, n) in [
            (512, 4096, 2560),
            (4096, 4096, 4096),
            (4096, 4097, 4096),
            (256, 4097, 256),
        ] {
            let shape = BatchedShape::packed(1, m, k, n).with_b_transposed();
            let t = batched_tile(&shape, &c).unwrap();
            assert!(residual_kernel(&t).is_some(), "{m}x{k}x{n}: {t:?}");
        }
        assert_eq!(
            residual_kernel(&Cm2Tile::SMALL),
            Some("matmul_f16_cm2_64x128x64_batched_bt_res")
        );
        assert_eq!(
            residual_kernel(&Cm2Tile::SQUARE_GROUPED),
            Some("matmul_f16_cm2_batched_bt_res")
        );
        assert_eq!(
            residual_kernel(&Cm2Tile::QUARTER),
            Some("matmul_f16_cm2_64x64x64_batched_bt_res")
        );
        assert_eq!(residual_kernel(&Cm2Tile::WIDE_U4), None);
    }
}
