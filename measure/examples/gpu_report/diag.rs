//! The `diag` part (`--only diag`, never in the default set): where
//! vkcompute's CPU recording cost and round-trip latency part from the
//! hand-written floor's, each figure paired in one process with
//! `measure_pair` (medians over alternating warmed blocks).
//!
//! - the floor recording into a command buffer recycled by
//!   `vkResetCommandPool` (as vkcompute does) beside its own
//!   `vkResetCommandBuffer`;
//! - the floor's pre-recorded round trip beside one re-recorded each time,
//!   with the floor's set or a freshly allocated and written one;
//! - vkcompute's record cost with and without the first dispatch (begin,
//!   pipeline and set binding) inside the timing, beside the floor;
//! - vkcompute's round trip beside the floor's re-recorded one, and split
//!   into phases.
//!
//! Each line starts with `diag: `, is printed as measured and is kept in
//! the notes (and so in the JSON). Ratios are A/B in the order named.

use std::cell::RefCell;

use vkcompute::{AdapterInfo, DeviceOptions};

use crate::floor::{diag::FloorDiag, Floor};
use crate::ours::Ours;
use crate::{measure_pair, median, us};

const BARRIERS: [(&str, bool); 2] = [
    ("record dispatch", false),
    ("record dispatch + barrier", true),
];

/// Prints `diag: {line}` and keeps it in `notes`.
fn say(notes: &mut Vec<String>, line: String) {
    let line = format!("diag: {line}");
    println!("{line}");
    notes.push(line);
}

/// `what: A a µs, B b µs, A/B r×`.
fn pair(what: &str, a_name: &str, a: f64, b_name: &str, b: f64) -> String {
    format!(
        "{what}: {a_name} {a:.3} µs, {b_name} {b:.3} µs, A/B {:.2}×",
        a / b
    )
}

/// Drops `ours`, panicking first if the validation layer
/// (`VKCOMPUTE_VALIDATION=1`) reported anything on its device.
fn finish(ours: Ours) {
    let m = ours.gpu.validation_messages();
    assert!(
        m.is_empty(),
        "diag: the validation layer reported on a vkcompute device:\n{}",
        m.join("\n---\n")
    );
}

/// Medians of `reps` round trips split into phases (new batch, record,
/// submit, wait), after 50 unrecorded.
fn phases(ours: &Ours, reps: usize) -> vkcompute::Result<String> {
    let mut all: Vec<[f64; 4]> = Vec::with_capacity(reps);
    for i in 0..reps + 50 {
        let p = ours.round_trip_phases()?;
        if i >= 50 {
            all.push(p);
        }
    }
    let m: Vec<f64> = (0..4)
        .map(|k| median(all.iter().map(|p| p[k]).collect()))
        .collect();
    Ok(format!(
        "new batch {:.2}, record {:.2}, submit {:.2}, wait {:.2}",
        m[0], m[1], m[2], m[3]
    ))
}

/// Runs the diagnostics, printing and noting each line; returns the
/// adapter for the header.
pub fn diag_section(notes: &mut Vec<String>) -> vkcompute::Result<AdapterInfo> {
    let quick = std::env::var_os("VKCOMPUTE_QUICK").is_some();
    let steps = if quick { 100 } else { 1000 };
    let (warm, reps) = if quick { (1, 3) } else { (3, 21) };
    let (rt_warm, rt_reps) = if quick { (10, 20) } else { (30, 2001) };
    let phase_reps = rt_reps.min(501);

    // The floor-only pairs first, while no vkcompute device exists.
    let fl = RefCell::new(Floor::new());
    let fd = RefCell::new(FloorDiag::new(&fl.borrow()));
    say(notes, format!("floor: {}", fl.borrow().description));
    let per = |d: std::time::Duration| us(d) / steps as f64;
    let floor_rec = |barrier| per(fl.borrow_mut().record_cost(steps, barrier));
    let floor_pool_rec = |barrier| {
        let mut fl = fl.borrow_mut();
        per(fd
            .borrow_mut()
            .record_cost_pool_reset(&mut fl, steps, barrier))
    };
    let floor_rt = || us(fl.borrow_mut().round_trip(true));
    let floor_rerecord = |fresh| {
        let mut fl = fl.borrow_mut();
        us(fd.borrow_mut().round_trip_rerecord(&mut fl, fresh))
    };

    // (a) The floor's command buffer reset alone vs its pool reset.
    for (label, barrier) in BARRIERS {
        let (a, b) = measure_pair(
            warm,
            reps,
            || floor_rec(barrier),
            || floor_pool_rec(barrier),
        );
        let (an, bn) = ("floor (vkResetCommandBuffer)", "floor (vkResetCommandPool)");
        say(notes, pair(label, an, a, bn, b));
    }
    // (c) Round trips: pre-recorded vs recorded each time.
    let pre = "floor pre-recorded";
    let (re, re_fresh) = ("floor re-recorded", "floor re-recorded + fresh set");
    let (a, b) = measure_pair(rt_warm, rt_reps, floor_rt, || floor_rerecord(false));
    say(notes, pair("round trip", pre, a, re, b));
    let (a, b) = measure_pair(
        rt_warm,
        rt_reps,
        || floor_rerecord(false),
        || floor_rerecord(true),
    );
    say(notes, pair("round trip", re, a, re_fresh, b));
    let (a, b) = measure_pair(rt_warm, rt_reps, floor_rt, || floor_rerecord(true));
    say(notes, pair("round trip", pre, a, re_fresh, b));

    // (b) The default device: its first dispatch inside the timing or not.
    let ours = Ours::new(DeviceOptions::default(), 1)?;
    let info = ours.gpu.info().clone();
    say(
        notes,
        format!(
            "ours: {} ({}), {} dispatches per record figure",
            info.name,
            if info.push_descriptor {
                "push descriptors"
            } else {
                "pooled descriptor sets"
            },
            steps
        ),
    );
    let (cold, warm_n) = ("ours", "ours warm");
    for (label, barrier) in BARRIERS {
        let (a, b) = measure_pair(
            warm,
            reps,
            || ours.record_cost(steps, barrier).expect("record"),
            || ours.record_cost_warm(steps, barrier).expect("record"),
        );
        say(notes, pair(label, cold, a, warm_n, b));
        let (a, b) = measure_pair(
            warm,
            reps,
            || ours.record_cost_warm(steps, barrier).expect("record"),
            || floor_rec(barrier),
        );
        say(notes, pair(label, warm_n, a, "floor", b));
    }
    let ours_rt = || ours.round_trip().expect("round trip");
    let (a, b) = measure_pair(rt_warm, rt_reps, ours_rt, || floor_rerecord(false));
    say(notes, pair("round trip", "ours", a, re, b));

    say(
        notes,
        format!(
            "round trip phases (µs, medians of {phase_reps}), ours: {}",
            phases(&ours, phase_reps)?
        ),
    );
    finish(ours);
    let mut split: Vec<(f64, f64)> = Vec::with_capacity(phase_reps);
    for i in 0..phase_reps + 50 {
        let (sub, wait) = fl.borrow_mut().round_trip_phases();
        if i >= 50 {
            split.push((us(sub), us(wait)));
        }
    }
    say(
        notes,
        format!(
            "round trip phases (µs, medians of {phase_reps}), floor pre-recorded: submit {:.2}, wait {:.2}",
            median(split.iter().map(|p| p.0).collect()),
            median(split.iter().map(|p| p.1).collect())
        ),
    );
    // The diag's objects first: the floor refuses to drop before them.
    drop(fd);
    drop(fl);
    Ok(info)
}
