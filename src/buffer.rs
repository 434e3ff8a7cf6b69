//! Typed GPU buffers, their views, and the object-safe binding trait.
//!
//! A [`Buffer<T>`] owns one `VkBuffer` sub-allocated by gpu-allocator. Host
//! reads and writes (`download`, `write`, ...) first wait for any submitted
//! GPU work that uses the buffer, so they never race a kernel; they go
//! through the mapping when the memory allows it, else through staging
//! copies ([`transfer`]). Dropping a buffer that in-flight work still
//! uses parks its memory until that work completes.
//!
//! [`GpuBuf`] is what a dispatch binds: a whole buffer or a
//! [`BufferSlice`], mixing element types in one `&[&dyn GpuBuf]`.

use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::ptr::NonNull;
use std::sync::Arc;

use ash::vk;
use bytemuck::Pod;
use gpu_allocator::vulkan::Allocation;

use crate::device::{Device, DeviceInner, Garbage};
use crate::error::{Error, Result};
use crate::host_lock::HostLock;
use crate::memory::{host_paths, HostPath, Memory};
use crate::reclaim::LastUse;

pub(crate) mod async_transfer;
pub(crate) mod host_words;
mod pending;
pub(crate) mod transfer;
use pending::HeldUses;

/// The shared part of a buffer: the Vulkan handle, its memory, its last use.
pub(crate) struct BufferInner {
    pub dev: Arc<DeviceInner>,
    pub raw: vk::Buffer,
    alloc: Option<Allocation>,
    /// Logical size in bytes.
    pub size: u64,
    /// Size of the Vulkan buffer: `size` rounded up to a multiple of 4.
    pub vk_size: u64,
    pub placement: Memory,
    pub write_path: HostPath,
    pub read_path: HostPath,
    mapped: Option<NonNull<u8>>,
    /// Last submissions that used it, per queue.
    pub last_use: LastUse,
    /// Taken by every host copy and atomic view ([`crate::host_lock`]).
    pub host: HostLock,
    /// Batches held back behind an open batch of their stream that use it.
    pub held: HeldUses,
}

// SAFETY: the only thread-affine state is the mapping pointer. The host
// reaches the mapped bytes in two ways only, both under `host`: plain
// copies (`transfer`), reads shared and writes exclusive, so no two
// threads ever copy overlapping bytes with one of them writing; and
// `HostWords` views, which access the bytes only as `AtomicU32` and which
// the lock never lets coexist with a plain copy. Everything else is
// `Arc`s, handles and atomics.
unsafe impl Send for BufferInner {}
// SAFETY: as above: shared access goes through `host` or atomics.
unsafe impl Sync for BufferInner {}

impl BufferInner {
    /// The mapped pointer, when host access goes through the mapping.
    pub(crate) fn mapped(&self) -> Option<NonNull<u8>> {
        self.mapped
    }

    /// The property flags of the memory type backing the buffer.
    pub(crate) fn memory_properties(&self) -> vk::MemoryPropertyFlags {
        self.alloc
            .as_ref()
            .map_or(vk::MemoryPropertyFlags::empty(), |a| a.memory_properties())
    }
}

impl Drop for BufferInner {
    fn drop(&mut self) {
        if let Some(alloc) = self.alloc.take() {
            self.dev.unbudget(self.vk_size);
            self.dev
                .release(self.last_use.mark(), Garbage::Buffer(self.raw, alloc));
        }
    }
}

/// A GPU buffer of `len` elements of `T`.
///
/// `Clone` gives another handle to the same memory; handles are `Send +
/// Sync`. Host copies ([`Buffer::write`], [`Buffer::download`],
/// [`Buffer::read_range`], ...) from any number of threads are sound: each
/// takes the buffer's host lock (reads shared, writes exclusive), so a read
/// sees the buffer before or after each whole write, never a mix.
///
/// **Ordering with batches:** a host copy acts when it is called. It waits
/// for GPU work already *submitted* that uses the buffer, but it is not a
/// command of a batch still being recorded: a batch submits in chunks as it
/// grows ([`BatchOptions`](crate::BatchOptions)), so a `write` between two
/// `run` calls of one batch may or may not be seen by the commands recorded
/// before it. Data that must land between two commands goes through the
/// batch ([`Batch::write`](crate::Batch::write),
/// [`Batch::read`](crate::Batch::read)). For memory that kernels poll while
/// running, see [`Buffer::host_words`].
pub struct Buffer<T: Pod> {
    pub(crate) inner: Arc<BufferInner>,
    len: u64,
    _t: PhantomData<fn() -> T>,
}

impl<T: Pod> Clone for Buffer<T> {
    /// Another handle to the same GPU memory (not a copy of the data).
    fn clone(&self) -> Self {
        Buffer {
            inner: self.inner.clone(),
            len: self.len,
            _t: PhantomData,
        }
    }
}

impl<T: Pod> std::fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("len", &self.len)
            .field("element", &std::any::type_name::<T>())
            .field("memory", &self.inner.placement)
            .finish()
    }
}

fn elem_size<T>() -> u64 {
    std::mem::size_of::<T>() as u64
}

/// Resolves a range over `len` elements, or names what was asked.
fn resolve(range: impl RangeBounds<usize>, len: u64, what: &'static str) -> Result<(u64, u64)> {
    // `..=usize::MAX` and `(Excluded(usize::MAX), _)` name one past the
    // largest index: saturated (it is out of range of any buffer anyway),
    // never an overflow.
    let start = match range.start_bound() {
        Bound::Included(&s) => s as u64,
        Bound::Excluded(&s) => (s as u64).saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => (e as u64).saturating_add(1),
        Bound::Excluded(&e) => e as u64,
        Bound::Unbounded => len,
    };
    if start > end || end > len {
        return Err(Error::OutOfRange {
            what,
            start,
            end,
            len,
        });
    }
    Ok((start, end))
}

impl Device {
    /// A buffer holding a copy of `data`, in device-local memory.
    pub fn upload<T: Pod>(&self, data: &[T]) -> Result<Buffer<T>> {
        self.upload_with(data, Memory::DeviceLocal)
    }

    /// A buffer holding a copy of `data`, placed as `memory` says.
    pub fn upload_with<T: Pod>(&self, data: &[T], memory: Memory) -> Result<Buffer<T>> {
        let buf = Buffer::<T>::create(self, data.len() as u64, memory, "upload")?;
        transfer::write_bytes(&buf.inner, 0, bytemuck::cast_slice(data))?;
        Ok(buf)
    }

    /// A zero-filled buffer of `len` elements in device-local memory.
    pub fn alloc<T: Pod>(&self, len: usize) -> Result<Buffer<T>> {
        self.alloc_with(len, Memory::DeviceLocal)
    }

    /// A zero-filled buffer of `len` elements, placed as `memory` says.
    pub fn alloc_with<T: Pod>(&self, len: usize, memory: Memory) -> Result<Buffer<T>> {
        let buf = Buffer::<T>::create(self, len as u64, memory, "alloc")?;
        transfer::zero(&buf.inner)?;
        Ok(buf)
    }
}

impl<T: Pod> Buffer<T> {
    /// A buffer of `len` elements, its contents undefined (callers fill it).
    pub(crate) fn create(
        dev: &Device,
        len: u64,
        memory: Memory,
        what: &'static str,
    ) -> Result<Self> {
        let d = &dev.inner;
        if len == 0 || elem_size::<T>() == 0 {
            return Err(Error::ZeroLength { what });
        }
        let size = len
            .checked_mul(elem_size::<T>())
            .ok_or(Error::BufferTooLarge {
                requested: u64::MAX,
                limit: d.info.max_memory_allocation_size,
                limit_name: "maxMemoryAllocationSize",
            })?;
        let vk_size = size.checked_next_multiple_of(4).unwrap_or(u64::MAX);
        // Checked here (create_buffer checks again) so the error names the
        // bytes asked for, not the rounded-up Vulkan size.
        for (limit, limit_name) in [
            (d.info.max_memory_allocation_size, "maxMemoryAllocationSize"),
            (d.info.max_buffer_size, "maxBufferSize"),
        ] {
            if vk_size > limit {
                return Err(Error::BufferTooLarge {
                    requested: size,
                    limit,
                    limit_name,
                });
            }
        }
        let name = format!("vkcompute {what} {len} x {}", std::any::type_name::<T>());
        let (raw, alloc) = d.create_buffer(vk_size, memory.location(), &name, true)?;
        let props = alloc.memory_properties();
        if !memory.satisfied_by(props) {
            d.destroy_buffer(raw, alloc, false);
            d.unbudget(vk_size);
            return Err(Error::Unsupported {
                what: "device-local host-visible memory (resizable BAR)",
                adapter: d.info.name.clone(),
            });
        }
        let mapped = alloc.mapped_ptr().map(NonNull::cast);
        let (write_path, read_path) = host_paths(
            memory,
            props,
            mapped.is_some(),
            d.options.direct_host_access,
        );
        let inner = Arc::new(BufferInner {
            dev: d.clone(),
            raw,
            size,
            vk_size,
            placement: memory,
            write_path,
            read_path,
            mapped,
            alloc: Some(alloc),
            last_use: LastUse::default(),
            host: HostLock::default(),
            held: HeldUses::default(),
        });
        Ok(Buffer {
            inner,
            len,
            _t: PhantomData,
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Always false: zero-length buffers cannot be created.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn byte_size(&self) -> u64 {
        self.inner.size
    }

    /// Where the buffer lives.
    pub fn memory(&self) -> Memory {
        self.inner.placement
    }

    /// Where the memory actually landed, for diagnostics: the raw
    /// `VkMemoryPropertyFlags` bits of its memory type (1 device-local,
    /// 2 host-visible, 4 coherent, 8 cached), the raw `VkDeviceMemory`
    /// handle of its block (equal for buffers sub-allocated from one block)
    /// and the byte offset in that block.
    pub fn memory_placement(&self) -> (u32, u64, u64) {
        use ash::vk::Handle;
        match &self.inner.alloc {
            Some(a) => (
                a.memory_properties().as_raw(),
                // SAFETY: only the handle's value is read, for display; the
                // memory is neither used nor freed through it.
                unsafe { a.memory() }.as_raw(),
                a.offset(),
            ),
            None => (0, 0, 0),
        }
    }

    /// The device the buffer belongs to.
    pub fn device(&self) -> Device {
        Device {
            inner: self.inner.dev.clone(),
        }
    }

    /// All elements, read back to the host once every submitted use of the
    /// buffer has completed.
    pub fn download(&self) -> Result<Vec<T>> {
        self.read_range(..)
    }

    /// Reads all elements into `out`, which must hold exactly `len()` elements.
    pub fn download_into(&self, out: &mut [T]) -> Result<()> {
        if out.len() as u64 != self.len {
            return Err(Error::LengthMismatch {
                what: "download_into",
                expected: self.len,
                got: out.len() as u64,
            });
        }
        transfer::read_bytes(&self.inner, 0, bytemuck::cast_slice_mut(out))
    }

    /// Elements `range`, read back to the host.
    pub fn read_range(&self, range: impl RangeBounds<usize>) -> Result<Vec<T>> {
        let (start, end) = resolve(range, self.len, "read_range")?;
        let mut out = vec![T::zeroed(); (end - start) as usize];
        if !out.is_empty() {
            transfer::read_bytes(
                &self.inner,
                start * elem_size::<T>(),
                bytemuck::cast_slice_mut(&mut out),
            )?;
        }
        Ok(out)
    }

    /// Writes `data` starting at element `offset`, once every submitted use
    /// of the buffer has completed.
    pub fn write(&self, offset: usize, data: &[T]) -> Result<()> {
        let end = (offset as u64).saturating_add(data.len() as u64);
        if end > self.len {
            return Err(Error::OutOfRange {
                what: "write",
                start: offset as u64,
                end,
                len: self.len,
            });
        }
        if data.is_empty() {
            return Ok(());
        }
        transfer::write_bytes(
            &self.inner,
            offset as u64 * elem_size::<T>(),
            bytemuck::cast_slice(data),
        )
    }

    /// The same memory as a buffer of `U` elements (another handle, no
    /// copy; uses of either are ordered as uses of one buffer), or `None`
    /// where its byte size is not a whole number of them (a
    /// `Buffer<[f32; N]>` of one element becomes a `Buffer<f32>` of `N`; a
    /// `Buffer<F16>` the `Buffer<u16>` of its bits that
    /// `ops::matmul_f16_batched` takes).
    ///
    /// ```
    /// # fn main() -> vkcompute::Result<()> {
    /// use vkcompute::ops::F16;
    /// let gpu = vkcompute::Device::new()?;
    /// let h = gpu.upload(&[F16::from_f32(1.0), F16::from_f32(-2.0), F16(0)])?;
    /// let bits = h.reinterpret::<u16>().expect("2-byte elements");
    /// assert_eq!(bits.download()?, [0x3c00, 0xc000, 0]);
    /// assert_eq!(h.reinterpret::<u32>().map(|b| b.len()), None); // 6 bytes
    /// # Ok(())
    /// # }
    /// ```
    pub fn reinterpret<U: Pod>(&self) -> Option<Buffer<U>> {
        let bytes = self.len * elem_size::<T>();
        let u = elem_size::<U>();
        (u > 0 && bytes % u == 0).then(|| Buffer {
            inner: self.inner.clone(),
            len: bytes / u,
            _t: PhantomData,
        })
    }

    /// A view of elements `range`, bindable in a dispatch like the whole
    /// buffer. Its byte offset must be a multiple of the adapter's
    /// `min_storage_buffer_offset_alignment` to be bound (checked when bound).
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<BufferSlice<'_, T>> {
        let (start, end) = resolve(range, self.len, "slice")?;
        if start == end {
            return Err(Error::ZeroLength { what: "slice" });
        }
        Ok(BufferSlice {
            buf: self,
            start,
            len: end - start,
        })
    }
}

/// A sub-range of a [`Buffer`], bindable wherever a buffer is.
#[derive(Clone, Copy)]
pub struct BufferSlice<'a, T: Pod> {
    buf: &'a Buffer<T>,
    start: u64,
    len: u64,
}

impl<T: Pod> std::fmt::Debug for BufferSlice<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferSlice")
            .field("start", &self.start)
            .field("len", &self.len)
            .finish()
    }
}

impl<'a, T: Pod> BufferSlice<'a, T> {
    /// Number of elements in the view.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Always false: empty slices cannot be made.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// First element of the view within its buffer.
    pub fn start(&self) -> usize {
        self.start as usize
    }

    /// The view's elements, read back to the host.
    pub fn download(&self) -> Result<Vec<T>> {
        let s = self.start as usize;
        self.buf.read_range(s..s + self.len as usize)
    }

    /// The buffer the view lies in.
    pub(crate) fn buffer(&self) -> &'a Buffer<T> {
        self.buf
    }
}

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// A buffer or buffer range that a dispatch can bind. Implemented by
/// [`Buffer`] and [`BufferSlice`]; sealed. Object-safe, so one
/// `&[&dyn GpuBuf]` can mix element types.
pub trait GpuBuf: sealed::Sealed + Send + Sync {
    /// Bytes covered by the binding.
    fn byte_size(&self) -> u64;
    /// Byte offset of the binding within its buffer.
    fn byte_offset(&self) -> u64;
    /// The binding's buffer, offset and size, for recording.
    #[doc(hidden)]
    fn view(&self) -> BufView<'_>;
}

/// What a binding resolves to (opaque).
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct BufView<'a> {
    pub(crate) inner: &'a Arc<BufferInner>,
    pub(crate) offset: u64,
    pub(crate) size: u64,
    /// The element type, when the crate names it ([`crate::element`]):
    /// called only when a binding is checked.
    pub(crate) elem: fn() -> Option<crate::element::ElementType>,
}

impl<T: Pod> sealed::Sealed for Buffer<T> {}
impl<T: Pod> sealed::Sealed for BufferSlice<'_, T> {}

impl<T: Pod> GpuBuf for Buffer<T> {
    fn byte_size(&self) -> u64 {
        self.inner.size
    }
    fn byte_offset(&self) -> u64 {
        0
    }
    fn view(&self) -> BufView<'_> {
        BufView {
            inner: &self.inner,
            offset: 0,
            size: self.inner.size,
            elem: crate::element::of::<T>,
        }
    }
}

impl<T: Pod> GpuBuf for BufferSlice<'_, T> {
    fn byte_size(&self) -> u64 {
        self.len * elem_size::<T>()
    }
    fn byte_offset(&self) -> u64 {
        self.start * elem_size::<T>()
    }
    fn view(&self) -> BufView<'_> {
        BufView {
            inner: &self.buf.inner,
            offset: self.byte_offset(),
            size: self.byte_size(),
            elem: crate::element::of::<T>,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_resolve_or_name_the_bounds() {
        assert_eq!(resolve(.., 10, "x").unwrap(), (0, 10));
        assert_eq!(resolve(2..5, 10, "x").unwrap(), (2, 5));
        assert_eq!(resolve(2..=5, 10, "x").unwrap(), (2, 6));
        assert_eq!(resolve(10.., 10, "x").unwrap(), (10, 10));
        assert!(matches!(
            resolve(3..11, 10, "read_range"),
            Err(Error::OutOfRange {
                what: "read_range",
                start: 3,
                end: 11,
                len: 10
            })
        ));
        #[allow(clippy::reversed_empty_ranges)]
        let backwards = resolve(5..4, 10, "x");
        assert!(backwards.is_err());
    }

    #[test]
    fn ranges_at_usize_max_are_errors_not_overflows() {
        let max = usize::MAX as u64;
        assert!(matches!(
            resolve(..=usize::MAX, 10, "read_range"),
            Err(Error::OutOfRange { start: 0, end, len: 10, .. }) if end == max.saturating_add(1)
        ));
        assert!(matches!(
            resolve(usize::MAX..=usize::MAX, 10, "read_range"),
            Err(Error::OutOfRange { len: 10, .. })
        ));
        let excl = (Bound::Excluded(usize::MAX), Bound::Unbounded);
        assert!(matches!(
            resolve(excl, 10, "slice"),
            Err(Error::OutOfRange { what: "slice", .. })
        ));
    }
}
