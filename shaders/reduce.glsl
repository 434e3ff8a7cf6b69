// One-pass reductions over n floats: sum (OP 0), max (OP 1), dot (OP 2).
//
// Each workgroup reduces a fixed grid-stride share of the input (vec4 loads
// over the first n4 * 4 elements, scalar loads for the rest), stores its
// partial in scratch.part[group], and counts itself done on scratch.count.
// The workgroup that counts last combines all partials in a fixed order
// (invocation t adds partials t, t + 256, ... in turn, then a fixed
// workgroup tree), writes out[0] and resets the counter for the next use.
// No float atomics: for the same input and grid the result has the same
// bits on every run. Max propagates NaN; its identity is -inf.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0u;
layout(set = 0, binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(set = 0, binding = 1) readonly buffer X1 { float x1[]; };
layout(set = 0, binding = 2) readonly buffer Y4 { vec4 y4[]; };
layout(set = 0, binding = 3) readonly buffer Y1 { float y1[]; };
layout(set = 0, binding = 4) coherent buffer Scratch { uint count; uint part[]; } scratch;
layout(set = 0, binding = 5) writeonly buffer Out { float result[]; };
layout(push_constant) uniform P { uint n; uint n4; };

shared bool last_group;

float identity() { return OP == 1u ? NEG_INF : 0.0; }
float combine(float a, float b) { return OP == 1u ? nmax(a, b) : a + b; }
float reduce4(vec4 v) {
    return OP == 1u ? nmax(nmax(v.x, v.y), nmax(v.z, v.w)) : (v.x + v.y) + (v.z + v.w);
}
vec4 load4(uint i) { return OP == 2u ? x4[i] * y4[i] : x4[i]; }
float load1(uint i) { return OP == 2u ? x1[i] * y1[i] : x1[i]; }
float wg_reduce(float v) { return OP == 1u ? wg_max(v) : wg_sum(v); }

void main() {
    uint stride = gl_NumWorkGroups.x * LOCAL;
    uint gid = gl_GlobalInvocationID.x;
    float a = identity();
    float b = identity();
    float c = identity();
    float d = identity();
    // Four loads in flight per iteration, four accumulators.
    uint i = gid;
    for (; i + 3u * stride < n4; i += 4u * stride) {
        vec4 p = load4(i);
        vec4 q = load4(i + stride);
        vec4 u = load4(i + 2u * stride);
        vec4 v = load4(i + 3u * stride);
        a = combine(a, reduce4(p));
        b = combine(b, reduce4(q));
        c = combine(c, reduce4(u));
        d = combine(d, reduce4(v));
    }
    for (; i < n4; i += stride) a = combine(a, reduce4(load4(i)));
    for (uint j = n4 * 4u + gid; j < n; j += stride) b = combine(b, load1(j));
    a = combine(combine(a, b), combine(c, d));
    float r = wg_reduce(a);

    if (gl_LocalInvocationIndex == 0u) {
        scratch.part[gl_WorkGroupID.x] = floatBitsToUint(r);
        memoryBarrierBuffer();
        uint done = atomicAdd(scratch.count, 1u);
        last_group = done == gl_NumWorkGroups.x - 1u;
    }
    barrier();
    if (!last_group) return;
    memoryBarrierBuffer();
    float acc = identity();
    for (uint g = gl_LocalInvocationIndex; g < gl_NumWorkGroups.x; g += LOCAL) {
        acc = combine(acc, uintBitsToFloat(scratch.part[g]));
    }
    float total = wg_reduce(acc);
    if (gl_LocalInvocationIndex == 0u) {
        result[0] = total;
        scratch.count = 0u;
    }
}
