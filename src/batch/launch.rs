//! Launch forms beside [`Batch::run`]: typed push constants, the opt-in
//! spread grid, and the [`bindings!`](crate::bindings) macro.

use bytemuck::Pod;

use super::{grid_error, Batch};
use crate::buffer::GpuBuf;
use crate::error::Result;
use crate::kernel::Kernel;
use crate::workgroups;

impl Batch {
    /// Like [`Batch::run`], with the kernel's push-constant block given as
    /// a value: `params` is any [`Pod`] type whose bytes match the block
    /// (same size — checked, [`Error::PushConstantSize`](crate::Error::PushConstantSize)
    /// otherwise — and the same layout: `#[repr(C)]` fields in the GLSL
    /// block's order, with its std430 offsets).
    ///
    /// ```
    /// # fn main() -> vkcompute::Result<()> {
    /// # let gpu = vkcompute::Device::new()?;
    /// #[repr(C)]
    /// #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
    /// struct Saxpy { a: f32, n: u32 }
    ///
    /// let xs = gpu.upload(&[1.0f32; 100])?;
    /// let ys = gpu.upload(&[1.0f32; 100])?;
    /// let k = gpu.kernel_glsl(r#"
    ///     #version 450
    ///     layout(local_size_x = 64) in;
    ///     layout(set = 0, binding = 0) readonly buffer X { float x[]; };
    ///     layout(set = 0, binding = 1) buffer Y { float y[]; };
    ///     layout(push_constant) uniform P { float a; uint n; };
    ///     void main() {
    ///         uint i = gl_GlobalInvocationID.x;
    ///         if (i < n) y[i] = a * x[i] + y[i];
    ///     }
    /// "#)?;
    /// let mut batch = gpu.batch()?;
    /// batch.run_with(&k, &[&xs, &ys], 100, &Saxpy { a: 2.0, n: 100 })?;
    /// batch.submit()?;
    /// assert_eq!(ys.download()?[99], 3.0);
    /// # Ok(())
    /// # }
    /// ```
    #[inline]
    pub fn run_with<P: Pod>(
        &mut self,
        kernel: &Kernel,
        buffers: &[&dyn GpuBuf],
        invocations: u32,
        params: &P,
    ) -> Result<&mut Self> {
        self.run_with_push_constants(kernel, buffers, invocations, bytemuck::bytes_of(params))
    }

    /// Records `kernel` over `invocations` invocations on a grid that
    /// spreads into y and then z past the adapter's
    /// `maxComputeWorkGroupCount[0]` (an explicit opt-in: [`Batch::run`]
    /// keeps every index in x, splitting the launch along x past one row,
    /// and refuses kernels that read `gl_NumWorkGroups` there). One
    /// dispatch, one pipeline: no variants are built. The grid is never clamped (one that cannot fit is
    /// [`Error::WorkgroupLimit`](crate::Error::WorkgroupLimit)) and may hold
    /// a few spare invocations. The kernel (local size 1 in y and z)
    /// recovers its linear index as
    ///
    /// ```glsl
    /// uint idx = gl_GlobalInvocationID.x
    ///          + gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x)
    ///          + gl_GlobalInvocationID.z * (gl_NumWorkGroups.x * gl_WorkGroupSize.x * gl_NumWorkGroups.y);
    /// if (idx >= n) return;
    /// ```
    ///
    /// `push_constants` is the kernel's block (empty when it has none).
    pub fn run_spread(
        &mut self,
        kernel: &Kernel,
        buffers: &[&dyn GpuBuf],
        invocations: u32,
        push_constants: &[u8],
    ) -> Result<&mut Self> {
        let k = &*kernel.core;
        let limit = self.dev.info.max_workgroup_count;
        let grid =
            workgroups::grid_for_invocations(u64::from(invocations), k.workgroup_size[0], limit)
                .map_err(|e| grid_error(kernel, e, limit, [0, 0, 0]))?;
        self.dispatch(kernel, buffers, grid, push_constants, k.pipeline)
    }
}

/// A binding list of mixed buffer and slice types, with no
/// `as &dyn GpuBuf` casts: `bindings![&xs, &ys.slice(..8)?, &out]` is an
/// array of `&dyn GpuBuf`, to pass as `&list` wherever a dispatch takes
/// `&[&dyn GpuBuf]`, or to keep and reuse. (Array literals written in the
/// call, `&[&xs, &ys]`, need no macro.)
///
/// ```
/// # fn main() -> vkcompute::Result<()> {
/// # let gpu = vkcompute::Device::new()?;
/// use vkcompute::bindings;
/// let a = gpu.upload(&[1.0f32; 4])?;
/// let b = gpu.alloc::<u32>(4)?;
/// let list = bindings![&a, &b];        // Buffer<f32> and Buffer<u32>
/// assert_eq!(list.len(), 2);
/// # Ok(())
/// # }
/// ```
#[macro_export]
macro_rules! bindings {
    () => {
        [] as [&dyn $crate::GpuBuf; 0]
    };
    ($($b:expr),+ $(,)?) => {
        [$($b as &dyn $crate::GpuBuf),+]
    };
}
