//! `peers_report`: the workloads of vkcompute's `measure/examples/gpu_report/main.rs`,
//! run on wgpu and on scry-gpu, on the adapter vkcompute would choose, with
//! warm-up and medians. One table on stdout, JSON with `--json <path>`.
//!
//! ```text
//! cargo run -p vkcompute-peers --release -- [--json peers.json]
//! ```
//!
//! Rows are named as in gpu_report (plus the bandwidth rows), so a row here
//! and one there with the same `name` and `clock` measure the same work and
//! their ratio can be taken. `clock`: `gpu` is GPU timestamps around the
//! work, `wall` is host wall clock from the start of recording to the end
//! of the wait, `cpu` is host time spent recording. A peer that cannot do a
//! workload prints `n/a (<reason>)`. Every result is checked. See
//! `peers/README.md` for what each figure means per peer.
//!
//! The driver floor (`measure/src/floor.rs`, hand-written ash) runs
//! first in this same process, and each peer's dispatch figure is also
//! stated as a ratio to it (`/floor`; JSON `ratio_to_floor`): host-side
//! figures move between processes on the GPU machine, so a ratio to a floor
//! measured in another process says little.
//!
//! Environment: `VKCOMPUTE_DEVICE=<index|name fragment>` picks the adapter
//! as vkcompute does; `VKCOMPUTE_QUICK=1` shrinks the workloads (lavapipe).

mod adapters;
pub use adapters::Adapter;
use adapters::{pick_like_scry, pick_like_vkcompute, probe_adapters};
mod floor_peer;
mod scry_peer;
mod wgpu_peer;

use std::fmt::Write as _;
use std::panic::AssertUnwindSafe;

use ash::vk;

/// Elements per tiny dispatch (as gpu_report's `N`).
pub const N: u32 = 1024;
/// Workgroup size of every kernel here.
pub const WG: u32 = 256;

/// Sizes and repetition counts.
pub struct Config {
    /// Dispatches in the chain / independent workloads.
    pub steps: usize,
    /// Warm-up runs and measured runs of the dispatch workloads.
    pub warm: usize,
    pub reps: usize,
    /// Warm-up runs and measured runs of the round trips.
    pub rt_warm: usize,
    pub rt_reps: usize,
    /// Warm-up runs and measured runs of the bandwidth workloads.
    pub bw_warm: usize,
    pub bw_reps: usize,
    /// f32 elements of the saxpy.
    pub saxpy_n: usize,
    /// Bytes of the buffer→buffer copy (1 GiB, or what fits).
    pub copy_bytes: u64,
    /// Why `copy_bytes` is less than asked, if it is.
    pub copy_note: Option<String>,
    /// Bytes of the upload and the download.
    pub transfer_bytes: u64,
}

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// A number from the environment, if set and valid (the overrides
/// `measure/src/bandwidth.rs` reads, so both reports can be sized alike).
fn env_num<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

impl Config {
    /// Sizes as gpu_report and `measure/src/bandwidth.rs` choose them:
    /// saxpy 64 Mi f32 (4 Mi quick), copy 1 GiB (16 MiB quick) or the
    /// largest single buffer the adapter allows and at most a quarter of
    /// its memory, transfers 256 MiB (16 MiB quick).
    fn new(quick: bool, adapter: &Adapter) -> Config {
        let want_copy: u64 =
            env_num("VKCOMPUTE_COPY_BYTES").unwrap_or(if quick { 16 * MIB } else { GIB });
        let mut limit = adapter
            .max_memory_allocation_size
            .min(adapter.max_buffer_size);
        if adapter.device_local_memory > 0 {
            limit = limit.min(adapter.device_local_memory / 4);
        }
        let copy_bytes = want_copy.min(limit) & !15;
        let copy_note = (copy_bytes < want_copy).then(|| {
            format!(
                "copy reduced to {copy_bytes} B (asked {want_copy} B): largest single \
                 buffer {} B, device-local memory {} B",
                adapter
                    .max_memory_allocation_size
                    .min(adapter.max_buffer_size),
                adapter.device_local_memory
            )
        });
        let saxpy_n =
            env_num::<usize>("VKCOMPUTE_SAXPY_N").unwrap_or(if quick { 4 << 20 } else { 64 << 20 })
                & !3;
        let transfer_bytes = env_num::<u64>("VKCOMPUTE_TRANSFER_BYTES").unwrap_or(if quick {
            16 * MIB
        } else {
            256 * MIB
        }) & !15;
        let (steps, warm, reps, rt_warm, rt_reps, bw_warm, bw_reps) = if quick {
            (100, 1, 3, 10, 20, 1, 3)
        } else {
            (1000, 3, 21, 30, 2001, 3, 15)
        };
        Config {
            steps,
            warm,
            reps,
            rt_warm,
            rt_reps,
            bw_warm,
            bw_reps,
            saxpy_n,
            copy_bytes,
            copy_note,
            transfer_bytes,
        }
    }
}

/// The workloads, in table order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    RecordDispatch,
    RecordDispatchBarrier,
    ChainGpu,
    ChainWall,
    IndependentGpu,
    IndependentWall,
    RoundTripSpin,
    RoundTripBlocking,
    SaxpyGpu,
    SaxpyWall,
    CopyGpu,
    CopyWall,
    Upload,
    Download,
}

impl Workload {
    pub const ALL: [Workload; 14] = [
        Workload::RecordDispatch,
        Workload::RecordDispatchBarrier,
        Workload::ChainGpu,
        Workload::ChainWall,
        Workload::IndependentGpu,
        Workload::IndependentWall,
        Workload::RoundTripSpin,
        Workload::RoundTripBlocking,
        Workload::SaxpyGpu,
        Workload::SaxpyWall,
        Workload::CopyGpu,
        Workload::CopyWall,
        Workload::Upload,
        Workload::Download,
    ];

    /// The row name (gpu_report's where it has the row).
    fn name(self, cfg: &Config) -> String {
        let s = cfg.steps;
        match self {
            Workload::RecordDispatch => "record dispatch".into(),
            Workload::RecordDispatchBarrier => "record dispatch + barrier".into(),
            Workload::ChainGpu | Workload::ChainWall => format!("chain of {s}, per dispatch"),
            Workload::IndependentGpu | Workload::IndependentWall => {
                format!("independent of {s}, per dispatch")
            }
            Workload::RoundTripSpin => "round trip, spin then block (default)".into(),
            Workload::RoundTripBlocking => "round trip, blocking wait".into(),
            // gpu_report: "saxpy 64 Mi f32, vec4, best shape" (its best of
            // several launch shapes; the peers run one).
            Workload::SaxpyGpu | Workload::SaxpyWall => {
                format!("saxpy {} Mi f32, vec4", cfg.saxpy_n >> 20)
            }
            Workload::CopyGpu | Workload::CopyWall => {
                format!("copy {} MiB (read + write)", cfg.copy_bytes >> 20)
            }
            Workload::Upload => format!("upload {} MiB, device-local", cfg.transfer_bytes >> 20),
            Workload::Download => {
                format!("download {} MiB, device-local", cfg.transfer_bytes >> 20)
            }
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Workload::SaxpyGpu
            | Workload::SaxpyWall
            | Workload::CopyGpu
            | Workload::CopyWall
            | Workload::Upload
            | Workload::Download => "GB/s",
            _ => "µs",
        }
    }

    fn clock(self) -> &'static str {
        match self {
            Workload::RecordDispatch | Workload::RecordDispatchBarrier => "cpu",
            Workload::ChainGpu
            | Workload::IndependentGpu
            | Workload::SaxpyGpu
            | Workload::CopyGpu => "gpu",
            _ => "wall",
        }
    }
}

/// A measured figure, or why there is none.
#[derive(Debug, Clone)]
pub enum Figure {
    Value(f64),
    Na(String),
}

/// One peer's result for one workload: the figure and how it was obtained.
#[derive(Debug, Clone)]
pub struct Entry {
    pub figure: Figure,
    pub how: String,
}

/// Everything one peer reports.
pub struct PeerReport {
    pub peer: &'static str,
    pub version: &'static str,
    /// What the peer ran on and with which options.
    pub setup: String,
    pub entries: Vec<(Workload, Entry)>,
    /// A check of a result failed (the run exits non-zero).
    pub failed: bool,
}

impl PeerReport {
    pub fn new(peer: &'static str, version: &'static str) -> PeerReport {
        PeerReport {
            peer,
            version,
            setup: String::new(),
            entries: Vec::new(),
            failed: false,
        }
    }

    /// Records a figure, or an n/a for an error (a failed check marks the
    /// report failed).
    pub fn put(&mut self, w: Workload, r: Result<f64, Fail>, how: impl Into<String>) {
        let figure = match r {
            Ok(v) => Figure::Value(v),
            Err(Fail::Na(reason)) => Figure::Na(reason),
            Err(Fail::Wrong(what)) => {
                self.failed = true;
                Figure::Na(format!("WRONG RESULT: {what}"))
            }
            Err(Fail::Error(e)) => Figure::Na(format!("error: {e}")),
        };
        self.entries.push((
            w,
            Entry {
                figure,
                how: how.into(),
            },
        ));
    }

    /// Records a failure for `w`, replacing its figure if it has one (a
    /// check after measuring failed).
    pub fn fail(&mut self, w: Workload, e: &Fail) {
        let how = match self.entries.iter().position(|(x, _)| *x == w) {
            Some(pos) => self.entries.remove(pos).1.how,
            None => String::new(),
        };
        self.put(w, Err(e.clone()), how);
    }

    pub fn na(&mut self, w: Workload, reason: impl Into<String>) {
        self.put(w, Err(Fail::Na(reason.into())), "");
    }

    fn get(&self, w: Workload) -> Option<&Entry> {
        self.entries.iter().find(|(x, _)| *x == w).map(|(_, e)| e)
    }
}

/// Why a workload has no figure.
#[derive(Debug, Clone)]
pub enum Fail {
    /// The peer cannot do it (its API has no way).
    Na(String),
    /// It ran, and the result was wrong.
    Wrong(String),
    /// An API call failed.
    Error(String),
}

impl<E: std::fmt::Display> From<E> for Fail {
    fn from(e: E) -> Fail {
        Fail::Error(e.to_string())
    }
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Median of `reps` runs of `f` after `warm` runs.
pub fn measure(
    warm: usize,
    reps: usize,
    mut f: impl FnMut() -> Result<f64, Fail>,
) -> Result<f64, Fail> {
    for _ in 0..warm {
        f()?;
    }
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps {
        v.push(f()?);
    }
    Ok(median(v))
}

pub fn us(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// GB/s for `bytes` moved in `d`.
pub fn gbps(bytes: f64, d: std::time::Duration) -> f64 {
    bytes / d.as_secs_f64() / 1e9
}

/// 2-D grid for `groups` workgroups with at most `max` per dimension.
pub fn grid(groups: u32, max: u32) -> (u32, u32) {
    let gy = groups.div_ceil(max).max(1);
    (groups.div_ceil(gy), gy)
}

/// The value the chain leaves in every element: x starts at 0 and each
/// step computes x = x*1 + 1.
pub fn check_chain(x: &[f32], steps: usize) -> Result<(), Fail> {
    match x.iter().position(|&v| v != steps as f32) {
        None => Ok(()),
        Some(i) => Err(Fail::Wrong(format!(
            "chain of {steps}: x[{i}] = {}, expected {steps}",
            x[i]
        ))),
    }
}

/// Indices to sample in an array of `n`: both ends, and spread between.
pub fn sample_indices(n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..16)
        .map(|k| k * (n / 16) + (k * 7919) % (n / 16).max(1))
        .collect();
    v.extend([0, 1, n / 2, n - 2, n - 1]);
    v.retain(|&i| i < n);
    v
}

/// Pattern the transfer and copy workloads move (word `i` of the buffer).
pub fn pattern(i: usize) -> u32 {
    (i as u32).wrapping_mul(2_654_435_761) ^ 0x5bd1_e995
}

/// saxpy inputs: exact in f32, so the check can use equality.
pub fn saxpy_x(i: usize) -> f32 {
    (i % 1000) as f32
}
pub fn saxpy_y0(i: usize) -> f32 {
    (i % 7) as f32
}
pub const SAXPY_A: f32 = 2.0;

/// Runs one peer, turning a panic (a wgpu validation error, say) into a
/// report whose every row is n/a.
fn run_peer(
    peer: &'static str,
    version: &'static str,
    f: impl FnOnce() -> PeerReport,
) -> PeerReport {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into());
            let mut r = PeerReport::new(peer, version);
            r.failed = true;
            for w in Workload::ALL {
                if r.get(w).is_none() {
                    r.na(
                        w,
                        format!("peer panicked: {}", msg.lines().next().unwrap_or("")),
                    );
                }
            }
            r
        }
    }
}

/// `peer`'s figure for `w` divided by the floor's in this process, where
/// both have one.
fn ratio_to_floor(peers: &[PeerReport], peer: &PeerReport, w: Workload) -> Option<f64> {
    let floor = peers.iter().find(|p| p.peer == "floor")?;
    if peer.peer == "floor" {
        return None;
    }
    match (peer.get(w)?.figure.clone(), floor.get(w)?.figure.clone()) {
        (Figure::Value(a), Figure::Value(b)) if b != 0.0 => Some(a / b),
        _ => None,
    }
}

fn cell(e: Option<&Entry>) -> String {
    match e.map(|e| &e.figure) {
        Some(Figure::Value(v)) if *v >= 100.0 => format!("{v:.1}"),
        Some(Figure::Value(v)) => format!("{v:.3}"),
        Some(Figure::Na(r)) => format!("n/a ({r})"),
        None => "n/a (not run)".into(),
    }
}

fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn json_report(cfg: &Config, adapter: &Adapter, quick: bool, peers: &[PeerReport]) -> String {
    let mut s = String::from("{\n");
    let _ = writeln!(s, "  \"adapter\": {},", json_str(&adapter.name));
    let _ = writeln!(s, "  \"driver\": {},", json_str(&adapter.driver));
    let _ = writeln!(s, "  \"quick\": {quick},");
    if let Some(n) = &cfg.copy_note {
        let _ = writeln!(s, "  \"copy_note\": {},", json_str(n));
    }
    s += "  \"peers\": {\n";
    for (i, p) in peers.iter().enumerate() {
        let _ = writeln!(
            s,
            "    {}: {{\"version\": {}, \"setup\": {}}}{}",
            json_str(p.peer),
            json_str(p.version),
            json_str(&p.setup),
            if i + 1 < peers.len() { "," } else { "" }
        );
    }
    s += "  },\n  \"rows\": [\n";
    for (i, w) in Workload::ALL.iter().enumerate() {
        let _ = write!(
            s,
            "    {{\"name\": {}, \"unit\": {}, \"clock\": {}, \"higher_is_better\": {}",
            json_str(&w.name(cfg)),
            json_str(w.unit()),
            json_str(w.clock()),
            w.unit() == "GB/s"
        );
        for p in peers {
            let e = p.get(*w);
            let (value, na) = match e.map(|e| &e.figure) {
                Some(Figure::Value(v)) => (v.to_string(), "null".to_string()),
                Some(Figure::Na(r)) => ("null".to_string(), json_str(r)),
                None => ("null".to_string(), json_str("not run")),
            };
            let how = e.map_or(String::new(), |e| e.how.clone());
            let ratio = ratio_to_floor(peers, p, *w).map_or("null".to_string(), |r| r.to_string());
            let _ = write!(
                s,
                ", {}: {{\"value\": {value}, \"na\": {na}, \"ratio_to_floor\": {ratio}, \"how\": {}}}",
                json_str(p.peer),
                json_str(&how)
            );
        }
        s += if i + 1 < Workload::ALL.len() {
            "},\n"
        } else {
            "}\n"
        };
    }
    s += "  ]\n}\n";
    s
}

fn print_table(cfg: &Config, adapter: &Adapter, peers: &[PeerReport]) {
    println!(
        "peers report: {} ({}, Vulkan {}.{}.{}), driver {}",
        adapter.name,
        adapter.type_name(),
        vk::api_version_major(adapter.api_version),
        vk::api_version_minor(adapter.api_version),
        vk::api_version_patch(adapter.api_version),
        adapter.driver
    );
    for p in peers {
        println!("  {} {}: {}", p.peer, p.version, p.setup);
    }
    if let Some(n) = &cfg.copy_note {
        println!("  note: {n}");
    }
    let mut lines: Vec<Vec<String>> = vec![{
        let mut h = vec!["workload".to_string(), "clock".to_string()];
        for p in peers {
            h.push(p.peer.to_string());
            if p.peer != "floor" {
                h.push("/floor".to_string());
            }
        }
        h
    }];
    for w in Workload::ALL {
        let mut l = vec![
            format!("{} ({})", w.name(cfg), w.unit()),
            w.clock().to_string(),
        ];
        for p in peers {
            l.push(cell(p.get(w)));
            if p.peer != "floor" {
                l.push(ratio_to_floor(peers, p, w).map_or("-".to_string(), |r| format!("{r:.2}×")));
            }
        }
        lines.push(l);
    }
    let cols = lines[0].len();
    let width: Vec<usize> = (0..cols)
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for l in &lines {
        let mut out = String::new();
        for (c, text) in l.iter().enumerate() {
            let pad = width[c] - text.chars().count();
            if c == 0 {
                out += text;
                out += &" ".repeat(pad);
            } else {
                out += "  ";
                out += &" ".repeat(pad);
                out += text;
            }
        }
        println!("{}", out.trim_end());
    }
    println!("how each figure was taken:");
    for p in peers {
        println!("  {}:", p.peer);
        for w in Workload::ALL {
            if let Some(e) = p.get(w) {
                if !e.how.is_empty() {
                    println!("    {} [{}]: {}", w.name(cfg), w.clock(), e.how);
                }
            }
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let json_path = args
        .iter()
        .position(|a| a == "--json")
        .and_then(|i| args.get(i + 1))
        .cloned();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("usage: peers_report [--json <path>]  (env: VKCOMPUTE_DEVICE, VKCOMPUTE_QUICK)");
        return;
    }
    let quick = std::env::var_os("VKCOMPUTE_QUICK").is_some();
    let adapters = match probe_adapters() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("peers_report: {e}");
            std::process::exit(2);
        }
    };
    let request = std::env::var("VKCOMPUTE_DEVICE").ok();
    let chosen = match pick_like_vkcompute(&adapters, request.as_deref()) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("peers_report: {e}");
            std::process::exit(2);
        }
    };
    let adapter = adapters[chosen].clone();
    let cfg = Config::new(quick, &adapter);
    eprintln!(
        "peers_report: adapter {}: {}{}",
        adapter.index,
        adapter.name,
        if quick { " (quick sizes)" } else { "" }
    );

    let wgpu_version = env!("PEERS_WGPU_VERSION");
    let scry_version = env!("PEERS_SCRY_VERSION");
    let t = std::time::Instant::now();
    let floor = run_peer("floor", "ash (hand-written)", || floor_peer::run(&cfg));
    eprintln!(
        "peers_report: floor done in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let t = std::time::Instant::now();
    let wgpu = run_peer("wgpu", wgpu_version, || {
        wgpu_peer::run(&cfg, &adapter, wgpu_version)
    });
    eprintln!(
        "peers_report: wgpu done in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let t = std::time::Instant::now();
    let scry_pick = pick_like_scry(&adapters);
    let scry = run_peer("scry-gpu", scry_version, || {
        if scry_pick != Some(adapter.index) {
            let theirs = scry_pick.map_or("none".to_string(), |i| adapters[i].name.clone());
            let mut r = PeerReport::new("scry-gpu", scry_version);
            r.setup = format!("not run: Device::auto picks {theirs}, not {}", adapter.name);
            for w in Workload::ALL {
                r.na(
                    w,
                    "scry-gpu cannot choose an adapter: Device::auto takes the first discrete GPU",
                );
            }
            r
        } else {
            scry_peer::run(&cfg, &adapter, scry_version)
        }
    });
    eprintln!(
        "peers_report: scry-gpu done in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let peers = [floor, wgpu, scry];
    print_table(&cfg, &adapter, &peers);
    if let Some(path) = json_path {
        if let Err(e) = std::fs::write(&path, json_report(&cfg, &adapter, quick, &peers)) {
            eprintln!("peers_report: could not write {path}: {e}");
            std::process::exit(2);
        }
    }
    if peers.iter().any(|p| p.failed) {
        eprintln!("peers_report: a result check failed (see WRONG RESULT above)");
        std::process::exit(1);
    }
}
