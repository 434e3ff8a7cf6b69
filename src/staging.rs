//! The reused staging buffers through which host transfers to and from
//! device-local memory pass.
//!
//! Staging buffers are host-visible, cached and coherent, persistently
//! mapped, and recycled: a transfer takes two (one being filled or drained
//! by the host while the GPU copies the other) and returns them when done.
//! Only a handful are kept; creation happens on first use or when a larger
//! one is needed.

use std::ptr::NonNull;
use std::sync::Mutex;

use ash::vk;
use gpu_allocator::vulkan::Allocation;

/// How many staging buffers the pool keeps.
const KEEP: usize = 4;

/// One mapped staging buffer.
pub(crate) struct StagingBuffer {
    pub raw: vk::Buffer,
    pub alloc: Allocation,
    pub size: u64,
    ptr: NonNull<u8>,
}

// SAFETY: the mapping pointer is only dereferenced by the thread that holds
// the `StagingBuffer` (it is taken out of the pool for the transfer), and the
// mapping stays valid for the allocation's life.
unsafe impl Send for StagingBuffer {}
// SAFETY: as above; shared references never touch the mapping.
unsafe impl Sync for StagingBuffer {}

impl StagingBuffer {
    /// Wraps a buffer whose allocation is mapped; `None` when it is not.
    pub(crate) fn new(
        raw: vk::Buffer,
        alloc: Allocation,
        size: u64,
    ) -> Result<Self, (vk::Buffer, Allocation)> {
        match alloc.mapped_ptr() {
            Some(p) => Ok(StagingBuffer {
                raw,
                size,
                ptr: p.cast(),
                alloc,
            }),
            None => Err((raw, alloc)),
        }
    }

    /// Copies `src` into the buffer at byte 0.
    pub(crate) fn write(&mut self, src: &[u8]) {
        assert!(
            src.len() as u64 <= self.size,
            "staging write beyond its size"
        );
        // SAFETY: the mapping covers `size` bytes (checked above); no GPU
        // copy reads this buffer while the host holds it for writing.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr(), src.len()) };
    }

    /// Copies `src` to byte `offset` of the buffer (async transfers, where
    /// several threads fill disjoint ranges of one buffer).
    ///
    /// # Safety
    /// No other thread and no GPU copy accesses bytes
    /// `offset..offset + src.len()` during the call.
    pub(crate) unsafe fn write_at(&self, offset: u64, src: &[u8]) {
        assert!(
            offset.saturating_add(src.len() as u64) <= self.size,
            "staging write beyond its size"
        );
        // SAFETY: in bounds (checked above); exclusive access to the range
        // is the caller's contract.
        unsafe {
            std::ptr::copy_nonoverlapping(
                src.as_ptr(),
                self.ptr.as_ptr().add(offset as usize),
                src.len(),
            )
        };
    }

    /// Copies `len` bytes at byte `offset` of the buffer to `dst`.
    ///
    /// # Safety
    /// `dst` is valid for `len` bytes of writes that nothing else accesses
    /// during the call, and the GPU copy into the range completed with its
    /// writes made visible to the host.
    pub(crate) unsafe fn read_at(&self, offset: u64, dst: *mut u8, len: usize) {
        assert!(
            offset.saturating_add(len as u64) <= self.size,
            "staging read beyond its size"
        );
        // SAFETY: in bounds (checked above); `dst` is the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(offset as usize), dst, len) };
    }

    /// Copies the buffer's first `dst.len()` bytes into `dst`.
    pub(crate) fn read(&self, dst: &mut [u8]) {
        assert!(
            dst.len() as u64 <= self.size,
            "staging read beyond its size"
        );
        // SAFETY: as in `write`; the GPU copy into this buffer completed and
        // its writes were made visible to the host before this call.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), dst.as_mut_ptr(), dst.len()) };
    }
}

/// Free staging buffers.
#[derive(Default)]
pub(crate) struct StagingPool {
    free: Mutex<Vec<StagingBuffer>>,
}

impl StagingPool {
    /// The smallest free buffer of at least `size` bytes, if one is pooled
    /// (so a small transfer does not take the large buffer of an async one).
    pub(crate) fn take(&self, size: u64) -> Option<StagingBuffer> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        let i = free
            .iter()
            .enumerate()
            .filter(|(_, b)| b.size >= size)
            .min_by_key(|(_, b)| b.size)
            .map(|(i, _)| i)?;
        Some(free.swap_remove(i))
    }

    /// Returns a buffer; hands back one to destroy if the pool is full
    /// (the smallest).
    pub(crate) fn give(&self, buf: StagingBuffer) -> Option<StagingBuffer> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        free.push(buf);
        if free.len() <= KEEP {
            return None;
        }
        let smallest = free
            .iter()
            .enumerate()
            .min_by_key(|(_, b)| b.size)
            .map(|(i, _)| i)?;
        Some(free.swap_remove(smallest))
    }

    /// Takes every pooled buffer (to destroy them).
    pub(crate) fn drain(&self) -> Vec<StagingBuffer> {
        std::mem::take(&mut *self.free.lock().unwrap_or_else(|p| p.into_inner()))
    }
}
