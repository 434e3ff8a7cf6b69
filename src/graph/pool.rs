//! Capture pools: what keeps a recorded graph's buffers and kernels alive.
//!
//! Every graph holds the buffers and kernels its commands use, so users may
//! drop their handles. A [`CapturePool`] additionally collects them across
//! recordings: a recording started with
//! [`Device::graph_recorder_in`](crate::Device::graph_recorder_in)
//! registers everything it used in the pool, and every graph made from such
//! a recording holds the pool. Buffers in a pool (intermediates shared by
//! several graphs, or ones added with [`CapturePool::keep`]) live until the
//! pool's last holder, graph or user, drops it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use bytemuck::Pod;

use crate::buffer::{Buffer, BufferInner};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::pipeline_cache::KernelCore;

/// Objects held, each once.
struct Set<T> {
    items: Vec<Arc<T>>,
    seen: HashSet<usize>,
}

impl<T> Default for Set<T> {
    fn default() -> Self {
        Set {
            items: Vec::new(),
            seen: HashSet::new(),
        }
    }
}

impl<T> Set<T> {
    /// Adds each of `new` not already held (by identity).
    fn merge(&mut self, new: &[Arc<T>]) {
        for n in new {
            if self.seen.insert(Arc::as_ptr(n) as *const () as usize) {
                self.items.push(n.clone());
            }
        }
    }
}

#[derive(Default)]
struct Held {
    buffers: Set<BufferInner>,
    kernels: Set<KernelCore>,
}

/// A set of buffers and kernels kept alive for the graphs that share it.
/// Made by [`CapturePool::new`] (an `Arc`: clone it to share). `Send + Sync`.
pub struct CapturePool {
    device_id: u64,
    held: Mutex<Held>,
}

impl std::fmt::Debug for CapturePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapturePool")
            .field("buffers", &self.buffer_count())
            .field("kernels", &self.kernel_count())
            .finish()
    }
}

impl CapturePool {
    /// An empty pool for recordings on `gpu`.
    pub fn new(gpu: &Device) -> Arc<CapturePool> {
        Arc::new(CapturePool {
            device_id: gpu.inner.id,
            held: Mutex::new(Held::default()),
        })
    }

    /// Distinct buffers the pool keeps alive.
    pub fn buffer_count(&self) -> usize {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .buffers
            .items
            .len()
    }

    /// Distinct kernels the pool keeps alive.
    pub fn kernel_count(&self) -> usize {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .kernels
            .items
            .len()
    }

    /// Keeps `buffer` alive as long as the pool (a buffer of another device
    /// is [`Error::ForeignObject`]).
    pub fn keep<T: Pod>(&self, buffer: &Buffer<T>) -> Result<()> {
        self.check_device(buffer.inner.dev.id)?;
        self.register(std::slice::from_ref(&buffer.inner), &[]);
        Ok(())
    }

    pub(crate) fn check_device(&self, id: u64) -> Result<()> {
        if id != self.device_id {
            return Err(Error::ForeignObject {
                what: "the capture pool (or a buffer added to it)",
            });
        }
        Ok(())
    }

    /// Adds what a recording used.
    pub(crate) fn register(&self, buffers: &[Arc<BufferInner>], kernels: &[Arc<KernelCore>]) {
        let mut h = self.held.lock().unwrap_or_else(|p| p.into_inner());
        h.buffers.merge(buffers);
        h.kernels.merge(kernels);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_adds_each_once() {
        let (a, b, c) = (Arc::new(0), Arc::new(0), Arc::new(0));
        let mut held = Set::default();
        held.merge(std::slice::from_ref(&a));
        held.merge(&[a.clone(), b.clone(), b.clone()]);
        held.merge(&[c.clone(), a.clone()]);
        assert_eq!(held.items.len(), 3);
    }
}
