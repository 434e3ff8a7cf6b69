//! [`HostWords`]: a buffer's mapping seen as atomic 32-bit words, for
//! kernels that poll host-written memory while they run (a resident ring, a
//! stop flag) and for hosts that poll what a running kernel writes.

use std::sync::atomic::AtomicU32;

use ash::vk;

use crate::buffer::Buffer;
use crate::error::{Error, Result};
use crate::host_lock::{Access, HostGuard};

/// A buffer's mapped memory as `len()` atomic `u32` words
/// ([`Buffer::host_words`]). Dereferences to `[AtomicU32]`.
///
/// # Contract
///
/// Unlike [`Buffer::download`] and [`Buffer::write`], a view **neither
/// waits for GPU work nor locks per access**: every load and store goes
/// straight to the memory the GPU sees, while kernels may be running.
///
/// - Host side: loads and stores are atomic, so any number of host threads
///   may use one view (it is `Send + Sync`) or several views of the same
///   buffer at once. While any view is alive the buffer's host copies
///   (`download`, `write`, `read_range`, ...) fail with
///   [`Error::HostAccessBusy`], since a plain copy beside atomic accesses
///   would be a data race; creating a view waits for copies in progress.
/// - Host → GPU: the memory is host-coherent, so a store is visible to
///   work submitted after it without a flush. A kernel already running
///   sees it eventually, if it reads the word as `coherent` (or with an
///   atomic load at device scope) in a loop; Vulkan gives no bound on how
///   soon.
/// - GPU → host: a word a kernel wrote is visible to a load after the
///   batch's [`Ticket`](crate::Ticket) has been waited on (use
///   `Ordering::Acquire` if other host data depends on it). While the
///   kernel runs, its `coherent` or device-scope atomic writes become
///   visible eventually, again without a bound.
/// - Ordering between words follows the GPU's memory model, not Rust's:
///   a kernel that publishes data and then a flag needs a device-scope
///   release (`memoryBarrierBuffer()` and a `coherent` buffer, or
///   `atomicStore` with release semantics) before writing the flag.
///
/// The view borrows the buffer, so the memory outlives it.
pub struct HostWords<'a> {
    words: &'a [AtomicU32],
    _guard: HostGuard<'a>,
}

impl std::fmt::Debug for HostWords<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostWords")
            .field("len", &self.words.len())
            .finish()
    }
}

impl std::ops::Deref for HostWords<'_> {
    type Target = [AtomicU32];
    fn deref(&self) -> &[AtomicU32] {
        self.words
    }
}

impl Buffer<u32> {
    /// The buffer's memory as atomic words the host reads and writes while
    /// kernels run: no wait for GPU work, no lock per access (see
    /// [`HostWords`] for the contract). Needs mapped, host-coherent memory
    /// ([`Memory::HostVisible`](crate::Memory::HostVisible) always is; other
    /// placements where the adapter maps them): otherwise
    /// [`Error::NotHostMapped`]. While the view lives, host copies of the
    /// buffer are refused with [`Error::HostAccessBusy`].
    pub fn host_words(&self) -> Result<HostWords<'_>> {
        let inner = &*self.inner;
        inner.dev.sticky.check()?;
        let coherent = inner.memory_properties().contains(
            vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT,
        );
        let ptr = match inner.mapped() {
            Some(p) if coherent && p.as_ptr().align_offset(4) == 0 => p,
            _ => {
                return Err(Error::NotHostMapped {
                    what: "host_words",
                    placement: inner.placement,
                })
            }
        };
        let guard = inner.host.acquire(Access::View, "host_words")?;
        // SAFETY: the mapping is 4-byte aligned (checked), covers the
        // buffer's `len()` words, and stays mapped while `self` (borrowed
        // for the view's lifetime) keeps the allocation alive. While the
        // guard lives, host code reaches these bytes only through this and
        // other atomic views (the host lock refuses plain copies), so every
        // host access to them is atomic. `AtomicU32` has the layout of `u32`.
        let words =
            unsafe { std::slice::from_raw_parts(ptr.as_ptr().cast::<AtomicU32>(), self.len()) };
        Ok(HostWords {
            words,
            _guard: guard,
        })
    }
}

const _: fn() = || {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<HostWords<'static>>();
};
