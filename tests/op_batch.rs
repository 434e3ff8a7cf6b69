//! The op batch (`gpu.ops()`): results against the CPU, ordering with
//! in-place ops, imports, bad shapes as typed errors, and a second execute
//! that compiles, allocates and plans nothing.
//!
//! Bounds: element-wise results within 1e-5 relative of an f64 reference
//! (each output is one or two f32 roundings of the exact value); the sum
//! of n values in f32 within n·2⁻²⁴·Σ|x|.

mod common;

use vkcompute::ops::{registry_stats, OpBatchOptions, Shape};
use vkcompute::Error;

fn options(fused: bool) -> OpBatchOptions {
    OpBatchOptions::default().with_fusion(fused)
}

fn close(got: &[f32], want: &[f64], rel: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(g) - w).abs();
        assert!(
            err <= rel * w.abs().max(1e-30),
            "element {i}: got {g}, want {w} (error {err:e})"
        );
    }
}

#[test]
fn ops_match_the_cpu_fused_and_unfused() {
    let gpu = common::gpu();
    let mut rng = common::Rng::new(9);
    for n in [1usize, 7, 1000] {
        let x = rng.vec_f32(n);
        let y = rng.vec_f32(n);
        for fused in [false, true] {
            let mut ops = gpu.ops_with(options(fused));
            let tx = ops.upload(&x).unwrap();
            let ty = ops.upload(&y).unwrap();
            let s = ops.scale(&tx, 3.0).unwrap();
            let a = ops.add(&s, &ty).unwrap();
            let r = ops.relu(&a).unwrap();
            let m = ops.mul(&r, &ty).unwrap();
            let total = ops.sum(&m).unwrap();
            assert_eq!(ops.num_operations(), 5);
            ops.execute_blocking().unwrap();
            let want_a: Vec<f64> = x
                .iter()
                .zip(&y)
                .map(|(&x, &y)| 3.0 * f64::from(x) + f64::from(y))
                .collect();
            let want_m: Vec<f64> = want_a
                .iter()
                .zip(&y)
                .map(|(&a, &y)| a.max(0.0) * f64::from(y))
                .collect();
            close(&ops.read(&m).unwrap(), &want_m, 1e-5);
            close(&ops.read(&a).unwrap(), &want_a, 1e-5);
            let got = f64::from(ops.read(&total).unwrap()[0]);
            let want: f64 = want_m.iter().sum();
            let bound: f64 = want_m.iter().map(|v| v.abs()).sum::<f64>() * 1e-6 * n as f64;
            assert!((got - want).abs() <= bound + 1e-6, "sum {got} vs {want}");
        }
    }
    common::assert_clean(&gpu);
}

#[test]
fn in_place_op_waits_for_earlier_readers() {
    let gpu = common::gpu();
    let x: Vec<f32> = (0..512).map(|i| i as f32 - 256.0).collect();
    let wdata: Vec<f32> = (0..64 * 8).map(|i| ((i % 7) as f32 - 3.0) * 0.25).collect();
    for fused in [false, true] {
        let mut ops = gpu.ops_with(options(fused));
        let tx = ops.upload(&x).unwrap();
        let doubled = ops.scale(&tx, 2.0).unwrap(); // reads x
        ops.relu_(&tx).unwrap(); // then overwrites it
        ops.scale_(&tx, 10.0).unwrap();
        // A matmul reads A; an in-place op after it overwrites A.
        let a = ops.upload_matrix(&x, 8, 64).unwrap();
        let w = ops.upload_matrix(&wdata, 64, 8).unwrap();
        let c = ops.matmul(&a, &w).unwrap();
        ops.scale_(&a, 0.0).unwrap();
        ops.execute_blocking().unwrap();
        let want: Vec<f64> = x.iter().map(|&v| 2.0 * f64::from(v)).collect();
        close(&ops.read(&doubled).unwrap(), &want, 1e-6);
        let want: Vec<f64> = x.iter().map(|&v| 10.0 * f64::from(v.max(0.0))).collect();
        close(&ops.read(&tx).unwrap(), &want, 1e-6);
        assert!(ops.read(&a).unwrap().iter().all(|&v| v == 0.0));
        let got = ops.read(&c).unwrap();
        for i in 0..8 {
            for j in 0..8 {
                let want: f64 = (0..64)
                    .map(|p| f64::from(x[i * 64 + p]) * f64::from(wdata[p * 8 + j]))
                    .sum();
                assert!(
                    (f64::from(got[i * 8 + j]) - want).abs() <= 1e-3,
                    "c[{i}][{j}] = {} vs {want} (fused: {fused})",
                    got[i * 8 + j]
                );
            }
        }
    }
    common::assert_clean(&gpu);
}

#[test]
fn import_uses_the_buffer_in_place_and_keeps_it_alive() {
    let gpu = common::gpu();
    let buf = gpu.upload(&[-1.0f32, 2.0, -3.0, 4.0]).unwrap();
    let mut ops = gpu.ops();
    let t = ops.import(&buf).unwrap();
    let again = ops.import(&buf).unwrap(); // same storage
    let before = ops.scale(&again, 1.0).unwrap();
    ops.relu_(&t).unwrap();
    drop(t);
    ops.execute_blocking().unwrap();
    assert_eq!(buf.download().unwrap(), [0.0, 2.0, 0.0, 4.0]);
    assert_eq!(ops.read(&before).unwrap(), [-1.0, 2.0, -3.0, 4.0]);
    // The op batch keeps the buffer alive after the user drops it.
    buf.write(0, &[-5.0, 6.0, -7.0, 8.0]).unwrap();
    drop(buf);
    ops.execute_blocking().unwrap();
    assert_eq!(ops.read(&again).unwrap(), [0.0, 6.0, 0.0, 8.0]);
    assert_eq!(ops.read(&before).unwrap(), [-5.0, 6.0, -7.0, 8.0]);
    common::assert_clean(&gpu);
}

#[test]
fn bad_shapes_are_typed_errors_at_record_time() {
    let gpu = common::gpu();
    let mut ops = gpu.ops();
    let v3 = ops.upload(&[1.0; 3]).unwrap();
    let v4 = ops.upload(&[1.0; 4]).unwrap();
    let m23 = ops.upload_matrix(&[1.0; 6], 2, 3).unwrap();
    let m24 = ops.upload_matrix(&[1.0; 8], 2, 4).unwrap();
    fn shape<T>(r: Result<T, Error>) -> bool {
        matches!(r, Err(Error::OpShape { .. }))
    }
    fn mm<T>(r: Result<T, Error>) -> bool {
        matches!(r, Err(Error::MatmulShape { .. }))
    }
    assert!(shape(ops.add(&v3, &v4)));
    assert!(shape(ops.mul(&v3, &m23)));
    assert!(shape(ops.add_(&v4, &v3)));
    assert!(shape(ops.saxpy_(2.0, &v3, &v4)));
    assert!(shape(ops.dot(&v3, &v4)));
    assert!(shape(ops.add_row(&m23, &v4)));
    assert!(shape(ops.upload_matrix(&[1.0; 5], 2, 3)));
    assert!(shape(ops.upload(&[])));
    assert!(shape(ops.full(Shape::Matrix(0, 3), 1.0)));
    assert!(shape(ops.import_matrix(
        &gpu.alloc::<f32>(5).unwrap(),
        2,
        3
    )));
    assert!(mm(ops.matmul(&m23, &m24))); // 2×3 · 2×4
    assert!(mm(ops.matmul(&v3, &m23))); // a vector is not a matrix
    assert!(mm(ops.matvec(&m23, &v4)));
    assert_eq!(ops.num_operations(), 0, "nothing recorded by a failed call");
    // Another op batch's tensor, and reading before execute.
    let mut other = gpu.ops();
    let foreign = other.upload(&[1.0; 3]).unwrap();
    assert!(matches!(
        ops.add(&v3, &foreign),
        Err(Error::TensorUnavailable { .. })
    ));
    let sum = ops.add(&v3, &v3).unwrap();
    assert!(matches!(
        ops.read(&sum),
        Err(Error::TensorUnavailable { .. })
    ));
    ops.execute_blocking().unwrap();
    assert_eq!(ops.read(&sum).unwrap(), [2.0; 3]);
    ops.relu_(&sum).unwrap(); // changed after the execute
    assert!(matches!(
        ops.read(&sum),
        Err(Error::TensorUnavailable { .. })
    ));
    common::assert_clean(&gpu);
}

#[test]
fn second_execute_compiles_allocates_and_plans_nothing() {
    let gpu = common::gpu();
    for fused in [false, true] {
        let mut ops = gpu.ops_with(options(fused));
        let x = ops.upload(&[0.5f32; 4096]).unwrap();
        let w = ops.upload_matrix(&[0.25f32; 64 * 64], 64, 64).unwrap();
        let b = ops.upload(&[1.0f32; 64]).unwrap();
        let xm = ops.upload_matrix(&[0.5f32; 64 * 64], 64, 64).unwrap();
        let y = ops.scale(&x, 2.0).unwrap();
        let y1 = ops.gelu(&y).unwrap();
        let h = ops.matmul(&xm, &w).unwrap();
        let h = ops.add_row(&h, &b).unwrap();
        let h = ops.gelu(&h).unwrap();
        let s = ops.softmax(&h).unwrap();
        let t = ops.transpose(&s).unwrap();
        let m = ops.max(&y1).unwrap();
        let d = ops.dot(&y1, &x).unwrap();
        ops.execute_blocking().unwrap();
        let first = (ops.read(&t).unwrap(), ops.read(&m).unwrap());
        // gelu(1) = 0.841345; dot with 0.5 over 4096 elements.
        let dot = ops.read(&d).unwrap()[0];
        assert!((dot - 0.841_345 * 0.5 * 4096.0).abs() < 0.01, "dot {dot}");
        let (k0, st0, r0, b0) = (
            gpu.cached_kernels(),
            gpu.stats(),
            registry_stats(&gpu),
            ops.num_buffers(),
        );
        let c0 = gpu.cache_stats();
        ops.execute_blocking().unwrap();
        assert_eq!(gpu.cached_kernels(), k0, "second execute compiled");
        assert_eq!(gpu.stats().buffers, st0.buffers, "second execute allocated");
        assert_eq!(registry_stats(&gpu).built, r0.built);
        assert!(
            registry_stats(&gpu).hits > r0.hits,
            "built-ins come from the registry"
        );
        assert_eq!(ops.num_buffers(), b0);
        let c1 = gpu.cache_stats();
        assert_eq!(
            (c1.spirv_hits, c1.spirv_misses),
            (c0.spirv_hits, c0.spirv_misses),
            "second execute went to the GLSL cache"
        );
        assert_eq!((ops.read(&t).unwrap(), ops.read(&m).unwrap()), first);
        // The reductions reuse their scratch: the same bits again.
        assert_eq!(ops.read(&d).unwrap(), [dot]);
        // A second op batch with the same ops builds no pipeline either.
        let mut again = gpu.ops_with(options(fused));
        let x = again.upload(&[0.5f32; 4096]).unwrap();
        let y = again.scale(&x, 2.0).unwrap();
        let y = again.gelu(&y).unwrap();
        again.execute_blocking().unwrap();
        assert_eq!(gpu.cached_kernels(), k0, "second build compiled");
        assert_eq!(again.read(&y).unwrap(), ops.read(&y1).unwrap());
    }
    common::assert_clean(&gpu);
}

#[test]
fn an_empty_op_batch_executes() {
    let gpu = common::gpu();
    let mut ops = gpu.ops();
    ops.execute_blocking().unwrap();
    assert_eq!((ops.num_operations(), ops.num_dispatches()), (0, Some(0)));
    let x = ops.upload(&[1.0, 2.0]).unwrap();
    ops.execute_blocking().unwrap();
    assert_eq!(ops.read(&x).unwrap(), [1.0, 2.0]);
    common::assert_clean(&gpu);
}

#[test]
fn every_built_in_is_reachable() {
    let gpu: common::Gpu = common::gpu();
    let mut ops = gpu.ops();
    let x = ops.upload(&[-1.0f32, 0.0, 1.0, 2.0]).unwrap();
    let outs = [
        ops.sigmoid(&x).unwrap(),
        ops.tanh(&x).unwrap(),
        ops.swish(&x).unwrap(),
        ops.gelu_tanh(&x).unwrap(),
        ops.sub(&x, &x).unwrap(),
        ops.axpy(2.0, &x, &x).unwrap(),
        ops.copy(&x).unwrap(),
        ops.dot(&x, &x).unwrap(),
        ops.full(Shape::Vector(2), 7.0).unwrap(),
    ];
    let m = ops
        .upload_matrix(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], 2, 3)
        .unwrap();
    let v = ops.upload(&[1.0f32, 1.0, 1.0]).unwrap();
    let mv = ops.matvec(&m, &v).unwrap();
    ops.execute_blocking().unwrap();
    let got: Vec<Vec<f32>> = outs.iter().map(|t| ops.read(t).unwrap()).collect();
    assert!((got[0][2] - 0.731_058_6).abs() < 1e-6);
    assert!((got[1][3] - 0.964_027_6).abs() < 1e-6);
    assert!((got[2][3] - 1.761_594_2).abs() < 1e-6);
    assert!((got[3][3] - 1.954_597_7).abs() < 1e-5);
    assert_eq!(got[4], [0.0; 4]);
    assert_eq!(got[5], [-3.0, 0.0, 3.0, 6.0]);
    assert_eq!(got[6], [-1.0, 0.0, 1.0, 2.0]);
    assert_eq!(got[7], [6.0]);
    assert_eq!(got[8], [7.0, 7.0]);
    assert_eq!(ops.read(&mv).unwrap(), [6.0, 15.0]);
    common::assert_clean(&gpu);
}
