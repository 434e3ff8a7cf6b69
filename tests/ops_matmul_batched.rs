//! Batched f16 products (`ops::matmul_f16_batched`): every product against
//! an f64 reference on odd shapes and strides, a shared B (stride 0), B
//! stored K×N and N×K (`b_transposed`), and the typed errors. On an
//! adapter with workgroup-scope cooperative matrices the tensor-core kernel
//! runs; elsewhere the portable one. Each workgroup-scope tile with a
//! batched kernel also runs explicitly (`matmul_f16_batched_with_tile`),
//! skipped where the adapter lacks it.

mod common;

use vkcompute::ops::{self, BatchedShape, Cm2Tile, MatmulCaps};
use vkcompute::{Batch, Buffer, Device, Error, Result};

fn run_case(gpu: &Device, shape: BatchedShape) {
    run_with(gpu, shape, |batch, a, b, c| {
        ops::matmul_f16_batched(batch, a, b, c, shape)
    });
}

/// Runs `record`'s product of `shape` on random inputs and checks every
/// product against f64 and the gaps between C's matrices.
fn run_with(
    gpu: &Device,
    shape: BatchedShape,
    record: impl Fn(&mut Batch, &Buffer<u16>, &Buffer<u16>, &Buffer<f32>) -> Result<()>,
) {
    let mut rng = common::Rng::new(u64::from(shape.m * 7 + shape.k * 3 + shape.n));
    let [la, lb, lc] = shape.lens();
    let (abits, a) = rng.exact_f16(la as usize);
    let (bbits, b) = rng.exact_f16(lb as usize);
    let ga = gpu.upload(&abits).unwrap();
    let gb = gpu.upload(&bbits).unwrap();
    // C starts as a marker: the gaps between outputs must keep it.
    let gc = gpu.upload(&vec![-7.0f32; lc as usize]).unwrap();
    let mut batch = gpu.batch().unwrap();
    record(&mut batch, &ga, &gb, &gc).unwrap();
    batch.submit().unwrap();
    let got = gc.download().unwrap();
    let (m, k, n) = (shape.m as usize, shape.k as usize, shape.n as usize);
    let mut written = vec![false; lc as usize];
    for i in 0..shape.count as usize {
        let (oa, ob, oc) = (
            i * shape.stride_a as usize,
            i * shape.stride_b as usize,
            i * shape.stride_c as usize,
        );
        for r in 0..m {
            for c in 0..n {
                // B[x][c]: stored K×N, or N×K when transposed.
                let bi = |x: usize| {
                    if shape.b_transposed {
                        ob + c * k + x
                    } else {
                        ob + x * n + c
                    }
                };
                let want: f64 = (0..k).map(|x| a[oa + r * k + x] * b[bi(x)]).sum();
                let g = f64::from(got[oc + r * n + c]);
                // Products of 1/64 multiples sum exactly in f32 up to 2^24 / 4096.
                let tol = 1e-6 * k as f64;
                assert!(
                    (g - want).abs() <= tol,
                    "{shape:?}: product {i} C[{r},{c}] = {g}, want {want}"
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
fn batched_products_match_the_reference() {
    let gpu = common::gpu();
    let cases = [
        BatchedShape::packed(3, 17, 15, 33),
        BatchedShape::packed(1, 1, 1, 1),
        BatchedShape::packed(4, 16, 32, 24),
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
        // Larger than one cooperative-matrix block each way.
        BatchedShape::packed(2, 130, 72, 136),
    ];
    for shape in cases {
        run_case(&gpu, shape);
    }
    common::assert_clean(&gpu);
}

#[test]
fn batched_b_transposed_products_match_the_reference() {
    let gpu = common::gpu();
    let cases = [
        BatchedShape::packed(3, 17, 15, 33),
        BatchedShape::packed(1, 1, 1, 1),
        BatchedShape::packed(1, 5, 1, 3),
        BatchedShape::packed(4, 16, 32, 24),
        // Odd strides with gaps between the matrices (B's start unaligned).
        BatchedShape {
            count: 3,
            m: 15,
            k: 17,
            n: 9,
            stride_a: 15 * 17 + 5,
            stride_b: 17 * 9 + 3,
            stride_c: 15 * 9 + 7,
            b_transposed: true,
        },
        // One B for every product (a shared nn.Linear weight).
        BatchedShape {
            stride_b: 0,
            ..BatchedShape::packed(5, 31, 40, 20)
        },
        // Larger than one cooperative-matrix block each way; K with whole
        // 64-deep slices and a partial one.
        BatchedShape::packed(2, 130, 72, 136),
        BatchedShape::packed(1, 129, 200, 257),
    ];
    for shape in cases {
        run_case(&gpu, shape.with_b_transposed());
    }
    common::assert_clean(&gpu);
}

#[test]
fn batched_tiles_run_both_b_layouts() {
    let gpu = common::gpu();
    let caps = MatmulCaps::of(gpu.info());
    // Interior blocks with 1, 4 and 5 whole slices (the two- and
    // four-slice steps and their tails) and a partial one, edge blocks,
    // odd K (clamped loads only), B's start off 16 bytes, a shared B.
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
        Some(Cm2Tile::WIDE_GROUPED),
        Some(Cm2Tile::WIDE),
        Some(Cm2Tile::SQUARE_GROUPED),
        Some(Cm2Tile::SQUARE),
        Some(Cm2Tile::SMALL),
        Some(Cm2Tile::WIDE_U4),
        Some(Cm2Tile::QUARTER),
        None,
    ];
    for tile in tiles {
        for bt in [false, true] {
            if let Some(t) = tile {
                if t.batched_kernel_name(bt).is_none() {
                    continue;
                }
                if !t.fits(&caps) {
                    common::skipped(format!(
                        "batched coopmat2 tile {t:?}: needs VK_NV_cooperative_matrix2's \
                         workgroup-scope f16 shape (granularity {:?})",
                        caps.coopmat2_granularity
                    ));
                    continue;
                }
            }
            for shape in shapes {
                let shape = if bt { shape.with_b_transposed() } else { shape };
                run_with(&gpu, shape, |batch, a, b, c| {
                    ops::matmul::matmul_f16_batched_with_tile(batch, a, b, c, shape, tile)
                });
            }
        }
    }
    common::assert_clean(&gpu);
}

#[test]
fn batched_bad_shapes_are_typed_errors() {
    let gpu = common::gpu();
    let shape = BatchedShape::packed(2, 4, 4, 4);
    let a = gpu.alloc::<u16>(32).unwrap();
    let b = gpu.alloc::<u16>(32).unwrap();
    let c = gpu.alloc::<f32>(32).unwrap();
    let short = gpu.alloc::<f32>(31).unwrap();
    let cases: Vec<(BatchedShape, &vkcompute::Buffer<f32>, &str)> = vec![
        (
            BatchedShape {
                stride_c: 8,
                ..shape
            },
            &c,
            "overlap",
        ),
        (BatchedShape { count: 0, ..shape }, &c, "at least 1"),
        (shape, &short, "C holds 31 elements"),
    ];
    for (s, out, needle) in cases {
        let mut batch = gpu.batch().unwrap();
        match ops::matmul_f16_batched(&mut batch, &a, &b, out, s) {
            Err(Error::MatmulShape { detail, .. }) => {
                assert!(detail.contains(needle), "{needle}: {detail}")
            }
            other => panic!("{s:?}: want a MatmulShape error naming {needle:?}, got {other:?}"),
        }
        assert!(batch.is_empty(), "a refused product recorded nothing");
    }
    // Tiles without a batched kernel for the layout (or, without
    // coopmat2, any tile) are refused by name.
    for (tile, bt) in [
        (Cm2Tile::SHALLOW, false),
        (Cm2Tile::SHALLOW, true),
        (Cm2Tile::WIDE_U4, false),
        (Cm2Tile::QUARTER, false),
    ] {
        let s = if bt { shape.with_b_transposed() } else { shape };
        let mut batch = gpu.batch().unwrap();
        match ops::matmul::matmul_f16_batched_with_tile(&mut batch, &a, &b, &c, s, Some(tile)) {
            Err(Error::MatmulShape { detail, .. }) => {
                assert!(detail.contains("does not apply"), "{tile:?}: {detail}")
            }
            other => panic!("{tile:?}: want a MatmulShape error, got {other:?}"),
        }
        assert!(batch.is_empty(), "a refused tile recorded nothing");
    }
    common::assert_clean(&gpu);
}
