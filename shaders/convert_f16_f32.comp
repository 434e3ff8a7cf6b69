#version 450
// y = float(x) for f16 x: widens f16 matmul inputs for the f32 kernel where
// no cooperative-matrix path applies. Needs storageBuffer16BitAccess only
// (no f16 arithmetic). Launched 1-D over n elements, grid spread into y and
// z past the x limit (see Batch::run). Push constant: n.
#extension GL_EXT_shader_16bit_storage : require

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer X { float16_t x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint n; };

void main() {
    uint i = gl_GlobalInvocationID.x
           + gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x)
           + gl_GlobalInvocationID.z * (gl_NumWorkGroups.x * gl_WorkGroupSize.x * gl_NumWorkGroups.y);
    if (i < n) {
        y[i] = float(x[i]);
    }
}
