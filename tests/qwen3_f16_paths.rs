//! The reduced-precision paths of examples/qwen3 against the f64 CPU
//! reference of examples/qwen3/reference.rs, on tiny random checkpoints:
//! the f16 prefill, the KV cache in the weights' 16-bit dtype, and the
//! decode step on the tensor cores (`DecodeMatmul::Auto`). Each has a
//! bound of its own, set by the roundings it adds (see each test); the f16
//! prefill and the tensor-core decode also check that a rotary one
//! position off exceeds theirs. tests/qwen3.rs holds the exact checks.

mod common;
#[allow(dead_code)]
mod qwen3_support;

#[allow(dead_code)]
#[path = "../examples/qwen3/attend.rs"]
mod attend;
#[allow(dead_code)]
#[path = "../examples/qwen3/buffers.rs"]
mod buffers;
#[allow(dead_code)]
#[path = "../examples/qwen3/checkpoint.rs"]
mod checkpoint;
#[allow(dead_code)]
#[path = "../examples/qwen3/config.rs"]
mod config;
#[allow(dead_code)]
#[path = "../examples/qwen3/model.rs"]
mod model;
#[allow(dead_code)]
#[path = "../examples/qwen3/prefill.rs"]
mod prefill;
#[allow(dead_code)]
#[path = "../examples/qwen3/prefill16.rs"]
mod prefill16;
#[allow(dead_code)]
#[path = "../examples/qwen3/project.rs"]
mod project;
#[allow(dead_code)]
#[path = "../examples/qwen3/reference.rs"]
mod reference;
#[allow(dead_code)]
#[path = "../examples/qwen3/report.rs"]
mod report;
#[allow(dead_code)]
#[path = "../examples/qwen3/state.rs"]
mod state;
#[allow(dead_code)]
#[path = "../examples/qwen3/tiny.rs"]
mod tiny;

use checkpoint::Checkpoint;
use config::{Arch, WeightDtype};
use model::{DecodeMatmul, Model, ModelOptions, PrefillMatmul};
use qwen3_support::*;
use reference::{Fault, Reference};

/// The f16 prefill (`PrefillMatmul::F16`: the portable kernel where there
/// are no tensor cores) of a 70-token prompt, one product over all rows
/// per projection, then decode steps reading the cache it filled, on bf16
/// weights (converted to f16 exactly), Qwen3 and Llama.
///
/// Bound: ten f16 roundings, 10 × 2^-11 ≈ 4.9e-3 of the row's largest
/// |logit|. Each activation entering a projection is rounded to f16
/// (2^-11 relative at most) and the products accumulate in f32; where
/// attention runs on the tensor cores (the GPU machine) q, k, v and the
/// probabilities are rounded to f16 as well. Through the 2 layers of width
/// 64 to 96 the tiny models' logits moved by at most about one such
/// rounding (5.4e-4 Qwen3, 2.3e-4 Llama on lavapipe; 3.1e-4 and 2.3e-4 on
/// an H200 with tensor-core attention; printed per run), so the bound
/// keeps a margin of about 9 while a wrong rotary (0.2 and more, checked
/// below) stays far above it.
#[test]
fn f16_prefill_stays_close() {
    const F16_TOL: f64 = 10.0 / 2048.0;
    let gpu = common::gpu();
    if !gpu.info().storage_buffer16 {
        common::skipped("f16 products need storageBuffer16BitAccess");
        return;
    }
    let prompt: Vec<u32> = (0..70).map(|i| (i * 41 + 3) % 97).collect();
    for (arch, seed) in [(Arch::Qwen3, 29), (Arch::Llama, 31)] {
        let (_dir, ck) = tiny_checkpoint(arch, WeightDtype::Bf16, seed);
        let reference = Reference::load(&ck).expect("reference weights");
        let auto = Model::load(&gpu, &ck, ModelOptions::default()).expect("load");
        let rows = prompt.len() as u32;
        assert_eq!(
            auto.prefill_uses_f16(rows),
            prefill16::tensor_cores(gpu.info()),
            "Auto takes the f16 path for a {rows}-token prompt exactly where there are tensor cores"
        );
        assert!(
            !auto.prefill_uses_f16(prefill16::AUTO_F16_MIN_ROWS),
            "Auto takes the exact path for a prompt of one exact chunk"
        );
        drop(auto);
        let opts = ModelOptions {
            max_seq: 96,
            prefill_matmul: PrefillMatmul::F16,
            ..options(1)
        };
        let mut m = Model::load(&gpu, &ck, opts).expect("load");
        assert!(m.prefill_uses_f16(1), "{}", m.prefill_path(1));
        let runs = run_model(&mut m, std::slice::from_ref(&prompt));
        let e = worst_error(&runs[0], &reference, Fault::None);
        eprintln!("{arch:?} bf16, f16 prefill + decode: worst {e:.2e}");
        assert!(e <= F16_TOL, "{arch:?}: {e:e} > {F16_TOL:e}");
        let f = worst_error(&runs[0], &reference, Fault::RotaryOffByOne);
        eprintln!("  fault RotaryOffByOne: {f:.2e}");
        assert!(f > F16_TOL, "a wrong rotary passed: {f:e} <= {F16_TOL:e}");
        // The exact path of the same model still meets the f32 bound.
        m.set_prefill_matmul(PrefillMatmul::Exact);
        let runs = run_model(&mut m, std::slice::from_ref(&prompt));
        let e = worst_error(&runs[0], &reference, Fault::None);
        eprintln!("{arch:?} bf16, exact prefill + decode: worst {e:.2e}");
        assert!(e <= TOL, "{arch:?} exact: {e:e} > {TOL:e}");
        drop(m);
    }
    common::assert_clean(&gpu);
}

/// The cache in the weights' 16-bit dtype (`--kv-16`): q, k, v and the
/// attention output are rounded to 16 bits (bf16: 2^-9 relative, f16:
/// 2^-12) around attention, so the logits move by about that much, not by
/// the faults' 0.2 and more. Bounds: 2e-2 (bf16) and 3e-3 (f16) of the
/// row's largest |logit|, against the reference fed our tokens.
#[test]
fn sixteen_bit_cache_stays_close() {
    let gpu = common::gpu();
    if !gpu.info().storage_buffer16 {
        common::skipped("16-bit caches need storageBuffer16BitAccess");
        return;
    }
    for (dtype, bound) in [(WeightDtype::Bf16, 2e-2), (WeightDtype::F16, 3e-3)] {
        let (_dir, ck) = tiny_checkpoint(Arch::Qwen3, dtype, 19);
        let reference = Reference::load(&ck).expect("reference weights");
        let opts = ModelOptions {
            kv_f32: false,
            ..options(2)
        };
        let mut m = Model::load(&gpu, &ck, opts).expect("load");
        assert_eq!(m.dims().kv, dtype, "the cache takes the weights' dtype");
        let runs = run_model(&mut m, &[vec![5, 17, 3, 88, 41], vec![90, 2, 64]]);
        for (s, r) in runs.iter().enumerate() {
            let e = worst_error(r, &reference, Fault::None);
            eprintln!("{} cache, seq {s}: worst {e:.2e}", dtype.name());
            assert!(
                e <= bound,
                "{} cache, sequence {s}: {e:e} > {bound:e}",
                dtype.name()
            );
        }
    }
    common::assert_clean(&gpu);
}

/// The decode step with `DecodeMatmul::Auto` at 8 sequences, on a bf16
/// Qwen3 whose widths the tensor-core streaming kernel takes (hidden 128,
/// intermediate 256, 4 query and 2 key/value heads of 32: every K a
/// multiple of 128, every output count of 16). Where the adapter has the
/// Khronos cooperative matrices the four projections of the step run on
/// the tensor cores, their inputs rounded to f16, and the logits of the
/// exact prefill and 8 decode steps stay within the f16 prefill's bound
/// (ten f16 roundings of the largest |logit|) while a wrong rotary does
/// not; elsewhere the plans stay the exact ones and the f32 bound holds.
#[test]
fn batched_decode_on_tensor_cores() {
    const F16_TOL: f64 = 10.0 / 2048.0;
    // The command line's names.
    assert_eq!(DecodeMatmul::parse("auto"), Some(DecodeMatmul::Auto));
    assert_eq!(DecodeMatmul::parse("exact"), Some(DecodeMatmul::Exact));
    assert_eq!(DecodeMatmul::parse("f16"), None);
    let gpu = common::gpu();
    if !gpu.info().storage_buffer16 {
        common::skipped("16-bit weights need storageBuffer16BitAccess");
        return;
    }
    let dir = TempDir::new("qwen3-tensor-decode");
    let mut c = tiny::tiny_config(Arch::Qwen3, WeightDtype::Bf16);
    (c.hidden, c.intermediate, c.head_dim) = (128, 256, 32);
    tiny::write_checkpoint(dir.path(), &c, 41, 1).expect("write the checkpoint");
    let ck = Checkpoint::open(dir.path()).expect("open the checkpoint");
    let reference = Reference::load(&ck).expect("reference weights");
    let opts = ModelOptions {
        decode_matmul: DecodeMatmul::Auto,
        ..options(8)
    };
    let mut m = Model::load(&gpu, &ck, opts).expect("load");
    let plans = m.decode_plans();
    let tensor = m.decode_rounds_x_to_f16();
    eprintln!(
        "decode plans at 8 rows: {}",
        plans.map(project::plan_name).join("; ")
    );
    if tensor {
        // The LM head (97 outputs, not whole 16-output pieces) stays exact.
        assert!(
            plans[..4].iter().all(|p| p.rounds_x_to_f16()),
            "every layer projection of this model takes the tensor cores once one does"
        );
        assert!(!plans[4].rounds_x_to_f16(), "the LM head's 97 outputs");
    }
    let prompts: Vec<Vec<u32>> = (0..8u32)
        .map(|s| (0..3 + s).map(|i| (i * 13 + s * 7 + 1) % 97).collect())
        .collect();
    let runs = run_model(&mut m, &prompts);
    let bound = if tensor { F16_TOL } else { TOL };
    for (s, r) in runs.iter().enumerate() {
        let e = worst_error(r, &reference, Fault::None);
        eprintln!("sequence {s}: worst {e:.2e} (bound {bound:.1e})");
        assert!(e <= bound, "sequence {s}: {e:e} > {bound:e}");
        let f = worst_error(r, &reference, Fault::RotaryOffByOne);
        assert!(f > bound, "a wrong rotary passed: {f:e} <= {bound:e}");
    }
    drop(m);
    common::assert_clean(&gpu);
    if !tensor {
        common::skipped(
            "no tensor-core decode plan on this adapter (needs the Khronos cooperative matrices' \
             f16 shape and 32-lane subgroups): the exact plans were checked instead",
        );
    }
}
