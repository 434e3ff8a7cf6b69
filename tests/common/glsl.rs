//! Kernels and push-constant helpers shared by the batch tests
//! (`tests/batch.rs` and `tests/batch_errors.rs`).

use vkcompute::bytemuck;

/// z = x + y over the length of x (no push constants).
pub const ADD: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) readonly buffer Y { float y[]; };
layout(set = 0, binding = 2) writeonly buffer Z { float z[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < x.length()) z[i] = x[i] + y[i];
}
"#;

/// y = a * x + y for i < n.
pub const SAXPY: &str = r#"
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

/// c[i] += 1 for every element (a "good dispatch" marker).
pub const INC: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer C { uint c[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < c.length()) c[i] += 1u;
}
"#;

/// Push-constant bytes of `words`.
pub fn bytes(words: &[u32]) -> Vec<u8> {
    bytemuck::cast_slice(words).to_vec()
}

/// SAXPY's push constants.
pub fn saxpy_pc(a: f32, n: u32) -> Vec<u8> {
    bytes(&[a.to_bits(), n])
}
