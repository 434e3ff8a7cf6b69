// Register-tiled linear layer: y = x·Wᵀ for up to BM = 64 (TILE_M: 64,
// or 32) rows of x (f32, [M, K]) and W stored [N, K] row-major
// (nn.Linear's [out, in]) in f32, f16 or bf16 (WTYPE_F32 / WTYPE_F16 /
// WTYPE_BF16), with the epilogues of linear.glsl. Built for arithmetic:
// where linear.glsl re-reads x from L1 for every row of W, here a
// workgroup of 2·BM computes a BM × 64 (rows of x × rows of W) tile of the
// product from BK = 16-deep slices of x and W staged in shared memory
// (16-bit weights widened to f32 on the way in), double-buffered: slice
// t + 1 is in registers while slice t is multiplied, one barrier per
// slice. Both slices are stored k-major with rows padded by 4 floats, so
// the inner loop reads x and W as vec4s along M and N.
//
// Thread t owns rows 4·(t / 8) .. + 3 and two column pieces of 4, at tile
// columns 4·(t % 8) and 32 + 4·(t % 8). A tile's 64 columns are W rows
// n0 .. n0 + 63, or with `pairs` (SiLU·mul of a merged [2·I, K] gate|up
// weight) the gate rows j0 .. j0 + 31 and the up rows I + j0 .. I + j0 + 31:
// each thread then holds the gate and up sums of the same outputs.
// Loads: 16-byte ones when `vec` = 1 (K a multiple of 4 for f32, of 8 for
// 16-bit weights), single elements otherwise; every load is bounds-tested
// (past M, N or the slice's end it reads 0), which costs nothing beside the
// 512 FMAs per thread and slice.
// Grid: x = column tiles, y = K slices (split-K): slice s covers
// k in [s·kslice, (s+1)·kslice), kslice a multiple of BK.
//
// Stores (`mode`), as linear.glsl: 0 y = acc; 1 y = acc + res (res may be
// y itself); 2 y[m, j] = silu(gate) · up (y is [M, I]); 3 a split-K
// partial y[(s·M + m)·N + row] = acc, finished by linear_reduce.comp.
#extension GL_EXT_control_flow_attributes : require
#if !defined(WTYPE_F32)
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#endif
#include "activations.glsl"

#ifndef TILE_M
#define TILE_M 64
#endif
layout(local_size_x = 2 * TILE_M) in;
#define BM uint(TILE_M)
#define THREADS (2u * BM)
#define BK 16u
#define AS 68u            // padded row stride (floats) of the k-major W slices
#define AS4 17u           // AS / 4
#define XS (BM + 4u)      // the same for the x slices
#define XS4 (XS / 4u)
#define EW (256u / THREADS)  // f32 quads (16-bit: EW / 2 octets) of W per thread

layout(set = 0, binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(set = 0, binding = 1) readonly buffer X1 { float x1[]; };
#if defined(WTYPE_F32)
layout(set = 0, binding = 2) readonly buffer W4 { vec4 w4[]; };
layout(set = 0, binding = 3) readonly buffer W1 { float w1[]; };
#else
layout(set = 0, binding = 2) readonly buffer W4 { uvec4 w4[]; };
layout(set = 0, binding = 3) readonly buffer W1 { uint16_t w1[]; };
#endif
layout(set = 0, binding = 4) readonly buffer Res { float res[]; };
layout(set = 0, binding = 5) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
    uint M; uint K; uint N; uint mode; uint vec; uint kslice; uint pairs;
};

shared vec4 Xs[2u * BK * XS4];
shared vec4 Ws[2u * BK * AS4];

// One stored weight as f32.
float wscalar(uint i) {
#if defined(WTYPE_F32)
    return w1[i];
#elif defined(WTYPE_F16)
    return unpackHalf2x16(uint(w1[i])).x;
#else
    return uintBitsToFloat(uint(w1[i]) << 16);
#endif
}

// The W row of tile column c (0 .. 63) in column tile `tile`; N past the end.
uint wrow(uint tile, uint c) {
    if (pairs != 0u) {
        uint half_n = N / 2u;
        uint j = tile * 32u + (c & 31u);
        if (j >= half_n) return N;
        return c < 32u ? j : half_n + j;
    }
    uint r = tile * 64u + c;
    return r < N ? r : N;
}

// Four x values of row r from k (k, K multiples of 4 with `vec`), 0 past
// M or kend.
vec4 xquad(uint r, uint k, uint kend) {
    if (r >= M) return vec4(0.0);
    if (vec != 0u) return k < kend ? x4[(r * K + k) / 4u] : vec4(0.0);
    vec4 v;
    [[unroll]] for (uint i = 0u; i < 4u; ++i) v[i] = k + i < kend ? x1[r * K + k + i] : 0.0;
    return v;
}

// Four weights of W row `row` from k, 0 past N or kend (scalar path).
vec4 wquad_scalar(uint row, uint k, uint kend) {
    vec4 v;
    [[unroll]] for (uint i = 0u; i < 4u; ++i)
        v[i] = (row < N && k + i < kend) ? wscalar(row * K + k + i) : 0.0;
    return v;
}

vec4 rx[2];
vec4 rw[EW];

// Slice [k0, k0 + BK) into registers. x: quads q = tid, tid + THREADS of
// the BM × 4 quads (row q / 4, k 4·(q % 4)). W: f32 quads q = tid + e ·
// THREADS of the tile's 64 × 4 (column q / 4); 16-bit octets o = tid +
// e · THREADS of its 64 × 2 (column o / 2, k 8·(o % 2)).
void load_slice(uint tid, uint tile, uint k0, uint kend) {
    [[unroll]] for (uint e = 0u; e < 2u; ++e) {
        uint q = tid + e * THREADS;
        rx[e] = xquad(q / 4u, k0 + 4u * (q % 4u), kend);
    }
#if defined(WTYPE_F32)
    [[unroll]] for (uint e = 0u; e < EW; ++e) {
        uint q = tid + e * THREADS;
        uint row = wrow(tile, q / 4u);
        uint k = k0 + 4u * (q % 4u);
        if (vec != 0u) {
            rw[e] = (row < N && k < kend) ? w4[(row * K + k) / 4u] : vec4(0.0);
        } else {
            rw[e] = wquad_scalar(row, k, kend);
        }
    }
#else
    [[unroll]] for (uint e = 0u; e < EW / 2u; ++e) {
        uint o = tid + e * THREADS;
        uint row = wrow(tile, o / 2u);
        uint k = k0 + 8u * (o % 2u);
        if (vec != 0u) {
            uvec4 w = (row < N && k < kend) ? w4[(row * K + k) / 8u] : uvec4(0u);
#if defined(WTYPE_F16)
            rw[2u * e] = vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
            rw[2u * e + 1u] = vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w));
#else
            rw[2u * e] = uintBitsToFloat(
                uvec4(w.x << 16, w.x & 0xffff0000u, w.y << 16, w.y & 0xffff0000u));
            rw[2u * e + 1u] = uintBitsToFloat(
                uvec4(w.z << 16, w.z & 0xffff0000u, w.w << 16, w.w & 0xffff0000u));
#endif
        } else {
            rw[2u * e] = wquad_scalar(row, k, kend);
            rw[2u * e + 1u] = wquad_scalar(row, k + 4u, kend);
        }
    }
#endif
}

// Registers into shared buffer `buf`, k-major.
void store_slice(uint tid, uint buf) {
    uint xbase = buf * BK * XS;
    [[unroll]] for (uint e = 0u; e < 2u; ++e) {
        uint q = tid + e * THREADS;
        uint r = q / 4u, k = 4u * (q % 4u);
        [[unroll]] for (uint i = 0u; i < 4u; ++i) {
            uint a = xbase + (k + i) * XS + r;
            Xs[a >> 2][a & 3u] = rx[e][i];
        }
    }
    uint base = buf * BK * AS;
#if defined(WTYPE_F32)
    [[unroll]] for (uint e = 0u; e < EW; ++e) {
        uint q = tid + e * THREADS;
        uint c = q / 4u, k = 4u * (q % 4u);
        [[unroll]] for (uint i = 0u; i < 4u; ++i) {
            uint a = base + (k + i) * AS + c;
            Ws[a >> 2][a & 3u] = rw[e][i];
        }
    }
#else
    [[unroll]] for (uint e = 0u; e < EW / 2u; ++e) {
        uint o = tid + e * THREADS;
        uint c = o / 2u, k = 8u * (o % 2u);
        [[unroll]] for (uint h = 0u; h < 2u; ++h)
            [[unroll]] for (uint i = 0u; i < 4u; ++i) {
                uint a = base + (k + 4u * h + i) * AS + c;
                Ws[a >> 2][a & 3u] = rw[2u * e + h][i];
            }
    }
#endif
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint tile = gl_WorkGroupID.x;
    uint s = gl_WorkGroupID.y;
    uint tx = tid % 8u, ty = tid / 8u;
    uint kbeg = min(s * kslice, K);
    uint kend = min(kbeg + kslice, K);
    uint slices = (kend - kbeg + BK - 1u) / BK;

    vec4 acc[4][2];
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
        acc[i][0] = vec4(0.0);
        acc[i][1] = vec4(0.0);
    }

    if (slices > 0u) {
        load_slice(tid, tile, kbeg, kend);
        store_slice(tid, 0u);
    }
    barrier();
    for (uint t = 0u; t < slices; ++t) {
        uint cur = t & 1u;
        bool more = t + 1u < slices;
        if (more) load_slice(tid, tile, kbeg + (t + 1u) * BK, kend);
        uint base = cur * BK * AS4, xbase = cur * BK * XS4;
        [[unroll]] for (uint k = 0u; k < BK; ++k) {
            vec4 a = Xs[xbase + k * XS4 + ty];
            vec4 b0 = Ws[base + k * AS4 + tx];
            vec4 b1 = Ws[base + k * AS4 + 8u + tx];
            [[unroll]] for (uint i = 0u; i < 4u; ++i) {
                acc[i][0] = fma(vec4(a[i]), b0, acc[i][0]);
                acc[i][1] = fma(vec4(a[i]), b1, acc[i][1]);
            }
        }
        if (more) store_slice(tid, cur ^ 1u);
        barrier();
    }

    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
        uint m = ty * 4u + i;
        if (m >= M) continue;
        if (mode == 2u) {
            uint half_n = N / 2u;
            [[unroll]] for (uint e = 0u; e < 4u; ++e) {
                uint j = tile * 32u + tx * 4u + e;
                if (j < half_n) {
                    float g = acc[i][0][e];
                    y[m * half_n + j] = g * vkc_sigmoid(g) * acc[i][1][e];
                }
            }
        } else {
            [[unroll]] for (uint p = 0u; p < 2u; ++p)
                [[unroll]] for (uint e = 0u; e < 4u; ++e) {
                    uint row = wrow(tile, p * 32u + tx * 4u + e);
                    if (row < N) {
                        uint at = m * N + row;
                        if (mode == 3u) {
                            y[s * M * N + at] = acc[i][p][e];
                        } else if (mode == 1u) {
                            y[at] = acc[i][p][e] + res[at];
                        } else {
                            y[at] = acc[i][p][e];
                        }
                    }
                }
        }
    }
}
