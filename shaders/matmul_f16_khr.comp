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
// blocks, 64×32 per subgroup, BK = 32; the variants below), so every loop
// over fragments unrolls in the SPIR-V. BM·BK and BK·BN must be multiples
// of 2048 and at most 8192 (at most 4 chunks per thread each).
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
const uint WM = TILE_WM;
const uint WN = TILE_WN;
const uint WARPS_N = TILE_WARPS_N;
const uint BK = TILE_BK;

layout(local_size_x = 256) in;

layout(std430, set = 0, binding = 0) readonly buffer MatA { uvec4 a[]; };
layout(std430, set = 0, binding = 1) readonly buffer MatB { uvec4 b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer MatC { float c[]; };
layout(push_constant) uniform Shape { uint M; uint K; uint N; };

const uint BM = WM * (8 / WARPS_N);
const uint BN = WN * WARPS_N;
const uint FM = WM / 16;            // accumulators down
const uint FN = WN / 16;            // accumulators across
const uint AST = BK / 8 + 1;        // shared A row stride, 16-byte units (skew 1)
const uint BST = BN / 8 + 1;        // shared B row stride, 16-byte units (skew 1)
const uint CA = BM * BK / 2048;     // 16-byte chunks of A per thread per slice
const uint CB = BK * BN / 2048;     // 16-byte chunks of B per thread per slice
const uint GROUP_M = 8;

shared uvec4 As[2 * BM * AST];
shared uvec4 Bs[2 * BK * BST];
shared float Cs[8 * 256];

uvec4 ra[CA];
uvec4 rb[CB];

// Slice `t` into registers: CA chunks of 8 halves of A and CB of B per thread.
void load_tile(uint t, uint m0, uint n0, bool fast) {
    uint k0 = t * BK;
    uint kc8 = K / 8;
    uint nc8 = N / 8;
    [[unroll]] for (uint j = 0; j < CA; j++) {
        uint q = gl_LocalInvocationID.x + 256 * j;
        uint ar = q / (BK / 8), ak = (q % (BK / 8)) * 8;
        if (fast) {
            ra[j] = a[(m0 + ar) * kc8 + (k0 + ak) / 8];
        } else {
            ra[j] = (m0 + ar < M && k0 + ak < K) ? a[(m0 + ar) * kc8 + (k0 + ak) / 8] : uvec4(0);
        }
    }
    [[unroll]] for (uint j = 0; j < CB; j++) {
        uint q = gl_LocalInvocationID.x + 256 * j;
        uint br = q / (BN / 8), bn = (q % (BN / 8)) * 8;
        if (fast) {
            rb[j] = b[(k0 + br) * nc8 + (n0 + bn) / 8];
        } else {
            rb[j] = (k0 + br < K && n0 + bn < N) ? b[(k0 + br) * nc8 + (n0 + bn) / 8] : uvec4(0);
        }
    }
}

// The registers into shared buffer `buf`, one 16-byte store per chunk.
void store_tile(uint buf) {
    [[unroll]] for (uint j = 0; j < CA; j++) {
        uint q = gl_LocalInvocationID.x + 256 * j;
        As[buf * BM * AST + (q / (BK / 8)) * AST + q % (BK / 8)] = ra[j];
    }
    [[unroll]] for (uint j = 0; j < CB; j++) {
        uint q = gl_LocalInvocationID.x + 256 * j;
        Bs[buf * BK * BST + (q / (BN / 8)) * BST + q % (BN / 8)] = rb[j];
    }
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

    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc[FM][FN];
    [[unroll]] for (uint i = 0; i < FM; i++) {
        [[unroll]] for (uint j = 0; j < FN; j++) {
            acc[i][j] = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
        }
    }

    load_tile(0u, m0, n0, full_mn && BK <= K);
    store_tile(0u);
    barrier();

    for (uint t = 0; t < tiles; t++) {
        uint cur = t & 1u;
        bool more = t + 1 < tiles;
        if (more) {
            load_tile(t + 1, m0, n0, full_mn && (t + 2) * BK <= K);
        }
        [[unroll]] for (uint kk = 0; kk < BK; kk += 16) {
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> fa[FM];
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> fb[FN];
            [[unroll]] for (uint i = 0; i < FM; i++) {
                coopMatLoad(fa[i], As, cur * BM * AST + (wm * WM + i * 16) * AST + kk / 8, AST,
                            gl_CooperativeMatrixLayoutRowMajor);
            }
            [[unroll]] for (uint j = 0; j < FN; j++) {
                coopMatLoad(fb[j], Bs, cur * BK * BST + kk * BST + (wn * WN + j * 16) / 8, BST,
                            gl_CooperativeMatrixLayoutRowMajor);
            }
            [[unroll]] for (uint i = 0; i < FM; i++) {
                [[unroll]] for (uint j = 0; j < FN; j++) {
                    acc[i][j] = coopMatMulAdd(fa[i], fb[j], acc[i][j]);
                }
            }
        }
        if (more) {
            store_tile(cur ^ 1u);
        }
        barrier();
    }

    uint lane = gl_SubgroupInvocationID;
    [[unroll]] for (uint i = 0; i < FM; i++) {
        [[unroll]] for (uint j = 0; j < FN; j++) {
            uint row = m0 + wm * WM + i * 16;
            uint col = n0 + wn * WN + j * 16;
            if (row + 16 <= M && col + 16 <= N) {
                coopMatStore(acc[i][j], c, row * N + col, N, gl_CooperativeMatrixLayoutRowMajor);
            } else {
                coopMatStore(acc[i][j], Cs, warp * 256, 16, gl_CooperativeMatrixLayoutRowMajor);
                subgroupBarrier();
                for (uint e = lane; e < 256; e += gl_SubgroupSize) {
                    uint r = row + e / 16, cc = col + e % 16;
                    if (r < M && cc < N) {
                        c[r * N + cc] = Cs[warp * 256 + e];
                    }
                }
                subgroupBarrier();
            }
        }
    }
}
