//! Kernels and push-constant helpers shared by the integration tests.

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

/// x = x * a + b in place, for i < n.
pub const STEP: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer X { float x[]; };
layout(push_constant) uniform P { float a; float b; uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) x[i] = x[i] * a + b;
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

/// The long xorshift32 kernel (push constant `iters`), shared with
/// `measure/examples/streams`. (Each test file compiles common/ itself;
/// those without SPIN would otherwise warn.)
#[allow(unused_imports)]
pub use vkcompute_measure::spin::SPIN;

/// A uniform block and a storage output.
pub const UNIFORM: &str = r#"
#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) uniform U { vec4 u[16]; };
layout(set = 0, binding = 1) writeonly buffer O { float o[]; };
void main() { o[0] = u[3].y; }
"#;

/// dst = src * 2 (src read-only, dst write-only).
pub const DOUBLE: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer S { uint src[]; };
layout(set = 0, binding = 1) writeonly buffer D { uint dst[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < dst.length()) dst[i] = src[i] * 2u;
}
"#;

/// dst = src + 1 (src read-only, dst write-only).
pub const NEXT: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer S { uint src[]; };
layout(set = 0, binding = 1) writeonly buffer D { uint dst[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < dst.length()) dst[i] = src[i] + 1u;
}
"#;

/// c += p (p a uniform block, as a graph's `Params` is bound).
pub const ADD_PARAM: &str = r#"
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) uniform P { uint p; };
layout(set = 0, binding = 1) buffer C { uint c[]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < c.length()) c[i] += p;
}
"#;
