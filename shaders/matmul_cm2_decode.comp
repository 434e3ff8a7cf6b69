#version 450
// C = A·B on workgroup-scope cooperative matrices (VK_NV_cooperative_matrix2)
// with operands stored in types the tensor cores do not take, widened to f16
// inside the tensor loads: coopMatLoadTensorNV with a decode function (the
// driver hands the function a buffer_reference to each element and stores
// what it returns into the f16 matrix). The structure is
// matmul_f16_cm2.comp's: one workgroup (THREADS invocations: 128 for the
// 128×128×64 tiles, as the f16 kernel's fastest tile, 256 for the others)
// owns one BM×BN f32 accumulator, unclamped interior blocks, clamped edges,
// any M, N, K ≥ 1.
//
// Operands (definitions):
//   A_F32   A is f32 (decoded f32 → f16); else f16, loaded as stored.
//   B_BF16  B is bfloat16 held as 16-bit words (decoded bf16 → f32 → f16:
//           the bits shifted up 16 are the f32); else f16, loaded as stored.
//   B_NK    B is stored N×K row-major (nn.Linear's [out, in] weight) and read
//           through a transposed tensor view; else K×N row-major.
// Widening to f16 keeps every bf16 or f32 value whose magnitude lies in f16's
// normal range (6.1e-5 to 65504) to f16's precision (bf16's 8 significant
// bits fit f16's 11 exactly); larger magnitudes become ±inf, those below
// f16's normal range lose bits as f16 subnormals and those under about 6e-8
// become zero. Model weights and activations sit far inside that range.
//
// Epilogues (only with A_F32, B_NK, for ops::linear):
//   EPI_RESIDUAL  C = A·B + R: the accumulator starts from R's tile
//                 (binding 3, f32 M×N; R may be C's buffer: each workgroup
//                 reads its own tile before it writes it).
//   EPI_SILU      B holds a merged gate|up weight of N = 2·I rows (gate rows
//                 first); each workgroup computes a BM×BN tile of the gate
//                 product and the matching tile of the up product (rows
//                 I + n) and stores silu(gate)·up into C, M×I.
//
// Push constants: M, K, N, the element strides between consecutive A, B
// and C matrices, and kslice. Grid: (ceil(Nout/BN), ceil(M/BM), layers),
// Nout = N (N/2 with EPI_SILU). kslice 0: layer z is the product of the
// z-th matrices (batched, strides as given). kslice > 0 (a multiple of
// BK): layer z is the partial product over K in [z·kslice, (z+1)·kslice)
// (split-K; strides of A and B 0, C's stride M·N keeps the partials apart).
//
// Specialization constant 0, GROUP_M: as in matmul_f16_cm2.comp (blocks in
// groups of GROUP_M block rows, column by column within a group; 0 or 1:
// the grid's order).
//
// Needs cooperativeMatrixBlockLoads (the decode functions), bufferDeviceAddress
// (their buffer_reference argument) and shaderInt16 (bf16 words).
// Compiled for Vulkan 1.3 (SPIR-V 1.6) by a glslang that knows
// GL_NV_cooperative_matrix2 (scripts/glslang_trixie.sh on Debian 12).
//
// target-env: vulkan1.3
// variant: matmul_bf16w_cm2_a16_128x256x64 TILE_BM=128 TILE_BN=256 TILE_BK=64 B_BF16=1
// variant: matmul_bf16w_cm2_a16_128x128x64 TILE_BM=128 TILE_BN=128 TILE_BK=64 B_BF16=1 THREADS=128
// variant: matmul_bf16w_cm2_a16_64x128x64 TILE_BM=64 TILE_BN=128 TILE_BK=64 B_BF16=1
// variant: matmul_bf16w_cm2_a16_128x256x64_bt TILE_BM=128 TILE_BN=256 TILE_BK=64 B_BF16=1 B_NK=1
// variant: matmul_bf16w_cm2_a16_128x128x64_bt TILE_BM=128 TILE_BN=128 TILE_BK=64 B_BF16=1 B_NK=1 THREADS=128
// variant: matmul_bf16w_cm2_a16_64x128x64_bt TILE_BM=64 TILE_BN=128 TILE_BK=64 B_BF16=1 B_NK=1
// variant: matmul_bf16w_cm2_a32_128x256x64 TILE_BM=128 TILE_BN=256 TILE_BK=64 B_BF16=1 A_F32=1
// variant: matmul_bf16w_cm2_a32_128x128x64 TILE_BM=128 TILE_BN=128 TILE_BK=64 B_BF16=1 A_F32=1 THREADS=128
// variant: matmul_bf16w_cm2_a32_64x128x64 TILE_BM=64 TILE_BN=128 TILE_BK=64 B_BF16=1 A_F32=1
// variant: matmul_bf16w_cm2_a32_128x256x64_bt TILE_BM=128 TILE_BN=256 TILE_BK=64 B_BF16=1 A_F32=1 B_NK=1
// variant: matmul_bf16w_cm2_a32_128x128x64_bt TILE_BM=128 TILE_BN=128 TILE_BK=64 B_BF16=1 A_F32=1 B_NK=1 THREADS=128
// variant: matmul_bf16w_cm2_a32_64x128x64_bt TILE_BM=64 TILE_BN=128 TILE_BK=64 B_BF16=1 A_F32=1 B_NK=1
// variant: linear_cm2_f16_128x256x64 TILE_BM=128 TILE_BN=256 TILE_BK=64 A_F32=1 B_NK=1
// variant: linear_cm2_f16_128x128x64 TILE_BM=128 TILE_BN=128 TILE_BK=64 A_F32=1 B_NK=1 THREADS=128
// variant: linear_cm2_f16_64x128x64 TILE_BM=64 TILE_BN=128 TILE_BK=64 A_F32=1 B_NK=1
// variant: linear_cm2_f16_128x256x64_res TILE_BM=128 TILE_BN=256 TILE_BK=64 A_F32=1 B_NK=1 EPI_RESIDUAL=1
// variant: linear_cm2_f16_128x128x64_res TILE_BM=128 TILE_BN=128 TILE_BK=64 A_F32=1 B_NK=1 EPI_RESIDUAL=1 THREADS=128
// variant: linear_cm2_f16_64x128x64_res TILE_BM=64 TILE_BN=128 TILE_BK=64 A_F32=1 B_NK=1 EPI_RESIDUAL=1
// variant: linear_cm2_bf16_128x256x64_res TILE_BM=128 TILE_BN=256 TILE_BK=64 A_F32=1 B_NK=1 B_BF16=1 EPI_RESIDUAL=1
// variant: linear_cm2_bf16_128x128x64_res TILE_BM=128 TILE_BN=128 TILE_BK=64 A_F32=1 B_NK=1 B_BF16=1 EPI_RESIDUAL=1 THREADS=128
// variant: linear_cm2_bf16_64x128x64_res TILE_BM=64 TILE_BN=128 TILE_BK=64 A_F32=1 B_NK=1 B_BF16=1 EPI_RESIDUAL=1
// variant: linear_cm2_f16_128x64x64_silu TILE_BM=128 TILE_BN=64 TILE_BK=64 A_F32=1 B_NK=1 EPI_SILU=1
// variant: linear_cm2_f16_64x64x64_silu TILE_BM=64 TILE_BN=64 TILE_BK=64 A_F32=1 B_NK=1 EPI_SILU=1
// variant: linear_cm2_bf16_128x64x64_silu TILE_BM=128 TILE_BN=64 TILE_BK=64 A_F32=1 B_NK=1 B_BF16=1 EPI_SILU=1
// variant: linear_cm2_bf16_64x64x64_silu TILE_BM=64 TILE_BN=64 TILE_BK=64 A_F32=1 B_NK=1 B_BF16=1 EPI_SILU=1
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_control_flow_attributes : enable

#ifndef TILE_BM
#define TILE_BM 128
#define TILE_BN 128
#define TILE_BK 64
#endif
const uint BM = TILE_BM;
const uint BN = TILE_BN;
const uint BK = TILE_BK;

#ifndef THREADS
#define THREADS 256
#endif
layout(local_size_x = THREADS, local_size_y = 1, local_size_z = 1) in;

#ifdef A_F32
layout(std430, set = 0, binding = 0) readonly buffer MatA { float a[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer ElemA { float v; };
// One f32 of A as f16 (out of range: ±inf).
float16_t decode_a(const in ElemA e, const in uint block[2], const in uint inBlock[2]) {
    return float16_t(e.v);
}
#define DECODE_A , decode_a
#else
layout(std430, set = 0, binding = 0) readonly buffer MatA { float16_t a[]; };
#define DECODE_A
#endif

#ifdef B_BF16
layout(std430, set = 0, binding = 1) readonly buffer MatB { uint16_t b[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer ElemB { uint16_t bits; };
// One bf16 of B as f16: its bits are the top half of the f32 it stands for.
float16_t decode_b(const in ElemB e, const in uint block[2], const in uint inBlock[2]) {
    return float16_t(uintBitsToFloat(uint(e.bits) << 16));
}
#define DECODE_B , decode_b
#else
layout(std430, set = 0, binding = 1) readonly buffer MatB { float16_t b[]; };
#define DECODE_B
#endif

#ifdef EPI_RESIDUAL
layout(std430, set = 0, binding = 2) writeonly buffer MatC { float c[]; };
layout(std430, set = 0, binding = 3) readonly buffer MatR { float r[]; };
#else
layout(std430, set = 0, binding = 2) writeonly buffer MatC { float c[]; };
#endif

layout(push_constant) uniform Shape {
    uint M; uint K; uint N; uint strideA; uint strideB; uint strideC; uint kslice;
};
layout(constant_id = 0) const uint GROUP_M = 0;

// This workgroup's block: (column, row).
uvec2 block_of_workgroup() {
    if (GROUP_M <= 1) {
        return gl_WorkGroupID.xy;
    }
    const uint nx = gl_NumWorkGroups.x;
    const uint ny = gl_NumWorkGroups.y;
    const uint pid = gl_WorkGroupID.y * nx + gl_WorkGroupID.x;
    const uint per_group = GROUP_M * nx;
    const uint first_row = (pid / per_group) * GROUP_M;
    const uint rows = min(ny - first_row, GROUP_M);
    const uint r = pid % per_group;
    return uvec2(r / rows, first_row + r % rows);
}

#define ACC coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>
#define MAT_A coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB>
#define CLAMP gl_CooperativeMatrixClampModeConstantNV

#ifdef B_NK
#define B_SLICE(l, k, n) sliceTensorLayoutNV(l, n, BN, k, BK), bt
#define B_ROWS_ALIGNED true
#else
#define B_SLICE(l, k, n) sliceTensorLayoutNV(l, k, BK, n, BN)
#define B_ROWS_ALIGNED (N % 8 == 0)
#endif

// One BK-deep step: the matrices of slice k0 are declared and loaded
// (LOAD), then multiplied (MUL), so that a loop body can load two slices
// before it multiplies either.
#ifdef EPI_SILU
#define LOAD(i, la, lb, k0) \
    MAT_A ma##i; MAT_B mb##i; MAT_B mu##i; \
    coopMatLoadTensorNV(ma##i, a, oa, sliceTensorLayoutNV(la, m0, BM, k0, BK) DECODE_A); \
    coopMatLoadTensorNV(mb##i, b, ob, B_SLICE(lb, k0, n0) DECODE_B); \
    coopMatLoadTensorNV(mu##i, b, ob, B_SLICE(lb, k0, nout + n0) DECODE_B);
#define MUL(i) \
    acc = coopMatMulAdd(ma##i, mb##i, acc); \
    up = coopMatMulAdd(ma##i, mu##i, up);
#else
#define LOAD(i, la, lb, k0) \
    MAT_A ma##i; MAT_B mb##i; \
    coopMatLoadTensorNV(ma##i, a, oa, sliceTensorLayoutNV(la, m0, BM, k0, BK) DECODE_A); \
    coopMatLoadTensorNV(mb##i, b, ob, B_SLICE(lb, k0, n0) DECODE_B);
#define MUL(i) acc = coopMatMulAdd(ma##i, mb##i, acc);
#endif

void main() {
    const uvec2 blk = block_of_workgroup();
    const uint m0 = blk.y * BM;
    const uint n0 = blk.x * BN;
    const uint z = gl_WorkGroupID.z;
    const uint oa = z * strideA;
    const uint ob = z * strideB;
    const uint oc = z * strideC;
    const uint kbeg = kslice == 0 ? 0 : z * kslice;
    const uint kend = kslice == 0 ? K : min(K, kbeg + kslice);
#ifdef EPI_SILU
    const uint nout = N / 2;
#else
    const uint nout = N;
#endif

    // Clamped layouts: zeros past M, N and this layer's end of K. Row
    // strides are set, as the dimensions of K may stop short of K.
    tensorLayoutNV<2, CLAMP> la_edge = createTensorLayoutNV(2, CLAMP);
    tensorLayoutNV<2, CLAMP> lb_edge = createTensorLayoutNV(2, CLAMP);
    tensorLayoutNV<2, CLAMP> lc = createTensorLayoutNV(2, CLAMP);
    la_edge = setTensorLayoutDimensionNV(la_edge, M, kend);
    la_edge = setTensorLayoutStrideNV(la_edge, K, 1);
#ifdef B_NK
    lb_edge = setTensorLayoutDimensionNV(lb_edge, N, kend);
    lb_edge = setTensorLayoutStrideNV(lb_edge, K, 1);
    tensorViewNV<2, false, 1, 0> bt = createTensorViewNV(2, false, 1, 0);
#else
    lb_edge = setTensorLayoutDimensionNV(lb_edge, kend, N);
    lb_edge = setTensorLayoutStrideNV(lb_edge, N, 1);
#endif
    lc = setTensorLayoutDimensionNV(lc, M, nout);

#ifdef EPI_RESIDUAL
    ACC acc;
    coopMatLoadTensorNV(acc, r, 0, sliceTensorLayoutNV(lc, m0, BM, n0, BN));
#else
    ACC acc = ACC(0.0);
#endif
#ifdef EPI_SILU
    ACC up = ACC(0.0);
#endif
    uint k0 = kbeg;
    const bool interior = m0 + BM <= M && n0 + BN <= nout && K % 8 == 0 && B_ROWS_ALIGNED
        && oa % 8 == 0 && ob % 8 == 0;
    if (interior) {
        // Row strides that are visibly multiples of 8 elements (16 bytes or
        // more): the loads may then move whole 16-byte pieces.
        tensorLayoutNV<2> la = createTensorLayoutNV(2);
        tensorLayoutNV<2> lb = createTensorLayoutNV(2);
        la = setTensorLayoutDimensionNV(la, M, K);
        la = setTensorLayoutStrideNV(la, K & ~7u, 1);
#ifdef B_NK
        lb = setTensorLayoutDimensionNV(lb, N, K);
        lb = setTensorLayoutStrideNV(lb, K & ~7u, 1);
#else
        lb = setTensorLayoutDimensionNV(lb, K, N);
        lb = setTensorLayoutStrideNV(lb, N & ~7u, 1);
#endif
        const uint whole = kbeg + (kend - kbeg) / BK * BK;
        // Two slices per step, written out (spirv-opt does not know these
        // types, so no unrolling happens between glslang and the driver).
        for (; k0 + 2 * BK <= whole; k0 += 2 * BK) {
            LOAD(0, la, lb, k0)
            LOAD(1, la, lb, k0 + BK)
            MUL(0)
            MUL(1)
        }
        if (k0 < whole) {
            LOAD(0, la, lb, k0)
            MUL(0)
            k0 += BK;
        }
    }
    // Edge blocks from the start, interior blocks for the last partial
    // slice: clamped loads read zeros past M, N and the end of K.
    for (; k0 < kend; k0 += BK) {
        LOAD(0, la_edge, lb_edge, k0)
        MUL(0)
    }
#ifdef EPI_SILU
    // Same types, same layout: element i of each is the same entry.
    for (int i = 0; i < acc.length(); ++i) {
        const float g = acc[i];
        acc[i] = g / (1.0 + exp(-g)) * up[i];
    }
#endif
    coopMatStoreTensorNV(acc, c, oc, sliceTensorLayoutNV(lc, m0, BM, n0, BN));
}
