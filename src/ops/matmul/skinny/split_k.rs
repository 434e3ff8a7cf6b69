//! The split-K pass shared by the linear kernels: the scratch buffer of
//! partial sums and the reduction that adds them in slice order and
//! applies the layer's epilogue (`shaders/linear_reduce.comp`), and the
//! launch of the tensor-core kernels, whose push constants
//! (`matmul_cm2_decode.comp`'s linear forms and `linear_tc_stream.comp`)
//! are the same.

use crate::batch::Batch;
use crate::buffer::{Buffer, GpuBuf};
use crate::device::Device;
use crate::error::Result;
use crate::kernel::Kernel;

use super::super::super::grid::elementwise_groups;
use super::super::super::words;
use super::{shape, Epilogue};

/// The split-K scratch buffer of `splits` partial sums of every output
/// (the batch holds it until its work completes).
pub(super) fn scratch(gpu: &Device, splits: u32, m: u32, n: u32) -> Result<Buffer<f32>> {
    let info = gpu.info();
    let parts = u64::from(splits) * u64::from(m) * u64::from(n);
    if parts * 4 > info.max_storage_buffer_range || parts > u64::from(u32::MAX) {
        return Err(shape(format!(
            "{splits} K slices need {parts} partial sums, over the adapter's \
             maxStorageBufferRange ({} bytes) or the kernels' 32-bit index",
            info.max_storage_buffer_range
        )));
    }
    gpu.alloc::<f32>(parts as usize)
}

/// Records the split-K reduction pass (`shaders/linear_reduce.comp`) after
/// a barrier: adds the partials in slice order and applies the epilogue.
pub(super) fn reduce(
    batch: &mut Batch,
    part: &Buffer<f32>,
    res: &Buffer<f32>,
    y: &Buffer<f32>,
    (m, n): (u32, u32),
    epilogue: Epilogue<'_>,
    splits: u32,
) -> Result<()> {
    let gpu = y.device();
    batch.barrier();
    let kernel = crate::builtins::get(&gpu.inner, "linear_reduce", &[])?;
    let groups = elementwise_groups(y.len() as u64, gpu.info().max_workgroup_count[0]);
    let pc = words(&[m, n, epilogue.mode(), splits]);
    batch.run_configured(&kernel, &[part, res, y], [groups, 1, 1], Some(&pc))?;
    Ok(())
}

/// The depth of each of `splits` K layers (a multiple of the kernel's
/// `step`) and the number of layers that covers K at that depth (rounding
/// the depth up can leave fewer layers than asked). Pure.
pub(super) fn layers(k: u32, splits: u32, step: u32) -> (u32, u32) {
    let kslice = k.div_ceil(splits.max(1)).div_ceil(step) * step;
    (kslice, k.div_ceil(kslice))
}

/// A checked linear layer as the tensor-core kernels bind it.
pub(super) struct Layer<'a> {
    /// x, `[m, k]`.
    pub x: &'a Buffer<f32>,
    /// W's buffer, `[n, k]`.
    pub w: &'a dyn GpuBuf,
    /// y, `[m, n]` (`[m, n/2]` with SiLU·mul).
    pub y: &'a Buffer<f32>,
    /// (m, k, n).
    pub shape: (u32, u32, u32),
    /// The epilogue.
    pub epilogue: Epilogue<'a>,
}

/// Launches a tensor-core linear kernel over `grid` (an
/// [`crate::Error::OpShape`] past `maxComputeWorkGroupCount`, nothing
/// recorded): with `depth` 1, one
/// layer over all of K with the epilogue fused (push constants M, K, N
/// and zeros; the residual bound fourth); else `depth` K layers of
/// `kslice` writing partial products into a scratch buffer (C's stride
/// m·n), then the reduction pass with the epilogue.
pub(super) fn run_layers(
    batch: &mut Batch,
    kernel: &Kernel,
    l: Layer<'_>,
    grid: [u32; 3],
    kslice: u32,
    depth: u32,
) -> Result<()> {
    let (m, k, n) = l.shape;
    check_grid(&l, grid)?;
    let x = l.x as &dyn GpuBuf;
    if depth == 1 {
        let pc = words(&[m, k, n, 0, 0, 0, 0]);
        match l.epilogue {
            Epilogue::Residual(r) => {
                batch.run_configured(kernel, &[x, l.w, l.y, r], grid, Some(&pc))?
            }
            _ => batch.run_configured(kernel, &[x, l.w, l.y], grid, Some(&pc))?,
        };
        return Ok(());
    }
    // Split-K: layer z's partial product over its K slice into part[z]
    // ([m, n]), then the reduction pass with the epilogue.
    let part = scratch(&l.y.device(), depth, m, n)?;
    let pc = words(&[m, k, n, 0, 0, m * n, kslice]);
    batch.run_configured(kernel, &[x, l.w, &part], grid, Some(&pc))?;
    let res = match l.epilogue {
        Epilogue::Residual(r) => r,
        _ => l.y,
    };
    reduce(batch, &part, res, l.y, (m, n), l.epilogue, depth)
}

/// An [`crate::Error::OpShape`] where `grid` is past the adapter's
/// `maxComputeWorkGroupCount`.
fn check_grid(l: &Layer<'_>, grid: [u32; 3]) -> Result<()> {
    let limit = l.y.device().info().max_workgroup_count;
    if grid.iter().zip(limit).any(|(g, l)| *g > l) {
        return Err(shape(format!(
            "needs {grid:?} workgroups, over maxComputeWorkGroupCount {limit:?}"
        )));
    }
    Ok(())
}

/// Launches the K layers of `kslice` of a tensor-core kernel that adds
/// each layer's partial product into y with f32 atomic adds (the `_add`
/// forms of `shaders/linear_tc_stream.comp`): y holds the residual already
/// (an in-place residual add); no partials' buffer, no reduction pass.
pub(super) fn run_layers_added(
    batch: &mut Batch,
    kernel: &Kernel,
    l: Layer<'_>,
    grid: [u32; 3],
    kslice: u32,
) -> Result<()> {
    let (m, k, n) = l.shape;
    check_grid(&l, grid)?;
    let pc = words(&[m, k, n, 0, 0, 0, kslice]);
    batch.run_configured(kernel, &[l.x as &dyn GpuBuf, l.w, l.y], grid, Some(&pc))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_cover_k_in_whole_steps() {
        // The coopmat2 tiles' 64-deep slices.
        assert_eq!(layers(9728, 6, 64), (1664, 6));
        assert_eq!(layers(1000, 1, 64), (1024, 1));
        assert_eq!(layers(300, 4, 64), (128, 3));
        assert_eq!(layers(64, 8, 64), (64, 1));
        // The streaming kernel's 128-deep steps.
        assert_eq!(layers(9728, 14, 128), (768, 13));
        assert_eq!(layers(2560, 3, 128), (896, 3));
        assert_eq!(layers(2560, 4, 128), (640, 4));
        assert_eq!(layers(128, 8, 128), (128, 1));
    }
}
