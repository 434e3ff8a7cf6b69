//! [`super::linear`] on the tensor cores: past 16 rows of x, with [`F16`]
//! or [`Bf16`] weights, on an adapter with `VK_NV_cooperative_matrix2`'s
//! workgroup-scope f16 shape and block loads
//! ([`MatmulCaps::coopmat2_decode`]), the layer runs the workgroup-scope
//! kernel of `shaders/matmul_cm2_decode.comp` with B = W as stored
//! (`[n, k]`, read through a transposed view) and A = x: its tensor loads
//! round each f32 of x, and widen each bf16 of W, to f16 (magnitudes past
//! 65504 become ±inf; see [`super::super::matmul_bf16w`]). The epilogue is
//! fused: [`Epilogue::Residual`] starts the accumulator from the residual's
//! tile, [`Epilogue::SiluMul`] computes a tile of the gate product and the
//! matching tile of the up product in one workgroup and stores
//! silu(gate)·up. Where the tiles are too few to fill the GPU, K is split
//! over workgroup layers instead: each layer writes its partial product
//! (the plain kernel) and the split-K reduction pass of the other kernels
//! adds them in layer order and applies the epilogue.
//!
//! [`tensor_tile`] and [`tensor_splits`] are the decisions, pure.
//!
//! [`F16`]: crate::ops::F16
//! [`Bf16`]: crate::ops::Bf16

use crate::batch::Batch;
use crate::buffer::Buffer;
use crate::error::{Error, Result};

use super::super::super::dtype::DType;
use super::super::MatmulCaps;
use super::{layers, run_layers, shape, Epilogue, Layer, LinearPlan, Weights, LINEAR_MAX_SPLITS};

/// [`LinearPlan::rows_per_pass`] of the tensor-core kernel: every row of x
/// (any m) in blocks of 64 or 128 rows. [`choose_linear`](super::choose_linear)
/// picks it past 16 rows with 16-bit weights where the adapter has the
/// kernel ([`tensor_applies`]).
pub const LINEAR_TENSOR_TILES: u32 = u32::MAX;

/// Depth of the kernel's K slices; split-K layers are multiples of it.
const BK: u32 = 64;
/// Split-K layers are at least this deep.
const MIN_SLICE: u32 = 256;

/// A tensor-core block of the linear kernel: `bm` rows of x by `bn`
/// outputs (with [`Epilogue::SiluMul`], `bn` gate and `bn` up rows of W).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TensorTile {
    /// Rows of x per block.
    pub bm: u32,
    /// Outputs per block.
    pub bn: u32,
}

impl TensorTile {
    const WIDE: TensorTile = TensorTile { bm: 128, bn: 256 };
    const SQUARE: TensorTile = TensorTile { bm: 128, bn: 128 };
    const SMALL: TensorTile = TensorTile { bm: 64, bn: 128 };
    const SILU: TensorTile = TensorTile { bm: 128, bn: 64 };
    const SILU_SMALL: TensorTile = TensorTile { bm: 64, bn: 64 };

    /// Whether the adapter's workgroup-scope shape divides this block and
    /// its 64-deep slices, sides within the flexible-dimension limit.
    fn fits(&self, caps: &MatmulCaps) -> bool {
        let Some([gm, gn, gk]) = caps.coopmat2_granularity else {
            return false;
        };
        let divides = |g: u32, x: u32| g > 0 && x % g == 0;
        caps.coopmat2_decode
            && divides(gm, self.bm)
            && divides(gn, self.bn)
            && divides(gk, BK)
            && self.bm.max(self.bn).max(BK) <= caps.coopmat2_max_dimension
    }

    /// Blocks covering `m` rows and `outs` outputs.
    fn blocks(&self, m: u32, outs: u32) -> u64 {
        u64::from(m.div_ceil(self.bm)) * u64::from(outs.div_ceil(self.bn))
    }
}

/// Whether the tensor-core kernel takes a layer of `m` rows with `dtype`
/// weights on `caps`: more than 16 rows (below, the skinny kernels read W
/// once at memory bandwidth), [`DType::F16`] or [`DType::Bf16`] weights,
/// and the adapter's decoding loads with a shape dividing the 64-row
/// blocks. Pure.
pub fn tensor_applies(m: u32, dtype: DType, caps: &MatmulCaps) -> bool {
    m > 16
        && matches!(dtype, DType::F16 | DType::Bf16)
        && TensorTile::SMALL.fits(caps)
        && TensorTile::SILU_SMALL.fits(caps)
}

/// Workgroups that fill the GPU: nine tenths of the compute units (of 64
/// when the adapter does not say).
fn enough(caps: &MatmulCaps) -> u64 {
    let units = if caps.compute_units > 0 {
        u64::from(caps.compute_units)
    } else {
        64
    };
    (units * 9).div_ceil(10)
}

/// The block of a layer of `m` rows and `n` rows of W (`silu`: a merged
/// gate|up weight, `n / 2` outputs) run in one K pass: the largest whose
/// blocks fill the GPU (nine tenths of the compute units, of 64 when the
/// adapter does not say), else the smallest; 128-row blocks only past 64
/// rows (below they would multiply zeros). The 128×128 block (128
/// invocations, launched in groups of 8 block rows) before the 64×128 one,
/// as the f16 matmul chooses: on an H200 its f16 kernel ran 287 / 310
/// TFLOP/s at 4096³ / 8192³ against 226 / 240 for 128×256 blocks. Pure.
pub fn tensor_tile(m: u32, n: u32, silu: bool, caps: &MatmulCaps) -> TensorTile {
    let (outs, order): (u32, &[TensorTile]) = if silu {
        (n / 2, &[TensorTile::SILU, TensorTile::SILU_SMALL])
    } else {
        (n, &[TensorTile::SQUARE, TensorTile::SMALL])
    };
    let fitting: Vec<TensorTile> = order
        .iter()
        .copied()
        .filter(|t| t.fits(caps) && (t.bm == 64 || m > 64))
        .collect();
    let smallest = if silu {
        TensorTile::SILU_SMALL
    } else {
        TensorTile::SMALL
    };
    fitting
        .iter()
        .copied()
        .find(|t| t.blocks(m, outs) >= enough(caps))
        .or(fitting.last().copied())
        .unwrap_or(smallest)
}

/// The block of a split-K layer (the plain kernel over all `n` rows of W):
/// the smallest, for the most blocks per layer.
const SPLIT_TILE: TensorTile = TensorTile::SMALL;

/// K layers for a layer whose one-pass blocks ([`tensor_tile`]) do not
/// fill the GPU: enough layers of 64×128 blocks to reach nine tenths of
/// the compute units in workgroups, each at least 256 deep, at most [`LINEAR_MAX_SPLITS`]; 1
/// where the one-pass blocks fill it. Pure.
pub fn tensor_splits(m: u32, k: u32, n: u32, silu: bool, caps: &MatmulCaps) -> u32 {
    let t = tensor_tile(m, n, silu, caps);
    let outs = if silu { n / 2 } else { n };
    let want = enough(caps);
    if t.blocks(m, outs) >= want {
        return 1;
    }
    let blocks = SPLIT_TILE.blocks(m, n).max(1);
    let most = (k / MIN_SLICE).clamp(1, LINEAR_MAX_SPLITS);
    (want.div_ceil(blocks) as u32).clamp(1, most)
}

/// The plan [`super::choose_linear`] takes when [`tensor_applies`]. Pure.
pub(super) fn plan(m: u32, k: u32, n: u32, silu: bool, caps: &MatmulCaps) -> LinearPlan {
    LinearPlan {
        rows_per_pass: LINEAR_TENSOR_TILES,
        splits: tensor_splits(m, k, n, silu, caps),
    }
}

/// The built-in for `dtype` weights, block `t` and the epilogue (`mode`:
/// 0 none, 1 residual, 2 SiLU·mul), or `None` where none is compiled.
fn kernel_name(dtype: DType, t: TensorTile, mode: u32) -> Option<&'static str> {
    let bf16 = match dtype {
        DType::Bf16 => true,
        DType::F16 => false,
        _ => return None,
    };
    let name = match ((t.bm, t.bn), mode, bf16) {
        ((128, 256), 0, true) => "matmul_bf16w_cm2_a32_128x256x64_bt",
        ((128, 128), 0, true) => "matmul_bf16w_cm2_a32_128x128x64_bt",
        ((64, 128), 0, true) => "matmul_bf16w_cm2_a32_64x128x64_bt",
        ((128, 256), 0, false) => "linear_cm2_f16_128x256x64",
        ((128, 128), 0, false) => "linear_cm2_f16_128x128x64",
        ((64, 128), 0, false) => "linear_cm2_f16_64x128x64",
        ((128, 256), 1, true) => "linear_cm2_bf16_128x256x64_res",
        ((128, 128), 1, true) => "linear_cm2_bf16_128x128x64_res",
        ((64, 128), 1, true) => "linear_cm2_bf16_64x128x64_res",
        ((128, 256), 1, false) => "linear_cm2_f16_128x256x64_res",
        ((128, 128), 1, false) => "linear_cm2_f16_128x128x64_res",
        ((64, 128), 1, false) => "linear_cm2_f16_64x128x64_res",
        ((128, 64), 2, true) => "linear_cm2_bf16_128x64x64_silu",
        ((64, 64), 2, true) => "linear_cm2_bf16_64x64x64_silu",
        ((128, 64), 2, false) => "linear_cm2_f16_128x64x64_silu",
        ((64, 64), 2, false) => "linear_cm2_f16_64x64x64_silu",
        _ => return None,
    };
    Some(name)
}

/// [`Error::Unsupported`] unless the adapter has the kernel for `dtype`
/// weights.
pub(super) fn check_adapter(caps: &MatmulCaps, dtype: DType, adapter: &str) -> Result<()> {
    if !matches!(dtype, DType::F16 | DType::Bf16) {
        return Err(shape(format!(
            "rows per pass LINEAR_TENSOR_TILES (tensor-core tiles) takes f16 or bf16 \
             weights, not {dtype:?}"
        )));
    }
    if !(TensorTile::SMALL.fits(caps) && TensorTile::SILU_SMALL.fits(caps)) {
        return Err(Error::Unsupported {
            what: "ops::linear on tensor-core tiles (VK_NV_cooperative_matrix2 with a \
                   256-invocation f16 shape dividing 64×64×64 and cooperativeMatrixBlockLoads)",
            adapter: adapter.to_string(),
        });
    }
    Ok(())
}

/// Records a checked layer on the tensor-core kernel with `splits` K
/// layers (1: one pass with the epilogue fused).
pub(super) fn record(
    batch: &mut Batch,
    x: &Buffer<f32>,
    w: Weights<'_>,
    y: &Buffer<f32>,
    (m, k, n): (u32, u32, u32),
    epilogue: Epilogue<'_>,
    splits: u32,
) -> Result<()> {
    let gpu = x.device();
    let info = gpu.info();
    let caps = MatmulCaps::of(info);
    let silu = matches!(epilogue, Epilogue::SiluMul);
    let (kslice, depth) = layers(k, splits, BK);
    let (t, mode, outs, z) = if depth > 1 {
        (SPLIT_TILE, 0, n, depth)
    } else {
        let outs = if silu { n / 2 } else { n };
        (tensor_tile(m, n, silu, &caps), epilogue.mode(), outs, 1)
    };
    let grid = [outs.div_ceil(t.bn), m.div_ceil(t.bm), z];
    let name = kernel_name(w.dtype(), t, mode).ok_or_else(|| {
        shape(format!(
            "no tensor-core kernel for {:?} weights with block {t:?}",
            w.dtype()
        ))
    })?;
    let group = if t == TensorTile::WIDE || t == TensorTile::SQUARE {
        8
    } else {
        0
    };
    let kernel = crate::builtins::get(&gpu.inner, name, &[(0, group)])?;
    let layer = Layer {
        x,
        w: w.bind(),
        y,
        shape: (m, k, n),
        epilogue,
    };
    run_layers(batch, &kernel, layer, grid, kslice, depth)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h200() -> MatmulCaps {
        MatmulCaps::new(32, 49152, 1024, 132)
            .with_coopmat2(Some([16, 16, 16]), 256)
            .with_coopmat2_decode(true)
    }

    #[test]
    fn applies_past_16_rows_with_16_bit_weights_and_the_decoding_loads() {
        let c = h200();
        for d in [DType::F16, DType::Bf16] {
            assert!(!tensor_applies(16, d, &c));
            assert!(tensor_applies(17, d, &c));
            assert!(tensor_applies(4096, d, &c));
        }
        assert!(!tensor_applies(64, DType::F32, &c));
        let no_decode = c.with_coopmat2_decode(false);
        assert!(!tensor_applies(64, DType::Bf16, &no_decode));
        let plain = MatmulCaps::new(32, 49152, 1024, 132);
        assert!(!tensor_applies(64, DType::Bf16, &plain));
        // A granularity of 48 rows does not divide the 64-row blocks.
        let odd = c.with_coopmat2(Some([48, 16, 16]), 256);
        assert!(!tensor_applies(64, DType::Bf16, &odd));
    }

    #[test]
    fn tiles_fill_the_gpu_or_are_the_smallest() {
        let c = h200();
        // 132 units: enough from 119 blocks.
        // Qwen3-4B at 64 tokens: gate|up 2·9728 rows, SiLU: 152 blocks of
        // 64×64, one pass.
        assert_eq!(tensor_tile(64, 19456, true, &c), TensorTile::SILU_SMALL);
        assert_eq!(tensor_splits(64, 2560, 19456, true, &c), 1);
        // down (2560 outputs from 9728): 20 blocks of 64×128: split-K,
        // 6 layers (120 blocks).
        assert_eq!(tensor_tile(64, 2560, false, &c), TensorTile::SMALL);
        assert_eq!(tensor_splits(64, 9728, 2560, false, &c), 6);
        // 17 rows: still 64-row blocks.
        assert_eq!(tensor_tile(17, 19456, false, &c), TensorTile::SMALL);
        // 512 rows × 8192 outputs: 4 × 64 square blocks, enough.
        assert_eq!(tensor_tile(512, 8192, false, &c), TensorTile::SQUARE);
        assert_eq!(tensor_splits(512, 8192, 8192, false, &c), 1);
        // 100 rows × 4096: 128-row blocks allowed; 16 wide, 32 square, 64
        // small blocks: none enough, the smallest, 2 layers of 64×128.
        assert_eq!(tensor_tile(100, 4096, false, &c), TensorTile::SMALL);
        assert_eq!(tensor_splits(100, 4096, 4096, false, &c), 2);
        // 100 rows, SiLU over 2·4096: 64 blocks of 128×64, 128 of 64×64.
        assert_eq!(tensor_tile(100, 8192, true, &c), TensorTile::SILU_SMALL);
        // Shallow K: layers at least 256 deep.
        assert_eq!(tensor_splits(64, 300, 256, false, &c), 1);
        assert_eq!(tensor_splits(64, 1024, 256, false, &c), 4);
        // At most LINEAR_MAX_SPLITS.
        assert_eq!(tensor_splits(20, 1 << 20, 64, false, &c), LINEAR_MAX_SPLITS);
    }

    #[test]
    fn every_block_and_epilogue_has_a_kernel() {
        for d in [DType::F16, DType::Bf16] {
            for t in [TensorTile::WIDE, TensorTile::SQUARE, TensorTile::SMALL] {
                for mode in [0, 1] {
                    let name = kernel_name(d, t, mode).unwrap();
                    assert!(crate::builtins::spirv(name).is_some(), "{name}");
                }
                assert_eq!(kernel_name(d, t, 2), None);
            }
            for t in [TensorTile::SILU, TensorTile::SILU_SMALL] {
                let name = kernel_name(d, t, 2).unwrap();
                assert!(crate::builtins::spirv(name).is_some(), "{name}");
            }
            let c = h200();
            for (m, n) in [(17, 64), (64, 4096), (100, 100), (4096, 8192)] {
                for silu in [false, true] {
                    let t = tensor_tile(m, n, silu, &c);
                    assert!(kernel_name(d, t, if silu { 2 } else { 0 }).is_some());
                    assert!(kernel_name(d, SPLIT_TILE, 0).is_some());
                }
            }
        }
        assert_eq!(kernel_name(DType::F32, TensorTile::SMALL, 0), None);
    }
}
