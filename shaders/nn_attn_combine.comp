#version 450
// Decode attention, pass 2 of 2: one workgroup per (b, query head) merges
// the partials of the active chunks of len[b] (see nn_attn_decode.comp and
// nn_attn_span.glsl):
// M = max m_c, out = sum(acc_c exp(m_c - M)) / sum(sum_c exp(m_c - M)).
// A sequence of length 0 gives zeros.
// variant: nn_attn_combine_f16 DTYPE_F16=1
// variant: nn_attn_combine_bf16 DTYPE_BF16=1
#include "common.glsl"
#include "nn_dtype.glsl"
#include "nn_attn_span.glsl"
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer Part { float part[]; };
layout(set = 0, binding = 1) readonly buffer L { uint lens[]; };
layout(set = 0, binding = 2) writeonly buffer O { ST o[]; };
layout(push_constant) uniform P { uint rows; uint q_heads; uint dim; uint max_seq; uint chunks; };

void main() {
    uint bh = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (bh >= rows) return;  // uniform across the workgroup
    uint t = gl_LocalInvocationIndex;
    uint len = min(lens[bh / q_heads], max_seq);
    uint nc = attn_active(len, chunks);
    uint stride = dim + 2u;
    uint base = bh * chunks * stride;
    float m = NEG_INF;
    for (uint c = 0u; c < nc; ++c) m = nmax(m, part[base + c * stride + dim]);
    float s = 0.0;
    float a = 0.0;
    for (uint c = 0u; c < nc; ++c) {
        uint pc = base + c * stride;
        float w = exp(part[pc + dim] - m);
        s += part[pc + dim + 1u] * w;
        if (t < dim) a += part[pc + t] * w;
    }
    if (t < dim) o[bh * dim + t] = TO(nc == 0u ? 0.0 : a / s);
}
