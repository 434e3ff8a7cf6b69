//! The ceiling of cooperative-matrix multiply-adds on the device: a minimal
//! loop (`coopmat_peak.comp`) timed like the matmul rows, each variant in a
//! child process of its own (a driver that crashes compiling or running it
//! takes only the child down).

use vkcompute::Device;
use vkcompute::{compile_glsl_with, GlslOptimization, GlslOptions, GlslTarget, Result};

use crate::{f16_bits, time_ns};

const PEAK: &str = include_str!("coopmat_peak.comp");

/// The ceiling of the cooperative-matrix loop (fragments from registers or
/// from shared memory, `shared`), in TFLOP/s.
pub fn coopmat_peak(
    gpu: &Device,
    reps: usize,
    quick: bool,
    acc: u32,
    optimize: bool,
    spirv13: bool,
    shared: bool,
) -> Result<f64> {
    let source = PEAK.replacen(
        "#version 450\n",
        &format!(
            "#version 450\n#define ACC {acc}\n#define SHARED {}\n",
            u32::from(shared)
        ),
        1,
    );
    let options = GlslOptions {
        optimization: if optimize {
            GlslOptimization::Performance
        } else {
            GlslOptimization::None
        },
        // SPIR-V 1.3, as scripts/shaders.py compiles the built-in coopmat kernel
        // (which runs), or the runtime default 1.5.
        target: if spirv13 {
            GlslTarget::Vulkan1_1
        } else {
            GlslTarget::Vulkan1_2
        },
        ..GlslOptions::default()
    };
    let kernel = gpu.kernel_spirv(&compile_glsl_with(&source, &options)?)?;
    let sub = gpu.info().subgroup_size.max(1);
    let groups = gpu.info().compute_units.max(16) * 8;
    let subgroups = groups * (256 / sub);
    let iters: u32 = if quick { 256 } else { 8192 };
    // F16 elements: the kernel declares float16_t (u16 would be refused).
    let src = gpu.upload(&vec![vkcompute::ops::F16(f16_bits(0.5)); 512])?;
    let dst = gpu.alloc::<f32>((subgroups * acc * 256) as usize)?;
    let ns = time_ns(gpu, reps, |batch| {
        batch.run_configured(
            &kernel,
            &[&src, &dst],
            [groups, 1, 1],
            Some(&iters.to_le_bytes()),
        )?;
        Ok(())
    })?;
    // Every output entry is iters · Σ_16 (0.5·0.5).
    let want = f64::from(iters) * 16.0 * 0.25;
    let out = dst.read_range(0..256)?;
    if out
        .iter()
        .any(|&v| (f64::from(v) - want).abs() > want * 1e-3)
    {
        eprintln!("coopmat peak kernel produced {} (want {want})", out[0]);
        return Ok(f64::NAN);
    }
    Ok(f64::from(subgroups) * f64::from(iters) * f64::from(acc) * 2.0 * 4096.0 / ns / 1e3)
}

/// The argument that makes the example a coopmat-peak child.
pub const PEAK_CHILD: &str = "--peak-child";

/// Runs [`coopmat_peak`] with `acc` accumulators in a child process (a
/// driver that crashes compiling or running the loop takes only the child
/// down): its TFLOP/s, or why there is none.
pub fn peak_in_child(
    acc: u32,
    optimize: bool,
    spirv13: bool,
    shared: bool,
) -> std::result::Result<f64, String> {
    let opt = if optimize { "O" } else { "O0" };
    let spv = if spirv13 { "spv13" } else { "spv15" };
    let from = if shared { "shared" } else { "registers" };
    child_peak(&[PEAK_CHILD, &acc.to_string(), opt, spv, from])
}

/// Runs this program with `args` in a child process and reads the
/// TFLOP/s of its `peak` line, or says why there is none.
fn child_peak(args: &[&str]) -> std::result::Result<f64, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = std::process::Command::new(exe)
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "child {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    text.lines()
        .find_map(|l| l.strip_prefix("peak ")?.parse().ok())
        .ok_or_else(|| format!("child printed no figure: {text}"))
}

/// The workgroup-scope ceiling kernels (`shaders/matmul_f16_cm2_peak.comp`
/// and its variant), with their (BM, BN, BK).
pub const CM2_PEAK_KERNELS: [(&str, (u32, u32, u32)); 2] = [
    ("matmul_f16_cm2_peak", (128, 128, 64)),
    ("matmul_f16_cm2_peak_128x256x64", (128, 256, 64)),
];

/// The argument that makes the example a coopmat2-peak child.
pub const CM2_PEAK_CHILD: &str = "--cm2-peak-child";

/// The ceiling of workgroup-scope cooperative-matrix multiply-adds
/// (VK_NV_cooperative_matrix2) with built-in `name` (one of
/// [`CM2_PEAK_KERNELS`]), in TFLOP/s; NaN when the output is wrong.
pub fn cm2_peak(gpu: &Device, name: &str, quick: bool) -> Result<f64> {
    let Some(&(_, (bm, bn, bk))) = CM2_PEAK_KERNELS.iter().find(|(n, _)| *n == name) else {
        return Err(vkcompute::Error::InvalidSpirv {
            reason: format!("no coopmat2 peak kernel named {name:?}"),
        });
    };
    let kernel = vkcompute::ops::builtin_kernel(gpu, name, &[])?;
    let groups = gpu.info().compute_units.max(16) * 4;
    let iters: u32 = if quick { 64 } else { 4096 };
    let halves = (bm * bk).max(bk * bn) as usize;
    let src = gpu.upload(&vec![vkcompute::ops::F16(f16_bits(0.5)); halves])?;
    let dst = gpu.alloc::<f32>((groups * bm * bn) as usize)?;
    let reps = if quick { 3 } else { 10 };
    let ns = time_ns(gpu, reps, |batch| {
        batch.run_configured(
            &kernel,
            &[&src, &dst],
            [groups, 1, 1],
            Some(&iters.to_le_bytes()),
        )?;
        Ok(())
    })?;
    // Every output entry is iters · Σ_BK (0.5·0.5).
    let want = f64::from(iters) * f64::from(bk) * 0.25;
    let last = (groups * bm * bn) as usize;
    let out = dst.read_range(last - 256..last)?;
    if out
        .iter()
        .any(|&v| (f64::from(v) - want).abs() > want * 1e-3)
    {
        eprintln!(
            "coopmat2 peak kernel {name} produced {} (want {want})",
            out[0]
        );
        return Ok(f64::NAN);
    }
    let flops = 2.0 * f64::from(bm) * f64::from(bn) * f64::from(bk);
    Ok(f64::from(groups) * f64::from(iters) * flops / ns / 1e3)
}

/// Runs [`cm2_peak`] for `name` in a child process: its TFLOP/s, or why
/// there is none.
pub fn cm2_peak_in_child(name: &str) -> std::result::Result<f64, String> {
    child_peak(&[CM2_PEAK_CHILD, name])
}
