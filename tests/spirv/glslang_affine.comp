#version 450
// y[i] = scale * x[i] + bias, written for Vulkan 1.0 (storage blocks as
// BufferBlock in the Uniform storage class).
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer In { float x[]; };
layout(std430, set = 0, binding = 1) buffer Out { float y[]; };
layout(std140, set = 0, binding = 2) uniform Params { float scale; float bias; } params;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < uint(y.length())) {
        y[i] = params.scale * x[i] + params.bias;
    }
}
