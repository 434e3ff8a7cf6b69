#version 450
// C = A·B, row-major f32, K and N multiples of 4 (any M): matmul_f32.comp
// with 16-byte global loads and stores. The host runs it only when K % 4 ==
// 0 and N % 4 == 0 (TileConfig::vec4_applies); then every row of A, B and C
// starts 16-byte aligned, and every vec4 the kernel touches lies wholly
// inside or wholly outside its matrix, so the edge tests stay exact at vec4
// granularity and no index passes the bindings' M·K/4, K·N/4, M·N/4 vec4s.
//
// Same tiling as matmul_f32.comp (see there): a BM×BN block per workgroup
// from BK-deep slices double-buffered in shared memory (A transposed with
// a row stride of BM+4 floats), TM×TN per thread in 4×4 pieces, grouped
// block order. Differences: the slices move as 16-byte chunks, chunk c =
// tid + e·THREADS of a slice (consecutive threads take consecutive chunks:
// coalesced loads, conflict-free vec4 stores of B into shared memory), and
// C is written one vec4 at a time. With COMPACT set (and BN/TN a multiple
// of 8, BM/TM of 4), each 32 consecutive threads compute a 4×8 arrangement
// of micro-tiles instead of a 2×16 one (TileConfig::compact_warps): 8
// distinct vec4s of B per subgroup and k, not 16 (one 128-byte shared
// read, not two), and 128 contiguous bytes per row of C stored. With
// FRAG2 = 1 each thread reads the shared-memory fragments of step k + 1
// before the FMAs of step k (TileConfig::frag_prefetch).
//
// Specialization: constant 0 = local_size_x = (BM/TM)·(BN/TN); 1..5 = BM,
// BN, BK, TM, TN; 6 = COMPACT (0 or 1); 7 = FRAG2 (0 or 1). Needs TileConfig::is_valid with
// vec4: TM, TN multiples of 4, (BM·BK) and (BK·BN) multiples of
// 4·threads. Push constants: M, K, N.
// Grid: (ceil(N/BN), ceil(M/BM), 1).
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x = 256, local_size_x_id = 0) in;
layout(constant_id = 1) const uint BM = 128;
layout(constant_id = 2) const uint BN = 128;
layout(constant_id = 3) const uint BK = 8;
layout(constant_id = 4) const uint TM = 8;
layout(constant_id = 5) const uint TN = 8;
layout(constant_id = 6) const uint COMPACT = 0;
layout(constant_id = 7) const uint FRAG2 = 0;

layout(std430, set = 0, binding = 0) readonly buffer MatA { vec4 a[]; };
layout(std430, set = 0, binding = 1) readonly buffer MatB { vec4 b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer MatC { vec4 c[]; };
layout(push_constant) uniform Shape { uint M; uint K; uint N; };

const uint THREADS = (BM / TM) * (BN / TN);
const uint SM = TM / 4;                    // 4-row pieces per thread
const uint SN = TN / 4;                    // 4-column pieces per thread
const uint AS = BM + 4;                    // row stride of the transposed A slice
const uint CA = (BM * BK) / (4 * THREADS); // A chunks each thread moves per slice
const uint CB = (BK * BN) / (4 * THREADS); // B chunks each thread moves per slice
const uint KC = BK / 4;                    // chunks per row of an A slice
const uint NC = BN / 4;                    // chunks per row of a B slice
const uint GROUP_M = 8;

shared vec4 As[2 * BK * AS / 4];
shared vec4 Bs[2 * BK * BN / 4];

vec4 ra[CA];
vec4 rb[CB];

// Loads slice `t` (k from t·BK) into registers; `fast` skips every bounds test.
void load_tile(uint t, uint m0, uint n0, bool fast, uint tid) {
    uint k0 = t * BK;
    uint k4 = K / 4, n4 = N / 4;
    if (fast && k0 + BK <= K) {
        [[unroll]] for (uint e = 0; e < CA; e++) {
            uint ch = tid + e * THREADS;
            ra[e] = a[(m0 + ch / KC) * k4 + k0 / 4 + ch % KC];
        }
        [[unroll]] for (uint e = 0; e < CB; e++) {
            uint ch = tid + e * THREADS;
            rb[e] = b[(k0 + ch / NC) * n4 + n0 / 4 + ch % NC];
        }
    } else {
        [[unroll]] for (uint e = 0; e < CA; e++) {
            uint ch = tid + e * THREADS;
            uint row = m0 + ch / KC;
            uint k = k0 + (ch % KC) * 4; // K % 4 == 0: k < K ⇒ k + 3 < K
            ra[e] = (row < M && k < K) ? a[row * k4 + k / 4] : vec4(0.0);
        }
        [[unroll]] for (uint e = 0; e < CB; e++) {
            uint ch = tid + e * THREADS;
            uint kb = k0 + ch / NC;
            uint col = n0 + (ch % NC) * 4; // N % 4 == 0: col < N ⇒ col + 3 < N
            rb[e] = (kb < K && col < N) ? b[kb * n4 + col / 4] : vec4(0.0);
        }
    }
}

// Moves the registers into shared buffer `buf` (A transposed).
void store_tile(uint buf, uint tid) {
    [[unroll]] for (uint e = 0; e < CA; e++) {
        uint ch = tid + e * THREADS;
        uint r = ch / KC;
        uint kk = (ch % KC) * 4;
        [[unroll]] for (uint q = 0; q < 4; q++) {
            uint i = buf * BK * AS + (kk + q) * AS + r;
            As[i >> 2][i & 3u] = ra[e][q];
        }
    }
    [[unroll]] for (uint e = 0; e < CB; e++) {
        uint ch = tid + e * THREADS;
        Bs[buf * BK * NC + ch] = rb[e];
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
    uint bm = first + (pid % width) % rows;
    uint bn = (pid % width) / rows;
    uint m0 = bm * BM;
    uint n0 = bn * BN;

    // Which micro-tile this thread computes: (tx, ty) in (BN/TN)×(BM/TM).
    uint tx = tid % (BN / TN);
    uint ty = tid / (BN / TN);
    if (COMPACT != 0 && (BN / TN) % 8 == 0 && (BM / TM) % 4 == 0) {
        // Thread l of each 32 takes (l % 8, l / 8) in its 8×4 patch; the
        // patches tile the grid row-major (a bijection: (BN/TN)/8 patches
        // across, (BM/TM)/4 down, one per 32 threads).
        uint across = max((BN / TN) / 8, 1u);
        uint w = tid / 32, l = tid % 32;
        tx = (w % across) * 8 + l % 8;
        ty = (w / across) * 4 + l / 8;
    }

    bool full_mn = (m0 + BM <= M) && (n0 + BN <= N);
    uint tiles = (K + BK - 1) / BK;

    vec4 acc[TM][SN];
    [[unroll]] for (uint i = 0; i < TM; i++) {
        [[unroll]] for (uint j = 0; j < SN; j++) {
            acc[i][j] = vec4(0.0);
        }
    }

    load_tile(0u, m0, n0, full_mn, tid);
    store_tile(0u, tid);
    barrier();

    for (uint t = 0; t < tiles; t++) {
        uint cur = t & 1u;
        bool more = t + 1 < tiles;
        if (more) {
            load_tile(t + 1, m0, n0, full_mn, tid);
        }
        uint abase = cur * BK * AS / 4;
        uint bbase = cur * BK * BN / 4;
        // Step k reads its fragments into slot k & 1 and multiplies step
        // k − FRAG2: with FRAG2 = 1 the shared reads of k + 1 are issued
        // before the FMAs of k (register double-buffering).
        vec4 va[2][SM];
        vec4 vb[2][SN];
        [[unroll]] for (uint k = 0; k < BK + FRAG2; k++) {
            if (k < BK) {
                [[unroll]] for (uint s = 0; s < SM; s++) {
                    va[k & 1u][s] = As[abase + (k * AS + s * (BM / SM)) / 4 + ty];
                }
                [[unroll]] for (uint s = 0; s < SN; s++) {
                    vb[k & 1u][s] = Bs[bbase + (k * BN + s * (BN / SN)) / 4 + tx];
                }
            }
            if (k >= FRAG2) {
                uint f = (k - FRAG2) & 1u;
                [[unroll]] for (uint s = 0; s < SM; s++) {
                    [[unroll]] for (uint i = 0; i < 4; i++) {
                        [[unroll]] for (uint j = 0; j < SN; j++) {
                            acc[s * 4 + i][j] =
                                fma(vec4(va[f][s][i]), vb[f][j], acc[s * 4 + i][j]);
                        }
                    }
                }
            }
        }
        if (more) {
            store_tile(cur ^ 1u, tid);
        }
        barrier();
    }

    uint n4 = N / 4;
    [[unroll]] for (uint s = 0; s < SM; s++) {
        [[unroll]] for (uint i = 0; i < 4; i++) {
            uint row = m0 + s * (BM / SM) + ty * 4 + i;
            [[unroll]] for (uint j = 0; j < SN; j++) {
                uint col = n0 + j * (BN / SN) + tx * 4;
                if (full_mn || (row < M && col < N)) {
                    c[row * n4 + col / 4] = acc[s * 4 + i][j];
                }
            }
        }
    }
}
