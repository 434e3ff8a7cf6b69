#version 450
// Decode attention, pass 1 of 2: one query per head (q [batch, q_heads,
// dim]) against a KV cache (k, v [batch, kv_heads, max_seq, dim]) holding
// len[b] = min(lens[b], max_seq) positions of sequence b. Workgroup
// (x = chunk, y = (b, kv head, head slice)) takes up to `group` query heads
// sharing one kv head and the positions [chunk * CHUNK, +CHUNK) below len:
// scores s = scale * q.k, then, per head, m = max s, e = exp(s - m), the
// partial sum of e and the partial e-weighted sum of v rows, written to
// part[(b * q_heads + head) * chunks + chunk] as dim + 2 floats (acc, m,
// sum). Workgroups whose chunk starts at or past len return at once, so
// the work grows with the current length, not max_seq.
// variant: nn_attn_decode_f16 DTYPE_F16=1
// variant: nn_attn_decode_bf16 DTYPE_BF16=1
#include "common.glsl"
#include "nn_dtype.glsl"
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer Q { ST q[]; };
layout(set = 0, binding = 1) readonly buffer K { ST k[]; };
layout(set = 0, binding = 2) readonly buffer V { ST v[]; };
layout(set = 0, binding = 3) readonly buffer L { uint lens[]; };
layout(set = 0, binding = 4) writeonly buffer Part { float part[]; };
layout(push_constant) uniform P {
    uint q_heads; uint kv_heads; uint dim; uint max_seq;
    uint chunks; uint group; float scale;
};

#define CHUNK 64u
#define MAX_GROUP 16u
#define MAX_QS 2048u  // group * dim

shared float qs[MAX_QS];
shared float sc[MAX_GROUP * CHUNK];
shared float hm[MAX_GROUP];
shared float hs[MAX_GROUP];

void main() {
    uint c = gl_WorkGroupID.x;
    uint ratio = q_heads / kv_heads;
    uint slices = (ratio + group - 1u) / group;
    uint y = gl_WorkGroupID.y;
    uint slice = y % slices;
    uint bh = y / slices;
    uint kvh = bh % kv_heads;
    uint b = bh / kv_heads;
    uint len = min(lens[b], max_seq);
    uint p0 = c * CHUNK;
    if (p0 >= len) return;  // uniform across the workgroup
    uint np = min(CHUNK, len - p0);
    uint g0 = slice * group;
    uint ng = min(group, ratio - g0);
    uint head0 = b * q_heads + kvh * ratio + g0;  // first query head (flat)
    uint t = gl_LocalInvocationIndex;
    for (uint i = t; i < ng * dim; i += LOCAL) qs[i] = LD(q[head0 * dim + i]);
    barrier();
    uint kbase = ((b * kv_heads + kvh) * max_seq + p0) * dim;
    for (uint i = t; i < ng * np; i += LOCAL) {
        uint g = i / np, p = i - g * np;
        float s = 0.0;
        for (uint d = 0u; d < dim; ++d) s += qs[g * dim + d] * LD(k[kbase + p * dim + d]);
        sc[g * CHUNK + p] = s * scale;
    }
    barrier();
    if (t < ng) {
        float m = NEG_INF;
        for (uint p = 0u; p < np; ++p) m = nmax(m, sc[t * CHUNK + p]);
        float s = 0.0;
        for (uint p = 0u; p < np; ++p) {
            float e = exp(sc[t * CHUNK + p] - m);
            sc[t * CHUNK + p] = e;
            s += e;
        }
        hm[t] = m;
        hs[t] = s;
    }
    barrier();
    uint stride = dim + 2u;
    for (uint i = t; i < ng * dim; i += LOCAL) {
        uint g = i / dim, d = i - g * dim;
        float a = 0.0;
        for (uint p = 0u; p < np; ++p) a += sc[g * CHUNK + p] * LD(v[kbase + p * dim + d]);
        part[((head0 + g) * chunks + c) * stride + d] = a;
    }
    if (t < ng) {
        uint o = ((head0 + t) * chunks + c) * stride + dim;
        part[o] = hm[t];
        part[o + 1u] = hs[t];
    }
}
