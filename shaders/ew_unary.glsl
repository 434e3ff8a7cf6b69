// out = f(x), element-wise. The vec4 bindings cover the first n4 * 4
// elements (n4 = 0 when the ranges are not 16-byte aligned), the scalar
// bindings the rest; both loops stride over the whole grid, so any grid
// size is correct. OP (specialization constant 0) picks f.
#include "dtype.glsl"
#include "activations.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0u;
layout(set = 0, binding = 0) readonly buffer X4 { S4 x4[]; };
layout(set = 0, binding = 1) readonly buffer X1 { S1 x1[]; };
layout(set = 0, binding = 2) writeonly buffer O4 { S4 o4[]; };
layout(set = 0, binding = 3) writeonly buffer O1 { S1 o1[]; };
layout(push_constant) uniform P { uint n; uint n4; float alpha; float beta; };

float f(float x) {
    switch (OP) {
    case 0u: return x;                       // copy
    case 1u: return alpha * x;               // scale
    case 2u: return max(x, 0.0);             // relu
    case 3u: return vkc_sigmoid(x);          // sigmoid
    case 4u: return vkc_tanh(x);             // tanh
    case 5u: return x * vkc_sigmoid(x);      // swish (SiLU)
    case 6u: return vkc_gelu_erf(x);         // gelu, erf form
    case 7u: return vkc_gelu_tanh(x);        // gelu, tanh approximation
    default: return alpha;                   // fill
    }
}

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint gid = gl_GlobalInvocationID.x;
    for (uint i = gid; i < n4; i += stride) {
        vec4 v = vec4(x4[i]);
        o4[i] = S4(vec4(f(v.x), f(v.y), f(v.z), f(v.w)));
    }
    for (uint i = n4 * 4u + gid; i < n; i += stride) {
        o1[i] = S1(f(float(x1[i])));
    }
}
