// y = A x, A row-major m x n. The shared-memory variant: one workgroup per
// row, each invocation adding a strided share of the row, then a
// fixed-order workgroup sum. The subgroup variant (USE_SUBGROUPS): one
// subgroup per row, no barriers; a workgroup takes `rpg` consecutive rows
// and its subgroups stride over them. Either way each lane keeps four vec4
// loads in flight when VEC = 1 (n a multiple of 4, 16-byte aligned ranges),
// and each output is summed in a fixed order (the same bits every run).
#include "common.glsl"
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer A4 { vec4 a4[]; };
layout(set = 0, binding = 1) readonly buffer A1 { float a1[]; };
layout(set = 0, binding = 2) readonly buffer X4 { vec4 x4[]; };
layout(set = 0, binding = 3) readonly buffer X1 { float x1[]; };
layout(set = 0, binding = 4) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint m; uint n; uint vec; uint rpg; };

// This lane's share of row `row`: elements lane, lane + width, ...
float partial(uint row, uint lane, uint width) {
    float acc = 0.0;
    if (vec != 0u) {
        uint n4 = n / 4u, b4 = row * n4;
        vec4 s0 = vec4(0.0), s1 = vec4(0.0), s2 = vec4(0.0), s3 = vec4(0.0);
        uint e = lane;
        for (; e + 3u * width < n4; e += 4u * width) {
            s0 += a4[b4 + e] * x4[e];
            s1 += a4[b4 + e + width] * x4[e + width];
            s2 += a4[b4 + e + 2u * width] * x4[e + 2u * width];
            s3 += a4[b4 + e + 3u * width] * x4[e + 3u * width];
        }
        for (; e < n4; e += width) s0 += a4[b4 + e] * x4[e];
        vec4 s = (s0 + s1) + (s2 + s3);
        acc = (s.x + s.y) + (s.z + s.w);
    } else {
        uint base = row * n;
        float s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
        uint e = lane;
        for (; e + 3u * width < n; e += 4u * width) {
            s0 += a1[base + e] * x1[e];
            s1 += a1[base + e + width] * x1[e + width];
            s2 += a1[base + e + 2u * width] * x1[e + 2u * width];
            s3 += a1[base + e + 3u * width] * x1[e + 3u * width];
        }
        for (; e < n; e += width) s0 += a1[base + e] * x1[e];
        acc = (s0 + s1) + (s2 + s3);
    }
    return acc;
}

void main() {
    uint group = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
#ifdef USE_SUBGROUPS
    uint first = group * rpg;
    uint last = min(m, first + rpg);
    for (uint row = first + gl_SubgroupID; row < last; row += gl_NumSubgroups) {
        float r = subgroupAdd(partial(row, gl_SubgroupInvocationID, gl_SubgroupSize));
        if (subgroupElect()) y[row] = r;
    }
#else
    uint row = group;
    if (row >= m) return;  // uniform across the workgroup
    float r = wg_sum(partial(row, gl_LocalInvocationIndex, LOCAL));
    if (gl_LocalInvocationIndex == 0u) y[row] = r;
#endif
}
