//! Interop: the raw `ash` handles behind a [`Device`], a [`Buffer`] and a
//! [`Kernel`], for code that records its own Vulkan commands beside
//! vkcompute's (another library's renderer, a hand-written pass).
//!
//! The contract for using them is written on [`RawDevice`].
//!
//! Handles are plain values: they stay valid as long as the object they
//! came from (a `RawDevice` borrows its `Device`).

use ash::vk;
use bytemuck::Pod;

use crate::buffer::{Buffer, BufferSlice, GpuBuf};
use crate::device::Device;
use crate::kernel::Kernel;

/// The raw Vulkan objects of a [`Device`] ([`Device::raw`]), for interop.
/// `Copy`, `Send + Sync` (it only borrows the device's `ash` tables and
/// holds handles). The contract below covers every raw handle of the crate
/// ([`RawBuffer`], [`RawKernel`] too).
///
/// # Contract
///
/// Reading a handle is safe; every use of one goes through `ash`, whose
/// calls are `unsafe`, and must keep this contract, which vkcompute cannot
/// check:
///
/// - **Never destroy** a handle obtained here (device, buffer, pipeline,
///   layout), and never free or rebind the memory behind a buffer: vkcompute
///   owns them and destroys them itself, when the last owner drops and the
///   GPU work it knows of is done.
/// - **Keep vkcompute's objects alive past your GPU work.** vkcompute tracks
///   only the work it submits: a buffer or kernel used by a command buffer
///   you submit must not be dropped (nor its [`Device`]) until that work has
///   completed, and a host access through vkcompute ([`Buffer::download`],
///   [`Buffer::write`], ...) does not wait for it: wait for your own work
///   first (your fence or semaphore), and make its writes available with a
///   barrier, as Vulkan requires.
/// - **The queue needs external synchronization.** vkcompute submits to
///   [`RawDevice::compute_queue`] from any thread under its own lock, which
///   you cannot take: submit to that queue (or wait on it with
///   `vkQueueWaitIdle`) only while no other thread uses the device through
///   vkcompute, or create your own queue-using code on another device.
///   `vkDeviceWaitIdle` has the same rule.
/// - **Do not change state vkcompute relies on**: the pipeline's layout is
///   shared by every dispatch of the kernel, and descriptor sets vkcompute
///   binds are its own; bind your own sets to your own command buffers.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct RawDevice<'a> {
    /// The instance the device was created from.
    pub instance: &'a ash::Instance,
    /// The logical device. Do not destroy it or call `vkDeviceWaitIdle`
    /// while other threads use vkcompute.
    pub device: &'a ash::Device,
    /// The adapter.
    pub physical_device: vk::PhysicalDevice,
    /// Queue 0 of [`RawDevice::compute_family`], where batches run.
    /// Submitting to it needs external synchronization ([`RawDevice`] contract).
    pub compute_queue: vk::Queue,
    /// The compute queue's family index.
    pub compute_family: u32,
    /// The transfer-only family used for staging copies, if any.
    pub transfer_family: Option<u32>,
}

impl std::fmt::Debug for RawDevice<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawDevice")
            .field("device", &self.device.handle())
            .field("physical_device", &self.physical_device)
            .field("compute_queue", &self.compute_queue)
            .field("compute_family", &self.compute_family)
            .field("transfer_family", &self.transfer_family)
            .finish()
    }
}

/// The raw handle and range of a buffer or slice ([`Buffer::raw`],
/// [`BufferSlice::raw`]); see the [`RawDevice`] contract. Plain data:
/// `Copy`, `Send + Sync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RawBuffer {
    /// The `VkBuffer` (created with storage, uniform, transfer-source and
    /// transfer-destination usage).
    pub buffer: vk::Buffer,
    /// Byte offset of the range within `buffer`.
    pub offset: u64,
    /// Bytes in the range (the Vulkan buffer itself may be up to 3 bytes
    /// longer: sizes are rounded up to 4).
    pub size: u64,
}

/// The raw pipeline objects of a [`Kernel`] ([`Kernel::raw`]); see the
/// [`RawDevice`] contract. Plain data: `Copy`, `Send + Sync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RawKernel {
    /// The compute pipeline.
    pub pipeline: vk::Pipeline,
    /// Its layout: set 0 holds the kernel's bindings, then one push-constant
    /// range of the block's size rounded up to 4 bytes.
    pub pipeline_layout: vk::PipelineLayout,
    /// Set 0's layout (null when the kernel binds no buffer). It is a
    /// push-descriptor layout when [`RawKernel::push_descriptors`] is true.
    pub set_layout: vk::DescriptorSetLayout,
    /// Whether set 0 is pushed (VK_KHR_push_descriptor) rather than allocated.
    pub push_descriptors: bool,
}

impl Device {
    /// The raw `ash` instance, device, adapter and compute queue, for
    /// interop. Safe to call; using them is `unsafe` and bound by the
    /// [`interop` contract](crate::RawDevice): never destroy them, and submit
    /// to the queue only with external synchronization.
    pub fn raw(&self) -> RawDevice<'_> {
        let d = &*self.inner;
        // SAFETY: queue 0 of the compute family was requested when the
        // device was created; vkGetDeviceQueue only returns its handle.
        let compute_queue = unsafe { d.raw.get_device_queue(d.compute_queue().family, 0) };
        RawDevice {
            instance: &d.instance.raw,
            device: &d.raw,
            physical_device: d.physical,
            compute_queue,
            compute_family: d.compute_queue().family,
            transfer_family: d.transfer_family(),
        }
    }
}

impl<T: Pod> Buffer<T> {
    /// The `VkBuffer` and the byte range of this buffer, for interop (see
    /// [`RawBuffer`]'s contract: never destroy it; keep the buffer alive,
    /// and wait for your own GPU work before vkcompute's host access).
    pub fn raw(&self) -> RawBuffer {
        RawBuffer {
            buffer: self.inner.raw,
            offset: 0,
            size: self.inner.size,
        }
    }
}

impl<T: Pod> BufferSlice<'_, T> {
    /// The `VkBuffer` and the byte range of this view, for interop (see
    /// [`RawBuffer`]'s contract).
    pub fn raw(&self) -> RawBuffer {
        let v = self.view();
        RawBuffer {
            buffer: v.inner.raw,
            offset: v.offset,
            size: v.size,
        }
    }
}

impl Kernel {
    /// The pipeline and its layouts, for interop (see [`RawKernel`]'s
    /// contract: never destroy them; they live as long as the device).
    pub fn raw(&self) -> RawKernel {
        let k = &*self.core;
        RawKernel {
            pipeline: k.pipeline,
            pipeline_layout: k.pipeline_layout,
            set_layout: k.set_layout,
            push_descriptors: k.push_descriptors,
        }
    }
}

const _: fn() = || {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<RawDevice<'static>>();
    assert_send_sync::<RawBuffer>();
    assert_send_sync::<RawKernel>();
};
