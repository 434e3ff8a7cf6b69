#version 450
// Rotary position embedding, rotate-half form, over x [tokens, heads, dim]:
// for i < dim/2, with a = pos[token] * inv_freq[i] (f32, as the reference
// models compute it),
//   out[i]         = x[i] cos a - x[i + dim/2] sin a
//   out[i + dim/2] = x[i + dim/2] cos a + x[i] sin a.
// Each invocation owns one pair (so out may be x), striding over the pairs.
// The angle is reduced to [-pi, pi] in two steps (2 pi = C1 + C2, C1 with
// few bits so k C1 is exact) before cos and sin.
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

const float C1 = 6.28125;
const float C2 = 1.9353071795864769e-3;
const float INV_TWO_PI = 0.15915494309189535;

void main() {
    uint n = tokens * heads * half_dim;
    uint step = gl_NumWorkGroups.x * LOCAL;
    for (uint i = gl_GlobalInvocationID.x; i < n; i += step) {
        uint th = i / half_dim, p = i - th * half_dim;
        uint tok = th / heads;
        float a = float(pos[tok]) * inv_freq[p];
        float k = round(a * INV_TWO_PI);
        float r = (a - k * C1) - k * C2;
        float cs = cos(r), sn = sin(r);
        uint lo = th * 2u * half_dim + p, hi = lo + half_dim;
        float x0 = LD(x[lo]), x1 = LD(x[hi]);
        o[lo] = TO(x0 * cs - x1 * sn);
        o[hi] = TO(x1 * cs + x0 * sn);
    }
}
