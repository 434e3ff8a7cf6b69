#version 450
// The q/k side of a layer's rows in one dispatch: per-head RMSNorm of q
// and k (when has_norm), rotary embedding at each token's position, and
// the append of the rotated k and of v to the KV caches.
//
// q [batch, steps, q_heads, dim], k and v [batch, steps, kv_heads, dim]
// (f32); caches k_cache, v_cache [batch, kv_heads, max_seq, dim] (ST).
// Token s of sequence b sits at position pos[b] + s. One workgroup per
// (token, head) over the q heads then the kv heads of each token:
//   x = rms(x) * w           (has_norm; the rms_norm kernel's f32 formula)
//   x = rotary(x, position)  (nn_rope.comp's rotate-half form and its
//                             angle reduction, rope_angle.glsl)
// written back in place (q and k), and for a kv head k and v also written
// to the caches at the position. A position at or past max_seq writes no
// cache and adds 1 to flag[0] (once per token and kv head), as
// nn_kv_append.comp does. Each invocation owns up to PAIRS rotary pairs
// (i, i + dim/2), so dim may be any even number up to 2 * PAIRS * WG.
// variant: nn_qk_rope_append_f16 DTYPE_F16=1
// variant: nn_qk_rope_append_bf16 DTYPE_BF16=1
#extension GL_EXT_control_flow_attributes : require
#include "nn_dtype.glsl"
#include "rope_angle.glsl"
#define WG 64u
#define PAIRS 2u
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer Q { float q[]; };
layout(set = 0, binding = 1) buffer K { float k[]; };
layout(set = 0, binding = 2) readonly buffer V { float v[]; };
layout(set = 0, binding = 3) readonly buffer QW { float qw[]; };
layout(set = 0, binding = 4) readonly buffer KW { float kw[]; };
layout(set = 0, binding = 5) readonly buffer F { float inv_freq[]; };
layout(set = 0, binding = 6) readonly buffer Pos { uint pos[]; };
layout(set = 0, binding = 7) writeonly buffer KC { ST kc[]; };
layout(set = 0, binding = 8) writeonly buffer VC { ST vc[]; };
layout(set = 0, binding = 9) buffer Flag { uint flag[]; };
layout(push_constant) uniform P {
    uint batch; uint steps; uint q_heads; uint kv_heads; uint half_dim;
    uint max_seq; float eps; uint has_norm;
};


shared float red[WG];

void main() {
    uint heads = q_heads + kv_heads;
    uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (wg >= batch * steps * heads) return;  // uniform across the workgroup
    uint tok = wg / heads, hh = wg - tok * heads;
    bool is_q = hh < q_heads;
    uint kvh = hh - q_heads;
    uint dim = 2u * half_dim;
    uint base = is_q ? (tok * q_heads + hh) * dim : (tok * kv_heads + kvh) * dim;
    uint t = gl_LocalInvocationIndex;
    uint b = tok / steps, st = tok - b * steps;
    uint p0 = pos[b];
    // Every load that does not depend on the norm is issued, and the
    // rotation angles computed, before the norm's reduction waits.
    float x0[PAIRS], x1[PAIRS], w0[PAIRS], w1[PAIRS], cs[PAIRS], sn[PAIRS];
    float s = 0.0;
    [[unroll]] for (uint j = 0u; j < PAIRS; ++j) {
        uint p = t + j * WG;
        x0[j] = 0.0;
        x1[j] = 0.0;
        w0[j] = 1.0;
        w1[j] = 1.0;
        cs[j] = 1.0;
        sn[j] = 0.0;
        if (p < half_dim) {
            x0[j] = is_q ? q[base + p] : k[base + p];
            x1[j] = is_q ? q[base + p + half_dim] : k[base + p + half_dim];
            if (has_norm != 0u) {
                w0[j] = is_q ? qw[p] : kw[p];
                w1[j] = is_q ? qw[p + half_dim] : kw[p + half_dim];
            }
            vec2 cs_sn = rope_cos_sin(p0 + st, inv_freq[p]);
            cs[j] = cs_sn.x;
            sn[j] = cs_sn.y;
        }
        s += x0[j] * x0[j] + x1[j] * x1[j];
    }
    if (has_norm != 0u) {
        red[t] = s;
        for (uint h = WG / 2u; h > 0u; h >>= 1u) {
            barrier();
            if (t < h) red[t] += red[t + h];
        }
        barrier();
        float inv = inversesqrt(red[0] / float(dim) + eps);
        [[unroll]] for (uint j = 0u; j < PAIRS; ++j) {
            x0[j] = x0[j] * inv * w0[j];
            x1[j] = x1[j] * inv * w1[j];
        }
    }
    bool in_cache = p0 < max_seq && st < max_seq - p0;
    if (!is_q && !in_cache && t == 0u) atomicAdd(flag[0], 1u);
    uint dst = ((b * kv_heads + kvh) * max_seq + p0 + st) * dim;
    [[unroll]] for (uint j = 0u; j < PAIRS; ++j) {
        uint p = t + j * WG;
        if (p >= half_dim) continue;
        float y0 = x0[j] * cs[j] - x1[j] * sn[j];
        float y1 = x1[j] * cs[j] + x0[j] * sn[j];
        if (is_q) {
            q[base + p] = y0;
            q[base + p + half_dim] = y1;
        } else {
            k[base + p] = y0;
            k[base + p + half_dim] = y1;
            if (in_cache) {
                kc[dst + p] = TO(y0);
                kc[dst + p + half_dim] = TO(y1);
                vc[dst + p] = TO(v[base + p]);
                vc[dst + p + half_dim] = TO(v[base + p + half_dim]);
            }
        }
    }
}
