//! Copies and fills inside a batch: `vkCmdCopyBuffer` / `vkCmdFillBuffer`,
//! or, for large device copies, dispatches of the built-in copy kernel
//! ([`super::copy_kernel`]).

use std::sync::Arc;

use ash::vk;

use super::copy_kernel as copy;
use super::{bind_descriptors, push_constants, Batch};
use crate::barrier::Stage;
use crate::buffer::{BufView, GpuBuf};
use crate::error::{Error, Result};
use crate::pipeline_cache::KernelCore;

impl Batch {
    /// Copies all of `src` into `dst` (equal byte sizes; both may be slices,
    /// of different element types).
    pub fn copy(&mut self, src: &dyn GpuBuf, dst: &dyn GpuBuf) -> Result<&mut Self> {
        self.usable()?;
        let (s, t) = (src.view(), dst.view());
        self.check_own(&s, "copy")?;
        self.check_own(&t, "copy")?;
        if s.size != t.size {
            return Err(Error::BadTransfer {
                what: "copy",
                detail: format!("source is {} bytes, destination {} bytes", s.size, t.size),
            });
        }
        if Arc::ptr_eq(s.inner, t.inner)
            && s.offset < t.offset + t.size
            && t.offset < s.offset + s.size
        {
            return Err(Error::BadTransfer {
                what: "copy",
                detail: "source and destination ranges overlap".into(),
            });
        }
        if copy::eligible(
            s.offset,
            t.offset,
            s.size,
            self.dev.info.min_storage_buffer_offset_alignment,
        ) {
            if let Some(core) = copy::kernel(&self.dev) {
                return self.copy_by_kernel(&core, &s, &t);
            }
        }
        self.track_views(
            Stage::Transfer,
            &[
                (&s, s.offset..s.offset + s.size, false),
                (&t, t.offset..t.offset + t.size, true),
            ],
        )?;
        self.begin_command(Stage::Transfer, true)?;
        self.keep_view(&s, false);
        self.keep_view(&t, true);
        let region = vk::BufferCopy {
            src_offset: s.offset,
            dst_offset: t.offset,
            size: s.size,
        };
        // SAFETY: `cb` is recording; both buffers are live (kept by `keep`)
        // and the regions lie inside them and do not overlap (checked).
        unsafe {
            self.dev
                .raw
                .cmd_copy_buffer(self.cb, s.inner.raw, t.inner.raw, &[region])
        };
        self.end_command("copy")
    }

    /// A large copy as dispatches of the built-in copy kernel (see
    /// [`super::copy_kernel`]); the caller checked eligibility.
    fn copy_by_kernel(
        &mut self,
        k: &KernelCore,
        s: &BufView<'_>,
        t: &BufView<'_>,
    ) -> Result<&mut Self> {
        let info = &self.dev.info;
        let range = info
            .max_storage_buffer_range
            .min(self.dev.options.copy_binding_limit.unwrap_or(u64::MAX));
        let Some(pieces) = copy::plan(
            s.size,
            range,
            info.min_storage_buffer_offset_alignment,
            info.max_workgroup_count[0],
        ) else {
            return Err(Error::BadTransfer {
                what: "copy",
                detail: "the adapter's binding limits leave no room for a copy piece".into(),
            });
        };
        self.track_views(
            Stage::Compute,
            &[
                (s, s.offset..s.offset + s.size, false),
                (t, t.offset..t.offset + t.size, true),
            ],
        )?;
        self.begin_command(Stage::Compute, true)?;
        self.keep_view(s, false);
        self.keep_view(t, true);
        let d = &*self.dev;
        let cb = self.cb;
        // SAFETY: `cb` is recording; the pipeline lives until the device drops.
        unsafe {
            d.raw
                .cmd_bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, k.pipeline)
        };
        for p in &pieces {
            let infos = [
                vk::DescriptorBufferInfo {
                    buffer: s.inner.raw,
                    offset: s.offset + p.offset,
                    range: p.bytes,
                },
                vk::DescriptorBufferInfo {
                    buffer: t.inner.raw,
                    offset: t.offset + p.offset,
                    range: p.bytes,
                },
            ];
            // Both ranges lie inside live buffers (kept) and within
            // maxStorageBufferRange, at aligned offsets (planned).
            let (si, ti) = (s.inner, t.inner);
            let owner = |i: usize| if i == 0 { si } else { ti };
            let owners = [Arc::as_ptr(si) as usize, Arc::as_ptr(ti) as usize];
            // A failure here leaves earlier pieces recorded and the copy
            // pipeline bound behind the batch's back: poisoned.
            self.fault_point()?;
            let d = &*self.dev;
            if let Err(e) = bind_descriptors(d, self.rec.as_mut(), cb, k, &infos, &owners, &owner) {
                return Err(self.poison(e));
            }
            let words = (p.bytes / 16) as u32;
            push_constants(&d.raw, cb, k, &words.to_le_bytes());
            // SAFETY: pipeline, bindings and push constants are set; the grid
            // is within maxComputeWorkGroupCount[0] (planned).
            unsafe { d.raw.cmd_dispatch(cb, p.groups, 1, 1) };
        }
        // The next dispatch binds its own pipeline and descriptors.
        self.last_pipeline = k.pipeline;
        self.bound = 0;
        self.end_command("copy")
    }

    /// Fills `dst` with copies of the 32-bit pattern `value`. The byte
    /// offset and size must be multiples of 4 (whole buffers always qualify).
    pub fn fill(&mut self, dst: &dyn GpuBuf, value: u32) -> Result<&mut Self> {
        self.usable()?;
        let t = dst.view();
        self.check_own(&t, "fill")?;
        let whole = t.offset == 0 && t.size == t.inner.size;
        let size = if whole { t.inner.vk_size } else { t.size };
        if t.offset % 4 != 0 || size % 4 != 0 {
            return Err(Error::BadTransfer {
                what: "fill",
                detail: format!(
                    "byte offset {} and size {} must be multiples of 4",
                    t.offset, t.size
                ),
            });
        }
        self.track_views(Stage::Transfer, &[(&t, t.offset..t.offset + size, true)])?;
        self.begin_command(Stage::Transfer, true)?;
        self.keep_view(&t, true);
        // SAFETY: `cb` is recording; the range lies inside the live buffer
        // and is 4-byte aligned (checked).
        unsafe {
            self.dev
                .raw
                .cmd_fill_buffer(self.cb, t.inner.raw, t.offset, size, value)
        };
        self.end_command("fill")
    }

    /// Fills `dst` with zeros (see [`Batch::fill`]).
    pub fn zero(&mut self, dst: &dyn GpuBuf) -> Result<&mut Self> {
        self.fill(dst, 0)
    }
}
