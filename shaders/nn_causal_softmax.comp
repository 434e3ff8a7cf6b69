#version 450
// Causal softmax over attention scores: rows of cols keys, q_len query
// rows per (batch, head) block; row r is query i = r % q_len, which sees
// the first cols - q_len + i + 1 keys (queries aligned to the end of the
// keys, as with a KV cache). Seen entries get exp(x - max) / sum over the
// seen ones, the rest 0. One workgroup per row; NaN among the seen entries
// makes them all NaN.
// variant: nn_causal_softmax_f16 DTYPE_F16=1
// variant: nn_causal_softmax_bf16 DTYPE_BF16=1
#include "common.glsl"
#include "nn_dtype.glsl"
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer X { ST x[]; };
layout(set = 0, binding = 1) writeonly buffer O { ST o[]; };
layout(push_constant) uniform P { uint rows; uint cols; uint q_len; };

void main() {
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row >= rows) return;  // uniform across the workgroup
    uint t = gl_LocalInvocationIndex;
    uint base = row * cols;
    uint seen = cols - q_len + row % q_len + 1u;
    float m = NEG_INF;
    for (uint c = t; c < seen; c += LOCAL) m = nmax(m, LD(x[base + c]));
    m = wg_max(m);
    float s = 0.0;
    for (uint c = t; c < seen; c += LOCAL) s += exp(LD(x[base + c]) - m);
    float inv = 1.0 / wg_sum(s);
    for (uint c = t; c < cols; c += LOCAL) {
        o[base + c] = TO(c < seen ? exp(LD(x[base + c]) - m) * inv : 0.0);
    }
}
