//! Products with bf16 B (`ops::matmul_bf16w`): f16 or f32 A, B stored K×N
//! or N×K (`b_transposed`), batched with odd strides and a shared B, every
//! product against an f64 reference of the stored values, and the typed
//! errors. The default path runs the tensor-core kernel where the adapter
//! has it (coopmat2 with block loads) and the portable kernel elsewhere;
//! each tensor-core tile also runs explicitly
//! (`matmul_bf16w_with_tile`), skipped where the adapter lacks it.

mod common;

use vkcompute::ops::{self, BatchedShape, Bf16, Cm2Tile, MatmulCaps, F16};
use vkcompute::{Buffer, Device, Error};

/// A's element type in a case.
#[derive(Debug, Clone, Copy, PartialEq)]
enum AType {
    F16,
    F32,
}

/// Full-entropy inputs: A uniform in [-1, 1) (f16-rounded for f16 A), B
/// any bf16 in [-2, 2) with all 8 significant bits random. Returns A as
/// stored (f32 values, or f16 bits) with its exact values, and B's bits
/// with theirs.
fn inputs(
    rng: &mut common::Rng,
    a_type: AType,
    la: u64,
    lb: u64,
) -> (Operand, Vec<f64>, Vec<Bf16>, Vec<f64>) {
    let raw: Vec<f32> = (0..la).map(|_| rng.f32()).collect();
    let (a, av) = match a_type {
        AType::F32 => (
            Operand::F32(raw.clone()),
            raw.iter().map(|&x| f64::from(x)).collect(),
        ),
        AType::F16 => {
            let h: Vec<F16> = raw.iter().map(|&x| F16::from_f32(x)).collect();
            let v = h.iter().map(|x| f64::from(x.to_f32())).collect();
            (Operand::F16(h), v)
        }
    };
    let b: Vec<Bf16> = (0..lb).map(|_| Bf16::from_f32(rng.f32() * 2.0)).collect();
    let bv = b.iter().map(|x| f64::from(x.to_f32())).collect();
    (a, av, b, bv)
}

enum Operand {
    F16(Vec<F16>),
    F32(Vec<f32>),
}

/// Runs `shape` with `a_type` A on `tile` (`None`: `matmul_bf16w`'s own
/// choice; `Some(None)`: the portable kernel; `Some(Some(t))`: tile `t`)
/// and checks every
/// product and the gaps between C's matrices. The bound covers A's and
/// B's rounding to f16 on the tensor-core kernel (relative 2^-10 per
/// product term, either rounding mode, and 2^-24 absolute per factor for
/// values below f16's normal range) and f32 accumulation.
fn run(gpu: &Device, shape: BatchedShape, a_type: AType, tile: Option<Option<Cm2Tile>>) {
    let seed = u64::from(shape.m * 7 + shape.k * 3 + shape.n) + u64::from(shape.count) * 101;
    let mut rng = common::Rng::new(seed);
    let [la, lb, lc] = shape.lens();
    let (a, av, b, bv) = inputs(&mut rng, a_type, la, lb);
    let gb = gpu.upload(&b).unwrap();
    let gc = gpu.upload(&vec![-7.0f32; lc as usize]).unwrap();
    let mut batch = gpu.batch().unwrap();
    let record = |batch: &mut vkcompute::Batch, a: ops::MatmulInput<'_>| match tile {
        None => ops::matmul_bf16w(batch, a, &gb, &gc, shape),
        Some(t) => ops::matmul_bf16w_with_tile(batch, a, &gb, &gc, shape, t),
    };
    match &a {
        Operand::F16(h) => {
            let ga: Buffer<F16> = gpu.upload(h).unwrap();
            record(&mut batch, (&ga).into()).unwrap();
            batch.submit().unwrap();
        }
        Operand::F32(x) => {
            let ga: Buffer<f32> = gpu.upload(x).unwrap();
            record(&mut batch, (&ga).into()).unwrap();
            batch.submit().unwrap();
        }
    }
    let got = gc.download().unwrap();
    let (m, k, n) = (shape.m as usize, shape.k as usize, shape.n as usize);
    let mut written = vec![false; lc as usize];
    let unit = 2f64.powi(-10) + 2.0 * k as f64 * 2f64.powi(-24);
    for i in 0..shape.count as usize {
        let (oa, ob, oc) = (
            i * shape.stride_a as usize,
            i * shape.stride_b as usize,
            i * shape.stride_c as usize,
        );
        for r in 0..m {
            for c in 0..n {
                let bi = |x: usize| {
                    if shape.b_transposed {
                        ob + c * k + x
                    } else {
                        ob + x * n + c
                    }
                };
                let (mut want, mut mag, mut tiny) = (0.0f64, 0.0f64, 0.0f64);
                for x in 0..k {
                    let (va, vb) = (av[oa + r * k + x], bv[bi(x)]);
                    want += va * vb;
                    mag += (va * vb).abs();
                    tiny += va.abs() + vb.abs();
                }
                let g = f64::from(got[oc + r * n + c]);
                // Values below f16's normal range round to its subnormals
                // (spacing 2^-24): an absolute 2^-24 per factor covers them.
                let tol = mag * unit + tiny * 2f64.powi(-24) + 1e-30;
                assert!(
                    (g - want).abs() <= tol,
                    "{shape:?} {a_type:?} {tile:?}: product {i} C[{r},{c}] = {g}, want {want} \
                     (bound {tol})"
                );
                written[oc + r * n + c] = true;
            }
        }
    }
    for (j, w) in written.iter().enumerate() {
        if !w {
            assert_eq!(
                got[j], -7.0,
                "{shape:?}: element {j} between outputs changed"
            );
        }
    }
}

#[test]
fn bf16w_products_match_the_reference_for_odd_sizes() {
    let gpu = common::gpu();
    let sizes = [1u32, 15, 17, 127];
    for a_type in [AType::F16, AType::F32] {
        for bt in [false, true] {
            for m in sizes {
                for k in sizes {
                    for n in sizes {
                        let s = BatchedShape::packed(1, m, k, n);
                        let s = if bt { s.with_b_transposed() } else { s };
                        run(&gpu, s, a_type, None);
                    }
                }
            }
        }
    }
    common::assert_clean(&gpu);
}

#[test]
fn bf16w_batched_products_with_odd_strides_match_the_reference() {
    let gpu = common::gpu();
    let cases = [
        BatchedShape::packed(3, 17, 15, 33),
        // Odd strides with gaps between the matrices.
        BatchedShape {
            count: 3,
            m: 15,
            k: 17,
            n: 9,
            stride_a: 15 * 17 + 5,
            stride_b: 17 * 9 + 3,
            stride_c: 15 * 9 + 7,
            b_transposed: false,
        },
        // One B for every product (a shared weight).
        BatchedShape {
            stride_b: 0,
            ..BatchedShape::packed(5, 31, 40, 20)
        },
        BatchedShape::packed(2, 130, 72, 136),
    ];
    for a_type in [AType::F16, AType::F32] {
        for shape in cases {
            run(&gpu, shape, a_type, None);
            run(&gpu, shape.with_b_transposed(), a_type, None);
        }
    }
    common::assert_clean(&gpu);
}

#[test]
fn bf16w_portable_kernel_runs_on_every_adapter() {
    let gpu = common::gpu();
    for a_type in [AType::F16, AType::F32] {
        for s in [
            BatchedShape::packed(2, 33, 70, 19),
            BatchedShape::packed(1, 1, 127, 1),
        ] {
            run(&gpu, s, a_type, Some(None));
            run(&gpu, s.with_b_transposed(), a_type, Some(None));
        }
    }
    common::assert_clean(&gpu);
}

/// GPU-only: each tensor-core tile on interior blocks with 1, 4 and 5 whole
/// slices and a partial one, edge blocks, odd K (clamped loads only), B's
/// start off 16 bytes and a shared B, for both A types and B layouts.
#[test]
fn bf16w_converted_path_matches_the_reference() {
    // From ops::BF16W_CONVERT_MIN_ROWS rows on the tensor-core path, B (and
    // an f32 A) are converted to f16 first and the f16 kernel runs: odd
    // sizes, both layouts, both A types, and a batch sharing B.
    let gpu = common::gpu();
    let caps = MatmulCaps::of(gpu.info());
    if !caps.coopmat2_decode {
        common::skipped(
            "the converted bf16-weight path: needs the tensor-core path (VK_NV_cooperative_matrix2 \
             with cooperativeMatrixBlockLoads)",
        );
        return;
    }
    let shapes = [
        BatchedShape::packed(1, ops::BF16W_CONVERT_MIN_ROWS, 264, 512),
        BatchedShape::packed(1, 300, 67, 257),
        BatchedShape {
            stride_b: 0,
            ..BatchedShape::packed(2, 260, 136, 128)
        },
    ];
    for shape in shapes {
        assert!(ops::converts_first(&shape), "{shape:?}");
        for a_type in [AType::F16, AType::F32] {
            run(&gpu, shape, a_type, None);
            run(&gpu, shape.with_b_transposed(), a_type, None);
        }
    }
    common::assert_clean(&gpu);
}

#[test]
fn bf16w_tensor_core_tiles_match_the_reference() {
    let gpu = common::gpu();
    let caps = MatmulCaps::of(gpu.info());
    let shapes = [
        BatchedShape::packed(2, 129, 72, 257),
        BatchedShape::packed(1, 256, 264, 512),
        BatchedShape::packed(1, 136, 320, 264),
        BatchedShape::packed(2, 130, 67, 136),
        BatchedShape {
            stride_b: 72 * 264 + 4,
            ..BatchedShape::packed(2, 128, 72, 264)
        },
        BatchedShape {
            stride_b: 0,
            ..BatchedShape::packed(3, 64, 128, 128)
        },
    ];
    let tiles = [
        Cm2Tile::WIDE_GROUPED,
        Cm2Tile::WIDE,
        Cm2Tile::SQUARE,
        Cm2Tile::SMALL,
    ];
    if !caps.coopmat2_decode {
        common::skipped(
            "bf16-weight tensor-core tiles: need VK_NV_cooperative_matrix2's workgroup-scope \
             f16 shape and cooperativeMatrixBlockLoads",
        );
        return;
    }
    for t in tiles {
        if !t.fits(&caps) {
            common::skipped(format!(
                "bf16-weight tile {t:?}: the adapter's workgroup-scope f16 shape (granularity \
                 {:?}, sides up to {}) does not divide it",
                caps.coopmat2_granularity, caps.coopmat2_max_dimension
            ));
            continue;
        }
        for a_type in [AType::F16, AType::F32] {
            for shape in shapes {
                run(&gpu, shape, a_type, Some(Some(t)));
                run(&gpu, shape.with_b_transposed(), a_type, Some(Some(t)));
            }
        }
    }
    common::assert_clean(&gpu);
}

#[test]
fn bf16w_bad_shapes_and_tiles_are_typed_errors() {
    let gpu = common::gpu();
    let shape = BatchedShape::packed(2, 4, 4, 4);
    let a = gpu.alloc::<f32>(32).unwrap();
    let b = gpu.alloc::<Bf16>(32).unwrap();
    let c = gpu.alloc::<f32>(32).unwrap();
    let short = gpu.alloc::<f32>(31).unwrap();
    let short_b = gpu.alloc::<Bf16>(31).unwrap();
    let cases: Vec<(BatchedShape, &Buffer<Bf16>, &Buffer<f32>, &str)> = vec![
        (
            BatchedShape {
                stride_c: 8,
                ..shape
            },
            &b,
            &c,
            "overlap",
        ),
        (BatchedShape { count: 0, ..shape }, &b, &c, "at least 1"),
        (shape, &b, &short, "C holds 31 elements"),
        (shape, &short_b, &c, "B holds 31 elements"),
        (shape, &b, &a, "same buffer"),
    ];
    for (s, bb, out, needle) in cases {
        let mut batch = gpu.batch().unwrap();
        match ops::matmul_bf16w(&mut batch, &a, bb, out, s) {
            Err(Error::MatmulShape { detail, .. }) => {
                assert!(detail.contains(needle), "{needle}: {detail}")
            }
            other => panic!("{s:?}: want a MatmulShape error naming {needle:?}, got {other:?}"),
        }
        assert!(batch.is_empty(), "a refused product recorded nothing");
    }
    // A tile with no tensor-core kernel is refused by name.
    let mut batch = gpu.batch().unwrap();
    match ops::matmul_bf16w_with_tile(&mut batch, &a, &b, &c, shape, Some(Cm2Tile::SHALLOW)) {
        Err(Error::MatmulShape { detail, .. }) => {
            assert!(detail.contains("no tensor-core kernel"), "{detail}")
        }
        other => panic!("SHALLOW: want a MatmulShape error, got {other:?}"),
    }
    // A compiled tile on an adapter without the decoding loads: Unsupported.
    let caps = MatmulCaps::of(gpu.info());
    if caps.coopmat2_decode && Cm2Tile::SQUARE.fits(&caps) {
        common::skipped("the Unsupported error for tensor-core tiles: this adapter has them");
    } else {
        match ops::matmul_bf16w_with_tile(&mut batch, &a, &b, &c, shape, Some(Cm2Tile::SQUARE)) {
            Err(Error::Unsupported { what, .. }) => {
                assert!(what.contains("cooperativeMatrixBlockLoads"), "{what}")
            }
            other => panic!("SQUARE without coopmat2: want Unsupported, got {other:?}"),
        }
    }
    assert!(batch.is_empty(), "a refused tile recorded nothing");
    common::assert_clean(&gpu);
}
