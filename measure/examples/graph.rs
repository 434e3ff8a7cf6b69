//! Graphs measured: what a launch costs the CPU, what a recorded chain
//! costs the GPU, and a one-dispatch graph's round trip, beside the
//! driver's floor (hand-written ash, `measure/src/floor.rs`), run in a
//! child process of its own (`graph --floor-child`).
//!
//! ```text
//! cargo run --release -p vkcompute-measure --example graph -- [--json out.json] [--cuda-persist cuda_persist.jsonl] [--cuda-anchor cuda_anchor.json]
//! ```
//!
//! Both sides wait by spinning until the work completes (ours with
//! `DeviceOptions::wait_spin` of 50 ms; by default a wait blocks in the
//! driver after 50 µs), so a launch never follows a thread that slept.
//!
//! One Vulkan device per process: every figure of ours in this process,
//! then the floor's in a child that holds only its own device. Rows:
//!
//! - **launch CPU cost** (µs): the time of `Graph::launch()` alone, median
//!   over many launches, each made once the previous one completed, for
//!   graphs of 1, 1,000 and 10,000 dependent dispatches (goal ≤ 5 µs, flat
//!   in size); and the first launch after `prewarm()` (median over several
//!   fresh graphs) over that median (goal ≤ 1.1×), with the first launch of
//!   graphs never prewarmed beside it as a note; beside each, the floor's
//!   `vkQueueSubmit` alone of the same pre-recorded command buffer
//!   (begun with `SIMULTANEOUS_USE`, as a graph's is; the note gives it
//!   without the flag too): the driver's share of a launch.
//! - **chain of 1,000 per dispatch** (µs): GPU time per dispatch from
//!   timestamps around a 1,000-dispatch dependent graph (a profiled graph,
//!   `Device::graph_recorder_with`) beside the floor's timestamps around the
//!   same chain (goal ≤ 1.0× floor); and launch → wait wall time / 1,000
//!   beside the floor's chain recorded before the timer, submitted and spun
//!   on.
//! - **one-dispatch round trip** (µs): `launch()` → `wait()` of a
//!   one-dispatch graph beside the floor's pre-recorded submit + spin,
//!   back to back and isolated (a 2 ms pause before each, so nothing is
//!   warm from the previous round trip). Goal ≤ 1.05× floor.
//! - **two streams**: the same graphs launched alternately on two streams
//!   (`Graph::launch_on`; each launch also waits on the GPU for the
//!   previous one on the other stream's queue): the one-dispatch round trip
//!   back to back beside the floor's (goal ≤ 1.05× floor), and the launch
//!   CPU cost of the middle-sized graph (goal ≤ 5 µs); a note compares both
//!   with one stream and says whether the streams got two queues.
//!
//! Every workload checks its results (the chain's x[i] advance by exactly
//! one per dispatch). `VKCOMPUTE_QUICK=1` shrinks sizes and repetitions
//! (graphs of 1, 100 and 1,000; for lavapipe and CI).

use vkcompute_measure::cuda_ref;
use vkcompute_measure::floor;

use std::time::{Duration, Instant};

use vkcompute::{Buffer, Device, DeviceOptions, Graph, Kernel, Profiling, Stream};

const AXPB: &str = include_str!("../../shaders/axpb.comp");
/// Elements per dispatch (the floor's).
const N: u32 = floor::ELEMENTS as u32;

fn quick() -> bool {
    std::env::var("VKCOMPUTE_QUICK").is_ok_and(|v| !v.is_empty() && v != "0")
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn median(mut v: Vec<f64>) -> f64 {
    assert!(!v.is_empty(), "median of nothing");
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// One row of the report.
struct Row {
    name: String,
    unit: &'static str,
    clock: &'static str,
    ours: f64,
    floor: Option<f64>,
    goal: &'static str,
}

/// Our device, the `axpb` kernel (x = x * a + b) and its 1024-f32 buffer.
struct Ours {
    gpu: Device,
    k: Kernel,
    x: Buffer<f32>,
    /// What x[i] should hold: i plus every dispatch launched so far.
    steps: u64,
}

impl Ours {
    fn new() -> vkcompute::Result<Ours> {
        // Waits spin until the work completes, as the floor's do: a wait
        // that blocks in the driver (ours do after 50 µs by default) leaves
        // the thread asleep, and the launch right after it was measured at
        // about 10 µs more on the H200 (2026-11-23), which is the waiting
        // strategy, not the launch.
        // `VKCOMPUTE_GRAPH_WAIT_SPIN_US` changes the spin (an experiment).
        let spin_us: u64 = std::env::var("VKCOMPUTE_GRAPH_WAIT_SPIN_US")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(50_000);
        let gpu = Device::with_options(DeviceOptions {
            wait_spin: Duration::from_micros(spin_us),
            ..DeviceOptions::default()
        })?;
        let k = gpu.kernel_glsl(AXPB)?;
        let x = gpu.upload(&(0..N).map(|i| i as f32).collect::<Vec<_>>())?;
        Ok(Ours {
            gpu,
            k,
            x,
            steps: 0,
        })
    }

    /// A graph of `n` dependent dispatches of x = x + 1.
    fn graph(&self, n: usize) -> vkcompute::Result<Graph> {
        self.graph_profiled(n, Profiling::Off)
    }

    /// [`Ours::graph`], writing timestamps as `profiling` says.
    fn graph_profiled(&self, n: usize, profiling: Profiling) -> vkcompute::Result<Graph> {
        let mut pc = [0u8; 12];
        pc[..4].copy_from_slice(&1.0f32.to_le_bytes());
        pc[4..8].copy_from_slice(&1.0f32.to_le_bytes());
        pc[8..].copy_from_slice(&N.to_le_bytes());
        let mut rec = self.gpu.graph_recorder_with(profiling)?;
        for _ in 0..n {
            rec.run_with_push_constants(&self.k, &[&self.x], N, &pc)?;
            rec.barrier();
        }
        rec.finish()
    }

    /// Launches `g` (of `n` dispatches) and waits: (launch µs, launch → wait µs).
    fn launch_wait(&mut self, g: &Graph, n: usize) -> vkcompute::Result<(f64, f64)> {
        self.launch_wait_on(g, n, None)
    }

    /// [`Ours::launch_wait`] on `stream` (`None`: the graph's own).
    fn launch_wait_on(
        &mut self,
        g: &Graph,
        n: usize,
        stream: Option<&Stream>,
    ) -> vkcompute::Result<(f64, f64)> {
        let t = Instant::now();
        let ticket = match stream {
            Some(s) => g.launch_on(s)?,
            None => g.launch()?,
        };
        let launched = t.elapsed();
        ticket.wait()?;
        let total = t.elapsed();
        self.steps += n as u64;
        Ok((us(launched), us(total)))
    }

    /// Panics unless x[i] = i + every dispatch launched (exact in f32 below 2^24).
    fn check(&self) -> vkcompute::Result<()> {
        assert!(self.steps + u64::from(N) < 1 << 24, "f32 no longer exact");
        for (i, v) in self.x.download()?.into_iter().enumerate() {
            let want = (i as u64 + self.steps) as f32;
            assert!(v == want, "x[{i}] = {v}, expected {want}");
        }
        Ok(())
    }
}

/// The argument that makes this example the floor's child process.
const FLOOR_CHILD: &str = "--floor-child";

/// What the floor's process measured: `floor KEY VALUE` lines, µs.
struct FloorSide {
    values: std::collections::HashMap<String, f64>,
    description: String,
}

/// Runs the floor in a child process holding only its own device (the
/// figures issue's rule: in one process holding two devices, or right
/// after one, round trips read several times slower) and reads its lines.
fn floor_side(sizes: &[usize; 3], chain: usize) -> vkcompute::Result<FloorSide> {
    let mut args = vec![FLOOR_CHILD.to_string(), chain.to_string()];
    args.extend(sizes.iter().map(|n| n.to_string()));
    let text = floor::run_child(&args);
    let mut side = FloorSide {
        values: Default::default(),
        description: String::new(),
    };
    for line in text.lines() {
        if let Some(d) = line.strip_prefix("floor-description ") {
            side.description = d.to_string();
        } else if let Some(kv) = line.strip_prefix("floor ") {
            let (k, v) = kv.split_once(' ').expect("floor KEY VALUE");
            side.values
                .insert(k.to_string(), v.parse().expect("a number"));
        }
    }
    Ok(side)
}

/// The floor's process: the chain, round trips and submit costs of the
/// hand-written ash floor, printed as `floor KEY VALUE` (µs).
fn floor_child(args: &[String]) {
    let q = quick();
    let chain: usize = args[0].parse().expect("chain length");
    let sizes: Vec<usize> = args[1..].iter().map(|a| a.parse().expect("size")).collect();
    let (rt_reps, rt_isolated) = if q { (50, 10) } else { (2001, 201) };
    let chain_reps = if q { 5 } else { 51 };
    let mut fl = floor::Floor::new();
    println!("floor-description {}", fl.description);
    for &n in &sizes {
        let reps = match (q, n) {
            (true, _) => 30,
            (false, 10_000) => 101,
            (false, 1000) => 501,
            _ => 2001,
        };
        for (key, simul) in [("simul", true), ("plain", false)] {
            let cost = median(fl.submit_cost(n, simul, reps).into_iter().map(us).collect());
            println!("floor submit_{key}_{n} {cost}");
        }
        let cost = median(
            fl.submit_cost_secondary(n, reps)
                .into_iter()
                .map(us)
                .collect(),
        );
        println!("floor submit_secondary_{n} {cost}");
        use ash::vk::CommandPoolCreateFlags as P;
        for (key, flags, barriers) in [
            ("pool_plain", P::empty(), true),
            ("pool_transient", P::TRANSIENT, true),
            ("no_barriers", P::empty(), false),
        ] {
            let cost = median(
                fl.submit_cost_pool(n, flags, barriers, reps)
                    .into_iter()
                    .map(us)
                    .collect(),
            );
            println!("floor submit_{key}_{n} {cost}");
        }
    }
    for _ in 0..3 {
        fl.chain_prerecorded(chain);
    }
    let wall = median(
        (0..chain_reps)
            .map(|_| us(fl.chain_prerecorded(chain)) / chain as f64)
            .collect(),
    );
    println!("floor chain_wall {wall}");
    let gpu = median(
        (0..chain_reps)
            .map(|_| us(fl.chain_gpu(chain).0) / chain as f64)
            .collect(),
    );
    println!("floor chain_gpu {gpu}");
    let simul = ash::vk::CommandBufferUsageFlags::SIMULTANEOUS_USE;
    let gpu_simul = median(
        (0..chain_reps)
            .map(|_| us(fl.chain_gpu_with(chain, simul).0) / chain as f64)
            .collect(),
    );
    println!("floor chain_gpu_simul {gpu_simul}");
    for _ in 0..20 {
        fl.round_trip(true);
    }
    let b2b = median((0..rt_reps).map(|_| us(fl.round_trip(true))).collect());
    println!("floor rt_b2b {b2b}");
    let iso = median(
        (0..rt_isolated)
            .map(|_| {
                std::thread::sleep(Duration::from_millis(2));
                us(fl.round_trip(true))
            })
            .collect(),
    );
    println!("floor rt_iso {iso}");
    assert_eq!(fl.validation_messages(), 0, "floor: validation messages");
}

fn main() -> vkcompute::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(FLOOR_CHILD) {
        floor_child(&args[2..]);
        return Ok(());
    }
    let json = args
        .iter()
        .position(|a| a == "--json")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let q = quick();
    let sizes: [usize; 3] = if q { [1, 100, 1000] } else { [1, 1000, 10_000] };
    let chain = if q { 100 } else { 1000 };
    let (rt_reps, rt_isolated, fresh) = if q { (50, 10, 3) } else { (2001, 201, 9) };
    let mut rows = Vec::new();
    let mut notes = Vec::new();

    // ---- ours (the only device in the process) ----
    let mut ours = Ours::new()?;
    let info = ours.gpu.info().clone();
    notes.push(format!(
        "our waits spin up to {:?} before blocking (DeviceOptions::wait_spin)",
        ours.gpu.options().wait_spin
    ));
    let mut launch_cost = Vec::new();
    for &n in &sizes {
        let reps = match (q, n) {
            (true, _) => 30,
            (false, 10_000) => 101,
            (false, 1000) => 501,
            _ => 2001,
        };
        let g = ours.graph(n)?;
        for _ in 0..reps.min(20) {
            ours.launch_wait(&g, n)?;
        }
        let med = median(
            (0..reps)
                .map(|_| ours.launch_wait(&g, n).map(|t| t.0))
                .collect::<vkcompute::Result<_>>()?,
        );
        // First launches: of fresh graphs after prewarm, and without.
        let mut warm_first = Vec::new();
        let mut cold_first = Vec::new();
        for _ in 0..fresh {
            let g = ours.graph(n)?;
            g.prewarm()?;
            assert!(g.is_prewarmed());
            warm_first.push(ours.launch_wait(&g, n)?.0);
            let g = ours.graph(n)?;
            cold_first.push(ours.launch_wait(&g, n)?.0);
        }
        let (warm_first, cold_first) = (median(warm_first), median(cold_first));
        rows.push(Row {
            name: format!("launch CPU cost, graph of {n}"),
            unit: "µs",
            clock: "cpu",
            ours: med,
            floor: None,
            goal: "≤ 5 µs, flat",
        });
        rows.push(Row {
            name: format!("first launch after prewarm / median, graph of {n}"),
            unit: "×",
            clock: "cpu",
            ours: warm_first / med,
            floor: None,
            goal: "≤ 1.1×",
        });
        notes.push(format!(
            "graph of {n}: launch median {med:.2} µs; first launch after prewarm {warm_first:.2} µs, \
             without prewarm {cold_first:.2} µs (medians over {fresh} fresh graphs)"
        ));
        launch_cost.push(med);
    }
    ours.check()?;
    let spread = launch_cost.iter().cloned().fold(f64::MIN, f64::max)
        / launch_cost.iter().cloned().fold(f64::MAX, f64::min);
    notes.push(format!(
        "launch cost, largest / smallest over graph sizes {sizes:?}: {spread:.2}×"
    ));

    let g = ours.graph(chain)?;
    g.prewarm()?;
    let chain_reps = if q { 5 } else { 51 };
    for _ in 0..3 {
        ours.launch_wait(&g, chain)?;
    }
    let ours_chain = median(
        (0..chain_reps)
            .map(|_| ours.launch_wait(&g, chain).map(|t| t.1 / chain as f64))
            .collect::<vkcompute::Result<_>>()?,
    );
    drop(g);
    // The same chain with GPU timestamps around it (two per launch).
    let g = ours.graph_profiled(chain, Profiling::Batch)?;
    for _ in 0..3 {
        ours.launch_wait(&g, chain)?;
    }
    let ours_chain_gpu = median(
        (0..chain_reps)
            .map(|_| {
                ours.launch_wait(&g, chain)?;
                Ok(g.last_profile()?.total_ns / 1e3 / chain as f64)
            })
            .collect::<vkcompute::Result<_>>()?,
    );
    drop(g);
    ours.check()?;

    let one = ours.graph(1)?;
    one.prewarm()?;
    for _ in 0..20 {
        ours.launch_wait(&one, 1)?;
    }
    let ours_b2b = median(
        (0..rt_reps)
            .map(|_| ours.launch_wait(&one, 1).map(|t| t.1))
            .collect::<vkcompute::Result<_>>()?,
    );
    let ours_iso = median(
        (0..rt_isolated)
            .map(|_| {
                std::thread::sleep(Duration::from_millis(2));
                ours.launch_wait(&one, 1).map(|t| t.1)
            })
            .collect::<vkcompute::Result<_>>()?,
    );
    // The same graph launched alternately on two streams: each launch also
    // waits on the GPU for the previous one on the other stream's queue.
    let two = [ours.gpu.stream()?, ours.gpu.stream()?];
    let queues = if two[0].shares_queue_with(&two[1]) {
        "sharing one queue"
    } else {
        "on two queues"
    };
    for i in 0..20 {
        ours.launch_wait_on(&one, 1, Some(&two[i % 2]))?;
    }
    let ours_alt = median(
        (0..rt_reps)
            .map(|i| ours.launch_wait_on(&one, 1, Some(&two[i % 2])).map(|t| t.1))
            .collect::<vkcompute::Result<_>>()?,
    );
    let n_alt = sizes[1];
    let g = ours.graph(n_alt)?;
    let alt_reps = if q { 30 } else { 501 };
    for i in 0..20 {
        ours.launch_wait_on(&g, n_alt, Some(&two[i % 2]))?;
    }
    let alt_cost = median(
        (0..alt_reps)
            .map(|i| {
                ours.launch_wait_on(&g, n_alt, Some(&two[i % 2]))
                    .map(|t| t.0)
            })
            .collect::<vkcompute::Result<_>>()?,
    );
    drop(g);
    rows.push(Row {
        name: format!("launch CPU cost, graph of {n_alt}, alternating 2 streams"),
        unit: "µs",
        clock: "cpu",
        ours: alt_cost,
        floor: None,
        goal: "≤ 5 µs",
    });
    notes.push(format!(
        "two streams ({queues}): one-dispatch launch → wait alternating them {ours_alt:.2} µs \
         vs {ours_b2b:.2} µs on one stream ({:.2}×); launch CPU cost, graph of {n_alt}: \
         {alt_cost:.2} µs alternating vs {:.2} µs on one stream",
        ours_alt / ours_b2b,
        launch_cost[1]
    ));
    ours.check()?;
    let messages = ours.gpu.validation_message_count();
    assert_eq!(messages, 0, "{:?}", ours.gpu.validation_messages());
    drop(one);
    drop(ours);

    // ---- the floor, in a process of its own (one device per process) ----
    let fl = floor_side(&sizes, chain)?;
    let get = |k: &str| -> f64 {
        *fl.values
            .get(k)
            .unwrap_or_else(|| panic!("the floor child printed no {k:?}"))
    };
    let (floor_chain, floor_chain_gpu) = (get("chain_wall"), get("chain_gpu"));
    let (floor_b2b, floor_iso) = (get("rt_b2b"), get("rt_iso"));
    notes.push(format!("floor (its own process): {}", fl.description));
    // CUDA of the same run: `--cuda-persist cuda_persist.jsonl` (its own
    // graph figures) and `--cuda-anchor cuda_anchor.json` (PyTorch's).
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
    };
    if let Some(text) = flag("--cuda-persist").and_then(|p| std::fs::read_to_string(p).ok()) {
        let line = |anchor: &str| cuda_ref::persist_value(&text, anchor);
        notes.push(format!(
            "CUDA, same run (cuda_persist.cu): graph replay of dependent tiny kernels {} µs per kernel; \
             one-node graph launch + sync {} µs; kernel launch + sync {} µs",
            line("graph_chain_us_per_kernel").map_or("-".into(), |v| format!("{v:.3}")),
            line("graph1_launch_sync_roundtrip_us").map_or("-".into(), |v| format!("{v:.2}")),
            line("launch_sync_roundtrip_us").map_or("-".into(), |v| format!("{v:.2}")),
        ));
    }
    if let Some(text) = flag("--cuda-anchor").and_then(|p| std::fs::read_to_string(p).ok()) {
        notes.push(format!(
            "CUDA, same run (cuda_anchor.py, PyTorch): graph replay {} µs per kernel; \
             one kernel + synchronize {} µs",
            cuda_ref::anchor_value(&text, "graph_us_per_kernel")
                .map_or("-".into(), |v| format!("{v:.3}")),
            cuda_ref::anchor_value(&text, "roundtrip_us_one_kernel_sync")
                .map_or("-".into(), |v| format!("{v:.2}")),
        ));
    }
    for (i, &n) in sizes.iter().enumerate() {
        let (simul, plain) = (
            get(&format!("submit_simul_{n}")),
            get(&format!("submit_plain_{n}")),
        );
        let secondary = get(&format!("submit_secondary_{n}"));
        notes.push(format!(
            "floor submit of {n} dispatches, no usage flags, by how it was recorded: \
             pool without flags {:.2} µs, TRANSIENT pool {:.2} µs, no barriers between the \
             dispatches {:.2} µs",
            get(&format!("submit_pool_plain_{n}")),
            get(&format!("submit_pool_transient_{n}")),
            get(&format!("submit_no_barriers_{n}")),
        ));
        rows.insert(
            // After this size's "first launch" row.
            3 * i + 2,
            Row {
                name: format!("vkQueueSubmit CPU cost, pre-recorded {n} dispatches (floor)"),
                unit: "µs",
                clock: "cpu",
                ours: launch_cost[i],
                floor: Some(simul),
                goal: "(our launch vs the driver's submit)",
            },
        );
        notes.push(format!(
            "floor submit of a pre-recorded command buffer of {n} dispatches, re-submitted after \
             each completes: {simul:.2} µs with SIMULTANEOUS_USE (as graphs), {plain:.2} µs \
             without, {secondary:.2} µs as a small primary executing it recorded as a secondary; \
             our launch {:.2} µs",
            launch_cost[i]
        ));
    }

    rows.push(Row {
        name: format!("chain of {chain}, GPU time per dispatch (timestamps)"),
        unit: "µs",
        clock: "gpu",
        ours: ours_chain_gpu,
        floor: Some(floor_chain_gpu),
        goal: "≤ 1.0× floor",
    });
    notes.push(format!(
        "floor chain of {chain}, GPU time per dispatch: {floor_chain_gpu:.3} µs begun ONE_TIME_SUBMIT, \
         {:.3} µs begun SIMULTANEOUS_USE (as graphs)",
        get("chain_gpu_simul")
    ));
    rows.push(Row {
        name: format!("chain of {chain}, per dispatch (launch → wait / {chain})"),
        unit: "µs",
        clock: "wall",
        ours: ours_chain,
        floor: Some(floor_chain),
        goal: "≤ 1.0× floor",
    });
    notes.push(format!(
        "chain of {chain}: the floor's wall row submits the chain recorded before the timer \
         and spins; its GPU row re-records it each time (recording is outside the timestamps)"
    ));
    rows.push(Row {
        name: "one-dispatch graph, launch → wait, back to back".into(),
        unit: "µs",
        clock: "wall",
        ours: ours_b2b,
        floor: Some(floor_b2b),
        goal: "≤ 1.05× floor",
    });
    rows.push(Row {
        name: "one-dispatch graph, launch → wait, alternating 2 streams".into(),
        unit: "µs",
        clock: "wall",
        ours: ours_alt,
        floor: Some(floor_b2b),
        goal: "≤ 1.05× floor",
    });
    rows.push(Row {
        name: "one-dispatch graph, launch → wait, isolated".into(),
        unit: "µs",
        clock: "wall",
        ours: ours_iso,
        floor: Some(floor_iso),
        goal: "≤ 1.05× floor",
    });

    println!(
        "vkcompute graphs: {} ({:?}), driver {} {}{}",
        info.name,
        info.adapter_type,
        info.driver_name,
        info.driver_info,
        if q { " [VKCOMPUTE_QUICK]" } else { "" }
    );
    println!(
        "{:<62} {:>5} {:>10} {:>10} {:>8}  goal",
        "workload", "clock", "ours", "floor", "/floor"
    );
    for r in &rows {
        let floor = r.floor.map_or("-".to_string(), |f| format!("{f:.3}"));
        let ratio = r
            .floor
            .map_or("-".to_string(), |f| format!("{:.2}×", r.ours / f));
        println!(
            "{:<62} {:>5} {:>10.3} {:>10} {:>8}  {}",
            format!("{} ({})", r.name, r.unit),
            r.clock,
            r.ours,
            floor,
            ratio,
            r.goal
        );
    }
    for n in &notes {
        println!("{n}");
    }
    if let Some(path) = json {
        let mut s = format!(
            "{{\n  \"adapter\": {:?},\n  \"driver\": {:?},\n  \"quick\": {q},\n  \"rows\": [\n",
            info.name, info.driver_info
        );
        for (i, r) in rows.iter().enumerate() {
            s += &format!(
                "    {{\"name\": {:?}, \"unit\": {:?}, \"clock\": {:?}, \"ours\": {}, \"floor\": {}, \"ratio\": {}, \"goal\": {:?}}}{}\n",
                r.name,
                r.unit,
                r.clock,
                r.ours,
                r.floor.map_or("null".into(), |f| f.to_string()),
                r.floor.map_or("null".into(), |f| (r.ours / f).to_string()),
                r.goal,
                if i + 1 < rows.len() { "," } else { "" }
            );
        }
        s += "  ],\n  \"notes\": [\n";
        for (i, n) in notes.iter().enumerate() {
            s += &format!("    {n:?}{}\n", if i + 1 < notes.len() { "," } else { "" });
        }
        s += "  ]\n}\n";
        if let Err(e) = std::fs::write(&path, s) {
            eprintln!("could not write {path}: {e}");
            std::process::exit(1);
        }
    }
    Ok(())
}
