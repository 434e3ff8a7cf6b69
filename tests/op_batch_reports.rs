//! Launch reports of an op batch: the bound flags its transformer kernels
//! raise (the embedding's token ids past the vocabulary, the KV append's
//! positions past the cache) come back through the launch's ticket as
//! `OpsError::Flagged` with the count of that launch alone: per execute,
//! per graph launch while later launches are already in flight (token
//! ids from a `Params` ring, no wait between launches), for flags shared
//! between ops, and with the limit on distinct flag buffers refused at
//! record time.

mod common;

use vkcompute::ops::{nn, OpsError};
use vkcompute::Error;

/// `(op, count)` of a launch's report, or `None` for a clean launch.
fn report(r: vkcompute::Result<()>) -> Option<(&'static str, u64, String)> {
    match r {
        Ok(()) => None,
        Err(Error::Ops(OpsError::Flagged { op, count, detail })) => Some((op, count, detail)),
        Err(e) => panic!("expected a launch report, got {e}"),
    }
}

#[test]
fn graph_launches_in_flight_each_report_their_own_flags() {
    let gpu = common::gpu();
    // A 5-row table; 2 token ids per launch, from a Params ring, so
    // launches queue up without a host wait between them.
    let ids = gpu.params([0u32; 2]).unwrap();
    let ids_buf = ids.buffer().reinterpret::<u32>().unwrap();
    let flag = gpu.upload(&[0u32]).unwrap();
    let mut ops = gpu.ops();
    let table: Vec<f32> = (0..5 * 4).map(|i| i as f32).collect();
    let tab = ops.upload_matrix(&table, 5, 4).unwrap();
    let x = ops.embedding(&tab, &ids_buf, &flag).unwrap();
    let y = ops.scale(&x, 2.0).unwrap();
    let graph = ops.graph().unwrap();
    let launches = [[1u32, 2], [7, 9], [0, 4], [3, 5], [4, 4]];
    let tickets: Vec<_> = launches
        .iter()
        .map(|v| {
            ids.set(*v);
            graph.launch().unwrap()
        })
        .collect();
    for (v, t) in launches.iter().zip(&tickets) {
        let past = v.iter().filter(|&&i| i >= 5).count() as u64;
        match report(t.wait()) {
            None => assert_eq!(past, 0, "launch with ids {v:?} reported nothing"),
            Some((op, count, detail)) => {
                assert_eq!((op, count), ("ops::nn::embedding", past), "ids {v:?}");
                assert!(detail.contains("vocabulary"), "{detail}");
            }
        }
    }
    // The flag itself keeps its running count; the last launch's rows.
    assert_eq!(flag.download().unwrap(), [3]);
    assert_eq!(
        ops.read(&y).unwrap(),
        [32.0, 34.0, 36.0, 38.0, 32.0, 34.0, 36.0, 38.0]
    );
    // A ticket joined with a reporting one reports too.
    ids.set([6, 0]);
    let bad = graph.launch().unwrap();
    ids.set([0, 0]);
    let good = graph.launch().unwrap();
    assert_eq!(report(good.wait()), None);
    let joined = good.join(&bad).unwrap();
    assert!(matches!(
        report(joined.wait()),
        Some(("ops::nn::embedding", 1, _))
    ));
    drop((graph, ops));
    common::assert_clean(&gpu);
}

#[test]
fn executes_report_a_flag_shared_by_two_ops_and_a_reset_counts_from_zero() {
    let gpu = common::gpu();
    let (hkv, d, smax) = (2usize, 4usize, 3usize);
    let kv = nn::KvShape {
        batch: 1,
        steps: 1,
        kv_heads: hkv as u32,
        head_dim: d as u32,
        max_seq: smax as u32,
    };
    let ids = gpu.upload(&[0u32]).unwrap();
    let pos = gpu.upload(&[0u32]).unwrap();
    let flag = gpu.upload(&[0u32]).unwrap(); // both ops count into it
    let mut ops = gpu.ops();
    let tab = ops.upload_matrix(&[1.0f32; 3 * 8], 3, 8).unwrap();
    let x = ops.embedding(&tab, &ids, &flag).unwrap();
    let cache = ops.upload(&vec![0.0f32; hkv * smax * d]).unwrap();
    let newk = ops.reshape(&x, vkcompute::ops::Shape::Vector(8)).unwrap();
    ops.kv_append_(&cache, &newk, &pos, &flag, kv).unwrap();
    // (token id, position): what the launch's ticket reports.
    for (id, p, want) in [
        (1u32, 0u32, None),
        (5, 1, Some(("ops::nn::embedding", 1))),
        (2, 3, Some(("ops::nn::embedding", 2))), // 1 token x 2 kv heads
        (0, 2, None),
    ] {
        ids.write(0, &[id]).unwrap();
        pos.write(0, &[p]).unwrap();
        let got = report(ops.execute_blocking());
        assert_eq!(
            got.as_ref().map(|(o, c, _)| (*o, *c)),
            want,
            "id {id}, position {p}"
        );
        if let Some((_, _, detail)) = got {
            assert!(
                detail.contains("kv_append"),
                "the shared flag names both ops: {detail}"
            );
        }
    }
    // The user resets the flag: the next launch counts from zero.
    flag.write(0, &[0]).unwrap();
    ids.write(0, &[9]).unwrap();
    assert!(matches!(report(ops.execute_blocking()), Some((_, 1, _))));
    drop(ops);
    common::assert_clean(&gpu);
}

#[test]
fn a_fifth_flag_buffer_is_refused_and_a_late_wait_says_nothing() {
    let gpu = common::gpu();
    let ids = gpu.upload(&[0u32]).unwrap();
    let mut ops = gpu.ops();
    let tab = ops.upload_matrix(&[1.0f32; 4], 2, 2).unwrap();
    let flags: Vec<_> = (0..5).map(|_| gpu.upload(&[0u32]).unwrap()).collect();
    for f in &flags[..4] {
        ops.embedding(&tab, &ids, f).unwrap();
    }
    let before = ops.num_operations();
    match ops.embedding(&tab, &ids, &flags[4]) {
        Err(Error::OpShape { op, detail }) => {
            assert_eq!(op, "ops::nn::embedding");
            assert!(detail.contains("at most 4"), "{detail}");
        }
        other => panic!("expected OpShape, got {other:?}"),
    }
    assert_eq!(ops.num_operations(), before, "nothing recorded");
    // A ticket waited after the report ring (1024 launches) moved on has
    // nothing left to read: its wait succeeds.
    let ids_p = gpu.params([0u32; 1]).unwrap();
    let mut small = gpu.ops();
    let stab = small.upload_matrix(&[1.0f32; 4], 2, 2).unwrap();
    let ids_buf = ids_p.buffer().reinterpret::<u32>().unwrap();
    let y = small.embedding(&stab, &ids_buf, &flags[4]).unwrap();
    let graph = small.graph().unwrap();
    ids_p.set([7]);
    let late = graph.launch().unwrap();
    ids_p.set([0]);
    let mut last = None;
    for _ in 0..1024 {
        last = Some(graph.launch().unwrap());
    }
    assert_eq!(report(last.unwrap().wait()), None);
    assert_eq!(report(late.wait()), None, "its entry was reused");
    assert_eq!(
        flags[4].download().unwrap(),
        [1],
        "the flag still counted it"
    );
    drop((graph, y, small, ops));
    common::assert_clean(&gpu);
}
