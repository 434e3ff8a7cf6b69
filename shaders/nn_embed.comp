#version 450
// Embedding gather: out[t, :] = table[ids[t], :], one workgroup per token.
// An id at or past the vocabulary writes a row of zeros and adds 1 to
// flag[0] (a word the caller zeroes and reads back), so bad ids never read
// past the table.
// variant: nn_embed_f16 DTYPE_F16=1
// variant: nn_embed_bf16 DTYPE_BF16=1
#include "common.glsl"
#include "nn_dtype.glsl"
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer T { ST table[]; };
layout(set = 0, binding = 1) readonly buffer I { uint ids[]; };
layout(set = 0, binding = 2) writeonly buffer O { ST o[]; };
layout(set = 0, binding = 3) buffer Flag { uint flag[]; };
layout(push_constant) uniform P { uint tokens; uint dim; uint vocab; };

void main() {
    uint tok = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (tok >= tokens) return;  // uniform across the workgroup
    uint t = gl_LocalInvocationIndex;
    uint id = ids[tok];
    uint base = tok * dim;
    if (id >= vocab) {
        for (uint c = t; c < dim; c += LOCAL) o[base + c] = TO(0.0);
        if (t == 0u) atomicAdd(flag[0], 1u);
        return;
    }
    uint src = id * dim;
    for (uint c = t; c < dim; c += LOCAL) o[base + c] = table[src + c];
}
