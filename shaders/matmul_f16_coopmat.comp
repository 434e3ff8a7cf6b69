#version 450
// C = A·B with f16 A and B and f32 accumulation and result, on cooperative
// matrices (16×16×16 f16 → f32, subgroup scope): NVIDIA's tensor cores.
//
// A workgroup of 8 subgroups computes a 128×128 block of C; subgroup (wm, wn)
// of a 2×4 arrangement owns a 64×32 piece, 4×2 accumulators. K advances in
// 32-deep slices staged in shared memory, double-buffered: the next slice's
// 16-byte chunks are loaded into registers while the current one is
// multiplied, then written to the other buffer, one barrier per slice. Rows
// of the shared tiles are padded by 8 halves so the matrix loads spread
// over all banks. Blocks inside the matrices run without bounds tests; edge
// blocks read zeros outside and write through a per-subgroup f32 scratch.
//
// Needs K and N multiples of 8 (16-byte rows for the chunk loads); M is
// free. Push constants: M, K, N. Grid: (ceil(N/128), ceil(M/128), 1).
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

const uint BM = 128;
const uint BN = 128;
const uint BK = 32;
const uint WM = 64;            // rows per subgroup
const uint WN = 32;            // columns per subgroup
const uint FM = WM / 16;       // accumulators down
const uint FN = WN / 16;       // accumulators across
const uint AST = BK + 8;       // shared A row stride (halves)
const uint BST = BN + 8;       // shared B row stride (halves)
const uint GROUP_M = 8;

shared float16_t As[2 * BM * AST];
shared float16_t Bs[2 * BK * BST];
shared float Cs[8 * 256];

uvec4 ra[2];
uvec4 rb[2];

// Slice `t` into registers: A is BM×BK = 512 chunks of 8 halves, B is BK×BN = 512.
void load_tile(uint t, uint m0, uint n0, bool fast) {
    uint k0 = t * BK;
    uint kc8 = K / 8;
    uint nc8 = N / 8;
    [[unroll]] for (uint j = 0; j < 2; j++) {
        uint q = gl_LocalInvocationID.x + 256 * j;
        uint ar = q / (BK / 8), ak = (q % (BK / 8)) * 8;
        uint br = q / (BN / 8), bn = (q % (BN / 8)) * 8;
        if (fast) {
            ra[j] = a[(m0 + ar) * kc8 + (k0 + ak) / 8];
            rb[j] = b[(k0 + br) * nc8 + (n0 + bn) / 8];
        } else {
            ra[j] = (m0 + ar < M && k0 + ak < K) ? a[(m0 + ar) * kc8 + (k0 + ak) / 8] : uvec4(0);
            rb[j] = (k0 + br < K && n0 + bn < N) ? b[(k0 + br) * nc8 + (n0 + bn) / 8] : uvec4(0);
        }
    }
}

void store_tile(uint buf) {
    [[unroll]] for (uint j = 0; j < 2; j++) {
        uint q = gl_LocalInvocationID.x + 256 * j;
        uint ar = q / (BK / 8), ak = (q % (BK / 8)) * 8;
        uint br = q / (BN / 8), bn = (q % (BN / 8)) * 8;
        uint ai = buf * BM * AST + ar * AST + ak;
        uint bi = buf * BK * BST + br * BST + bn;
        [[unroll]] for (uint h = 0; h < 4; h++) {
            f16vec2 va = unpackFloat2x16(ra[j][h]);
            f16vec2 vb = unpackFloat2x16(rb[j][h]);
            As[ai + 2 * h] = va.x;
            As[ai + 2 * h + 1] = va.y;
            Bs[bi + 2 * h] = vb.x;
            Bs[bi + 2 * h + 1] = vb.y;
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
    uint wm = warp / (BN / WN);
    uint wn = warp % (BN / WN);

    bool full_mn = (m0 + BM <= M) && (n0 + BN <= N);
    uint tiles = (K + BK - 1) / BK;

    fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[FM][FN];
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
            fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fa[FM];
            fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fb[FN];
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
