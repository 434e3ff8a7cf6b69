//! The op batch's element types (f32, f16, bf16, u32): typed uploads,
//! imports and reads, casts rounded exactly as the CPU conversions round,
//! element-wise ops on 16-bit tensors fused and unfused, typed errors for
//! mixed or unsupported types, liveness reuse across types, and a graph
//! launched with new f16 input.
//!
//! Bounds: a cast is exact (bit for bit against `F16::from_f32`,
//! `Bf16::from_f32`, Rust's `as`). An element-wise op on a 16-bit tensor
//! computes in f32 and rounds its result to the type, so a chain of k ops
//! lies within k+1 units of the type's precision (2⁻¹¹ relative for f16,
//! 2⁻⁸ for bf16, one per rounding, the first from the reference's own f32
//! arithmetic) of the f64 reference that rounds where the GPU rounds;
//! fused and unfused runs of exact arithmetic (add, mul, relu, scale)
//! agree bit for bit.

#![cfg_attr(not(feature = "glsl"), allow(dead_code))]

mod common;

use vkcompute::ops::OpsError;
use vkcompute::ops::{Bf16, DType, OpBatchOptions, Shape, F16};
use vkcompute::Error;

fn options(fused: bool) -> OpBatchOptions {
    OpBatchOptions::default().with_fusion(fused)
}

/// Unit roundoff of a type (half an ulp at 1, relative).
fn unit(d: DType) -> f64 {
    match d {
        DType::F16 => 2f64.powi(-11),
        DType::Bf16 => 2f64.powi(-8),
        _ => 2f64.powi(-24),
    }
}

/// `x` rounded to `d` (through f32, as the GPU rounds an f32 result).
fn round(d: DType, x: f64) -> f64 {
    let f = x as f32;
    f64::from(match d {
        DType::F16 => F16::from_f32(f).to_f32(),
        DType::Bf16 => Bf16::from_f32(f).to_f32(),
        _ => f,
    })
}

fn to_dtype(d: DType, x: &[f32]) -> Vec<f32> {
    x.iter().map(|&v| round(d, f64::from(v)) as f32).collect()
}

/// Uploads `x` (already representable) as a tensor of `d`.
fn upload(ops: &mut vkcompute::ops::OpBatch, d: DType, x: &[f32]) -> vkcompute::ops::Tensor {
    match d {
        DType::F16 => ops
            .upload_as(&x.iter().map(|&v| F16::from_f32(v)).collect::<Vec<_>>())
            .unwrap(),
        DType::Bf16 => ops
            .upload_as(&x.iter().map(|&v| Bf16::from_f32(v)).collect::<Vec<_>>())
            .unwrap(),
        _ => ops.upload(x).unwrap(),
    }
}

/// `got` within `k` roundings of type `d` of `want` (and an absolute
/// floor for values near 0, scaled by `mag`).
fn close(got: &[f32], want: &[f64], d: DType, k: f64, mag: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(g) - w).abs();
        let tol = k * unit(d) * (w.abs() + mag);
        assert!(
            err <= tol,
            "{what} element {i}: got {g}, want {w} (error {err:e}, bound {tol:e})"
        );
    }
}

fn sixteen_bit_ok(gpu: &vkcompute::Device) -> bool {
    let i = gpu.info();
    if !(i.float16 && i.storage_buffer16) {
        common::skipped("the adapter lacks shaderFloat16 + storageBuffer16BitAccess");
        return false;
    }
    true
}

/// Values whose rounding is delicate: ties to even in f16 and bf16,
/// subnormal halves, overflow, and ordinary values.
fn delicate() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -2.5,
        1.0 + 2f32.powi(-11),
        1.0 + 3.0 * 2f32.powi(-11),
        1.0 + 2f32.powi(-8),
        1.0 + 3.0 * 2f32.powi(-8),
        2f32.powi(-25),
        3.0 * 2f32.powi(-26),
        2f32.powi(-20),
        65504.0,
        65520.0,
        1e6,
        -1e6,
        3e38,
        1.0e-3,
    ];
    let mut rng = common::Rng::new(5);
    v.extend((0..47).map(|_| rng.f32() * 300.0));
    v
}

#[test]
fn casts_round_exactly_as_the_cpu_conversions() {
    let gpu = common::gpu();
    if !sixteen_bit_ok(&gpu) {
        return;
    }
    let x = delicate();
    for fused in [false, true] {
        let mut ops = gpu.ops_with(options(fused));
        let tx = ops.upload(&x).unwrap();
        let h = ops.cast(&tx, DType::F16).unwrap();
        let b = ops.cast(&tx, DType::Bf16).unwrap();
        let hb = ops.cast(&h, DType::Bf16).unwrap();
        let bh = ops.cast(&b, DType::F16).unwrap();
        let hf = ops.cast(&h, DType::F32).unwrap();
        let bf = ops.cast(&b, DType::F32).unwrap();
        let ff = ops.cast(&tx, DType::F32).unwrap();
        assert_eq!(
            (h.dtype(), b.dtype(), ff.dtype()),
            (DType::F16, DType::Bf16, DType::F32)
        );
        ops.execute_blocking().unwrap();
        let want_h: Vec<F16> = x.iter().map(|&v| F16::from_f32(v)).collect();
        let want_b: Vec<Bf16> = x.iter().map(|&v| Bf16::from_f32(v)).collect();
        assert_eq!(
            ops.read_as::<F16>(&h).unwrap(),
            want_h,
            "f32 -> f16 (fused {fused})"
        );
        assert_eq!(
            ops.read_as::<Bf16>(&b).unwrap(),
            want_b,
            "f32 -> bf16 (fused {fused})"
        );
        let want_hb: Vec<Bf16> = want_h.iter().map(|v| Bf16::from_f32(v.to_f32())).collect();
        let want_bh: Vec<F16> = want_b.iter().map(|v| F16::from_f32(v.to_f32())).collect();
        assert_eq!(ops.read_as::<Bf16>(&hb).unwrap(), want_hb, "f16 -> bf16");
        assert_eq!(ops.read_as::<F16>(&bh).unwrap(), want_bh, "bf16 -> f16");
        let wide = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
        let want_hf: Vec<f32> = want_h.iter().map(|v| v.to_f32()).collect();
        let want_bf: Vec<f32> = want_b.iter().map(|v| v.to_f32()).collect();
        assert_eq!(
            wide(ops.read_as::<f32>(&hf).unwrap()),
            wide(want_hf.clone())
        );
        assert_eq!(wide(ops.read_as::<f32>(&bf).unwrap()), wide(want_bf));
        assert_eq!(wide(ops.read(&ff).unwrap()), wide(x.clone()), "f32 -> f32");
        // `read` widens 16-bit tensors.
        assert_eq!(wide(ops.read(&h).unwrap()), wide(want_hf));
    }
    common::assert_clean(&gpu);
}

/// u32 to f32 rounds to nearest even above 2^24, f32 to u32 truncates and
/// saturates: both as Rust's `as`.
#[cfg(feature = "glsl")]
#[test]
fn u32_casts_convert_as_rust_does() {
    let gpu = common::gpu();
    let u: Vec<u32> = vec![
        0,
        1,
        7,
        (1 << 24) + 1,
        (1 << 24) + 3,
        123_456_789,
        u32::MAX,
        1 << 31,
    ];
    let f: Vec<f32> = vec![
        -1.5,
        -0.0,
        0.0,
        0.7,
        2.9,
        16_777_217.0,
        4e9,
        5e9,
        1e30,
        4_294_967_040.0,
    ];
    for fused in [false, true] {
        let mut ops = gpu.ops_with(options(fused));
        let tu = ops.upload_as(&u).unwrap();
        let uf = ops.cast(&tu, DType::F32).unwrap();
        let tf = ops.upload(&f).unwrap();
        let fu = ops.cast(&tf, DType::U32).unwrap();
        // Back and forth in one fused run.
        let fuf = ops.cast(&fu, DType::F32).unwrap();
        assert_eq!(fu.dtype(), DType::U32);
        ops.execute_blocking().unwrap();
        let want_uf: Vec<f32> = u.iter().map(|&v| v as f32).collect();
        assert_eq!(
            ops.read(&uf).unwrap(),
            want_uf,
            "u32 -> f32 (fused {fused})"
        );
        let want_fu: Vec<u32> = f.iter().map(|&v| v as u32).collect();
        assert_eq!(
            ops.read_as::<u32>(&fu).unwrap(),
            want_fu,
            "f32 -> u32 (fused {fused})"
        );
        let want_fuf: Vec<f32> = want_fu.iter().map(|&v| v as f32).collect();
        assert_eq!(
            ops.read(&fuf).unwrap(),
            want_fuf,
            "f32 -> u32 -> f32 (fused {fused})"
        );
        assert_eq!(
            ops.read_as::<u32>(&tu).unwrap(),
            u,
            "a u32 upload reads back exactly"
        );
    }
    common::assert_clean(&gpu);
}

/// Without generated kernels (no `glsl` feature) the op batch refuses
/// element-wise ops and fills of 16-bit tensors and casts that touch u32,
/// fused or not; casts among f32, f16 and bf16 run on the built-in
/// conversion kernels (checked bit for bit by the test above).
#[cfg(not(feature = "glsl"))]
#[test]
fn without_generated_kernels_sixteen_bit_arithmetic_is_refused() {
    let gpu = common::gpu();
    if !sixteen_bit_ok(&gpu) {
        return;
    }
    for fused in [false, true] {
        let mut ops = gpu.ops_with(options(fused));
        let h = ops.upload_as(&[F16::from_f32(1.0); 4]).unwrap();
        let u = ops.upload_as(&[1u32; 4]).unwrap();
        let glsl = |e: Error| match &e {
            Error::Ops(OpsError::Dtype { .. }) if e.to_string().contains("`glsl` feature") => {}
            other => panic!("expected OpsError::Dtype naming the glsl feature, got {other:?}"),
        };
        glsl(ops.relu(&h).unwrap_err());
        glsl(ops.add(&h, &h).unwrap_err());
        glsl(ops.full_as(Shape::Vector(4), 1.0, DType::Bf16).unwrap_err());
        glsl(ops.cast(&u, DType::F32).unwrap_err());
        assert_eq!(ops.num_operations(), 0);
    }
    common::assert_clean(&gpu);
}

#[cfg(feature = "glsl")]
#[test]
fn sixteen_bit_elementwise_ops_match_the_cpu_fused_and_unfused() {
    let gpu = common::gpu();
    if !sixteen_bit_ok(&gpu) {
        return;
    }
    let mut rng = common::Rng::new(21);
    let (rows, cols) = (5u32, 12u32);
    let n = (rows * cols) as usize;
    for d in [DType::F16, DType::Bf16] {
        let x = to_dtype(d, &rng.vec_f32(n));
        let y = to_dtype(d, &rng.vec_f32(n));
        let bias = to_dtype(d, &rng.vec_f32(cols as usize));
        let r = |v: f64| round(d, v);
        let (x64, y64): (Vec<f64>, Vec<f64>) = (
            x.iter().map(|&v| f64::from(v)).collect(),
            y.iter().map(|&v| f64::from(v)).collect(),
        );
        // The CPU: each op's result rounded to d.
        let s: Vec<f64> = x64.iter().zip(&y64).map(|(a, b)| r(a + b)).collect();
        let rl: Vec<f64> = s.iter().map(|v| r(v.max(0.0))).collect();
        let sc: Vec<f64> = rl.iter().map(|v| r(3.0 * v)).collect();
        let m: Vec<f64> = sc.iter().zip(&y64).map(|(a, b)| r(a * b)).collect();
        let sig: Vec<f64> = x64.iter().map(|v| r(1.0 / (1.0 + (-v).exp()))).collect();
        let ax: Vec<f64> = x64
            .iter()
            .zip(&y64)
            .map(|(a, b)| r(r(a - b) * 0.5 + b))
            .collect();
        let row: Vec<f64> = (0..n)
            .map(|i| r(x64[i] + f64::from(bias[i % cols as usize])))
            .collect();
        let full = r(0.1);
        let mut bits: Vec<Vec<u16>> = Vec::new();
        for fused in [false, true] {
            let mut ops = gpu.ops_with(options(fused));
            let tx = upload(&mut ops, d, &x);
            let ty = upload(&mut ops, d, &y);
            let txm = ops.copy(&tx).unwrap();
            let a = ops.add(&tx, &ty).unwrap();
            let rl_t = ops.relu(&a).unwrap();
            let sc_t = ops.scale(&rl_t, 3.0).unwrap();
            let m_t = ops.mul(&sc_t, &ty).unwrap();
            let sig_t = ops.sigmoid(&tx).unwrap();
            let dif = ops.sub(&tx, &ty).unwrap();
            let ax_t = ops.axpy(0.5, &dif, &ty).unwrap();
            // In place: y2 = y; y2 += x; y2 = 2 x + y2 (saxpy).
            let y2 = ops.copy(&ty).unwrap();
            ops.add_(&y2, &tx).unwrap();
            ops.saxpy_(2.0, &tx, &y2).unwrap();
            let full_t = ops.full_as(Shape::Vector(n as u32), 0.1, d).unwrap();
            for t in [&a, &m_t, &sig_t, &ax_t, &y2, &full_t, &txm] {
                assert_eq!(t.dtype(), d);
            }
            ops.execute_blocking().unwrap();
            let what = |w: &str| format!("{d} {w} (fused {fused})");
            close(&ops.read(&a).unwrap(), &s, d, 2.0, 1e-3, &what("add"));
            close(
                &ops.read(&m_t).unwrap(),
                &m,
                d,
                5.0,
                1e-3,
                &what("mul chain"),
            );
            close(
                &ops.read(&sig_t).unwrap(),
                &sig,
                d,
                2.0,
                1e-3,
                &what("sigmoid"),
            );
            close(&ops.read(&ax_t).unwrap(), &ax, d, 3.0, 1e-3, &what("axpy"));
            close(&ops.read(&txm).unwrap(), &x64, d, 0.0, 0.0, &what("copy"));
            let y2w: Vec<f64> = (0..n)
                .map(|i| r(2.0 * x64[i] + r(y64[i] + x64[i])))
                .collect();
            close(
                &ops.read(&y2).unwrap(),
                &y2w,
                d,
                3.0,
                1e-3,
                &what("in place"),
            );
            assert!(ops
                .read(&full_t)
                .unwrap()
                .iter()
                .all(|&v| f64::from(v) == full));
            // Exact arithmetic is bit-identical fused and unfused.
            bits.push(match d {
                DType::F16 => ops
                    .read_as::<F16>(&m_t)
                    .unwrap()
                    .iter()
                    .map(|v| v.0)
                    .collect(),
                _ => ops
                    .read_as::<Bf16>(&m_t)
                    .unwrap()
                    .iter()
                    .map(|v| v.0)
                    .collect(),
            });
            // A row bias on a matrix of d.
            let mut ops = gpu.ops_with(options(fused));
            let xm = match d {
                DType::F16 => ops
                    .upload_matrix_as(
                        &x.iter().map(|&v| F16::from_f32(v)).collect::<Vec<_>>(),
                        rows,
                        cols,
                    )
                    .unwrap(),
                _ => ops
                    .upload_matrix_as(
                        &x.iter().map(|&v| Bf16::from_f32(v)).collect::<Vec<_>>(),
                        rows,
                        cols,
                    )
                    .unwrap(),
            };
            let tb2 = upload(&mut ops, d, &bias);
            let out = ops.add_row(&xm, &tb2).unwrap();
            let relu_out = ops.relu(&out).unwrap();
            ops.execute_blocking().unwrap();
            close(
                &ops.read(&out).unwrap(),
                &row,
                d,
                2.0,
                1e-3,
                &what("add_row"),
            );
            let rw: Vec<f64> = row.iter().map(|v| v.max(0.0)).collect();
            close(
                &ops.read(&relu_out).unwrap(),
                &rw,
                d,
                2.0,
                1e-3,
                &what("add_row + relu"),
            );
        }
        assert_eq!(bits[0], bits[1], "{d}: fused and unfused differ");
    }
    common::assert_clean(&gpu);
}

#[cfg(feature = "glsl")]
#[test]
fn a_cast_of_a_sixteen_bit_chain_is_one_fused_kernel() {
    let gpu = common::gpu();
    if !sixteen_bit_ok(&gpu) {
        return;
    }
    let x: Vec<f32> = (0..1000).map(|i| (i as f32 - 500.0) / 64.0).collect();
    let y: Vec<f32> = (0..1000).map(|i| (i % 7) as f32 / 8.0).collect();
    let mut got = Vec::new();
    for fused in [true, false] {
        let mut ops = gpu.ops_with(options(fused));
        let tx = upload(&mut ops, DType::F16, &x);
        let ty = upload(&mut ops, DType::F16, &y);
        let s = ops.add(&tx, &ty).unwrap();
        let r = ops.relu(&s).unwrap();
        let out = ops.cast(&r, DType::F32).unwrap();
        drop((s, r));
        ops.execute_blocking().unwrap();
        let want = if fused { 1 } else { 3 };
        assert_eq!(ops.num_dispatches(), Some(want), "fused {fused}");
        got.push(ops.read_as::<f32>(&out).unwrap());
    }
    let want: Vec<f32> = x
        .iter()
        .zip(&y)
        .map(|(a, b)| F16::from_f32(a + b).to_f32().max(0.0))
        .collect();
    assert_eq!(got[0], want);
    assert_eq!(got[1], want);
    common::assert_clean(&gpu);
}

#[test]
fn mixed_and_unsupported_types_are_typed_errors_at_record_time() {
    let gpu = common::gpu();
    if !sixteen_bit_ok(&gpu) {
        return;
    }
    let mut ops = gpu.ops();
    let h = ops.upload_as(&[F16::from_f32(1.0); 4]).unwrap();
    let b = ops.upload_as(&[Bf16::from_f32(1.0); 4]).unwrap();
    let u = ops.upload_as(&[1u32, 2, 3, 4]).unwrap();
    let hm = ops
        .upload_matrix_as(&[F16::from_f32(1.0); 4], 2, 2)
        .unwrap();
    let f = ops.upload(&[1.0f32; 4]).unwrap();
    let f2 = ops.upload(&[1.0f32; 2]).unwrap();
    let before = ops.num_operations();
    let check = |e: Error, op: &str, dtype: DType, words: &[&str]| match &e {
        Error::Ops(OpsError::Dtype {
            op: o, dtype: d, ..
        }) => {
            assert_eq!((*o, *d), (op, dtype.name()), "{e}");
            let msg = e.to_string();
            for w in words {
                assert!(msg.contains(w), "{msg} lacks {w}");
            }
        }
        other => panic!("{op}: expected OpsError::Dtype, got {other:?}"),
    };
    check(
        ops.add(&h, &b).unwrap_err(),
        "ops::add",
        DType::Bf16,
        &["f16", "bf16", "b [4]"],
    );
    check(
        ops.mul_(&f, &h).unwrap_err(),
        "ops::mul",
        DType::F16,
        &["f32", "f16"],
    );
    check(
        ops.add_row(&hm, &f2).unwrap_err(),
        "ops::add_row",
        DType::F32,
        &["bias", "f16"],
    );
    check(ops.relu(&u).unwrap_err(), "ops::relu", DType::U32, &["u32"]);
    check(
        ops.matmul(&hm, &hm).unwrap_err(),
        "ops::matmul",
        DType::F16,
        &["a [2×2]", "f16"],
    );
    check(
        ops.sum(&b).unwrap_err(),
        "ops::sum",
        DType::Bf16,
        &["x [4]"],
    );
    check(
        ops.softmax(&h).unwrap_err(),
        "ops::softmax",
        DType::F16,
        &["f32"],
    );
    check(
        ops.transpose(&hm).unwrap_err(),
        "ops::transpose",
        DType::F16,
        &["f16"],
    );
    check(ops.dot(&f, &h).unwrap_err(), "ops::dot", DType::F16, &["b"]);
    check(
        ops.rms_norm(&h, &f, 1e-5).unwrap_err(),
        "ops::nn::rms_norm",
        DType::F16,
        &["x"],
    );
    check(
        ops.silu_mul(&f, &h).unwrap_err(),
        "ops::nn::silu_mul",
        DType::F16,
        &["up"],
    );
    check(
        ops.cast(&u, DType::F16).unwrap_err(),
        "ops::cast",
        DType::U32,
        &["f16"],
    );
    check(
        ops.cast(&b, DType::U32).unwrap_err(),
        "ops::cast",
        DType::Bf16,
        &["u32"],
    );
    check(
        ops.full_as(Shape::Vector(4), 1.0, DType::U32).unwrap_err(),
        "ops::fill",
        DType::U32,
        &[],
    );
    assert_eq!(ops.num_operations(), before, "nothing was recorded");
    ops.execute_blocking().unwrap();
    check(
        ops.read(&u).unwrap_err(),
        "OpBatch::read",
        DType::U32,
        &["read_as"],
    );
    check(
        ops.read_as::<F16>(&f).unwrap_err(),
        "OpBatch::read_as",
        DType::F32,
        &["f16"],
    );
    check(
        ops.buffer(&h).unwrap_err(),
        "OpBatch::buffer",
        DType::F16,
        &["f32"],
    );
    // One buffer imported as two element types would alias: refused.
    let buf = gpu.upload(&[1.0f32; 8]).unwrap();
    ops.import(&buf).unwrap();
    let words = buf.reinterpret::<u32>().unwrap();
    let e = ops.import_as(&words).unwrap_err();
    assert!(
        matches!(e, Error::OpShape { .. }) && e.to_string().contains("as f32"),
        "{e}"
    );
    // A 16-bit slice import must start on the same byte alignment as f32's.
    let halves = gpu.upload(&[F16(0); 64]).unwrap();
    let e = ops
        .import_slice_as(&halves.slice(1..9).unwrap())
        .unwrap_err();
    assert!(
        matches!(e, Error::OpShape { .. }) && e.to_string().contains("byte offset 2"),
        "{e}"
    );
    common::assert_clean(&gpu);
}

#[cfg(feature = "glsl")]
#[test]
fn imports_of_every_type_read_back_and_compute() {
    let gpu = common::gpu();
    if !sixteen_bit_ok(&gpu) {
        return;
    }
    let align = gpu.info().min_storage_buffer_offset_alignment.max(16) as usize;
    let x: Vec<f32> = (0..64).map(|i| i as f32 * 0.25 - 4.0).collect();
    let hb = gpu
        .upload(&x.iter().map(|&v| F16::from_f32(v)).collect::<Vec<_>>())
        .unwrap();
    let bb = gpu
        .upload(&x.iter().map(|&v| Bf16::from_f32(v)).collect::<Vec<_>>())
        .unwrap();
    // A second buffer of halves, imported by a slice from an aligned
    // element and negated in place.
    let sb = gpu
        .upload(&x.iter().map(|&v| F16::from_f32(v)).collect::<Vec<_>>())
        .unwrap();
    let words: Vec<u32> = (0..64).map(|i| i * 1000).collect();
    let ub = gpu.upload(&words).unwrap();
    for fused in [false, true] {
        let mut ops = gpu.ops_with(options(fused));
        let h = ops.import_as(&hb).unwrap();
        let bm = ops.import_matrix_as(&bb, 8, 8).unwrap();
        let u = ops.import_as(&ub).unwrap();
        // A slice of the halves from an aligned element.
        let start = align / 2;
        let hs = if start + 8 <= 64 {
            Some(
                ops.import_slice_as(&sb.slice(start..start + 8).unwrap())
                    .unwrap(),
            )
        } else {
            common::skipped(format!(
                "minStorageBufferOffsetAlignment {align} leaves no slice"
            ));
            None
        };
        if let Some(hs) = &hs {
            ops.scale_(hs, -1.0).unwrap();
        }
        let h2 = ops.add(&h, &h).unwrap();
        let bneg = ops.scale(&bm, -1.0).unwrap();
        let uf = ops.cast(&u, DType::F32).unwrap();
        let uf2 = ops.scale(&uf, 0.5).unwrap();
        ops.relu_(&h).unwrap(); // writes the user's buffer
        ops.execute_blocking().unwrap();
        let want2: Vec<f32> = x.iter().map(|v| 2.0 * v).collect();
        assert_eq!(ops.read(&h2).unwrap(), want2);
        let wantn: Vec<f32> = x.iter().map(|v| -v).collect();
        assert_eq!(ops.read(&bneg).unwrap(), wantn);
        assert_eq!(bneg.shape(), Shape::Matrix(8, 8));
        let wantu: Vec<f32> = words.iter().map(|&w| w as f32 * 0.5).collect();
        assert_eq!(ops.read(&uf2).unwrap(), wantu);
        let relu: Vec<F16> = x.iter().map(|&v| F16::from_f32(v.max(0.0))).collect();
        assert_eq!(ops.read_as::<F16>(&h).unwrap(), relu);
        assert_eq!(hb.download().unwrap(), relu, "in place on the import");
        if let Some(hs) = hs {
            // Read after the in-place relu: the slice shows the buffer.
            let want: Vec<F16> = x[start..start + 8]
                .iter()
                .map(|&v| F16::from_f32(-v))
                .collect();
            assert_eq!(ops.read_as::<F16>(&hs).unwrap(), want);
        }
        let halves: Vec<F16> = x.iter().map(|&v| F16::from_f32(v)).collect();
        hb.write(0, &halves).unwrap();
        sb.write(0, &halves).unwrap();
    }
    common::assert_clean(&gpu);
}

#[cfg(feature = "glsl")]
#[test]
fn liveness_reuses_buffers_across_types() {
    let gpu = common::gpu();
    if !sixteen_bit_ok(&gpu) {
        return;
    }
    // Unfused, so every value is stored: f32 values of n elements and f16
    // values of 2n (the same bytes) take turns in the pool.
    let n = 256usize;
    let x: Vec<f32> = (0..n).map(|i| (i as f32) / 16.0 - 8.0).collect();
    let mut ops = gpu.ops_with(options(false));
    let mut cur = ops.upload(&x).unwrap();
    let mut want: Vec<f32> = x.clone();
    for k in 0..12 {
        let d = if k % 2 == 0 { DType::F16 } else { DType::Bf16 };
        let narrow = ops.cast(&cur, d).unwrap();
        let twice = ops.add(&narrow, &narrow).unwrap();
        cur = ops.cast(&twice, DType::F32).unwrap();
        let wide = ops.scale(&cur, 0.5).unwrap();
        cur = wide;
        want = want
            .iter()
            .map(|&v| {
                let r = round(d, f64::from(v)) as f32;
                round(d, f64::from(r + r)) as f32 * 0.5
            })
            .collect();
    }
    // A 16-bit value twice as long as an f32 one: the same bytes.
    let h2n = ops.upload_as(&vec![F16::from_f32(1.0); 2 * n]).unwrap();
    let grown = ops.scale(&h2n, 3.0).unwrap();
    let done = ops.relu(&grown).unwrap();
    drop(grown);
    ops.execute_blocking().unwrap();
    assert_eq!(ops.read(&cur).unwrap(), want);
    assert!(ops.read(&done).unwrap().iter().all(|&v| v == 3.0));
    // 2 uploads, and a few pooled buffers for 50 values.
    let bufs = ops.num_buffers();
    assert!(bufs <= 7, "{bufs} buffers for a chain of 50 values");
    common::assert_clean(&gpu);
}

#[cfg(feature = "glsl")]
#[test]
fn a_graph_launched_twice_sees_new_f16_input() {
    let gpu = common::gpu();
    if !sixteen_bit_ok(&gpu) {
        return;
    }
    let n = 100usize;
    let first: Vec<F16> = (0..n).map(|i| F16::from_f32(i as f32 - 50.0)).collect();
    let second: Vec<F16> = (0..n).map(|i| F16::from_f32(0.5 * i as f32)).collect();
    let input = gpu.upload(&first).unwrap();
    for fused in [false, true] {
        input.write(0, &first).unwrap();
        let mut ops = gpu.ops_with(options(fused));
        let x = ops.import_as(&input).unwrap();
        let s = ops.scale(&x, 1.5).unwrap();
        let r = ops.relu(&s).unwrap();
        let out = ops.cast(&r, DType::F32).unwrap();
        drop((s, r));
        let graph = ops.graph().unwrap();
        let want = |v: &[F16]| -> Vec<f32> {
            v.iter()
                .map(|h| F16::from_f32(1.5 * h.to_f32()).to_f32().max(0.0))
                .collect()
        };
        graph.launch().unwrap().wait().unwrap();
        assert_eq!(ops.read(&out).unwrap(), want(&first), "fused {fused}");
        input.write(0, &second).unwrap();
        graph.launch().unwrap().wait().unwrap();
        assert_eq!(ops.read(&out).unwrap(), want(&second), "fused {fused}");
    }
    common::assert_clean(&gpu);
}
