// y = A x, A row-major m x n: one workgroup per row. Each invocation adds a
// strided share of the row (four vec4 loads in flight when VEC = 1: n a
// multiple of 4 and 16-byte aligned ranges), then a fixed-order workgroup
// sum.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer A4 { vec4 a4[]; };
layout(set = 0, binding = 1) readonly buffer A1 { float a1[]; };
layout(set = 0, binding = 2) readonly buffer X4 { vec4 x4[]; };
layout(set = 0, binding = 3) readonly buffer X1 { float x1[]; };
layout(set = 0, binding = 4) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint m; uint n; uint vec; };

void main() {
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row >= m) return;  // uniform across the workgroup
    uint t = gl_LocalInvocationIndex;
    float acc = 0.0;
    if (vec != 0u) {
        uint n4 = n / 4u, b4 = row * n4;
        vec4 s0 = vec4(0.0), s1 = vec4(0.0), s2 = vec4(0.0), s3 = vec4(0.0);
        uint e = t;
        for (; e + 3u * LOCAL < n4; e += 4u * LOCAL) {
            s0 += a4[b4 + e] * x4[e];
            s1 += a4[b4 + e + LOCAL] * x4[e + LOCAL];
            s2 += a4[b4 + e + 2u * LOCAL] * x4[e + 2u * LOCAL];
            s3 += a4[b4 + e + 3u * LOCAL] * x4[e + 3u * LOCAL];
        }
        for (; e < n4; e += LOCAL) s0 += a4[b4 + e] * x4[e];
        vec4 s = (s0 + s1) + (s2 + s3);
        acc = (s.x + s.y) + (s.z + s.w);
    } else {
        uint base = row * n;
        for (uint e = t; e < n; e += LOCAL) acc += a1[base + e] * x1[e];
    }
    float r = wg_sum(acc);
    if (t == 0u) y[row] = r;
}
