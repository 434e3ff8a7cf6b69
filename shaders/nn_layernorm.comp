#version 450
// LayerNorm over each row of a rows x cols row-major matrix, one workgroup
// per row: y = (x - mean) / sqrt(var + eps) * w + b, the variance the mean
// of (x - mean)^2 (two passes over the row, so no cancellation). f32
// arithmetic; sums through fixed-order workgroup trees.
// variant: nn_layernorm_f16 DTYPE_F16=1
// variant: nn_layernorm_bf16 DTYPE_BF16=1
#include "common.glsl"
#include "nn_dtype.glsl"
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer X { ST x[]; };
layout(set = 0, binding = 1) readonly buffer W { ST w[]; };
layout(set = 0, binding = 2) readonly buffer B { ST bias[]; };
layout(set = 0, binding = 3) writeonly buffer O { ST o[]; };
layout(push_constant) uniform P { uint rows; uint cols; float eps; };

void main() {
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row >= rows) return;  // uniform across the workgroup
    uint t = gl_LocalInvocationIndex;
    uint base = row * cols;
    float s = 0.0;
    for (uint c = t; c < cols; c += LOCAL) s += LD(x[base + c]);
    float mean = wg_sum(s) / float(cols);
    float q = 0.0;
    for (uint c = t; c < cols; c += LOCAL) {
        float d = LD(x[base + c]) - mean;
        q += d * d;
    }
    float inv = inversesqrt(wg_sum(q) / float(cols) + eps);
    for (uint c = t; c < cols; c += LOCAL) {
        o[base + c] = TO((LD(x[base + c]) - mean) * inv * LD(w[c]) + LD(bias[c]));
    }
}
