//! Counts of live Vulkan objects and memory, for leak checks.
//!
//! Every site that creates or destroys a Vulkan object the crate owns bumps
//! one of these counters, so [`Device::stats`](crate::Device::stats) can show
//! that a workload left nothing behind.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// A snapshot of what a [`Device`](crate::Device) holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Live `VkBuffer`s made for users (not staging).
    pub buffers: i64,
    /// Live staging buffers in the reuse pool.
    pub staging_buffers: i64,
    /// Live memory allocations (user and staging buffers).
    pub allocations: i64,
    /// Bytes of user buffers alive.
    pub buffer_bytes: u64,
    /// Live compute pipelines (one per distinct kernel, plus the variants
    /// launches split along x run; cached until the device drops).
    pub pipelines: i64,
    /// Live command pools (one per recorder).
    pub command_pools: i64,
    /// Live command buffers.
    pub command_buffers: i64,
    /// Live descriptor pools (only on the pooled-descriptor fallback).
    pub descriptor_pools: i64,
    /// Descriptor sets kept written across batches, at most 1024
    /// (pooled-descriptor adapters; those of dropped buffers are freed when
    /// the cache fills up and by [`Device::trim`](crate::Device::trim)).
    pub cached_descriptor_sets: i64,
    /// Descriptor pools holding those sets.
    pub set_cache_pools: i64,
    /// Live query pools (profiling).
    pub query_pools: i64,
    /// Live semaphores (one timeline per queue).
    pub semaphores: i64,
    /// Objects waiting for in-flight work before being released.
    pub deferred: i64,
    /// Bytes the allocator has handed out.
    pub allocator_used_bytes: u64,
    /// Bytes of device memory blocks the allocator holds.
    pub allocator_reserved_bytes: u64,
    /// Submissions made so far (all queues).
    pub submissions: u64,
    /// Bytes of device-local memory bound to live buffers (user and
    /// staging, as allocated: sizes rounded up to the driver's alignment).
    /// Memory of a dropped buffer counts until it is freed, after the
    /// work that used it completes.
    pub device_bytes: u64,
    /// The most [`Stats::device_bytes`] reached since the device was
    /// created or since [`Device::reset_peak_memory`](crate::Device::reset_peak_memory):
    /// a true peak, updated at every allocation, not a sample.
    pub peak_device_bytes: u64,
}

/// Where a [`Device`](crate::Device)'s creation spent its time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StartupTimes {
    /// Opening the Vulkan loader and creating the instance (loads drivers
    /// and layers on first use in a process).
    pub instance: std::time::Duration,
    /// Enumerating adapters and reading their properties.
    pub probe: std::time::Duration,
    /// `vkCreateDevice`.
    pub create_device: std::time::Duration,
    /// The allocator, queues, and the pipeline cache (read from disk).
    pub rest: std::time::Duration,
}

/// Which counter to move.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Counter {
    Buffers,
    StagingBuffers,
    Allocations,
    Pipelines,
    CommandPools,
    CommandBuffers,
    DescriptorPools,
    QueryPools,
    Semaphores,
    CachedSets,
    SetCachePools,
}

/// The live counters.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    values: [AtomicI64; 11],
    pub(crate) buffer_bytes: AtomicU64,
    pub(crate) submissions: AtomicU64,
    device_bytes: AtomicU64,
    peak_device_bytes: AtomicU64,
}

impl Counters {
    pub(crate) fn add(&self, c: Counter, n: i64) {
        self.values[c as usize].fetch_add(n, Ordering::Relaxed);
    }
    /// Counts `n` more bytes of device-local memory and raises the peak.
    pub(crate) fn device_alloc(&self, n: u64) {
        let now = self.device_bytes.fetch_add(n, Ordering::Relaxed) + n;
        self.peak_device_bytes.fetch_max(now, Ordering::Relaxed);
    }
    /// Counts `n` bytes of device-local memory freed.
    pub(crate) fn device_free(&self, n: u64) {
        self.device_bytes.fetch_sub(n, Ordering::Relaxed);
    }
    /// Starts a new peak at the current use.
    pub(crate) fn reset_peak(&self) {
        let now = self.device_bytes.load(Ordering::Relaxed);
        self.peak_device_bytes.store(now, Ordering::Relaxed);
        // An allocation between the load and the store raised the use
        // past `now`: take it into the new peak.
        self.peak_device_bytes
            .fetch_max(self.device_bytes.load(Ordering::Relaxed), Ordering::Relaxed);
    }
    pub(crate) fn get(&self, c: Counter) -> i64 {
        self.values[c as usize].load(Ordering::Relaxed)
    }
    pub(crate) fn snapshot(&self) -> Stats {
        use Counter::*;
        Stats {
            buffers: self.get(Buffers),
            staging_buffers: self.get(StagingBuffers),
            allocations: self.get(Allocations),
            buffer_bytes: self.buffer_bytes.load(Ordering::Relaxed),
            pipelines: self.get(Pipelines),
            command_pools: self.get(CommandPools),
            command_buffers: self.get(CommandBuffers),
            descriptor_pools: self.get(DescriptorPools),
            cached_descriptor_sets: self.get(CachedSets),
            set_cache_pools: self.get(SetCachePools),
            query_pools: self.get(QueryPools),
            semaphores: self.get(Semaphores),
            submissions: self.submissions.load(Ordering::Relaxed),
            device_bytes: self.device_bytes.load(Ordering::Relaxed),
            peak_device_bytes: self.peak_device_bytes.load(Ordering::Relaxed),
            ..Stats::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_round_trip() {
        let c = Counters::default();
        c.add(Counter::Buffers, 3);
        c.add(Counter::Buffers, -1);
        c.add(Counter::Semaphores, 2);
        let s = c.snapshot();
        assert_eq!(s.buffers, 2);
        assert_eq!(s.semaphores, 2);
        assert_eq!(s.pipelines, 0);
    }
}
