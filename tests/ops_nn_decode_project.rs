//! `attention_decode_project` (decode attention and the output projection
//! added into the residual, one dispatch at one sequence with 16-bit
//! weights) against `attention_decode_qkv` and an f64 product on the
//! host, at every weight type: one chunk and several (the merge), position
//! 0, a position past the cache (the flag), rows of W of one and two
//! chunks an invocation (the second partly past the row), widths of W
//! that leave the last workgroup part full, several sequences and f32
//! weights (the two ops); the same graph launched at advancing positions;
//! the typed errors.
//!
//! Bounds. The attention's output and the caches are the one-dispatch
//! kernel's own attention code: the same bits as `attention_decode_qkv`'s.
//! y: y0 + out·Wᵀ in f64 from that output and W's stored values, within
//! 1e-5 of Σ|out_k·w_k| per element (f32 sums over K ≤ 4096 in parts:
//! a few times 2^-24 of it) plus one rounding of y. Every case checks that
//! the projection moved y by far more than the bound.
//!
//! On lavapipe the op records the two ops (its loops end after a fixed
//! count of iterations, so the one dispatch's wait could end early): the
//! tests check that path there and say `skipped:` for the one dispatch,
//! which they check on the GPU machine.

mod common;
mod nn_support;

use nn_support::*;
use vkcompute::ops::nn::{self, DecodeShape, OutProjection, QkNorm};
use vkcompute::ops::{Bf16, DType, Weights, F16};
use vkcompute::{AdapterType, Batch, Buffer, Device};

/// (batch, q_heads, kv_heads, head_dim, max_seq, positions, hidden)
type Case = (u32, u32, u32, u32, u32, &'static [u32], u32);

/// The inputs of one case.
struct Setup<W: TestElem> {
    qkv: Buffer<f32>,
    qw: Buffer<f32>,
    kw: Buffer<f32>,
    inv: Buffer<f32>,
    pos: Buffer<u32>,
    lens: Buffer<u32>,
    k0: Vec<f32>,
    v0: Vec<f32>,
    w: Buffer<W>,
    /// W's stored values.
    wv: Vec<f32>,
    y0: Vec<f32>,
}

fn shape(c: Case) -> DecodeShape {
    DecodeShape {
        batch: c.0,
        q_heads: c.1,
        kv_heads: c.2,
        head_dim: c.3,
        max_seq: c.4,
    }
}

fn scale(c: Case) -> f32 {
    1.0 / (c.3 as f32).sqrt()
}

impl<W: TestElem> Setup<W> {
    fn new(gpu: &Device, rng: &mut common::Rng, c: Case) -> Self {
        let (b, hq, hkv, d, smax, pos, hidden) = c;
        let (b, hq, hkv, d, smax, n) = (
            b as usize,
            hq as usize,
            hkv as usize,
            d as usize,
            smax as usize,
            hidden as usize,
        );
        let up = |x: &[f32]| gpu.upload(x).unwrap();
        let norm_w: Vec<f32> = (0..2 * d).map(|_| 1.0 + 0.5 * rng.f32()).collect();
        let inv = nn::rope_inv_freq(d as u32, 1_000_000.0, None).unwrap();
        let lens: Vec<u32> = pos.iter().map(|p| (p + 1).min(smax as u32)).collect();
        let (w, wv) = inputs::<W>(rng, n * hq * d, 0.05);
        Setup {
            qkv: up(&rng.vec_f32(b * (hq + 2 * hkv) * d)),
            qw: up(&norm_w[..d]),
            kw: up(&norm_w[d..]),
            inv: up(&inv),
            pos: gpu.upload(pos).unwrap(),
            lens: gpu.upload(&lens).unwrap(),
            k0: rng.vec_f32(b * hkv * smax * d),
            v0: rng.vec_f32(b * hkv * smax * d),
            w: gpu.upload(&w).unwrap(),
            wv,
            y0: rng.vec_f32(b * n),
        }
    }
}

/// What one path leaves: the attention output, the caches, the flag, y.
struct Got {
    out: Vec<f32>,
    kc: Vec<f32>,
    vc: Vec<f32>,
    flag: u32,
    y: Vec<f32>,
}

/// Records the op (`proj` true) or `attention_decode_qkv` alone, over
/// fresh caches, flag, output and y; returns what they hold and the
/// batch's command count.
fn run<W: TestElem>(gpu: &Device, s: &Setup<W>, c: Case, proj: bool) -> (Got, u64)
where
    for<'a> Weights<'a>: From<&'a Buffer<W>>,
{
    let (kc, vc) = (gpu.upload(&s.k0).unwrap(), gpu.upload(&s.v0).unwrap());
    let flag = gpu.upload(&[0u32]).unwrap();
    let out = gpu.alloc::<f32>((c.0 * c.1 * c.3) as usize).unwrap();
    let y = gpu.upload(&s.y0).unwrap();
    let mut b = gpu.batch().unwrap();
    record(
        &mut b,
        s,
        c,
        (&s.pos, &s.lens),
        (&kc, &vc),
        &flag,
        &out,
        &y,
        proj,
    )
    .unwrap();
    let commands = b.len();
    b.submit().unwrap();
    let got = Got {
        out: out.download().unwrap(),
        kc: kc.download().unwrap(),
        vc: vc.download().unwrap(),
        flag: flag.download().unwrap()[0],
        y: y.download().unwrap(),
    };
    (got, commands)
}

#[allow(clippy::too_many_arguments)]
fn record<W: TestElem>(
    b: &mut Batch,
    s: &Setup<W>,
    c: Case,
    (pos, lens): (&Buffer<u32>, &Buffer<u32>),
    (kc, vc): (&Buffer<f32>, &Buffer<f32>),
    flag: &Buffer<u32>,
    out: &Buffer<f32>,
    y: &Buffer<f32>,
    proj: bool,
) -> vkcompute::Result<()>
where
    for<'a> Weights<'a>: From<&'a Buffer<W>>,
{
    let norm = Some(QkNorm::new(&s.qw, &s.kw, 1e-6));
    if !proj {
        return nn::attention_decode_qkv(
            b,
            &s.qkv,
            norm,
            &s.inv,
            pos,
            kc,
            vc,
            lens,
            flag,
            out,
            shape(c),
            scale(c),
        );
    }
    let p = OutProjection {
        weight: Weights::from(&s.w),
        y,
        hidden: c.6,
    };
    nn::attention_decode_project(
        b,
        &s.qkv,
        norm,
        &s.inv,
        pos,
        kc,
        vc,
        lens,
        flag,
        out,
        p,
        shape(c),
        scale(c),
    )
}

/// y0 + out·Wᵀ in f64, and each element's bound (see the module).
fn reference(out: &[f32], wv: &[f32], y0: &[f32], c: Case) -> (Vec<f64>, Vec<f64>) {
    let (b, k, n) = (c.0 as usize, (c.1 * c.3) as usize, c.6 as usize);
    let mut want = vec![0.0; b * n];
    let mut bound = vec![0.0; b * n];
    for m in 0..b {
        for j in 0..n {
            let (mut s, mut a) = (0.0f64, 0.0f64);
            for kk in 0..k {
                let t = f64::from(out[m * k + kk]) * f64::from(wv[j * k + kk]);
                s += t;
                a += t.abs();
            }
            let y = f64::from(y0[m * n + j]) + s;
            want[m * n + j] = y;
            bound[m * n + j] = 1e-5 * a + f64::from(f32::EPSILON) * y.abs() + 1e-30;
        }
    }
    (want, bound)
}

fn check_case<W: TestElem>(gpu: &Device, rng: &mut common::Rng, c: Case)
where
    for<'a> Weights<'a>: From<&'a Buffer<W>>,
{
    let what = format!("attention_decode_project {} weights {c:?}", W::NAME);
    let s = Setup::<W>::new(gpu, rng, c);
    let (want, _) = run(gpu, &s, c, false);
    let (got, commands) = run(gpu, &s, c, true);
    let fuses = nn::attention_decode_project_fuses(gpu.info(), shape(c), dtype::<W>(), c.6);
    if fuses {
        assert_eq!(commands, 1, "{what}: one dispatch");
    } else {
        assert!(commands >= 2, "{what}: the two ops ({commands} commands)");
    }
    assert!(got.out == want.out, "{what}: the attention output");
    assert!(got.kc == want.kc && got.vc == want.vc, "{what}: the caches");
    assert_eq!(got.flag, want.flag, "{what}: the flag");
    let (y, bound) = reference(&want.out, &s.wv, &s.y0, c);
    assert_within(&format!("{what}: y"), &got.y, &y, 0.0, &|i| bound[i]);
    // The check can fail: y moved from y0 by far more than the bound.
    let moved = got
        .y
        .iter()
        .zip(&s.y0)
        .map(|(a, b)| f64::from((a - b).abs()))
        .fold(0.0f64, f64::max);
    let widest = bound.iter().fold(0.0f64, |m, &b| m.max(b));
    assert!(
        moved > 100.0 * widest,
        "{what}: y moved {moved}, bound {widest}"
    );
}

fn at_weight_type<W: TestElem>(gpu: &Device)
where
    for<'a> Weights<'a>: From<&'a Buffer<W>>,
{
    if !takes::<W>(gpu) || !supported(gpu) {
        return;
    }
    if gpu.info().adapter_type == AdapterType::Cpu && W::NAME != "f32" {
        common::skipped(format!(
            "attention_decode_project's one dispatch ({} weights): a software adapter records \
             the two ops (lavapipe ends a spin-wait after a fixed count of iterations); the one \
             dispatch is checked on the GPU machine",
            W::NAME
        ));
    }
    let mut rng = common::Rng::new(91);
    let cases: [Case; 9] = [
        // K = 1024: one chunk an invocation, 14 rows a workgroup; 256 rows
        // leave the last workgroup 4.
        (1, 8, 2, 128, 64, &[5], 256),
        // K = 4096 (Qwen3-4B's): two chunks an invocation, 7 rows a
        // workgroup; 40 rows leave the last 5.
        (1, 32, 8, 128, 64, &[7], 40),
        // K = 2560: the second chunk past the row for most invocations.
        (1, 20, 4, 128, 96, &[40], 30),
        // Several chunks of the cache (the merge) and a long position.
        (1, 12, 3, 96, 1100, &[1030], 20),
        // Position 8 is past a cache of 8: flagged, nothing written.
        (1, 4, 1, 64, 8, &[8], 72),
        // Position 0.
        (1, 8, 2, 64, 300, &[0], 50),
        // Several sequences: the two ops.
        (2, 8, 2, 64, 300, &[130, 0], 50),
        (4, 4, 2, 32, 200, &[199, 64, 65, 1], 132),
        // q_heads · head_dim = 60: not a multiple of 8, the two ops.
        (1, 3, 1, 20, 64, &[9], 36),
    ];
    for c in cases {
        check_case::<W>(gpu, &mut rng, c);
    }
}

/// W's element type.
fn dtype<W: TestElem>() -> DType {
    match W::NAME {
        "f32" => DType::F32,
        "f16" => DType::F16,
        _ => DType::Bf16,
    }
}

fn supported(gpu: &Device) -> bool {
    if gpu.info().subgroup_arithmetic {
        return true;
    }
    common::skipped("attention_decode_project: the adapter lacks subgroup arithmetic");
    false
}

#[test]
fn matches_attention_then_the_product_at_every_weight_type() {
    let gpu = common::gpu();
    at_weight_type::<f32>(&gpu);
    at_weight_type::<F16>(&gpu);
    at_weight_type::<Bf16>(&gpu);
    common::assert_clean(&gpu);
}

#[test]
fn a_graph_replays_it_at_advancing_positions() {
    let gpu = common::gpu();
    if !supported(&gpu) || !takes::<Bf16>(&gpu) {
        return;
    }
    // Four launches of one graph, the position and length advanced on the
    // host between them; each against attention_decode_qkv at that
    // position over caches filled the same way, and y accumulating.
    let c: Case = (1, 8, 2, 64, 200, &[62], 96);
    let mut rng = common::Rng::new(92);
    let s = Setup::<Bf16>::new(&gpu, &mut rng, c);
    let (kc, vc) = (gpu.upload(&s.k0).unwrap(), gpu.upload(&s.v0).unwrap());
    let (rk, rv) = (gpu.upload(&s.k0).unwrap(), gpu.upload(&s.v0).unwrap());
    let (pos, lens) = (gpu.upload(&[62u32]).unwrap(), gpu.upload(&[63u32]).unwrap());
    let (flag, rflag) = (gpu.upload(&[0u32]).unwrap(), gpu.upload(&[0u32]).unwrap());
    let out = gpu.alloc::<f32>((c.1 * c.3) as usize).unwrap();
    let rout = gpu.alloc::<f32>((c.1 * c.3) as usize).unwrap();
    let y = gpu.upload(&s.y0).unwrap();
    let mut rec = gpu.graph_recorder().unwrap();
    record(
        &mut rec,
        &s,
        c,
        (&pos, &lens),
        (&kc, &vc),
        &flag,
        &out,
        &y,
        true,
    )
    .unwrap();
    let graph = rec.finish().unwrap();
    let mut y_host = s.y0.clone();
    for step in 0..4u32 {
        let p = 62 + step;
        pos.write(0, &[p]).unwrap();
        lens.write(0, &[p + 1]).unwrap();
        graph.launch().unwrap().wait().unwrap();
        let mut b = gpu.batch().unwrap();
        record(
            &mut b,
            &s,
            c,
            (&pos, &lens),
            (&rk, &rv),
            &rflag,
            &rout,
            &y,
            false,
        )
        .unwrap();
        b.submit().unwrap();
        let want = rout.download().unwrap();
        assert!(
            out.download().unwrap() == want,
            "launch {step}: the attention output"
        );
        let (wy, bound) = reference(&want, &s.wv, &y_host, c);
        let got = y.download().unwrap();
        assert_within(&format!("launch {step}: y"), &got, &wy, 0.0, &|i| bound[i]);
        y_host = got;
    }
    common::assert_clean(&gpu);
}

#[test]
fn bad_projections_are_typed_errors_naming_the_tensor() {
    let gpu = common::gpu();
    if !supported(&gpu) {
        return;
    }
    let c: Case = (1, 8, 2, 64, 64, &[3], 32);
    let mut rng = common::Rng::new(93);
    let s = Setup::<f32>::new(&gpu, &mut rng, c);
    let (kc, vc) = (gpu.upload(&s.k0).unwrap(), gpu.upload(&s.v0).unwrap());
    let flag = gpu.upload(&[0u32]).unwrap();
    let out = gpu.alloc::<f32>((c.1 * c.3) as usize).unwrap();
    let y = gpu.upload(&s.y0).unwrap();
    let short_w = gpu.alloc::<f32>(s.wv.len() - 1).unwrap();
    let long_y = gpu.alloc::<f32>(33).unwrap();
    let try_with = |w: &Buffer<f32>, y: &Buffer<f32>, out: &Buffer<f32>, hidden: u32| {
        let mut b = gpu.batch().unwrap();
        let p = OutProjection {
            weight: Weights::from(w),
            y,
            hidden,
        };
        let r = nn::attention_decode_project(
            &mut b,
            &s.qkv,
            None,
            &s.inv,
            &s.pos,
            &kc,
            &vc,
            &s.lens,
            &flag,
            out,
            p,
            shape(c),
            scale(c),
        );
        assert_eq!(b.len(), 0, "nothing recorded");
        shape_error(r.unwrap_err())
    };
    let op = "ops::nn::attention_decode_project";
    assert_eq!(try_with(&short_w, &y, &out, 32), (op, "w"));
    assert_eq!(try_with(&s.w, &long_y, &out, 32), (op, "y"));
    assert_eq!(try_with(&s.w, &y, &y, 32), (op, "y"));
    assert_eq!(try_with(&s.w, &y, &out, 0), (op, "y"));
    common::assert_clean(&gpu);
}
