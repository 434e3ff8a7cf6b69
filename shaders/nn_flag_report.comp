#version 450
// The op batch's per-launch report of its bound flags (a launch's ticket
// reads it): one invocation reads up to 4 flag words (word off_i of buffer
// F_i: a count the bounded transformer kernels add to, token ids past the
// vocabulary or positions past the cache), writes what each grew by since
// the previous launch into the launch's entry of a host-visible ring, and
// keeps the values it saw. state = [launch counter, the last value of each
// word]; an entry is 5 words: the launch's number, then one count per word
// (0 past the n words reported). A word that went down since the previous
// launch (reset by its user) counts from 0.
#include "common.glsl"

layout(local_size_x = 1) in;
layout(std430, set = 0, binding = 0) readonly buffer F0 { uint f0[]; };
layout(std430, set = 0, binding = 1) readonly buffer F1 { uint f1[]; };
layout(std430, set = 0, binding = 2) readonly buffer F2 { uint f2[]; };
layout(std430, set = 0, binding = 3) readonly buffer F3 { uint f3[]; };
layout(std430, set = 0, binding = 4) buffer State { uint state[]; };
layout(std430, set = 0, binding = 5) writeonly buffer Ring { uint ring[]; };
layout(push_constant) uniform P { uint off0; uint off1; uint off2; uint off3; uint n; uint slots; };

uint word(uint i) {
    if (i == 0u) return f0[off0];
    if (i == 1u) return f1[off1];
    if (i == 2u) return f2[off2];
    return f3[off3];
}

void main() {
    uint k = state[0];
    uint base = (k % slots) * 5u;
    ring[base] = k;
    for (uint i = 0u; i < 4u; ++i) {
        uint grew = 0u;
        if (i < n) {
            uint w = word(i);
            uint last = state[1u + i];
            grew = w >= last ? w - last : w;
            state[1u + i] = w;
        }
        ring[base + 1u + i] = grew;
    }
    state[0] = k + 1u;
}
