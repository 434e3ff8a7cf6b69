#version 450
// C = A·B with f16 A and B and f32 accumulation and result, on
// subgroup-scope cooperative matrices of the Khronos extension
// (VK_KHR_cooperative_matrix, 16×16×16 f16 → f32): what AMD, Intel and
// NVIDIA list alike.
//
// A workgroup of 8 subgroups of 32, arranged (8/WARPS_N)×WARPS_N, computes
// a BM×BN block of C; each subgroup owns a WM×WN piece, (WM/16)×(WN/16)
// accumulators. K advances in BK-deep slices staged in shared memory,
// double-buffered: the next slice is loaded from global memory into
// registers (16-byte loads) while the current one is multiplied, then
// stored to the other buffer with 16-byte stores, one barrier per slice.
// Shared rows are skewed by 16 bytes (8 halves) so that the fragment loads
// of consecutive rows start on different banks; shared memory is declared
// as uvec4, so fragment loads take offsets and strides in 16-byte units.
// Blocks inside the matrices run without bounds tests; edge blocks read
// zeros outside and write partial 16×16 pieces through a per-subgroup f32
// scratch.
//
// Tiles are compiled with their shape fixed (the base output: 128×128
// blocks, 64×32 per subgroup, BK = 32; the variants below) and every loop
// over fragments, accumulators and chunks is written out by the
// preprocessor: glslang emits [[unroll]] loops as loops over arrays, and
// NVIDIA's driver ran such arrays of cooperative matrices at a tenth of the
// rate of separate values (no spirv-opt here knows these types). So WM is
// 64 (four fragments down), WN 32 or 64 (two or four across), BK 16 or 32,
// and BM·BK and BK·BN are 2048 or 4096 (one or two 16-byte chunks per
// thread each).
// Needs K and N multiples of 8 (16-byte rows for the chunk loads) and a
// 32-lane subgroup; M is free. Push constants: M, K, N.
// Grid: (ceil(N/BN), ceil(M/BM), 1). Compiled for Vulkan 1.3 by a glslang
// that knows GL_KHR_cooperative_matrix (scripts/glslang_trixie.sh).
//
// target-env: vulkan1.3
// variant: matmul_f16_khr_w64x64_n4_k16 TILE_WM=64 TILE_WN=64 TILE_WARPS_N=4 TILE_BK=16
// variant: matmul_f16_khr_w64x64_n2_k16 TILE_WM=64 TILE_WN=64 TILE_WARPS_N=2 TILE_BK=16
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_basic : enable

#ifndef TILE_WM
#define TILE_WM 64
#define TILE_WN 32
#define TILE_WARPS_N 4
#define TILE_BK 32
#endif
#define PP_BM (TILE_WM * (8 / TILE_WARPS_N))
#define PP_BN (TILE_WN * TILE_WARPS_N)
#define PP_CA (PP_BM * TILE_BK / 2048)
#define PP_CB (TILE_BK * PP_BN / 2048)
#if TILE_WM != 64 || (TILE_WN != 32 && TILE_WN != 64) || (TILE_BK != 16 && TILE_BK != 32)
#error "tiles: WM = 64, WN = 32 or 64, BK = 16 or 32"
#endif
#if PP_CA < 1 || PP_CA > 2 || PP_CB < 1 || PP_CB > 2 || PP_CA * 2048 != PP_BM * TILE_BK || PP_CB * 2048 != TILE_BK * PP_BN
#error "tiles: BM·BK and BK·BN must be 2048 or 4096"
#endif
const uint WM = TILE_WM;
const uint WN = TILE_WN;
const uint WARPS_N = TILE_WARPS_N;
const uint BK = TILE_BK;

layout(local_size_x = 256) in;

layout(std430, set = 0, binding = 0) readonly buffer MatA { uvec4 a[]; };
layout(std430, set = 0, binding = 1) readonly buffer MatB { uvec4 b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer MatC { float c[]; };
layout(push_constant) uniform Shape { uint M; uint K; uint N; };

const uint BM = PP_BM;
const uint BN = PP_BN;
const uint AST = BK / 8 + 1;        // shared A row stride, 16-byte units (skew 1)
const uint BST = BN / 8 + 1;        // shared B row stride, 16-byte units (skew 1)
const uint GROUP_M = 8;

shared uvec4 As[2 * BM * AST];
shared uvec4 Bs[2 * BK * BST];
shared float Cs[8 * 256];

#define ACC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define FRAG_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FRAG_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define ROW_MAJOR gl_CooperativeMatrixLayoutRowMajor

// Chunk j (16 bytes: 8 halves) of slice t of A, for this thread.
uvec4 load_a(uint j, uint t, uint m0, bool fast) {
    uint q = gl_LocalInvocationID.x + 256 * j;
    uint ar = q / (BK / 8), ak = t * BK + (q % (BK / 8)) * 8;
    uint at = (m0 + ar) * (K / 8) + ak / 8;
    if (fast) {
        return a[at];
    }
    return (m0 + ar < M && ak < K) ? a[at] : uvec4(0);
}

// Chunk j of slice t of B, for this thread.
uvec4 load_b(uint j, uint t, uint n0, bool fast) {
    uint q = gl_LocalInvocationID.x + 256 * j;
    uint br = t * BK + q / (BN / 8), bn = n0 + (q % (BN / 8)) * 8;
    uint at = br * (N / 8) + bn / 8;
    if (fast) {
        return b[at];
    }
    return (br < K && bn < N) ? b[at] : uvec4(0);
}

// Where chunk j of A and of B goes in shared buffer `buf`.
uint a_slot(uint j, uint buf) {
    uint q = gl_LocalInvocationID.x + 256 * j;
    return buf * BM * AST + (q / (BK / 8)) * AST + q % (BK / 8);
}
uint b_slot(uint j, uint buf) {
    uint q = gl_LocalInvocationID.x + 256 * j;
    return buf * BK * BST + (q / (BN / 8)) * BST + q % (BN / 8);
}

// One 16-deep step of the slice in buffer `cur` at depth kk.
#define LOAD_A(i, kk) coopMatLoad(fa##i, As, cur * BM * AST + (wm * WM + i * 16) * AST + (kk) / 8, AST, ROW_MAJOR)
#define LOAD_B(j, kk) coopMatLoad(fb##j, Bs, cur * BK * BST + (kk) * BST + (wn * WN + j * 16) / 8, BST, ROW_MAJOR)
#define MMA(i, j) acc##i##j = coopMatMulAdd(fa##i, fb##j, acc##i##j)
#if TILE_WN == 64
#define STEP(kk) { \
    FRAG_A fa0; FRAG_A fa1; FRAG_A fa2; FRAG_A fa3; \
    FRAG_B fb0; FRAG_B fb1; FRAG_B fb2; FRAG_B fb3; \
    LOAD_A(0, kk); LOAD_A(1, kk); LOAD_A(2, kk); LOAD_A(3, kk); \
    LOAD_B(0, kk); LOAD_B(1, kk); LOAD_B(2, kk); LOAD_B(3, kk); \
    MMA(0, 0); MMA(0, 1); MMA(0, 2); MMA(0, 3); \
    MMA(1, 0); MMA(1, 1); MMA(1, 2); MMA(1, 3); \
    MMA(2, 0); MMA(2, 1); MMA(2, 2); MMA(2, 3); \
    MMA(3, 0); MMA(3, 1); MMA(3, 2); MMA(3, 3); }
#else
#define STEP(kk) { \
    FRAG_A fa0; FRAG_A fa1; FRAG_A fa2; FRAG_A fa3; \
    FRAG_B fb0; FRAG_B fb1; \
    LOAD_A(0, kk); LOAD_A(1, kk); LOAD_A(2, kk); LOAD_A(3, kk); \
    LOAD_B(0, kk); LOAD_B(1, kk); \
    MMA(0, 0); MMA(0, 1); MMA(1, 0); MMA(1, 1); \
    MMA(2, 0); MMA(2, 1); MMA(3, 0); MMA(3, 1); }
#endif

// Accumulator (i, j) of this subgroup into C: whole 16×16 pieces straight
// to C, pieces at the edge through the subgroup's scratch.
void store_piece(ACC m, uint i, uint j, uint m0, uint n0, uint wm, uint wn, uint warp) {
    uint row = m0 + wm * WM + i * 16;
    uint col = n0 + wn * WN + j * 16;
    if (row + 16 <= M && col + 16 <= N) {
        coopMatStore(m, c, row * N + col, N, ROW_MAJOR);
        return;
    }
    coopMatStore(m, Cs, warp * 256, 16, ROW_MAJOR);
    subgroupBarrier();
    for (uint e = gl_SubgroupInvocationID; e < 256; e += gl_SubgroupSize) {
        uint r = row + e / 16, cc = col + e % 16;
        if (r < M && cc < N) {
            c[r * N + cc] = Cs[warp * 256 + e];
        }
    }
    subgroupBarrier();
}

void main() {
    // Blocks visited in groups of GROUP_M rows (the same columns of B
    // stay in cache across a group).
    uint gx = gl_NumWorkGroups.x, gy = gl_NumWorkGroups.y;
    uint pid = gl_WorkGroupID.y * gx + gl_WorkGroupID.x;
    uint width = GROUP_M * gx;
    uint first = (pid / width) * GROUP_M;
    uint rows = min(gy - first, GROUP_M);
    uint m0 = (first + (pid % width) % rows) * BM;
    uint n0 = ((pid % width) / rows) * BN;

    uint warp = gl_SubgroupID;
    uint wm = warp / WARPS_N;
    uint wn = warp % WARPS_N;

    bool full_mn = (m0 + BM <= M) && (n0 + BN <= N);
    uint tiles = (K + BK - 1) / BK;

    ACC acc00 = ACC(0.0); ACC acc01 = ACC(0.0);
    ACC acc10 = ACC(0.0); ACC acc11 = ACC(0.0);
    ACC acc20 = ACC(0.0); ACC acc21 = ACC(0.0);
    ACC acc30 = ACC(0.0); ACC acc31 = ACC(0.0);
#if TILE_WN == 64
    ACC acc02 = ACC(0.0); ACC acc03 = ACC(0.0);
    ACC acc12 = ACC(0.0); ACC acc13 = ACC(0.0);
    ACC acc22 = ACC(0.0); ACC acc23 = ACC(0.0);
    ACC acc32 = ACC(0.0); ACC acc33 = ACC(0.0);
#endif

    // Slice 0 straight into buffer 0.
    bool fast = full_mn && BK <= K;
    uvec4 ra0 = load_a(0, 0, m0, fast);
    uvec4 rb0 = load_b(0, 0, n0, fast);
#if PP_CA > 1
    uvec4 ra1 = load_a(1, 0, m0, fast);
#endif
#if PP_CB > 1
    uvec4 rb1 = load_b(1, 0, n0, fast);
#endif
    As[a_slot(0, 0)] = ra0;
    Bs[b_slot(0, 0)] = rb0;
#if PP_CA > 1
    As[a_slot(1, 0)] = ra1;
#endif
#if PP_CB > 1
    Bs[b_slot(1, 0)] = rb1;
#endif
    barrier();

    for (uint t = 0; t < tiles; t++) {
        uint cur = t & 1u;
        bool more = t + 1 < tiles;
        // The next slice into registers while this one is multiplied.
        if (more) {
            bool f = full_mn && (t + 2) * BK <= K;
            ra0 = load_a(0, t + 1, m0, f);
            rb0 = load_b(0, t + 1, n0, f);
#if PP_CA > 1
            ra1 = load_a(1, t + 1, m0, f);
#endif
#if PP_CB > 1
            rb1 = load_b(1, t + 1, n0, f);
#endif
        }
        STEP(0u)
#if TILE_BK == 32
        STEP(16u)
#endif
        if (more) {
            uint nxt = cur ^ 1u;
            As[a_slot(0, nxt)] = ra0;
            Bs[b_slot(0, nxt)] = rb0;
#if PP_CA > 1
            As[a_slot(1, nxt)] = ra1;
#endif
#if PP_CB > 1
            Bs[b_slot(1, nxt)] = rb1;
#endif
        }
        barrier();
    }

    store_piece(acc00, 0, 0, m0, n0, wm, wn, warp);
    store_piece(acc01, 0, 1, m0, n0, wm, wn, warp);
    store_piece(acc10, 1, 0, m0, n0, wm, wn, warp);
    store_piece(acc11, 1, 1, m0, n0, wm, wn, warp);
    store_piece(acc20, 2, 0, m0, n0, wm, wn, warp);
    store_piece(acc21, 2, 1, m0, n0, wm, wn, warp);
    store_piece(acc30, 3, 0, m0, n0, wm, wn, warp);
    store_piece(acc31, 3, 1, m0, n0, wm, wn, warp);
#if TILE_WN == 64
    store_piece(acc02, 0, 2, m0, n0, wm, wn, warp);
    store_piece(acc03, 0, 3, m0, n0, wm, wn, warp);
    store_piece(acc12, 1, 2, m0, n0, wm, wn, warp);
    store_piece(acc13, 1, 3, m0, n0, wm, wn, warp);
    store_piece(acc22, 2, 2, m0, n0, wm, wn, warp);
    store_piece(acc23, 2, 3, m0, n0, wm, wn, warp);
    store_piece(acc32, 3, 2, m0, n0, wm, wn, warp);
    store_piece(acc33, 3, 3, m0, n0, wm, wn, warp);
#endif
}
