//! Written descriptor sets kept across batches (the pooled-descriptor path).
//!
//! Where kernels bind an ordinary descriptor set (no push descriptors),
//! binding different buffers costs a `vkAllocateDescriptorSets` and a
//! `vkUpdateDescriptorSetWithTemplate` before the bind. Programs mostly bind
//! the same buffers to the same kernel batch after batch, so each written set
//! is kept here, keyed by the kernel's set layout and the exact buffer,
//! offset and range of every binding. A later bind of the same buffers to a
//! kernel of that layout binds the written set as it is. Sets are never
//! written again after they enter the cache, so any number of command
//! buffers may bind one at once.
//!
//! An entry names each buffer by the address of its shared state and holds
//! a `Weak` to it: while the entry exists that address cannot be reused, so
//! an equal address is the same buffer. An entry whose buffer was dropped is
//! dead. When the cache is full, dead entries leave it, their sets freed once
//! every submission made so far completes (whatever bound them is among
//! those); if it is still full, the caller writes a per-batch set as before,
//! and the next misses skip the sweep (one scan per `MISSES_PER_SWEEP`
//! misses, not one per miss, while the cache stays full of live entries).
//! [`crate::Device::trim`] empties the cache.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, Weak};

use ash::vk;
use ash::vk::Handle;

use crate::buffer::BufferInner;
use crate::error::{Result, Sticky};
use crate::kernel::MAX_BINDINGS;
use crate::reclaim::{Deferred, UseMark};
use crate::stats::{Counter, Counters};

/// Most sets the cache holds (live and dead).
pub(crate) const CAPACITY: usize = 1024;
/// Misses on a cache full of live entries between two sweeps: a sweep
/// scans every entry (microseconds at capacity), so a program binding more
/// live buffer sets than the cache holds would otherwise pay a scan per
/// miss; this spreads one scan over this many misses (a few nanoseconds
/// each), while a cache that fills with dead entries is still swept at once.
const MISSES_PER_SWEEP: u32 = 256;
/// Sets per descriptor pool of the cache.
const SETS_PER_POOL: u32 = 128;
/// Words of a key: the layout, then (buffer, offset, range) per binding.
pub(crate) const KEY_WORDS: usize = 1 + 3 * MAX_BINDINGS;

/// A multiply-rotate hash over the key's words (they are addresses and
/// offsets: no adversary, and SipHash costs more than the lookup saves).
#[derive(Default)]
pub(crate) struct WordHasher(u64);

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// The key of one binding set: `KEY_WORDS` words, of which the first
/// `1 + 3 * bindings` are used.
pub(crate) struct SetKey {
    words: [u64; KEY_WORDS],
    len: usize,
}

impl SetKey {
    /// The key of `infos` bound through `layout`, the buffers' shared states
    /// given by `owner` (index → the binding's buffer).
    pub(crate) fn new<'o>(
        layout: vk::DescriptorSetLayout,
        infos: &[vk::DescriptorBufferInfo],
        owner: &dyn Fn(usize) -> &'o Arc<BufferInner>,
    ) -> SetKey {
        let mut words = [0u64; KEY_WORDS];
        words[0] = layout.as_raw();
        let n = infos.len().min(MAX_BINDINGS);
        for (i, info) in infos.iter().take(n).enumerate() {
            words[1 + 3 * i] = Arc::as_ptr(owner(i)) as usize as u64;
            words[2 + 3 * i] = info.offset;
            words[3 + 3 * i] = info.range;
        }
        SetKey {
            words,
            len: 1 + 3 * n,
        }
    }

    fn words(&self) -> &[u64] {
        &self.words[..self.len]
    }
}

struct Entry {
    set: vk::DescriptorSet,
    pool: usize,
    buffers: Box<[Weak<BufferInner>]>,
}

impl Entry {
    fn dead(&self) -> bool {
        self.buffers.iter().any(|b| b.strong_count() == 0)
    }
}

/// One descriptor pool of the cache and how many of its sets are allocated.
struct Pool {
    /// Null once destroyed (the slot is reused by the next new pool).
    raw: vk::DescriptorPool,
    sets: u32,
}

#[derive(Default)]
struct State {
    map: HashMap<Box<[u64]>, Entry, BuildHasherDefault<WordHasher>>,
    pools: Vec<Pool>,
    /// Pool to allocate from first.
    current: usize,
    /// Sets of dead entries, freed when their mark passes.
    dead: Deferred<(usize, vk::DescriptorSet)>,
    /// Misses on a full cache left before the next sweep (0: sweep on the
    /// next one); set after a sweep that left the cache full.
    sweep_wait: u32,
}

/// Whether a miss on a full cache sweeps now, given the misses left to
/// wait (`sweep_wait`); returns the wait that follows. A sweep that leaves
/// the cache full restarts the wait ([`after_sweep`]).
fn sweep_now(wait: u32) -> (bool, u32) {
    match wait {
        0 => (true, 0),
        w => (false, w - 1),
    }
}

/// The wait after a sweep that left `len` entries in a cache of `capacity`:
/// none when there is room again (the next fill sweeps at once), else
/// [`MISSES_PER_SWEEP`].
fn after_sweep(len: usize, capacity: usize) -> u32 {
    if len >= capacity {
        MISSES_PER_SWEEP
    } else {
        0
    }
}

/// The cache of one device.
pub(crate) struct SetCache {
    state: Mutex<State>,
}

impl SetCache {
    /// An empty cache.
    pub(crate) fn new() -> Self {
        SetCache {
            state: Mutex::new(State::default()),
        }
    }

    /// A set of `layout` holding `infos` (packed as `template` expects):
    /// the cached one for `key`, or a new one written and cached. `None`
    /// when the cache is full of live entries: the caller writes a
    /// set of its own. `owner` gives each binding's buffer, as for the key;
    /// `submitted` and `completed` give the queues' submitted and completed
    /// values (which mark when dead sets may be freed).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn get_or_write<'o>(
        &self,
        device: &ash::Device,
        sticky: &Sticky,
        counters: &Counters,
        key: &SetKey,
        template: vk::DescriptorUpdateTemplate,
        infos: &[vk::DescriptorBufferInfo],
        owner: &dyn Fn(usize) -> &'o Arc<BufferInner>,
        submitted: &dyn Fn() -> UseMark,
        completed: &dyn Fn() -> UseMark,
    ) -> Result<Option<vk::DescriptorSet>> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = s.map.get(key.words()) {
            return Ok(Some(e.set));
        }
        if s.map.len() >= CAPACITY {
            let (sweep, wait) = sweep_now(s.sweep_wait);
            s.sweep_wait = wait;
            if !sweep {
                return Ok(None);
            }
            s.sweep(device, counters, submitted, completed);
            s.sweep_wait = after_sweep(s.map.len(), CAPACITY);
            if s.map.len() >= CAPACITY {
                return Ok(None);
            }
        }
        let layout = vk::DescriptorSetLayout::from_raw(key.words[0]);
        let (pool, set) = s.allocate(device, sticky, counters, layout)?;
        // SAFETY: `set` is fresh, not bound anywhere; `infos` holds one valid
        // descriptor per binding of the layout `template` was made for.
        unsafe {
            device.update_descriptor_set_with_template(
                set,
                template,
                infos.as_ptr().cast::<std::ffi::c_void>(),
            )
        };
        let buffers = (0..infos.len()).map(|i| Arc::downgrade(owner(i))).collect();
        s.map
            .insert(key.words().into(), Entry { set, pool, buffers });
        counters.add(Counter::CachedSets, 1);
        Ok(Some(set))
    }

    /// Frees the sets of dead entries whose submissions completed, and
    /// destroys pools left empty. A batch still recording binds only sets
    /// of live buffers (it holds them), so it is unaffected; work another
    /// thread submitted meanwhile keeps its sets until it completes.
    pub(crate) fn trim(
        &self,
        device: &ash::Device,
        counters: &Counters,
        submitted: &dyn Fn() -> UseMark,
        completed: &dyn Fn() -> UseMark,
    ) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.sweep(device, counters, submitted, completed);
        s.sweep_wait = 0;
        for p in s
            .pools
            .iter_mut()
            .filter(|p| p.sets == 0 && p.raw != vk::DescriptorPool::null())
        {
            // SAFETY: no set of the pool is allocated, so nothing uses it.
            unsafe { device.destroy_descriptor_pool(p.raw, None) };
            p.raw = vk::DescriptorPool::null();
            counters.add(Counter::SetCachePools, -1);
        }
    }

    /// Destroys every pool (freeing every set).
    ///
    /// # Safety
    /// Nothing recorded with a cached set may be pending or recording: the
    /// device is being dropped, after waiting for idle.
    pub(crate) unsafe fn destroy(&self, device: &ash::Device, counters: &Counters) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let sets = s.map.len() + s.dead.len();
        s.map.clear();
        s.dead.take_all();
        for p in s.pools.drain(..) {
            if p.raw != vk::DescriptorPool::null() {
                // SAFETY: guaranteed by the caller; destroying the pool frees its sets.
                unsafe { device.destroy_descriptor_pool(p.raw, None) };
                counters.add(Counter::SetCachePools, -1);
            }
        }
        counters.add(Counter::CachedSets, -(sets as i64));
    }
}

impl State {
    /// Moves dead entries to the deferred list and frees what passed.
    fn sweep(
        &mut self,
        device: &ash::Device,
        counters: &Counters,
        submitted: &dyn Fn() -> UseMark,
        completed: &dyn Fn() -> UseMark,
    ) {
        let mut dead = Vec::new();
        self.map.retain(|_, e| {
            let d = e.dead();
            if d {
                dead.push((e.pool, e.set));
            }
            !d
        });
        // Read after the scan: a submission that bound one of these sets
        // happened before its buffer was dropped (the batch held it until
        // then), so it is counted here.
        let mark = submitted();
        for item in dead {
            self.dead.push(mark, item);
        }
        let ready = self.dead.take_ready(completed());
        for (pool, set) in ready {
            let p = &mut self.pools[pool];
            // SAFETY: every submission that could have bound `set` completed
            // (its mark passed); the pool is ours, guarded by the lock.
            let _ = unsafe { device.free_descriptor_sets(p.raw, &[set]) };
            p.sets -= 1;
            counters.add(Counter::CachedSets, -1);
        }
    }

    /// A fresh set of `layout` from the cache's pools.
    fn allocate(
        &mut self,
        device: &ash::Device,
        sticky: &Sticky,
        counters: &Counters,
        layout: vk::DescriptorSetLayout,
    ) -> Result<(usize, vk::DescriptorSet)> {
        let layouts = [layout];
        let n = self.pools.len();
        for tried in 0..n {
            let i = (self.current + tried) % n;
            let p = &mut self.pools[i];
            if p.raw == vk::DescriptorPool::null() || p.sets == SETS_PER_POOL {
                continue;
            }
            let info = vk::DescriptorSetAllocateInfo::default()
                .descriptor_pool(p.raw)
                .set_layouts(&layouts);
            // SAFETY: the pool is ours, guarded by the lock.
            match unsafe { device.allocate_descriptor_sets(&info) } {
                Ok(sets) => {
                    p.sets += 1;
                    self.current = i;
                    return Ok((i, sets[0]));
                }
                Err(vk::Result::ERROR_OUT_OF_POOL_MEMORY | vk::Result::ERROR_FRAGMENTED_POOL) => {}
                Err(r) => return Err(sticky.fail("vkAllocateDescriptorSets", r)),
            }
        }
        let per_type = SETS_PER_POOL * MAX_BINDINGS as u32;
        let sizes = [
            vk::DescriptorPoolSize {
                ty: vk::DescriptorType::STORAGE_BUFFER,
                descriptor_count: per_type,
            },
            vk::DescriptorPoolSize {
                ty: vk::DescriptorType::UNIFORM_BUFFER,
                descriptor_count: per_type,
            },
        ];
        let info = vk::DescriptorPoolCreateInfo::default()
            .flags(vk::DescriptorPoolCreateFlags::FREE_DESCRIPTOR_SET)
            .max_sets(SETS_PER_POOL)
            .pool_sizes(&sizes);
        // SAFETY: plain creation on a live device.
        let raw = unsafe { device.create_descriptor_pool(&info, None) }
            .map_err(|r| sticky.fail("vkCreateDescriptorPool", r))?;
        counters.add(Counter::SetCachePools, 1);
        let slot = Pool { raw, sets: 0 };
        let i = match self
            .pools
            .iter()
            .position(|p| p.raw == vk::DescriptorPool::null())
        {
            Some(i) => {
                self.pools[i] = slot;
                i
            }
            None => {
                self.pools.push(slot);
                self.pools.len() - 1
            }
        };
        self.current = i;
        let info = vk::DescriptorSetAllocateInfo::default()
            .descriptor_pool(raw)
            .set_layouts(&layouts);
        // SAFETY: as above.
        let sets = unsafe { device.allocate_descriptor_sets(&info) }
            .map_err(|r| sticky.fail("vkAllocateDescriptorSets", r))?;
        self.pools[i].sets += 1;
        Ok((i, sets[0]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::Hash;

    fn hash(words: &[u64]) -> u64 {
        let mut h = WordHasher::default();
        words.hash(&mut h);
        h.finish()
    }

    #[test]
    fn a_full_cache_sweeps_once_per_interval_of_misses() {
        // A sweep that leaves the cache full: the next MISSES_PER_SWEEP
        // misses skip it, the one after sweeps.
        let mut wait = after_sweep(CAPACITY, CAPACITY);
        let mut skipped = 0;
        loop {
            let (sweep, w) = sweep_now(wait);
            wait = w;
            if sweep {
                break;
            }
            skipped += 1;
        }
        assert_eq!(skipped, MISSES_PER_SWEEP);
        // A sweep that made room: the next time the cache is full, the
        // first miss sweeps.
        assert_eq!(after_sweep(CAPACITY - 1, CAPACITY), 0);
        assert!(sweep_now(after_sweep(CAPACITY - 1, CAPACITY)).0);
    }

    #[test]
    fn hasher_separates_nearby_keys() {
        let a = hash(&[7, 0x1000, 0, 4096]);
        let b = hash(&[7, 0x1000, 256, 4096]);
        let c = hash(&[7, 0x1000, 0, 4096, 0x2000, 0, 64]);
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_eq!(a, hash(&[7, 0x1000, 0, 4096]));
    }
}
