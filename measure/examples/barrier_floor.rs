//! What the driver charges for one dependency between dispatches, by the
//! form the dependency is recorded in: the floor's chain of `n` dependent
//! tiny dispatches (x = x + 1 over 1024 floats, hand-written ash, no
//! library code) ordered by each [`BarrierKind`] in turn, and the same
//! dispatches with no dependency at all.
//!
//! For each chain length (`--lengths`, default 100,1000) and each kind it
//! warms once, then runs `--reps` rounds (default 30), the kinds
//! interleaved within each round so that a drift of the card's clocks
//! touches all alike. Each run records, submits and waits; its GPU time
//! comes from two timestamps. Prints min / median / max µs per dispatch,
//! the median's ratio to `global` (the library's form), and whether the
//! chain's values were right: every kind that orders memory is checked
//! (a wrong value panics); `exec-only` and `none` are only reported.
//!
//! ```text
//! cargo run --release -p vkcompute-measure --example barrier_floor -- [--lengths 100,1000] [--reps 30] [--kinds global,sync2,...]
//! ```

use vkcompute_measure::floor::barriers::BarrierKind;
use vkcompute_measure::floor::Floor;
use vkcompute_measure::probe::min_median_max;

/// A row: a kind, or none (the dispatches with no dependency).
type Row = Option<BarrierKind>;

fn row_name(r: Row) -> &'static str {
    r.map_or("none", BarrierKind::name)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let lengths: Vec<usize> = value("--lengths")
        .unwrap_or_else(|| "100,1000".into())
        .split(',')
        .map(|s| s.trim().parse().expect("--lengths: whole numbers"))
        .collect();
    let reps: usize = value("--reps").map_or(30, |s| s.parse().expect("--reps: a whole number"));
    let mut fl = Floor::new();
    println!("floor: {}", fl.description);
    let mut rows: Vec<Row> = match value("--kinds") {
        Some(list) => list
            .split(',')
            .map(|s| {
                let s = s.trim();
                (s != "none").then(|| {
                    BarrierKind::parse(s).unwrap_or_else(|| panic!("--kinds: no kind {s}"))
                })
            })
            .collect(),
        None => BarrierKind::ALL
            .into_iter()
            .map(Some)
            .chain([None])
            .collect(),
    };
    rows.retain(|r| match r {
        Some(k) if k.needs_sync2() && !fl.has_sync2() => {
            println!(
                "skipped: {} needs synchronization2, which this device lacks",
                k.name()
            );
            false
        }
        _ => true,
    });
    for &n in &lengths {
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); rows.len()];
        let mut right = vec![true; rows.len()];
        for round in 0..=reps {
            for (i, &r) in rows.iter().enumerate() {
                let (gpu, _wall, ok) = match r {
                    Some(k) => fl.chain_gpu_kind(n, k),
                    None => {
                        let (g, w) = fl.independent_gpu(n);
                        (g, w, false)
                    }
                };
                if round > 0 {
                    times[i].push(gpu.as_secs_f64() * 1e6 / n as f64);
                    right[i] &= ok;
                }
            }
        }
        let stats: Vec<(f64, f64, f64)> = times
            .iter_mut()
            .map(|t| {
                t.sort_by(f64::total_cmp);
                min_median_max(t)
            })
            .collect();
        let base = rows
            .iter()
            .position(|r| *r == Some(BarrierKind::Global))
            .map(|i| stats[i].1);
        println!("chain of {n} dispatches, {reps} rounds: GPU µs per dispatch");
        println!("  kind        min     median  max     /global  values");
        for (i, &r) in rows.iter().enumerate() {
            let (lo, med, hi) = stats[i];
            let ratio = base.map_or("-".into(), |b| format!("{:.2}", med / b));
            let values = match r {
                None => "unordered (not checked)",
                Some(k) if !k.orders_memory() => {
                    if right[i] {
                        "right (not ordered: luck)"
                    } else {
                        "wrong (not ordered)"
                    }
                }
                Some(_) => "right",
            };
            println!(
                "  {:<10} {lo:7.3} {med:7.3} {hi:7.3}  {ratio:>6}   {values}",
                row_name(r)
            );
        }
    }
    let msgs = fl.validation_messages();
    println!("validation messages: {msgs}");
}
