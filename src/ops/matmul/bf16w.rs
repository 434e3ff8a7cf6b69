//! Products with bfloat16 B (weights as models ship them): C_i = A_i·B_i for
//! `count` products of one shape ([`BatchedShape`]), A f16 or f32, B
//! [`Bf16`] stored K×N or, as nn.Linear keeps its `[out, in]` weight, N×K,
//! C f32, f32 accumulation.
//!
//! ```
//! # fn main() -> vkcompute::Result<()> {
//! use vkcompute::{ops, Device};
//! use vkcompute::ops::{BatchedShape, Bf16};
//! let gpu = Device::new()?;
//! let a = gpu.upload(&[1.0f32, 2.0])?;                                 // 1×2
//! let w: Vec<Bf16> = [1.0f32, 0.0, 1.0, 1.0, 0.5, -1.0].map(Bf16::from_f32).to_vec();
//! let w = gpu.upload(&w)?;                                             // 3×2, [N, K]
//! let c = gpu.alloc::<f32>(3)?;                                        // 1×3
//! let mut batch = gpu.batch()?;
//! let shape = BatchedShape::packed(1, 1, 2, 3).with_b_transposed();
//! ops::matmul_bf16w(&mut batch, &a, &w, &c, shape)?;
//! batch.submit()?;
//! assert_eq!(c.download()?, [1.0, 3.0, -1.5]);
//! # Ok(())
//! # }
//! ```
//!
//! Where the adapter has `VK_NV_cooperative_matrix2`'s workgroup-scope f16
//! shape and `cooperativeMatrixBlockLoads` ([`MatmulCaps::coopmat2_decode`])
//! the tensor cores run it. Under [`BF16W_CONVERT_MIN_ROWS`] rows the
//! decode kernel (`shaders/matmul_cm2_decode.comp`) widens each bf16 of B,
//! and each f32 of A, to f16 in its tensor loads (decode functions), so
//! nothing is converted beforehand; from that many rows on, B (and an f32
//! A) are converted to f16 copies first ([`crate::ops::convert`], in the
//! same batch) and the f16 kernel runs, which is faster once the product
//! is large enough to repay the extra pass over B. f16 keeps
//! every value whose magnitude lies in its normal range (6.1e-5 to 65504)
//! to f16 precision (a bf16's 8 significant bits fit exactly); larger
//! magnitudes become ±inf, smaller ones lose bits as f16 subnormals and
//! those under about 6e-8 become zero. Model weights and activations lie
//! far inside that range. Elsewhere a portable 16×16-tile kernel
//! (`shaders/matmul_bf16w_batched.comp`) computes in f32 from the exact
//! widened values; it needs only `storageBuffer16BitAccess`.

use super::{check_grid, same, shape_error, BatchedShape, Cm2Tile, MatmulCaps};
use crate::ops::dtype::{Bf16, DType, F16};
use crate::{Batch, Buffer, Error, GpuBuf, Result};

/// The A operand of [`matmul_bf16w`]: f16 ([`F16`], or IEEE binary16 bits
/// in `u16` as [`super::matmul_f16`] takes them) or f32. Made from a
/// buffer reference with `.into()`, or implicitly by [`matmul_bf16w`].
#[derive(Debug, Clone, Copy)]
pub enum MatmulInput<'a> {
    /// f16 elements.
    F16(&'a Buffer<F16>),
    /// f16 elements as IEEE binary16 bits.
    F16Bits(&'a Buffer<u16>),
    /// f32 elements (the tensor-core kernel rounds them to f16).
    F32(&'a Buffer<f32>),
}

impl<'a> From<&'a Buffer<F16>> for MatmulInput<'a> {
    fn from(b: &'a Buffer<F16>) -> Self {
        MatmulInput::F16(b)
    }
}

impl<'a> From<&'a Buffer<u16>> for MatmulInput<'a> {
    fn from(b: &'a Buffer<u16>) -> Self {
        MatmulInput::F16Bits(b)
    }
}

impl<'a> From<&'a Buffer<f32>> for MatmulInput<'a> {
    fn from(b: &'a Buffer<f32>) -> Self {
        MatmulInput::F32(b)
    }
}

impl MatmulInput<'_> {
    /// The stored element type.
    pub fn dtype(&self) -> DType {
        match self {
            MatmulInput::F16(_) | MatmulInput::F16Bits(_) => DType::F16,
            MatmulInput::F32(_) => DType::F32,
        }
    }

    /// Elements held.
    pub fn len(&self) -> usize {
        match self {
            MatmulInput::F16(b) => b.len(),
            MatmulInput::F16Bits(b) => b.len(),
            MatmulInput::F32(b) => b.len(),
        }
    }

    /// Whether no element is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn aliases(&self, c: &Buffer<f32>) -> bool {
        match self {
            MatmulInput::F16(b) => same(*b, c),
            MatmulInput::F16Bits(b) => same(*b, c),
            MatmulInput::F32(b) => same(*b, c),
        }
    }

    fn bind(&self) -> &dyn GpuBuf {
        match self {
            MatmulInput::F16(b) => *b,
            MatmulInput::F16Bits(b) => *b,
            MatmulInput::F32(b) => *b,
        }
    }
}

/// The tensor-core kernel of [`matmul_bf16w`] for this tile, A's type
/// (`a_f32`: f32, else f16) and B's layout (`b_nk`: stored N×K), or `None`
/// where none is compiled: [`Cm2Tile::SQUARE`], [`Cm2Tile::SMALL`] and
/// [`Cm2Tile::WIDE`] in any launch order (`matmul_bf16w_cm2_*`). Pure.
pub fn bf16w_kernel_name(tile: &Cm2Tile, a_f32: bool, b_nk: bool) -> Option<&'static str> {
    if tile.unroll != 2 {
        return None;
    }
    let names: [&'static str; 4] = match (tile.bm, tile.bn, tile.bk) {
        (128, 256, 64) => [
            "matmul_bf16w_cm2_a16_128x256x64",
            "matmul_bf16w_cm2_a16_128x256x64_bt",
            "matmul_bf16w_cm2_a32_128x256x64",
            "matmul_bf16w_cm2_a32_128x256x64_bt",
        ],
        (128, 128, 64) => [
            "matmul_bf16w_cm2_a16_128x128x64",
            "matmul_bf16w_cm2_a16_128x128x64_bt",
            "matmul_bf16w_cm2_a32_128x128x64",
            "matmul_bf16w_cm2_a32_128x128x64_bt",
        ],
        (64, 128, 64) => [
            "matmul_bf16w_cm2_a16_64x128x64",
            "matmul_bf16w_cm2_a16_64x128x64_bt",
            "matmul_bf16w_cm2_a32_64x128x64",
            "matmul_bf16w_cm2_a32_64x128x64_bt",
        ],
        _ => return None,
    };
    Some(names[usize::from(a_f32) * 2 + usize::from(b_nk)])
}

/// The tensor-core tile for a bf16-weight product, or `None` for the
/// portable kernel: [`super::batched_tile`]'s rule where the adapter has
/// the decoding loads ([`MatmulCaps::coopmat2_decode`]), else `None`. Pure.
pub fn bf16w_tile(shape: &BatchedShape, caps: &MatmulCaps) -> Option<Cm2Tile> {
    if !caps.coopmat2_decode {
        return None;
    }
    super::batched_tile(shape, caps)
}

/// Records `shape.count` products C_i = A_i·B_i with [`Bf16`] B (K×N, or
/// N×K with [`BatchedShape::b_transposed`]), f16 or f32 A
/// ([`MatmulInput`]), f32 C and f32 accumulation, in one launch, with
/// [`bf16w_tile`]'s kernel. Any M, K, N and strides.
///
/// On the tensor-core kernel A and B are rounded to f16 first (see the
/// module documentation for the range this keeps); the portable kernel
/// computes with their exact values.
///
/// Errors ([`Error::MatmulShape`]): a zero size, C's stride overlapping its
/// outputs, a buffer shorter than [`BatchedShape::lens`], indices past 32
/// bits, C being A's or B's buffer, a count over the adapter's grid depth.
/// [`Error::Unsupported`] without `storageBuffer16BitAccess`.
pub fn matmul_bf16w<'a>(
    batch: &mut Batch,
    a: impl Into<MatmulInput<'a>>,
    b: &Buffer<Bf16>,
    c: &Buffer<f32>,
    shape: BatchedShape,
) -> Result<()> {
    let a = a.into();
    let caps = MatmulCaps::of(b.device().info());
    let tile = bf16w_tile(&shape, &caps);
    if let (Some(_), Some(f16_tile)) = (tile, super::batched_tile(&shape, &caps)) {
        if converts_first(&shape) {
            return converted(batch, a, b, c, shape, f16_tile);
        }
    }
    matmul_bf16w_with_tile(batch, a, b, c, shape, tile)
}

/// Rows of A from which [`matmul_bf16w`], on the tensor-core path,
/// converts B (and an f32 A) to f16 first and runs the f16 kernel
/// ([`super::matmul_f16_batched`]) instead of widening in the tensor loads.
/// Widening in the loads costs the decode path most of its speed (H200,
/// 8192³ with f32 A: 121 TFLOP/s against 306 for the f16 kernel; call c6
/// of the second 2026-11-26 series); the conversion reads and writes B
/// once more, which a product of this many rows repays many times over.
pub const BF16W_CONVERT_MIN_ROWS: u32 = 256;

/// Whether [`matmul_bf16w`] converts first for this shape. Pure.
pub fn converts_first(shape: &BatchedShape) -> bool {
    shape.m >= BF16W_CONVERT_MIN_ROWS
}

/// The converted path of [`matmul_bf16w`]: f16 copies of the parts of B
/// (and of an f32 A) the products read, made by [`crate::ops::convert`] in
/// `batch` (the batch keeps them until its work completes), a barrier,
/// then the f16 kernel with `tile`.
fn converted(
    batch: &mut Batch,
    a: MatmulInput<'_>,
    b: &Buffer<Bf16>,
    c: &Buffer<f32>,
    shape: BatchedShape,
    tile: Cm2Tile,
) -> Result<()> {
    check_args(&a, b, c, &shape)?;
    let gpu = b.device();
    let [a_len, b_len, _] = shape.lens();
    let b16 = gpu.alloc::<F16>(b_len as usize)?;
    crate::ops::convert(batch, &b.slice(0..b_len as usize)?, &b16)?;
    let a16: Buffer<u16> = match a {
        MatmulInput::F16(x) => reinterpret_bits(x)?,
        MatmulInput::F16Bits(x) => x.clone(),
        MatmulInput::F32(x) => {
            let a16 = gpu.alloc::<F16>(a_len as usize)?;
            crate::ops::convert(batch, &x.slice(0..a_len as usize)?, &a16)?;
            reinterpret_bits(&a16)?
        }
    };
    batch.barrier();
    super::matmul_f16_batched_with_tile(batch, &a16, &reinterpret_bits(&b16)?, c, shape, Some(tile))
}

/// The argument checks both paths of [`matmul_bf16w`] share (shape,
/// lengths, aliasing).
fn check_args(
    a: &MatmulInput<'_>,
    b: &Buffer<Bf16>,
    c: &Buffer<f32>,
    shape: &BatchedShape,
) -> Result<()> {
    let BatchedShape { m, k, n, .. } = *shape;
    if let Some(p) = shape.problem() {
        return Err(shape_error(m, k, n, format!("bf16 weights: {p}")));
    }
    let have = [a.len() as u64, b.len() as u64, c.len() as u64];
    for ((name, need), got) in ["A", "B", "C"].into_iter().zip(shape.lens()).zip(have) {
        if got < need {
            return Err(shape_error(
                m,
                k,
                n,
                format!(
                    "bf16 weights: {name} holds {got} elements; {} products at its stride \
                     need {need}",
                    shape.count
                ),
            ));
        }
    }
    if a.aliases(c) || same(b, c) {
        return Err(shape_error(
            m,
            k,
            n,
            "bf16 weights: C is the same buffer as A or B; the kernels read A and B while they \
             write C"
                .into(),
        ));
    }
    Ok(())
}

/// `x`'s f16 elements as the IEEE bits the f16 kernels bind.
fn reinterpret_bits(x: &Buffer<F16>) -> Result<Buffer<u16>> {
    x.reinterpret::<u16>().ok_or_else(|| Error::OpShape {
        op: "ops::matmul_bf16w",
        detail: "an f16 buffer does not reinterpret as u16 words".into(),
    })
}

/// [`matmul_bf16w`] with an explicit tensor-core tile (for tuning and
/// tests), or `None` for the portable kernel. The tile needs a kernel
/// ([`bf16w_kernel_name`]), must fit the adapter ([`Cm2Tile::fits`]) and
/// needs [`MatmulCaps::coopmat2_decode`], else [`Error::Unsupported`]
/// naming what is missing; its launch order (`group`) is passed to the
/// kernel. Otherwise the errors of [`matmul_bf16w`].
pub fn matmul_bf16w_with_tile<'a>(
    batch: &mut Batch,
    a: impl Into<MatmulInput<'a>>,
    b: &Buffer<Bf16>,
    c: &Buffer<f32>,
    shape: BatchedShape,
    tile: Option<Cm2Tile>,
) -> Result<()> {
    let a = a.into();
    let BatchedShape { m, k, n, .. } = shape;
    check_args(&a, b, c, &shape)?;
    let gpu = b.device();
    let info = gpu.info();
    if !info.storage_buffer16 {
        return Err(Error::Unsupported {
            what: "bf16 matmul weights (storageBuffer16BitAccess)",
            adapter: info.name.clone(),
        });
    }
    let a_f32 = a.dtype() == DType::F32;
    let bt = shape.b_transposed;
    let strides = [shape.stride_a, shape.stride_b, shape.stride_c];
    let Some(t) = tile else {
        let name = match (a_f32, bt) {
            (false, false) => "matmul_bf16w_batched",
            (false, true) => "matmul_bf16w_batched_bt",
            (true, false) => "matmul_bf16w_batched_a32",
            (true, true) => "matmul_bf16w_batched_a32_bt",
        };
        let grid = [n.div_ceil(16), m.div_ceil(16), shape.count];
        check_grid(&gpu, m, k, n, grid)?;
        let kernel = crate::builtins::get(&gpu.inner, name, &[])?;
        let push: [u8; 24] = bytemuck::cast([m, k, n, strides[0], strides[1], strides[2]]);
        batch.run_configured(&kernel, &[a.bind(), b, c], grid, Some(&push))?;
        return Ok(());
    };
    let caps = MatmulCaps::of(info);
    let Some(name) = bf16w_kernel_name(&t, a_f32, bt) else {
        return Err(shape_error(
            m,
            k,
            n,
            format!(
                "bf16 weights: no tensor-core kernel for tile {t:?} (128×256, 128×128 or 64×128 \
                 blocks, 64-deep slices, two per step)"
            ),
        ));
    };
    if !(t.fits(&caps) && caps.coopmat2_decode) {
        return Err(Error::Unsupported {
            what: "the tensor-core bf16-weight matmul (VK_NV_cooperative_matrix2 with a \
                   workgroup-scope f16 shape dividing the tile, and cooperativeMatrixBlockLoads)",
            adapter: info.name.clone(),
        });
    }
    let grid = [n.div_ceil(t.bn), m.div_ceil(t.bm), shape.count];
    check_grid(&gpu, m, k, n, grid)?;
    let kernel = crate::builtins::get(&gpu.inner, name, &[(0, t.group)])?;
    let push: [u8; 28] = bytemuck::cast([m, k, n, strides[0], strides[1], strides[2], 0u32]);
    batch.run_configured(&kernel, &[a.bind(), b, c], grid, Some(&push))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_chosen_tile_has_a_kernel_for_each_operand_kind() {
        for t in [
            Cm2Tile::WIDE_GROUPED,
            Cm2Tile::WIDE,
            Cm2Tile::SQUARE,
            Cm2Tile::SMALL,
        ] {
            let mut names = std::collections::HashSet::new();
            for (a32, bt) in [(false, false), (false, true), (true, false), (true, true)] {
                let name = bf16w_kernel_name(&t, a32, bt).unwrap();
                assert_eq!(name.ends_with("_bt"), bt, "{name}");
                assert_eq!(name.contains("_a32_"), a32, "{name}");
                assert!(crate::builtins::spirv(name).is_some(), "{name} embedded");
                names.insert(name);
            }
            assert_eq!(names.len(), 4);
        }
        assert_eq!(bf16w_kernel_name(&Cm2Tile::WIDE_U4, false, true), None);
        assert_eq!(bf16w_kernel_name(&Cm2Tile::SHALLOW, true, true), None);
        assert_eq!(bf16w_kernel_name(&Cm2Tile::TALL_GROUPED, true, true), None);
    }

    #[test]
    fn decoding_kernels_reflect_their_bindings_and_push_constants() {
        let names = [
            "matmul_bf16w_cm2_a32_64x128x64_bt",
            "matmul_bf16w_cm2_a16_128x256x64",
        ];
        for name in names {
            let words = crate::builtins::spirv(name).unwrap();
            let r = crate::reflect::reflect(words, None).expect("reflects");
            assert_eq!(r.bindings.len(), 3, "{name}");
            assert_eq!(r.push_constant_size, 28, "{name}");
            assert_eq!(r.workgroup_size, [256, 1, 1], "{name}");
        }
    }

    #[test]
    fn large_products_convert_first() {
        let at = |m| converts_first(&BatchedShape::packed(1, m, 4096, 4096));
        assert!(!at(1) && !at(64) && !at(BF16W_CONVERT_MIN_ROWS - 1));
        assert!(at(BF16W_CONVERT_MIN_ROWS) && at(8192));
    }

    #[test]
    fn tile_needs_the_decoding_loads() {
        let plain = MatmulCaps::new(32, 49152, 1024, 132);
        let cm2 = plain.with_coopmat2(Some([16, 16, 16]), 256);
        let big = BatchedShape::packed(1, 8192, 8192, 8192).with_b_transposed();
        // coopmat2 without block loads: the portable kernel.
        assert_eq!(bf16w_tile(&big, &cm2), None);
        assert_eq!(bf16w_tile(&big, &plain.with_coopmat2_decode(true)), None);
        let dec = cm2.with_coopmat2_decode(true);
        assert_eq!(bf16w_tile(&big, &dec), Some(Cm2Tile::SQUARE_GROUPED));
        assert_eq!(
            bf16w_tile(&BatchedShape::packed(1, 4096, 4096, 4096), &dec),
            Some(Cm2Tile::SQUARE_GROUPED)
        );
        // The batched rule otherwise: few blocks, the smallest tile.
        let few = BatchedShape::packed(4, 256, 64, 256);
        assert_eq!(bf16w_tile(&few, &dec), Some(Cm2Tile::SMALL));
    }
}
