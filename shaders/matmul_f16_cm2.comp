#version 450
// C = A·B with f16 A and B and f32 accumulation and result, on
// workgroup-scope cooperative matrices (VK_NV_cooperative_matrix2): the
// whole workgroup (THREADS invocations: 128 for the base 128×128 tile and
// the 64×64 one, 256 for the others) owns one BM×BN accumulator, and A's
// BM×BK and B's BK×BN slices are loaded straight from global memory with
// tensor layouts (coopMatLoadTensorNV); the driver stages them.
//
// A is M×K and B is K×N, both row-major, C is M×N row-major: A's layout is
// (M, K), B's (K, N), read as stored (B's rows are K, so the K×N slice
// needs no transposed view), C's (M, N). With B_NK, B is stored N×K
// row-major (nn.Linear's [out, in] weight): its layout is (N, K) with row
// stride K, and each N×K slice is read through a transposed tensor view
// as the BK×BN operand.
//
// Blocks wholly inside C with K and N multiples of 8 (with B_NK: K alone;
// 16-byte rows, so every slice starts aligned) run the whole BK-deep
// slices through unclamped layouts, two slices per loop step (four with
// UNROLL4, each step's matrices declared separately); the last partial
// slice of K and every edge block read through clamped layouts (zeros
// outside the matrix) and store through a clamped layout (nothing written
// outside). Any M, N, K ≥ 1 works.
//
// Push constants: M, K, N. Grid: (ceil(N/BN), ceil(M/BM), 1). With
// BATCHED, `count` products in one launch: push constants M, K, N and the
// element strides between consecutive A, B and C matrices; grid z = count.
//
// With EPI_RESIDUAL, C = A·B + R: R's tile (binding 3, f32, laid out as C
// at C's offsets) is added to the accumulator before the store (R may be
// C's buffer: each workgroup reads its own tile before it writes it).
//
// Specialization constant 0, GROUP_M: with 2 or more, the blocks are taken
// in groups of GROUP_M block rows, column by column within a group (the
// grid's linear order remapped), so the blocks running at one time share
// fewer A rows and B columns and more of them stay in L2. 0 or 1: the
// grid's own order.
// Compiled for Vulkan 1.3 (SPIR-V 1.6) by a glslang that knows
// GL_NV_cooperative_matrix2 (scripts/glslang_trixie.sh on Debian 12).
//
// target-env: vulkan1.3
// variant: matmul_f16_cm2_128x256x64 TILE_BM=128 TILE_BN=256 TILE_BK=64
// variant: matmul_f16_cm2_256x128x64 TILE_BM=256 TILE_BN=128 TILE_BK=64
// variant: matmul_f16_cm2_128x128x32 TILE_BM=128 TILE_BN=128 TILE_BK=32
// variant: matmul_f16_cm2_64x128x64 TILE_BM=64 TILE_BN=128 TILE_BK=64
// variant: matmul_f16_cm2_128x256x64_u4 TILE_BM=128 TILE_BN=256 TILE_BK=64 UNROLL4=1
// variant: matmul_f16_cm2_batched BATCHED=1
// variant: matmul_f16_cm2_64x128x64_batched TILE_BM=64 TILE_BN=128 TILE_BK=64 BATCHED=1
// variant: matmul_f16_cm2_128x256x64_batched TILE_BM=128 TILE_BN=256 TILE_BK=64 BATCHED=1
// variant: matmul_f16_cm2_batched_bt BATCHED=1 B_NK=1
// variant: matmul_f16_cm2_64x128x64_batched_bt TILE_BM=64 TILE_BN=128 TILE_BK=64 BATCHED=1 B_NK=1
// variant: matmul_f16_cm2_128x256x64_batched_bt TILE_BM=128 TILE_BN=256 TILE_BK=64 BATCHED=1 B_NK=1
// variant: matmul_f16_cm2_128x256x64_batched_bt_u4 TILE_BM=128 TILE_BN=256 TILE_BK=64 BATCHED=1 B_NK=1 UNROLL4=1
// variant: matmul_f16_cm2_batched_bt_res BATCHED=1 B_NK=1 EPI_RESIDUAL=1
// variant: matmul_f16_cm2_64x64x64_batched_bt TILE_BM=64 TILE_BN=64 TILE_BK=64 BATCHED=1 B_NK=1 THREADS=128
// variant: matmul_f16_cm2_64x64x64_batched_bt_res TILE_BM=64 TILE_BN=64 TILE_BK=64 BATCHED=1 B_NK=1 THREADS=128 EPI_RESIDUAL=1
// variant: matmul_f16_cm2_64x128x64_batched_bt_res TILE_BM=64 TILE_BN=128 TILE_BK=64 BATCHED=1 B_NK=1 EPI_RESIDUAL=1
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : enable

#ifndef TILE_BM
// The base output: 128×128 blocks, 64-deep slices, 128 invocations (each
// holds 128 of the accumulator's floats, as on a 128×256 block of 256).
// Measured on an H200 at 4096³ / 8192³: 287 / 310 TFLOP/s, against 226 /
// 240 for 128×256 blocks of 256 invocations, 189 / 199 for 512, 163 / 170
// for 256×128 blocks of 512, 40 for 128×128 blocks of 64, and 236 / 266
// with four slices per step (examples/cm2_probe, docs/runs). Smaller
// workgroups let more of them share a compute unit, which is the likely
// reason; the driver's pipeline statistics can say.
#define TILE_BM 128
#define TILE_BN 128
#define TILE_BK 64
#ifndef THREADS
#define THREADS 128
#endif
#endif
#ifndef THREADS
#define THREADS 256
#endif
const uint BM = TILE_BM;
const uint BN = TILE_BN;
const uint BK = TILE_BK;

layout(local_size_x = THREADS, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer MatA { float16_t a[]; };
layout(std430, set = 0, binding = 1) readonly buffer MatB { float16_t b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer MatC { float c[]; };
#ifdef EPI_RESIDUAL
layout(std430, set = 0, binding = 3) readonly buffer MatR { float r[]; };
#endif
#ifdef BATCHED
layout(push_constant) uniform Shape {
    uint M; uint K; uint N; uint strideA; uint strideB; uint strideC;
};
#else
layout(push_constant) uniform Shape { uint M; uint K; uint N; };
const uint strideA = 0;
const uint strideB = 0;
const uint strideC = 0;
#endif
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
// B's layout is (N, K): a slice at (column n, depth k) of B, read through
// the transposed view as the BK×BN operand.
#define B_DIMS N, K
#define B_SLICE(l, k, n) sliceTensorLayoutNV(l, n, BN, k, BK), bt
#define B_ROWS_ALIGNED true
#else
#define B_DIMS K, N
#define B_SLICE(l, k, n) sliceTensorLayoutNV(l, k, BK, n, BN)
#define B_ROWS_ALIGNED (N % 8 == 0)
#endif

void main() {
    const uvec2 blk = block_of_workgroup();
    const uint m0 = blk.y * BM;
    const uint n0 = blk.x * BN;
    const uint oa = gl_WorkGroupID.z * strideA;
    const uint ob = gl_WorkGroupID.z * strideB;
    const uint oc = gl_WorkGroupID.z * strideC;

    tensorLayoutNV<2, CLAMP> la_edge = createTensorLayoutNV(2, CLAMP);
    tensorLayoutNV<2, CLAMP> lb_edge = createTensorLayoutNV(2, CLAMP);
    tensorLayoutNV<2, CLAMP> lc = createTensorLayoutNV(2, CLAMP);
    la_edge = setTensorLayoutDimensionNV(la_edge, M, K);
    lb_edge = setTensorLayoutDimensionNV(lb_edge, B_DIMS);
    lc = setTensorLayoutDimensionNV(lc, M, N);
#ifdef B_NK
    tensorViewNV<2, false, 1, 0> bt = createTensorViewNV(2, false, 1, 0);
#endif

    ACC acc = ACC(0.0);
    uint k0 = 0;
    const bool interior = m0 + BM <= M && n0 + BN <= N && K % 8 == 0 && B_ROWS_ALIGNED
        && oa % 8 == 0 && ob % 8 == 0;
    if (interior) {
        // Row strides that are visibly multiples of 8 halves (16 bytes):
        // the loads may then move whole 16-byte pieces.
        tensorLayoutNV<2> la = createTensorLayoutNV(2);
        tensorLayoutNV<2> lb = createTensorLayoutNV(2);
        la = setTensorLayoutDimensionNV(la, M, K);
        lb = setTensorLayoutDimensionNV(lb, B_DIMS);
        la = setTensorLayoutStrideNV(la, K & ~7u, 1);
#ifdef B_NK
        lb = setTensorLayoutStrideNV(lb, K & ~7u, 1);
#else
        lb = setTensorLayoutStrideNV(lb, N & ~7u, 1);
#endif
        const uint whole = K - K % BK;
#ifdef UNROLL4
        // Four slices per step, written out (spirv-opt does not know these
        // types, so no unrolling happens between glslang and the driver).
        for (; k0 + 4 * BK <= whole; k0 += 4 * BK) {
            MAT_A ma0;
            MAT_B mb0;
            MAT_A ma1;
            MAT_B mb1;
            MAT_A ma2;
            MAT_B mb2;
            MAT_A ma3;
            MAT_B mb3;
            coopMatLoadTensorNV(ma0, a, oa, sliceTensorLayoutNV(la, m0, BM, k0, BK));
            coopMatLoadTensorNV(mb0, b, ob, B_SLICE(lb, k0, n0));
            coopMatLoadTensorNV(ma1, a, oa, sliceTensorLayoutNV(la, m0, BM, k0 + BK, BK));
            coopMatLoadTensorNV(mb1, b, ob, B_SLICE(lb, k0 + BK, n0));
            coopMatLoadTensorNV(ma2, a, oa, sliceTensorLayoutNV(la, m0, BM, k0 + 2 * BK, BK));
            coopMatLoadTensorNV(mb2, b, ob, B_SLICE(lb, k0 + 2 * BK, n0));
            coopMatLoadTensorNV(ma3, a, oa, sliceTensorLayoutNV(la, m0, BM, k0 + 3 * BK, BK));
            coopMatLoadTensorNV(mb3, b, ob, B_SLICE(lb, k0 + 3 * BK, n0));
            acc = coopMatMulAdd(ma0, mb0, acc);
            acc = coopMatMulAdd(ma1, mb1, acc);
            acc = coopMatMulAdd(ma2, mb2, acc);
            acc = coopMatMulAdd(ma3, mb3, acc);
        }
        // Up to three whole slices left, one per step.
        for (; k0 < whole; k0 += BK) {
            MAT_A ma;
            MAT_B mb;
            coopMatLoadTensorNV(ma, a, oa, sliceTensorLayoutNV(la, m0, BM, k0, BK));
            coopMatLoadTensorNV(mb, b, ob, B_SLICE(lb, k0, n0));
            acc = coopMatMulAdd(ma, mb, acc);
        }
#else
        // Two slices per step, written out (spirv-opt does not know these
        // types, so no unrolling happens between glslang and the driver).
        for (; k0 + 2 * BK <= whole; k0 += 2 * BK) {
            MAT_A ma0;
            MAT_B mb0;
            MAT_A ma1;
            MAT_B mb1;
            coopMatLoadTensorNV(ma0, a, oa, sliceTensorLayoutNV(la, m0, BM, k0, BK));
            coopMatLoadTensorNV(mb0, b, ob, B_SLICE(lb, k0, n0));
            coopMatLoadTensorNV(ma1, a, oa, sliceTensorLayoutNV(la, m0, BM, k0 + BK, BK));
            coopMatLoadTensorNV(mb1, b, ob, B_SLICE(lb, k0 + BK, n0));
            acc = coopMatMulAdd(ma0, mb0, acc);
            acc = coopMatMulAdd(ma1, mb1, acc);
        }
        if (k0 < whole) {
            MAT_A ma;
            MAT_B mb;
            coopMatLoadTensorNV(ma, a, oa, sliceTensorLayoutNV(la, m0, BM, k0, BK));
            coopMatLoadTensorNV(mb, b, ob, B_SLICE(lb, k0, n0));
            acc = coopMatMulAdd(ma, mb, acc);
            k0 += BK;
        }
#endif
    }
    // Edge blocks from the start, interior blocks for K's last partial
    // slice: clamped loads read zeros past M, N and K.
    for (; k0 < K; k0 += BK) {
        MAT_A ma;
        MAT_B mb;
        coopMatLoadTensorNV(ma, a, oa, sliceTensorLayoutNV(la_edge, m0, BM, k0, BK));
        coopMatLoadTensorNV(mb, b, ob, B_SLICE(lb_edge, k0, n0));
        acc = coopMatMulAdd(ma, mb, acc);
    }
#ifdef EPI_RESIDUAL
    // The residual's tile, added after the last slice (an accumulator
    // loaded before the loop ran the 64×128 build 1.5 times slower on an
    // H200: docs/runs/2026-11-27r-h200-r4). Same type, same layout:
    // element i of each is the same entry.
    {
        ACC res;
        coopMatLoadTensorNV(res, r, oc, sliceTensorLayoutNV(lc, m0, BM, n0, BN));
        for (int i = 0; i < acc.length(); ++i) {
            acc[i] += res[i];
        }
    }
#endif
    coopMatStoreTensorNV(acc, c, oc, sliceTensorLayoutNV(lc, m0, BM, n0, BN));
}
