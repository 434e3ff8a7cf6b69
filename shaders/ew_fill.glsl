// out = value, element-wise; layout as in ew_unary.glsl.
#include "dtype.glsl"
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) writeonly buffer O4 { S4 o4[]; };
layout(set = 0, binding = 1) writeonly buffer O1 { S1 o1[]; };
layout(push_constant) uniform P { uint n; uint n4; float alpha; float beta; };

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint gid = gl_GlobalInvocationID.x;
    for (uint i = gid; i < n4; i += stride) o4[i] = S4(vec4(alpha));
    for (uint i = n4 * 4u + gid; i < n; i += stride) o1[i] = S1(alpha);
}
