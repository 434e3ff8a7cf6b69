#version 450
// c = A·b for row-major A (M×K) and a vector b (K) when K is a multiple of
// 4: matvec_f32.comp with 16-byte loads (rows start 16-byte aligned), so
// each lane has 64 bytes of A in flight per round. One subgroup per row,
// grid-stride over rows, a subgroup sum at the end. Push constants: M, K.
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer MatA { vec4 a[]; };
layout(std430, set = 0, binding = 1) readonly buffer VecB { vec4 b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer VecC { float c[]; };
layout(push_constant) uniform Shape { uint M; uint K; };

void main() {
    uint lane = gl_SubgroupInvocationID;
    uint width = gl_SubgroupSize;
    uint k4 = K / 4;
    uint stride_rows = gl_NumWorkGroups.x * gl_NumSubgroups;
    for (uint row = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID; row < M;
         row += stride_rows) {
        uint base = row * k4;
        vec4 s0 = vec4(0.0), s1 = vec4(0.0), s2 = vec4(0.0), s3 = vec4(0.0);
        uint k = lane;
        for (; k + 3 * width < k4; k += 4 * width) {
            s0 = fma(a[base + k], b[k], s0);
            s1 = fma(a[base + k + width], b[k + width], s1);
            s2 = fma(a[base + k + 2 * width], b[k + 2 * width], s2);
            s3 = fma(a[base + k + 3 * width], b[k + 3 * width], s3);
        }
        for (; k < k4; k += width) {
            s0 = fma(a[base + k], b[k], s0);
        }
        vec4 t = (s0 + s1) + (s2 + s3);
        float s = subgroupAdd((t.x + t.y) + (t.z + t.w));
        if (subgroupElect()) {
            c[row] = s;
        }
    }
}
