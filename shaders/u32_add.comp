#version 450
// x[i] += value (wrapping) over n u32 counters (ops::increment): positions
// and lengths a recorded graph advances on the GPU. Each invocation
// strides over the elements. Push constants: n, value.
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) buffer X { uint x[]; };
layout(push_constant) uniform P { uint n; uint value; };

void main() {
    uint step = gl_NumWorkGroups.x * LOCAL;
    for (uint i = gl_GlobalInvocationID.x; i < n; i += step) {
        x[i] += value;
    }
}
