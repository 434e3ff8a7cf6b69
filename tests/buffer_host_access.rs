//! Host access to one buffer from many threads: whole writes never tear
//! under concurrent reads (mapped and staged paths), and the HostWords
//! atomic view that kernels poll while running.

mod common;
use common::*;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use vkcompute::{Buffer, Device, DeviceOptions, Error, Memory};

/// Words per buffer: large enough that an unlocked copy tears often.
const WORDS: usize = 4096;

/// The whole-buffer pattern of write `i` by writer `w` (never 0, which is
/// the buffer's initial contents).
fn pattern(w: u32, i: u32) -> u32 {
    ((w + 1) << 24) | (i & 0x00ff_ffff)
}

/// `writers` threads write whole-buffer patterns while `readers` threads
/// download it, `total` operations in all; every read must be one pattern.
fn hammer(gpu: &Device, buf: &Buffer<u32>, writers: u32, readers: u32, total: u32) {
    let per = total / (writers + readers);
    let torn = Arc::new(std::sync::atomic::AtomicU32::new(0));
    std::thread::scope(|s| {
        for w in 0..writers {
            let buf = buf.clone();
            s.spawn(move || {
                let mut data = vec![0u32; WORDS];
                for i in 0..per {
                    data.fill(pattern(w, i));
                    buf.write(0, &data).unwrap();
                }
            });
        }
        for _ in 0..readers {
            let buf = buf.clone();
            let torn = torn.clone();
            s.spawn(move || {
                let mut out = vec![0u32; WORDS];
                for _ in 0..per {
                    buf.download_into(&mut out).unwrap();
                    let first = out[0];
                    let whole = out.iter().all(|&v| v == first);
                    let known = first == 0 || first >> 24 <= writers;
                    if !whole || !known {
                        torn.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    assert_eq!(
        torn.load(Ordering::Relaxed),
        0,
        "reads that saw a mix of writes"
    );
    let last = buf.download().unwrap();
    assert!(last.iter().all(|&v| v == last[0]), "final contents torn");
    assert_clean(gpu);
}

#[test]
fn eight_threads_write_and_read_whole_patterns_mapped() {
    let gpu = gpu();
    let buf = gpu.alloc_with::<u32>(WORDS, Memory::HostVisible).unwrap();
    let t = std::time::Instant::now();
    hammer(&gpu, &buf, 4, 4, 100_000);
    println!(
        "100,000 host copies of {} KiB from 8 threads in {:?}",
        WORDS * 4 / 1024,
        t.elapsed()
    );
}

#[test]
fn threads_write_and_read_whole_patterns_staged() {
    let gpu = gpu_with(DeviceOptions {
        direct_host_access: false,
        ..Default::default()
    });
    let buf = gpu.alloc::<u32>(WORDS).unwrap();
    hammer(&gpu, &buf, 2, 2, if quick() { 200 } else { 1000 });
}

fn quick() -> bool {
    std::env::var_os("VKCOMPUTE_QUICK").is_some()
}

/// data[i] = words[i] * 2 for i < n (reads the words the host stored).
const DOUBLE: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer W { uint words[]; };
layout(set = 0, binding = 1) writeonly buffer O { uint o[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < words.length()) o[i] = words[i] * 2u;
}
"#;

/// words[i] = i * 3 + 1.
const FILL: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer W { uint words[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < words.length()) words[i] = i * 3u + 1u;
}
"#;

#[test]
fn host_words_reach_kernels_and_back() {
    let gpu = gpu();
    let n = 1000usize;
    let words = gpu.alloc_with::<u32>(n, Memory::HostVisible).unwrap();
    let out = gpu.alloc::<u32>(n).unwrap();
    let double = gpu.kernel_glsl(DOUBLE).unwrap();
    let fill = gpu.kernel_glsl(FILL).unwrap();

    // Host stores, then a batch reads them.
    {
        let view = words.host_words().unwrap();
        assert_eq!(view.len(), n);
        for (i, w) in view.iter().enumerate() {
            w.store(i as u32 + 7, Ordering::Release);
        }
        // Copies are refused while the view lives: a memcpy beside atomic
        // stores would be a data race.
        assert!(matches!(
            words.download(),
            Err(Error::HostAccessBusy { what: "download" })
        ));
        assert!(matches!(
            words.write(0, &[1]),
            Err(Error::HostAccessBusy { what: "write" })
        ));
        // A second view shares the memory.
        let again = words.host_words().unwrap();
        assert_eq!(again[5].load(Ordering::Relaxed), 12);
        let mut b = gpu.batch().unwrap();
        b.run(&double, &[&words, &out], n as u32).unwrap();
        b.submit().unwrap();
    }
    let o = out.download().unwrap();
    for (i, v) in o.iter().enumerate() {
        assert_eq!(*v, (i as u32 + 7) * 2, "element {i}");
    }

    // A kernel writes, the host waits for its ticket, then loads.
    let mut b = gpu.batch().unwrap();
    b.run(&fill, &[&words], n as u32).unwrap();
    let ticket = b.submit_async().unwrap();
    ticket.wait().unwrap();
    let view = words.host_words().unwrap();
    for (i, w) in view.iter().enumerate() {
        assert_eq!(w.load(Ordering::Acquire), i as u32 * 3 + 1, "word {i}");
    }
    drop(view);
    // With the view gone, copies work again.
    assert_eq!(words.read_range(2..3).unwrap(), vec![7]);
    assert_clean(&gpu);
}

#[test]
fn host_words_need_mapped_coherent_memory() {
    let gpu = gpu_with(DeviceOptions {
        direct_host_access: false,
        ..Default::default()
    });
    let host = gpu.alloc_with::<u32>(4, Memory::HostVisible).unwrap();
    assert!(host.host_words().is_ok());
    let device = gpu.alloc::<u32>(4).unwrap();
    match device.host_words() {
        Ok(_) => skipped(
            "device-local memory here is mapped host-coherent memory (a unified adapter): \
             no placement to refuse",
        ),
        Err(e) => assert!(
            matches!(
                e,
                Error::NotHostMapped {
                    what: "host_words",
                    placement: Memory::DeviceLocal
                }
            ),
            "{e:?}"
        ),
    }
    assert_clean(&gpu);
}

#[test]
fn read_range_at_usize_max_is_a_typed_error() {
    let gpu = gpu();
    let buf = gpu.alloc::<u32>(8).unwrap();
    assert!(matches!(
        buf.read_range(..=usize::MAX),
        Err(Error::OutOfRange {
            what: "read_range",
            len: 8,
            ..
        })
    ));
    assert!(matches!(
        buf.read_range(usize::MAX..=usize::MAX),
        Err(Error::OutOfRange { .. })
    ));
    assert!(matches!(
        buf.slice(..=usize::MAX),
        Err(Error::OutOfRange { what: "slice", .. })
    ));
    assert_eq!(buf.read_range(..=7).unwrap(), vec![0; 8]);
    assert_clean(&gpu);
}
