//! The split-K pass shared by the linear kernels: the scratch buffer of
//! partial sums and the reduction that adds them in slice order and
//! applies the layer's epilogue (`shaders/linear_reduce.comp`).

use crate::batch::Batch;
use crate::buffer::Buffer;
use crate::device::Device;
use crate::error::Result;

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
