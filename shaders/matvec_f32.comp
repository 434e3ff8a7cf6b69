#version 450
// c = A·b for row-major A (M×K) and a vector b (K): the GEMV path of matmul
// when N = 1. Bandwidth-bound: one subgroup per row of A, its lanes reading
// consecutive elements (each subgroup load covers whole cache lines), four
// loads in flight per lane, then a subgroup sum. Rows are visited
// grid-stride, so any M fits any grid. Push constants: M, K.
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer MatA { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer VecB { float b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer VecC { float c[]; };
layout(push_constant) uniform Shape { uint M; uint K; };

void main() {
    uint lane = gl_SubgroupInvocationID;
    uint width = gl_SubgroupSize;
    uint stride_rows = gl_NumWorkGroups.x * gl_NumSubgroups;
    for (uint row = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID; row < M;
         row += stride_rows) {
        uint base = row * K;
        float s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
        uint k = lane;
        for (; k + 3 * width < K; k += 4 * width) {
            s0 = fma(a[base + k], b[k], s0);
            s1 = fma(a[base + k + width], b[k + width], s1);
            s2 = fma(a[base + k + 2 * width], b[k + 2 * width], s2);
            s3 = fma(a[base + k + 3 * width], b[k + 3 * width], s3);
        }
        for (; k < K; k += width) {
            s0 = fma(a[base + k], b[k], s0);
        }
        float s = subgroupAdd((s0 + s1) + (s2 + s3));
        if (subgroupElect()) {
            c[row] = s;
        }
    }
}
