//! Device loss, simulated: after [`Device::simulate_device_loss`] (which
//! marks the device lost exactly as a driver's `VK_ERROR_DEVICE_LOST` would,
//! without touching the GPU; a real device is never lost on purpose) every
//! operation returns [`Error::DeviceLost`] naming the same first call, never
//! hangs and never panics; `stats()` still works; dropping everything
//! afterwards is clean. The mapping of the Vulkan result itself is unit-
//! tested in `src/error.rs`.

mod common;
use common::glsl::{saxpy_pc, INC, SAXPY, SPIN};
use common::*;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use vkcompute::{compile_glsl, reflect_spirv, BatchOptions, Error, Kernel, Memory, Profiling};

/// The call every error after the simulated loss names.
const FIRST: &str = "simulate_device_loss";

/// Counts the operations tried after the loss and checks each one.
struct Lost {
    tried: usize,
}

impl Lost {
    fn check<T: std::fmt::Debug>(&mut self, what: &str, r: vkcompute::Result<T>) {
        self.tried += 1;
        match r {
            Err(Error::DeviceLost { call }) => assert_eq!(call, FIRST, "{what}"),
            other => panic!("{what}: expected DeviceLost, got {other:?}"),
        }
    }
}

#[test]
fn every_operation_after_a_loss_reports_it() {
    // Run the whole scenario on a thread, so that a hang fails the test
    // instead of stalling the suite.
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        scenario();
        tx.send(()).unwrap();
    });
    match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(()) => worker.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The thread panicked: surface its message.
            if let Err(p) = worker.join() {
                std::panic::resume_unwind(p);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("an operation after the simulated loss hung for 120 s")
        }
    }
}

fn scenario() {
    let gpu = gpu();
    let inc = gpu.kernel_glsl(INC).unwrap();
    let saxpy = gpu.kernel_glsl(SAXPY).unwrap();
    let spin = gpu.kernel_glsl(SPIN).unwrap();
    let counter = gpu.alloc::<u32>(64).unwrap();
    let host = gpu.upload_with(&[1.0f32; 64], Memory::HostVisible).unwrap();
    let ys = gpu.alloc::<f32>(64).unwrap();
    let work = gpu.upload(&(1..=4096u32).collect::<Vec<_>>()).unwrap();

    // Before the loss: everything works.
    let mut b = gpu.batch().unwrap();
    b.run(&inc, &[&counter], 64).unwrap();
    b.submit().unwrap();
    assert_eq!(counter.download().unwrap(), vec![1; 64]);

    // A ticket that has completed, one still in flight (a long job), a
    // profiled one, and batches being recorded when the loss comes.
    let mut b = gpu.batch().unwrap();
    b.run(&inc, &[&counter], 64).unwrap();
    let done = b.submit_async().unwrap();
    done.wait().unwrap();
    let mut b = gpu.batch().unwrap();
    for _ in 0..4 {
        b.run_with_push_constants(&spin, &[&work], 4096, &60_000u32.to_le_bytes())
            .unwrap();
        b.barrier();
    }
    let in_flight = b.submit_async().unwrap();
    let profiled = if gpu.info().timestamps {
        let mut b = gpu
            .batch_with(BatchOptions::default().with_profiling(Profiling::Commands))
            .unwrap();
        b.run(&inc, &[&counter], 64).unwrap();
        Some(b.submit_async().unwrap())
    } else {
        skipped(format_args!(
            "a profiled ticket: {:?} has no compute timestamps",
            gpu.info().name
        ));
        None
    };
    let mut recording = gpu.batch().unwrap();
    recording.run(&inc, &[&counter], 64).unwrap();
    let mut recording2 = gpu.batch().unwrap();
    recording2.run(&inc, &[&counter], 64).unwrap();
    let empty = gpu.batch().unwrap();
    let empty2 = gpu.batch().unwrap();
    let still_running = !in_flight.is_ready().unwrap();
    let before = gpu.stats();

    let t = Instant::now();
    gpu.simulate_device_loss();
    assert!(gpu.is_lost());
    println!("loss simulated; the long job was still running: {still_running}");

    let mut l = Lost { tried: 0 };
    // Tickets from before the loss, in flight or not.
    l.check("wait (in flight)", in_flight.wait());
    l.check(
        "wait_timeout (in flight)",
        in_flight.wait_timeout(Duration::from_millis(1)),
    );
    l.check("is_ready (in flight)", in_flight.is_ready());
    l.check("wait (done)", done.wait());
    l.check("is_ready (done)", done.is_ready());
    l.check(
        "wait_timeout (done)",
        done.wait_timeout(Duration::from_secs(1)),
    );
    if let Some(p) = &profiled {
        l.check("profile", p.profile());
        l.check("wait (profiled)", p.wait());
    }
    // Batches begun before the loss.
    l.check("run", recording.run(&inc, &[&counter], 64).map(|_| ()));
    l.check(
        "run_with_push_constants",
        recording
            .run_with_push_constants(&saxpy, &[&host, &ys], 64, &saxpy_pc(2.0, 64))
            .map(|_| ()),
    );
    l.check(
        "run_configured",
        recording
            .run_configured(&inc, &[&counter], [1, 1, 1], None)
            .map(|_| ()),
    );
    l.check("copy", recording.copy(&host, &ys).map(|_| ()));
    l.check("fill", recording.fill(&counter, 7).map(|_| ()));
    l.check("zero", recording.zero(&ys).map(|_| ()));
    l.check("submit (recorded before)", recording.submit());
    l.check(
        "submit_async (recorded before)",
        recording2.submit_async().map(|_| ()),
    );
    l.check("submit (empty)", empty.submit());
    l.check("submit_async (empty)", empty2.submit_async().map(|_| ()));
    // New batches.
    l.check("batch", gpu.batch().map(|_| ()));
    l.check(
        "batch_with",
        gpu.batch_with(BatchOptions::single_submit()).map(|_| ()),
    );
    // Buffers: new ones, host transfers of old ones (device-local and
    // host-visible).
    l.check("alloc", gpu.alloc::<u32>(16).map(|_| ()));
    l.check(
        "alloc_with",
        gpu.alloc_with::<u32>(16, Memory::HostVisible).map(|_| ()),
    );
    l.check("upload", gpu.upload(&[1u32, 2, 3]).map(|_| ()));
    l.check(
        "upload_with",
        gpu.upload_with(&[1u32], Memory::HostVisible).map(|_| ()),
    );
    l.check("download", counter.download());
    l.check("download (host-visible)", host.download());
    let mut out = vec![0u32; 64];
    l.check("download_into", counter.download_into(&mut out));
    l.check("read_range", counter.read_range(3..9));
    l.check("write", counter.write(0, &[5, 6]));
    l.check("write (host-visible)", host.write(1, &[5.0]));
    l.check("slice download", counter.slice(8..16).unwrap().download());
    // Kernels: new sources, cached ones, SPIR-V, the builder.
    let words = compile_glsl(INC).unwrap();
    l.check("kernel_glsl (cached)", gpu.kernel_glsl(INC).map(|_| ()));
    l.check(
        "kernel_glsl (new)",
        gpu.kernel_glsl(&SPIN.replace("<< 5", "<< 7")).map(|_| ()),
    );
    l.check("from_spirv", Kernel::from_spirv(&gpu, &words).map(|_| ()));
    l.check("kernel_spirv", gpu.kernel_spirv(&words).map(|_| ()));
    l.check(
        "builder",
        Kernel::builder(&gpu)
            .spirv(&words)
            .label("x")
            .build()
            .map(|_| ()),
    );
    // Device-wide waits.
    l.check("wait_idle", gpu.wait_idle());
    l.check("trim", gpu.trim());
    // Checked twice: still the first call named.
    l.check("wait (again)", in_flight.wait());
    l.check("batch (again)", gpu.batch().map(|_| ()));
    let elapsed = t.elapsed();
    println!(
        "{} operations after the loss, all DeviceLost naming {FIRST:?}, in {elapsed:?}",
        l.tried
    );
    assert!(l.tried >= 40);

    // What needs no device still works.
    assert_eq!(reflect_spirv(&words, None).unwrap().bindings.len(), 1);
    assert_eq!(counter.slice(0..4).unwrap().len(), 4);
    assert_eq!(counter.len(), 64);
    // stats() still works and shows what is alive.
    let s = gpu.stats();
    println!("stats after the loss: {s:?}");
    assert_eq!(s.buffers, before.buffers);
    assert_eq!(s.pipelines, before.pipelines);
    assert_eq!(s.allocations, before.allocations);
    assert_eq!(gpu.cached_kernels(), 3);
    let msg = gpu.batch().unwrap_err().to_string();
    assert!(msg.contains(FIRST) && msg.contains("lost"), "{msg}");
    assert!(gpu.batch().unwrap_err().is_device_lost());

    // Dropping everything is clean: tickets (one still in flight on the
    // real device), buffers, kernels, then the device, which waits for the
    // real GPU work before destroying anything.
    drop(in_flight);
    drop(done);
    drop(profiled);
    drop((counter, host, ys, work));
    drop((inc, saxpy, spin));
    assert_clean(&gpu);
    drop(gpu);

    // A new device works.
    let fresh = common::gpu();
    let c = fresh.alloc::<u32>(8).unwrap();
    let k = fresh.kernel_glsl(INC).unwrap();
    let mut b = fresh.batch().unwrap();
    b.run(&k, &[&c], 8).unwrap();
    b.submit().unwrap();
    assert_eq!(c.download().unwrap(), vec![1; 8]);
    assert_clean(&fresh);
}

#[test]
fn a_loss_seen_by_one_thread_stops_the_others() {
    // Eight threads record and submit; one simulates the loss midway.
    // Every thread then gets DeviceLost (never a hang, never a panic).
    let gpu = gpu();
    let inc = gpu.kernel_glsl(INC).unwrap();
    let barrier = std::sync::Barrier::new(8);
    let lost_seen = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let (gpu, inc, barrier) = (&gpu, &inc, &barrier);
                s.spawn(move || {
                    let c = gpu.alloc::<u32>(64).unwrap();
                    let mut n = 0u32;
                    barrier.wait();
                    for i in 0..10_000 {
                        if t == 0 && i == 20 {
                            gpu.simulate_device_loss();
                        }
                        let r = (|| {
                            let mut b = gpu.batch()?;
                            b.run(inc, &[&c], 64)?;
                            if i % 2 == 0 {
                                b.submit()?;
                            } else {
                                drop(b.submit_async()?);
                            }
                            c.read_range(..1)
                        })();
                        match r {
                            Ok(v) => {
                                n += 1;
                                assert_eq!(v, vec![n]);
                            }
                            Err(Error::DeviceLost { call }) => {
                                assert_eq!(call, FIRST);
                                return n;
                            }
                            Err(e) => panic!("thread {t}: {e:?}"),
                        }
                    }
                    panic!("thread {t} never saw the loss");
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    println!("batches completed per thread before the loss: {lost_seen:?}");
    assert!(gpu.is_lost());
    drop(inc);
    assert_clean(&gpu);
}
