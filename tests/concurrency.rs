//! Concurrency: threads sharing one `Device`, each recording and submitting
//! its own batches against its own buffers and one shared read-only input.

mod common;
use common::*;

use std::time::{Duration, Instant};

use vkcompute::{Buffer, Device, Kernel, Ticket};

/// y = x * 3 + c (x shared, read-only).
const AXPC: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer X { uint x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { uint y[]; };
layout(push_constant) uniform P { uint c; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < y.length()) y[i] = x[i] * 3u + c;
}
"#;

/// y += x (x shared, read-only).
const ACCUMULATE: &str = r#"
#version 450
layout(local_size_x = 32) in;
layout(set = 0, binding = 0) readonly buffer X { uint x[]; };
layout(set = 0, binding = 1) buffer Y { uint y[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < y.length()) y[i] += x[i];
}
"#;

/// y = y * 5 + 1 in place.
const MIX: &str = r#"
#version 450
layout(local_size_x = 128) in;
layout(set = 0, binding = 0) buffer Y { uint y[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < y.length()) y[i] = y[i] * 5u + 1u;
}
"#;

/// z = y ^ (x >> s) (x shared, read-only).
const XOR_SHIFT: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer X { uint x[]; };
layout(set = 0, binding = 1) readonly buffer Y { uint y[]; };
layout(set = 0, binding = 2) writeonly buffer Z { uint z[]; };
layout(push_constant) uniform P { uint s; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < z.length()) z[i] = y[i] ^ (x[i] >> s);
}
"#;

const N: usize = 1500;
const THREADS: usize = 8;
const BATCHES_PER_THREAD: usize = 80;
const SLOTS: usize = 3;

struct Kernels {
    axpc: Kernel,
    accumulate: Kernel,
    mix: Kernel,
    xor_shift: Kernel,
}

impl Kernels {
    fn build(gpu: &Device) -> Kernels {
        Kernels {
            axpc: gpu.kernel_glsl(AXPC).unwrap(),
            accumulate: gpu.kernel_glsl(ACCUMULATE).unwrap(),
            mix: gpu.kernel_glsl(MIX).unwrap(),
            xor_shift: gpu.kernel_glsl(XOR_SHIFT).unwrap(),
        }
    }
}

/// One batch's worth of work on a slot's buffers: records it and returns
/// the expected contents of `y` and `z`.
fn record(
    b: &mut vkcompute::Batch,
    k: &Kernels,
    shared: &Buffer<u32>,
    x: &[u32],
    (y, z): &(Buffer<u32>, Buffer<u32>),
    variant: usize,
    c: u32,
) -> (Vec<u32>, Vec<u32>) {
    let n = N as u32;
    let mut ys: Vec<u32> = x
        .iter()
        .map(|v| v.wrapping_mul(3).wrapping_add(c))
        .collect();
    b.run_with_push_constants(&k.axpc, &[shared, y], n, &c.to_le_bytes())
        .unwrap();
    b.barrier();
    for _ in 0..variant % 3 + 1 {
        if variant % 2 == 0 {
            b.run(&k.accumulate, &[shared, y], n).unwrap();
            ys.iter_mut()
                .zip(x)
                .for_each(|(y, x)| *y = y.wrapping_add(*x));
        } else {
            b.run(&k.mix, &[y], n).unwrap();
            ys.iter_mut()
                .for_each(|y| *y = y.wrapping_mul(5).wrapping_add(1));
        }
        b.barrier();
    }
    let s = c % 31;
    b.run_with_push_constants(&k.xor_shift, &[shared, y, z], n, &s.to_le_bytes())
        .unwrap();
    let zs = ys.iter().zip(x).map(|(y, x)| y ^ (x >> s)).collect();
    (ys, zs)
}

struct Pending {
    ticket: Option<Ticket>,
    want_y: Vec<u32>,
    want_z: Vec<u32>,
    batch: usize,
}

fn worker(gpu: Device, shared: &Buffer<u32>, x: &[u32], thread: usize) -> usize {
    // Every thread builds the same four kernels at once: the cache must
    // end up with one pipeline each.
    let k = Kernels::build(&gpu);
    let mut rng = Rng::new(1000 + thread as u64);
    let slots: Vec<(Buffer<u32>, Buffer<u32>)> = (0..SLOTS)
        .map(|_| (gpu.alloc(N).unwrap(), gpu.alloc(N).unwrap()))
        .collect();
    let mut pending: Vec<Option<Pending>> = (0..SLOTS).map(|_| None).collect();
    let check = |p: Pending, (y, z): &(Buffer<u32>, Buffer<u32>)| {
        if let Some(t) = &p.ticket {
            if p.batch % 4 == 1 {
                t.wait().unwrap();
            }
        }
        assert_eq!(
            y.download().unwrap(),
            p.want_y,
            "thread {thread} batch {}",
            p.batch
        );
        assert_eq!(
            z.download().unwrap(),
            p.want_z,
            "thread {thread} batch {}",
            p.batch
        );
        drop(p.ticket);
    };
    let mut done = 0;
    for i in 0..BATCHES_PER_THREAD {
        let slot = i % SLOTS;
        if let Some(p) = pending[slot].take() {
            check(p, &slots[slot]);
            done += 1;
        }
        let variant = rng.below(6) as usize;
        let c = rng.next_u64() as u32;
        let mut b = gpu.batch().unwrap();
        let (want_y, want_z) = record(&mut b, &k, shared, x, &slots[slot], variant, c);
        let p = if rng.below(2) == 0 {
            b.submit().unwrap();
            Pending {
                ticket: None,
                want_y,
                want_z,
                batch: i,
            }
        } else {
            Pending {
                ticket: Some(b.submit_async().unwrap()),
                want_y,
                want_z,
                batch: i,
            }
        };
        if p.ticket.is_none() {
            check(p, &slots[slot]);
            done += 1;
        } else {
            pending[slot] = Some(p);
        }
    }
    for (slot, p) in pending.into_iter().enumerate() {
        if let Some(p) = p {
            check(p, &slots[slot]);
            done += 1;
        }
    }
    done
}

#[test]
fn threads_share_one_device() {
    let gpu = gpu();
    let mut rng = Rng::new(2024);
    let x: Vec<u32> = (0..N).map(|_| rng.next_u64() as u32).collect();
    let shared = gpu.upload(&x).unwrap();
    let start = Instant::now();
    let before = gpu.stats().submissions;
    let done: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let gpu = gpu.clone();
                let (shared, x) = (&shared, &x);
                s.spawn(move || worker(gpu, shared, x, t))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let elapsed = start.elapsed();
    assert_eq!(done, THREADS * BATCHES_PER_THREAD);
    let s = gpu.stats();
    println!(
        "{done} batches from {THREADS} threads in {elapsed:?} ({} submissions)",
        s.submissions - before
    );
    assert!(s.submissions - before >= done as u64);
    // The shared input was only read.
    assert_eq!(shared.download().unwrap(), x);
    // Four distinct kernels, however many threads raced to build them.
    assert_eq!(gpu.cached_kernels(), 4);
    assert_eq!(s.pipelines, 4);
    gpu.wait_idle().unwrap();
    assert_eq!(gpu.stats().deferred, 0);
    assert_clean(&gpu);
}

/// Each invocation spins a few thousand xorshift rounds: a few ms of work.
const SPIN: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer S { uint s[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= s.length()) return;
    uint v = s[i];
    for (uint k = 0u; k < 20000u; k++) { v ^= v << 13; v ^= v >> 17; v ^= v << 5; }
    s[i] = v;
}
"#;

/// The CPU's answer to [`SPIN`] for one start value.
fn spin(v: u32) -> u32 {
    vkcompute_measure::spin::xorshift(v, 20000)
}

#[test]
fn one_ticket_waited_on_by_many_threads() {
    let gpu = gpu();
    let want: Vec<u32> = (1..=4096u32).map(spin).collect();
    let k = gpu.kernel_glsl(SPIN).unwrap();
    let s = gpu.upload(&(1..=4096u32).collect::<Vec<_>>()).unwrap();
    let mut b = gpu.batch().unwrap();
    b.run(&k, &[&s], 4096).unwrap();
    let ticket = b.submit_async().unwrap();
    std::thread::scope(|sc| {
        for t in 0..THREADS {
            let ticket = &ticket;
            let s = &s;
            let want = &want;
            sc.spawn(move || {
                if t % 2 == 0 {
                    ticket.wait().unwrap();
                } else {
                    let deadline = Instant::now() + Duration::from_secs(20);
                    while !ticket.is_ready().unwrap() {
                        assert!(Instant::now() < deadline);
                        std::thread::yield_now();
                    }
                }
                // The finished values, not a partial write: every thread
                // waited, so each sees the kernel's final output.
                let got = s.read_range(..8).unwrap();
                assert_eq!(got, want[..8], "thread {t}");
            });
        }
    });
    assert!(ticket.is_ready().unwrap());
    // The whole buffer holds the finished result.
    let all = s.download().unwrap();
    let first_bad = all.iter().zip(&want).position(|(g, w)| g != w);
    assert_eq!(first_bad, None, "first wrong word");
    assert_clean(&gpu);
}

#[test]
fn threads_on_separate_devices_and_one_shared() {
    // Devices are independent: a thread per device plus threads sharing one.
    // The devices are made (and dropped) outside the threads: the Debian
    // validation layer (1.3.239) can crash when one thread creates a device
    // while another records (see scripts/test.sh).
    let shared = gpu();
    let owns: Vec<common::Gpu> = (0..4).map(|_| common::gpu()).collect();
    std::thread::scope(|s| {
        for (t, own) in (0..4u32).zip(&owns) {
            let shared = shared.clone();
            s.spawn(move || {
                for gpu in [&**own, &shared] {
                    let k = gpu.kernel_glsl(MIX).unwrap();
                    let y = gpu.upload(&vec![t; 999]).unwrap();
                    for _ in 0..10 {
                        let mut b = gpu.batch().unwrap();
                        b.run(&k, &[&y], 999).unwrap();
                        b.barrier();
                        b.run(&k, &[&y], 999).unwrap();
                        b.submit().unwrap();
                    }
                    let mut want = t;
                    for _ in 0..20 {
                        want = want.wrapping_mul(5).wrapping_add(1);
                    }
                    assert_eq!(y.download().unwrap(), vec![want; 999]);
                }
                assert_eq!(own.cached_kernels(), 1);
                assert_clean(own);
            });
        }
    });
    drop(owns);
    assert_eq!(shared.cached_kernels(), 1);
    assert_clean(&shared);
}

#[test]
fn batches_and_tickets_move_between_threads() {
    let gpu = gpu();
    let k = gpu.kernel_glsl(MIX).unwrap();
    let y = gpu.upload(&vec![1u32; 640]).unwrap();
    // Recorded here, submitted on another thread, waited on a third.
    let mut b = gpu.batch().unwrap();
    b.run(&k, &[&y], 640).unwrap();
    let ticket = std::thread::spawn(move || {
        b.barrier();
        b.submit_async().unwrap()
    })
    .join()
    .unwrap();
    std::thread::spawn(move || ticket.wait().unwrap())
        .join()
        .unwrap();
    assert_eq!(y.download().unwrap(), vec![6; 640]);
    assert_clean(&gpu);
}
