//! The dispatch rows: record cost (one buffer; new bindings; alternating
//! kernels), chains and independent dispatches (GPU and wall, each beside a
//! floor that submits the same way), and the chunking diagnostics. Round
//! trips are measured in child processes (`roundtrip.rs`).

use vkcompute::{AdapterInfo, DeviceOptions};

use crate::floor;
use crate::floor::more::{FloorMore, BUFFERS};
use crate::ours::{Ours, N};
use crate::ours_more::NewBindings;
use crate::rules::chunk_lengths;
use crate::{measure_blocks, measure_pair, median, us, Row};

/// The dispatch rows: record cost, chains and independent dispatches (GPU
/// and wall); beside the floor and CUDA. Diagnostics go to `notes`.
pub fn dispatch_section(
    cuda_get: &dyn Fn(&str) -> Option<f64>,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> vkcompute::Result<AdapterInfo> {
    let quick = std::env::var_os("VKCOMPUTE_QUICK").is_some();
    let steps = if quick { 100 } else { 1000 };
    let (warm, reps) = if quick { (1, 3) } else { (3, 21) };

    let ours = Ours::new(DeviceOptions::default(), steps)?;
    let info = ours.gpu.info().clone();
    let mut fl = floor::Floor::new();
    let mut row = |name: String,
                   unit,
                   clock,
                   ours: f64,
                   floor: Option<f64>,
                   cuda: Option<(String, f64)>,
                   goal: String| {
        rows.push(Row {
            name,
            unit,
            clock,
            ours,
            floor,
            cuda,
            goal,
        })
    };

    // Correctness first: a chain of `steps` adds `steps` to every element.
    ours.x.write(0, &vec![0.0f32; N as usize])?;
    ours.run(steps, true, false)?;
    let x = ours.x.download()?;
    assert!(
        x.iter().all(|&v| v == steps as f32),
        "chain result wrong: {:?}",
        &x[..4]
    );

    // Recording: timed as the floor times it, into a command buffer whose
    // pipeline and descriptor set are already bound (`record_cost_warm`).
    // Nothing is submitted, so no GPU context switches: after a warm-up the
    // two sides alternate run by run (101 runs each), which evens out the
    // host's drift in speed better than blocks do.
    let record_blocks = if quick { 2 } else { 10 };
    let alternations = if quick { 4 } else { 101 };
    for (label, chain) in [
        ("record dispatch", false),
        ("record dispatch + barrier", true),
    ] {
        for _ in 0..warm * 5 {
            ours.record_cost_warm(steps, chain).expect("record");
            fl.record_cost(steps, chain);
        }
        let (o, f) = measure_blocks(
            alternations,
            0,
            alternations,
            || ours.record_cost_warm(steps, chain).expect("record"),
            || us(fl.record_cost(steps, chain)) / steps as f64,
        );
        row(
            label.into(),
            "µs",
            "cpu",
            o,
            Some(f),
            None,
            "≤ 1.1× floor".into(),
        );
        let (cold, f) = measure_blocks(
            record_blocks,
            warm,
            reps,
            || ours.record_cost(steps, chain).expect("record"),
            || us(fl.record_cost(steps, chain)) / steps as f64,
        );
        notes.push(format!(
            "{label}, timing from an empty batch (vkBeginCommandBuffer, pipeline and set binding inside): {cold:.3} µs vs floor {f:.3} µs ({:.2}×)",
            cold / f
        ));
    }
    // Automatic barriers, dependent chain: the twin of "record dispatch +
    // barrier" with no barrier written (each one found by hazard tracking),
    // alternating run by run with that manual twin in this process; its
    // barriers and result checked once first.
    ours.check_chain_auto(steps)
        .expect("automatic chain results");
    for _ in 0..warm * 5 {
        ours.record_chain_auto_warm(steps).expect("record");
        ours.record_cost_warm(steps, true).expect("record");
    }
    let (o, m) = measure_blocks(
        alternations,
        0,
        alternations,
        || ours.record_chain_auto_warm(steps).expect("record"),
        || ours.record_cost_warm(steps, true).expect("record"),
    );
    row(
        "record dispatch, dependent chain, auto barriers".into(),
        "µs",
        "cpu",
        o,
        Some(m),
        None,
        "≤ 1.05× manual twin (floor column: record dispatch + barrier, same process)".into(),
    );
    // Diagnostic: the same recording with the other descriptor strategy
    // than the adapter's default (push descriptors vs pooled sets).
    {
        let pooled = Ours::new(
            DeviceOptions {
                push_descriptors: Some(!ours.gpu.info().push_descriptor),
                ..Default::default()
            },
            1,
        )?;
        for (label, chain) in [
            ("record dispatch", false),
            ("record dispatch + barrier", true),
        ] {
            let (o, f) = measure_pair(
                warm,
                reps,
                || pooled.record_cost_warm(steps, chain).expect("record"),
                || us(fl.record_cost(steps, chain)) / steps as f64,
            );
            notes.push(format!(
                "{label} with {}: {o:.3} µs vs floor {f:.3} µs ({:.2}×)",
                if pooled.gpu.info().push_descriptor {
                    "push descriptors"
                } else {
                    "pooled descriptor sets"
                },
                o / f
            ));
        }
    }
    // The independent rows: ours binds a different slice per dispatch, so
    // the floor binds a different buffer per dispatch too (sets written
    // before the timer, as our set cache holds them after the warm-up),
    // rather than racing on one buffer with nothing rebound.
    let mut own = FloorMore::new(&fl);
    for (label, chain) in [("chain", true), ("independent", false)] {
        let mut floor_run = |fl: &mut floor::Floor| {
            if chain {
                fl.chain_gpu(steps)
            } else {
                own.independent_own_buffers(fl, steps)
            }
        };
        let (o, f) = measure_pair(
            warm,
            reps,
            || ours.run(steps, chain, true).expect("run"),
            || us(floor_run(&mut fl).0) / steps as f64,
        );
        let (cuda, goal) = if chain {
            (
                cuda_get("graph_us_per_kernel").map(|v| ("CUDA graph replay".to_string(), v)),
                "≤ 1.1× floor".to_string(),
            )
        } else {
            (None, "≤ 0.6 µs".to_string())
        };
        row(
            format!("{label} of {steps}, per dispatch"),
            "µs",
            "gpu",
            o,
            Some(f),
            cuda,
            goal,
        );
        // Wall time, both sides with one strategy: record all, submit once,
        // wait.
        let (o, f) = measure_pair(
            warm,
            reps,
            || ours.wall_single_submit(steps, chain).expect("run"),
            || us(floor_run(&mut fl).1) / steps as f64,
        );
        let cuda = if chain {
            cuda_get("graph_1000_wall_ms").map(|v| ("CUDA graph replay".to_string(), v))
        } else {
            cuda_get("eager_us_per_kernel").map(|v| ("CUDA eager".to_string(), v))
        };
        row(
            format!("{label} of {steps}, per dispatch, one submission"),
            "µs",
            "wall",
            o,
            Some(f),
            cuda,
            "≤ 1.1× floor".into(),
        );
    }
    drop(own);
    // The chain submitted in chunks while it is recorded (vkcompute's
    // default batch: 16 commands, doubling to 128), beside a floor that
    // submits the same chunks the same way.
    {
        let mut more = FloorMore::new(&fl);
        let lengths = chunk_lengths(steps, 16, 128);
        let (o, f) = measure_pair(
            warm,
            reps,
            || ours.run(steps, true, false).expect("run"),
            || more.chain_wall_chunked(&mut fl, &lengths),
        );
        row(
            format!("chain of {steps}, per dispatch, chunked 16..128"),
            "µs",
            "wall",
            o,
            Some(f),
            cuda_get("graph_1000_wall_ms").map(|v| ("CUDA graph replay".to_string(), v)),
            "≤ 2.6 µs".into(),
        );
        // Recording with new bindings: every dispatch binds its own buffer
        // (1,000 buffers), and two kernels alternating; the floor allocates,
        // writes and binds a descriptor set per dispatch, and binds a
        // pipeline and its set per dispatch, respectively.
        let nb = NewBindings::new(&ours, BUFFERS)?;
        nb.check(steps).expect("new-bindings results");
        let n = steps.min(BUFFERS);
        for _ in 0..warm * 5 {
            nb.record_new_bindings(n).expect("record");
            more.record_new_bindings(&mut fl, n);
        }
        let (o, f) = measure_blocks(
            alternations,
            0,
            alternations,
            || nb.record_new_bindings(n).expect("record"),
            || more.record_new_bindings(&mut fl, n),
        );
        row(
            format!("record dispatch, new buffer each ({BUFFERS} buffers)"),
            "µs",
            "cpu",
            o,
            Some(f),
            None,
            "≤ 1.1× floor (set write per dispatch)".into(),
        );
        // Its twin with automatic barriers: every binding tracked, none due
        // (checked in `nb.check`), alternating run by run with the manual
        // recording in this process.
        for _ in 0..warm * 5 {
            nb.record_new_bindings_auto(n).expect("record");
            nb.record_new_bindings(n).expect("record");
        }
        let (o, m) = measure_blocks(
            alternations,
            0,
            alternations,
            || nb.record_new_bindings_auto(n).expect("record"),
            || nb.record_new_bindings(n).expect("record"),
        );
        row(
            format!("record dispatch, new buffer each ({BUFFERS} buffers), auto barriers"),
            "µs",
            "cpu",
            o,
            Some(m),
            None,
            "≤ 1.05× manual twin (floor column: the row above, same process)".into(),
        );
        let (o, f) = measure_blocks(
            alternations,
            0,
            alternations,
            || nb.record_alternating_cost(steps).expect("record"),
            || more.record_alternating(&mut fl, steps),
        );
        row(
            "record dispatch + barrier, 2 kernels alternating".into(),
            "µs",
            "cpu",
            o,
            Some(f),
            None,
            "≤ 1.1× floor (pipeline + set bind per dispatch)".into(),
        );
        drop(nb);
        // Diagnostic: both rows with the other descriptor strategy than the
        // adapter's default (push descriptors vs pooled sets), on a device
        // of its own, each checked once. Its `steps` independent slices are
        // bound first, as the rows above bound them on `ours`, so a set
        // cache is as full as it was there.
        let other = Ours::new(
            DeviceOptions {
                push_descriptors: Some(!ours.gpu.info().push_descriptor),
                ..Default::default()
            },
            steps,
        )?;
        other.record_cost(steps, false)?;
        let strategy = if other.gpu.info().push_descriptor {
            "push descriptors"
        } else {
            "pooled descriptor sets"
        };
        let nb = NewBindings::new(&other, BUFFERS)?;
        nb.check(steps)
            .expect("new-bindings results (other strategy)");
        for _ in 0..warm * 5 {
            nb.record_new_bindings(n).expect("record");
            nb.record_alternating_cost(steps).expect("record");
        }
        let (o, f) = measure_blocks(
            alternations,
            0,
            alternations,
            || nb.record_new_bindings(n).expect("record"),
            || more.record_new_bindings(&mut fl, n),
        );
        notes.push(format!(
            "record dispatch, new buffer each ({BUFFERS} buffers) with {strategy}: {o:.3} µs vs floor {f:.3} µs ({:.2}×)",
            o / f
        ));
        let (o, f) = measure_blocks(
            alternations,
            0,
            alternations,
            || nb.record_alternating_cost(steps).expect("record"),
            || more.record_alternating(&mut fl, steps),
        );
        notes.push(format!(
            "record dispatch + barrier, 2 kernels alternating with {strategy}: {o:.3} µs vs floor {f:.3} µs ({:.2}×)",
            o / f
        ));
        drop(nb);
        drop(other);
        drop(more);
    }
    // Diagnostics: how chunking moves the chain's wall time.
    let mut sweep = Vec::new();
    // Each policy twice, the second pass in reverse order, so warm-up and
    // clock drift do not favour one position.
    let policies = [
        (32u32, 512u32),
        (8, 64),
        (16, 128),
        (16, 256),
        (64, 1024),
        (0, 0),
    ];
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); policies.len()];
    let order: Vec<usize> = (0..policies.len())
        .chain((0..policies.len()).rev())
        .collect();
    for i in order {
        let (first, max) = policies[i];
        samples[i].extend(
            (0..reps.div_ceil(2) + warm)
                .map(|_| ours.chain_wall_chunked(steps, first, max).expect("chain"))
                .skip(warm),
        );
    }
    for (i, (first, max)) in policies.iter().enumerate() {
        sweep.push((*first, *max, median(samples[i].clone())));
    }
    drop(ours);
    drop(fl);
    for (first, max, w) in &sweep {
        let what = if *first == 0 {
            "one submission".to_string()
        } else {
            format!("chunks {first}..{max}")
        };
        notes.push(format!(
            "chain of {steps} wall per dispatch, {what}: {w:.3} µs"
        ));
    }
    Ok(info)
}
