//! The floor of streaming weights through a chain of dependent launches:
//! what a model's layers cost when each reads its bytes once and the next
//! waits for it, with the simplest read kernel there is.
//!
//! For each size S (`--sizes-mb`, default 25,50,100,200,400) it makes
//! enough buffers of S bytes that a chain of `--launches` dispatches
//! (default 72, the FFN stack's count) cycling through them reads from
//! memory, not L2 (at least `--total-gb` in all, default 2; at most one
//! buffer per launch),
//! and records the chain as a graph: each dispatch reads its buffer with
//! 16-byte loads (grid-stride, `ILP` loads in flight per invocation before
//! any is used), folds what it read into one word per workgroup, and adds 1
//! to a shared counter, which orders it after the previous one (the
//! batch's automatic barrier, as between a model's layers). Two grids per
//! size: `resident`, the compute units × their resident workgroups of 256
//! (each looping over the buffer), and `one-shot`, one workgroup per
//! 256 × ILP loads (each invocation loads once per ILP and ends).
//!
//! `--overlap` (with `--pattern`) also times the chain with no barrier
//! between its dispatches: each dispatch issues its first `ILP` loads,
//! then waits in the kernel (one invocation per workgroup spinning on an
//! atomic) until every workgroup of the dispatch before it has arrived,
//! and arrives itself when done: what a consumer that fetches its weights
//! before its input is ready could save against the barrier's drain.
//!
//! `--restrict` declares the read buffer `restrict readonly` (the
//! compiler may assume nothing else writes it) instead of `readonly`.
//!
//! `--spin-wait` waits for each launch by polling its ticket instead of
//! `Ticket::wait` (which blocks, paced by the launches it has seen).
//!
//! Checked once per kernel (every pipeline of `--kernels`): one dispatch's
//! words fold to the buffer's own XOR, and the counter reads 1.
//!
//! `--pattern A,B,...` (MB) times one chain instead whose dispatch j reads a
//! buffer of the pattern's size j mod its length (an FFN layer's gate|up
//! and down: `--pattern 99.6,49.8`), and `--kernels N` makes dispatch j use
//! pipeline j mod N of N builds of the same kernel that differ only in a
//! constant (a model's layers alternate pipelines); the profile then gives
//! each place of the pattern its median GPU time. Timed: warmed for 300 ms,
//! then `--reps` graph launches (wall, launch to wait), min / median / max µs
//! per dispatch and the median's GB/s beside the copy bandwidth measured
//! in the same process; one profiled launch gives the median dispatch's GPU
//! time. Then a least-squares line over the sizes: µs = fixed + S / rate,
//! the per-launch cost no read kernel avoids and the streaming rate.
//!
//! ```text
//! cargo run --release -p vkcompute-measure --example stream_floor -- [--sizes-mb 25,50,100] [--launches 72] [--reps 20] [--ilp 4]
//!     [--pattern 99.6,49.8 [--overlap]] [--kernels 2] [--total-gb 2] [--spin-wait] [--restrict]
//! ```

use std::time::{Duration, Instant};

use vkcompute::{Buffer, Device, Graph, Kernel, Profiling, Result};
use vkcompute_measure::bandwidth;
use vkcompute_measure::probe::min_median_max;

const LOCAL: u32 = 256;

/// GLSL: `ilp` 16-byte loads into `v` from `base`, `stride` apart.
fn loads(ilp: u32, base: &str) -> String {
    format!(
        "for (uint k = 0u; k < {ilp}u; ++k) {{ uint i = {base} + k * stride; v[k] = i < n4 ? w[i] : uvec4(0u); }}"
    )
}

/// GLSL: the read loop from `first` on (loads as [`loads`], XORed into
/// `acc`), then the fold of `acc` into the workgroup's word of `d`.
fn read_rest(ilp: u32, first: &str) -> String {
    let load = loads(ilp, "base");
    format!(
        r#"for (uint base = {first}; base < n4; base += stride * {ilp}u) {{
        {load}
        for (uint k = 0u; k < {ilp}u; ++k) acc ^= v[k];
    }}
    uint x = subgroupXor(acc.x ^ acc.y ^ acc.z ^ acc.w);
    if (subgroupElect()) atomicXor(d[1u + gl_WorkGroupID.x], x);"#
    )
}

/// `src` with its read buffer declared `restrict` when `restrict` is set
/// (the compiler may then assume nothing else writes it).
fn restricted(src: &str, restrict: bool) -> String {
    if restrict {
        let out = src.replace("readonly buffer W", "restrict readonly buffer W");
        assert!(
            out != src,
            "stream_floor: no read buffer W to declare restrict"
        );
        out
    } else {
        src.to_string()
    }
}

/// The read kernel with `ilp` loads in flight per invocation; `variant`
/// changes only a constant (distinct SPIR-V, so a distinct pipeline).
fn source(ilp: u32, variant: u32) -> String {
    let rest = read_rest(ilp, "gl_GlobalInvocationID.x");
    format!(
        r#"#version 450
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = {LOCAL}) in;
layout(set = 0, binding = 0) readonly buffer W {{ uvec4 w[]; }};
layout(set = 0, binding = 1) buffer D {{ uint d[]; }};
layout(push_constant) uniform P {{ uint n4; }};
void main() {{
    uint stride = gl_NumWorkGroups.x * {LOCAL}u;
    uvec4 acc = uvec4(0u);
    uvec4 v[{ilp}];
    {rest}
    if (gl_GlobalInvocationID.x == 0u) d[0] += 1u;
    if (n4 == 0xFFFFFFFFu - {variant}u) d[0] = {variant}u;
}}
"#
    )
}

/// The read kernel of `--overlap`: [`source`]'s loop, its first loads
/// issued before an in-kernel wait for the dispatch before it (`slot` −
/// 1's counter reaching `prev` workgroups, at most 2^24 polls: past that
/// it sets bit 1 of `d[0]`), then its own arrival. The last dispatch's
/// last workgroup to arrive zeroes every counter for the next launch.
fn overlap_source(ilp: u32, variant: u32) -> String {
    let first = loads(ilp, "gl_GlobalInvocationID.x");
    let rest = read_rest(ilp, &format!("gl_GlobalInvocationID.x + stride * {ilp}u"));
    format!(
        r#"#version 450
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = {LOCAL}) in;
layout(set = 0, binding = 0) readonly buffer W {{ uvec4 w[]; }};
layout(set = 0, binding = 1) buffer D {{ uint d[]; }};
layout(set = 0, binding = 2) coherent buffer C {{ uint c[]; }};
layout(push_constant) uniform P {{ uint n4; uint slot; uint prev; uint last; }};
shared uint late;
void main() {{
    uint stride = gl_NumWorkGroups.x * {LOCAL}u;
    uvec4 acc = uvec4(0u);
    uvec4 v[{ilp}];
    {first}
    if (gl_LocalInvocationIndex == 0u) {{
        late = 0u;
        if (slot > 0u) {{
            uint it = 0u;
            while (atomicAdd(c[slot - 1u], 0u) < prev) {{
                if (++it > (1u << 24)) {{ late = 1u; break; }}
            }}
        }}
    }}
    barrier();
    memoryBarrierBuffer();
    for (uint k = 0u; k < {ilp}u; ++k) acc ^= v[k];
    {rest}
    barrier();
    if (gl_LocalInvocationIndex == 0u) {{
        memoryBarrierBuffer();
        if (late != 0u) atomicOr(d[0], 2u);
        if (gl_WorkGroupID.x == 0u) atomicAdd(d[0], 4u);
        uint before = atomicAdd(c[slot], 1u);
        if (slot + 1u == last && before + 1u == gl_NumWorkGroups.x) {{
            for (uint s = 0u; s < last; ++s) atomicExchange(c[s], 0u);
        }}
    }}
    if (n4 == 0xFFFFFFFFu - {variant}u) d[0] = {variant}u;
}}
"#
    )
}

struct Args {
    sizes_mb: Vec<u64>,
    launches: usize,
    reps: usize,
    ilp: u32,
    pattern: Option<Vec<f64>>,
    kernels: u32,
    /// Bytes the buffers of a chain hold at least (`--total-gb`).
    total: u64,
    /// Wait by polling the ticket (`--spin-wait`) instead of `wait`.
    spin: bool,
    /// Also time the pattern with in-kernel waits and no barriers.
    overlap: bool,
    /// Declare the read buffer `restrict` (`--restrict`).
    restrict: bool,
}

fn args() -> Args {
    let argv: Vec<String> = std::env::args().collect();
    let flag = |name: &str| {
        argv.iter()
            .position(|a| a == name)
            .and_then(|i| argv.get(i + 1).cloned())
    };
    let num = |name: &str, d: usize| flag(name).map_or(d, |v| v.parse().expect(name));
    let quick = bandwidth::quick();
    Args {
        sizes_mb: flag("--sizes-mb")
            .unwrap_or_else(|| {
                if quick {
                    "4,8".into()
                } else {
                    "25,50,100,200,400".into()
                }
            })
            .split(',')
            .map(|s| s.trim().parse().expect("--sizes-mb takes numbers"))
            .collect(),
        launches: num("--launches", if quick { 8 } else { 72 }),
        reps: num("--reps", if quick { 3 } else { 20 }),
        ilp: num("--ilp", 4) as u32,
        pattern: flag("--pattern").map(|v| {
            v.split(',')
                .map(|s| s.trim().parse().expect("--pattern takes MB values"))
                .collect()
        }),
        kernels: num("--kernels", 1).max(1) as u32,
        spin: argv.iter().any(|a| a == "--spin-wait"),
        overlap: argv.iter().any(|a| a == "--overlap"),
        restrict: argv.iter().any(|a| a == "--restrict"),
        total: flag("--total-gb").map_or(2_000_000_000, |v| {
            (v.parse::<f64>().expect("--total-gb takes a number") * 1e9) as u64
        }),
    }
}

/// The grid of each form for `n4` 16-byte loads.
fn grids(gpu: &Device, n4: u64, ilp: u32) -> Vec<(&'static str, u32)> {
    let info = gpu.info();
    let per_unit = (info.max_threads_per_compute_unit / LOCAL).max(1);
    let resident = if info.compute_units > 0 {
        info.compute_units * per_unit
    } else {
        256
    };
    let one_shot = n4.div_ceil(u64::from(LOCAL * ilp)) as u32;
    let most = info.max_workgroup_count[0];
    vec![
        ("resident", resident.min(most)),
        ("one-shot", one_shot.min(most)),
    ]
}

fn xor_of(words: &[u32]) -> u32 {
    words.iter().fold(0, |a, &w| a ^ w)
}

/// The check of kernel `k` over `groups` workgroups: one dispatch over
/// `buf` adds 1 to the counter and its workgroups' words fold to the
/// buffer's own XOR (panics naming `what` otherwise).
fn check(gpu: &Device, k: &Kernel, buf: &Buffer<u32>, groups: u32, what: &str) -> Result<()> {
    let d = gpu.upload(&vec![0u32; 1 + groups as usize])?;
    let one = record(
        gpu,
        std::slice::from_ref(k),
        std::slice::from_ref(buf),
        &d,
        groups,
        1,
        Profiling::Off,
    )?;
    one.launch()?.wait()?;
    let got = d.download()?;
    assert_eq!(got[0], 1, "{what}: the counter");
    assert_eq!(
        xor_of(&got[1..]),
        xor_of(&buf.download()?),
        "{what}: the fold of what was read"
    );
    Ok(())
}

/// Host words of buffer `b` of `words` words (distinct per buffer).
fn host_words(words: usize, b: usize) -> Vec<u32> {
    (0..words)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761) ^ (b as u32))
        .collect()
}

/// The `--pattern` chain: dispatch j reads the next buffer of size
/// `pattern[j mod len]` (enough buffers of each size for `--total-gb` in
/// all, at most one per dispatch) with
/// kernel j mod `ks.len()`, over the resident grid.
fn pattern(gpu: &Device, a: &Args, ks: &[Kernel], pat: &[f64], copy: f64) -> Result<()> {
    let sizes: Vec<u64> = pat.iter().map(|mb| (mb * 1e6) as u64 / 16 * 16).collect();
    let per_round: u64 = sizes.iter().sum();
    let rounds =
        (a.total.div_ceil(per_round) as usize).clamp(1, a.launches.div_ceil(pat.len()).max(1));
    // bufs[r * len + p]: round r's buffer of place p.
    let mut bufs = Vec::new();
    for r in 0..rounds {
        for (p, &b) in sizes.iter().enumerate() {
            bufs.push(gpu.upload(&host_words((b / 4) as usize, r * pat.len() + p))?);
        }
    }
    let (form, groups) = grids(gpu, sizes[0] / 16, a.ilp)[0];
    let d = gpu.upload(&vec![0u32; 1 + groups as usize])?;
    let launches = a.launches / pat.len() * pat.len();
    for (v, k) in ks.iter().enumerate() {
        check(gpu, k, &bufs[0], groups, &format!("pattern, pipeline {v}"))?;
    }
    let g = record(gpu, ks, &bufs, &d, groups, launches, Profiling::Off)?;
    let (lo, med, hi) = time(&g, a.reps, (launches / pat.len()) as f64, a.spin)?;
    let gbps = per_round as f64 / med / 1e3;
    println!(
        "pattern {pat:?} MB, {} pipeline(s), {form} grid of {groups}, {launches} dispatches ({rounds} buffer rounds): {lo:.2} / {med:.2} / {hi:.2} µs per round of the pattern (min / median / max), {gbps:.1} GB/s = {:.3}× copy",
        ks.len(),
        gbps / copy
    );
    let pg = record(gpu, ks, &bufs, &d, groups, launches, Profiling::Commands)?;
    pg.launch()?.wait()?;
    let prof = pg.last_profile()?;
    for (p, mb) in pat.iter().enumerate() {
        let mut v: Vec<f64> = prof
            .commands
            .iter()
            .skip(p)
            .step_by(pat.len())
            .map(|c| c.gpu_ns / 1e3)
            .collect();
        v.sort_by(f64::total_cmp);
        println!(
            "  place {p} ({mb} MB): profiled dispatch median {:.2} µs",
            v[v.len() / 2]
        );
    }
    if a.overlap {
        overlap(gpu, a, &bufs, groups, launches, per_round, pat.len(), copy)?;
    }
    Ok(())
}

/// `--overlap`: the pattern's chain with [`overlap_source`]'s kernels,
/// recorded once with the batch's barriers (the waits then find their
/// counters full) and once with none (the waits order the dispatches).
/// Checked first: one dispatch folds to its buffer's XOR, and a chain of
/// `launches` ends with every counter zeroed and no wait timed out.
#[allow(clippy::too_many_arguments)]
fn overlap(
    gpu: &Device,
    a: &Args,
    bufs: &[Buffer<u32>],
    groups: u32,
    launches: usize,
    per_round: u64,
    places: usize,
    copy: f64,
) -> Result<()> {
    let ks: Vec<Kernel> = (0..a.kernels)
        .map(|v| {
            Kernel::builder(gpu)
                .glsl(&restricted(&overlap_source(a.ilp, v), a.restrict))
                .label(&format!("stream_read_overlap_{v}"))
                .build()
        })
        .collect::<Result<_>>()?;
    let c = gpu.upload(&vec![0u32; launches])?;
    let d = gpu.upload(&vec![0u32; 1 + groups as usize])?;
    let one = record_overlap(gpu, &ks, &bufs[..1], &d, &c, groups, 1, true)?;
    one.launch()?.wait()?;
    let got = d.download()?;
    assert_eq!(got[0], 4, "overlap: the count and no late wait");
    assert_eq!(
        xor_of(&got[1..]),
        xor_of(&bufs[0].download()?),
        "overlap: the fold of what was read"
    );
    for barriers in [true, false] {
        let g = record_overlap(gpu, &ks, bufs, &d, &c, groups, launches, barriers)?;
        d.write(0, &vec![0u32; 1 + groups as usize])?;
        g.launch()?.wait()?;
        let got = d.download()?;
        assert_eq!(
            got[0],
            4 * launches as u32,
            "overlap chain: counts, no late wait"
        );
        assert!(
            c.download()?.iter().all(|&v| v == 0),
            "overlap chain: counters reset"
        );
        let (lo, med, hi) = time(&g, a.reps, (launches / places) as f64, a.spin)?;
        assert_eq!(d.download()?[0] & 2, 0, "overlap chain: a wait timed out");
        let gbps = per_round as f64 / med / 1e3;
        println!(
            "overlap kernels, {}: {lo:.2} / {med:.2} / {hi:.2} µs per round of the pattern (min / median / max), {gbps:.1} GB/s = {:.3}× copy",
            if barriers { "barriers between dispatches" } else { "no barriers, in-kernel waits" },
            gbps / copy
        );
    }
    Ok(())
}

/// The `--overlap` chain: dispatch j reads buffer j mod len with kernel j
/// mod len, waiting for dispatch j − 1 in the kernel; with `barriers` the
/// batch's automatic barriers stay on as well.
#[allow(clippy::too_many_arguments)]
fn record_overlap(
    gpu: &Device,
    ks: &[Kernel],
    bufs: &[Buffer<u32>],
    d: &Buffer<u32>,
    c: &Buffer<u32>,
    groups: u32,
    launches: usize,
    barriers: bool,
) -> Result<Graph> {
    let mut rec = gpu.graph_recorder()?;
    rec.set_auto_barriers(barriers);
    for j in 0..launches {
        let w = &bufs[j % bufs.len()];
        let pc = [(w.len() / 4) as u32, j as u32, groups, launches as u32];
        let k = &ks[j % ks.len()];
        rec.run_configured(k, &[w, d, c], [groups, 1, 1], Some(bytemuck::bytes_of(&pc)))?;
    }
    rec.finish()
}

/// Waits for `g`'s next launch: `Ticket::wait` (the default, paced), or
/// with `spin` a poll of `Ticket::is_ready` until done.
fn launch_wait(g: &Graph, spin: bool) -> Result<()> {
    let t = g.launch()?;
    if spin {
        while !t.is_ready()? {
            std::hint::spin_loop();
        }
    }
    t.wait()
}

/// Launches `g` for 300 ms untimed, then `reps` times: min / median / max
/// wall µs per launch divided by `per` (waits as [`launch_wait`]).
fn time(g: &Graph, reps: usize, per: f64, spin: bool) -> Result<(f64, f64, f64)> {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(300) {
        launch_wait(g, spin)?;
    }
    let mut v: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            launch_wait(g, spin)?;
            Ok(s.elapsed().as_secs_f64() * 1e6 / per)
        })
        .collect::<Result<_>>()?;
    v.sort_by(f64::total_cmp);
    Ok(min_median_max(&v))
}

/// The chain: dispatch j reads buffer j mod len with kernel j mod len.
fn record(
    gpu: &Device,
    ks: &[Kernel],
    bufs: &[Buffer<u32>],
    d: &Buffer<u32>,
    groups: u32,
    launches: usize,
    profiling: Profiling,
) -> Result<Graph> {
    let mut rec = gpu.graph_recorder_with(profiling)?;
    for j in 0..launches {
        let w = &bufs[j % bufs.len()];
        let n4 = (w.len() / 4) as u32;
        let k = &ks[j % ks.len()];
        rec.run_configured(k, &[w, d], [groups, 1, 1], Some(bytemuck::bytes_of(&n4)))?;
    }
    rec.finish()
}

fn main() -> Result<()> {
    let a = args();
    let gpu = Device::new()?;
    let info = gpu.info();
    println!(
        "{} ({} compute units, {} threads each); {} launches per chain, {} reps, ILP {}{}",
        info.name,
        info.compute_units,
        info.max_threads_per_compute_unit,
        a.launches,
        a.reps,
        a.ilp,
        if a.restrict {
            ", read buffer restrict"
        } else {
            ""
        }
    );
    let copy = {
        let c = bandwidth::Copy::new(&gpu, bandwidth::copy_bytes(info))?;
        for _ in 0..3 {
            c.run_gpu()?;
        }
        let mut v: Vec<f64> = (0..9)
            .map(|_| c.run_gpu().map(|d| d.as_secs_f64()))
            .collect::<Result<_>>()?;
        c.check().expect("copy result");
        v.sort_by(f64::total_cmp);
        c.bytes() as f64 / v[4] / 1e9
    };
    println!("copy bandwidth (Batch::copy, read + write, GPU time): {copy:.1} GB/s");
    let ks: Vec<Kernel> = (0..a.kernels)
        .map(|v| {
            Kernel::builder(&gpu)
                .glsl(&restricted(&source(a.ilp, v), a.restrict))
                .label(&format!("stream_read_{v}"))
                .build()
        })
        .collect::<Result<_>>()?;
    if let Some(p) = &a.pattern {
        return pattern(&gpu, &a, &ks, p, copy);
    }
    let k = &ks[..1];
    let mut fits: Vec<(&'static str, Vec<(f64, f64)>)> = Vec::new();
    for &mb in &a.sizes_mb {
        let bytes = mb * 1_000_000 / 16 * 16;
        let words = (bytes / 4) as usize;
        let count = (a.total.div_ceil(bytes) as usize).clamp(1, a.launches.max(1));
        let bufs: Vec<Buffer<u32>> = (0..count)
            .map(|b| gpu.upload(&host_words(words, b)))
            .collect::<Result<_>>()?;
        let n4 = (words / 4) as u64;
        for (form, groups) in grids(&gpu, n4, a.ilp) {
            check(&gpu, &k[0], &bufs[0], groups, &format!("{form} {mb} MB"))?;
            let d = gpu.upload(&vec![0u32; 1 + groups as usize])?;
            let g = record(&gpu, k, &bufs, &d, groups, a.launches, Profiling::Off)?;
            let (lo, med, hi) = time(&g, a.reps, a.launches as f64, a.spin)?;
            let pg = record(&gpu, k, &bufs, &d, groups, a.launches, Profiling::Commands)?;
            pg.launch()?.wait()?;
            let mut gpu_us: Vec<f64> = pg
                .last_profile()?
                .commands
                .iter()
                .map(|c| c.gpu_ns / 1e3)
                .collect();
            gpu_us.sort_by(f64::total_cmp);
            let gmed = gpu_us[gpu_us.len() / 2];
            let gbps = bytes as f64 / med / 1e3;
            println!(
                "{mb:5} MB × {count:3} buffers, {form:<8} {groups:6} workgroups: {lo:8.2} / {med:8.2} / {hi:8.2} µs per dispatch (min / median / max), {gbps:7.1} GB/s = {:.3}× copy; profiled dispatch {gmed:8.2} µs",
                gbps / copy
            );
            match fits.iter_mut().find(|(f, _)| *f == form) {
                Some((_, v)) => v.push((bytes as f64, med)),
                None => fits.push((form, vec![(bytes as f64, med)])),
            }
        }
    }
    for (form, pts) in fits {
        if pts.len() < 2 {
            continue;
        }
        let n = pts.len() as f64;
        let (sx, sy) = pts.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
        let (mx, my) = (sx / n, sy / n);
        let sxx: f64 = pts.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
        let sxy: f64 = pts.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
        let slope = sxy / sxx; // µs per byte
        let fixed = my - slope * mx;
        println!(
            "{form}: µs per dispatch ≈ {fixed:.2} + bytes / {:.1} GB/s ({:.3}× copy)",
            1e-3 / slope,
            1e-3 / slope / copy
        );
    }
    Ok(())
}
