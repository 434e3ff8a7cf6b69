// The copy kernel Batch::copy uses for large copies: n 16-byte words from
// binding 0 to binding 1, one per invocation, with a grid-stride loop for
// grids smaller than n.
#version 450
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer Src { uvec4 src[]; };
layout(set = 0, binding = 1) writeonly buffer Dst { uvec4 dst[]; };
layout(push_constant) uniform P { uint n; };
void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < n; i += stride) {
        dst[i] = src[i];
    }
}
