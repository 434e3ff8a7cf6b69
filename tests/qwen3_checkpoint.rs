//! The checkpoint loader of `examples/qwen3`: tiny checkpoints written and
//! read back, each bad checkpoint refused with its typed error, and
//! `config.json` files of real models read. GPU-free.

#[allow(dead_code)]
#[path = "../examples/qwen3/checkpoint.rs"]
mod checkpoint;
#[allow(dead_code)]
#[path = "../examples/qwen3/config.rs"]
mod config;
#[allow(dead_code)]
#[path = "../examples/qwen3/tiny.rs"]
mod tiny;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use checkpoint::Checkpoint;
use config::{Arch, WeightDtype};

/// A fresh directory under the system's temporary directory, removed when
/// dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("vkcompute-qwen3-{}-{tag}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes a tiny checkpoint, opens it, checks its layout and that every
/// tensor holds exactly the bytes written.
fn round_trip(arch: Arch, dtype: WeightDtype, shards: usize) {
    let dir = TempDir::new("rt");
    let c = tiny::tiny_config(arch, dtype);
    tiny::write_checkpoint(dir.path(), &c, 7, shards).unwrap();
    let ck = Checkpoint::open(dir.path()).unwrap();
    ck.check_layout().unwrap();
    assert_eq!(ck.config.arch, arch);
    assert_eq!(ck.config.dtype, dtype);
    assert_eq!(ck.files().len(), shards);
    let written = tiny::tiny_tensors(&c, 7);
    assert_eq!(ck.names().len(), written.len());
    let mut total = 0;
    for (name, shape, bytes) in &written {
        let t = ck.tensor(name, shape).unwrap();
        assert_eq!(t.dtype, dtype);
        assert_eq!(&t.shape, shape);
        assert!(t.bytes == bytes.as_slice(), "{name}: bytes differ");
        assert_eq!(t.numel(), shape.iter().product::<usize>());
        total += bytes.len() as u64;
    }
    assert_eq!(ck.total_bytes(), total);
}

#[test]
fn tiny_checkpoints_round_trip_in_one_file() {
    round_trip(Arch::Qwen3, WeightDtype::Bf16, 1);
    round_trip(Arch::Llama, WeightDtype::F32, 1);
    round_trip(Arch::Qwen3, WeightDtype::F16, 1);
}

#[test]
fn tiny_checkpoints_round_trip_in_three_shards() {
    round_trip(Arch::Qwen3, WeightDtype::Bf16, 3);
    round_trip(Arch::Llama, WeightDtype::F16, 3);
}
