#version 450
// ops::prefetch: reads one 32-bit word of every 32-byte sector of a buffer
// range, so that the range sits in the GPU's L2 cache when a later command
// reads it. Each invocation folds the words it reads into one value,
// stored only when the push constant `store` is set (the op never sets
// it): the compiler cannot drop the loads, and nothing is written.
// Push constants: words (32-bit words in the range), store.
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer W { uint w[]; };
layout(std430, set = 0, binding = 1) writeonly buffer S { uint sink[]; };
layout(push_constant) uniform P { uint words; uint store; };

void main() {
    uint acc = 0u;
    uint step = gl_NumWorkGroups.x * 256u * 8u;
    for (uint i = gl_GlobalInvocationID.x * 8u; i < words; i += step) {
        acc ^= w[i];
    }
    if (store != 0u) sink[0] = acc;
}
