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
//
// With FUSED (the nn_attn_decode1 variants) pass 2 happens in the same
// dispatch: each invocation of an active workgroup, after writing its
// partials, issues a device-scope release fence (memoryBarrierBuffer: an
// OpMemoryBarrier at device scope, acquire-release, on buffer memory); the
// workgroup's invocation 0 then adds 1 to its head group's counter
// cnt[y]. The workgroup that brings the counter to the group's number of
// active chunks is the last: it sets the counter back to 0 for the next
// launch, issues the matching acquire fence and merges the chunks of its
// query heads into o exactly as nn_attn_combine.comp does. `part` is
// coherent so those reads see the other workgroups' writes. (The crate's
// megakernel pairs fences and atomics the same way where the device has
// no Vulkan memory model.) A sequence of length 0 has no active chunk:
// chunk 0 writes its zeros.
// variant: nn_attn_decode_f16 DTYPE_F16=1
// variant: nn_attn_decode_bf16 DTYPE_BF16=1
// variant: nn_attn_decode1 FUSED=1
// variant: nn_attn_decode1_f16 FUSED=1 DTYPE_F16=1
// variant: nn_attn_decode1_bf16 FUSED=1 DTYPE_BF16=1
#include "common.glsl"
#include "nn_dtype.glsl"
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer Q { ST q[]; };
layout(set = 0, binding = 1) readonly buffer K { ST k[]; };
layout(set = 0, binding = 2) readonly buffer V { ST v[]; };
layout(set = 0, binding = 3) readonly buffer L { uint lens[]; };
#ifdef FUSED
layout(set = 0, binding = 4) coherent buffer Part { float part[]; };
layout(set = 0, binding = 5) writeonly buffer O { ST o[]; };
layout(set = 0, binding = 6) coherent buffer Cnt { uint cnt[]; };
#else
layout(set = 0, binding = 4) writeonly buffer Part { float part[]; };
#endif
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
#ifdef FUSED
shared uint is_last;
#endif

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
    uint g0 = slice * group;
    uint ng = min(group, ratio - g0);
    uint head0 = b * q_heads + kvh * ratio + g0;  // first query head (flat)
    uint t = gl_LocalInvocationIndex;
#ifdef FUSED
    if (len == 0u && c == 0u) {
        for (uint i = t; i < ng * dim; i += LOCAL) o[head0 * dim + i] = TO(0.0);
        return;
    }
#endif
    if (p0 >= len) return;  // uniform across the workgroup
    uint np = min(CHUNK, len - p0);
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
#ifdef FUSED
    memoryBarrierBuffer();  // release: this invocation's partials, then the count
    barrier();
    if (t == 0u) {
        uint nc = (len + CHUNK - 1u) / CHUNK;
        uint done = atomicAdd(cnt[y], 1u) + 1u;
        is_last = done == nc ? 1u : 0u;
        // Every active workgroup of y has counted: back to 0 for the next
        // launch.
        if (done == nc) atomicExchange(cnt[y], 0u);
    }
    barrier();
    if (is_last == 0u) return;  // uniform across the workgroup
    memoryBarrierBuffer();  // acquire: every other workgroup's partials
    uint nc = (len + CHUNK - 1u) / CHUNK;
    for (uint i = t; i < ng * dim; i += LOCAL) {
        uint g = i / dim, d = i - g * dim;
        uint hb = (head0 + g) * chunks * stride;
        float m = NEG_INF;
        for (uint cc = 0u; cc < nc; ++cc) m = nmax(m, part[hb + cc * stride + dim]);
        float sum = 0.0;
        float a = 0.0;
        for (uint cc = 0u; cc < nc; ++cc) {
            uint pc = hb + cc * stride;
            float w = exp(part[pc + dim] - m);
            sum += part[pc + dim + 1u] * w;
            a += part[pc + d] * w;
        }
        o[(head0 + g) * dim + d] = TO(a / sum);
    }
#endif
}
