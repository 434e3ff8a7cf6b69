#version 450
// Rotary position embedding, rotate-half form, over x [tokens, heads, dim]:
// for i < dim/2, with a = pos[token] * inv_freq[i] (one f32 product, as
// the reference models compute it),
//   out[i]         = x[i] cos a - x[i + dim/2] sin a
//   out[i + dim/2] = x[i + dim/2] cos a + x[i] sin a.
// Each invocation owns one pair (so out may be x), striding over the pairs.
//
// cos and sin see the angle reduced to r = a - k 2pi, k = round(a / 2pi),
// since fast GPU sin/cos are accurate only near [-pi, pi] (NVIDIA's error
// grows with |x|). Cody-Waite with 2pi = C1 + C2 + C3: C1 and C2 carry few
// bits, so k C1 and k C2 are exact and so are both subtractions for
// angles below 2^20.6 (the rope unit tests check every 61st f32 there);
// only k C3 and the last subtraction round: |r - (a - k 2pi)| <= 2^-21,
// and |r| <= pi + 2^-22 |a| (k comes from a rounded quotient). `precise`
// keeps the compiler from fusing the product a into the reduction or
// reassociating the steps, either of which loses what the split keeps.
// variant: nn_rope_f16 DTYPE_F16=1
// variant: nn_rope_bf16 DTYPE_BF16=1
#include "common.glsl"
#include "nn_dtype.glsl"
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer X { ST x[]; };
layout(set = 0, binding = 1) writeonly buffer O { ST o[]; };
layout(set = 0, binding = 2) readonly buffer F { float inv_freq[]; };
layout(set = 0, binding = 3) readonly buffer Pos { uint pos[]; };
layout(push_constant) uniform P { uint tokens; uint heads; uint half_dim; };

// 2pi = C1 + C2 + C3 (C1: 5 significant bits, C2: 6, C3: the rest).
const float C1 = 6.25;
const float C2 = 0.033203125;
const float C3 = -1.781782e-5;
const float INV_TWO_PI = 0.15915494309189535;

void main() {
    uint n = tokens * heads * half_dim;
    uint step = gl_NumWorkGroups.x * LOCAL;
    for (uint i = gl_GlobalInvocationID.x; i < n; i += step) {
        uint th = i / half_dim, p = i - th * half_dim;
        uint tok = th / heads;
        precise float a = float(pos[tok]) * inv_freq[p];
        float k = round(a * INV_TWO_PI);
        precise float r1 = a - k * C1;
        precise float r2 = r1 - k * C2;
        precise float r = r2 - k * C3;
        float cs = cos(r), sn = sin(r);
        uint lo = th * 2u * half_dim + p, hi = lo + half_dim;
        float x0 = LD(x[lo]), x1 = LD(x[hi]);
        o[lo] = TO(x0 * cs - x1 * sn);
        o[hi] = TO(x1 * cs + x0 * sn);
    }
}
