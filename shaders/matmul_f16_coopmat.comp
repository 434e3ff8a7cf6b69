#version 450
// C = A·B with f16 A and B and f32 accumulation and result, on cooperative
// matrices (16×16×16 f16 → f32, subgroup scope): NVIDIA's tensor cores.
//
// A workgroup of 8 subgroups, arranged (8/WARPS_N)×WARPS_N, computes a
// BM×BN block of C; each subgroup owns a WM×WN piece, (WM/16)×(WN/16)
// accumulators. K advances in BK-deep slices staged in shared memory,
// double-buffered: the next slice's 16-byte chunks are loaded into
// registers while the current one is multiplied, then written to the other
// buffer, one barrier per slice. Rows of the shared tiles are padded by 8
// halves so the matrix loads spread over the banks. Blocks inside the
// matrices run without bounds tests; edge blocks read zeros outside and
// write partial 16×16 pieces through a per-subgroup f32 scratch.
//
// Specialization (defaults: 128×128 blocks, 64×32 per subgroup, BK = 32):
// 0 = WM, 1 = WN (multiples of 16, at most 64), 2 = WARPS_N (1, 2, 4 or 8),
// 3 = BK (a multiple of 16); BM·BK and BK·BN must be multiples of 2048 and
// at most 8192 (at most 4 chunks per thread each).
// Needs K and N multiples of 8 (16-byte rows for the chunk loads); M is
// free. Push constants: M, K, N. Grid: (ceil(N/BN), ceil(M/BM), 1).
//
// Written against GL_NV_cooperative_matrix, which the glslang in use
// compiles (GL_KHR_cooperative_matrix needs glslang 12.3 or later).
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_basic : enable

layout(local_size_x = 256) in;

layout(std430, set = 0, binding = 0) readonly buffer MatA { uvec4 a[]; };
layout(std430, set = 0, binding = 1) readonly buffer MatB { uvec4 b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer MatC { float c[]; };
layout(push_constant) uniform Shape { uint M; uint K; uint N; };

// The built-in tiles are also compiled with their shape fixed (TILE_*
// defined): the loops over fragments then unroll in the SPIR-V itself and
// the arrays of cooperative matrices become separate values. Bounded by
// specialization constants, they stayed arrays indexed in loops, and
// NVIDIA's driver ran every tile at 58 TFLOP/s on the H100 (2026-11-25)
// while a loop of eight compile-time accumulators reached 629.
// variant: matmul_f16_coopmat_w64x32_n4_k32 TILE_WM=64 TILE_WN=32 TILE_WARPS_N=4 TILE_BK=32
// variant: matmul_f16_coopmat_w64x64_n4_k16 TILE_WM=64 TILE_WN=64 TILE_WARPS_N=4 TILE_BK=16
// variant: matmul_f16_coopmat_w64x64_n2_k16 TILE_WM=64 TILE_WN=64 TILE_WARPS_N=2 TILE_BK=16
#ifdef TILE_WM
const uint WM = TILE_WM;
const uint WN = TILE_WN;
const uint WARPS_N = TILE_WARPS_N;
const uint BK = TILE_BK;
#else
layout(constant_id = 0) const uint WM = 64;
layout(constant_id = 1) const uint WN = 32;
layout(constant_id = 2) const uint WARPS_N = 4;
layout(constant_id = 3) const uint BK = 32;
#endif

const uint BM = WM * (8 / WARPS_N);
const uint BN = WN * WARPS_N;
const uint FM = WM / 16;       // accumulators down
const uint FN = WN / 16;       // accumulators across
const uint AST = BK + 8;       // shared A row stride (halves)
const uint BST = BN + 8;       // shared B row stride (halves)
const uint CA = BM * BK / 2048; // 8-half chunks of A per thread per slice
const uint CB = BK * BN / 2048; // 8-half chunks of B per thread per slice
const uint GROUP_M = 8;

shared float16_t As[2 * BM * AST];
shared float16_t Bs[2 * BK * BST];
shared float Cs[8 * 256];

uvec4 ra[4];
uvec4 rb[4];

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

void store_tile(uint buf) {
    [[unroll]] for (uint j = 0; j < CA; j++) {
        uint q = gl_LocalInvocationID.x + 256 * j;
        uint ai = buf * BM * AST + (q / (BK / 8)) * AST + (q % (BK / 8)) * 8;
        [[unroll]] for (uint h = 0; h < 4; h++) {
            f16vec2 v = unpackFloat2x16(ra[j][h]);
            As[ai + 2 * h] = v.x;
            As[ai + 2 * h + 1] = v.y;
        }
    }
    [[unroll]] for (uint j = 0; j < CB; j++) {
        uint q = gl_LocalInvocationID.x + 256 * j;
        uint bi = buf * BK * BST + (q / (BN / 8)) * BST + (q % (BN / 8)) * 8;
        [[unroll]] for (uint h = 0; h < 4; h++) {
            f16vec2 v = unpackFloat2x16(rb[j][h]);
            Bs[bi + 2 * h] = v.x;
            Bs[bi + 2 * h + 1] = v.y;
        }
    }
}

void main() {
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

    fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[4][4];
    [[unroll]] for (uint i = 0; i < FM; i++) {
        [[unroll]] for (uint j = 0; j < FN; j++) {
            acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
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
            fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fa[4];
            fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fb[4];
            [[unroll]] for (uint i = 0; i < FM; i++) {
                coopMatLoadNV(fa[i], As, cur * BM * AST + (wm * WM + i * 16) * AST + kk, AST, false);
            }
            [[unroll]] for (uint j = 0; j < FN; j++) {
                coopMatLoadNV(fb[j], Bs, cur * BK * BST + kk * BST + wn * WN + j * 16, BST, false);
            }
            [[unroll]] for (uint i = 0; i < FM; i++) {
                [[unroll]] for (uint j = 0; j < FN; j++) {
                    acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
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
                coopMatStoreNV(acc[i][j], c, row * N + col, N, false);
            } else {
                coopMatStoreNV(acc[i][j], Cs, warp * 256, 16, false);
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
