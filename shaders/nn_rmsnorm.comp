#version 450
// RMSNorm over each row of a rows x cols row-major matrix, one workgroup
// per row: y = x / sqrt(mean(x^2) + eps) * w, w a vector of cols elements
// (per-head norms: rows = tokens x heads, cols = head_dim). f32 arithmetic;
// the sum of squares goes through a fixed-order workgroup tree.
// variant: nn_rmsnorm_f16 DTYPE_F16=1
// variant: nn_rmsnorm_bf16 DTYPE_BF16=1
#include "common.glsl"
#include "nn_dtype.glsl"
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer X { ST x[]; };
layout(set = 0, binding = 1) readonly buffer W { ST w[]; };
layout(set = 0, binding = 2) writeonly buffer O { ST o[]; };
layout(push_constant) uniform P { uint rows; uint cols; float eps; };

void main() {
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row >= rows) return;  // uniform across the workgroup
    uint t = gl_LocalInvocationIndex;
    uint base = row * cols;
    float s = 0.0;
    for (uint c = t; c < cols; c += LOCAL) {
        float v = LD(x[base + c]);
        s += v * v;
    }
    float inv = inversesqrt(wg_sum(s) / float(cols) + eps);
    for (uint c = t; c < cols; c += LOCAL) {
        o[base + c] = TO(LD(x[base + c]) * inv * LD(w[c]));
    }
}
