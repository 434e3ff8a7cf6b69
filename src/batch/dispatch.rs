//! The recorded-dispatch hot path of a [`Batch`]: each binding checked
//! (range, alignment, element type) only where it changed since the
//! previous dispatch, descriptors written or reused, the pipeline bound
//! when it differs, the buffers kept alive, then `vkCmdDispatch`.

use std::sync::Arc;

use ash::vk;

use super::bind::{
    bind_descriptors, call_error, check_binding, check_element, push_constants,
    push_constants_padded,
};
use super::Batch;
use crate::barrier::Stage;
use crate::buffer::{BufView, GpuBuf};
use crate::error::Result;
use crate::kernel::Kernel;
use crate::memory::HostPath;

/// What a dispatch changes in what its batch has bound.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Change {
    /// The same kernel on the same buffer ranges.
    Nothing,
    /// Another kernel of the bound one's layout class, same buffer ranges:
    /// the pipeline only.
    Kernel,
    /// The descriptors (and the pipeline if it differs).
    Descriptors,
}

impl Batch {
    pub(super) fn keep_view(&mut self, v: &BufView<'_>, writes: bool) {
        self.chunk_host_reads |= v.inner.read_path == HostPath::Mapped;
        let recent = self
            .keep
            .iter_mut()
            .rev()
            .take(4)
            .find(|k| Arc::ptr_eq(&k.0, v.inner));
        match recent {
            Some(k) => k.1 |= writes,
            None => self.keep.push((v.inner.clone(), writes)),
        }
    }

    /// The recorded-dispatch hot path (inlined into `run*`, which are
    /// inlined into the caller's loop: no call frame per dispatch).
    /// `pipeline` is the kernel's own, or a variant of it on the same
    /// layout ([`crate::x_split`]; the caller then resets `bound` so that
    /// it is bound).
    #[inline(always)]
    pub(super) fn dispatch(
        &mut self,
        kernel: &Kernel,
        buffers: &[&dyn GpuBuf],
        grid: [u32; 3],
        pc: &[u8],
        pipeline: vk::Pipeline,
    ) -> Result<&mut Self> {
        self.usable()?;
        let d = &*self.dev;
        let k = &*kernel.core;
        let bindings = &k.reflection.bindings;
        if !Arc::ptr_eq(&kernel.dev, &self.dev)
            || buffers.len() != bindings.len()
            || pc.len() != k.push_constant_size as usize
        {
            return Err(call_error(kernel, &self.dev, buffers.len(), pc.len()));
        }
        let n = buffers.len();
        // The same buffer ranges as the previous dispatch, for a kernel of
        // the same layout class (validated then for the same binding kinds,
        // its buffers kept since): nothing to check, and the descriptors
        // bound then serve (Vulkan keeps them across pipelines whose layouts
        // are compatible for set 0). Otherwise each changed binding is
        // validated and written over the previous one, and the descriptors
        // are bound again.
        let kernel_addr = Arc::as_ptr(&kernel.core) as usize;
        if self.elem_kernel != kernel_addr {
            // Another kernel: its element checks start over.
            self.elem_kernel = kernel_addr;
            self.elem_checked = [0; ELEM_MEMO];
        }
        let mut change = if self.bound == kernel_addr {
            Change::Nothing
        } else if self.bound != 0 && self.bound_class == k.layout_class {
            Change::Kernel
        } else {
            Change::Descriptors
        };
        for (i, (b, info)) in buffers.iter().zip(bindings).enumerate() {
            let v = b.view();
            let owner = Arc::as_ptr(v.inner) as usize;
            let old = &self.last_infos[i];
            if change != Change::Descriptors
                && self.last_owner[i] == owner
                && old.offset == v.offset
                && old.range == v.size
            {
                // Another kernel of the same layout over the same buffer:
                // the descriptor serves, but its element type may not.
                if change == Change::Kernel {
                    if let Err(e) = check_element_once(&mut self.elem_checked, kernel, i, info, &v)
                    {
                        self.bound = 0;
                        return Err(e);
                    }
                }
                continue;
            }
            let checked = &mut self.elem_checked;
            if let Err(e) = check_binding(d, kernel, info, &v)
                .and_then(|()| check_element_once(checked, kernel, i, info, &v))
            {
                // Entries before `i` may have been overwritten.
                self.bound = 0;
                return Err(e);
            }
            // Field by field: a whole struct built on the stack and copied
            // cost a store-forwarding stall per binding.
            let slot = &mut self.last_infos[i];
            slot.buffer = v.inner.raw;
            slot.offset = v.offset;
            slot.range = v.size;
            self.last_owner[i] = owner;
            change = Change::Descriptors;
        }
        if self.auto && !self.in_launch {
            self.track_dispatch(bindings)?;
        }
        self.begin_command(Stage::Compute, k.writes)?;
        let cb = self.cb;
        if change != Change::Nothing {
            // Another kernel over the same buffers may write what the last
            // one only read: its uses are noted again.
            for (b, info) in buffers.iter().zip(bindings) {
                self.keep_view(&b.view(), !info.read_only);
            }
            let d = &*self.dev;
            if self.last_pipeline != pipeline {
                // SAFETY: `cb` is recording; the pipeline lives until the device drops.
                unsafe {
                    d.raw
                        .cmd_bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, pipeline)
                };
                self.last_pipeline = pipeline;
                // Only the kernel's own pipeline (it lives as long as the
                // device) is handed to recorders readied later; a split
                // launch's variants die with their kernel.
                if self.stream.slot == 0 && pipeline == k.pipeline {
                    d.compute_queue().note_pipeline(pipeline);
                }
                if let Some(ks) = &mut self.graph_kernels {
                    ks.push(kernel.core.clone());
                }
            }
            if change == Change::Descriptors && n > 0 {
                self.fault_point()?;
                let d = &*self.dev;
                // The set cache compares buffers by `last_owner` and asks
                // `owner` (a call through the binding) only for a set it
                // writes.
                let owner = |i: usize| buffers[i].view().inner;
                let (infos, owners) = (&self.last_infos[..n], &self.last_owner[..n]);
                if let Err(e) = bind_descriptors(d, self.rec.as_mut(), cb, k, infos, owners, &owner)
                {
                    return Err(self.poison(e));
                }
            }
            self.bound = kernel_addr;
            self.bound_class = k.layout_class;
        }
        let d = &*self.dev;
        if !pc.is_empty() {
            if pc.len() % 4 == 0 {
                push_constants(&d.raw, cb, k, pc);
            } else {
                push_constants_padded(&d.raw, cb, k, pc);
            }
        }
        // SAFETY: `cb` is recording with a compute pipeline bound and every
        // binding and push constant it declares set; the grid is within limits.
        unsafe { d.raw.cmd_dispatch(cb, grid[0], grid[1], grid[2]) };
        self.end_command(&kernel.label)
    }
}

/// Bindings whose element checks a batch remembers (`Batch::elem_checked`):
/// few, as the batch moves by value; later bindings are checked each time.
pub(super) const ELEM_MEMO: usize = 8;

/// [`check_element`] for binding `i`, skipped when `checked` (the batch's
/// `elem_checked`) says a buffer of the same element type passed there for
/// this kernel: the outcome depends on nothing else. Function addresses
/// are not unique (one function may have several, identical ones may
/// share one), but equal hooks return equal types, so a miss only costs a
/// check.
#[inline(always)]
fn check_element_once(
    checked: &mut [usize; ELEM_MEMO],
    kernel: &Kernel,
    i: usize,
    info: &crate::reflect::BindingInfo,
    v: &BufView<'_>,
) -> Result<()> {
    let hook = v.elem as usize;
    match checked.get_mut(i) {
        Some(c) if *c == hook => Ok(()),
        Some(c) => {
            check_element(kernel, i, info, v)?;
            *c = hook;
            Ok(())
        }
        None => check_element(kernel, i, info, v),
    }
}
