//! Batches held back behind an open batch of their stream (the crate
//! guide's "Ordering") that use a buffer: host access to the buffer waits
//! until their chunks reach the queue (then for the GPU, as for any
//! submitted work), or returns [`Error::BatchHeldOpen`] when the open
//! batch holding them back belongs to the calling thread.
//!
//! [`Error::BatchHeldOpen`]: crate::Error::BatchHeldOpen

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::Result;
use crate::queue::StreamState;

/// The held-back batches that use a buffer: their stream and place.
#[derive(Debug, Default)]
pub(crate) struct HeldUses {
    /// How many entries `on` holds (read without the lock).
    count: AtomicUsize,
    on: Mutex<Vec<(Arc<StreamState>, u64)>>,
}

impl HeldUses {
    fn on(&self) -> std::sync::MutexGuard<'_, Vec<(Arc<StreamState>, u64)>> {
        self.on.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes a chunk of the batch at `place` of `stream`, held back.
    pub(crate) fn add(&self, stream: &Arc<StreamState>, place: u64) {
        let mut on = self.on();
        if !on
            .iter()
            .any(|(s, p)| *p == place && Arc::ptr_eq(s, stream))
        {
            on.push((stream.clone(), place));
        }
        self.count.store(on.len(), Ordering::Release);
    }

    /// The held-back chunks of the batch at `place` of `stream` reached
    /// the queue (the buffer's last use records them).
    pub(crate) fn remove(&self, stream: &Arc<StreamState>, place: u64) {
        let mut on = self.on();
        on.retain(|(s, p)| !(*p == place && Arc::ptr_eq(s, stream)));
        self.count.store(on.len(), Ordering::Release);
    }

    /// Whether a held-back batch uses the buffer.
    pub(crate) fn any(&self) -> bool {
        self.count.load(Ordering::Acquire) > 0
    }

    /// Waits until no held-back batch uses the buffer (one atomic read
    /// when none does); [`crate::Error::BatchHeldOpen`] when one never
    /// could reach its queue while this thread waits.
    pub(crate) fn settle(&self, what: &'static str) -> Result<()> {
        if self.count.load(Ordering::Acquire) == 0 {
            return Ok(());
        }
        let on: Vec<_> = self.on().clone();
        for (s, place) in on {
            s.wait_released(place, what)?;
        }
        Ok(())
    }
}
