//! The Qwen3/Llama decoder of examples/qwen3 (weights on the device,
//! chunked prefill, the decode step as one graph launch) against the f64
//! CPU reference of examples/qwen3/reference.rs, on tiny random
//! checkpoints (Qwen3 and Llama; f32, f16 and bf16 weights): every logit
//! of the prefill and of 8 greedy decode steps, one and two sequences at
//! different positions, with the f32 KV cache (the 16-bit cache has its
//! own, looser bound below).
//!
//! Bound: each logit within 1e-4 of its row's largest |logit|. Our
//! arithmetic is f32 on the same weights (bf16 ones widened exactly, on
//! both sides), so the differences are f32 roundings through two layers of
//! width 64 to 96, far below that. Each faulty reference (rotary one
//! position off, rotary halves swapped, q/k norms skipped, query heads
//! mapped to kv heads by `h % kv`) must exceed the same bound, which shows
//! the comparison catches those mistakes. These checks prefill exactly
//! (`PrefillMatmul::Exact`); the reduced-precision paths (f16 prefill,
//! 16-bit cache, tensor-core decode) are tests/qwen3_f16_paths.rs.

mod common;
#[allow(dead_code)]
mod qwen3_support;

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
#[path = "../examples/qwen3/prefill.rs"]
mod prefill;
#[path = "../examples/qwen3/prefill16.rs"]
mod prefill16;
#[allow(dead_code)]
#[path = "../examples/qwen3/project.rs"]
mod project;
#[path = "../examples/qwen3/reference.rs"]
mod reference;
#[allow(dead_code)]
#[path = "../examples/qwen3/report.rs"]
mod report;
#[path = "../examples/qwen3/state.rs"]
mod state;
#[allow(dead_code)]
#[path = "../examples/qwen3/tiny.rs"]
mod tiny;

use std::path::Path;

use checkpoint::Checkpoint;
use config::{Arch, WeightDtype};
use model::{Model, ModelError, ModelOptions};
use qwen3_support::*;
use reference::{Fault, Reference};
use vkcompute::ops::nn::SampleParams;

/// Runs `prompts` through the model of `arch`/`dtype`, checks every logit
/// against the reference, and each of `faults` must fail the same check.
fn check(arch: Arch, dtype: WeightDtype, prompts: &[Vec<u32>], faults: &[Fault]) {
    check_with(arch, dtype, prompts, faults, true);
}

/// [`check`] with the decode step's q/k side inside attention's dispatch
/// (`fused_qk`, the default) or as a dispatch of its own.
fn check_with(
    arch: Arch,
    dtype: WeightDtype,
    prompts: &[Vec<u32>],
    faults: &[Fault],
    fused_qk: bool,
) {
    let gpu = common::gpu();
    if dtype != WeightDtype::F32 && !gpu.info().storage_buffer16 {
        common::skipped("16-bit weights need storageBuffer16BitAccess");
        return;
    }
    let (_dir, ck) = tiny_checkpoint(arch, dtype, 7);
    let reference = Reference::load(&ck).expect("reference weights");
    let opts = ModelOptions {
        fused_qk,
        ..options(prompts.len() as u32)
    };
    let mut m = Model::load(&gpu, &ck, opts).expect("load");
    let runs = run_model(&mut m, prompts);
    for (s, r) in runs.iter().enumerate() {
        let e = worst_error(r, &reference, Fault::None);
        eprintln!("{arch:?} {} seq {s}: worst {e:.2e}", dtype.name());
        assert!(
            e <= TOL,
            "sequence {s}: worst relative error {e:e} > {TOL:e}"
        );
        for &f in faults {
            let e = worst_error(r, &reference, f);
            eprintln!("  fault {f:?}: {e:.2e}");
            assert!(
                e > TOL,
                "the faulty reference {f:?} passed ({e:e} <= {TOL:e})"
            );
        }
    }
    drop(m);
    common::assert_clean(&gpu);
}

const QWEN_FAULTS: [Fault; 4] = [
    Fault::RotaryOffByOne,
    Fault::RotaryHalvesSwapped,
    Fault::SkipQkNorm,
    Fault::KvHeadModulo,
];
const LLAMA_FAULTS: [Fault; 3] = [
    Fault::RotaryOffByOne,
    Fault::RotaryHalvesSwapped,
    Fault::KvHeadModulo,
];

#[test]
fn qwen3_f32_one_sequence_matches_the_reference() {
    check(
        Arch::Qwen3,
        WeightDtype::F32,
        &[vec![5, 17, 3, 88, 41]],
        &QWEN_FAULTS,
    );
}

#[test]
fn qwen3_f32_two_sequences_at_different_positions() {
    let prompts = [vec![5, 17, 3, 88, 41], vec![90, 2, 64]];
    check(Arch::Qwen3, WeightDtype::F32, &prompts, &QWEN_FAULTS);
}

#[test]
fn qwen3_f32_with_the_q_k_op_as_a_dispatch_of_its_own() {
    let prompts = [vec![5, 17, 3, 88, 41], vec![90, 2, 64]];
    check_with(Arch::Qwen3, WeightDtype::F32, &prompts, &QWEN_FAULTS, false);
}

#[test]
fn llama_f32_two_sequences_at_different_positions() {
    let prompts = [vec![11, 0, 96, 50], vec![7, 7, 23, 1, 60, 33]];
    check(Arch::Llama, WeightDtype::F32, &prompts, &LLAMA_FAULTS);
}

#[test]
fn qwen3_bf16_weights_match_the_reference() {
    let prompts = [vec![5, 17, 3, 88, 41], vec![90, 2, 64]];
    check(Arch::Qwen3, WeightDtype::Bf16, &prompts, &QWEN_FAULTS);
}

#[test]
fn llama_bf16_weights_match_the_reference() {
    check(
        Arch::Llama,
        WeightDtype::Bf16,
        &[vec![3, 1, 4, 1, 5]],
        &LLAMA_FAULTS,
    );
}

/// Prefill in chunks of 2 rows (so later chunks read the cache) gives the
/// reference's logits, and the decode graph launched k times gives the
/// logits a prefill of the prompt plus the k consumed tokens gives at the
/// same position.
#[test]
fn chunked_prefill_and_decode_agree() {
    let gpu = common::gpu();
    let (_dir, ck) = tiny_checkpoint(Arch::Qwen3, WeightDtype::F32, 3);
    let reference = Reference::load(&ck).expect("reference weights");
    let opts = ModelOptions {
        prefill_chunk: 2,
        ..options(2)
    };
    let mut m = Model::load(&gpu, &ck, opts).expect("load");
    let prompt = vec![9, 8, 7, 6, 5, 4, 3];
    let runs = run_model(&mut m, &[prompt.clone(), vec![1]]);
    let e = worst_error(&runs[0], &reference, Fault::None);
    assert!(e <= TOL, "chunked prefill + decode: {e:e} > {TOL:e}");
    let vocab = m.dims().vocab as usize;
    for k in [1, 4, STEPS] {
        let fed = &runs[0].fed[..prompt.len() + k];
        let logits = m.prefill(1, fed).expect("prefill of the longer prompt");
        let step = &runs[0].rows[k];
        let den = step.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        let num = logits
            .iter()
            .zip(step)
            .fold(0.0f32, |a, (x, y)| a.max((x - y).abs()));
        assert!(
            f64::from(num / den) <= TOL,
            "decode step {k} vs prefill of {} tokens: {} > {TOL:e}",
            fed.len(),
            num / den
        );
        assert_eq!(logits.len(), vocab);
    }
    drop(m);
    common::assert_clean(&gpu);
}

/// Bad input is a typed error before anything runs: a step past the
/// cache, a token past the vocabulary, a batch past the linear layers' rows.
#[test]
fn bad_input_is_a_typed_error() {
    let gpu = common::gpu();
    let (_dir, ck) = tiny_checkpoint(Arch::Llama, WeightDtype::F32, 5);
    let big = ModelOptions {
        max_seq: 1 << 22,
        ..options(64)
    };
    let Err(e) = Model::load(&gpu, &ck, big) else {
        panic!("a 48 GiB cache loaded")
    };
    assert!(
        matches!(&e, ModelError::Load(checkpoint::LoadError::TooLarge { .. })),
        "{e}"
    );
    assert!(e.to_string().contains("key cache"), "{e}");
    let Err(e) = Model::load(&gpu, &ck, options(65)) else {
        panic!("batch 65 loaded")
    };
    assert!(e.to_string().contains("batch"), "{e}");
    let mut m = Model::load(
        &gpu,
        &ck,
        ModelOptions {
            max_seq: 1,
            ..options(1)
        },
    )
    .expect("load");
    assert_eq!(m.max_seq(), 64, "max_seq rounds up to a multiple of 64");
    let e = m.prefill(0, &[97]).unwrap_err();
    assert!(matches!(e, ModelError::Input { what: "prompt", .. }), "{e}");
    assert!(e.to_string().contains("97"), "{e}");
    let e = m.set_tokens(&[1, 2]).unwrap_err();
    assert!(e.to_string().contains("batch is 1"), "{e}");
    m.prefill(0, &vec![1; 62]).expect("prefill 62");
    m.step().expect("position 62").wait().expect("step");
    m.step().expect("position 63").wait().expect("step");
    let Err(e) = m.step() else {
        panic!("position 64 is past the cache, yet the step launched")
    };
    assert!(e.to_string().contains("max_seq = 64"), "{e}");
    m.tokens().expect("no guard tripped");
    drop(m);
    common::assert_clean(&gpu);
}

/// Writes a reference file as the transformers script does: `prompt`,
/// `tokens` (the greedy choice after each row) and `logits` rows.
fn write_reference_file(path: &Path, prompt: &[u32], tokens: &[u32], logits: &[Vec<f32>]) {
    use safetensors::{tensor::TensorView, Dtype};
    let i32s =
        |v: &[u32]| -> Vec<u8> { v.iter().flat_map(|&t| (t as i32).to_le_bytes()).collect() };
    let (p, t) = (i32s(prompt), i32s(tokens));
    let l: Vec<u8> = logits
        .iter()
        .flatten()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let views = vec![
        (
            "prompt",
            TensorView::new(Dtype::I32, vec![prompt.len()], &p).unwrap(),
        ),
        (
            "tokens",
            TensorView::new(Dtype::I32, vec![tokens.len()], &t).unwrap(),
        ),
        (
            "logits",
            TensorView::new(Dtype::F32, vec![logits.len(), logits[0].len()], &l).unwrap(),
        ),
    ];
    safetensors::serialize_to_file(views, None, path).expect("write the reference file");
}

/// The command line's `--reference` comparison: the f64 reference's own
/// greedy run written as the transformers script writes it passes, and the
/// same file with one logit moved by 1e-2 of the row's largest fails.
#[test]
fn reference_file_comparison_passes_and_fails() {
    let gpu = common::gpu();
    let (dir, ck) = tiny_checkpoint(Arch::Qwen3, WeightDtype::F32, 11);
    let reference = Reference::load(&ck).expect("reference weights");
    let prompt = vec![4u32, 44, 14, 40];
    let mut fed = prompt.clone();
    let mut tokens = Vec::new();
    let mut rows = Vec::new();
    for _ in 0..6 {
        let all = reference.forward(&fed, Fault::None);
        let row: Vec<f32> = all[fed.len() - 1].iter().map(|&x| x as f32).collect();
        let next = model::argmax(&row);
        tokens.push(next);
        fed.push(next);
        rows.push(row);
    }
    let file = dir.path().join("reference.safetensors");
    write_reference_file(&file, &prompt, &tokens, &rows);
    let r = report::RefFile::read(&file).expect("read the reference file");
    assert_eq!(
        (r.prompt.clone(), r.tokens.clone()),
        (prompt.clone(), tokens.clone())
    );
    let mut m = Model::load(&gpu, &ck, options(2)).expect("load");
    assert!(
        report::compare(&mut m, &r).expect("compare"),
        "the exact reference must pass"
    );
    let max = rows[3].iter().fold(0.0f32, |a, v| a.max(v.abs()));
    rows[3][5] += 1e-2 * max;
    write_reference_file(&file, &prompt, &tokens, &rows);
    let r = report::RefFile::read(&file).expect("read the reference file");
    assert!(
        !report::compare(&mut m, &r).expect("compare"),
        "a moved logit must fail"
    );
    drop(m);
    common::assert_clean(&gpu);
}

/// Sampled decoding (temperature, top-k, top-p, seeded on the GPU): the
/// logits still match the reference fed the sampled tokens, the same seed
/// gives the same tokens, and the tokens are not all greedy's.
#[test]
fn sampled_decode_matches_the_reference_and_repeats() {
    let gpu = common::gpu();
    let (_dir, ck) = tiny_checkpoint(Arch::Qwen3, WeightDtype::F32, 13);
    let reference = Reference::load(&ck).expect("reference weights");
    let prompts = [vec![8u32, 1, 30], vec![60, 61, 62, 63]];
    let sample = SampleParams {
        temperature: 1.5,
        top_k: 40,
        top_p: 0.95,
        seed: 1234,
    };
    let opts = ModelOptions {
        sample: Some(sample),
        ..options(2)
    };
    let mut runs = Vec::new();
    for _ in 0..2 {
        let mut m = Model::load(&gpu, &ck, opts).expect("load");
        runs.push(run_model(&mut m, &prompts));
    }
    let mut differs_from_greedy = false;
    for (s, r) in runs[0].iter().enumerate() {
        assert_eq!(
            r.fed, runs[1][s].fed,
            "sequence {s}: the same seed, other tokens"
        );
        let e = worst_error(r, &reference, Fault::None);
        assert!(
            e <= TOL,
            "sequence {s}: worst relative error {e:e} > {TOL:e}"
        );
        for (i, row) in r.rows[..STEPS].iter().enumerate() {
            differs_from_greedy |= model::argmax(row) != r.fed[r.prompt_len + i];
        }
    }
    assert!(
        differs_from_greedy,
        "16 draws at temperature 1.5 all equal greedy's choice"
    );
    common::assert_clean(&gpu);
}

/// A prompt longer than one `ops::linear` (70 rows: chunks of 64 and 6)
/// and decode past it match the reference, on Llama with bf16 weights.
#[test]
fn long_prompt_spans_chunks_of_64() {
    let gpu = common::gpu();
    if !gpu.info().storage_buffer16 {
        common::skipped("16-bit weights need storageBuffer16BitAccess");
        return;
    }
    let (_dir, ck) = tiny_checkpoint(Arch::Llama, WeightDtype::Bf16, 17);
    let reference = Reference::load(&ck).expect("reference weights");
    let opts = ModelOptions {
        max_seq: 96,
        ..options(1)
    };
    let mut m = Model::load(&gpu, &ck, opts).expect("load");
    let prompt: Vec<u32> = (0..70).map(|i| (i * 37 + 5) % 97).collect();
    let runs = run_model(&mut m, &[prompt]);
    let e = worst_error(&runs[0], &reference, Fault::None);
    assert!(e <= TOL, "70-token prompt + decode: {e:e} > {TOL:e}");
    drop(m);
    common::assert_clean(&gpu);
}

#[test]
fn f16_weights_match_the_reference() {
    let prompts = [vec![5, 17, 3, 88, 41], vec![90, 2, 64]];
    check(Arch::Qwen3, WeightDtype::F16, &prompts, &QWEN_FAULTS);
}

/// What only the GPU sees is guarded there and surfaces as a typed error
/// at the next read: a token id past the vocabulary (written behind the
/// host's checks), a position past the cache.
#[test]
fn gpu_guards_surface_as_errors() {
    let gpu = common::gpu();
    let (_dir, ck) = tiny_checkpoint(Arch::Qwen3, WeightDtype::F32, 23);
    let mut m = Model::load(&gpu, &ck, options(2)).expect("load");
    m.prefill(0, &[1, 2, 3]).expect("prefill");
    m.prefill(1, &[4, 5]).expect("prefill");
    m.state.buf.write(1, &[500]).expect("write a bad id");
    m.step().expect("launch").wait().expect("step");
    let e = m.tokens().unwrap_err();
    assert!(
        matches!(
            e,
            ModelError::Guard {
                what: "token ids (embedding)",
                count: 1
            }
        ),
        "{e}"
    );

    let mut m = Model::load(&gpu, &ck, options(2)).expect("load");
    m.prefill(0, &[1, 2, 3]).expect("prefill");
    m.pos
        .write(0, &[m.max_seq()])
        .expect("write a bad position");
    m.step().expect("launch").wait().expect("step");
    let e = m.logits().unwrap_err();
    assert!(
        matches!(
            e,
            ModelError::Guard {
                what: "cache positions (kv_append)",
                ..
            }
        ),
        "{e}"
    );
    drop(m);
    common::assert_clean(&gpu);
}

/// The host-side pieces the comparisons lean on, without a GPU: argmax
/// follows the GPU's rule (lowest index on ties, NaN wins), and the
/// relative error is max|a - b| / max|b|.
#[test]
fn host_argmax_and_relative_error() {
    assert_eq!(model::argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
    assert_eq!(model::argmax(&[1.0, f32::NAN, 5.0, f32::NAN]), 1);
    assert_eq!(model::argmax(&[f32::NEG_INFINITY; 3]), 0);
    assert_eq!(report::rel_err(&[1.0, 2.0], &[1.0, 4.0]), 0.5);
    assert_eq!(report::rel_err(&[0.0], &[0.0]), 0.0);
}

/// Tied embeddings (the table as the LM head, no `lm_head.weight`) and
/// Llama 3 rope scaling (every inverse frequency of this head size is in
/// the scaled or blended band) match the reference.
#[test]
fn tied_embeddings_and_llama3_rope_scaling() {
    let gpu = common::gpu();
    let mut c = tiny::tiny_config(Arch::Llama, WeightDtype::F32);
    c.tie_word_embeddings = true;
    c.rope_scaling = Some(vkcompute::ops::nn::RopeScaling::Llama3 {
        factor: 8.0,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position_embeddings: 64,
    });
    let dir = TempDir::new("tied-llama3");
    tiny::write_checkpoint(dir.path(), &c, 29, 2).expect("write the tiny checkpoint");
    let ck = Checkpoint::open(dir.path()).expect("open the tiny checkpoint");
    assert!(!ck.has("lm_head.weight"));
    assert!(ck.config.rope_scaling.is_some());
    let reference = Reference::load(&ck).expect("reference weights");
    let mut m = Model::load(&gpu, &ck, options(1)).expect("load");
    let runs = run_model(&mut m, &[vec![3, 30, 60, 90, 20, 50]]);
    let e = worst_error(&runs[0], &reference, Fault::None);
    assert!(e <= TOL, "tied, scaled: {e:e} > {TOL:e}");
    drop(m);
    common::assert_clean(&gpu);
}

/// `generate` gives the tokens the step-by-step loop chose, stops a
/// sequence at its end-of-sequence token, and stops at `max_new`.
#[test]
fn generate_follows_the_steps_and_stops_at_eos() {
    let gpu = common::gpu();
    let (_dir, ck) = tiny_checkpoint(Arch::Qwen3, WeightDtype::F32, 31);
    let prompts = [vec![5u32, 17, 3, 88, 41], vec![90, 2, 64]];
    let mut m = Model::load(&gpu, &ck, options(2)).expect("load");
    let runs = run_model(&mut m, &prompts);
    let got = m.generate(&prompts, STEPS as u32).expect("generate");
    for (s, r) in runs.iter().enumerate() {
        assert_eq!(got[s], r.fed[r.prompt_len..], "sequence {s}");
    }
    // The same with sequence 0's third token as the end of sequence.
    m.eos = vec![got[0][2]];
    let cut = m.generate(&prompts, STEPS as u32).expect("generate");
    assert_eq!(cut[0], got[0][..3]);
    assert!(cut[1].len() >= 3, "sequence 1 runs on while 0 has ended");
    assert_eq!(cut[1][..], got[1][..cut[1].len()]);
    drop(m);
    common::assert_clean(&gpu);
}

/// Heads whose q and k blocks lie at offsets no adapter binds (3 query
/// heads of 6: q is 72 bytes): q, k and v are then copied out of the fused
/// projection's rows one by one, at one sequence and at two, and still
/// match the reference.
#[test]
fn unbindable_qkv_offsets_split_by_copies() {
    let gpu = common::gpu();
    if 72 % gpu.info().min_storage_buffer_offset_alignment == 0 {
        common::skipped("the adapter binds offsets of 72 bytes (no copies to test)");
        return;
    }
    let mut c = tiny::tiny_config(Arch::Llama, WeightDtype::F32);
    (c.heads, c.kv_heads, c.head_dim) = (3, 1, 6);
    let dir = TempDir::new("odd-heads");
    tiny::write_checkpoint(dir.path(), &c, 37, 1).expect("write the tiny checkpoint");
    let ck = Checkpoint::open(dir.path()).expect("open the tiny checkpoint");
    let reference = Reference::load(&ck).expect("reference weights");
    for (batch, prompts) in [
        (1, vec![vec![4u32, 40, 80]]),
        (2, vec![vec![7u32, 70], vec![1, 2, 3, 4]]),
    ] {
        let mut m = Model::load(&gpu, &ck, options(batch)).expect("load");
        let runs = run_model(&mut m, &prompts);
        for (s, run) in runs.iter().enumerate() {
            let e = worst_error(run, &reference, Fault::None);
            assert!(e <= TOL, "batch {batch}, sequence {s}: {e:e} > {TOL:e}");
        }
    }
    common::assert_clean(&gpu);
}
