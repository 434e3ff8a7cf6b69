// y = a*x + y over n floats, one element per invocation. Launched with
// Batch::run_spread, whose grid spreads into y and z for very large n: the
// linear index below undoes that.
#version 450
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) buffer Y { float y[]; };
layout(push_constant) uniform P { float a; uint n; };

void main() {
    uint idx = gl_GlobalInvocationID.x
             + gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x)
             + gl_GlobalInvocationID.z * (gl_NumWorkGroups.x * gl_WorkGroupSize.x * gl_NumWorkGroups.y);
    if (idx < n) {
        y[idx] = a * x[idx] + y[idx];
    }
}
