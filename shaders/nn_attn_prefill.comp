#version 450
// Causal attention for prefill: q [batch, tokens, q_heads, dim] against
// k, v [batch, tokens, kv_heads, dim] (query i sees keys 0..=i; query head
// h reads kv head h / (q_heads / kv_heads)), out like q. Workgroup
// (x = tile of QT queries, y = (b, query head)) walks the key tiles of QT
// keys up to its last query, flash-attention style; the score matrix is
// never stored. QT (specialization constant 0) is 32 or 16 (see
// prefill.rs: as the adapter's shared memory allows, dim <= 1024 / QT);
// TILE4 (constant 1) is QT * (dim / 4 + 1) vec4s: a tile of q and one of
// k or v, rows padded to an odd number of vec4s (no bank conflicts).
//
// Per key tile, four barriers: (1) k loaded; (2) scores: invocation
// (row r = t / TPR, lane p = t % TPR) dots its query row with keys
// p + TPR * j (KPT of them), keeps them in registers and publishes their
// max; (3) v loaded over k while each invocation takes the row max,
// rescales its running max and its share of the running sum (registers),
// and writes its probabilities; (4) invocation (rows t / 32 + 8 i, vec4
// column t % 32 + 32 j) rescales its accumulators and adds P · V. The
// workgroups of the last query tiles, which walk the most key tiles, are
// dispatched first.
// variant: nn_attn_prefill_f16 DTYPE_F16=1
// variant: nn_attn_prefill_bf16 DTYPE_BF16=1
#include "common.glsl"
#include "nn_dtype.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint QT = 32u;  // queries (and keys) per tile
layout(constant_id = 1) const uint TILE4 = 1056u;  // vec4s of a q or k/v tile
layout(set = 0, binding = 0) readonly buffer Q { ST q[]; };
layout(set = 0, binding = 1) readonly buffer K { ST k[]; };
layout(set = 0, binding = 2) readonly buffer V { ST v[]; };
layout(set = 0, binding = 3) writeonly buffer O { ST o[]; };
layout(push_constant) uniform P {
    uint tokens; uint q_heads; uint kv_heads; uint dim; float scale;
};

const uint TPR = LOCAL / QT;         // score invocations per query row
const uint KPT = QT * QT / LOCAL;    // keys per score invocation (<= 4)
const uint NDJ = 32u / QT;           // vec4 columns per output invocation

shared vec4 qs[TILE4];
shared vec4 kv[TILE4];
shared vec4 sp[LOCAL];  // probabilities: [row][lane] -> keys lane + TPR j
shared float red[LOCAL];
shared float ra[32];

// Element d of a row at base (0 past dim), and the vec4 at column c.
#define LDE(buf, base, d) ((d) < dim ? LD(buf[(base) + (d)]) : 0.0)
#define LD4(buf, base, c) vec4(LDE(buf, base, 4u * (c)), LDE(buf, base, 4u * (c) + 1u), \
                               LDE(buf, base, 4u * (c) + 2u), LDE(buf, base, 4u * (c) + 3u))

void main() {
    // The longest query tiles (the most key tiles) start first.
    uint q0 = (gl_NumWorkGroups.x - 1u - gl_WorkGroupID.x) * QT;
    uint bh = gl_WorkGroupID.y;
    uint h = bh % q_heads, b = bh / q_heads;
    uint kvh = h / (q_heads / kv_heads);
    uint t = gl_LocalInvocationIndex;
    uint nq = min(QT, tokens - q0);
    uint dim4 = (dim + 3u) / 4u, st4 = dim4 + 1u;
    uint qstride = q_heads * dim, kstride = kv_heads * dim;
    uint qbase = (b * tokens + q0) * qstride + h * dim;
    uint kbase = b * tokens * kstride + kvh * dim;
    for (uint i = t; i < QT * dim4; i += LOCAL) {
        uint j = i / dim4, c = i - j * dim4;
        qs[j * st4 + c] = j < nq ? LD4(q, qbase + j * qstride, c) : vec4(0.0);
    }
    uint r = t / TPR, p = t % TPR;  // score invocation
    uint orow = t / 32u, ocol = t % 32u;  // output invocation
    float m = NEG_INF, lp = 0.0;
    vec4 acc[4];
    for (uint s = 0u; s < 4u; ++s) acc[s] = vec4(0.0);
    uint kend = q0 + nq;  // keys this tile of queries needs
    for (uint k0 = 0u; k0 < kend; k0 += QT) {
        uint nk = min(QT, kend - k0);
        barrier();  // the previous tile's readers are done
        for (uint i = t; i < QT * dim4; i += LOCAL) {
            uint j = i / dim4, c = i - j * dim4;
            kv[j * st4 + c] = j < nk ? LD4(k, kbase + (k0 + j) * kstride, c) : vec4(0.0);
        }
        barrier();
        vec4 dot4[4];
        for (uint j = 0u; j < 4u; ++j) dot4[j] = vec4(0.0);
        for (uint c = 0u; c < dim4; ++c) {
            vec4 qv = qs[r * st4 + c];
            for (uint j = 0u; j < 4u; ++j) {
                if (j < KPT) dot4[j] += qv * kv[(p + TPR * j) * st4 + c];
            }
        }
        float sc[4];
        float pm = NEG_INF;
        for (uint j = 0u; j < 4u; ++j) {
            uint kj = p + TPR * j;
            bool ok = j < KPT && r < nq && kj < nk && k0 + kj <= q0 + r;
            vec4 a = dot4[j];
            sc[j] = ok ? (a.x + a.y + a.z + a.w) * scale : NEG_INF;
            pm = nmax(pm, sc[j]);
        }
        red[t] = pm;
        barrier();  // scores' maxima published, k no longer read
        for (uint i = t; i < QT * dim4; i += LOCAL) {
            uint j = i / dim4, c = i - j * dim4;
            kv[j * st4 + c] = j < nk ? LD4(v, kbase + (k0 + j) * kstride, c) : vec4(0.0);
        }
        float mn = m;
        for (uint u = 0u; u < TPR; ++u) mn = nmax(mn, red[r * TPR + u]);
        float alpha = mn == NEG_INF ? 1.0 : exp(m - mn);
        vec4 pr = vec4(0.0);
        float ls = 0.0;
        for (uint j = 0u; j < 4u; ++j) {
            float e = mn == NEG_INF ? 0.0 : exp(sc[j] - mn);
            pr[j] = e;
            ls += e;
        }
        sp[t] = pr;
        lp = lp * alpha + ls;
        m = mn;
        if (p == 0u) ra[r] = alpha;
        barrier();  // v and the probabilities are in place
        // Slot s: row orow + 8 (s / NDJ), vec4 column ocol + 32 (s % NDJ);
        // each v vec4 loaded once serves the 4 / NDJ rows of its column.
        for (uint s = 0u; s < 4u; ++s) acc[s] *= ra[orow + 8u * (s / NDJ)];
        for (uint u = 0u; u < TPR; ++u) {
            vec4 w[4];
            for (uint s = 0u; s < 4u; s += NDJ) w[s] = sp[(orow + 8u * (s / NDJ)) * TPR + u];
            for (uint j = 0u; j < 4u; ++j) {
                if (j >= KPT) break;
                for (uint dj = 0u; dj < NDJ; ++dj) {
                    uint col = ocol + 32u * dj;
                    if (col < dim4) {
                        vec4 x = kv[(u + TPR * j) * st4 + col];
                        for (uint s = dj; s < 4u; s += NDJ) acc[s] += w[s - dj][j] * x;
                    }
                }
            }
        }
    }
    red[t] = lp;  // the last reads of red came before the last barrier
    barrier();
    for (uint s = 0u; s < 4u; ++s) {
        uint row = orow + 8u * (s / NDJ), col = ocol + 32u * (s % NDJ);
        if (row < nq && col < dim4) {
            float l = 0.0;
            for (uint u = 0u; u < TPR; ++u) l += red[row * TPR + u];
            vec4 x = acc[s] / l;
            uint ob = qbase + row * qstride + 4u * col;
            for (uint e = 0u; e < 4u; ++e) {
                if (4u * col + e < dim) o[ob + e] = TO(x[e]);
            }
        }
    }
}
