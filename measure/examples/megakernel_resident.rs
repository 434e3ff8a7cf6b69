//! Resident megakernel: one tiny task (add two 256-element f32 slices)
//! pushed by the host into the ring of a kernel that is already running,
//! and its completion seen by the host; beside it, our own submit path
//! (new batch, record the same add, submit, wait) in the same process; and
//! throughput with 4 host threads pushing.
//!
//! ```text
//! cargo run --release -p vkcompute-measure --example megakernel_resident -- [--tries N] [--tasks N] [--workers N] [--json PATH]
//! ```
//!
//! Every completion is checked (state Done, the task's id, the last
//! element's sum computed on the device), and after each kernel stops the
//! whole output is downloaded and compared, so a wrong kernel cannot
//! produce a fast number. The goal: median ≤ 3 µs, ≥ 3× faster than CUDA
//! launch + synchronize (9.19 µs, `notes/persistent-kernels.md`), ≥ 4×
//! faster than our own submit path measured here.

use vkcompute_measure::cuda_ref;
use vkcompute_measure::floor;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use vkcompute::megakernel::resident::{ResidentConfig, ResidentMegakernel, ResidentStats};
use vkcompute::megakernel::{TaskState, TaskWorkItem};
use vkcompute::{Buffer, Device, Error};

/// CUDA launch + synchronize of one tiny kernel on the H200
/// (`notes/persistent-kernels.md`, `gpu/cuda_persist.cu`).
const CUDA_LAUNCH_SYNC_US: f64 = 9.19;
const GOAL_MEDIAN_US: f64 = 3.0;
const N: usize = 256;
/// Input slices (a and b are picked among them) and output slots.
const INPUTS: usize = 16;
const OUTPUTS: usize = 256;

const USER: &str = r#"
#define MK_OP_COUNT 1
uint run_task(inout MkTask t, uint lane, uint lanes) {
    uint n = t.output_len;
    if (n == 0u || t.input_len < n || t.params[0] > uint(mk_data.length()) - n) return MK_FAULTED;
    // The last sum (returned in the completion) is read before the stores,
    // so its loads overlap the loop's instead of waiting behind them.
    float last = mk_data[t.input_offset + n - 1u] + mk_data[t.params[0] + n - 1u];
    for (uint i = lane; i < n; i += lanes)
        mk_data[t.output_offset + i] = mk_data[t.input_offset + i] + mk_data[t.params[0] + i];
    t.params[1] = floatBitsToUint(last);
    return MK_DONE;
}
"#;

const ADD: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer D { float d[]; };
layout(push_constant) uniform P { uint a; uint b; uint o; uint n; } p;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < p.n) d[p.o + i] = d[p.a + i] + d[p.b + i];
}
"#;

struct Args {
    tries: usize,
    tasks: usize,
    workers: Option<u32>,
    json: Option<String>,
    /// `cuda_persist.cu`'s JSON lines from the same run.
    cuda_persist: Option<String>,
}

fn args() -> Args {
    let quick = std::env::var("VKCOMPUTE_QUICK").is_ok_and(|v| v == "1");
    let mut a = Args {
        tries: if quick { 1_000 } else { 20_000 },
        tasks: if quick { 10_000 } else { 200_000 },
        workers: None,
        json: None,
        cuda_persist: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut num = || it.next().and_then(|v| v.parse::<usize>().ok());
        match k.as_str() {
            "--tries" => a.tries = num().expect("--tries N"),
            "--tasks" => a.tasks = num().expect("--tasks N"),
            "--workers" => a.workers = Some(num().expect("--workers N") as u32),
            "--json" => a.json = it.next(),
            "--cuda-persist" => a.cuda_persist = it.next(),
            other => panic!("unknown argument {other}"),
        }
    }
    a
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

struct Dist {
    median: f64,
    p10: f64,
    p99: f64,
    min: f64,
}

fn dist(mut v: Vec<f64>) -> Dist {
    v.sort_by(f64::total_cmp);
    Dist {
        median: percentile(&v, 0.5),
        p10: percentile(&v, 0.1),
        p99: percentile(&v, 0.99),
        min: v[0],
    }
}

/// Slot `s` adds input `s % 16` and input `s / 16 % 16` into output `s`,
/// whichever task does it, so the final output is checkable.
fn task(i: u64) -> (TaskWorkItem, usize) {
    let s = (i % OUTPUTS as u64) as usize;
    let (a, b) = ((s % INPUTS * N) as u32, (s / INPUTS % INPUTS * N) as u32);
    let out = ((INPUTS + s) * N) as u32;
    let t = TaskWorkItem::ready(i as u32, 0, a..a + N as u32, out..out + N as u32)
        .with_params([b, 0, 0, 0]);
    (t, s)
}

fn expected(input: &[f32], s: usize) -> Vec<f32> {
    let (a, b) = (s % INPUTS * N, s / INPUTS % INPUTS * N);
    (0..N).map(|k| input[a + k] + input[b + k]).collect()
}

fn check_completion(c: &vkcompute::megakernel::resident::Completion, i: u64, want: f32) {
    assert_eq!(c.state, TaskState::Done, "task {i}: {c:?}");
    assert_eq!(c.task_id, i as u32, "task {i}: {c:?}");
    assert_eq!(f32::from_bits(c.params[1]), want, "task {i}: {c:?}");
}

fn check_outputs(data: &Buffer<f32>, input: &[f32], written: usize) {
    let out = data.read_range(INPUTS * N..).expect("download");
    for s in 0..written.min(OUTPUTS) {
        assert_eq!(
            &out[s * N..(s + 1) * N],
            &expected(input, s)[..],
            "output slot {s}"
        );
    }
}

fn lanes(gpu: &Device) -> u32 {
    // llvmpipe: one SIMD chunk per worker (see check_lanes); elsewhere 256,
    // one lane per element of the 256-element add (and the workgroup size
    // of the raw-Vulkan mailbox floor in the notes): with 64 lanes each
    // lane made four passes, each waiting on memory before the next.
    if gpu.info().driver_name == "llvmpipe" {
        gpu.info().subgroup_size.max(1)
    } else {
        256
    }
}

/// The round trip of one task at a time: (push → completion seen, the
/// `push()` call alone, the launch's stats).
fn latency(
    gpu: &Device,
    data: &Buffer<f32>,
    input: &[f32],
    tries: usize,
    ordered_data: bool,
) -> (Dist, Dist, ResidentStats) {
    let stream = gpu.stream().expect("stream");
    let config = ResidentConfig {
        worker_count: 1,
        workgroup_size: lanes(gpu),
        ring_slots: 1024,
        idle_timeout: Duration::from_secs(2),
        max_wall_time: Duration::from_secs(120),
        ordered_data,
        ..Default::default()
    };
    let mk = ResidentMegakernel::start(gpu, &stream, USER, data, &config).expect("start");
    let mut us = Vec::with_capacity(tries);
    let mut push_us = Vec::with_capacity(tries);
    for i in 0..(tries + tries / 10) as u64 {
        let (t, s) = task(i);
        let want = expected(input, s)[N - 1];
        let t0 = Instant::now();
        let h = mk.push(&t).expect("push");
        let pushed = t0.elapsed();
        let c = mk.wait(h).expect("wait");
        let dt = t0.elapsed();
        check_completion(&c, i, want);
        if i >= (tries / 10) as u64 {
            us.push(dt.as_secs_f64() * 1e6); // the first tenth warms up
            push_us.push(pushed.as_secs_f64() * 1e6);
        }
    }
    let stats = mk.stop().expect("stop");
    check_outputs(data, input, tries + tries / 10);
    (dist(us), dist(push_us), stats)
}

fn submit_path(gpu: &Device, data: &Buffer<f32>, input: &[f32], tries: usize) -> Dist {
    let k = gpu.kernel_glsl(ADD).expect("add kernel");
    let mut us = Vec::with_capacity(tries);
    for i in 0..(tries + tries / 10) {
        let (_, s) = task(i as u64);
        let (a, b) = (s % INPUTS * N, s / INPUTS % INPUTS * N);
        let pc: [u32; 4] = [a as u32, b as u32, ((INPUTS + s) * N) as u32, N as u32];
        let t0 = Instant::now();
        let mut batch = gpu.batch().expect("batch");
        batch
            .run_with_push_constants(&k, &[data], N as u32, bytemuck::cast_slice(&pc))
            .expect("record");
        batch.submit().expect("submit + wait");
        if i >= tries / 10 {
            us.push(t0.elapsed().as_secs_f64() * 1e6);
        }
    }
    check_outputs(data, input, tries + tries / 10);
    dist(us)
}

fn throughput(
    gpu: &Device,
    data: &Buffer<f32>,
    input: &[f32],
    tasks: usize,
    workers: u32,
) -> (f64, ResidentStats) {
    let stream = gpu.stream().expect("stream");
    let config = ResidentConfig {
        worker_count: workers,
        workgroup_size: lanes(gpu),
        ring_slots: 4096,
        idle_timeout: Duration::from_secs(2),
        max_wall_time: Duration::from_secs(300),
        ..Default::default()
    };
    let mk = ResidentMegakernel::start(gpu, &stream, USER, data, &config).expect("start");
    let t0 = Instant::now();
    std::thread::scope(|sc| {
        for th in 0..4u64 {
            let mk = &mk;
            sc.spawn(move || {
                let mut pending = VecDeque::new();
                let finish = |(h, i, want): (_, u64, f32)| {
                    let c = mk.wait(h).expect("wait");
                    check_completion(&c, i, want);
                };
                for i in (th..tasks as u64).step_by(4) {
                    let (t, s) = task(i);
                    let want = expected(input, s)[N - 1];
                    let h = loop {
                        match mk.push(&t) {
                            Ok(h) => break h,
                            Err(Error::ResidentRingFull { .. }) => match pending.pop_front() {
                                Some(p) => finish(p),
                                None => std::thread::yield_now(),
                            },
                            Err(e) => panic!("push {i}: {e}"),
                        }
                    };
                    pending.push_back((h, i, want));
                    if pending.len() > 256 {
                        finish(pending.pop_front().expect("pending"));
                    }
                }
                pending.into_iter().for_each(finish);
            });
        }
    });
    let dt = t0.elapsed();
    let stats = mk.stop().expect("stop");
    assert_eq!(stats.served as usize, tasks, "{stats:?}");
    check_outputs(data, input, tasks);
    (tasks as f64 / dt.as_secs_f64(), stats)
}

/// The argument that makes this example the floor's child process.
const FLOOR_CHILD: &str = "--floor-child";

/// The floor's process: the raw-Vulkan mailbox round trip
/// (`measure/src/floor/mailbox.rs`) on a device of its own, printed as
/// `floor KEY VALUE` (µs), or `floor-skip REASON`.
fn floor_child(tries: usize) {
    let mut fl = floor::Floor::new();
    println!("floor-description {}", fl.description);
    if fl.description.contains("llvmpipe") {
        // Its spin has no loop budget to renew, as the resident workers do.
        println!(
            "floor-skip llvmpipe ends an invocation's loops after 65,535 iterations in all, so one persistent poll cannot serve thousands of requests there"
        );
        return;
    }
    // Both polls the floor can make: the notes' atomicAdd(0), then an
    // acquire load (ours polls with one); each on its own objects.
    for (key, poll_load) in [("add", false), ("load", true)] {
        let Some(mut mb) = floor::mailbox::FloorMailbox::new(&fl, poll_load) else {
            println!(
                "floor-skip the adapter has no device-local host-visible or no host-cached memory"
            );
            return;
        };
        let us: Vec<f64> = mb
            .round_trips(&mut fl, tries / 10, tries)
            .into_iter()
            .map(|d| d.as_secs_f64() * 1e6)
            .collect();
        drop(mb);
        let d = dist(us);
        println!(
            "floor {key}_median {}\nfloor {key}_p10 {}\nfloor {key}_p99 {}\nfloor {key}_min {}",
            d.median, d.p10, d.p99, d.min
        );
    }
    assert_eq!(fl.validation_messages(), 0, "floor: validation messages");
}

/// The mailbox floor's two polls, as measured in its own process.
struct FloorSide {
    /// Lane 0 polls with the notes' `atomicAdd(req, 0)`.
    add: Dist,
    /// Lane 0 polls with an acquire load at device scope.
    load: Dist,
    description: String,
}

impl FloorSide {
    /// The faster of the two (by median): the floor the ratio is taken to.
    fn best(&self) -> (&'static str, &Dist) {
        if self.load.median <= self.add.median {
            ("acquire-load poll", &self.load)
        } else {
            ("atomicAdd poll", &self.add)
        }
    }
}

/// Runs the mailbox floor in a child process holding only its own device
/// (the figures issue's rule) and reads its lines: both distributions, or
/// why it was skipped.
fn floor_side(tries: usize) -> Result<FloorSide, String> {
    let text = floor::run_child(&[FLOOR_CHILD.to_string(), tries.to_string()]);
    if let Some(why) = text.lines().find_map(|l| l.strip_prefix("floor-skip ")) {
        return Err(why.to_string());
    }
    let get = |k: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("floor {k} ")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("the floor printed no {k}:\n{text}"))
    };
    let dist_of = |p: &str| Dist {
        median: get(&format!("{p}_median")),
        p10: get(&format!("{p}_p10")),
        p99: get(&format!("{p}_p99")),
        min: get(&format!("{p}_min")),
    };
    let description = text
        .lines()
        .find_map(|l| l.strip_prefix("floor-description "))
        .unwrap_or("")
        .to_string();
    Ok(FloorSide {
        add: dist_of("add"),
        load: dist_of("load"),
        description,
    })
}

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some(FLOOR_CHILD) {
        floor_child(argv.get(2).and_then(|v| v.parse().ok()).unwrap_or(20_000));
        return;
    }
    let a = args();
    let gpu = Device::new().expect("device");
    let info = gpu.info().clone();
    let mut input = Vec::with_capacity(INPUTS * N);
    let mut x = 0x2545_f491u32;
    for _ in 0..INPUTS * N {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        input.push((x >> 8) as f32 / (1u32 << 24) as f32 - 0.5);
    }
    let mut all = input.clone();
    all.resize((INPUTS + OUTPUTS) * N, f32::NAN);
    let data = gpu.upload(&all).expect("upload");

    let cap = vkcompute::megakernel::resident::residency_cap(&gpu, lanes(&gpu)).expect("cap");
    let workers = a.workers.unwrap_or(8).min(cap.workers);
    let (res, push, res_stats) = latency(&gpu, &data, &input, a.tries, false);
    data.write(INPUTS * N, &vec![f32::NAN; OUTPUTS * N])
        .expect("reset");
    let (ordered, _, _) = latency(&gpu, &data, &input, a.tries, true);
    data.write(INPUTS * N, &vec![f32::NAN; OUTPUTS * N])
        .expect("reset");
    let sub = submit_path(&gpu, &data, &input, a.tries);
    data.write(INPUTS * N, &vec![f32::NAN; OUTPUTS * N])
        .expect("reset");
    let (tps, tp_stats) = throughput(&gpu, &data, &input, a.tasks, workers);
    let floor = floor_side(a.tries);

    // The CUDA figures of this run (`--cuda-persist`), else the notes'.
    let persist = a
        .cuda_persist
        .as_deref()
        .and_then(|p| std::fs::read_to_string(p).ok());
    let from_run = |key: &str| {
        persist
            .as_deref()
            .and_then(|t| cuda_ref::persist_value(t, key))
    };
    let (cuda_launch, cuda_src) = match from_run("launch_sync_roundtrip_us") {
        Some(v) => (v, "cuda_persist.cu, this run"),
        None => (CUDA_LAUNCH_SYNC_US, "notes, H200, not this run"),
    };
    let cuda_mailbox = from_run("mailbox_roundtrip_us");
    let vs_submit = sub.median / res.median;
    let vs_cuda = cuda_launch / res.median;
    println!("device: {} ({})", info.name, info.driver_name);
    println!(
        "one tiny task (add 2 × {N} f32), host push → host sees completion, {} tries:",
        a.tries
    );
    println!("| path | median µs | p10 µs | p99 µs | min µs |");
    println!("| --- | --- | --- | --- | --- |");
    for (name, d) in [
        ("resident ring (1 worker)", &res),
        (
            "… of which the host's push() (write-combined burst + fence)",
            &push,
        ),
        (
            "resident ring, `ordered_data` (task data ordered before the completion)",
            &ordered,
        ),
        ("our submit → wait (new batch)", &sub),
    ] {
        println!(
            "| {name} | {:.2} | {:.2} | {:.2} | {:.2} |",
            d.median, d.p10, d.p99, d.min
        );
    }
    match &floor {
        Ok(f) => {
            for (poll, d) in [("atomicAdd poll", &f.add), ("acquire-load poll", &f.load)] {
                println!(
                    "| raw-Vulkan mailbox floor, {poll} (hand-written ash, own process) | {:.2} | {:.2} | {:.2} | {:.2} |",
                    d.median, d.p10, d.p99, d.min
                );
            }
        }
        Err(why) => println!("| raw-Vulkan mailbox floor | skipped: {why} | | | |"),
    }
    println!("| CUDA launch + synchronize ({cuda_src}) | {cuda_launch:.2} | | | |");
    if let Some(m) = cuda_mailbox {
        println!("| CUDA kernel polling pinned host memory ({cuda_src}) | {m:.2} | | | |");
    }
    println!(
        "resident vs our submit: {vs_submit:.1}× (goal ≥ 4×); vs CUDA launch+sync: {vs_cuda:.1}× (goal ≥ 3×); median goal ≤ {GOAL_MEDIAN_US} µs: {}",
        if res.median <= GOAL_MEDIAN_US { "met" } else { "not met" }
    );
    println!(
        "throughput, 4 host threads, {} workers (cap {}: {cap}): {:.0} tasks/s ({:.2} µs/task), {} tasks, relaunches {}",
        workers,
        cap.workers,
        tps,
        1e6 / tps,
        a.tasks,
        tp_stats.relaunches
    );
    if let Ok(f) = &floor {
        let (poll, d) = f.best();
        println!(
            "resident vs the raw-Vulkan mailbox floor (its faster poll, {poll}): {:.2}× its median ({})",
            res.median / d.median,
            f.description
        );
    }
    println!("latency kernel: {res_stats:?}");
    println!("throughput kernel: {tp_stats:?}");
    if let Some(path) = a.json {
        let d = |d: &Dist| {
            format!(
                "{{\"median_us\": {:.3}, \"p10_us\": {:.3}, \"p99_us\": {:.3}, \"min_us\": {:.3}}}",
                d.median, d.p10, d.p99, d.min
            )
        };
        let json = format!(
            "{{\n  \"device\": {:?},\n  \"driver\": {:?},\n  \"tries\": {},\n  \"resident\": {},\n  \"push_alone\": {},\n  \"resident_ordered_data\": {},\n  \"floor_mailbox\": {},\n  \"floor_mailbox_atomic_add\": {},\n  \"floor_mailbox_acquire_load\": {},\n  \"submit_round_trip\": {},\n  \"cuda_launch_sync_us\": {cuda_launch}, \"cuda_mailbox_us\": {}, \"cuda_source\": {cuda_src:?},\n  \"ratio_submit_over_resident\": {vs_submit:.3},\n  \"ratio_cuda_over_resident\": {vs_cuda:.3},\n  \"goal_median_us\": {GOAL_MEDIAN_US},\n  \"goal_met\": {},\n  \"latency_relaunches\": {},\n  \"throughput\": {{\"threads\": 4, \"workers\": {workers}, \"cap\": {}, \"tasks\": {}, \"tasks_per_s\": {tps:.0}, \"us_per_task\": {:.4}, \"relaunches\": {}}},\n  \"results_checked\": true\n}}\n",
            info.name,
            info.driver_name,
            a.tries,
            d(&res),
            d(&push),
            d(&ordered),
            floor.as_ref().map_or("null".to_string(), |f| d(f.best().1)),
            floor.as_ref().map_or("null".to_string(), |f| d(&f.add)),
            floor.as_ref().map_or("null".to_string(), |f| d(&f.load)),
            d(&sub),
            cuda_mailbox.map_or("null".to_string(), |m| m.to_string()),
            res.median <= GOAL_MEDIAN_US && vs_submit >= 4.0 && vs_cuda >= 3.0,
            res_stats.relaunches,
            cap.workers,
            a.tasks,
            1e6 / tps,
            tp_stats.relaunches,
        );
        std::fs::write(&path, json).expect("write json");
        println!("wrote {path}");
    }
    let msgs = gpu.validation_message_count();
    if msgs > 0 {
        eprintln!("{msgs} validation messages");
        std::process::exit(1);
    }
}
