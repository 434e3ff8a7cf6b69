#version 450
// Causal attention for prefill on adapters whose shared memory cannot hold
// nn_attn_prefill.comp's tiles for this head_dim: q [batch, tokens, q_heads, dim] against
// k, v [batch, tokens, kv_heads, dim] (query i sees keys 0..=i; query head
// h reads kv head h / (q_heads / kv_heads)), out like q. Workgroup
// (x = tile of QT queries, y = (b, query head)) walks the key tiles up to
// its last query, flash-attention style: scores of a QT x bk tile in shared
// memory, then per query the running max m and sum l rescaled (online
// softmax) and the f32 accumulators in registers; the score matrix is
// never stored. bk = min(16, 2048 / dim) keys per tile.
// variant: nn_attn_prefill_small_f16 DTYPE_F16=1
// variant: nn_attn_prefill_small_bf16 DTYPE_BF16=1
#include "common.glsl"
#include "nn_dtype.glsl"
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer Q { ST q[]; };
layout(set = 0, binding = 1) readonly buffer K { ST k[]; };
layout(set = 0, binding = 2) readonly buffer V { ST v[]; };
layout(set = 0, binding = 3) writeonly buffer O { ST o[]; };
layout(push_constant) uniform P {
    uint tokens; uint q_heads; uint kv_heads; uint dim; uint bk; float scale;
};

#define QT 16u
#define KT 16u      // largest bk
#define TILE 2048u  // bk * dim
#define ACC 16u     // QT * dim / LOCAL for dim <= 256

shared float kv[TILE];
shared float sc[QT * KT];
shared float rm[QT];
shared float rl[QT];
shared float ra[QT];

void main() {
    uint q0 = gl_WorkGroupID.x * QT;
    uint bh = gl_WorkGroupID.y;
    uint h = bh % q_heads, b = bh / q_heads;
    uint kvh = h / (q_heads / kv_heads);
    uint t = gl_LocalInvocationIndex;
    uint nq = min(QT, tokens - q0);
    uint qstride = q_heads * dim, kstride = kv_heads * dim;
    uint qbase = (b * tokens + q0) * qstride + h * dim;
    uint kbase = b * tokens * kstride + kvh * dim;
    if (t < QT) {
        rm[t] = NEG_INF;
        rl[t] = 0.0;
    }
    float acc[ACC];
    for (uint j = 0u; j < ACC; ++j) acc[j] = 0.0;
    uint kend = q0 + nq;  // keys this tile of queries needs
    uint si = t / KT, sj = t % KT;  // this invocation's score
    for (uint k0 = 0u; k0 < kend; k0 += bk) {
        uint nk = min(bk, kend - k0);
        barrier();  // the previous tile's readers are done
        for (uint i = t; i < nk * dim; i += LOCAL) {
            uint j = i / dim, d = i - j * dim;
            kv[i] = LD(k[kbase + (k0 + j) * kstride + d]);
        }
        barrier();
        float s = NEG_INF;
        if (si < nq && sj < nk && k0 + sj <= q0 + si) {
            float dot = 0.0;
            uint qr = qbase + si * qstride;
            for (uint d = 0u; d < dim; ++d) dot += LD(q[qr + d]) * kv[sj * dim + d];
            s = dot * scale;
        }
        sc[si * KT + sj] = s;
        barrier();
        if (t < nq) {
            float mo = rm[t];
            float mn = mo;
            for (uint j = 0u; j < nk; ++j) mn = nmax(mn, sc[t * KT + j]);
            float alpha = mn == NEG_INF ? 1.0 : exp(mo - mn);
            float l = 0.0;
            for (uint j = 0u; j < nk; ++j) {
                float p = mn == NEG_INF ? 0.0 : exp(sc[t * KT + j] - mn);
                sc[t * KT + j] = p;
                l += p;
            }
            rm[t] = mn;
            rl[t] = rl[t] * alpha + l;
            ra[t] = alpha;
        }
        barrier();
        for (uint i = t; i < nk * dim; i += LOCAL) {
            uint j = i / dim, d = i - j * dim;
            kv[i] = LD(v[kbase + (k0 + j) * kstride + d]);
        }
        barrier();
        for (uint j = 0u; j < ACC; ++j) {
            uint e = t + j * LOCAL;
            uint qi = e / dim, d = e - qi * dim;
            if (qi < nq) {
                float a = acc[j] * ra[qi];
                for (uint c = 0u; c < nk; ++c) a += sc[qi * KT + c] * kv[c * dim + d];
                acc[j] = a;
            }
        }
    }
    for (uint j = 0u; j < ACC; ++j) {
        uint e = t + j * LOCAL;
        uint qi = e / dim, d = e - qi * dim;
        if (qi < nq) o[qbase + qi * qstride + d] = TO(acc[j] / rl[qi]);
    }
}
