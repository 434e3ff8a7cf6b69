//! The startup workload, shared by `benches/startup.rs` and
//! `measure/examples/gpu_report/`: `Device::new` plus 12 distinct GLSL kernels,
//! with the on-disk cache empty (cold) or filled by an earlier run (warm).
//!
//! Each start runs in a fresh process (the calling binary, re-run with
//! `VKCOMPUTE_STARTUP_CHILD` set), as an application starts: loading the
//! Vulkan loader and driver is part of it. The child times itself from just
//! before `Device::with_options` to the 12th kernel and prints the figures;
//! process launch is not counted. Children run with the drivers' own shader
//! caches off (`__GL_SHADER_DISK_CACHE=0`, `MESA_SHADER_CACHE_DISABLE`), so
//! cold is cold and warm is what vkcompute's cache gives.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use vkcompute::{Device, DeviceOptions};

pub use crate::startup_floor as floor;

const CHILD: &str = "VKCOMPUTE_STARTUP_CHILD";
/// Set (to anything) in a child that runs the floor's start instead.
const FLOOR_CHILD: &str = "VKCOMPUTE_STARTUP_FLOOR_CHILD";

const HEAD: &str = "#version 450\nlayout(local_size_x = 256) in;\n";
const PC_N: &str = "layout(push_constant) uniform P { uint n; };\n";

fn binary(op: &str) -> String {
    format!(
        "{HEAD}{PC_N}layout(set = 0, binding = 0) readonly buffer A {{ float a[]; }};\n\
         layout(set = 0, binding = 1) readonly buffer B {{ float b[]; }};\n\
         layout(set = 0, binding = 2) writeonly buffer C {{ float c[]; }};\n\
         void main() {{ uint i = gl_GlobalInvocationID.x; if (i < n) c[i] = a[i] {op} b[i]; }}\n"
    )
}

fn unary(expr: &str) -> String {
    format!(
        "{HEAD}{PC_N}layout(set = 0, binding = 0) readonly buffer A {{ float a[]; }};\n\
         layout(set = 0, binding = 1) writeonly buffer C {{ float c[]; }};\n\
         void main() {{ uint i = gl_GlobalInvocationID.x; if (i < n) {{ float x = a[i]; c[i] = {expr}; }} }}\n"
    )
}

const SCALE: &str = "#version 450
layout(local_size_x = 256) in;
layout(push_constant) uniform P { float s; uint n; };
layout(set = 0, binding = 0) buffer A { float a[]; };
void main() { uint i = gl_GlobalInvocationID.x; if (i < n) a[i] *= s; }
";

const DOT_PARTIAL: &str = "#version 450
layout(local_size_x = 256) in;
layout(push_constant) uniform P { uint n; };
layout(set = 0, binding = 0) readonly buffer A { float a[]; };
layout(set = 0, binding = 1) readonly buffer B { float b[]; };
layout(set = 0, binding = 2) writeonly buffer Out { float partial[]; };
shared float s[256];
void main() {
    uint i = gl_GlobalInvocationID.x, l = gl_LocalInvocationID.x;
    float acc = 0.0;
    for (; i < n; i += gl_NumWorkGroups.x * 256u) acc += a[i] * b[i];
    s[l] = acc;
    barrier();
    for (uint w = 128u; w > 0u; w >>= 1) {
        if (l < w) s[l] += s[l + w];
        barrier();
    }
    if (l == 0u) partial[gl_WorkGroupID.x] = s[0];
}
";

const MATMUL_TILE: &str = "#version 450
layout(local_size_x = 16, local_size_y = 16) in;
layout(push_constant) uniform P { uint m; uint n; uint k; };
layout(set = 0, binding = 0) readonly buffer A { float a[]; };
layout(set = 0, binding = 1) readonly buffer B { float b[]; };
layout(set = 0, binding = 2) writeonly buffer C { float c[]; };
shared float ta[16][16];
shared float tb[16][16];
void main() {
    uint row = gl_GlobalInvocationID.y, col = gl_GlobalInvocationID.x;
    uint ly = gl_LocalInvocationID.y, lx = gl_LocalInvocationID.x;
    float acc = 0.0;
    for (uint t = 0u; t < k; t += 16u) {
        ta[ly][lx] = (row < m && t + lx < k) ? a[row * k + t + lx] : 0.0;
        tb[ly][lx] = (col < n && t + ly < k) ? b[(t + ly) * n + col] : 0.0;
        barrier();
        for (uint j = 0u; j < 16u; j++) acc += ta[ly][j] * tb[j][lx];
        barrier();
    }
    if (row < m && col < n) c[row * n + col] = acc;
}
";

/// The 12 kernels: (name, GLSL source).
pub fn kernels() -> Vec<(&'static str, String)> {
    vec![
        ("add", binary("+")),
        ("sub", binary("-")),
        ("mul", binary("*")),
        ("scale", SCALE.to_string()),
        ("relu", unary("max(x, 0.0)")),
        ("sigmoid", unary("1.0 / (1.0 + exp(-x))")),
        ("tanh", unary("tanh(x)")),
        ("swish", unary("x / (1.0 + exp(-x))")),
        (
            "gelu",
            unary("0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)))"),
        ),
        ("dot_partial", DOT_PARTIAL.to_string()),
        ("matmul_tile", MATMUL_TILE.to_string()),
        ("saxpy", crate::bandwidth::SAXPY_VEC4.to_string()),
    ]
}

/// One start's figures.
#[derive(Debug, Clone, Copy)]
pub struct Start {
    /// `Device::with_options`.
    pub device: Duration,
    /// Device plus all 12 kernels.
    pub total: Duration,
}

/// In the child: creates the device with `dir` as its cache and builds the
/// 12 kernels; returns the times. The device is dropped afterwards (saving
/// its pipeline cache), outside the timed span.
pub fn start_once(dir: &Path) -> vkcompute::Result<Start> {
    let sources = kernels();
    let t = Instant::now();
    let gpu = Device::with_options(DeviceOptions {
        cache_dir: Some(dir.to_path_buf()),
        ..Default::default()
    })?;
    let device = t.elapsed();
    let mut ks = Vec::with_capacity(sources.len());
    for (name, src) in &sources {
        ks.push(
            vkcompute::Kernel::builder(&gpu)
                .glsl(src)
                .label(name)
                .build()?,
        );
    }
    let total = t.elapsed();
    drop(ks);
    drop(gpu);
    Ok(Start { device, total })
}

/// Call first thing in `main`: when this process is a startup child, runs
/// one start, prints its figures and returns `true` (the caller exits).
pub fn child_main() -> bool {
    if std::env::var_os(FLOOR_CHILD).is_some() {
        match floor::start_once() {
            Ok(d) => println!("startup-floor-child total_us={}", d.as_micros()),
            Err(e) => {
                eprintln!("startup floor child failed: {e}");
                std::process::exit(1);
            }
        }
        return true;
    }
    let Some(dir) = std::env::var_os(CHILD) else {
        return false;
    };
    match start_once(Path::new(&dir)) {
        Ok(s) => println!(
            "startup-child device_us={} total_us={}",
            s.device.as_micros(),
            s.total.as_micros()
        ),
        Err(e) => {
            eprintln!("startup child failed: {e}");
            std::process::exit(1);
        }
    }
    true
}

/// A fresh, empty directory under the system temp dir.
pub fn temp_dir(what: &str) -> PathBuf {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let d = std::env::temp_dir().join(format!(
        "vkcompute-startup-{}-{what}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// Runs one start in a child process with `dir` as its cache.
pub fn start_in_child(dir: &Path) -> Result<Start, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let driver_cache = dir.join("driver-cache");
    let out = Command::new(exe)
        .env(CHILD, dir)
        .env("__GL_SHADER_DISK_CACHE", "0")
        .env("__GL_SHADER_DISK_CACHE_PATH", &driver_cache)
        .env("MESA_SHADER_CACHE_DISABLE", "true")
        .env("MESA_SHADER_CACHE_DIR", &driver_cache)
        .output()
        .map_err(|e| format!("could not start a child: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("startup-child "))
        .ok_or_else(|| {
            format!(
                "child printed no figures (status {}): {}{}",
                out.status,
                text,
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
    let field = |k: &str| -> Result<Duration, String> {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(k))
            .and_then(|v| v.parse::<u64>().ok())
            .map(Duration::from_micros)
            .ok_or_else(|| format!("bad child line {line:?}"))
    };
    Ok(Start {
        device: field("device_us=")?,
        total: field("total_us=")?,
    })
}

/// A cold start: a new empty cache directory, removed afterwards.
pub fn cold() -> Result<Start, String> {
    let dir = temp_dir("cold");
    let s = start_in_child(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    s
}

/// A cache directory filled by one start, for warm starts.
pub fn warm_dir() -> Result<PathBuf, String> {
    let dir = temp_dir("warm");
    start_in_child(&dir)?;
    Ok(dir)
}

/// Runs one start of the floor (`vkCreateInstance` + `vkCreateDevice`
/// alone, [`floor::start_once`]) in a child process, with the drivers'
/// shader caches off as for vkcompute's starts.
pub fn floor_in_child() -> Result<Duration, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new(exe)
        .env(FLOOR_CHILD, "1")
        .env_remove(CHILD)
        .env("__GL_SHADER_DISK_CACHE", "0")
        .env("MESA_SHADER_CACHE_DISABLE", "true")
        .output()
        .map_err(|e| format!("could not start a child: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("startup-floor-child total_us="))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_micros)
        .ok_or_else(|| {
            format!(
                "floor child printed no figure (status {}): {}{}",
                out.status,
                text,
                String::from_utf8_lossy(&out.stderr)
            )
        })
}
