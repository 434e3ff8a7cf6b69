// In place: x = a*x + b over n floats. The tiny step of the dispatch
// benchmarks (1 Ki floats, one workgroup of 256 per 256 elements).
#version 450
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) buffer X { float x[]; };
layout(push_constant) uniform P { float a; float b; uint n; };

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) {
        x[i] = x[i] * a + b;
    }
}
