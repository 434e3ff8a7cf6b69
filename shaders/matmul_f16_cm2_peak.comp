#version 450
// The ceiling of workgroup-scope cooperative-matrix multiply-adds
// (VK_NV_cooperative_matrix2) on the device: each workgroup of 256
// invocations loads one BM×BK f16 A and one BK×BN f16 B once, then runs
// `iters` dependent coopMatMulAdd's into one BM×BN f32 accumulator, and
// stores it. No memory traffic in the loop: what the tensor cores reach
// through this path, the bound of matmul_f16_cm2.comp. Used by the matmul
// example (examples/matmul), not by the library's ops.
//
// Binding 0: at least max(BM·BK, BK·BN) f16 values (A is read with row
// stride BK, B with row stride BN); binding 1: BM·BN f32 per workgroup.
// Push constant: iters. Every output entry is iters · Σ_BK a·b.
//
// target-env: vulkan1.3
// variant: matmul_f16_cm2_peak_128x256x64 TILE_BM=128 TILE_BN=256 TILE_BK=64
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require

#ifndef TILE_BM
#define TILE_BM 128
#define TILE_BN 128
#define TILE_BK 64
#endif
const uint BM = TILE_BM;
const uint BN = TILE_BN;
const uint BK = TILE_BK;

layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer Src { float16_t src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Dst { float dst[]; };
layout(push_constant) uniform Params { uint iters; };

void main() {
    coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> ma;
    coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> mb;
    coopMatLoad(ma, src, 0, BK, gl_CooperativeMatrixLayoutRowMajor);
    coopMatLoad(mb, src, 0, BN, gl_CooperativeMatrixLayoutRowMajor);
    coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> acc =
        coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(0.0);
    for (uint i = 0; i < iters; i++) {
        acc = coopMatMulAdd(ma, mb, acc);
    }
    coopMatStore(acc, dst, gl_WorkGroupID.x * BM * BN, BN, gl_CooperativeMatrixLayoutRowMajor);
}
