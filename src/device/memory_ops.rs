//! Device memory: buffers created and destroyed through gpu-allocator,
//! the memory budget, the staging buffers host transfers borrow, and the
//! counts [`Device::stats`] reads.

use std::sync::atomic::Ordering;

use ash::vk;
use gpu_allocator::vulkan::{Allocation, AllocationCreateDesc, AllocationScheme};
use gpu_allocator::{AllocationError, MemoryLocation};

use super::{Device, DeviceInner};
use crate::error::{Error, Result};
use crate::staging::StagingBuffer;
use crate::stats::Counter;
use crate::stats::Stats;

impl DeviceInner {
    /// Creates a buffer of `size` bytes with memory at `location`.
    /// `user` buffers count against the memory budget and the buffer stats.
    pub(crate) fn create_buffer(
        &self,
        size: u64,
        location: MemoryLocation,
        name: &str,
        user: bool,
    ) -> Result<(vk::Buffer, Allocation)> {
        self.sticky.check()?;
        let info = &self.info;
        if size > info.max_memory_allocation_size {
            return Err(Error::BufferTooLarge {
                requested: size,
                limit: info.max_memory_allocation_size,
                limit_name: "maxMemoryAllocationSize",
            });
        }
        if size > info.max_buffer_size {
            return Err(Error::BufferTooLarge {
                requested: size,
                limit: info.max_buffer_size,
                limit_name: "maxBufferSize",
            });
        }
        if user {
            if let Some(budget) = self.options.memory_budget {
                let prev = self.budget_used.fetch_add(size, Ordering::AcqRel);
                if prev + size > budget {
                    self.budget_used.fetch_sub(size, Ordering::AcqRel);
                    return Err(Error::OutOfMemory {
                        requested: size,
                        detail: format!(
                            "memory budget of {budget} bytes, {prev} in use (DeviceOptions::memory_budget)"
                        ),
                    });
                }
            } else {
                self.budget_used.fetch_add(size, Ordering::AcqRel);
            }
        }
        let unbudget = || {
            if user {
                self.budget_used.fetch_sub(size, Ordering::AcqRel);
            }
        };
        let mut usage = vk::BufferUsageFlags::STORAGE_BUFFER
            | vk::BufferUsageFlags::UNIFORM_BUFFER
            | vk::BufferUsageFlags::TRANSFER_SRC
            | vk::BufferUsageFlags::TRANSFER_DST;
        if self.buffer_device_address {
            usage |= vk::BufferUsageFlags::SHADER_DEVICE_ADDRESS;
        }
        let concurrent = self.families.len() > 1;
        let mut binfo = vk::BufferCreateInfo::default().size(size).usage(usage);
        binfo = if concurrent {
            binfo
                .sharing_mode(vk::SharingMode::CONCURRENT)
                .queue_family_indices(&self.families)
        } else {
            binfo.sharing_mode(vk::SharingMode::EXCLUSIVE)
        };
        // SAFETY: valid create info on a live device.
        let raw = match unsafe { self.raw.create_buffer(&binfo, None) } {
            Ok(b) => b,
            Err(r) => {
                unbudget();
                return Err(self.sticky.fail("vkCreateBuffer", r));
            }
        };
        // SAFETY: `raw` is a live buffer of this device.
        let requirements = unsafe { self.raw.get_buffer_memory_requirements(raw) };
        let alloc = {
            let mut a = self.allocator.lock().unwrap_or_else(|p| p.into_inner());
            a.allocate(&AllocationCreateDesc {
                name,
                requirements,
                location,
                linear: true,
                allocation_scheme: AllocationScheme::GpuAllocatorManaged,
            })
        };
        let alloc = match alloc {
            Ok(a) => a,
            Err(e) => {
                // SAFETY: the buffer was never bound or used.
                unsafe { self.raw.destroy_buffer(raw, None) };
                unbudget();
                return Err(match e {
                    AllocationError::OutOfMemory => Error::OutOfMemory {
                        requested: size,
                        detail: "the driver has no memory left in a suitable heap".into(),
                    },
                    other => Error::Allocator(other.to_string()),
                });
            }
        };
        // SAFETY: the allocation satisfies `requirements` of this buffer.
        if let Err(r) = unsafe {
            self.raw
                .bind_buffer_memory(raw, alloc.memory(), alloc.offset())
        } {
            // SAFETY: the buffer is unused.
            unsafe { self.raw.destroy_buffer(raw, None) };
            let _ = self
                .allocator
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .free(alloc);
            unbudget();
            return Err(self.sticky.fail("vkBindBufferMemory", r));
        }
        self.counters.add(Counter::Allocations, 1);
        if device_local(&alloc) {
            self.counters.device_alloc(alloc.size());
        }
        if user {
            self.counters.add(Counter::Buffers, 1);
            self.counters
                .buffer_bytes
                .fetch_add(size, Ordering::Relaxed);
        }
        self.set_name(raw, name);
        Ok((raw, alloc))
    }

    /// Destroys a buffer and frees its memory now.
    pub(crate) fn destroy_buffer(&self, raw: vk::Buffer, alloc: Allocation, staging: bool) {
        // SAFETY: callers pass buffers no pending submission uses.
        unsafe { self.raw.destroy_buffer(raw, None) };
        if device_local(&alloc) {
            self.counters.device_free(alloc.size());
        }
        let _ = self
            .allocator
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .free(alloc);
        self.counters.add(Counter::Allocations, -1);
        if !staging {
            self.counters.add(Counter::Buffers, -1);
        }
    }

    /// Takes back a user buffer's budget share (called when it is dropped).
    pub(crate) fn unbudget(&self, size: u64) {
        self.budget_used.fetch_sub(size, Ordering::AcqRel);
        self.counters
            .buffer_bytes
            .fetch_sub(size, Ordering::Relaxed);
    }

    /// A staging buffer of at least `size` bytes, pooled or new.
    pub(crate) fn take_staging(&self, size: u64) -> Result<StagingBuffer> {
        if let Some(s) = self.staging.take(size) {
            return Ok(s);
        }
        let (raw, alloc) =
            self.create_buffer(size, MemoryLocation::GpuToCpu, "vkcompute staging", false)?;
        self.counters.add(Counter::StagingBuffers, 1);
        StagingBuffer::new(raw, alloc, size).map_err(|(raw, alloc)| {
            self.destroy_buffer(raw, alloc, true);
            self.counters.add(Counter::StagingBuffers, -1);
            Error::Allocator("staging memory could not be mapped".into())
        })
    }

    /// Returns a staging buffer (its copies must have completed).
    pub(crate) fn give_staging(&self, s: StagingBuffer) {
        if let Some(extra) = self.staging.give(s) {
            self.destroy_staging(extra);
        }
    }

    pub(super) fn destroy_staging(&self, s: StagingBuffer) {
        self.destroy_buffer(s.raw, s.alloc, true);
        self.counters.add(Counter::StagingBuffers, -1);
    }
}

/// Whether an allocation's memory is device-local (counted in
/// [`Stats::device_bytes`](crate::Stats::device_bytes)).
fn device_local(alloc: &Allocation) -> bool {
    alloc
        .memory_properties()
        .contains(vk::MemoryPropertyFlags::DEVICE_LOCAL)
}

impl Device {
    /// Starts a new peak of device memory: [`Stats::peak_device_bytes`]
    /// becomes the memory in use now, so a later [`Device::stats`] gives
    /// the most used by the work in between (a prefill, one decode step).
    pub fn reset_peak_memory(&self) {
        self.inner.counters.reset_peak();
    }

    /// Counts of live Vulkan objects and memory.
    pub fn stats(&self) -> Stats {
        self.inner.maintain_quiet();
        let mut s = self.inner.counters.snapshot();
        s.deferred = self
            .inner
            .garbage
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len() as i64
            + self.inner.compute_recorders.busy_len() as i64
            + self
                .inner
                .transfer_recorders
                .as_ref()
                .map_or(0, |r| r.busy_len() as i64);
        let report = self
            .inner
            .allocator
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .generate_report();
        s.allocator_used_bytes = report.total_allocated_bytes;
        s.allocator_reserved_bytes = report.total_capacity_bytes;
        debug_assert_eq!(s.pipelines as usize, self.inner.kernels.len());
        s
    }
}
