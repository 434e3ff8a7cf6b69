#version 450
#extension GL_EXT_control_flow_attributes : require
// RMSNorm over each row of a rows x cols row-major matrix:
// y = x / sqrt(mean(x^2) + eps) * w, w a vector of cols elements (per-head
// norms: rows = tokens x heads, cols = head_dim). f32 arithmetic.
//
// A row belongs to a group of `tpr` invocations (a power of two up to 256;
// 256 / tpr rows per workgroup), so a per-head row of 128 takes 32
// invocations, not a whole workgroup. Each invocation loads its up to KEEP
// elements of the row at once (independent loads in flight, not one
// dependent load per loop trip) and keeps them for the output; rows wider
// than tpr x KEEP stream through a loop and are read again for the output.
// The group's sum of squares goes through a fixed-order shared-memory tree.
// variant: nn_rmsnorm_f16 DTYPE_F16=1
// variant: nn_rmsnorm_bf16 DTYPE_BF16=1
#include "common.glsl"
#include "nn_dtype.glsl"
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer X { ST x[]; };
layout(set = 0, binding = 1) readonly buffer W { ST w[]; };
layout(set = 0, binding = 2) writeonly buffer O { ST o[]; };
layout(push_constant) uniform P { uint rows; uint cols; float eps; uint tpr; };

#define KEEP 16u

shared float red[LOCAL];

void main() {
    uint t = gl_LocalInvocationIndex;
    uint lane = t % tpr;
    uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    uint row = wg * (LOCAL / tpr) + t / tpr;
    bool live = row < rows;  // every invocation still takes the barriers
    uint base = row * cols;
    bool kept = cols <= tpr * KEEP;
    float v[KEEP];
    float s = 0.0;
    if (live && kept) {
        [[unroll]] for (uint i = 0u; i < KEEP; ++i) {
            uint c = lane + i * tpr;
            v[i] = c < cols ? LD(x[base + c]) : 0.0;
        }
        [[unroll]] for (uint i = 0u; i < KEEP; ++i) s += v[i] * v[i];
    } else if (live) {
        for (uint c = lane; c < cols; c += tpr) {
            float e = LD(x[base + c]);
            s += e * e;
        }
    }
    red[t] = s;
    for (uint h = tpr / 2u; h > 0u; h >>= 1u) {
        barrier();
        if (lane < h) red[t] += red[t + h];
    }
    barrier();
    float inv = inversesqrt(red[t - lane] / float(cols) + eps);
    if (!live) return;
    if (kept) {
        [[unroll]] for (uint i = 0u; i < KEEP; ++i) {
            uint c = lane + i * tpr;
            if (c < cols) o[base + c] = TO(v[i] * inv * LD(w[c]));
        }
    } else {
        for (uint c = lane; c < cols; c += tpr) {
            o[base + c] = TO(LD(x[base + c]) * inv * LD(w[c]));
        }
    }
}
