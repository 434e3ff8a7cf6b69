//! Soak: 8 threads share one device and submit random batches (dispatches
//! of three small kernels, copies, fills and barriers, over whole buffers
//! and aligned slices, submitted with `submit` or `submit_async`, tickets
//! kept in a small ring and waited or dropped at random); every result is
//! checked against a CPU model, and the device's object counts and
//! allocator usage ([`Device::stats`]) are identical before (after a
//! warm-up round and a trim) and after (after `wait_idle` and a trim).
//!
//! `VKCOMPUTE_SOAK_BATCHES` sets the number of batches, in total across the
//! threads (default 20,000: about 8 s in a debug build on two cores on
//! lavapipe, with validation and synchronization validation on; CI runs
//! the default).
//! `VKCOMPUTE_SOAK_SEED` changes the random mix. The million-batch run on
//! the GPU machine:
//!
//! ```sh
//! VKCOMPUTE_SOAK_BATCHES=1000000 VKCOMPUTE_DEVICE=NVIDIA \
//!     cargo test --release --test soak -- --nocapture
//! ```
//!
//! (validation stays on there too, through `tests/common`; it is the
//! slowest part of each batch.)
//!
//! Each thread owns two sets of three buffers and alternates between them:
//! batch `i` writes only set `i % 2` (and may read both), so batch `i - 1`'s
//! results are checked while batch `i` may still run. Within a batch, a
//! barrier separates every command from an earlier one it depends on
//! (read after write, write after read or write on the same buffer); other
//! commands may overlap, and a few more barriers are added at random.

mod common;
use common::*;

use std::collections::VecDeque;
use std::time::Instant;

use vkcompute::{Batch, Buffer, Device, GpuBuf, Kernel, Memory, Stats, Ticket};

const THREADS: usize = 8;
/// Batches in total when `VKCOMPUTE_SOAK_BATCHES` is not set.
const DEFAULT_BATCHES: u64 = 20_000;
/// Warm-up batches per thread (every command kind, both submit forms).
const WARM_UP: u64 = 24;
/// Elements per buffer.
const LEN: usize = 256;
/// Buffers per set; each thread has two sets.
const PER_SET: usize = 3;
/// Tickets kept in flight per thread.
const RING: usize = 4;

/// z = x + y, over n elements.
const ADD: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer X { uint x[]; };
layout(set = 0, binding = 1) readonly buffer Y { uint y[]; };
layout(set = 0, binding = 2) writeonly buffer Z { uint z[]; };
layout(push_constant) uniform P { uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) z[i] = x[i] + y[i];
}
"#;

/// y = y * a + b, in place, over n elements.
const AXPB: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer Y { uint y[]; };
layout(push_constant) uniform P { uint a; uint b; uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) y[i] = y[i] * a + b;
}
"#;

/// y ^= rotl(x, 5) + k, over n elements (workgroups of 32).
const MIX: &str = r#"
#version 450
layout(local_size_x = 32) in;
layout(set = 0, binding = 0) readonly buffer X { uint x[]; };
layout(set = 0, binding = 1) buffer Y { uint y[]; };
layout(push_constant) uniform P { uint k; uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) {
        uint v = x[i];
        y[i] ^= ((v << 5) | (v >> 27)) + k;
    }
}
"#;

struct Kernels {
    add: Kernel,
    axpb: Kernel,
    mix: Kernel,
}

/// Figures one thread reports.
#[derive(Default, Debug, Clone, Copy)]
struct Tally {
    batches: u64,
    commands: u64,
    barriers: u64,
    async_submits: u64,
    tickets_waited: u64,
    tickets_dropped: u64,
    elements_checked: u64,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.batches += o.batches;
        self.commands += o.commands;
        self.barriers += o.barriers;
        self.async_submits += o.async_submits;
        self.tickets_waited += o.tickets_waited;
        self.tickets_dropped += o.tickets_dropped;
        self.elements_checked += o.elements_checked;
    }
}

/// Which buffers the commands since the last barrier read and wrote.
#[derive(Default)]
struct Hazards {
    read: u32,
    written: u32,
}

/// One thread's state: its buffers and their CPU model.
struct Worker<'a> {
    gpu: &'a Device,
    k: &'a Kernels,
    rng: Rng,
    bufs: Vec<Buffer<u32>>,
    model: Vec<Vec<u32>>,
    align: usize,
    tally: Tally,
}

impl<'a> Worker<'a> {
    fn new(gpu: &'a Device, k: &'a Kernels, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let mut bufs = Vec::new();
        let mut model = Vec::new();
        for i in 0..2 * PER_SET {
            let data: Vec<u32> = (0..LEN).map(|_| rng.next_u64() as u32).collect();
            // One buffer per set in host-visible memory, the rest device-local.
            let memory = if i % PER_SET == 2 {
                Memory::HostVisible
            } else {
                Memory::DeviceLocal
            };
            bufs.push(gpu.upload_with(&data, memory).unwrap());
            model.push(data);
        }
        let align = (gpu.info().min_storage_buffer_offset_alignment as usize / 4).max(1);
        Worker {
            gpu,
            k,
            rng,
            bufs,
            model,
            align,
            tally: Tally::default(),
        }
    }

    /// An aligned start for a dispatch binding of `n` elements.
    fn bind_start(&mut self, n: usize) -> usize {
        let slots = (LEN - n) / self.align + 1;
        self.rng.below(slots as u64) as usize * self.align
    }

    /// A length for a dispatch: mostly short, sometimes whole buffers.
    fn length(&mut self) -> usize {
        match self.rng.below(4) {
            0 => LEN,
            _ => 1 + self.rng.below(LEN as u64) as usize,
        }
    }

    /// Binds `n` elements of buffer `b` at `start`: the whole buffer when
    /// that is what it covers, else a slice.
    fn view(&self, b: usize, start: usize, n: usize) -> Box<dyn GpuBuf + '_> {
        if start == 0 && n == LEN {
            Box::new(self.bufs[b].clone())
        } else {
            Box::new(self.bufs[b].slice(start..start + n).unwrap())
        }
    }

    /// Records a barrier first if the command reading `r` and writing `w`
    /// depends on an earlier one since the last barrier.
    fn order(&mut self, batch: &mut Batch, h: &mut Hazards, r: u32, w: u32) {
        let depends = (r | w) & h.written != 0 || w & h.read != 0;
        if depends || self.rng.below(16) == 0 {
            batch.barrier();
            self.tally.barriers += 1;
            *h = Hazards::default();
        }
        h.read |= r;
        h.written |= w;
    }

    /// Records one random command writing a buffer of `set`; returns the
    /// buffer written.
    fn command(&mut self, batch: &mut Batch, h: &mut Hazards, set: usize) -> usize {
        let dst = set * PER_SET + self.rng.below(PER_SET as u64) as usize;
        let any = |rng: &mut Rng| rng.below(2 * PER_SET as u64) as usize;
        match self.rng.below(5) {
            0 => {
                // z = x + y, sources other than the destination.
                let (mut x, mut y) = (any(&mut self.rng), any(&mut self.rng));
                while x == dst {
                    x = any(&mut self.rng);
                }
                while y == dst {
                    y = any(&mut self.rng);
                }
                let n = self.length();
                let (sx, sy, sz) = (self.bind_start(n), self.bind_start(n), self.bind_start(n));
                self.order(batch, h, 1 << x | 1 << y, 1 << dst);
                let (vx, vy, vz) = (
                    self.view(x, sx, n),
                    self.view(y, sy, n),
                    self.view(dst, sz, n),
                );
                batch
                    .run_with_push_constants(
                        &self.k.add,
                        &[&*vx, &*vy, &*vz],
                        n as u32,
                        &(n as u32).to_le_bytes(),
                    )
                    .unwrap();
                drop((vx, vy, vz));
                for i in 0..n {
                    self.model[dst][sz + i] =
                        self.model[x][sx + i].wrapping_add(self.model[y][sy + i]);
                }
            }
            1 => {
                // y = y * a + b in place.
                let n = self.length();
                let s = self.bind_start(n);
                let (a, b) = (self.rng.next_u64() as u32 | 1, self.rng.next_u64() as u32);
                self.order(batch, h, 1 << dst, 1 << dst);
                let explicit_grid = self.rng.below(4) == 0;
                let v = self.view(dst, s, n);
                let pc: Vec<u8> = [a, b, n as u32]
                    .iter()
                    .flat_map(|w| w.to_le_bytes())
                    .collect();
                // Now and then through an explicit grid.
                if explicit_grid {
                    let groups = (n as u32).div_ceil(64);
                    batch
                        .run_configured(&self.k.axpb, &[&*v], [groups, 1, 1], Some(&pc))
                        .unwrap();
                } else {
                    batch
                        .run_with_push_constants(&self.k.axpb, &[&*v], n as u32, &pc)
                        .unwrap();
                }
                drop(v);
                for e in &mut self.model[dst][s..s + n] {
                    *e = e.wrapping_mul(a).wrapping_add(b);
                }
            }
            2 => {
                // y ^= rotl(x, 5) + k.
                let mut x = any(&mut self.rng);
                while x == dst {
                    x = any(&mut self.rng);
                }
                let n = self.length();
                let (sx, sy) = (self.bind_start(n), self.bind_start(n));
                let k = self.rng.next_u64() as u32;
                self.order(batch, h, 1 << x | 1 << dst, 1 << dst);
                let (vx, vy) = (self.view(x, sx, n), self.view(dst, sy, n));
                let pc: Vec<u8> = [k, n as u32].iter().flat_map(|w| w.to_le_bytes()).collect();
                batch
                    .run_with_push_constants(&self.k.mix, &[&*vx, &*vy], n as u32, &pc)
                    .unwrap();
                drop((vx, vy));
                for i in 0..n {
                    let v = self.model[x][sx + i];
                    self.model[dst][sy + i] ^= v.rotate_left(5).wrapping_add(k);
                }
            }
            3 => {
                // A copy of any range (element-aligned) into the destination;
                // from the same buffer only when the ranges do not overlap.
                let src = any(&mut self.rng);
                let (n, ss, ds) = if src == dst {
                    // Within one buffer: one range in each half.
                    let half = LEN / 2;
                    let n = 1 + self.rng.below(half as u64 / 2) as usize;
                    let lo = self.rng.below((half - n + 1) as u64) as usize;
                    let hi = half + self.rng.below((half - n + 1) as u64) as usize;
                    if self.rng.below(2) == 0 {
                        (n, lo, hi)
                    } else {
                        (n, hi, lo)
                    }
                } else {
                    let n = match self.rng.below(4) {
                        0 => LEN,
                        _ => 1 + self.rng.below(LEN as u64) as usize,
                    };
                    let span = (LEN - n + 1) as u64;
                    (
                        n,
                        self.rng.below(span) as usize,
                        self.rng.below(span) as usize,
                    )
                };
                self.order(batch, h, 1 << src, 1 << dst);
                if n == LEN && ss == 0 && ds == 0 {
                    batch.copy(&self.bufs[src], &self.bufs[dst]).unwrap();
                } else {
                    let (a, b) = (
                        self.bufs[src].slice(ss..ss + n).unwrap(),
                        self.bufs[dst].slice(ds..ds + n).unwrap(),
                    );
                    batch.copy(&a, &b).unwrap();
                }
                let part = self.model[src][ss..ss + n].to_vec();
                self.model[dst][ds..ds + n].copy_from_slice(&part);
            }
            _ => {
                // A fill of any range, or of the whole buffer.
                let value = self.rng.next_u64() as u32;
                self.order(batch, h, 0, 1 << dst);
                if self.rng.below(4) == 0 {
                    batch.fill(&self.bufs[dst], value).unwrap();
                    self.model[dst].fill(value);
                } else {
                    let s = self.rng.below(LEN as u64) as usize;
                    let n = 1 + self.rng.below((LEN - s) as u64) as usize;
                    batch
                        .fill(&self.bufs[dst].slice(s..s + n).unwrap(), value)
                        .unwrap();
                    self.model[dst][s..s + n].fill(value);
                }
            }
        }
        self.tally.commands += 1;
        dst
    }

    /// Downloads buffer `b` and compares it with the model.
    fn check(&mut self, b: usize, what: &str) {
        let got = self.bufs[b].download().unwrap();
        if let Some(i) = got.iter().zip(&self.model[b]).position(|(g, m)| g != m) {
            panic!(
                "{what}: buffer {b} element {i} is {:#x}, the model says {:#x}",
                got[i], self.model[b][i]
            );
        }
        self.tally.elements_checked += LEN as u64;
    }

    /// Runs `batches` random batches; checks every result.
    fn run(&mut self, batches: u64, thread: usize) {
        let mut ring: VecDeque<Ticket> = VecDeque::new();
        let mut pending_check: u32 = 0;
        for i in 0..batches {
            let set = (i % 2) as usize;
            let mut batch = self.gpu.batch().unwrap();
            let mut h = Hazards::default();
            let mut written = 0u32;
            let commands = 1 + self.rng.below(12);
            for _ in 0..commands {
                written |= 1 << self.command(&mut batch, &mut h, set);
            }
            assert_eq!(batch.len(), commands);
            if self.rng.below(3) == 0 {
                batch.submit().unwrap();
            } else {
                let t = batch.submit_async().unwrap();
                self.tally.async_submits += 1;
                if self.rng.below(4) == 0 {
                    // Polling never blocks and never fails.
                    let _ready: bool = t.is_ready().unwrap();
                }
                ring.push_back(t);
                if ring.len() > RING {
                    self.retire(ring.pop_front().unwrap());
                }
            }
            // The previous batch wrote the other set; this one only read it.
            let other = 1 - set;
            for b in 0..2 * PER_SET {
                if pending_check & 1 << b != 0 && b / PER_SET == other {
                    self.check(b, &format!("thread {thread} batch {}", i.wrapping_sub(1)));
                }
            }
            pending_check = written;
            self.tally.batches += 1;
        }
        while let Some(t) = ring.pop_front() {
            self.retire(t);
        }
        for b in 0..2 * PER_SET {
            self.check(b, &format!("thread {thread} at the end"));
        }
    }

    /// Waits for a ticket or drops it, at random.
    fn retire(&mut self, t: Ticket) {
        if self.rng.below(2) == 0 {
            t.wait().unwrap();
            self.tally.tickets_waited += 1;
        } else {
            drop(t);
            self.tally.tickets_dropped += 1;
        }
    }
}

/// Runs `per_thread` batches on each of THREADS threads.
fn round(gpu: &Device, k: &Kernels, per_thread: &[u64], seed: u64) -> Tally {
    let tallies: Vec<Tally> = std::thread::scope(|s| {
        let handles: Vec<_> = per_thread
            .iter()
            .enumerate()
            .map(|(t, &n)| {
                s.spawn(move || {
                    let mut w = Worker::new(gpu, k, seed ^ ((t as u64 + 1) * 0x9e37_79b9));
                    w.run(n, t);
                    w.tally
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut total = Tally::default();
    for t in &tallies {
        total.add(t);
    }
    total
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().replace('_', "").parse().ok())
}

/// The fields that must match exactly (everything but the submission count).
fn leak_counts(s: &Stats) -> [(&'static str, i64); 12] {
    [
        ("buffers", s.buffers),
        ("staging_buffers", s.staging_buffers),
        ("allocations", s.allocations),
        ("buffer_bytes", s.buffer_bytes as i64),
        ("pipelines", s.pipelines),
        ("command_pools", s.command_pools),
        ("command_buffers", s.command_buffers),
        ("descriptor_pools", s.descriptor_pools),
        ("query_pools", s.query_pools),
        ("semaphores", s.semaphores),
        ("deferred", s.deferred),
        ("allocator_used_bytes", s.allocator_used_bytes as i64),
    ]
}

#[test]
fn soak_eight_threads_of_random_batches() {
    let total = env_u64("VKCOMPUTE_SOAK_BATCHES").unwrap_or(DEFAULT_BATCHES);
    let seed = env_u64("VKCOMPUTE_SOAK_SEED").unwrap_or(0x50a4);
    let gpu = gpu();
    assert!(gpu.validation_enabled());
    let k = Kernels {
        add: gpu.kernel_glsl(ADD).unwrap(),
        axpb: gpu.kernel_glsl(AXPB).unwrap(),
        mix: gpu.kernel_glsl(MIX).unwrap(),
    };

    // Warm-up: the same work, briefly, then a trim.
    let warm = round(&gpu, &k, &[WARM_UP; THREADS], seed.wrapping_add(1));
    gpu.wait_idle().unwrap();
    gpu.trim().unwrap();
    let start = gpu.stats();
    println!("start: {start:?}");

    let per_thread: Vec<u64> = (0..THREADS as u64)
        .map(|t| total / THREADS as u64 + u64::from(t < total % THREADS as u64))
        .collect();
    let t0 = Instant::now();
    let tally = round(&gpu, &k, &per_thread, seed);
    let elapsed = t0.elapsed();

    gpu.wait_idle().unwrap();
    gpu.trim().unwrap();
    let end = gpu.stats();
    println!("end:   {end:?}");
    let leaked: i64 = leak_counts(&start)
        .iter()
        .zip(leak_counts(&end))
        .map(|((_, a), (_, b))| (b - a).abs())
        .sum();
    println!(
        "soak: {} batches ({} commands, {} barriers, {} async submits, tickets {} waited / {} dropped) \
         on {THREADS} threads in {elapsed:.2?} ({:.0} batches/s); {} elements checked; \
         objects leaked: {leaked}; warm-up {} batches",
        tally.batches,
        tally.commands,
        tally.barriers,
        tally.async_submits,
        tally.tickets_waited,
        tally.tickets_dropped,
        tally.batches as f64 / elapsed.as_secs_f64(),
        tally.elements_checked,
        warm.batches
    );
    assert_eq!(tally.batches, total);
    for ((name, a), (_, b)) in leak_counts(&start).iter().zip(leak_counts(&end)) {
        assert_eq!(*a, b, "{name}: {a} at the start, {b} at the end");
    }
    assert_eq!(
        end.allocator_reserved_bytes, start.allocator_reserved_bytes,
        "allocator reserved bytes"
    );
    assert_eq!(leaked, 0);
    assert!(end.submissions >= start.submissions + total);
    assert_clean(&gpu);
}
