//! Binding a dispatch's inputs: checks of each binding and of the call
//! against the kernel's reflection and the adapter's limits (typed
//! errors, built out of the hot path), descriptors (pushed, or a written
//! set from the device's cache or the batch's pools) and push constants.

use std::sync::Arc;

use ash::vk;

use crate::buffer::{BufView, BufferInner};
use crate::device::DeviceInner;
use crate::element::ElementType;
use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::pipeline_cache::KernelCore;
use crate::recorder::Recorder;
use crate::reflect::BindingKind;

/// Binds `infos` (one packed `VkDescriptorBufferInfo` per binding of `k`,
/// in its template's order, each for a live buffer within the adapter's
/// range and alignment limits; `owner(i)` is binding i's buffer, which the
/// batch keeps alive, and `owners[i]` its address, `Arc::as_ptr`) as set 0: pushed where the kernel uses push
/// descriptors, else a written set from the device's cache
/// ([`crate::set_cache`]) or, when that declines, one written into `rec`'s
/// pools, bound.
pub(crate) fn bind_descriptors<'o>(
    d: &DeviceInner,
    rec: Option<&mut Recorder>,
    cb: vk::CommandBuffer,
    k: &KernelCore,
    infos: &[vk::DescriptorBufferInfo],
    owners: &[usize],
    owner: &dyn Fn(usize) -> &'o Arc<BufferInner>,
) -> Result<()> {
    let data = infos.as_ptr().cast::<std::ffi::c_void>();
    match &d.push_descriptor {
        Some(pd) if k.push_descriptors => {
            // SAFETY: `cb` is recording; the template was made for this
            // layout over packed DescriptorBufferInfo, and `infos` holds one
            // valid entry per binding (the caller's contract).
            unsafe {
                pd.cmd_push_descriptor_set_with_template(cb, k.template, k.pipeline_layout, 0, data)
            };
        }
        // A graph's recorder owns its sets: the cache may free a set once
        // its buffers die, and a graph replays long after recording.
        _ if rec.as_ref().is_some_and(|r| r.is_graph()) => {
            let Some(rec) = rec else {
                return Err(Error::DeviceLost { call: "batch" });
            };
            let set = rec.allocate_set(&d.raw, &d.sticky, &d.counters, k.set_layout)?;
            // SAFETY: `set` is fresh from the graph's own pool and not in
            // use; `infos` matches the template's layout.
            unsafe {
                d.raw
                    .update_descriptor_set_with_template(set, k.template, data)
            };
            bind_set(d, cb, k, set);
        }
        _ => {
            let cached = d.set_cache().get_or_write(
                &d.raw,
                &d.sticky,
                &d.counters,
                k.layout_class,
                k.set_layout,
                k.template,
                infos,
                owners,
                owner,
                &|| d.submitted_mark(),
                &|| d.completed_cached(),
            )?;
            let set = match cached {
                Some(set) => set,
                None => {
                    // (`let else`, not `ok_or`: that builds and drops an
                    // error on every per-batch set.)
                    let Some(rec) = rec else {
                        return Err(Error::DeviceLost { call: "batch" });
                    };
                    let set = rec.allocate_set(&d.raw, &d.sticky, &d.counters, k.set_layout)?;
                    // SAFETY: `set` is fresh from a pool the batch owns and
                    // not in use; `infos` matches the template's layout.
                    unsafe {
                        d.raw
                            .update_descriptor_set_with_template(set, k.template, data)
                    };
                    set
                }
            };
            bind_set(d, cb, k, set);
        }
    }
    Ok(())
}

/// Binds `set` as set 0 of `k`'s layout.
fn bind_set(d: &DeviceInner, cb: vk::CommandBuffer, k: &KernelCore, set: vk::DescriptorSet) {
    // SAFETY: `cb` is recording; `set` holds descriptors for `k`'s layout,
    // and every buffer it names is kept alive by the batch (or graph).
    unsafe {
        d.raw.cmd_bind_descriptor_sets(
            cb,
            vk::PipelineBindPoint::COMPUTE,
            k.pipeline_layout,
            0,
            &[set],
            &[],
        );
    }
}

/// Why a dispatch of `kernel` with `buffers` bindings and `pc` bytes of
/// push constants was refused before recording (kept out of the inlined
/// hot path).
#[cold]
#[inline(never)]
pub(super) fn call_error(
    kernel: &Kernel,
    dev: &Arc<DeviceInner>,
    buffers: usize,
    pc: usize,
) -> Error {
    let k = &*kernel.core;
    let label = kernel.label.to_string();
    if !Arc::ptr_eq(&kernel.dev, dev) {
        Error::ForeignKernel { kernel: label }
    } else if buffers != k.reflection.bindings.len() {
        Error::BindingCount {
            kernel: label,
            expected: k.reflection.bindings.len(),
            got: buffers,
        }
    } else {
        Error::PushConstantSize {
            kernel: label,
            expected: k.push_constant_size,
            got: pc,
        }
    }
}

/// Records push constants whose length is a multiple of 4.
#[inline]
pub(super) fn push_constants(
    dev: &ash::Device,
    cb: vk::CommandBuffer,
    k: &KernelCore,
    bytes: &[u8],
) {
    // SAFETY: `cb` is recording; the layout declares a COMPUTE push range
    // of the block size rounded up to 4, which `bytes` does not exceed.
    unsafe {
        dev.cmd_push_constants(
            cb,
            k.pipeline_layout,
            vk::ShaderStageFlags::COMPUTE,
            0,
            bytes,
        )
    };
}

/// Push constants of a block whose size is not a multiple of 4 (16-bit
/// members): padded with zeros to the layout's range.
#[cold]
pub(super) fn push_constants_padded(
    dev: &ash::Device,
    cb: vk::CommandBuffer,
    k: &KernelCore,
    pc: &[u8],
) {
    let mut stack = [0u8; PADDED_ON_STACK];
    let mut heap = Vec::new();
    push_constants(dev, cb, k, pad_to_words(pc, &mut stack, &mut heap));
}

/// Blocks up to this size are padded on the stack; larger ones (up to the
/// adapter's maxPushConstantsSize, which kernel creation checks) on the heap.
const PADDED_ON_STACK: usize = 256;

/// `pc` followed by zeros up to the next multiple of 4 bytes, in `stack`
/// when it fits, else in `heap`. Never truncates.
fn pad_to_words<'a>(
    pc: &[u8],
    stack: &'a mut [u8; PADDED_ON_STACK],
    heap: &'a mut Vec<u8>,
) -> &'a [u8] {
    let len = pc.len().next_multiple_of(4);
    let out: &mut [u8] = if len <= stack.len() {
        &mut stack[..len]
    } else {
        heap.resize(len, 0);
        &mut heap[..]
    };
    out[..pc.len()].copy_from_slice(pc);
    out[pc.len()..].fill(0);
    out
}

/// Checks one binding against the kernel's reflection and the adapter's
/// limits (its descriptor is then the view's buffer, offset and size).
#[inline]
pub(super) fn check_binding(
    d: &DeviceInner,
    kernel: &Kernel,
    info: &crate::reflect::BindingInfo,
    v: &BufView<'_>,
) -> Result<()> {
    let (limit, align) = match info.kind {
        BindingKind::Storage => (
            d.info.max_storage_buffer_range,
            d.info.min_storage_buffer_offset_alignment,
        ),
        BindingKind::Uniform => (
            d.info.max_uniform_buffer_range,
            d.info.min_uniform_buffer_offset_alignment,
        ),
    };
    // Vulkan offset alignments are powers of two: a mask, not a division
    // (a 64-bit divide costs tens of cycles on the hot path).
    let misaligned = if align.is_power_of_two() {
        v.offset & (align - 1) != 0
    } else {
        v.offset % align.max(1) != 0
    };
    if v.inner.dev.id != d.id || v.size > limit || misaligned {
        return Err(binding_error(d, kernel, info, v, limit, align));
    }
    Ok(())
}

/// Checks binding `i`'s element type against what the kernel declares
/// there (the rule is in [`crate::element`]).
#[inline]
pub(super) fn check_element(
    kernel: &Kernel,
    i: usize,
    info: &crate::reflect::BindingInfo,
    v: &BufView<'_>,
) -> Result<()> {
    let Some(Some(declared)) = kernel.core.elements.get(i) else {
        return Ok(());
    };
    match (v.elem)() {
        Some(have) if !declared.fits(have) => Err(element_error(kernel, info, *declared, have)),
        _ => Ok(()),
    }
}

#[cold]
fn element_error(
    kernel: &Kernel,
    info: &crate::reflect::BindingInfo,
    declared: ElementType,
    have: ElementType,
) -> Error {
    Error::ElementMismatch {
        kernel: kernel.label.to_string(),
        binding: info.binding,
        declared: declared.glsl_name(),
        buffer: have.rust_name(),
        detail: declared.accepts(have).err().unwrap_or_default(),
    }
}

#[cold]
fn binding_error(
    d: &DeviceInner,
    kernel: &Kernel,
    info: &crate::reflect::BindingInfo,
    v: &BufView<'_>,
    limit: u64,
    align: u64,
) -> Error {
    let limit_name = match info.kind {
        BindingKind::Storage => "maxStorageBufferRange",
        BindingKind::Uniform => "maxUniformBufferRange",
    };
    if v.inner.dev.id != d.id {
        Error::ForeignBuffer {
            kernel: kernel.label.to_string(),
            binding: info.binding,
        }
    } else if v.size > limit {
        Error::BindingMismatch {
            kernel: kernel.label.to_string(),
            binding: info.binding,
            detail: format!(
                "binds {} bytes, over {limit_name} ({limit} bytes); bind slices of at most that size",
                v.size
            ),
        }
    } else {
        Error::BindingMismatch {
            kernel: kernel.label.to_string(),
            binding: info.binding,
            detail: format!(
                "slice starts at byte {}, not a multiple of the offset alignment {align}",
                v.offset
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_keeps_every_byte_at_any_size() {
        for n in [1usize, 2, 5, 254, 255, 257, 301, 4093] {
            let pc: Vec<u8> = (0..n).map(|i| (i % 251) as u8 + 1).collect();
            let mut stack = [0xAAu8; PADDED_ON_STACK];
            let mut heap = Vec::new();
            let out = pad_to_words(&pc, &mut stack, &mut heap);
            assert_eq!(out.len(), n.next_multiple_of(4), "{n} bytes");
            assert_eq!(&out[..n], &pc[..], "{n} bytes");
            assert!(out[n..].iter().all(|&b| b == 0), "{n} bytes");
        }
    }
}
