// out = g(a, b), element-wise; layout as in ew_unary.glsl. OP picks g.
#include "dtype.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0u;
layout(set = 0, binding = 0) readonly buffer A4 { S4 a4[]; };
layout(set = 0, binding = 1) readonly buffer A1 { S1 a1[]; };
layout(set = 0, binding = 2) readonly buffer B4 { S4 b4[]; };
layout(set = 0, binding = 3) readonly buffer B1 { S1 b1[]; };
layout(set = 0, binding = 4) writeonly buffer O4 { S4 o4[]; };
layout(set = 0, binding = 5) writeonly buffer O1 { S1 o1[]; };
layout(push_constant) uniform P { uint n; uint n4; float alpha; float beta; };

vec4 g(vec4 a, vec4 b) {
    switch (OP) {
    case 0u: return a + b;                   // add
    case 1u: return a - b;                   // sub
    case 2u: return a * b;                   // mul
    default: return alpha * a + b;           // axpy (saxpy: b is y, out is y)
    }
}

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint gid = gl_GlobalInvocationID.x;
    for (uint i = gid; i < n4; i += stride) {
        o4[i] = S4(g(vec4(a4[i]), vec4(b4[i])));
    }
    for (uint i = n4 * 4u + gid; i < n; i += stride) {
        o1[i] = S1(g(vec4(float(a1[i])), vec4(float(b1[i]))).x);
    }
}
