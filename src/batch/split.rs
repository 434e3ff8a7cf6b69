//! `Batch::run` past one row of workgroups: the launch split along x into
//! pieces of at most `maxComputeWorkGroupCount[0]` workgroups, each running
//! the kernel's variant for its piece ([`crate::x_split`]).

use super::Batch;
use crate::buffer::GpuBuf;
use crate::device::DeviceInner;
use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::pipeline_cache::{create_pipeline, KernelCore};
use crate::stats::Counter;
use crate::workgroups;
use crate::x_split::PieceError;
use ash::vk;

impl Batch {
    /// Records `kernel` over `invocations` along x in several dispatches
    /// (see [`Batch::run`]). Everything that can fail is checked, and every
    /// variant created, before the first piece is recorded; a piece that
    /// fails after an earlier one was recorded poisons the batch.
    #[cold]
    #[inline(never)]
    pub(super) fn run_split(
        &mut self,
        kernel: &Kernel,
        buffers: &[&dyn GpuBuf],
        invocations: u32,
        push_constants: &[u8],
    ) -> Result<&mut Self> {
        self.usable()?;
        let k = &*kernel.core;
        let max_x = self.dev.info.max_workgroup_count[0];
        let local_x = k.workgroup_size[0];
        let too_large = |reason: String| Error::LaunchTooLarge {
            kernel: kernel.label.to_string(),
            invocations: u64::from(invocations),
            local_size_x: local_x,
            limit: max_x,
            reason,
        };
        let (groups, pieces) = workgroups::split_x(u64::from(invocations), local_x, max_x)
            .map_err(|_| {
                too_large(
                    "the grid's spare invocations would index past 2^32 and wrap onto low indices"
                        .into(),
                )
            })?;
        let mut pipelines = Vec::with_capacity(pieces as usize);
        for p in 0..pieces {
            match piece_pipeline(&self.dev, k, p, max_x) {
                Ok(pipeline) => pipelines.push(pipeline),
                Err(PieceError::Unpatchable(reason)) => return Err(too_large(reason)),
                Err(PieceError::Vulkan(e)) => return Err(e),
            }
        }
        for (p, &pipeline) in (0u32..).zip(&pipelines) {
            let grid = [workgroups::piece_groups(groups, p, max_x), 1, 1];
            // Each piece binds its pipeline (and the descriptors again).
            self.bound = 0;
            // The pieces are one launch: its accesses are checked once.
            self.in_launch = p > 0;
            let recorded = self
                .dispatch(kernel, buffers, grid, push_constants, pipeline)
                .map(|_| ());
            self.in_launch = false;
            if let Err(e) = recorded {
                // A refusal of the first piece leaves the batch as it was;
                // later pieces would leave the launch half recorded.
                return Err(if p == 0 { e } else { self.poison(e) });
            }
        }
        // The next dispatch of this kernel binds its own pipeline again.
        self.bound = 0;
        Ok(self)
    }
}

/// The pipeline for piece `piece` of a split launch of `k` (see
/// [`crate::x_split::XSplit::piece`]): a variant made on first need is
/// counted and named after the kernel.
fn piece_pipeline(
    d: &DeviceInner,
    k: &KernelCore,
    piece: u32,
    groups_per_piece: u32,
) -> Result<vk::Pipeline, PieceError> {
    k.x_split.piece(
        k.pipeline,
        k.workgroup_size[0],
        piece,
        groups_per_piece,
        |words, entry, spec| {
            let p = create_pipeline(
                &d.raw,
                d.kernels().vk_cache,
                d.pipeline_statistics.is_some(),
                &d.sticky,
                k.pipeline_layout,
                words,
                entry,
                spec,
            )?;
            d.counters.add(Counter::Pipelines, 1);
            d.set_name(p, &format!("{} (piece {piece})", k.label));
            Ok(p)
        },
    )
}
