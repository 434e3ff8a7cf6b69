#version 450
// out[i] = a[i] + bias[i % cols]: a row vector added to every row of a
// row-major matrix (the op batch's unfused `add_row`). May run in place
// (out bound to a's buffer: each invocation reads a[i] before writing it).
// Push constants: n (elements), cols. Grid: ceil(n / 256) invocations,
// spread into y and z past the x limit.
layout(local_size_x = 256) in;

layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer Bias { float bias[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { float o[]; };
layout(push_constant) uniform P { uint n; uint cols; };

void main() {
    uint idx = gl_GlobalInvocationID.x
        + gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x)
        + gl_GlobalInvocationID.z * (gl_NumWorkGroups.x * gl_WorkGroupSize.x * gl_NumWorkGroups.y);
    if (idx >= n) return;
    o[idx] = a[idx] + bias[idx % cols];
}
