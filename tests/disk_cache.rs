//! The on-disk cache: pipelines (VkPipelineCache data) and compiled GLSL.
//! Every test uses its own temporary directory, never the user's home.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::Command;

use vkcompute::{Device, DeviceOptions, GlslOptions, Kernel};

/// y[i] = y[i] * MUL + ADD, with MUL and ADD set per kernel.
const TEMPLATE: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer Y { float y[]; };
layout(push_constant) uniform P { uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) y[i] = y[i] * MUL + ADD;
}
"#;

const KERNELS: [(f32, f32); 4] = [(1.0, 1.0), (2.0, 0.0), (0.5, 3.0), (-1.0, 7.0)];

fn source(mul: f32, add: f32) -> String {
    TEMPLATE
        .replace("MUL", &format!("{mul:.1}"))
        .replace("ADD", &format!("{add:.1}"))
}

/// A fresh, empty directory for one test: under Cargo's target tmp dir
/// when it exists (it does not where the binary was copied to another
/// machine), else under the system temp dir.
fn fresh_dir(name: &str) -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let base = if target.is_dir() {
        target.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let dir = base
        .join("vkcompute-cache-tests")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn device_in(dir: &Path) -> common::Gpu {
    gpu_with(DeviceOptions {
        cache_dir: Some(dir.to_path_buf()),
        ..Default::default()
    })
}

/// Builds the test kernels, runs each, checks the results.
fn build_and_check(gpu: &Device) -> Vec<Kernel> {
    let n = 300u32;
    let kernels: Vec<Kernel> = KERNELS
        .iter()
        .map(|&(m, a)| gpu.kernel_glsl(&source(m, a)).expect("kernel"))
        .collect();
    for (k, &(m, a)) in kernels.iter().zip(KERNELS.iter()) {
        let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let y = gpu.upload(&host).unwrap();
        let mut b = gpu.batch().unwrap();
        b.run_with_push_constants(k, &[&y], n, &n.to_le_bytes())
            .unwrap();
        b.submit().unwrap();
        let out = y.download().unwrap();
        for (i, v) in out.iter().enumerate() {
            assert_eq!(*v, i as f32 * m + a, "kernel ({m}, {a}) at {i}");
        }
    }
    assert_clean(gpu);
    kernels
}

fn files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.map(|e| e.unwrap().path())
                .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Fills `dir` with a cold run's files; returns the pipeline file.
fn fill(dir: &Path) -> PathBuf {
    let gpu = device_in(dir);
    build_and_check(&gpu);
    drop(gpu);
    let p = files(dir, "pipelines-");
    assert_eq!(p.len(), 1, "one pipeline-cache file: {p:?}");
    assert_eq!(files(dir, "spirv-").len(), KERNELS.len());
    p[0].clone()
}

#[test]
fn cold_then_warm_gives_working_kernels() {
    let dir = fresh_dir("cold-warm");
    let cold = device_in(&dir);
    assert_eq!(cold.cache_dir(), Some(dir.as_path()));
    build_and_check(&cold);
    let s = cold.cache_stats();
    assert_eq!((s.spirv_misses, s.spirv_hits), (KERNELS.len() as u64, 0));
    assert_eq!(s.pipeline_bytes_loaded, 0);
    assert_eq!(s.pipeline_file_ignored, None);
    drop(cold);
    let pipeline_file = files(&dir, "pipelines-");
    assert_eq!(pipeline_file.len(), 1);
    println!("pipeline cache file: {:?}", pipeline_file[0]);

    let warm = device_in(&dir);
    build_and_check(&warm);
    let s = warm.cache_stats();
    assert_eq!((s.spirv_misses, s.spirv_hits), (0, KERNELS.len() as u64));
    assert!(s.pipeline_bytes_loaded >= 32, "{s:?}");
    assert_eq!(s.pipeline_file_ignored, None);
    // Nothing new: dropping the warm device leaves the file as it was.
    let before = std::fs::read(&pipeline_file[0]).unwrap();
    drop(warm);
    assert_eq!(std::fs::read(&pipeline_file[0]).unwrap(), before);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn glsl_options_are_part_of_the_key() {
    let dir = fresh_dir("options");
    let gpu = device_in(&dir);
    let src = TEMPLATE.replace("MUL", "1.0");
    let build = |add: &str| {
        let opts = GlslOptions {
            defines: vec![("ADD".into(), Some(add.into()))],
            ..Default::default()
        };
        Kernel::builder(&gpu)
            .glsl_with(&src, &opts)
            .build()
            .unwrap()
    };
    for round in 0..2 {
        for (add, want) in [("2.0", 2.0f32), ("5.0", 5.0)] {
            let k = build(add);
            let y = gpu.alloc::<f32>(64).unwrap();
            let mut b = gpu.batch().unwrap();
            b.run_with_push_constants(&k, &[&y], 64, &64u32.to_le_bytes())
                .unwrap();
            b.submit().unwrap();
            assert!(y.download().unwrap().iter().all(|&v| v == want), "{add}");
        }
        let s = gpu.cache_stats();
        assert_eq!((s.spirv_misses, s.spirv_hits), (2, 2 * round), "{s:?}");
    }
    assert_clean(&gpu);
    drop(gpu);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Turns a good file's bytes into bad ones.
type Corrupt = fn(&[u8]) -> Vec<u8>;

/// Ways a cache file can go bad on disk.
fn corruptions() -> Vec<(&'static str, Corrupt)> {
    vec![
        ("empty", |_| Vec::new()),
        ("truncated", |b| b[..b.len() / 2].to_vec()),
        ("last byte flipped", |b| {
            let mut v = b.to_vec();
            let n = v.len();
            v[n - 1] ^= 0x5a;
            v
        }),
        ("header byte flipped", |b| {
            let mut v = b.to_vec();
            v[3] ^= 1;
            v
        }),
        ("random bytes", |b| {
            let mut r = Rng::new(b.len() as u64);
            (0..4096).map(|_| r.next_u64() as u8).collect()
        }),
        ("foreign adapter", |b| {
            // Our header carries the key at bytes 8..40 (pipeline files);
            // for SPIR-V files this lands in the key and fails the checksum.
            let mut v = b.to_vec();
            v[30] ^= 0xff;
            v
        }),
    ]
}

#[test]
fn corrupt_or_foreign_files_are_ignored() {
    let dir = fresh_dir("corrupt");
    let pipeline_file = fill(&dir);
    let good_pipelines = std::fs::read(&pipeline_file).unwrap();
    let spirv = files(&dir, "spirv-");
    let good_spirv: Vec<Vec<u8>> = spirv.iter().map(|p| std::fs::read(p).unwrap()).collect();
    for (what, corrupt) in corruptions() {
        std::fs::write(&pipeline_file, corrupt(&good_pipelines)).unwrap();
        for (p, good) in spirv.iter().zip(&good_spirv) {
            std::fs::write(p, corrupt(good)).unwrap();
        }
        let gpu = device_in(&dir);
        build_and_check(&gpu);
        let s = gpu.cache_stats();
        assert!(s.pipeline_file_ignored.is_some(), "{what}: {s:?}");
        assert_eq!(s.pipeline_bytes_loaded, 0, "{what}");
        assert_eq!(s.spirv_hits, 0, "{what}: {s:?}");
        assert_eq!(s.spirv_rejected, KERNELS.len() as u64, "{what}: {s:?}");
        drop(gpu);
        // The files were rewritten whole: the next device uses them.
        let gpu = device_in(&dir);
        build_and_check(&gpu);
        let s = gpu.cache_stats();
        assert_eq!(s.pipeline_file_ignored, None, "{what}: {s:?}");
        assert_eq!(s.spirv_hits, KERNELS.len() as u64, "{what}: {s:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn unwritable_cache_is_an_error_on_save_only() {
    let dir = fresh_dir("unwritable");
    let pipeline_file = fill(&dir);
    // A directory where the file should be: reading skips it, saving fails.
    std::fs::remove_file(&pipeline_file).unwrap();
    std::fs::create_dir_all(pipeline_file.join("occupied")).unwrap();
    let gpu = device_in(&dir);
    build_and_check(&gpu);
    match gpu.save_pipeline_cache() {
        Err(vkcompute::Error::CacheIo { path, .. }) => assert_eq!(path, pipeline_file),
        other => panic!("expected CacheIo, got {other:?}"),
    }
    drop(gpu); // logs, does not panic
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn explicit_saves_and_concurrent_writers() {
    let dir = fresh_dir("concurrent");
    let a = device_in(&dir);
    let b = device_in(&dir);
    a.kernel_glsl(&source(3.0, 1.0)).unwrap();
    b.kernel_glsl(&source(4.0, 1.0)).unwrap();
    let pa = a.save_pipeline_cache().unwrap().expect("a file");
    let pb = b.save_pipeline_cache().unwrap().expect("a file");
    assert_eq!(pa, pb);
    assert!(pa.is_file());
    drop((a, b));
    // Many devices at once, in threads, all reading and writing one
    // directory: compiling (the SPIR-V files) and saving the pipeline cache
    // concurrently. The devices themselves are made and dropped outside the
    // threads: the Debian validation layer (1.3.239) can crash when one
    // thread creates a device while another records (see scripts/test.sh).
    for round in 0..3 {
        let devices: Vec<common::Gpu> = (0..4).map(|_| device_in(&dir)).collect();
        std::thread::scope(|s| {
            for (t, gpu) in devices.iter().enumerate() {
                s.spawn(move || {
                    gpu.kernel_glsl(&source(t as f32, round as f32)).unwrap();
                    build_and_check(gpu);
                    gpu.save_pipeline_cache().unwrap().expect("a file");
                });
            }
        });
    }
    let leftovers: Vec<_> = files(&dir, ".");
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    let gpu = device_in(&dir);
    build_and_check(&gpu);
    let s = gpu.cache_stats();
    assert_eq!(s.pipeline_file_ignored, None, "{s:?}");
    assert_eq!(s.spirv_hits, KERNELS.len() as u64);
    drop(gpu);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn disabled_cache_reads_and_writes_nothing() {
    let gpu = gpu_with(DeviceOptions {
        cache_dir: Some(PathBuf::new()),
        ..Default::default()
    });
    assert_eq!(gpu.cache_dir(), None);
    build_and_check(&gpu);
    assert_eq!(gpu.save_pipeline_cache().unwrap(), None);
    let s = gpu.cache_stats();
    assert_eq!(s.dir, None);
    assert_eq!((s.spirv_hits, s.spirv_misses, s.pipeline_saves), (0, 0, 0));
}

const CHILD: &str = "VKCOMPUTE_CACHE_TEST_CHILD";

/// Runs `env_child` in a fresh process with `HOME` at a temporary
/// directory, `XDG_CACHE_HOME` unset and `VKCOMPUTE_CACHE_DIR` as given.
fn run_child(home: &Path, cache_env: Option<&str>) {
    std::fs::create_dir_all(home).unwrap();
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "env_child", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("HOME", home)
        .env_remove("XDG_CACHE_HOME");
    match cache_env {
        Some(v) => cmd.env(vkcompute::ENV_CACHE_DIR, v),
        None => cmd.env_remove(vkcompute::ENV_CACHE_DIR),
    };
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "child failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Everything written under `dir`, recursively.
fn written(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p.clone());
            }
            out.push(p);
        }
    }
    out
}

#[test]
fn environment_picks_or_disables_the_directory() {
    // VKCOMPUTE_CACHE_DIR=off: nothing lands in HOME.
    let home = fresh_dir("home-off");
    run_child(&home, Some("off"));
    assert_eq!(written(&home), Vec::<PathBuf>::new());
    std::fs::remove_dir_all(&home).unwrap();
    // Unset: the default is $HOME/.cache/vkcompute.
    let home = fresh_dir("home-default");
    run_child(&home, None);
    let dir = home.join(".cache").join("vkcompute");
    assert_eq!(files(&dir, "pipelines-").len(), 1);
    assert_eq!(files(&dir, "spirv-").len(), KERNELS.len());
    std::fs::remove_dir_all(&home).unwrap();
}

/// The child half of `environment_picks_or_disables_the_directory`: does
/// nothing unless started by it.
#[test]
fn env_child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let gpu = gpu();
    let expect = match std::env::var(vkcompute::ENV_CACHE_DIR).ok().as_deref() {
        Some("off") => None,
        _ => Some(
            PathBuf::from(std::env::var_os("HOME").unwrap())
                .join(".cache")
                .join("vkcompute"),
        ),
    };
    assert_eq!(gpu.cache_dir().map(Path::to_path_buf), expect);
    build_and_check(&gpu);
}
