//! Poisoning: a batch whose recording failed half-way records nothing more.
//!
//! Recording keeps state between commands (the bound pipeline and
//! descriptors, the open chunk, barrier tracking) so that it can skip what
//! is already in place. A command that fails after it started recording (a
//! descriptor set that could not be allocated, a copy whose second piece
//! fails after the first was recorded and the copy pipeline bound, a chunk
//! that failed to end or submit) leaves that state describing something
//! other than the command buffer. Rather than restore it piece by piece,
//! the batch is poisoned: every later call that returns a `Result` returns
//! the original error, the open chunk is never submitted, and dropping the
//! batch discards it (chunks submitted before still complete).
//!
//! Checks that refuse a command before it records anything (binding
//! counts, sizes, alignment, foreign buffers) do not poison: the batch
//! stays usable, and a refused binding resets the "already bound" state so
//! the next dispatch binds again.

use ash::vk;

use super::Batch;
use crate::error::{Error, Result};

impl Batch {
    /// `Err` when the device is lost or the batch is poisoned (one load and
    /// one null check on the hot path).
    #[inline(always)]
    pub(super) fn usable(&self) -> Result<()> {
        self.dev.sticky.check()?;
        match &self.poisoned {
            None => Ok(()),
            Some(e) => Err(poisoned_error(e)),
        }
    }

    /// Poisons the batch with `e` (the first error wins) and returns `e`.
    #[cold]
    #[inline(never)]
    pub(super) fn poison(&mut self, e: Error) -> Error {
        if self.poisoned.is_none() {
            self.poisoned = Some(Box::new(e.clone()));
        }
        // Nothing recorded into the open chunk may be trusted or submitted;
        // `bound = 0` also keeps any later path from skipping a bind.
        self.bound = 0;
        e
    }

    /// The error that poisoned this batch, if one did: every later call
    /// returns it, and nothing more is recorded or submitted. `None` while
    /// the batch is usable.
    pub fn poisoned(&self) -> Option<&Error> {
        self.poisoned.as_deref()
    }

    /// Test hook: the descriptor bind after the next `after` ones fails as
    /// a pool allocation failure would (`vkAllocateDescriptorSets` returning
    /// `VK_ERROR_OUT_OF_POOL_MEMORY`), poisoning the batch. Binds happen when
    /// a dispatch's bindings, or its kernel's layout class, differ from the
    /// previous dispatch's, and once per piece of a kernel copy. Not part of
    /// the stable API.
    #[doc(hidden)]
    pub fn inject_bind_failure(&mut self, after: u32) {
        self.fault = after.saturating_add(1);
    }

    /// Counts a descriptor bind against [`Batch::inject_bind_failure`].
    #[inline(always)]
    pub(super) fn fault_point(&mut self) -> Result<()> {
        if self.fault == 0 {
            return Ok(());
        }
        self.fault_tick()
    }

    #[cold]
    #[inline(never)]
    fn fault_tick(&mut self) -> Result<()> {
        self.fault -= 1;
        if self.fault > 0 {
            return Ok(());
        }
        Err(self.poison(Error::Vulkan {
            call: "vkAllocateDescriptorSets (injected)",
            result: vk::Result::ERROR_OUT_OF_POOL_MEMORY,
        }))
    }
}

/// The error a poisoned batch returns: the original one.
#[cold]
#[inline(never)]
fn poisoned_error(e: &Error) -> Error {
    e.clone()
}
