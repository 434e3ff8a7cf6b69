mod common;
use common::*;

const SAXPY: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) buffer Y { float y[]; };
layout(push_constant) uniform P { float a; uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"#;

#[test]
fn smoke() {
    let gpu = gpu();
    println!("{:#?}", gpu.info());
    let n = 1000u32;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let xs = gpu.upload(&x).unwrap();
    let ys = gpu.alloc::<f32>(n as usize).unwrap();
    let k = gpu.kernel_glsl(SAXPY).unwrap();
    let mut pc = Vec::new();
    pc.extend_from_slice(&2.0f32.to_le_bytes());
    pc.extend_from_slice(&n.to_le_bytes());
    let mut b = gpu.batch().unwrap();
    b.run_with_push_constants(&k, &[&xs, &ys], n, &pc).unwrap();
    b.barrier();
    b.run_with_push_constants(&k, &[&xs, &ys], n, &pc).unwrap();
    b.submit().unwrap();
    let y = ys.download().unwrap();
    // Two passes of y = 2x + y from zero: 4x, exact in f32 for these x.
    let want: Vec<f32> = x.iter().map(|&v| 4.0 * v).collect();
    assert_eq!(y, want);
    println!("{:?}", gpu.stats());
    assert_clean(&gpu);
}
