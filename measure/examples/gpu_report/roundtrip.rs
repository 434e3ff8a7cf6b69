//! Round trips in child processes that hold one Vulkan device at a time:
//! gpu_report re-executes itself as `gpu_report --roundtrip-child
//! ours,floor` (or `floor,ours`), which measures both sides in turn, each
//! on a device of its own that it drops before the next side starts, and
//! prints `rt` lines that the parent reads. (In one process holding both
//! devices at once, the GPU switches between two contexts and both sides
//! read several times slower.)
//!
//! [`CHILDREN`] children run one after the other, alternating which side
//! goes first, and each figure is the median of the children's. Both
//! sides of a child share its process: round trips sit in one of two
//! levels from process to process (on the H200, 10–11 or 14–15 µs of CPU
//! time for a blocking back-to-back round trip, whichever build ran), and
//! when each side ran in processes of its own (before 2026-11-27), two
//! halves of one build's runs differed by up to 0.32 in a row's ratio to
//! the floor. `--only roundtrip` runs these rows alone (seconds a run), so
//! that two builds can be compared over many runs; with
//! `VKCOMPUTE_RT_ROWS` it runs the rows named there alone ([`wanted`]),
//! so that many builds fit one call, as for a bisection between two
//! commits.
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

fn print(side: &str, key: &str, (wall, cpu): (f64, Option<f64>)) {
    println!("rt {side} {key} {wall} {}", cpu.map_or(-1.0, |c| c));
}

/// Whether row `key` runs: every row unless `VKCOMPUTE_RT_ROWS` names
/// some, as keys separated by commas (`spin_b2b`, `spin_iso`,
/// `whole_b2b`, `block_b2b`, `block_iso`) or `b2b` for the back-to-back
/// spinning rows (`spin_b2b,whole_b2b`): about a second a child where all
/// rows take five, so that several builds fit one call with many
/// processes each. (The floor measures `spin_b2b` whenever `whole_b2b`
/// runs: that row divides by it.)
fn wanted(key: &str) -> bool {
    match std::env::var("VKCOMPUTE_RT_ROWS") {
        Err(_) => true,
        Ok(v) if v == "b2b" => key == "spin_b2b" || key == "whole_b2b",
        Ok(v) => v.split(',').any(|k| k.trim() == key),
    }
}

/// Round trips per row: `warm` untimed then `reps` timed back to back, or
/// `warm.min(20)` then `iso_reps` for an isolated row (a key ending in
/// `_iso`).
#[derive(Clone, Copy)]
struct Reps {
    warm: usize,
    reps: usize,
    iso_reps: usize,
}

/// Times row `key` of `side` with `f` and prints its `rt` line.
fn row(side: &str, key: &str, r: Reps, f: impl FnMut() -> f64) {
    let isolated = key.ends_with("_iso");
    let (warm, reps) = if isolated {
        (r.warm.min(20), r.iso_reps)
    } else {
        (r.warm, r.reps)
    };
    print(side, key, sample(warm, reps, isolated, f));
}

/// Our side's rows, on devices of its own (dropped on return).
fn measure_ours(r: Reps) {
    let spinning = ["spin_b2b", "spin_iso", "whole_b2b"];
    if spinning.iter().any(|k| wanted(k)) {
        let ours = Ours::new(DeviceOptions::default(), 1).expect("ours");
        for key in spinning.into_iter().filter(|k| wanted(k)) {
            if key == "whole_b2b" {
                row("ours", key, r, || ours.round_trip().expect("round trip"));
            } else {
                row("ours", key, r, || ours.submit_wait().expect("round trip"));
            }
        }
    }
    let blocking = ["block_b2b", "block_iso"];
    if blocking.iter().any(|k| wanted(k)) {
        let options = DeviceOptions {
            wait_spin: Duration::ZERO,
            ..Default::default()
        };
        let ours = Ours::new(options, 1).expect("ours, blocking");
        for key in blocking.into_iter().filter(|k| wanted(k)) {
            row("ours", key, r, || ours.submit_wait().expect("round trip"));
        }
    }
}

/// The floor's rows, on a device of its own (dropped on return).
fn measure_floor(r: Reps) {
    let mut fl = Floor::new();
    for (key, spin) in [
        ("spin_b2b", true),
        ("spin_iso", true),
        ("block_b2b", false),
        ("block_iso", false),
    ] {
        if wanted(key) || (key == "spin_b2b" && wanted("whole_b2b")) {
            row("floor", key, r, || us(fl.round_trip(spin)));
        }
    }
}

/// If this process is a round-trip child, measures both sides in the
/// order its argument names, prints the `rt` lines and returns true.
pub fn child_main() -> bool {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) != Some(CHILD_ARG) {
        return false;
    }
    let quick = std::env::var_os("VKCOMPUTE_QUICK").is_some();
    let r = if quick {
        Reps {
            warm: 5,
            reps: 20,
            iso_reps: 5,
        }
    } else {
        Reps {
            warm: 200,
            reps: 2001,
            iso_reps: 201,
        }
    };
    let order = args.get(2).map(String::as_str).unwrap_or("");
    for side in order.split(',') {
        match side {
            "ours" => measure_ours(r),
            "floor" => measure_floor(r),
            other => panic!("{CHILD_ARG}: expected ours and floor, got {other:?}"),
        }
    }
    true
}

/// One side's `rt` lines: key → (wall µs, CPU µs if known).
type Side = Vec<(String, f64, Option<f64>)>;

/// One child measuring both sides in `order` (`ours,floor` or
/// `floor,ours`): (ours, floor).
fn run_child(order: &str) -> (Side, Side) {
    let exe = std::env::current_exe().expect("current_exe");
    let out = Command::new(exe)
        .args([CHILD_ARG, order])
        .output()
        .unwrap_or_else(|e| panic!("round-trip child {order}: {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "round-trip child {order} failed ({}):\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let (mut ours, mut floor) = (Side::new(), Side::new());
    for l in text.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        let [tag, side, key, wall, cpu] = w[..] else {
            continue;
        };
        let (Ok(wall), Ok(cpu)) = (wall.parse::<f64>(), cpu.parse::<f64>()) else {
            continue;
        };
        let line = (key.to_string(), wall, (cpu >= 0.0).then_some(cpu));
        match (tag, side) {
            ("rt", "ours") => ours.push(line),
            ("rt", "floor") => floor.push(line),
            _ => {}
        }
    }
    (ours, floor)
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

/// The round-trip rows: ours and the floor in each of [`CHILDREN`] child
/// processes, which side first alternating, each figure the median of the
/// children's.
pub fn roundtrip_section(
    cuda_get: &dyn Fn(&str) -> Option<f64>,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) {
    let quick = std::env::var_os("VKCOMPUTE_QUICK").is_some();
    let children = if quick { 1 } else { CHILDREN };
    let (mut o, mut f) = (Vec::new(), Vec::new());
    for c in 0..children {
        let (ours, floor) = run_child(if c % 2 == 0 {
            "ours,floor"
        } else {
            "floor,ours"
        });
        o.push(ours);
        f.push(floor);
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
        if !wanted(key) {
            continue;
        }
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
    if wanted("whole_b2b") {
        let (o, _) = get(&ours, "whole_b2b");
        let (f, _) = get(&floor, "spin_b2b");
        row(
            "round trip, whole: new batch + record + submit → wait".into(),
            "wall",
            o,
            Some(f),
            "— (floor re-submits a recorded buffer)",
        );
    }
    if let Ok(v) = std::env::var("VKCOMPUTE_RT_ROWS") {
        notes.push(format!(
            "round trips: VKCOMPUTE_RT_ROWS={v}: those rows alone"
        ));
    }
    notes.push(format!(
        "round trips: both sides in each of {children} child processes (one device at a time, which side first alternating; medians of the children's medians); isolated = {} ms of sleep before each; CPU time from clock_gettime(CLOCK_THREAD_CPUTIME_ID)",
        ISOLATION.as_millis()
    ));
}
