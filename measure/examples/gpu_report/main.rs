//! One table of vkcompute's figures beside the driver's floor (the same work
//! in minimal hand-written ash, `measure/src/floor.rs`) and, when given,
//! CUDA's figures from `scripts/cuda_reference.py` (or the shared
//! `cuda_anchor.py`) run on the same machine.
//!
//! ```text
//! cargo run --release -p vkcompute-measure --example gpu_report -- [--cuda cuda.json] [--json out.json]
//!     [--only dispatch|bandwidth|startup|diag|chunkdiag|roundtrip[,...]]
//! ```
//!
//! Parts: dispatch (record cost on one buffer, with a new buffer per
//! dispatch and with two kernels alternating; chains and independent
//! dispatches, their wall time with both sides submitting once, and the
//! chain submitted in chunks with a floor that chunks the same way:
//! `dispatch.rs`; round trips, each side in a child process holding one
//! device, back-to-back and isolated, with the CPU time the wait spent:
//! `roundtrip.rs`), bandwidth (saxpy with the launch shape a rule picks
//! from the adapter's limits, `rules::saxpy_shape`, and a sweep as a
//! diagnostic row; copy, upload, download:
//! `measure/src/bandwidth.rs`), startup (`Device::new` + 12 kernels, cold
//! and warm on-disk cache, each in a fresh process, beside the floor of
//! `vkCreateInstance` + `vkCreateDevice` alone:
//! `measure/src/startup.rs`). Without `--only`, all three run. `diag`
//! runs only when named: where vkcompute's record cost and round trip part
//! from the floor's, as `diag: ` lines (printed as measured, and kept in
//! the JSON's notes; `diag.rs`). `chunkdiag` too runs only when named:
//! the chunked chain's wall time run by run, each side alone, alternating
//! and after idling (`chunkdiag.rs`). `roundtrip`, only when named (and
//! not with `dispatch`, which runs it), runs the round-trip rows alone: a
//! process takes seconds instead of a minute and a half, so a comparison
//! of builds can afford many processes.
//!
//! Every figure is a median over repeated runs after warm-up. The `clock`
//! column says what was timed: `gpu` is GPU timestamps around the work,
//! `wall` is host wall clock, `cpu` is host time spent recording. Ratios
//! are ours / theirs in the row's unit (µs and ms: lower is better; GB/s:
//! higher is better). `VKCOMPUTE_QUICK=1` shrinks the workloads (lavapipe, CI).

use vkcompute_measure::bandwidth;
mod chunkdiag;
mod diag;
mod dispatch;
use vkcompute_measure::floor;
mod ours;
mod ours_more;
mod roundtrip;
use vkcompute_measure::rules;
use vkcompute_measure::startup;

use std::time::Duration;

use vkcompute::{AdapterInfo, Device};

/// One row of the report.
struct Row {
    name: String,
    unit: &'static str,
    clock: &'static str,
    ours: f64,
    floor: Option<f64>,
    cuda: Option<(String, f64)>,
    goal: String,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Runs `a` and `b` in alternating blocks (two blocks each, every block
/// warmed up first) and returns both medians. Blocks rather than single
/// alternations: the floor is a second Vulkan device, and switching the GPU
/// between two devices' contexts on every run costs far more than the work.
fn measure_pair(
    warm: usize,
    reps: usize,
    a: impl FnMut() -> f64,
    b: impl FnMut() -> f64,
) -> (f64, f64) {
    measure_blocks(2, warm, reps, a, b)
}

/// [`measure_pair`] over `blocks` alternations of each side (`reps` runs
/// in all per side): for CPU-only work that touches no GPU, where finer
/// alternation evens out the host's drift in clock speed.
fn measure_blocks(
    blocks: usize,
    warm: usize,
    reps: usize,
    mut a: impl FnMut() -> f64,
    mut b: impl FnMut() -> f64,
) -> (f64, f64) {
    let (mut va, mut vb) = (Vec::with_capacity(reps), Vec::with_capacity(reps));
    let per = reps.div_ceil(blocks);
    for _ in 0..blocks {
        for _ in 0..warm {
            a();
        }
        va.extend((0..per).map(|_| a()));
        for _ in 0..warm {
            b();
        }
        vb.extend((0..per).map(|_| b()));
    }
    (median(va), median(vb))
}

/// Reads `"key": number` pairs from cuda_anchor.py's flat JSON.
fn parse_flat_json(text: &str) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for part in text.split(',') {
        let mut kv = part.splitn(2, ':');
        let (Some(k), Some(v)) = (kv.next(), kv.next()) else {
            continue;
        };
        let key = k
            .trim()
            .trim_matches(|c| c == '{' || c == '\n' || c == ' ' || c == '"');
        if let Ok(n) = v.trim().trim_end_matches('}').trim().parse::<f64>() {
            out.push((key.to_string(), n));
        }
    }
    out
}

/// The bandwidth rows: saxpy and copy (GPU time), upload and download
/// (wall), every result checked.
fn bandwidth_section(
    cuda_get: &dyn Fn(&str) -> Option<f64>,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> vkcompute::Result<AdapterInfo> {
    let quick = bandwidth::quick();
    let (warm, reps) = if quick { (1, 3) } else { (3, 15) };
    let gpu = Device::new()?;
    let info = gpu.info().clone();
    let gbps = |bytes: u64, v: Vec<f64>| bytes as f64 / median(v) / 1e9;

    // Slicing where a binding would pass maxStorageBufferRange, checked on
    // a small case with a 1 MiB limit (several slices and a short tail).
    let sliced = bandwidth::Saxpy::new(&gpu, (3 << 18) + 1028, 5, Some(1 << 20), None, 1)?;
    sliced.run_gpu(2)?;
    sliced.check(5, 2).expect("sliced saxpy");
    notes.push(format!(
        "saxpy slicing check: {} slices under a 1 MiB binding limit, results exact",
        sliced.slices.len()
    ));
    drop(sliced);

    // saxpy: the launch shape chosen by a rule from the adapter's limits
    // (`rules::saxpy_shape`, not by measuring) is the row; a sweep of
    // shapes (grid sized to the machine ×1 and ×4, one vec4 per
    // invocation; 1, 2 or 4 vec4s per trip) stays as a diagnostic row.
    let n = bandwidth::saxpy_elements();
    let mut saxpy = bandwidth::Saxpy::new(&gpu, n, 0, None, None, 1)?;
    let n4 = (saxpy.slices[0].len / 4) as u64;
    let (rule_wg, rule_ilp) = rules::saxpy_shape(
        info.compute_units,
        info.max_threads_per_compute_unit,
        info.max_workgroup_count[0],
        bandwidth::WORKGROUP,
        n4,
    );
    let machine = bandwidth::machine_workgroups(&info, n4);
    let need = n4.div_ceil(u64::from(bandwidth::WORKGROUP)) as u32;
    let mut grids = vec![machine, machine.saturating_mul(4).min(need), need];
    grids.sort_unstable();
    grids.dedup();
    let mut runs = 1; // Saxpy::new ran none; count from the warm-up below
    saxpy.run_gpu(1)?;
    let mut time_shape =
        |saxpy: &mut bandwidth::Saxpy, wg: u32, ilp: u32| -> vkcompute::Result<f64> {
            saxpy.configure(Some(wg), ilp)?;
            for _ in 0..warm {
                saxpy.run_gpu(1)?;
            }
            let v: Vec<f64> = (0..reps)
                .map(|_| saxpy.run_gpu(1).map(|d| d.as_secs_f64()))
                .collect::<vkcompute::Result<_>>()?;
            runs += warm + reps;
            Ok(gbps(saxpy.bytes(), v))
        };
    let ruled = time_shape(&mut saxpy, rule_wg, rule_ilp)?;
    let mut best = (0.0f64, 0u32, 0u32);
    for ilp in [1u32, 2, 4] {
        for &wg in &grids {
            let g = time_shape(&mut saxpy, wg, ilp)?;
            notes.push(format!(
                "saxpy {} Mi f32: {wg} workgroups × 256, {ilp} vec4/trip, {} slice(s): {g:.1} GB/s (gpu)",
                n >> 20,
                saxpy.slices.len()
            ));
            if g > best.0 {
                best = (g, wg, ilp);
            }
        }
    }
    saxpy.check(0, runs).expect("saxpy result");
    saxpy.configure(Some(rule_wg), rule_ilp)?;
    let wall: Vec<f64> = (0..reps + warm)
        .map(|_| saxpy.run_wall(1).map(|d| d.as_secs_f64()))
        .collect::<vkcompute::Result<Vec<_>>>()?
        .split_off(warm);
    notes.push(format!(
        "saxpy shape by rule ({rule_wg} workgroups, {rule_ilp} vec4/trip) by wall clock incl. submit + wait: {:.1} GB/s",
        gbps(saxpy.bytes(), wall)
    ));
    let cuda = |k: &str, what: &str| cuda_get(k).map(|v| (what.to_string(), v));
    push_row(
        rows,
        format!(
            "saxpy {} Mi f32, vec4, shape by rule ({rule_wg} wg, {rule_ilp}/trip)",
            n >> 20
        ),
        "GB/s",
        "gpu",
        ruled,
        cuda("saxpy_GBps", "PyTorch y.add_(x, alpha)"),
        "≥ 1.0× CUDA",
    );
    push_row(
        rows,
        format!(
            "saxpy diagnostic: best of {} shapes ({} wg, {}/trip)",
            grids.len() * 3,
            best.1,
            best.2
        ),
        "GB/s",
        "gpu",
        best.0,
        cuda("saxpy_GBps", "PyTorch y.add_(x, alpha)"),
        "— (diagnostic)",
    );
    drop(saxpy);

    let bytes = bandwidth::copy_bytes(&info);
    let copy = bandwidth::Copy::new(&gpu, bytes)?;
    for _ in 0..warm {
        copy.run_gpu()?;
    }
    let v: Vec<f64> = (0..reps)
        .map(|_| copy.run_gpu().map(|d| d.as_secs_f64()))
        .collect::<vkcompute::Result<_>>()?;
    copy.check().expect("copy result");
    push_row(
        rows,
        format!("copy {} MiB (read + write)", bytes >> 20),
        "GB/s",
        "gpu",
        gbps(copy.bytes(), v),
        cuda("copy_GBps", "PyTorch y.copy_(x)"),
        "≥ 0.97× CUDA",
    );
    drop(copy);

    let mut t = bandwidth::Transfer::new(&gpu, bandwidth::transfer_bytes())?;
    t.check().expect("transfer round trip");
    let mib = t.bytes() >> 20;
    let mut up = Vec::new();
    let mut down = Vec::new();
    for i in 0..warm + reps {
        let u = t.upload()?.as_secs_f64();
        let d = t.download()?.as_secs_f64();
        if i >= warm {
            up.push(u);
            down.push(d);
        }
    }
    for (what, v) in [("upload", up), ("download", down)] {
        push_row(
            rows,
            format!("{what} {mib} MiB, device-local"),
            "GB/s",
            "wall",
            gbps(t.bytes(), v),
            None,
            "",
        );
    }
    Ok(info)
}

/// The startup rows: `Device::new` + 12 kernels in a fresh process, with
/// the on-disk cache empty (cold) and filled (warm).
fn startup_section(rows: &mut Vec<Row>, notes: &mut Vec<String>) -> vkcompute::Result<AdapterInfo> {
    let quick = bandwidth::quick();
    let reps = if quick { 3 } else { 11 };
    // The adapter the children pick (Device::new's choice), for the header.
    let info = Device::new()?.info().clone();
    let fail = |e: String| -> ! { panic!("startup: {e}") };
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let cold: Vec<startup::Start> = (0..reps)
        .map(|_| startup::cold().unwrap_or_else(|e| fail(e)))
        .collect();
    let dir = startup::warm_dir().unwrap_or_else(|e| fail(e));
    let warm: Vec<startup::Start> = (0..reps)
        .map(|_| startup::start_in_child(&dir).unwrap_or_else(|e| fail(e)))
        .collect();
    // The same warm start inside this process, where the Vulkan loader and
    // driver are already loaded (this process made a device above): what
    // vkcompute itself costs, without the driver's one-time load.
    let in_process: Vec<startup::Start> = (0..reps)
        .map(|_| startup::start_once(&dir))
        .collect::<vkcompute::Result<_>>()?;
    let _ = std::fs::remove_dir_all(&dir);
    push_row(
        rows,
        "startup warm, driver already loaded: Device::new + 12 kernels".into(),
        "ms",
        "wall",
        median(in_process.iter().map(|s| ms(s.total)).collect()),
        None,
        "",
    );
    notes.push(format!(
        "startup warm, driver already loaded: Device::new alone {:.1} ms (median of {reps}, in this process)",
        median(in_process.iter().map(|s| ms(s.device)).collect())
    ));
    let t = Device::new()?.startup_times();
    notes.push(format!(
        "Device::new in this process, by phase: instance {:.1} ms, adapters {:.1} ms, vkCreateDevice {:.1} ms, allocator + queues + pipeline cache {:.1} ms",
        ms(t.instance),
        ms(t.probe),
        ms(t.create_device),
        ms(t.rest)
    ));
    // The floor: vkCreateInstance + vkCreateDevice alone, fresh process each.
    let floor: Vec<f64> = (0..reps)
        .map(|_| ms(startup::floor_in_child().unwrap_or_else(|e| fail(e))))
        .collect();
    let floor_ms = median(floor);
    for (what, v, goal) in [("cold", &cold, ""), ("warm", &warm, "≤ floor + 10 ms")] {
        rows.push(Row {
            name: format!("startup {what}: Device::new + 12 kernels"),
            unit: "ms",
            clock: "wall",
            ours: median(v.iter().map(|s| ms(s.total)).collect()),
            floor: Some(floor_ms),
            cuda: None,
            goal: goal.to_string(),
        });
        notes.push(format!(
            "startup {what}: Device::new alone {:.1} ms (median of {reps}, fresh process each, driver shader caches off)",
            median(v.iter().map(|s| ms(s.device)).collect())
        ));
    }
    notes.push(format!(
        "startup floor: vkCreateInstance + vkCreateDevice alone (loader load included), {floor_ms:.1} ms (median of {reps}, fresh process each)"
    ));
    Ok(info)
}

fn push_row(
    rows: &mut Vec<Row>,
    name: String,
    unit: &'static str,
    clock: &'static str,
    ours: f64,
    cuda: Option<(String, f64)>,
    goal: &str,
) {
    rows.push(Row {
        name,
        unit,
        clock,
        ours,
        floor: None,
        cuda,
        goal: goal.to_string(),
    });
}

fn main() -> vkcompute::Result<()> {
    // A startup child (see measure/src/startup.rs) runs one start and exits.
    if startup::child_main() || roundtrip::child_main() {
        return Ok(());
    }
    let args: Vec<String> = std::env::args().collect();
    let arg = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let cuda: Vec<(String, f64)> = arg("--cuda")
        .and_then(|p| std::fs::read_to_string(p).ok())
        .map(|t| parse_flat_json(&t))
        .unwrap_or_default();
    let cuda_get = |k: &str| cuda.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
    let only = arg("--only");
    const PARTS: [&str; 6] = [
        "dispatch",
        "bandwidth",
        "startup",
        "diag",
        "chunkdiag",
        "roundtrip",
    ];
    if let Some(o) = &only {
        if let Some(bad) = o.split(',').find(|p| !PARTS.contains(p)) {
            eprintln!("--only: unknown part {bad:?}; parts: {}", PARTS.join(", "));
            std::process::exit(2);
        }
    }
    let want = |part: &str| {
        only.as_deref()
            .map_or(true, |o| o.split(',').any(|p| p == part))
    };
    // Parts outside the default set run only when named.
    let named = |part: &str| {
        only.as_deref()
            .is_some_and(|o| o.split(',').any(|p| p == part))
    };
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let mut info = None;
    if want("dispatch") {
        info = Some(dispatch::dispatch_section(
            &cuda_get, &mut rows, &mut notes,
        )?);
        roundtrip::roundtrip_section(&cuda_get, &mut rows, &mut notes);
    }
    if named("roundtrip") && !want("dispatch") {
        // The adapter's description from a device dropped before the
        // children start, so that no second device holds the GPU.
        let i = vkcompute::Device::new()?.info().clone();
        roundtrip::roundtrip_section(&cuda_get, &mut rows, &mut notes);
        info.get_or_insert(i);
    }
    if want("bandwidth") {
        let i = bandwidth_section(&cuda_get, &mut rows, &mut notes)?;
        info.get_or_insert(i);
    }
    if want("startup") {
        let i = startup_section(&mut rows, &mut notes)?;
        info.get_or_insert(i);
    }
    if named("diag") {
        let i = diag::diag_section(&mut notes)?;
        info.get_or_insert(i);
    }
    if named("chunkdiag") {
        let i = chunkdiag::chunkdiag_section(&mut notes)?;
        info.get_or_insert(i);
    }
    let info = info.expect("at least one part ran");

    // cuda_anchor's graph_1000_wall_ms is ms per 1000 kernels: numerically
    // µs per kernel, as the rows are.
    println!(
        "vkcompute report: {} ({:?}), driver {} {}, Vulkan {}.{}.{}",
        info.name,
        info.adapter_type,
        info.driver_name,
        info.driver_info,
        info.api_version.0,
        info.api_version.1,
        info.api_version.2
    );
    if !rows.is_empty() {
        println!(
            "{:<64} {:>5} {:>10} {:>10} {:>8} {:>10} {:>8}  goal",
            "workload", "clock", "ours", "floor", "/floor", "CUDA", "/CUDA"
        );
    }
    for r in &rows {
        let floor = r.floor.map_or(String::from("-"), |f| format!("{f:.3}"));
        let rf = r
            .floor
            .map_or(String::from("-"), |f| format!("{:.2}×", r.ours / f));
        let cuda = r
            .cuda
            .as_ref()
            .map_or(String::from("-"), |(_, v)| format!("{v:.3}"));
        let rc = r
            .cuda
            .as_ref()
            .map_or(String::from("-"), |(_, v)| format!("{:.2}×", r.ours / v));
        println!(
            "{:<64} {:>5} {:>10.3} {:>10} {:>8} {:>10} {:>8}  {}",
            format!("{} ({})", r.name, r.unit),
            r.clock,
            r.ours,
            floor,
            rf,
            cuda,
            rc,
            r.goal
        );
    }
    // diag's notes were printed as they were measured.
    for n in notes
        .iter()
        .filter(|n| !n.starts_with("diag: ") && !n.starts_with("chunkdiag: "))
    {
        println!("{n}");
    }
    if let Some(path) = arg("--json") {
        let mut s = String::from("{\n");
        s += &format!(
            "  \"adapter\": {:?},\n  \"driver\": {:?},\n  \"rows\": [\n",
            info.name, info.driver_info
        );
        for (i, r) in rows.iter().enumerate() {
            s += &format!(
                "    {{\"name\": {:?}, \"unit\": {:?}, \"clock\": {:?}, \"ours\": {}, \"floor\": {}, \"cuda\": {}, \"cuda_what\": {:?}, \"goal\": {:?}}}{}\n",
                r.name,
                r.unit,
                r.clock,
                r.ours,
                r.floor.map_or("null".to_string(), |f| f.to_string()),
                r.cuda.as_ref().map_or("null".to_string(), |(_, v)| v.to_string()),
                r.cuda.as_ref().map_or("", |(w, _)| w.as_str()),
                r.goal,
                if i + 1 < rows.len() { "," } else { "" }
            );
        }
        s += "  ],\n  \"notes\": [\n";
        for (i, n) in notes.iter().enumerate() {
            s += &format!(
                "    {:?}{}\n",
                n,
                if i + 1 < notes.len() { "," } else { "" }
            );
        }
        s += "  ]\n}\n";
        if let Err(e) = std::fs::write(&path, s) {
            eprintln!("could not write {path}: {e}");
        }
    }
    Ok(())
}
