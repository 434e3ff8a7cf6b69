//! Round trips, each side in a process of its own that holds one Vulkan
//! device at a time: gpu_report re-executes itself as
//! `gpu_report --roundtrip-child ours|floor`, which prints `rt` lines that
//! the parent reads. (In one process holding both devices, the GPU
//! switches between two contexts and both sides read several times slower.)
//!
//! Each side runs in [`CHILDREN`] child processes, alternating with the
//! other side's (ours, floor, ours, ...), and each figure is the median of
//! its children's. The round trips of one gpu_report run sit in one of two
//! levels (on the H200, 10–11 or 14–15 µs of CPU time for a blocking
//! back-to-back round trip, whichever build ran), and on an H100 the level
//! held across all of a run's children: comparing two builds takes many
//! runs of each, which `--only roundtrip` (these rows alone, seconds a
//! run) makes affordable.
//!
//! Each side reports, as medians: back-to-back round trips (one right after
//! the other, so the wait finds the GPU and the driver primed) and isolated
//! ones (5 ms of sleep before each, so nothing is primed by a previous
//! wait), with the wait spinning then blocking (the default) and blocking
//! only; and the CPU time the calling thread spent per round trip
//! (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`), which for a spinning wait is
//! about the wall time. (`/proc/thread-self/schedstat`, used before
//! 2026-11-25, moves only at scheduler events: a spin that was never
//! preempted read 0 µs on the H100.)

use std::process::Command;
use std::time::Duration;

use vkcompute::DeviceOptions;

use crate::floor::Floor;
use crate::ours::Ours;
use crate::{median, us, Row};

/// The argument that makes gpu_report a round-trip child.
pub const CHILD_ARG: &str = "--roundtrip-child";
/// Child processes per side (one with `VKCOMPUTE_QUICK`).
const CHILDREN: usize = 3;
/// The pause before each isolated round trip.
const ISOLATION: Duration = Duration::from_millis(5);

/// CPU time this thread has run, in ns (`None` where the clock is not
/// available).
fn thread_cpu_ns() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration;
    // CLOCK_THREAD_CPUTIME_ID needs no other argument.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (r == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Runs `f` (returning wall µs) `warm` times untimed, then `reps` times,
/// pausing [`ISOLATION`] before each if `isolated`: (median wall µs, median
/// CPU µs of the thread per call, if known).
fn sample(
    warm: usize,
    reps: usize,
    isolated: bool,
    mut f: impl FnMut() -> f64,
) -> (f64, Option<f64>) {
    for _ in 0..warm {
        f();
    }
    let mut wall = Vec::with_capacity(reps);
    let mut cpu = Vec::with_capacity(reps);
    for _ in 0..reps {
        if isolated {
            std::thread::sleep(ISOLATION);
        }
        let c0 = thread_cpu_ns();
        wall.push(f());
        if let (Some(a), Some(b)) = (c0, thread_cpu_ns()) {
            cpu.push(b.saturating_sub(a) as f64 / 1e3);
        }
    }
    let cpu = (cpu.len() == reps).then(|| median(cpu));
    (median(wall), cpu)
}

fn print(key: &str, (wall, cpu): (f64, Option<f64>)) {
    println!("rt {key} {wall} {}", cpu.map_or(-1.0, |c| c));
}

/// If this process is a round-trip child, measures its side, prints the
/// `rt` lines and returns true.
pub fn child_main() -> bool {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) != Some(CHILD_ARG) {
        return false;
    }
    let quick = std::env::var_os("VKCOMPUTE_QUICK").is_some();
    let (warm, reps, iso_reps) = if quick { (5, 20, 5) } else { (200, 2001, 201) };
    match args.get(2).map(String::as_str) {
        Some("ours") => {
            let ours = Ours::new(DeviceOptions::default(), 1).expect("ours");
            let f = || ours.submit_wait().expect("round trip");
            print("spin_b2b", sample(warm, reps, false, f));
            print("spin_iso", sample(warm.min(20), iso_reps, true, f));
            let w = || ours.round_trip().expect("round trip");
            print("whole_b2b", sample(warm, reps, false, w));
            drop(ours);
            let blocking = Ours::new(
                DeviceOptions {
                    wait_spin: Duration::ZERO,
                    ..Default::default()
                },
                1,
            )
            .expect("ours, blocking");
            let f = || blocking.submit_wait().expect("round trip");
            print("block_b2b", sample(warm, reps, false, f));
            print("block_iso", sample(warm.min(20), iso_reps, true, f));
        }
        Some("floor") => {
            let mut fl = Floor::new();
            print(
                "spin_b2b",
                sample(warm, reps, false, || us(fl.round_trip(true))),
            );
            print(
                "spin_iso",
                sample(warm.min(20), iso_reps, true, || us(fl.round_trip(true))),
            );
            print(
                "block_b2b",
                sample(warm, reps, false, || us(fl.round_trip(false))),
            );
            print(
                "block_iso",
                sample(warm.min(20), iso_reps, true, || us(fl.round_trip(false))),
            );
        }
        other => panic!("{CHILD_ARG}: expected ours or floor, got {other:?}"),
    }
    true
}

/// One side's `rt` lines: key → (wall µs, CPU µs if known).
type Side = Vec<(String, f64, Option<f64>)>;

fn run_side(side: &str) -> Side {
    let exe = std::env::current_exe().expect("current_exe");
    let out = Command::new(exe)
        .args([CHILD_ARG, side])
        .output()
        .unwrap_or_else(|e| panic!("round-trip child {side}: {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "round-trip child {side} failed ({}):\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            (w.next()? == "rt").then_some(())?;
            let key = w.next()?.to_string();
            let wall: f64 = w.next()?.parse().ok()?;
            let cpu: f64 = w.next()?.parse().ok()?;
            Some((key, wall, (cpu >= 0.0).then_some(cpu)))
        })
        .collect()
}

fn get(side: &Side, key: &str) -> (f64, Option<f64>) {
    side.iter()
        .find(|(k, _, _)| k == key)
        .map(|(_, w, c)| (*w, *c))
        .unwrap_or_else(|| panic!("round-trip child printed no {key}"))
}

/// Each key's median over the children of one side (the CPU figure only
/// where every child had it).
fn median_side(children: &[Side]) -> Side {
    children[0]
        .iter()
        .map(|(key, _, _)| {
            let got: Vec<(f64, Option<f64>)> = children.iter().map(|c| get(c, key)).collect();
            let wall = median(got.iter().map(|g| g.0).collect());
            let cpu: Option<Vec<f64>> = got.iter().map(|g| g.1).collect();
            (key.clone(), wall, cpu.map(median))
        })
        .collect()
}

/// The round-trip rows: ours and the floor in [`CHILDREN`] child
/// processes each, alternating, each figure the median of a side's
/// children.
pub fn roundtrip_section(
    cuda_get: &dyn Fn(&str) -> Option<f64>,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) {
    let quick = std::env::var_os("VKCOMPUTE_QUICK").is_some();
    let children = if quick { 1 } else { CHILDREN };
    let (mut o, mut f) = (Vec::new(), Vec::new());
    for _ in 0..children {
        o.push(run_side("ours"));
        f.push(run_side("floor"));
    }
    let (ours, floor) = (median_side(&o), median_side(&f));
    let cuda_rt =
        cuda_get("roundtrip_us_one_kernel_sync").map(|v| ("PyTorch kernel + sync".to_string(), v));
    let mut row = |name: String, clock, o: f64, f: Option<f64>, goal: &str| {
        rows.push(Row {
            name,
            unit: "µs",
            clock,
            ours: o,
            floor: f,
            cuda: if clock == "wall" {
                cuda_rt.clone()
            } else {
                None
            },
            goal: goal.to_string(),
        })
    };
    for (key, what, goal) in [
        (
            "spin_b2b",
            "spin then block, back-to-back",
            "≤ 15 µs (goal 10)",
        ),
        ("spin_iso", "spin then block, isolated", ""),
        ("block_b2b", "blocking wait, back-to-back", ""),
        ("block_iso", "blocking wait, isolated", ""),
    ] {
        let (o, oc) = get(&ours, key);
        let (f, fc) = get(&floor, key);
        row(
            format!("round trip, submit → wait, {what}"),
            "wall",
            o,
            Some(f),
            goal,
        );
        if let (Some(oc), Some(fc)) = (oc, fc) {
            row(
                format!("round trip CPU time, {what}"),
                "cpu",
                oc,
                Some(fc),
                "",
            );
        }
    }
    let (o, _) = get(&ours, "whole_b2b");
    let (f, _) = get(&floor, "spin_b2b");
    row(
        "round trip, whole: new batch + record + submit → wait".into(),
        "wall",
        o,
        Some(f),
        "— (floor re-submits a recorded buffer)",
    );
    notes.push(format!(
        "round trips: each side in {children} processes of its own (alternating; medians of their medians), each holding one device; isolated = {} ms of sleep before each; CPU time from clock_gettime(CLOCK_THREAD_CPUTIME_ID)",
        ISOLATION.as_millis()
    ));
}
