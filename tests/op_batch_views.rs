//! Views of an op batch's tensors (reshape, row slices, permutes, selects)
//! against the CPU: read directly, fed to element-wise ops (fused and not),
//! written in place (the base tensor changes), fed to matmul and norms
//! through `contiguous`, refused with typed errors, and ordered and kept
//! alive like the storages they view, within one execute and across graph
//! launches.
//!
//! Bounds: the views and copies are exact; element-wise results within
//! 1e-6 relative of an f64 reference (one f32 rounding); matmul and norms
//! within 1e-5.

mod common;

use vkcompute::ops::{OpBatchOptions, Shape};
use vkcompute::Error;

fn options(fused: bool) -> OpBatchOptions {
    OpBatchOptions::default().with_fusion(fused)
}

fn close(got: &[f32], want: &[f64], rel: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(g) - w).abs();
        assert!(
            err <= rel * w.abs().max(1e-6),
            "element {i}: got {g}, want {w} (error {err:e})"
        );
    }
}

/// `[T×H×D]` row-major data whose element `(t, h, d)` is `100t + 10h + d`.
fn thd(t: u32, h: u32, d: u32) -> Vec<f32> {
    let mut v = Vec::new();
    for i in 0..t {
        for j in 0..h {
            for k in 0..d {
                v.push((100 * i + 10 * j + k) as f32 - 150.0);
            }
        }
    }
    v
}

fn at(x: &[f32], (h, d): (u32, u32), (i, j, k): (u32, u32, u32)) -> f32 {
    x[(i * h * d + j * d + k) as usize]
}

#[cfg(feature = "glsl")]
#[test]
fn views_read_as_the_cpu_gathers_them_fused_and_unfused() {
    let gpu = common::gpu();
    let (t, h, d) = (2u32, 3u32, 4u32);
    let x = thd(t, h, d);
    for fused in [false, true] {
        let mut ops = gpu.ops_with(options(fused));
        let tx = ops.upload_shaped(&x, Shape::Dims3(t, h, d)).unwrap();
        assert_eq!(tx.shape().rank(), 3);
        let r = ops.reshape(&tx, Shape::Matrix(t * h, d)).unwrap();
        let s = ops.slice_rows(&r, 1, 3).unwrap();
        let p = ops.permute(&tx, &[2, 0, 1]).unwrap();
        let hd = ops.select(&tx, 1, 1).unwrap();
        let n0 = ops.num_operations();
        assert_eq!(n0, 0, "views record no op");
        // Element-wise ops read the views in place.
        let p2 = ops.scale(&p, 2.0).unwrap();
        let other = ops.upload_matrix(&[0.5f32; 8], t, d).unwrap();
        let hsum = ops.add(&hd, &other).unwrap();
        let srelu = ops.relu(&s).unwrap();
        let hc = ops.contiguous(&hd).unwrap();
        assert!(ops.is_contiguous(&r).unwrap() && !ops.is_contiguous(&hd).unwrap());
        ops.execute_blocking().unwrap();
        assert_eq!(ops.read(&r).unwrap(), x);
        assert_eq!(ops.read(&s).unwrap(), x[4..16]);
        let want_p: Vec<f32> = (0..d)
            .flat_map(|k| (0..t).flat_map(move |i| (0..h).map(move |j| (i, j, k))))
            .map(|ijk| at(&x, (h, d), ijk))
            .collect();
        assert_eq!(p.shape(), Shape::Dims3(d, t, h));
        assert_eq!(ops.read(&p).unwrap(), want_p);
        let want_h: Vec<f32> = (0..t)
            .flat_map(|i| (0..d).map(move |k| (i, 1, k)))
            .map(|ijk| at(&x, (h, d), ijk))
            .collect();
        assert_eq!(hd.shape(), Shape::Matrix(t, d));
        assert_eq!(ops.read(&hd).unwrap(), want_h);
        assert_eq!(ops.read(&hc).unwrap(), want_h);
        let w: Vec<f64> = want_p.iter().map(|&v| 2.0 * f64::from(v)).collect();
        close(&ops.read(&p2).unwrap(), &w, 1e-6);
        let w: Vec<f64> = want_h.iter().map(|&v| f64::from(v) + 0.5).collect();
        close(&ops.read(&hsum).unwrap(), &w, 1e-6);
        let w: Vec<f64> = x[4..16].iter().map(|&v| f64::from(v.max(0.0))).collect();
        close(&ops.read(&srelu).unwrap(), &w, 1e-6);
        // A view of a view, and add_row over the last dimension of a view.
        let bias = ops.upload(&[1.0f32, 2.0, 3.0]).unwrap();
        let ph = ops.permute(&hd, &[1, 0]).unwrap(); // [D×T]
        let ph0 = ops.select(&p, 0, 3).unwrap(); // [T×H] at d = 3
        let b = ops.add_row(&ph0, &bias).unwrap();
        ops.execute_blocking().unwrap();
        let want_ph: Vec<f32> = (0..d)
            .flat_map(|k| (0..t).map(move |i| (i, 1, k)))
            .map(|ijk| at(&x, (h, d), ijk))
            .collect();
        assert_eq!(ops.read(&ph).unwrap(), want_ph);
        let want_b: Vec<f64> = (0..t)
            .flat_map(|i| (0..h).map(move |j| (i, j)))
            .map(|(i, j)| f64::from(at(&x, (h, d), (i, j, 3))) + f64::from(j + 1))
            .collect();
        close(&ops.read(&b).unwrap(), &want_b, 1e-6);
    }
    common::assert_clean(&gpu);
}

#[cfg(feature = "glsl")]
#[test]
fn in_place_ops_through_views_write_the_base_and_views_see_base_writes() {
    let gpu = common::gpu();
    let (t, h, d) = (3u32, 2u32, 4u32);
    let x = thd(t, h, d);
    for fused in [false, true] {
        let mut ops = gpu.ops_with(options(fused));
        let base = ops.upload_shaped(&x, Shape::Dims3(t, h, d)).unwrap();
        let head = ops.select(&base, 1, 1).unwrap();
        let before = ops.copy(&head).unwrap(); // reads the head as uploaded
        ops.scale_(&head, 10.0).unwrap(); // writes head 1 of the base
        let rows = ops.slice_rows(&base, 2, 1).unwrap(); // last token
        let ones = ops.full(Shape::Dims3(1, h, d), 1.0).unwrap();
        ops.add_(&rows, &ones).unwrap();
        let after = ops.copy(&head).unwrap(); // sees both writes
        ops.relu_(&base).unwrap(); // the views see this too
        let last = ops.copy(&head).unwrap();
        ops.execute_blocking().unwrap();
        let mut want = x.clone();
        for i in 0..t {
            for k in 0..d {
                want[(i * h * d + d + k) as usize] *= 10.0;
            }
        }
        for v in &mut want[(2 * h * d) as usize..] {
            *v += 1.0;
        }
        let head_of = |v: &[f32]| -> Vec<f32> {
            (0..t)
                .flat_map(|i| (0..d).map(move |k| (i, 1, k)))
                .map(|ijk| at(v, (h, d), ijk))
                .collect()
        };
        assert_eq!(ops.read(&before).unwrap(), head_of(&x), "fused {fused}");
        assert_eq!(ops.read(&after).unwrap(), head_of(&want), "fused {fused}");
        let relu: Vec<f32> = want.iter().map(|v| v.max(0.0)).collect();
        assert_eq!(ops.read(&base).unwrap(), relu, "fused {fused}");
        assert_eq!(ops.read(&head).unwrap(), head_of(&relu));
        assert_eq!(ops.read(&last).unwrap(), head_of(&relu));
        // A second execute applies the in-place ops again.
        ops.execute_blocking().unwrap();
        let mut again = relu.clone();
        for i in 0..t {
            for k in 0..d {
                again[(i * h * d + d + k) as usize] *= 10.0;
            }
        }
        for v in &mut again[(2 * h * d) as usize..] {
            *v += 1.0;
        }
        let again: Vec<f32> = again.iter().map(|v| v.max(0.0)).collect();
        assert_eq!(ops.read(&base).unwrap(), again);
    }
    common::assert_clean(&gpu);
}

#[cfg(feature = "glsl")]
#[test]
fn views_feed_matmul_and_norms_through_contiguous() {
    let gpu = common::gpu();
    let (t, h, d) = (3u32, 2u32, 4u32);
    let x = thd(t, h, d);
    let w: Vec<f32> = (0..d * 5).map(|i| (i as f32 * 0.37).sin()).collect();
    let gamma: Vec<f32> = (0..d).map(|i| 1.0 + i as f32 * 0.1).collect();
    for fused in [false, true] {
        let mut ops = gpu.ops_with(options(fused));
        let tx = ops.upload_shaped(&x, Shape::Dims3(t, h, d)).unwrap();
        let tw = ops.upload_matrix(&w, d, 5).unwrap();
        let tg = ops.upload(&gamma).unwrap();
        let head = ops.select(&tx, 1, 1).unwrap();
        // Matmul binds whole storages: a strided view is refused...
        match ops.matmul(&head, &tw) {
            Err(Error::OpShape { op, detail }) => {
                assert_eq!(op, "ops::matmul");
                assert!(
                    detail.contains("[3×4]") && detail.contains("contiguous"),
                    "{detail}"
                );
            }
            other => panic!("expected OpShape, got {other:?}"),
        }
        // ... and taken once made contiguous.
        let hc = ops.contiguous(&head).unwrap();
        let y = ops.matmul(&hc, &tw).unwrap();
        let yr = ops.relu(&y).unwrap(); // an epilogue where fused
        let n = ops.rms_norm(&hc, &tg, 1e-5).unwrap();
        // Norms per row of a rank-3 tensor (rows × last dim), and softmax
        // of a reshape (a whole tensor: no copy needed).
        let n3 = ops.rms_norm(&tx, &tg, 1e-5).unwrap();
        let flat = ops.reshape(&tx, Shape::Matrix(t * h, d)).unwrap();
        let sm = ops.softmax(&flat).unwrap();
        // A permuted matrix made contiguous is its transpose.
        let m = ops.upload_matrix(&w, d, 5).unwrap();
        let pt = ops.permute(&m, &[1, 0]).unwrap();
        let ptc = ops.contiguous(&pt).unwrap();
        let tt = ops.transpose(&m).unwrap();
        ops.execute_blocking().unwrap();
        let hv: Vec<f64> = (0..t)
            .flat_map(|i| (0..d).map(move |k| (i, 1, k)))
            .map(|ijk| f64::from(at(&x, (h, d), ijk)))
            .collect();
        let mut want_y = vec![0.0f64; (t * 5) as usize];
        for i in 0..t as usize {
            for j in 0..5usize {
                want_y[i * 5 + j] = (0..d as usize)
                    .map(|k| hv[i * d as usize + k] * f64::from(w[k * 5 + j]))
                    .sum();
            }
        }
        close(&ops.read(&y).unwrap(), &want_y, 1e-5);
        let relu: Vec<f64> = want_y.iter().map(|v| v.max(0.0)).collect();
        close(&ops.read(&yr).unwrap(), &relu, 1e-5);
        let norm = |row: &[f64]| -> Vec<f64> {
            let ms = row.iter().map(|v| v * v).sum::<f64>() / row.len() as f64;
            let r = 1.0 / (ms + 1e-5).sqrt();
            row.iter()
                .zip(&gamma)
                .map(|(v, g)| v * r * f64::from(*g))
                .collect()
        };
        let want_n: Vec<f64> = hv.chunks(d as usize).flat_map(norm).collect();
        close(&ops.read(&n).unwrap(), &want_n, 1e-5);
        let xv: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
        let want_n3: Vec<f64> = xv.chunks(d as usize).flat_map(norm).collect();
        assert_eq!(n3.shape(), Shape::Dims3(t, h, d));
        close(&ops.read(&n3).unwrap(), &want_n3, 1e-5);
        let want_sm: Vec<f64> = xv
            .chunks(d as usize)
            .flat_map(|row| {
                let m = row.iter().cloned().fold(f64::MIN, f64::max);
                let e: Vec<f64> = row.iter().map(|v| (v - m).exp()).collect();
                let s: f64 = e.iter().sum();
                e.into_iter().map(move |v| v / s)
            })
            .collect();
        let got_sm = ops.read(&sm).unwrap();
        for (g, w) in got_sm.iter().zip(&want_sm) {
            assert!((f64::from(*g) - w).abs() <= 1e-5, "softmax {g} vs {w}");
        }
        assert_eq!(ops.read(&ptc).unwrap(), ops.read(&tt).unwrap());
    }
    common::assert_clean(&gpu);
}

fn op_shape(r: vkcompute::Result<vkcompute::ops::Tensor>) -> (&'static str, String) {
    match r {
        Err(Error::OpShape { op, detail }) => (op, detail),
        other => panic!("expected Error::OpShape, got {other:?}"),
    }
}

#[test]
fn bad_views_are_typed_errors_at_record_time() {
    let gpu = common::gpu();
    let mut ops = gpu.ops();
    let x = ops
        .upload_shaped(&thd(2, 3, 4), Shape::Dims3(2, 3, 4))
        .unwrap();
    let (op, d) = op_shape(ops.permute(&x, &[0, 0, 1]));
    assert_eq!(op, "ops::permute");
    assert!(
        d.contains("x [2×3×4]") && d.contains("permutation of 0..3"),
        "{d}"
    );
    let (op, d) = op_shape(ops.permute(&x, &[0, 1]));
    assert!(op == "ops::permute" && d.contains("rank 3"), "{d}");
    let (op, d) = op_shape(ops.slice_rows(&x, 1, 2));
    assert_eq!(op, "ops::slice_rows");
    assert!(
        d.contains("rows 1..3") && d.contains("first dimension of 2"),
        "{d}"
    );
    let p = ops.permute(&x, &[1, 0, 2]).unwrap();
    let (op, d) = op_shape(ops.reshape(&p, Shape::Vector(24)));
    assert_eq!(op, "ops::reshape");
    assert!(d.contains("x [3×2×4]") && d.contains("contiguous"), "{d}");
    let (_, d) = op_shape(ops.reshape(&x, Shape::Matrix(5, 5)));
    assert!(d.contains("25 elements") && d.contains("24"), "{d}");
    let (op, d) = op_shape(ops.select(&x, 3, 0));
    assert!(
        op == "ops::select" && d.contains("dim 3") && d.contains("rank 3"),
        "{d}"
    );
    let (_, d) = op_shape(ops.select(&x, 2, 4));
    assert!(d.contains("index 4") && d.contains("0 to 3"), "{d}");
    let v = ops.upload(&[1.0f32; 4]).unwrap();
    let (_, d) = op_shape(ops.select(&v, 0, 0));
    assert!(d.contains("rank 2 to 4"), "{d}");
    match Shape::from_dims(&[1, 2, 3, 4, 5]) {
        Err(Error::OpShape { op, detail }) => {
            assert_eq!(op, "Shape::from_dims");
            assert!(
                detail.contains("rank 5") && detail.contains("1 to 4"),
                "{detail}"
            );
        }
        other => panic!("expected OpShape, got {other:?}"),
    }
    let (op, d) = op_shape(ops.transpose(&x));
    assert!(op == "ops::transpose" && d.contains("rank 3"), "{d}");
    let (op, d) = op_shape(ops.sum(&p));
    assert!(
        op == "ops::sum" && d.contains("x [3×2×4]") && d.contains("contiguous"),
        "{d}"
    );
    // Matmul of rank 3 is refused with the matmul's own error.
    let m = ops.upload_matrix(&[1.0f32; 8], 4, 2).unwrap();
    assert!(matches!(ops.matmul(&x, &m), Err(Error::MatmulShape { .. })));
    // An in-place op may not read another view of the memory it writes
    // (without the `glsl` feature, element-wise ops on such views are
    // refused before that, naming the feature).
    let why = if cfg!(feature = "glsl") {
        "in place"
    } else {
        "`glsl` feature"
    };
    let r = ops.reshape(&x, Shape::Matrix(6, 4)).unwrap();
    let rt = ops.slice_rows(&r, 0, 2).unwrap();
    let rb = ops.slice_rows(&r, 2, 2).unwrap();
    match ops.add_(&rt, &rb) {
        Err(Error::OpShape { detail, .. }) => assert!(detail.contains(why), "{detail}"),
        other => panic!("expected OpShape, got {other:?}"),
    }
    // Nor a row bias living in that memory (every invocation reads it).
    let row0 = ops.slice_rows(&r, 0, 1).unwrap();
    let b0 = ops.reshape(&row0, Shape::Vector(4)).unwrap();
    match ops.add_row_(&r, &b0) {
        Err(Error::OpShape { detail, .. }) => {
            assert!(
                detail.contains("in place") || detail.contains(why),
                "{detail}"
            )
        }
        other => panic!("expected OpShape, got {other:?}"),
    }
    // Upload shapes must match the data.
    assert!(matches!(
        ops.upload_shaped(&[1.0f32; 5], Shape::Dims3(1, 2, 3)),
        Err(Error::OpShape { .. })
    ));
    assert_eq!(ops.num_operations(), 0, "nothing was recorded");
    common::assert_clean(&gpu);
}

#[test]
fn a_held_view_keeps_its_pooled_storage_alive() {
    let gpu = common::gpu();
    let n = 64usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32 - 20.0).collect();
    for fused in [false, true] {
        let mut ops = gpu.ops_with(options(fused));
        let tx = ops.upload_shaped(&x, Shape::Dims3(4, 4, 4)).unwrap();
        let r = ops.relu(&tx).unwrap(); // pooled
        let v = ops.select(&r, 1, 2).unwrap(); // held; r is dropped
        drop(r);
        // A long chain of same-sized values that would take r's buffer
        // if it were free.
        let mut acc = ops.scale(&tx, 0.5).unwrap();
        for _ in 0..6 {
            let next = ops.sigmoid(&acc).unwrap();
            let sum = ops.sum(&next).unwrap(); // keeps each value stored
            drop(sum);
            acc = next;
        }
        ops.execute_blocking().unwrap();
        let want: Vec<f32> = (0..4u32)
            .flat_map(|i| (0..4u32).map(move |k| (i * 16 + 2 * 4 + k) as usize))
            .map(|j| x[j].max(0.0))
            .collect();
        assert_eq!(ops.read(&v).unwrap(), want, "fused {fused}");
        assert!(ops.read(&acc).is_ok());
        // Only a view held: an in-place op on its dropped base (fusable
        // with the op making it) must still reach memory for the view.
        let b = ops.relu(&tx).unwrap();
        let w = ops.select(&b, 0, 1).unwrap();
        ops.scale_(&b, 2.0).unwrap();
        drop(b);
        ops.execute_blocking().unwrap();
        let want: Vec<f32> = x[16..32].iter().map(|v| 2.0 * v.max(0.0)).collect();
        assert_eq!(ops.read(&w).unwrap(), want, "fused {fused}");
    }
    common::assert_clean(&gpu);
}

#[cfg(feature = "glsl")]
#[test]
fn graph_launches_see_views_of_new_inputs_and_in_place_writes_in_order() {
    let gpu = common::gpu();
    let (t, h, d) = (2u32, 3u32, 4u32);
    let n = (t * h * d) as usize;
    let input = gpu.upload(&vec![0.0f32; n]).unwrap();
    let acc = gpu.upload(&[0.0f32; 8]).unwrap();
    for fused in [true, false] {
        acc.write(0, &[0.0; 8]).unwrap();
        let mut ops = gpu.ops_with(options(fused));
        let x = ops.import_shaped(&input, Shape::Dims3(t, h, d)).unwrap();
        let a = ops.import_shaped(&acc, Shape::Matrix(t, d)).unwrap();
        let head = ops.select(&x, 1, 2).unwrap();
        ops.add_(&a, &head).unwrap(); // acc += head 2 (read before the write below)
        ops.scale_(&x, 3.0).unwrap(); // the input, in place (a write after read)
        let seen = ops.copy(&head).unwrap(); // the scaled head
        let graph = ops.graph().unwrap();
        let mut want_acc = vec![0.0f32; 8];
        for step in 0..3 {
            let data: Vec<f32> = (0..n).map(|i| (i as f32) + 100.0 * step as f32).collect();
            input.write(0, &data).unwrap();
            graph.launch().unwrap().wait().unwrap();
            let hv: Vec<f32> = (0..t)
                .flat_map(|i| (0..d).map(move |k| (i, 2, k)))
                .map(|ijk| at(&data, (h, d), ijk))
                .collect();
            for (w, v) in want_acc.iter_mut().zip(&hv) {
                *w += v;
            }
            assert_eq!(
                acc.download().unwrap(),
                want_acc,
                "fused {fused} step {step}"
            );
            let scaled: Vec<f32> = hv.iter().map(|v| v * 3.0).collect();
            assert_eq!(
                ops.read(&seen).unwrap(),
                scaled,
                "fused {fused} step {step}"
            );
            let all: Vec<f32> = data.iter().map(|v| v * 3.0).collect();
            assert_eq!(input.download().unwrap(), all);
        }
    }
    common::assert_clean(&gpu);
}

/// Without the `glsl` feature the views themselves work (they record
/// nothing, reads gather them, and an op that takes a whole storage in
/// order takes a reshape of it), while element-wise ops on a view that is
/// not a whole storage, `contiguous` of one included, are refused naming
/// the feature, and nothing is recorded.
#[cfg(not(feature = "glsl"))]
#[test]
fn without_glsl_views_read_and_reshape_but_element_wise_ops_on_them_are_refused() {
    let gpu = common::gpu();
    let mut ops = gpu.ops();
    let data = thd(2, 3, 4);
    let x = ops.upload_shaped(&data, Shape::Dims3(2, 3, 4)).unwrap();
    let h = ops.select(&x, 1, 2).unwrap(); // [2×4], rows 12 apart
    let p = ops.permute(&x, &[1, 0, 2]).unwrap();
    let flat = ops.reshape(&x, Shape::Vector(24)).unwrap();
    let total = ops.sum(&flat).unwrap();
    for (what, r) in [
        ("relu of a select", ops.relu(&h)),
        ("add of a permute", ops.add(&p, &p)),
        ("contiguous of a select", ops.contiguous(&h)),
    ] {
        match r {
            Err(Error::OpShape { detail, .. }) => {
                assert!(detail.contains("`glsl` feature"), "{what}: {detail}")
            }
            other => panic!("{what}: expected OpShape, got {other:?}"),
        }
    }
    assert_eq!(ops.num_operations(), 1, "only the sum was recorded");
    ops.execute_blocking().unwrap();
    let want: Vec<f32> = (0..2u32)
        .flat_map(|t| (0..4u32).map(move |d| (t, d)))
        .map(|(t, d)| at(&data, (3, 4), (t, 2, d)))
        .collect();
    assert_eq!(ops.read(&h).unwrap(), want);
    let sum: f64 = data.iter().map(|&v| f64::from(v)).sum();
    close(&ops.read(&total).unwrap(), &[sum], 1e-6);
    common::assert_clean(&gpu);
}
