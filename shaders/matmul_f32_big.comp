#version 450
// C = A·B, row-major f32, any M, K, N: the default f32 SGEMM
// (MatmulKernel::Sgemm, SgemmTile), optionally one K slice of a split-K
// product.
//
// Shape (fixed per compiled variant, see the `variant:` lines): 256
// invocations in a 16×16 grid compute a BM×BN block of C, each a TM×TN
// micro-tile made of (TM/4)×(TN/4) 4×4 pieces spread BM/(TM/4) rows and
// BN/(TN/4) columns apart (8×8 in two 4×4 pieces 64 apart for the 128×128
// tile), so every shared-memory fragment read is one conflict-free vec4
// along M (A is stored transposed, k-major, with a row stride of BM + 4
// floats) or along N. Which micro-tile an invocation takes: with
// COMPACT = 0, (tid % 16, tid / 16), so 32 consecutive invocations cover a
// 16×2 strip (16 distinct vec4s of B and 2 of A per k: the arrangement of
// the older kernel's fastest tile on the H100); with COMPACT = 1 an 8×4
// patch (8 of B, 4 of A: 128 bytes of B per subgroup and k).
//
// Pipeline: BK-deep slices of A and B are double-buffered in shared memory;
// while slice t is multiplied, slice t + 1 is already loaded into registers
// (one 16-byte chunk of A and of B per invocation and slice for the
// 128×128×8 and 64×64×16 tiles) and goes to the other buffer afterwards,
// so one barrier per slice suffices. Within a slice the fragments of step
// k + 1 are read before the FMAs of step k.
//
// Loads: VEC4 = 1 (the host's choice only when K and N are multiples of 4)
// moves 16-byte chunks (a row of A or B then starts 16-byte aligned and a
// chunk lies wholly inside or wholly outside the matrix); VEC4 = 0 moves
// the same chunks as four scalars. Blocks wholly inside M and N, and
// slices wholly inside the K range, load without a bounds test; edges
// load zeros outside. C is stored as vec4s (VEC4 = 1) or scalars, with
// tests only in edge blocks. Blocks are visited in groups of GROUP_M
// block rows for L2 reuse of B.
//
// Split-K: workgroup z takes k in [z·KS, min(K, (z + 1)·KS)) (KS a multiple
// of BK, hence of 4) and writes its partial product to
// c[(z·M + row)·N + col]; the host sums the slices in a second pass. With
// one slice (KS ≥ K) z = 0 and this is C itself.
//
// Push constants: M, K, N, KS. Grid: (ceil(N/BN), ceil(M/BM), slices).
// Bindings: A (M·K), B (K·N), C (slices·M·N), as vec4s with VEC4 = 1.
#extension GL_EXT_control_flow_attributes : enable

// variant: matmul_f32_big_128x128x8_scalar BM=128 BN=128 BK=8 TM=8 TN=8 VEC4=0
// variant: matmul_f32_big_128x128x8_compact BM=128 BN=128 BK=8 TM=8 TN=8 VEC4=1 COMPACT=1
// variant: matmul_f32_big_128x128x8_compact_scalar BM=128 BN=128 BK=8 TM=8 TN=8 VEC4=0 COMPACT=1
// variant: matmul_f32_big_128x128x16 BM=128 BN=128 BK=16 TM=8 TN=8 VEC4=1
// variant: matmul_f32_big_128x128x16_scalar BM=128 BN=128 BK=16 TM=8 TN=8 VEC4=0
// variant: matmul_f32_big_64x64x16 BM=64 BN=64 BK=16 TM=4 TN=4 VEC4=1
// variant: matmul_f32_big_64x64x16_scalar BM=64 BN=64 BK=16 TM=4 TN=4 VEC4=0
#ifndef BM
// The plain output `matmul_f32_big` (no definitions): the 128×128×8 tile
// with 16-byte loads.
#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8
#define VEC4 1
#endif
#ifndef COMPACT
#define COMPACT 0
#endif

#if (BM / TM) != 16 || (BN / TN) != 16
#error "the thread grid must be 16x16 (256 invocations)"
#endif
#if (TM % 4) != 0 || (TN % 4) != 0
#error "micro-tiles are made of 4x4 pieces"
#endif
#if ((BM * BK) % 1024) != 0 || ((BK * BN) % 1024) != 0
#error "each invocation moves whole 16-byte chunks of A and of B"
#endif

layout(local_size_x = 256) in;

#if VEC4
layout(std430, set = 0, binding = 0) readonly buffer MatA { vec4 a[]; };
layout(std430, set = 0, binding = 1) readonly buffer MatB { vec4 b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer MatC { vec4 c[]; };
#else
layout(std430, set = 0, binding = 0) readonly buffer MatA { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer MatB { float b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer MatC { float c[]; };
#endif
layout(push_constant) uniform Shape { uint M; uint K; uint N; uint KS; };

const uint THREADS = 256;
const uint SM = TM / 4;                    // 4-row pieces per invocation
const uint SN = TN / 4;                    // 4-column pieces per invocation
const uint AS = BM + 4;                    // row stride of the transposed A slice
const uint CA = (BM * BK) / (4 * THREADS); // A chunks each invocation moves per slice
const uint CB = (BK * BN) / (4 * THREADS); // B chunks each invocation moves per slice
const uint KC = BK / 4;                    // chunks per row of an A slice
const uint NC = BN / 4;                    // chunks per row of a B slice
const uint GROUP_M = 8;

shared vec4 As[2 * BK * AS / 4];
shared vec4 Bs[2 * BK * BN / 4];

vec4 ra[CA];
vec4 rb[CB];
vec4 acc[TM][SN]; // this invocation's micro-tile of C

// Chunk e of this invocation: row `r` of A (from m0) and its first k
// `kq` (from k0); row `kr` of B (from k0) and its first column `nq` (from n0).
uint a_row(uint tid, uint e) { return (tid + e * THREADS) / KC; }
uint a_k(uint tid, uint e) { return ((tid + e * THREADS) % KC) * 4; }
uint b_row(uint tid, uint e) { return (tid + e * THREADS) / NC; }
uint b_col(uint tid, uint e) { return ((tid + e * THREADS) % NC) * 4; }

#if !VEC4
// Element `i` = (row, k) of A, or 0 outside M × [.., kend).
float a_at(uint row, uint k, uint kend, uint i) { return (row < M && k < kend) ? a[i] : 0.0; }
// Element `i` = (k, col) of B, or 0 outside [.., kend) × N.
float b_at(uint k, uint col, uint kend, uint i) { return (k < kend && col < N) ? b[i] : 0.0; }
#endif

// Loads the slice that starts at k0 into registers. `in_m` / `in_n`: the
// block lies inside M / N; `kend`: the end of this workgroup's K range.
void load_tile(uint k0, uint kend, uint m0, uint n0, bool in_m, bool in_n, uint tid) {
    bool in_k = k0 + BK <= kend;
    [[unroll]] for (uint e = 0; e < CA; e++) {
        uint row = m0 + a_row(tid, e);
        uint k = k0 + a_k(tid, e);
#if VEC4
        // K % 4 == 0 and kend % 4 == 0: k < kend ⇒ k + 3 < kend.
        if (in_m && in_k) {
            ra[e] = a[row * (K / 4) + k / 4];
        } else {
            ra[e] = (row < M && k < kend) ? a[row * (K / 4) + k / 4] : vec4(0.0);
        }
#else
        uint base = row * K + k;
        if (in_m && in_k) {
            ra[e] = vec4(a[base], a[base + 1], a[base + 2], a[base + 3]);
        } else {
            ra[e] = vec4(a_at(row, k, kend, base), a_at(row, k + 1, kend, base + 1),
                         a_at(row, k + 2, kend, base + 2), a_at(row, k + 3, kend, base + 3));
        }
#endif
    }
    [[unroll]] for (uint e = 0; e < CB; e++) {
        uint kb = k0 + b_row(tid, e);
        uint col = n0 + b_col(tid, e);
#if VEC4
        // N % 4 == 0: col < N ⇒ col + 3 < N.
        if (in_n && in_k) {
            rb[e] = b[kb * (N / 4) + col / 4];
        } else {
            rb[e] = (kb < kend && col < N) ? b[kb * (N / 4) + col / 4] : vec4(0.0);
        }
#else
        uint base = kb * N + col;
        if (in_n && in_k) {
            rb[e] = vec4(b[base], b[base + 1], b[base + 2], b[base + 3]);
        } else {
            rb[e] = vec4(b_at(kb, col, kend, base), b_at(kb, col + 1, kend, base + 1),
                         b_at(kb, col + 2, kend, base + 2), b_at(kb, col + 3, kend, base + 3));
        }
#endif
    }
}

// Moves the registers into shared buffer `buf`: A transposed (four scalar
// stores per chunk), B as one vec4 per chunk.
void store_tile(uint buf, uint tid) {
    [[unroll]] for (uint e = 0; e < CA; e++) {
        uint r = a_row(tid, e);
        uint kk = a_k(tid, e);
        [[unroll]] for (uint q = 0; q < 4; q++) {
            uint i = buf * BK * AS + (kk + q) * AS + r;
            As[i >> 2][i & 3u] = ra[e][q];
        }
    }
    [[unroll]] for (uint e = 0; e < CB; e++) {
        Bs[buf * BK * NC + tid + e * THREADS] = rb[e];
    }
}

// The fragments of step k of the current slices (A at abase, B at bbase,
// each already offset by this invocation's ty or tx).
void frags(uint abase, uint bbase, uint k, out vec4 fa[SM], out vec4 fb[SN]) {
    [[unroll]] for (uint s = 0; s < SM; s++) {
        fa[s] = As[abase + (k * AS + s * (BM / SM)) / 4];
    }
    [[unroll]] for (uint s = 0; s < SN; s++) {
        fb[s] = Bs[bbase + (k * BN + s * (BN / SN)) / 4];
    }
}

// acc += the outer product of one step's fragments.
void fma_step(vec4 fa[SM], vec4 fb[SN]) {
    [[unroll]] for (uint s = 0; s < SM; s++) {
        [[unroll]] for (uint i = 0; i < 4; i++) {
            [[unroll]] for (uint j = 0; j < SN; j++) {
                acc[s * 4 + i][j] = fma(vec4(fa[s][i]), fb[j], acc[s * 4 + i][j]);
            }
        }
    }
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    // Grouped block order: GROUP_M block rows share B columns in L2.
    uint gx = gl_NumWorkGroups.x, gy = gl_NumWorkGroups.y;
    uint pid = gl_WorkGroupID.y * gx + gl_WorkGroupID.x;
    uint width = GROUP_M * gx;
    uint first = (pid / width) * GROUP_M;
    uint rows = min(gy - first, GROUP_M);
    uint m0 = (first + (pid % width) % rows) * BM;
    uint n0 = ((pid % width) / rows) * BN;

    // This workgroup's K range.
    uint z = gl_WorkGroupID.z;
    uint kbeg = z * KS;
    uint kend = min(K, kbeg + KS);
    uint tiles = (kend - kbeg + BK - 1) / BK;

    // The micro-tile (tx, ty) of the 16×16 grid.
#if COMPACT
    // Lane l of subgroup w takes (l % 8, l / 8) of its 8×4 patch; the
    // patches tile the grid row-major.
    uint w = tid / 32, l = tid % 32;
    uint tx = (w % 2) * 8 + l % 8;
    uint ty = (w / 2) * 4 + l / 8;
#else
    uint tx = tid % 16;
    uint ty = tid / 16;
#endif

    bool in_m = m0 + BM <= M;
    bool in_n = n0 + BN <= N;

    [[unroll]] for (uint i = 0; i < TM; i++) {
        [[unroll]] for (uint j = 0; j < SN; j++) {
            acc[i][j] = vec4(0.0);
        }
    }

    load_tile(kbeg, kend, m0, n0, in_m, in_n, tid);
    store_tile(0u, tid);
    barrier();

    for (uint t = 0; t < tiles; t++) {
        uint cur = t & 1u;
        bool more = t + 1 < tiles;
        if (more) {
            load_tile(kbeg + (t + 1) * BK, kend, m0, n0, in_m, in_n, tid);
        }
        uint abase = cur * (BK * AS / 4) + ty;
        uint bbase = cur * (BK * BN / 4) + tx;
        // Two sets of fragments: those of step k + 1 are read before the
        // FMAs of step k. The last pair is peeled, so every read is of a
        // step that exists and the loop has no branch (one would keep
        // shaderc from unrolling it).
        vec4 fa0[SM], fb0[SN], fa1[SM], fb1[SN];
        frags(abase, bbase, 0u, fa0, fb0);
        [[unroll]] for (uint k = 0; k < BK - 2; k += 2) {
            frags(abase, bbase, k + 1, fa1, fb1);
            fma_step(fa0, fb0);
            frags(abase, bbase, k + 2, fa0, fb0);
            fma_step(fa1, fb1);
        }
        frags(abase, bbase, BK - 1, fa1, fb1);
        fma_step(fa0, fb0);
        fma_step(fa1, fb1);
        if (more) {
            store_tile(cur ^ 1u, tid);
        }
        barrier();
    }

    uint zrow = z * M; // first row of this slice's partial product
    [[unroll]] for (uint s = 0; s < SM; s++) {
        [[unroll]] for (uint i = 0; i < 4; i++) {
            uint row = m0 + s * (BM / SM) + ty * 4 + i;
            [[unroll]] for (uint j = 0; j < SN; j++) {
                uint col = n0 + j * (BN / SN) + tx * 4;
                vec4 v = acc[s * 4 + i][j];
#if VEC4
                if ((in_m && in_n) || (row < M && col < N)) {
                    c[(zrow + row) * (N / 4) + col / 4] = v;
                }
#else
                uint ci = (zrow + row) * N + col;
                if (in_m && in_n) {
                    c[ci] = v.x;
                    c[ci + 1] = v.y;
                    c[ci + 2] = v.z;
                    c[ci + 3] = v.w;
                } else if (row < M) {
                    if (col < N) c[ci] = v.x;
                    if (col + 1 < N) c[ci + 1] = v.y;
                    if (col + 2 < N) c[ci + 2] = v.z;
                    if (col + 3 < N) c[ci + 3] = v.w;
                }
#endif
            }
        }
    }
}
