// Softmax over each row of a rows x cols row-major matrix, one workgroup
// per row: y = exp(x - max) / sum(exp(x - max)).
//
// Rows of up to 256 invocations x 32 elements = 8192 floats are read once:
// each invocation keeps its 32 elements in registers through the max, the
// sum and the write. Longer rows are read twice: an online pass (running
// max and rescaled sum per invocation, merged across the workgroup), then a
// pass that writes exp(x - max) / sum. With VEC = 1 (cols a multiple of 4,
// 16-byte aligned ranges) loads and stores are vec4.
// NaN anywhere in a row makes the whole row NaN; -inf entries give 0; a row
// of only -inf gives NaN (as PyTorch does).
#include "common.glsl"
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(set = 0, binding = 1) readonly buffer X1 { float x1[]; };
layout(set = 0, binding = 2) writeonly buffer O4 { vec4 o4[]; };
layout(set = 0, binding = 3) writeonly buffer O1 { float o1[]; };
layout(push_constant) uniform P { uint rows; uint cols; uint vec; };

#define K 8u  // vec4 registers per invocation

// Adds x to a running (max m, sum s of exp(x_i - m)).
void online(inout float m, inout float s, float x) {
    if (x == NEG_INF) return;  // contributes 0
    float nm = nmax(m, x);
    s = s * exp(m - nm) + exp(x - nm);
    m = nm;
}

void main() {
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row >= rows) return;  // uniform across the workgroup
    uint t = gl_LocalInvocationIndex;
    uint base = row * cols;
    if (cols <= K * 4u * LOCAL) {
        vec4 r[K];
        float m = NEG_INF;
        if (vec != 0u) {
            uint b4 = base / 4u, c4 = cols / 4u;
            for (uint k = 0u; k < K; ++k) {
                uint e = k * LOCAL + t;
                r[k] = e < c4 ? x4[b4 + e] : vec4(NEG_INF);
            }
        } else {
            for (uint k = 0u; k < K; ++k) {
                for (uint c = 0u; c < 4u; ++c) {
                    uint e = (k * 4u + c) * LOCAL + t;
                    r[k][c] = e < cols ? x1[base + e] : NEG_INF;
                }
            }
        }
        for (uint k = 0u; k < K; ++k) {
            m = nmax(m, nmax(nmax(r[k].x, r[k].y), nmax(r[k].z, r[k].w)));
        }
        m = wg_max(m);
        float s = 0.0;
        for (uint k = 0u; k < K; ++k) {
            for (uint c = 0u; c < 4u; ++c) {
                uint e = vec != 0u ? (k * LOCAL + t) * 4u + c : (k * 4u + c) * LOCAL + t;
                float v = e < cols ? exp(r[k][c] - m) : 0.0;
                r[k][c] = v;
                s += v;
            }
        }
        float inv = 1.0 / wg_sum(s);
        if (vec != 0u) {
            uint b4 = base / 4u, c4 = cols / 4u;
            for (uint k = 0u; k < K; ++k) {
                uint e = k * LOCAL + t;
                if (e < c4) o4[b4 + e] = r[k] * inv;
            }
        } else {
            for (uint k = 0u; k < K; ++k) {
                for (uint c = 0u; c < 4u; ++c) {
                    uint e = (k * 4u + c) * LOCAL + t;
                    if (e < cols) o1[base + e] = r[k][c] * inv;
                }
            }
        }
        return;
    }
    // Two reads: online max and rescaled sum per invocation.
    float m = NEG_INF;
    float s = 0.0;
    if (vec != 0u) {
        uint b4 = base / 4u, c4 = cols / 4u;
        for (uint e = t; e < c4; e += LOCAL) {
            vec4 v = x4[b4 + e];
            for (uint c = 0u; c < 4u; ++c) online(m, s, v[c]);
        }
    } else {
        for (uint e = t; e < cols; e += LOCAL) online(m, s, x1[base + e]);
    }
    float gm = wg_max(m);
    float part = s == 0.0 ? 0.0 : s * exp(m - gm);
    float inv = 1.0 / wg_sum(part);
    if (vec != 0u) {
        uint b4 = base / 4u, c4 = cols / 4u;
        for (uint e = t; e < c4; e += LOCAL) {
            o4[b4 + e] = exp(x4[b4 + e] - gm) * inv;
        }
    } else {
        for (uint e = t; e < cols; e += LOCAL) {
            o1[base + e] = exp(x1[base + e] - gm) * inv;
        }
    }
}
