//! An op batch finished into a graph (`ops.graph()`): the same plan as an
//! execute (results bit for bit, the same dispatch count), per-launch
//! inputs through imported buffers, `Params` and the transformer ops'
//! word buffers, launches on other streams, after tickets and with a
//! capture pool, imports of buffer slices, and intermediates reused by
//! liveness without losing a held value.
//!
//! Bounds: element-wise results within 1e-5 relative of an f64 reference
//! (one or two f32 roundings); a matmul of K = 64 terms in [-1, 1] within
//! 1e-3 absolute; the liveness chain is checked bit for bit against the
//! same f32 operations on the CPU (negation and one IEEE addition per
//! step).

mod common;

use vkcompute::ops::{nn, OpBatchOptions};
use vkcompute::{CapturePool, Error};

fn options(fused: bool) -> OpBatchOptions {
    OpBatchOptions::default().with_fusion(fused)
}

fn close(got: &[f32], want: &[f64], rel: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(g) - w).abs();
        assert!(
            err <= rel * w.abs().max(1e-30),
            "{what}: element {i}: got {g}, want {w} (error {err:e})"
        );
    }
}

/// Exact (erf) GELU, as the op computes it.
fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))
}

/// erf to ~1e-12 (Taylor series below 3, the continued fraction above).
fn erf(x: f64) -> f64 {
    let (s, x) = if x < 0.0 { (-1.0, -x) } else { (1.0, x) };
    if x < 3.0 {
        let mut term = x;
        let mut sum = x;
        let mut n = 0.0;
        while term.abs() > 1e-17 * sum.abs() {
            n += 1.0;
            term *= -x * x / n;
            sum += term / (2.0 * n + 1.0);
        }
        s * sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        // erfc continued fraction (Lentz), ample at x >= 3.
        let mut f = x;
        for k in (1..60).rev() {
            f = x + f64::from(k) / 2.0 / f;
        }
        let erfc = (-x * x).exp() / (f * std::f64::consts::PI.sqrt());
        s * (1.0 - erfc)
    }
}

#[test]
fn a_graph_gives_what_execute_gives_and_the_cpu() {
    let gpu = common::gpu();
    let mut rng = common::Rng::new(71);
    let (m, k, n) = (8u32, 64u32, 16u32);
    let a = rng.vec_f32((m * k) as usize);
    let w = rng.vec_f32((k * n) as usize);
    let bias = rng.vec_f32(n as usize);
    let v = rng.vec_f32(1000);
    let u = rng.vec_f32(1000);
    for fused in [true, false] {
        let mut ops = gpu.ops_with(options(fused));
        let ta = ops.upload_matrix(&a, m, k).unwrap();
        let tw = ops.upload_matrix(&w, k, n).unwrap();
        let tb = ops.upload(&bias).unwrap();
        let (tv, tu) = (ops.upload(&v).unwrap(), ops.upload(&u).unwrap());
        // matmul + bias + gelu (an epilogue when fused), an element-wise
        // run, and a sum taking the run as its prologue.
        let h = ops.matmul(&ta, &tw).unwrap();
        let h = ops.add_row(&h, &tb).unwrap();
        let h = ops.gelu(&h).unwrap();
        let s = ops.scale(&tv, 3.0).unwrap();
        let r = ops.add(&s, &tu).unwrap();
        drop(s);
        let r = ops.relu(&r).unwrap();
        let total = ops.sum(&r).unwrap();
        ops.execute_blocking().unwrap();
        let by_execute = (
            ops.read(&h).unwrap(),
            ops.read(&r).unwrap(),
            ops.read(&total).unwrap(),
        );
        let dispatches = ops.num_dispatches().unwrap();
        if fused && cfg!(feature = "glsl") {
            assert!(dispatches <= 3, "fused: {dispatches} dispatches");
        }
        let graph = ops.graph().unwrap();
        assert_eq!(graph.num_commands(), dispatches as u64, "fused: {fused}");
        assert_eq!(ops.num_dispatches(), Some(dispatches), "no new plan");
        graph.launch().unwrap().wait().unwrap();
        let by_graph = (
            ops.read(&h).unwrap(),
            ops.read(&r).unwrap(),
            ops.read(&total).unwrap(),
        );
        assert_eq!(by_graph, by_execute, "fused: {fused}");
        // Against the CPU.
        let mut want_h = Vec::new();
        for i in 0..m as usize {
            for j in 0..n as usize {
                let dot: f64 = (0..k as usize)
                    .map(|p| f64::from(a[i * k as usize + p]) * f64::from(w[p * n as usize + j]))
                    .sum();
                want_h.push(gelu(dot + f64::from(bias[j])));
            }
        }
        for (i, (&g, &want)) in by_graph.0.iter().zip(&want_h).enumerate() {
            assert!(
                (f64::from(g) - want).abs() <= 1e-3,
                "h[{i}] = {g} vs {want}"
            );
        }
        let want_r: Vec<f64> = v
            .iter()
            .zip(&u)
            .map(|(&v, &u)| (3.0 * f64::from(v) + f64::from(u)).max(0.0))
            .collect();
        close(&by_graph.1, &want_r, 1e-5, "relu(3v + u)");
        let want_total: f64 = want_r.iter().sum();
        let bound = want_r.iter().sum::<f64>() * 1e-6 * 1000.0 + 1e-6;
        let got = f64::from(by_graph.2[0]);
        assert!(
            (got - want_total).abs() <= bound,
            "sum {got} vs {want_total}"
        );
        // An execute after the graph: the same plan, the same buffers.
        let before = gpu.stats().buffers;
        ops.execute_blocking().unwrap();
        assert_eq!(gpu.stats().buffers, before, "the execute allocated");
        assert_eq!(ops.read(&total).unwrap(), by_execute.2);
        assert_eq!(graph.num_replays(), 1);
    }
    common::assert_clean(&gpu);
}

#[test]
fn three_launches_through_an_imported_buffer_each_see_their_own_input() {
    let gpu = common::gpu();
    let input = gpu.upload(&[0.0f32; 256]).unwrap();
    let acc = gpu.upload(&[0.0f32; 256]).unwrap();
    for fused in [true, false] {
        acc.write(0, &[0.0; 256]).unwrap();
        let mut ops = gpu.ops_with(options(fused));
        let x = ops.import(&input).unwrap();
        let a = ops.import(&acc).unwrap();
        let y = ops.scale(&x, 2.0).unwrap();
        ops.add_(&a, &y).unwrap(); // acc += 2x at each launch
        let graph = ops.graph().unwrap();
        // No host wait between launches: each write waits for the launch
        // before it (it uses the buffer), so each launch reads its own.
        for step in 0..3 {
            let data: Vec<f32> = (0..256).map(|i| (i as f32) * 10f32.powi(step)).collect();
            input.write(0, &data).unwrap();
            let _in_flight = graph.launch().unwrap();
        }
        let want: Vec<f32> = (0..256).map(|i| 2.0 * 111.0 * i as f32).collect();
        assert_eq!(acc.download().unwrap(), want, "fused: {fused}");
        assert_eq!(ops.read(&a).unwrap(), want);
        assert_eq!(graph.num_replays(), 3);
    }
    common::assert_clean(&gpu);
}

#[test]
fn params_give_each_launch_its_value_and_each_execute_the_current_one() {
    let gpu = common::gpu();
    let p = gpu.params([1.0f32; 8]).unwrap();
    let acc = gpu.upload(&[0.0f32; 8]).unwrap();
    for fused in [true, false] {
        acc.write(0, &[0.0; 8]).unwrap();
        p.set([1.0; 8]);
        let mut ops = gpu.ops_with(options(fused));
        let t = ops.import_params(&p).unwrap();
        let again = ops.import_params(&p).unwrap(); // same storage
        let a = ops.import(&acc).unwrap();
        let scaled = ops.scale(&again, 1.0).unwrap();
        ops.add_(&a, &scaled).unwrap();
        let doubled = ops.scale(&t, 2.0).unwrap();
        let graph = ops.graph().unwrap();
        // Three launches in flight, the value changed between them.
        let mut last = None;
        for (i, value) in [1.0f32, 10.0, 100.0].into_iter().enumerate() {
            let mut v = [value; 8];
            v[7] = value + i as f32;
            p.set(v);
            last = Some(graph.launch().unwrap());
        }
        last.unwrap().wait().unwrap();
        let mut want = [111.0f32; 8];
        want[7] = 111.0 + 3.0;
        assert_eq!(acc.download().unwrap(), want, "fused: {fused}");
        // The last launch's own results.
        let mut want_d = [200.0f32; 8];
        want_d[7] = 204.0;
        assert_eq!(ops.read(&doubled).unwrap(), want_d);
        // An execute reads the value current at the execute.
        p.set([0.5; 8]);
        ops.execute_blocking().unwrap();
        assert_eq!(ops.read(&doubled).unwrap(), [1.0; 8]);
        assert_eq!(ops.read(&t).unwrap(), [0.5; 8]);
        // A launch after that keeps its own value, too.
        p.set([4.0; 8]);
        graph.launch().unwrap().wait().unwrap();
        assert_eq!(ops.read(&doubled).unwrap(), [8.0; 8]);
    }
    common::assert_clean(&gpu);
}

#[test]
fn rotary_positions_written_between_launches_reach_each_launch() {
    let gpu = common::gpu();
    let mut rng = common::Rng::new(5);
    let (tokens, heads, head_dim) = (3u32, 2u32, 16u32);
    let n = (tokens * heads * head_dim) as usize;
    let x = rng.vec_f32(n);
    let inv = nn::rope_inv_freq(head_dim, 10_000.0, None).unwrap();
    let positions = [[0u32, 1, 2], [7, 8, 9], [30, 31, 2]];
    // The reference: one execute per position set, summed in f32 in
    // launch order (what the graph's in-place add does).
    let mut want = vec![0.0f32; n];
    {
        let pos = gpu.upload(&[0u32; 3]).unwrap();
        let mut ops = gpu.ops();
        let xt = ops.upload(&x).unwrap();
        let it = ops.upload(&inv).unwrap();
        let r = ops.rotary(&xt, &it, &pos, heads, head_dim).unwrap();
        for p in positions {
            pos.write(0, &p).unwrap();
            ops.execute_blocking().unwrap();
            for (w, v) in want.iter_mut().zip(ops.read(&r).unwrap()) {
                *w += v;
            }
        }
    }
    let pos = gpu.upload(&[0u32; 3]).unwrap();
    let acc = gpu.upload(&vec![0.0f32; n]).unwrap();
    let mut ops = gpu.ops();
    let xt = ops.upload(&x).unwrap();
    let it = ops.upload(&inv).unwrap();
    let a = ops.import(&acc).unwrap();
    let r = ops.rotary(&xt, &it, &pos, heads, head_dim).unwrap();
    ops.add_(&a, &r).unwrap();
    let graph = ops.graph().unwrap();
    for p in positions {
        pos.write(0, &p).unwrap(); // waits for the launch before
        let _in_flight = graph.launch().unwrap();
    }
    assert_eq!(acc.download().unwrap(), want);
    // The last launch's rotation, read through the op batch.
    let last = ops.read(&r).unwrap();
    assert_ne!(last, x, "rotated");
    drop(ops);
    common::assert_clean(&gpu);
}

#[test]
fn launches_on_streams_after_tickets_and_in_a_pool() {
    let gpu = common::gpu();
    let input = gpu.upload(&[1.0f32; 64]).unwrap();
    let mut ops = gpu.ops();
    let x = ops.import(&input).unwrap();
    let y = ops.scale(&x, 3.0).unwrap();
    let y = ops.add(&y, &x).unwrap(); // 4x
    let stream = gpu.stream().unwrap();
    let on = ops.graph_on(&stream).unwrap();
    assert_eq!(on.queue_id(), stream.queue_id());
    on.launch().unwrap().wait().unwrap();
    assert_eq!(ops.read(&y).unwrap(), [4.0; 64]);
    // After a ticket: a batch that writes the input, then the launch.
    let mut b = gpu.batch().unwrap();
    b.write(&input, 0, &[2.0f32; 64]).unwrap();
    let t = b.submit_async().unwrap();
    let plain = ops.graph().unwrap();
    plain.launch_after(&t).unwrap().wait().unwrap();
    assert_eq!(ops.read(&y).unwrap(), [8.0; 64]);
    // On another stream, after a ticket of the default stream.
    let mut b = gpu.batch().unwrap();
    b.write(&input, 0, &[0.5f32; 64]).unwrap();
    let t = b.submit_async().unwrap();
    plain.launch_on_after(&stream, &t).unwrap().wait().unwrap();
    assert_eq!(ops.read(&y).unwrap(), [2.0; 64]);
    plain.launch_on(&stream).unwrap().wait().unwrap();
    assert_eq!(plain.num_replays(), 3);
    assert_eq!(on.num_replays(), 1);
    // In a capture pool: the graph keeps running after the op batch goes.
    let pool = CapturePool::new(&gpu);
    let pooled = ops.graph_in(&pool).unwrap();
    assert!(pooled.has_pool());
    assert!(pool.buffer_count() >= 2, "the input and 4x are registered");
    let yb = ops.buffer(&y).unwrap();
    drop(ops);
    input.write(0, &[0.25f32; 64]).unwrap();
    pooled.launch().unwrap().wait().unwrap();
    assert_eq!(yb.download().unwrap(), [1.0; 64]);
    assert_eq!(pooled.num_replays(), 1);
    // Foreign objects are refused.
    let other = common::gpu();
    let mut theirs = other.ops();
    let t = theirs.upload(&[1.0f32]).unwrap();
    theirs.relu_(&t).unwrap();
    assert!(matches!(
        theirs.graph_on(&stream),
        Err(Error::ForeignObject { .. })
    ));
    assert!(matches!(
        theirs.graph_in(&pool),
        Err(Error::ForeignObject { .. })
    ));
    drop((theirs, t));
    other.finish();
    // An empty op batch makes no graph.
    assert!(matches!(gpu.ops().graph(), Err(Error::EmptyGraph)));
    drop((on, plain, pooled, pool, stream, yb));
    common::assert_clean(&gpu);
}

#[test]
fn a_replan_after_a_graph_leaves_the_graph_its_buffers() {
    let gpu = common::gpu();
    let input = gpu.upload(&[1.0f32, -2.0, 3.0, -4.0]).unwrap();
    for fused in [true, false] {
        input.write(0, &[1.0, -2.0, 3.0, -4.0]).unwrap();
        let mut ops = gpu.ops_with(options(fused));
        let x = ops.import(&input).unwrap();
        let y = ops.scale(&x, 2.0).unwrap();
        let graph = ops.graph().unwrap();
        let yb = ops.buffer(&y).unwrap();
        // New ops: the next execute replans with buffers of its own.
        let z = ops.relu(&y).unwrap();
        drop(y);
        ops.execute_blocking().unwrap();
        assert_eq!(ops.read(&z).unwrap(), [2.0, 0.0, 6.0, 0.0]);
        input.write(0, &[10.0, 20.0, 30.0, 40.0]).unwrap();
        graph.launch().unwrap().wait().unwrap();
        assert_eq!(yb.download().unwrap(), [20.0, 40.0, 60.0, 80.0]);
        // The op batch's own results were not touched by the launch.
        assert_eq!(ops.read(&z).unwrap(), [2.0, 0.0, 6.0, 0.0]);
        ops.execute_blocking().unwrap();
        assert_eq!(ops.read(&z).unwrap(), [20.0, 40.0, 60.0, 80.0]);
    }
    common::assert_clean(&gpu);
}

#[test]
fn slices_of_one_buffer_import_at_aligned_offsets_and_refuse_misaligned_ones() {
    let gpu = common::gpu();
    let limit = gpu.info().min_storage_buffer_offset_alignment.max(16);
    let step = (limit / 4) as usize; // elements per aligned offset
    let mut rng = common::Rng::new(17);
    // One buffer: a 4×8 matrix W at 0, a vector b of 8 at `step`·k, a
    // vector c of 8 at a later aligned offset.
    let w_at = 0usize;
    let b_at = (32usize).div_ceil(step) * step;
    let c_at = (b_at + 8).div_ceil(step) * step + step;
    let total = c_at + 8;
    let pack = rng.vec_f32(total);
    let buf = gpu.upload(&pack).unwrap();
    let xdata = rng.vec_f32(4);
    for fused in [true, false] {
        let mut ops = gpu.ops_with(options(fused));
        let w = ops
            .import_slice_matrix(&buf.slice(w_at..w_at + 32).unwrap(), 4, 8)
            .unwrap();
        let b = ops
            .import_slice(&buf.slice(b_at..b_at + 8).unwrap())
            .unwrap();
        let c = ops
            .import_slice(&buf.slice(c_at..c_at + 8).unwrap())
            .unwrap();
        let x = ops.upload_matrix(&xdata, 1, 4).unwrap();
        let h = ops.matmul(&x, &w).unwrap(); // 1×8
        let h = ops.add(&h, &b).unwrap();
        let h = ops.mul(&h, &c).unwrap();
        let s = ops.sum(&c).unwrap();
        ops.execute_blocking().unwrap();
        let want: Vec<f64> = (0..8)
            .map(|j| {
                let dot: f64 = (0..4)
                    .map(|p| f64::from(xdata[p]) * f64::from(pack[w_at + p * 8 + j]))
                    .sum();
                (dot + f64::from(pack[b_at + j])) * f64::from(pack[c_at + j])
            })
            .collect();
        let got = ops.read(&h).unwrap();
        for (j, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert!((f64::from(g) - w).abs() <= 1e-5, "h[{j}] = {g} vs {w}");
        }
        assert_eq!(ops.read(&c).unwrap(), pack[c_at..c_at + 8]);
        let want_s: f32 = pack[c_at..c_at + 8].iter().sum();
        assert!((ops.read(&s).unwrap()[0] - want_s).abs() <= 1e-5);
        // A graph of it gives the same.
        let graph = ops.graph().unwrap();
        graph.launch().unwrap().wait().unwrap();
        assert_eq!(ops.read(&h).unwrap(), got);
        // A slice whose byte offset is not a multiple of the limit: a
        // typed error naming the offset and the limit.
        let e = ops
            .import_slice(&buf.slice(b_at + 1..b_at + 5).unwrap())
            .unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::OpShape { .. }), "{e}");
        let offset = (b_at + 1) * 4;
        assert!(
            msg.contains(&format!("byte offset {offset}")) && msg.contains(&limit.to_string()),
            "{msg}"
        );
        // Overlapping another imported range: refused; the same range
        // again: the same storage.
        let e = ops
            .import_slice(&buf.slice(b_at..b_at + 4).unwrap())
            .unwrap_err();
        assert!(e.to_string().contains("overlap"), "{e}");
        assert!(ops.import(&buf).is_err(), "the whole buffer overlaps");
        ops.import_slice(&buf.slice(b_at..b_at + 8).unwrap())
            .unwrap();
    }
    // One buffer counts once, however many slices of it are imported.
    let mut ops = gpu.ops();
    for at in [w_at, b_at, c_at] {
        ops.import_slice(&buf.slice(at..at + 8).unwrap()).unwrap();
    }
    assert_eq!(ops.num_buffers(), 1);
    common::assert_clean(&gpu);
}

#[test]
fn a_long_unfused_chain_reuses_a_few_buffers_and_never_a_held_one() {
    let gpu = common::gpu();
    let mut rng = common::Rng::new(23);
    let x = rng.vec_f32(1024);
    let mut ops = gpu.ops_with(options(false));
    let tx = ops.upload(&x).unwrap();
    let mut cur = ops.copy(&tx).unwrap();
    let mut want = x.clone();
    let mut held = None;
    for step in 1..50 {
        // Odd steps negate, even steps add x: values stay small and every
        // step is one exactly reproducible f32 operation.
        cur = if step % 2 == 1 {
            ops.scale(&cur, -1.0).unwrap()
        } else {
            ops.add(&cur, &tx).unwrap()
        };
        for (w, &xi) in want.iter_mut().zip(&x) {
            *w = if step % 2 == 1 { -*w } else { *w + xi };
        }
        if step == 10 {
            held = Some((cur.clone(), want.clone()));
        }
    }
    let (held_t, held_want) = held.unwrap();
    // A fan-out whose dead branch takes a buffer an earlier step read:
    // reuse's write-after-read must be ordered (sync validation).
    let r = ops.relu(&tx).unwrap();
    let s = ops.scale(&tx, 0.5).unwrap();
    let sum = ops.add(&r, &s).unwrap();
    drop((r, s));
    let _dead = ops.sigmoid(&tx).map(drop);
    ops.execute_blocking().unwrap();
    assert_eq!(ops.num_dispatches(), Some(54));
    assert_eq!(ops.read(&cur).unwrap(), want, "the chain, bit for bit");
    assert_eq!(ops.read(&held_t).unwrap(), held_want, "a held value kept");
    let want_sum: Vec<f32> = x.iter().map(|&v| v.max(0.0) + 0.5 * v).collect();
    assert_eq!(ops.read(&sum).unwrap(), want_sum);
    // x, the held step-10 value, the result, the sum, and two pooled
    // buffers the dead values take turns in (the chain's ping-pong, then
    // relu and 0.5x side by side): 6, where one per value would be 55.
    let buffers = ops.num_buffers();
    assert!(buffers <= 6, "{buffers} buffers for a 54-step program");
    // The graph of it: the same buffers, the same results.
    let graph = ops.graph().unwrap();
    graph.launch().unwrap().wait().unwrap();
    assert_eq!(ops.read(&cur).unwrap(), want);
    assert_eq!(ops.read(&held_t).unwrap(), held_want);
    assert_eq!(ops.num_buffers(), buffers);
    common::assert_clean(&gpu);
}

#[test]
fn a_buffer_handed_out_keeps_its_tensors_value_across_replans() {
    let gpu = common::gpu();
    let x = [1.0f32, -2.0, 3.0, -4.0];
    let mut ops = gpu.ops_with(options(false));
    let tx = ops.upload(&x).unwrap();
    let t = ops.scale(&tx, 2.0).unwrap();
    ops.execute_blocking().unwrap();
    let tb = ops.buffer(&t).unwrap();
    drop(t);
    // Dead values of t's size after it: with t dropped, its buffer would
    // be free for them; handed out, it is not.
    drop(ops.relu(&tx).unwrap());
    drop(ops.sigmoid(&tx).unwrap());
    let h = ops.scale(&tx, 3.0).unwrap();
    ops.execute_blocking().unwrap();
    assert_eq!(ops.read(&h).unwrap(), [3.0, -6.0, 9.0, -12.0]);
    assert_eq!(tb.download().unwrap(), [2.0, -4.0, 6.0, -8.0]);
    common::assert_clean(&gpu);
}
