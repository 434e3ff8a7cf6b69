#version 450
// Rotary position embedding, rotate-half form, over x [tokens, heads, dim]:
// for i < dim/2, with a = pos[token] * inv_freq[i] (one f32 product, as
// the reference models compute it),
//   out[i]         = x[i] cos a - x[i + dim/2] sin a
//   out[i + dim/2] = x[i + dim/2] cos a + x[i] sin a.
// Each invocation owns one pair (so out may be x), striding over the pairs.
// cos and sin see the angle reduced by 2pi (rope_angle.glsl).
// variant: nn_rope_f16 DTYPE_F16=1
// variant: nn_rope_bf16 DTYPE_BF16=1
#include "common.glsl"
#include "nn_dtype.glsl"
#include "rope_angle.glsl"
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer X { ST x[]; };
layout(set = 0, binding = 1) writeonly buffer O { ST o[]; };
layout(set = 0, binding = 2) readonly buffer F { float inv_freq[]; };
layout(set = 0, binding = 3) readonly buffer Pos { uint pos[]; };
layout(push_constant) uniform P { uint tokens; uint heads; uint half_dim; };

void main() {
    uint n = tokens * heads * half_dim;
    uint step = gl_NumWorkGroups.x * LOCAL;
    for (uint i = gl_GlobalInvocationID.x; i < n; i += step) {
        uint th = i / half_dim, p = i - th * half_dim;
        uint tok = th / heads;
        vec2 cs_sn = rope_cos_sin(pos[tok], inv_freq[p]);
        float cs = cs_sn.x, sn = cs_sn.y;
        uint lo = th * 2u * half_dim + p, hi = lo + half_dim;
        float x0 = LD(x[lo]), x1 = LD(x[hi]);
        o[lo] = TO(x0 * cs - x1 * sn);
        o[hi] = TO(x1 * cs + x0 * sn);
    }
}
