//! What the tests of examples/qwen3 share: tiny checkpoints in a temporary
//! directory, a run of the device model over prompts (prefill, then
//! greedy decode steps), its worst error against the f64 reference, and
//! the model options the exact checks take. The test crate that includes
//! this module includes examples/qwen3's modules at its root.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::checkpoint::Checkpoint;
use crate::config::{Arch, WeightDtype};
use crate::model::{Model, ModelOptions, PrefillMatmul};
use crate::reference::{Fault, Reference};
use crate::tiny;

/// Each logit's bound in the exact checks, relative to its row's largest
/// |logit| (see tests/qwen3.rs).
pub const TOL: f64 = 1e-4;
/// Greedy decode steps of a run.
pub const STEPS: usize = 8;

/// A fresh directory under the system's temporary directory, removed when
/// dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!(
            "vkcompute-qwen3-model-{}-{tag}-{n}",
            std::process::id()
        ));
        std::fs::create_dir_all(&p).expect("temporary directory");
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A tiny checkpoint of `arch` in `dtype`, opened.
pub fn tiny_checkpoint(arch: Arch, dtype: WeightDtype, seed: u64) -> (TempDir, Checkpoint) {
    let dir = TempDir::new(&format!("{arch:?}-{}", dtype.name()));
    let c = tiny::tiny_config(arch, dtype);
    tiny::write_checkpoint(dir.path(), &c, seed, 1).expect("write the tiny checkpoint");
    let ck = Checkpoint::open(dir.path()).expect("open the tiny checkpoint");
    (dir, ck)
}

/// What a run of the device model gave for one sequence: the tokens it
/// consumed (prompt, then each step's input) and the logits at the last
/// prompt position and after each step.
pub struct Run {
    pub fed: Vec<u32>,
    pub prompt_len: usize,
    pub rows: Vec<Vec<f32>>,
}

/// Prefills each prompt into its own sequence, then decodes `STEPS` greedy
/// steps of all of them (one launch each).
pub fn run_model(m: &mut Model, prompts: &[Vec<u32>]) -> Vec<Run> {
    let vocab = m.dims().vocab as usize;
    let mut runs: Vec<Run> = prompts
        .iter()
        .enumerate()
        .map(|(s, p)| {
            let logits = m.prefill(s as u32, p).expect("prefill");
            Run {
                fed: p.clone(),
                prompt_len: p.len(),
                rows: vec![logits],
            }
        })
        .collect();
    for _ in 0..STEPS {
        let next = m.tokens().expect("tokens");
        for (r, &t) in runs.iter_mut().zip(&next) {
            r.fed.push(t);
        }
        m.step().expect("step").wait().expect("step completes");
        let logits = m.logits().expect("logits");
        for (s, r) in runs.iter_mut().enumerate() {
            r.rows.push(logits[s * vocab..(s + 1) * vocab].to_vec());
        }
    }
    runs
}

/// The worst, over a run's rows, of max|ours - ref| / max|ref|.
pub fn worst_error(r: &Run, reference: &Reference, fault: Fault) -> f64 {
    let want = reference.forward(&r.fed, fault);
    let mut worst: f64 = 0.0;
    for (i, row) in r.rows.iter().enumerate() {
        let w = &want[r.prompt_len - 1 + i];
        let den = w.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        let num = row
            .iter()
            .zip(w)
            .fold(0.0f64, |a, (x, y)| a.max((f64::from(*x) - y).abs()));
        worst = worst.max(num / den);
    }
    worst
}

pub fn options(batch: u32) -> ModelOptions {
    ModelOptions {
        batch,
        max_seq: 32,
        kv_f32: true,
        prefill_matmul: PrefillMatmul::Exact,
        ..ModelOptions::default()
    }
}
