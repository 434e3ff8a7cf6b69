//! Costs of the soundness work: recording a dispatch (`run_with_push_constants`
//! beside the typed `run_with`, both through the poison check), host copies
//! under the per-buffer host lock (uncontended, and with 8 threads), and a
//! host write recorded in a batch (`Batch::write`) beside `Buffer::write`.
//! Every figure's workload is checked, so a wrong result cannot print a
//! fast number.
//!
//! `cargo run --release -p vkcompute-measure --example host_access [-- --json PATH]`
//! (`VKCOMPUTE_QUICK=1` shrinks the loops for lavapipe).

use std::time::{Duration, Instant};

use vkcompute::{Device, Memory, Result};

const AXPB: &str = include_str!("../../shaders/axpb.comp");

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Axpb {
    a: f32,
    b: f32,
    n: u32,
}

struct Row {
    name: &'static str,
    value: f64,
    unit: &'static str,
    note: &'static str,
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() -> Result<()> {
    let json = {
        let args: Vec<String> = std::env::args().collect();
        args.iter()
            .position(|a| a == "--json")
            .and_then(|i| args.get(i + 1).cloned())
    };
    let quick = std::env::var_os("VKCOMPUTE_QUICK").is_some();
    let gpu = Device::new()?;
    let mut rows = Vec::new();

    // Recording cost per dispatch: the same kernel on the same buffer, each
    // followed by a barrier (a dependent chain), as benches/dispatch.rs.
    let n = 1024u32;
    let k = gpu.kernel_glsl(AXPB)?;
    let x = gpu.upload(&vec![0.0f32; n as usize])?;
    let p = Axpb { a: 1.0, b: 1.0, n };
    let bytes = bytemuck::bytes_of(&p).to_vec();
    let count = if quick { 200 } else { 1000 };
    let reps = if quick { 5 } else { 30 };
    for typed in [false, true] {
        let mut times = Vec::new();
        for _ in 0..reps {
            let mut b = gpu.batch_with(vkcompute::BatchOptions::single_submit())?;
            let t = Instant::now();
            for _ in 0..count {
                if typed {
                    b.run_with(&k, &[&x], n, &p)?;
                } else {
                    b.run_with_push_constants(&k, &[&x], n, &bytes)?;
                }
                b.barrier();
            }
            times.push(t.elapsed() / count);
            b.submit()?;
        }
        rows.push(Row {
            name: if typed {
                "record run_with (typed push constants)"
            } else {
                "record run_with_push_constants"
            },
            value: median(times).as_nanos() as f64,
            unit: "ns/dispatch",
            note: "median of batches of dependent dispatches, recording only",
        });
    }
    // Check: every element went through 2 * reps * count steps of x + 1.
    let want = (2 * reps * count) as f32;
    let got = x.download()?;
    assert!(
        got.iter().all(|&v| v == want),
        "dispatches computed {} not {want}",
        got[0]
    );

    // Host copies through the lock, uncontended: 4 KiB write + download.
    let words = 1024usize;
    let hv = gpu.alloc_with::<u32>(words, Memory::HostVisible)?;
    let iters = if quick { 2_000 } else { 20_000 };
    let mut data = vec![0u32; words];
    let mut out = vec![0u32; words];
    let t = Instant::now();
    for i in 0..iters {
        data.fill(i);
        hv.write(0, &data)?;
        hv.download_into(&mut out)?;
        assert_eq!(out[words - 1], i);
    }
    rows.push(Row {
        name: "4 KiB write + download, one thread",
        value: (t.elapsed() / iters).as_nanos() as f64,
        unit: "ns/pair",
        note: "host-visible buffer, mapped path, host lock uncontended",
    });

    // Eight threads on one buffer: 4 writers, 4 readers, every read whole.
    let per = if quick { 1_000 } else { 12_500 };
    let t = Instant::now();
    std::thread::scope(|s| {
        for w in 0..8u32 {
            let hv = hv.clone();
            s.spawn(move || {
                let mut buf = vec![0u32; words];
                for i in 0..per {
                    if w < 4 {
                        buf.fill((w << 24) | i);
                        hv.write(0, &buf).unwrap();
                    } else {
                        hv.download_into(&mut buf).unwrap();
                        assert!(buf.iter().all(|&v| v == buf[0]), "a torn read");
                    }
                }
            });
        }
    });
    rows.push(Row {
        name: "4 KiB copies from 8 threads on one buffer",
        value: (t.elapsed() / (8 * per)).as_nanos() as f64,
        unit: "ns/copy (wall / copies)",
        note: "4 writers + 4 readers, each read checked whole",
    });

    // A host write recorded in a batch (inline, 4 KiB) vs Buffer::write
    // between batches, each followed by a kernel that reads it.
    let dl = gpu.alloc::<f32>(n as usize)?;
    let steps = if quick { 20 } else { 200 };
    let init = vec![1.0f32; n as usize];
    for in_batch in [true, false] {
        let t = Instant::now();
        for _ in 0..steps {
            let mut b = gpu.batch()?;
            if in_batch {
                b.write(&dl, 0, &init)?;
            } else {
                dl.write(0, &init)?;
            }
            b.run_with(&k, &[&dl], n, &p)?;
            b.submit()?;
        }
        let got = dl.download()?;
        assert!(
            got.iter().all(|&v| v == 2.0),
            "write + axpb gave {}",
            got[0]
        );
        rows.push(Row {
            name: if in_batch {
                "Batch::write 4 KiB + dispatch + submit/wait"
            } else {
                "Buffer::write 4 KiB, then dispatch + submit/wait"
            },
            value: (t.elapsed() / steps).as_nanos() as f64 / 1000.0,
            unit: "us/round",
            note: "device-local buffer",
        });
    }

    println!("adapter: {}", gpu.info().name);
    println!("{:<52} {:>12}  unit", "measure", "value");
    for r in &rows {
        println!("{:<52} {:>12.1}  {}  ({})", r.name, r.value, r.unit, r.note);
    }
    if let Some(path) = json {
        let items: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "  {{\"name\": {:?}, \"value\": {}, \"unit\": {:?}, \"note\": {:?}}}",
                    r.name, r.value, r.unit, r.note
                )
            })
            .collect();
        let text = format!(
            "{{\"adapter\": {:?}, \"rows\": [\n{}\n]}}\n",
            gpu.info().name,
            items.join(",\n")
        );
        std::fs::write(&path, text).map_err(|e| vkcompute::Error::CacheIo {
            path: path.into(),
            detail: e.to_string(),
        })?;
    }
    assert_eq!(
        gpu.validation_message_count(),
        0,
        "{:?}",
        gpu.validation_messages()
    );
    Ok(())
}
