#version 450
// KV-cache append: new keys and values k_new, v_new [batch, steps, heads,
// dim] go to k_cache, v_cache [batch, heads, max_seq, dim] at positions
// pos[b] + s of sequence b. A position at or past max_seq writes nothing
// and adds 1 to flag[0] (once per token and head).
// variant: nn_kv_append_f16 DTYPE_F16=1
// variant: nn_kv_append_bf16 DTYPE_BF16=1
#include "common.glsl"
#include "nn_dtype.glsl"
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer KN { ST kn[]; };
layout(set = 0, binding = 1) readonly buffer VN { ST vn[]; };
layout(set = 0, binding = 2) writeonly buffer KC { ST kc[]; };
layout(set = 0, binding = 3) writeonly buffer VC { ST vc[]; };
layout(set = 0, binding = 4) readonly buffer Pos { uint pos[]; };
layout(set = 0, binding = 5) buffer Flag { uint flag[]; };
layout(push_constant) uniform P { uint batch; uint steps; uint heads; uint dim; uint max_seq; };

void main() {
    uint n = batch * steps * heads * dim;
    uint step = gl_NumWorkGroups.x * LOCAL;
    for (uint i = gl_GlobalInvocationID.x; i < n; i += step) {
        uint d = i % dim;
        uint r = i / dim;
        uint h = r % heads;
        r /= heads;
        uint s = r % steps;
        uint b = r / steps;
        uint p0 = pos[b];
        if (p0 >= max_seq || s >= max_seq - p0) {
            if (d == 0u) atomicAdd(flag[0], 1u);
            continue;
        }
        uint dst = ((b * heads + h) * max_seq + p0 + s) * dim + d;
        kc[dst] = kn[i];
        vc[dst] = vn[i];
    }
}
