//! A chain of dependent kernels in one batch, with barriers only where data
//! flows: normalise, scale and clamp a signal, then reduce it, checked
//! against the CPU. Teaches recording several dispatches into one batch,
//! `barrier()` between dependent ones, and an explicit workgroup grid
//! (`run_configured`). Next: `03_async.rs`.
//!
//! `cargo run --release --example 02_batch`

use vkcompute::{bytemuck, Device};

const SCALE: &str = r#"
#version 450
layout(local_size_x = 128) in;
layout(set = 0, binding = 0) buffer X { float x[]; };
layout(push_constant) uniform P { float a; float b; uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) x[i] = a * x[i] + b;
}
"#;

const CLAMP: &str = r#"
#version 450
layout(local_size_x = 128) in;
layout(set = 0, binding = 0) buffer X { float x[]; };
layout(push_constant) uniform P { float lo; float hi; uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) x[i] = clamp(x[i], lo, hi);
}
"#;

// One partial sum per workgroup, in shared memory.
const PARTIAL_SUM: &str = r#"
#version 450
layout(local_size_x = 128) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) writeonly buffer S { float sums[]; };
layout(push_constant) uniform P { uint n; };
shared float part[128];
void main() {
    uint i = gl_GlobalInvocationID.x;
    part[gl_LocalInvocationID.x] = i < n ? x[i] : 0.0;
    barrier();
    for (uint s = 64; s > 0; s >>= 1) {
        if (gl_LocalInvocationID.x < s) part[gl_LocalInvocationID.x] += part[gl_LocalInvocationID.x + s];
        barrier();
    }
    if (gl_LocalInvocationID.x == 0) sums[gl_WorkGroupID.x] = part[0];
}
"#;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Affine {
    a: f32,
    b: f32,
    n: u32,
}

fn main() -> vkcompute::Result<()> {
    let n: u32 = 100_000;
    let gpu = Device::new()?;
    println!("adapter: {}", gpu.info().name);
    let signal: Vec<f32> = (0..n).map(|i| ((i as f32) * 0.01).sin() * 3.0).collect();
    let x = gpu.upload(&signal)?;
    let groups = n.div_ceil(128);
    let sums = gpu.alloc::<f32>(groups as usize)?;

    let scale = gpu.kernel_glsl(SCALE)?;
    let clamp = gpu.kernel_glsl(CLAMP)?;
    let partial = gpu.kernel_glsl(PARTIAL_SUM)?;

    let steps = [(0.5f32, 0.25f32), (1.5, -0.1), (0.9, 0.0)];
    let mut batch = gpu.batch()?;
    for (a, b) in steps {
        let pc = Affine { a, b, n };
        batch.run_with_push_constants(&scale, &[&x], n, bytemuck::bytes_of(&pc))?;
        batch.barrier(); // the next step reads what this one wrote
    }
    let lim = Affine { a: -1.0, b: 1.0, n };
    batch.run_with_push_constants(&clamp, &[&x], n, bytemuck::bytes_of(&lim))?;
    batch.barrier();
    batch.run_configured(
        &partial,
        &[&x, &sums],
        [groups, 1, 1],
        Some(bytemuck::bytes_of(&n)),
    )?;
    println!("recorded {} commands in one batch", batch.len());
    batch.submit()?;

    // The same on the CPU.
    let mut want = signal.clone();
    for v in &mut want {
        for (a, b) in steps {
            *v = a * *v + b;
        }
        *v = v.clamp(-1.0, 1.0);
    }
    let got = x.download()?;
    let worst = got
        .iter()
        .zip(&want)
        .map(|(g, w)| (g - w).abs())
        .fold(0f32, f32::max);
    let total: f32 = sums.download()?.iter().sum();
    let want_total: f32 = want.iter().sum();
    println!("max |error| per element: {worst:e}; sum GPU {total:.3} vs CPU {want_total:.3}");
    let ok = worst < 1e-5 && (total - want_total).abs() <= 1e-3 * want_total.abs().max(1.0);
    println!("{}", if ok { "correct" } else { "WRONG" });
    if !ok || gpu.validation_message_count() > 0 {
        for m in gpu.validation_messages() {
            eprintln!("{m}");
        }
        std::process::exit(1);
    }
    Ok(())
}
