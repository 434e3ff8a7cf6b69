//! Written descriptor sets kept across batches (the pooled-descriptor path).
//!
//! Where kernels bind an ordinary descriptor set (no push descriptors),
//! binding different buffers costs a `vkAllocateDescriptorSets` and a
//! `vkUpdateDescriptorSetWithTemplate` before the bind. Programs mostly bind
//! the same buffers to the same kernel batch after batch, so each written set
//! is kept here, keyed by the kernel's layout class ([`crate::layout_class`]:
//! set layouts identically defined) and the exact buffer, offset and range
//! of every binding. A later bind of the same buffers to a kernel of that
//! class binds the written set as it is (Vulkan accepts a set allocated
//! with a set layout identically defined to the pipeline layout's). Sets are never
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

use std::any::Any;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, Weak};

use ash::vk;

use crate::error::{Result, Sticky};
use crate::reclaim::{Deferred, UseMark};
use crate::recorder::allocate_one_set;
use crate::reflect::MAX_BINDINGS;
use crate::stats::{Counter, Counters};

/// Most sets the cache holds (live and dead).
pub(crate) const CAPACITY: usize = 1024;
/// Misses on a cache full of live entries between two sweeps: a sweep
/// scans every entry (microseconds at capacity), so a program binding more
/// live buffer sets than the cache holds would otherwise pay a scan per
/// miss; this spreads one scan over this many misses (as many as there
/// are entries: a few nanoseconds each, where 256 left ~20 ns per miss on
/// lavapipe's host), while a cache that fills with dead entries is still
/// swept at once.
const MISSES_PER_SWEEP: u32 = CAPACITY as u32;
/// Sets per descriptor pool of the cache.
const SETS_PER_POOL: u32 = 128;

/// Hashes a binding set's words (its layout, then the buffer's shared-state
/// address, offset and range per binding) with a multiply-rotate step and
/// a final avalanche (they are addresses and offsets: no adversary, and
/// SipHash costs more than the lookup saves). The map is keyed by this
/// hash alone; an entry keeps its binding set to compare, so two sets of
/// one hash never share a descriptor set (the second gets a set of its
/// caller's own).
#[derive(Default, Clone, Copy)]
pub(crate) struct KeyHash(u64);

impl KeyHash {
    fn word(self, v: u64) -> KeyHash {
        KeyHash((self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95))
    }

    /// The hash of `infos` bound through a layout of `class`, the
    /// addresses of the buffers' shared states in `owners` (one per
    /// binding).
    pub(crate) fn of(class: u32, infos: &[vk::DescriptorBufferInfo], owners: &[usize]) -> u64 {
        let mut h = KeyHash::default().word(u64::from(class));
        for (info, &owner) in infos.iter().zip(owners) {
            h = h.word(owner as u64).word(info.offset).word(info.range);
        }
        h.finish()
    }

    /// The final hash. The last step's multiply leaves the low bits (the
    /// map's bucket index) depending on the low bits of the input alone:
    /// the high bits are folded in.
    fn finish(self) -> u64 {
        let x = self.0 ^ (self.0 >> 32);
        (x ^ (x >> 17)).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (x >> 29)
    }
}

/// The map's hasher: the key already is a hash.
#[derive(Default)]
struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only u64 keys are hashed; any other input still hashes.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// One binding of a cached set: the buffer's shared state, type-erased
/// (its address cannot be reused while this `Weak` exists; the cache only
/// compares addresses and checks liveness), offset and range.
struct Bound {
    buffer: Weak<dyn Any + Send + Sync>,
    offset: u64,
    range: u64,
}

struct Entry {
    set: vk::DescriptorSet,
    pool: usize,
    /// The layout class it was written for.
    class: u32,
    bindings: Box<[Bound]>,
}

impl Entry {
    fn dead(&self) -> bool {
        self.bindings.iter().any(|b| b.buffer.strong_count() == 0)
    }

    /// Whether this entry holds exactly `infos` through a layout of
    /// `class`, over the buffers whose shared states are at `owners`.
    fn holds(&self, class: u32, infos: &[vk::DescriptorBufferInfo], owners: &[usize]) -> bool {
        self.class == class
            && self.bindings.len() == infos.len()
            && self
                .bindings
                .iter()
                .zip(infos)
                .zip(owners)
                .all(|((b, info), &owner)| {
                    b.buffer.as_ptr().cast::<()>() as usize == owner
                        && b.offset == info.offset
                        && b.range == info.range
                })
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
    map: HashMap<u64, Entry, BuildHasherDefault<IdentityHasher>>,
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

    /// A set for layouts of `class` holding `infos` (packed as `template`
    /// expects): the cached one, or a new one of `layout` (of that class)
    /// written and cached. `None` when the
    /// cache is full of live entries (or, rarely, holds another binding set
    /// of the same hash): the caller writes a set of its own. `owners`
    /// holds the address of each binding's buffer (`Arc::as_ptr`), which
    /// `owner` gives (asked only for a set written); `submitted` and `completed` give the queues'
    /// submitted and completed values (which mark when dead sets may be
    /// freed).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn get_or_write<'o, T: Any + Send + Sync>(
        &self,
        device: &ash::Device,
        sticky: &Sticky,
        counters: &Counters,
        class: u32,
        layout: vk::DescriptorSetLayout,
        template: vk::DescriptorUpdateTemplate,
        infos: &[vk::DescriptorBufferInfo],
        owners: &[usize],
        owner: &dyn Fn(usize) -> &'o Arc<T>,
        submitted: &dyn Fn() -> UseMark,
        completed: &dyn Fn() -> UseMark,
    ) -> Result<Option<vk::DescriptorSet>> {
        let hash = KeyHash::of(class, infos, owners);
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = s.map.get(&hash) {
            return Ok(e.holds(class, infos, owners).then_some(e.set));
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
        let bindings = infos
            .iter()
            .enumerate()
            .map(|(i, info)| Bound {
                buffer: Arc::downgrade(owner(i)) as Weak<dyn Any + Send + Sync>,
                offset: info.offset,
                range: info.range,
            })
            .collect();
        s.map.insert(
            hash,
            Entry {
                set,
                pool,
                class,
                bindings,
            },
        );
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
        let n = self.pools.len();
        for tried in 0..n {
            let i = (self.current + tried) % n;
            let p = &mut self.pools[i];
            if p.raw == vk::DescriptorPool::null() || p.sets == SETS_PER_POOL {
                continue;
            }
            // SAFETY: the pool is ours, guarded by the lock; the layout is
            // a live kernel's.
            match unsafe { allocate_one_set(device, p.raw, layout) } {
                Ok(set) => {
                    p.sets += 1;
                    self.current = i;
                    return Ok((i, set));
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
        // SAFETY: as above.
        let set = unsafe { allocate_one_set(device, raw, layout) }
            .map_err(|r| sticky.fail("vkAllocateDescriptorSets", r))?;
        self.pools[i].sets += 1;
        Ok((i, set))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn hashes_separate_nearby_binding_sets_and_spread_low_bits() {
        let (class, other) = (7u64, 8u64);
        // Addresses stand in for buffers: the words `of` hashes.
        let h = |class: u64, words: &[(u64, u64, u64)]| {
            let mut k = KeyHash::default().word(class);
            for &(a, o, r) in words {
                k = k.word(a).word(o).word(r);
            }
            k.finish()
        };
        let a = h(class, &[(0x1000, 0, 4096)]);
        assert_ne!(a, h(class, &[(0x1000, 256, 4096)]));
        assert_ne!(a, h(other, &[(0x1000, 0, 4096)]));
        assert_ne!(a, h(class, &[(0x1000, 0, 4096), (0x2000, 0, 64)]));
        assert_eq!(a, h(class, &[(0x1000, 0, 4096)]));
        // Buffers 256 bytes apart land in many different low-bit buckets.
        let mut buckets: Vec<u64> = (0..1024u64)
            .map(|i| h(class, &[(0x10_0000 + 256 * i, 0, 4096)]) & 1023)
            .collect();
        buckets.sort_unstable();
        buckets.dedup();
        assert!(buckets.len() > 512, "{} buckets of 1024", buckets.len());
    }
}
