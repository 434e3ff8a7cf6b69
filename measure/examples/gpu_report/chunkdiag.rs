//! The `chunkdiag` part (`--only chunkdiag`, never in the default set):
//! why the dispatch section's "chain of 1000, per dispatch, chunked
//! 16..128" row reads both sides (vkcompute and the floor) at times near
//! 6 µs per dispatch, while the chunking sweep at the end of the same
//! section reads vkcompute's identical recording near 2.3 µs.
//!
//! The same objects as that row (one vkcompute device, the floor and its
//! chunk command buffers) run the chunked chain in sequences, every run's
//! wall time printed in order: each side alone, the two alternating run
//! by run, and each side again after a pause that lets the GPU idle.
//! Each line starts with `chunkdiag: ` and is kept in the notes.

use std::time::Duration;

use vkcompute::{AdapterInfo, DeviceOptions};

use crate::floor::more::FloorMore;
use crate::floor::Floor;
use crate::median;
use crate::ours::Ours;
use crate::rules::chunk_lengths;

/// Prints `chunkdiag: {line}` and keeps it in `notes`.
fn say(notes: &mut Vec<String>, line: String) {
    let line = format!("chunkdiag: {line}");
    println!("{line}");
    notes.push(line);
}

/// `label: min / median / max µs per dispatch [samples in run order]`.
fn series(label: &str, v: &[f64]) -> String {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(0.0, f64::max);
    let all: Vec<String> = v.iter().map(|x| format!("{x:.2}")).collect();
    format!(
        "{label}: {lo:.3} / {:.3} / {hi:.3} µs per dispatch [{}]",
        median(v.to_vec()),
        all.join(" ")
    )
}

/// Runs the sequences, printing and noting each line; returns the adapter
/// for the header.
pub fn chunkdiag_section(notes: &mut Vec<String>) -> vkcompute::Result<AdapterInfo> {
    let quick = std::env::var_os("VKCOMPUTE_QUICK").is_some();
    let steps = if quick { 100 } else { 1000 };
    let runs = if quick { 4 } else { 15 };
    let ours = Ours::new(DeviceOptions::default(), steps)?;
    let info = ours.gpu.info().clone();
    let mut fl = Floor::new();
    let mut more = FloorMore::new(&fl);
    let lengths = chunk_lengths(steps, 16, 128);
    let o = || ours.run(steps, true, false).expect("chunked chain");
    let f = |fl: &mut Floor, more: &mut FloorMore| more.chain_wall_chunked(fl, &lengths);

    let v: Vec<f64> = (0..runs).map(|_| o()).collect();
    say(notes, series("ours alone (first)", &v));
    let v: Vec<f64> = (0..runs).map(|_| f(&mut fl, &mut more)).collect();
    say(notes, series("floor alone", &v));
    let v: Vec<f64> = (0..runs).map(|_| o()).collect();
    say(notes, series("ours alone (after the floor)", &v));
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        a.push(o());
        b.push(f(&mut fl, &mut more));
    }
    say(notes, series("ours, alternating run by run", &a));
    say(notes, series("floor, alternating run by run", &b));
    let v: Vec<f64> = (0..runs)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(20));
            o()
        })
        .collect();
    say(notes, series("ours, 20 ms idle before each", &v));
    let v: Vec<f64> = (0..runs)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(20));
            f(&mut fl, &mut more)
        })
        .collect();
    say(notes, series("floor, 20 ms idle before each", &v));
    let v: Vec<f64> = (0..runs)
        .map(|_| ours.chain_wall_chunked(steps, 16, 128).expect("chain"))
        .collect();
    say(notes, series("ours via the sweep's call", &v));
    let v: Vec<f64> = (0..runs)
        .map(|_| ours.wall_single_submit(steps, true).expect("chain"))
        .collect();
    say(notes, series("ours, one submission", &v));
    drop(more);
    let v: Vec<f64> = (0..runs).map(|_| o()).collect();
    say(notes, series("ours alone, floor chunk buffers freed", &v));
    drop(fl);
    let v: Vec<f64> = (0..runs).map(|_| o()).collect();
    say(notes, series("ours alone, floor device destroyed", &v));
    Ok(info)
}
