#version 450
// C = A·B, row-major f32, any M, K, N: register-blocked shared-memory SGEMM.
//
// A workgroup computes a BM×BN block of C from BK-deep slices of A and B held
// in shared memory, double-buffered: while the threads multiply slice t, the
// values of slice t+1 are already in registers on their way in, so one
// barrier per slice suffices. Each thread owns a TM×TN micro-tile of C, made
// of (TM/4)×(TN/4) 4×4 pieces spread BM/(TM/4) rows and BN/(TN/4) columns
// apart, so a quarter-warp's vec4 reads of shared memory are contiguous
// (conflict-free). The A slice is stored transposed (k-major) with a row
// stride of BM+4 floats, which keeps the transposing stores conflict-free.
// Blocks that lie wholly inside the matrices load and store without a single
// bounds test; only edge blocks (and the K tail) take the guarded path.
// Workgroups are visited in groups of GROUP_M block rows for L2 reuse.
//
// Specialization: constant 0 = local_size_x = (BM/TM)·(BN/TN); 1..5 = BM,
// BN, BK, TM, TN. Needs TM, TN multiples of 4, (BM·BK) and (BK·BN)
// multiples of the thread count, BK a multiple of BM·BK/threads and BN a
// multiple of BK·BN/threads. Push constants: M, K, N.
// Grid: (ceil(N/BN), ceil(M/BM), 1).
#extension GL_EXT_control_flow_attributes : enable

// The built-in tiles are also compiled with their shape fixed (TILE_*
// defined): every loop then has a constant trip count, so the SPIR-V
// itself is unrolled and the accumulators are registers, instead of
// leaving that to the driver after specialization.
// variant: matmul_f32_128x128x8_8x8 TILE_BM=128 TILE_BN=128 TILE_BK=8 TILE_TM=8 TILE_TN=8 TILE_THREADS=256
// variant: matmul_f32_64x64x8_4x4 TILE_BM=64 TILE_BN=64 TILE_BK=8 TILE_TM=4 TILE_TN=4 TILE_THREADS=256
// variant: matmul_f32_64x32x8_4x4 TILE_BM=64 TILE_BN=32 TILE_BK=8 TILE_TM=4 TILE_TN=4 TILE_THREADS=128
#ifdef TILE_BM
layout(local_size_x = TILE_THREADS) in;
const uint BM = TILE_BM;
const uint BN = TILE_BN;
const uint BK = TILE_BK;
const uint TM = TILE_TM;
const uint TN = TILE_TN;
#else
layout(local_size_x = 256, local_size_x_id = 0) in;
layout(constant_id = 1) const uint BM = 128;
layout(constant_id = 2) const uint BN = 128;
layout(constant_id = 3) const uint BK = 8;
layout(constant_id = 4) const uint TM = 8;
layout(constant_id = 5) const uint TN = 8;
#endif

layout(std430, set = 0, binding = 0) readonly buffer MatA { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer MatB { float b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer MatC { float c[]; };
layout(push_constant) uniform Shape { uint M; uint K; uint N; };

const uint THREADS = (BM / TM) * (BN / TN);
const uint SM = TM / 4;              // 4-row pieces per thread
const uint SN = TN / 4;              // 4-column pieces per thread
const uint AS = BM + 4;              // row stride of the transposed A slice
const uint EA = (BM * BK) / THREADS; // A elements each thread moves per slice
const uint EB = (BK * BN) / THREADS; // B elements each thread moves per slice
const uint GROUP_M = 8;

shared vec4 As[2 * BK * AS / 4];
shared vec4 Bs[2 * BK * BN / 4];

float ra[EA];
float rb[EB];

// Loads slice `t` (k from t·BK) into registers; `fast` skips every bounds test.
void load_tile(uint t, uint m0, uint n0, bool fast, uint a_r, uint a_k, uint b_k, uint b_n) {
    uint k0 = t * BK;
    if (fast && k0 + BK <= K) {
        uint ai = (m0 + a_r) * K + k0 + a_k;
        [[unroll]] for (uint e = 0; e < EA; e++) ra[e] = a[ai + e];
        uint bi = (k0 + b_k) * N + n0 + b_n;
        [[unroll]] for (uint e = 0; e < EB; e++) rb[e] = b[bi + e];
    } else {
        uint row = m0 + a_r;
        [[unroll]] for (uint e = 0; e < EA; e++) {
            uint k = k0 + a_k + e;
            ra[e] = (row < M && k < K) ? a[row * K + k] : 0.0;
        }
        uint kb = k0 + b_k;
        [[unroll]] for (uint e = 0; e < EB; e++) {
            uint col = n0 + b_n + e;
            rb[e] = (kb < K && col < N) ? b[kb * N + col] : 0.0;
        }
    }
}

// Moves the registers into shared buffer `buf` (A transposed).
void store_tile(uint buf, uint a_r, uint a_k, uint b_k, uint b_n) {
    [[unroll]] for (uint e = 0; e < EA; e++) {
        uint i = buf * BK * AS + (a_k + e) * AS + a_r;
        As[i >> 2][i & 3u] = ra[e];
    }
    [[unroll]] for (uint e = 0; e < EB; e++) {
        uint i = buf * BK * BN + b_k * BN + b_n + e;
        Bs[i >> 2][i & 3u] = rb[e];
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

    // Which elements this thread moves into shared memory.
    uint a_k = (tid % (BK / EA)) * EA; // EA consecutive k of one A row
    uint a_r = tid / (BK / EA);
    uint b_n = (tid % (BN / EB)) * EB; // EB consecutive n of one B row
    uint b_k = tid / (BN / EB);

    // Which micro-tile this thread computes.
    uint tx = tid % (BN / TN);
    uint ty = tid / (BN / TN);

    bool full_mn = (m0 + BM <= M) && (n0 + BN <= N);
    uint tiles = (K + BK - 1) / BK;

    vec4 acc[TM][SN];
    [[unroll]] for (uint i = 0; i < TM; i++) {
        [[unroll]] for (uint j = 0; j < SN; j++) {
            acc[i][j] = vec4(0.0);
        }
    }

    load_tile(0u, m0, n0, full_mn, a_r, a_k, b_k, b_n);
    store_tile(0u, a_r, a_k, b_k, b_n);
    barrier();

    for (uint t = 0; t < tiles; t++) {
        uint cur = t & 1u;
        bool more = t + 1 < tiles;
        if (more) {
            load_tile(t + 1, m0, n0, full_mn, a_r, a_k, b_k, b_n);
        }
        uint abase = cur * BK * AS / 4;
        uint bbase = cur * BK * BN / 4;
        [[unroll]] for (uint k = 0; k < BK; k++) {
            vec4 va[SM];
            vec4 vb[SN];
            [[unroll]] for (uint s = 0; s < SM; s++) {
                va[s] = As[abase + (k * AS + s * (BM / SM)) / 4 + ty];
            }
            [[unroll]] for (uint s = 0; s < SN; s++) {
                vb[s] = Bs[bbase + (k * BN + s * (BN / SN)) / 4 + tx];
            }
            [[unroll]] for (uint s = 0; s < SM; s++) {
                [[unroll]] for (uint i = 0; i < 4; i++) {
                    [[unroll]] for (uint j = 0; j < SN; j++) {
                        acc[s * 4 + i][j] = fma(vec4(va[s][i]), vb[j], acc[s * 4 + i][j]);
                    }
                }
            }
        }
        if (more) {
            store_tile(cur ^ 1u, a_r, a_k, b_k, b_n);
        }
        barrier();
    }

    [[unroll]] for (uint s = 0; s < SM; s++) {
        [[unroll]] for (uint i = 0; i < 4; i++) {
            uint row = m0 + s * (BM / SM) + ty * 4 + i;
            [[unroll]] for (uint j = 0; j < SN; j++) {
                uint col = n0 + j * (BN / SN) + tx * 4;
                vec4 v = acc[s * 4 + i][j];
                if (full_mn) {
                    uint ci = row * N + col;
                    c[ci] = v.x;
                    c[ci + 1] = v.y;
                    c[ci + 2] = v.z;
                    c[ci + 3] = v.w;
                } else if (row < M) {
                    [[unroll]] for (uint e = 0; e < 4; e++) {
                        if (col + e < N) c[row * N + col + e] = v[e];
                    }
                }
            }
        }
    }
}
