#version 450
// The ceiling of cooperative-matrix f16 → f32 multiply-adds on this device:
// each subgroup runs `iters` rounds of ACC independent 16×16×16
// multiply-adds and stores each accumulator (so nothing is optimised away).
// FLOPs = subgroups · iters · ACC · 2·16·16·16. Push constant: iters.
// The example defines before compiling:
//   ACC     accumulators per subgroup;
//   SHARED  0: A and B fragments are loaded once from the buffer and the
//           loop runs on registers only (NVIDIA's driver crashed compiling
//           this form on the H200, 2026-11-23);
//           1: each round loads A and B from shared memory, as the matmul
//           kernel's inner loop does (alternating between two copies so
//           the loads cannot be hoisted out of the loop). Global memory
//           plays no part in the loop either way.
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_basic : enable

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer In { float16_t src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { float dst[]; };
layout(push_constant) uniform P { uint iters; };

#if SHARED
shared float16_t tiles[1024];
#endif

void main() {
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fa;
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fb;
    fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[ACC];
    [[unroll]] for (uint i = 0; i < ACC; i++) {
        acc[i] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
    }
#if SHARED
    // Two copies of the A and B fragments (512 halves each).
    for (uint i = gl_LocalInvocationID.x; i < 1024; i += 256) {
        tiles[i] = src[i % 512];
    }
    barrier();
    for (uint it = 0; it < iters; it++) {
        uint base = (it & 1u) * 512;
        coopMatLoadNV(fa, tiles, base, 16, false);
        coopMatLoadNV(fb, tiles, base + 256, 16, false);
        [[unroll]] for (uint i = 0; i < ACC; i++) {
            acc[i] = coopMatMulAddNV(fa, fb, acc[i]);
        }
    }
#else
    coopMatLoadNV(fa, src, 0, 16, false);
    coopMatLoadNV(fb, src, 256, 16, false);
    for (uint it = 0; it < iters; it++) {
        [[unroll]] for (uint i = 0; i < ACC; i++) {
            acc[i] = coopMatMulAddNV(fa, fb, acc[i]);
        }
    }
#endif
    uint sg = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID;
    [[unroll]] for (uint i = 0; i < ACC; i++) {
        coopMatStoreNV(acc[i], dst, (sg * ACC + i) * 256, 16, false);
    }
}
