//! `attention_decode_qk` (the new token's q/k norms, rotary and KV append
//! inside decode attention's dispatch) against the two ops it replaces,
//! `qk_norm_rope_append` then `attention_decode`, at every cache type:
//! one chunk and several, position 0, the cache's last position and one
//! past it (the flag word), with and without the norm, GQA ratios 1 to 4;
//! the same graph launched at advancing positions; the typed errors. The
//! merged form (`attention_decode_qkv`, q, k and v read from one q|k|v
//! projection output) against the split one: the same bits.
//!
//! Bounds. The two paths differ only in the norm's sum of squares (a
//! subgroup sum against a 64-wide tree: a few ulp of the scale), then in
//! roundings of values that differ by that much. The caches' keys: 3e-5 of
//! the pair's magnitude (the norm's bound in `ops_nn_fused`) plus one
//! rounding of the cache's type; values and untouched rows exactly. The
//! output: as decode attention's own bound, 1e-4 of the largest |v| for
//! f32; with 16-bit caches the query is rounded to the cache's type on
//! both paths, and a query element on a rounding boundary may round the
//! other way (2^-11 or 2^-8 relative), so 2e-3 (f16) and 1e-2 (bf16) of the
//! largest |v|. The check fails when the rotation is one position off
//! (asserted).

mod common;
mod nn_support;

use nn_support::*;
use vkcompute::ops::nn::{self, DecodeShape, NnOperand, QkNorm, QkShape};
use vkcompute::ops::{self, OpsError};
use vkcompute::{Batch, Buffer, Device, Error};

/// (batch, q_heads, kv_heads, head_dim, max_seq, positions, norm)
type Case = (usize, usize, usize, usize, usize, &'static [u32], bool);

/// The buffers of one case (the caches as they start).
struct Setup<C: TestElem> {
    q: Buffer<f32>,
    k: Buffer<f32>,
    v: Buffer<f32>,
    qw: Buffer<f32>,
    kw: Buffer<f32>,
    inv: Buffer<f32>,
    pos: Buffer<u32>,
    lens: Buffer<u32>,
    k0: Vec<C>,
    v0: Vec<C>,
}

impl<C: TestElem> Setup<C> {
    fn new(gpu: &Device, rng: &mut common::Rng, c: Case) -> Self {
        let (bsz, hq, hkv, dim, smax, pos, _) = c;
        let n_c = bsz * hkv * smax * dim;
        let up = |x: &[f32]| gpu.upload(x).unwrap();
        let q = up(&rng.vec_f32(bsz * hq * dim));
        let k = up(&rng.vec_f32(bsz * hkv * dim));
        let v = up(&rng.vec_f32(bsz * hkv * dim));
        let w: Vec<f32> = (0..2 * dim).map(|_| 1.0 + 0.5 * rng.f32()).collect();
        let inv = nn::rope_inv_freq(dim as u32, 1_000_000.0, None).unwrap();
        let (k0, _) = inputs::<C>(rng, n_c, 1.0);
        let (v0, _) = inputs::<C>(rng, n_c, 1.0);
        let lens: Vec<u32> = pos.iter().map(|p| p + 1).collect();
        Setup {
            q,
            k,
            v,
            qw: up(&w[..dim]),
            kw: up(&w[dim..]),
            inv: up(&inv),
            pos: gpu.upload(pos).unwrap(),
            lens: gpu.upload(&lens).unwrap(),
            k0,
            v0,
        }
    }
}

/// The outputs of one path: out, the caches, the flag.
struct Got {
    out: Vec<f32>,
    kc: Vec<f32>,
    vc: Vec<f32>,
    flag: u32,
}

impl Got {
    fn read<C: TestElem>(
        out: &Buffer<C>,
        kc: &Buffer<C>,
        vc: &Buffer<C>,
        flag: &Buffer<u32>,
    ) -> Got {
        Got {
            out: download(out),
            kc: download(kc),
            vc: download(vc),
            flag: flag.download().unwrap()[0],
        }
    }
}

fn shapes(c: Case) -> (QkShape, DecodeShape) {
    let (bsz, hq, hkv, dim, smax, _, _) = c;
    let qs = QkShape {
        batch: bsz as u32,
        steps: 1,
        q_heads: hq as u32,
        kv_heads: hkv as u32,
        head_dim: dim as u32,
        max_seq: smax as u32,
    };
    let ds = DecodeShape {
        batch: bsz as u32,
        q_heads: hq as u32,
        kv_heads: hkv as u32,
        head_dim: dim as u32,
        max_seq: smax as u32,
    };
    (qs, ds)
}

/// The two ops on copies of the inputs (q and k are normed in place).
fn two_ops<C: TestElem>(gpu: &Device, s: &Setup<C>, c: Case) -> Got {
    let (qs, ds) = shapes(c);
    let (q, k) = (
        gpu.upload(&s.q.download().unwrap()).unwrap(),
        gpu.upload(&s.k.download().unwrap()).unwrap(),
    );
    let (kc, vc) = (gpu.upload(&s.k0).unwrap(), gpu.upload(&s.v0).unwrap());
    let flag = gpu.upload(&[0u32]).unwrap();
    let out = gpu.alloc::<C>(q.len()).unwrap();
    let qc = gpu.alloc::<C>(q.len()).unwrap();
    let norm = c.6.then_some(QkNorm::new(&s.qw, &s.kw, 1e-6));
    let mut b = gpu.batch().unwrap();
    nn::qk_norm_rope_append(
        &mut b, &q, &k, &s.v, norm, &s.inv, &s.pos, &kc, &vc, &flag, qs,
    )
    .unwrap();
    b.barrier();
    ops::convert(&mut b, &q, &qc).unwrap();
    b.barrier();
    nn::attention_decode(&mut b, &qc, &kc, &vc, &s.lens, &out, ds, scale(c)).unwrap();
    b.submit().unwrap();
    Got::read(&out, &kc, &vc, &flag)
}

fn scale(c: Case) -> f32 {
    1.0 / (c.3 as f32).sqrt()
}

/// Records the fused op into `b` over the given caches, flag and output.
#[allow(clippy::too_many_arguments)]
fn record_fused<C: TestElem>(
    b: &mut Batch,
    s: &Setup<C>,
    c: Case,
    pos: &Buffer<u32>,
    lens: &Buffer<u32>,
    kc: &Buffer<C>,
    vc: &Buffer<C>,
    flag: &Buffer<u32>,
    out: &impl NnOperand<C>,
) -> vkcompute::Result<()> {
    let (_, ds) = shapes(c);
    let norm = c.6.then_some(QkNorm::new(&s.qw, &s.kw, 1e-6));
    nn::attention_decode_qk(
        b,
        &s.q,
        &s.k,
        &s.v,
        norm,
        &s.inv,
        pos,
        kc,
        vc,
        lens,
        flag,
        out,
        ds,
        scale(c),
    )
}

fn fused<C: TestElem>(gpu: &Device, s: &Setup<C>, c: Case, pos: &Buffer<u32>) -> Got {
    let (kc, vc) = (gpu.upload(&s.k0).unwrap(), gpu.upload(&s.v0).unwrap());
    let flag = gpu.upload(&[0u32]).unwrap();
    let out = gpu.alloc::<C>(s.q.len()).unwrap();
    let mut b = gpu.batch().unwrap();
    record_fused(&mut b, s, c, pos, &s.lens, &kc, &vc, &flag, &out).unwrap();
    assert_eq!(b.len(), 1, "one dispatch");
    b.submit().unwrap();
    Got::read(&out, &kc, &vc, &flag)
}

/// The output's bound, relative to the largest |v| the caches hold.
fn out_bound<C: TestElem>() -> f64 {
    match C::NAME {
        "f32" => 1e-4,
        "f16" => 2e-3,
        _ => 1e-2,
    }
}

fn supported(gpu: &Device) -> bool {
    if gpu.info().subgroup_arithmetic {
        return true;
    }
    common::skipped("attention_decode_qk: the adapter lacks subgroup arithmetic".to_string());
    false
}

fn fused_at<C: TestElem>(gpu: &Device) {
    if !takes::<C>(gpu) || !supported(gpu) {
        return;
    }
    let mut rng = common::Rng::new(57);
    let cases: [Case; 6] = [
        (1, 8, 2, 128, 64, &[5], true),
        // Head dim 32: one 16-byte item per lane even where subgroups
        // have 8 lanes (lavapipe); two sequences, one at the tile's end.
        (2, 4, 2, 32, 64, &[10, 63], true),
        // Several chunks (and sequence 1 at position 0).
        (2, 8, 2, 64, 300, &[130, 0], true),
        (1, 4, 4, 80, 200, &[199], false),
        // Position 8 is past a cache of 8: flagged, nothing written.
        (2, 4, 1, 64, 8, &[8, 3], true),
        (1, 12, 3, 96, 1100, &[1030], true),
    ];
    for c in cases {
        let s = Setup::<C>::new(gpu, &mut rng, c);
        let what = format!("attention_decode_qk {} cache {c:?}", C::NAME);
        let want = two_ops(gpu, &s, c);
        let got = fused(gpu, &s, c, &s.pos);
        assert_eq!(got.flag, want.flag, "{what}: the flag");
        assert!(got.vc == want.vc, "{what}: v_cache");
        let kw: Vec<f64> = want.kc.iter().map(|&x| f64::from(x)).collect();
        let dim = c.3;
        assert_within(&format!("{what}: k_cache"), &got.kc, &kw, 0.0, &|i| {
            let row = i - i % dim;
            let p = i % (dim / 2);
            let pair = want.kc[row + p].abs() + want.kc[row + p + dim / 2].abs();
            3e-5 * f64::from(pair) + C::U * f64::from(want.kc[i].abs()) + C::TINY
        });
        let vmax = want
            .vc
            .iter()
            .fold(0.0f64, |m, &x| m.max(f64::from(x.abs())));
        let bound = out_bound::<C>() * vmax;
        let ow: Vec<f64> = want.out.iter().map(|&x| f64::from(x)).collect();
        assert_within(&format!("{what}: out"), &got.out, &ow, 0.0, &|_| bound);
        // The check can fail: rotated one position on, the output moves
        // far past the bound.
        let later: Vec<u32> = c.5.iter().map(|p| p + 1).collect();
        let off = fused(gpu, &s, c, &gpu.upload(&later).unwrap());
        let e = max_err(&off.out, &ow);
        assert!(e > bound, "{what}: one position on agrees ({e} <= {bound})");
    }
}

#[test]
fn matches_the_two_ops_at_every_cache_type() {
    let gpu = common::gpu();
    each_dtype!(&gpu, fused_at);
    common::assert_clean(&gpu);
}

#[test]
fn a_graph_replays_it_at_advancing_positions() {
    let gpu = common::gpu();
    if !supported(&gpu) {
        return;
    }
    // Three launches of one graph, the position and length advanced
    // between them on the host; each launch against the two ops at that
    // position over the caches the earlier launches filled.
    let c: Case = (1, 8, 2, 64, 200, &[62], true);
    let mut rng = common::Rng::new(58);
    let s = Setup::<f32>::new(&gpu, &mut rng, c);
    let (kc, vc) = (gpu.upload(&s.k0).unwrap(), gpu.upload(&s.v0).unwrap());
    let (pos, lens) = (gpu.upload(&[62u32]).unwrap(), gpu.upload(&[63u32]).unwrap());
    let flag = gpu.upload(&[0u32]).unwrap();
    let out = gpu.alloc::<f32>(s.q.len()).unwrap();
    let mut rec = gpu.graph_recorder().unwrap();
    record_fused(&mut rec, &s, c, &pos, &lens, &kc, &vc, &flag, &out).unwrap();
    let graph = rec.finish().unwrap();
    let mut ref_k = s.k0.clone();
    let mut ref_v = s.v0.clone();
    for step in 0..3u32 {
        let p = 62 + step;
        pos.write(0, &[p]).unwrap();
        lens.write(0, &[p + 1]).unwrap();
        graph.launch().unwrap().wait().unwrap();
        let step_setup = Setup::<f32> {
            q: gpu.upload(&s.q.download().unwrap()).unwrap(),
            k: gpu.upload(&s.k.download().unwrap()).unwrap(),
            v: gpu.upload(&s.v.download().unwrap()).unwrap(),
            qw: gpu.upload(&s.qw.download().unwrap()).unwrap(),
            kw: gpu.upload(&s.kw.download().unwrap()).unwrap(),
            inv: gpu.upload(&s.inv.download().unwrap()).unwrap(),
            pos: gpu.upload(&[p]).unwrap(),
            lens: gpu.upload(&[p + 1]).unwrap(),
            k0: ref_k.clone(),
            v0: ref_v.clone(),
        };
        let want = two_ops(&gpu, &step_setup, c);
        let got = out.download().unwrap();
        let vmax = want
            .vc
            .iter()
            .fold(0.0f64, |m, &x| m.max(f64::from(x.abs())));
        let ow: Vec<f64> = want.out.iter().map(|&x| f64::from(x)).collect();
        assert_within(&format!("launch {step}: out"), &got, &ow, 0.0, &|_| {
            1e-4 * vmax
        });
        ref_k = want.kc.clone();
        ref_v = want.vc.clone();
        let kc_now = kc.download().unwrap();
        let kw: Vec<f64> = want.kc.iter().map(|&x| f64::from(x)).collect();
        assert_within(
            &format!("launch {step}: k_cache"),
            &kc_now,
            &kw,
            3e-5,
            &|_| 1e-6,
        );
    }
    assert_eq!(flag.download().unwrap(), [0]);
    assert_eq!(graph.num_replays(), 3);
    common::assert_clean(&gpu);
}

/// The merged q|k|v output of `s` (each sequence's row: its q, k, v).
fn merged<C: TestElem>(gpu: &Device, s: &Setup<C>, c: Case) -> Buffer<f32> {
    let (bsz, hq, hkv, dim) = (c.0, c.1, c.2, c.3);
    let (q, k, v) = (
        s.q.download().unwrap(),
        s.k.download().unwrap(),
        s.v.download().unwrap(),
    );
    let (qw, kvw) = (hq * dim, hkv * dim);
    let mut rows = Vec::with_capacity(bsz * (qw + 2 * kvw));
    for b in 0..bsz {
        rows.extend_from_slice(&q[b * qw..(b + 1) * qw]);
        rows.extend_from_slice(&k[b * kvw..(b + 1) * kvw]);
        rows.extend_from_slice(&v[b * kvw..(b + 1) * kvw]);
    }
    gpu.upload(&rows).unwrap()
}

/// `attention_decode_qkv` of `s` reading `qkv`, over fresh copies of its
/// caches, flag and output: one dispatch, submitted and read back.
fn merged_run<C: TestElem>(
    gpu: &Device,
    s: &Setup<C>,
    c: Case,
    qkv: &Buffer<f32>,
    what: &str,
) -> Got {
    let (kc, vc) = (gpu.upload(&s.k0).unwrap(), gpu.upload(&s.v0).unwrap());
    let flag = gpu.upload(&[0u32]).unwrap();
    let out = gpu.alloc::<C>(s.q.len()).unwrap();
    let (_, ds) = shapes(c);
    let norm = c.6.then_some(QkNorm::new(&s.qw, &s.kw, 1e-6));
    let mut b = gpu.batch().unwrap();
    nn::attention_decode_qkv(
        &mut b,
        qkv,
        norm,
        &s.inv,
        &s.pos,
        &kc,
        &vc,
        &s.lens,
        &flag,
        &out,
        ds,
        scale(c),
    )
    .unwrap();
    assert_eq!(b.len(), 1, "{what}: one dispatch");
    b.submit().unwrap();
    Got::read(&out, &kc, &vc, &flag)
}

fn merged_at<C: TestElem>(gpu: &Device) {
    if !takes::<C>(gpu) || !supported(gpu) {
        return;
    }
    let mut rng = common::Rng::new(60);
    let cases: [Case; 4] = [
        (3, 8, 2, 64, 300, &[130, 0, 17], true),
        (2, 4, 2, 32, 64, &[10, 63], true),
        (4, 4, 4, 80, 64, &[5, 63, 64, 1], false),
        (2, 12, 3, 96, 200, &[150, 7], true),
    ];
    for c in cases {
        let s = Setup::<C>::new(gpu, &mut rng, c);
        let what = format!("attention_decode_qkv {} cache {c:?}", C::NAME);
        let want = fused(gpu, &s, c, &s.pos);
        let qkv = merged(gpu, &s, c);
        let got = merged_run(gpu, &s, c, &qkv, &what);
        assert_eq!(got.flag, want.flag, "{what}: the flag");
        assert!(
            got.kc == want.kc,
            "{what}: k_cache differs from the split form"
        );
        assert!(
            got.vc == want.vc,
            "{what}: v_cache differs from the split form"
        );
        assert!(
            got.out == want.out,
            "{what}: out differs from the split form"
        );
        // The check can fail: the row of sequence 1 read as sequence 0's.
        if c.0 > 1 {
            let (row, n) = (c.1 * c.3 + 2 * c.2 * c.3, qkv.len());
            let shifted = qkv.download().unwrap();
            let mut wrong = shifted[row..].to_vec();
            wrong.extend_from_slice(&shifted[..row]);
            assert_eq!(wrong.len(), n);
            let off = merged_run(gpu, &s, c, &gpu.upload(&wrong).unwrap(), &what);
            assert!(
                off.out != want.out,
                "{what}: rows shifted by one sequence gave the same output"
            );
        }
    }
}

#[test]
fn the_merged_qkv_form_equals_the_split_one() {
    let gpu = common::gpu();
    each_dtype!(&gpu, merged_at);
    let c: Case = (2, 4, 2, 64, 16, &[3, 5], true);
    let mut rng = common::Rng::new(61);
    let s = Setup::<f32>::new(&gpu, &mut rng, c);
    let qkv = merged(&gpu, &s, c);
    let (kc, vc) = (gpu.upload(&s.k0).unwrap(), gpu.upload(&s.v0).unwrap());
    let flag = gpu.upload(&[0u32]).unwrap();
    let out = gpu.alloc::<f32>(s.q.len()).unwrap();
    let (_, ds) = shapes(c);
    let mut b = gpu.batch().unwrap();
    // qkv one element short.
    let short = qkv.slice(0..qkv.len() - 1).unwrap();
    let e = nn::attention_decode_qkv(
        &mut b, &short, None, &s.inv, &s.pos, &kc, &vc, &s.lens, &flag, &out, ds, 0.125,
    )
    .unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::attention_decode_qkv", "qkv"));
    // The output inside qkv.
    let alias = qkv.slice(0..s.q.len()).unwrap();
    let e = nn::attention_decode_qkv(
        &mut b, &qkv, None, &s.inv, &s.pos, &kc, &vc, &s.lens, &flag, &alias, ds, 0.125,
    )
    .unwrap_err();
    assert!(
        matches!(e, Error::Ops(OpsError::Shape { .. })),
        "overlap: {e:?}"
    );
    assert_eq!(b.len(), 0, "nothing recorded");
    drop(b);
    common::assert_clean(&gpu);
}

#[test]
fn bad_input_is_a_typed_error_naming_the_op() {
    let gpu = common::gpu();
    let c: Case = (1, 4, 2, 64, 16, &[3], true);
    let mut rng = common::Rng::new(59);
    let s = Setup::<f32>::new(&gpu, &mut rng, c);
    let (kc, vc) = (gpu.upload(&s.k0).unwrap(), gpu.upload(&s.v0).unwrap());
    let flag = gpu.upload(&[0u32]).unwrap();
    let out = gpu.alloc::<f32>(s.q.len()).unwrap();
    let short = gpu.alloc::<f32>(s.q.len() - 1).unwrap();
    let mut b = gpu.batch().unwrap();
    // An output one element short.
    let e = record_fused(&mut b, &s, c, &s.pos, &s.lens, &kc, &vc, &flag, &short).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::attention_decode_qk", "out"));
    // A cache shorter than the shape says.
    let small = gpu.alloc::<f32>(s.k0.len() - 1).unwrap();
    let e = record_fused(&mut b, &s, c, &s.pos, &s.lens, &small, &vc, &flag, &out).unwrap_err();
    assert_eq!(shape_error(e), ("ops::nn::attention_decode_qk", "k_cache"));
    // The output sharing the k cache's bytes.
    let alias = kc.slice(0..s.q.len()).unwrap();
    let e = record_fused(&mut b, &s, c, &s.pos, &s.lens, &kc, &vc, &flag, &alias).unwrap_err();
    assert!(
        matches!(e, Error::Ops(OpsError::Shape { .. })),
        "overlap: {e:?}"
    );
    assert_eq!(b.len(), 0, "nothing recorded");
    drop(b);
    common::assert_clean(&gpu);
}
