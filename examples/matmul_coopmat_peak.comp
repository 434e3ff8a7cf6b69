#version 450
// The ceiling of cooperative-matrix f16 → f32 multiply-adds on this device:
// each subgroup loads one A and one B fragment once, then runs `iters`
// rounds of ACC independent 16×16×16 multiply-adds on registers only, and
// stores each accumulator (so nothing is optimised away). Memory plays no
// part; FLOPs = subgroups · iters · ACC · 2·16·16·16. Push constant: iters.
// ACC (accumulators) is defined by the example before compiling.
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_basic : enable

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer In { float16_t src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { float dst[]; };
layout(push_constant) uniform P { uint iters; };

void main() {
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fa;
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fb;
    coopMatLoadNV(fa, src, 0, 16, false);
    coopMatLoadNV(fb, src, 256, 16, false);
    fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[ACC];
    [[unroll]] for (uint i = 0; i < ACC; i++) {
        acc[i] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
    }
    for (uint it = 0; it < iters; it++) {
        [[unroll]] for (uint i = 0; i < ACC; i++) {
            acc[i] = coopMatMulAddNV(fa, fb, acc[i]);
        }
    }
    uint sg = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID;
    [[unroll]] for (uint i = 0; i < ACC; i++) {
        coopMatStoreNV(acc[i], dst, (sg * ACC + i) * 256, 16, false);
    }
}
