// Skinny linear layer: y = x·Wᵀ for M ≤ 64 rows of x (f32, [M, K]) and W
// stored [N, K] row-major (nn.Linear's [out, in]) in f32, f16 or bf16
// (WTYPE_F32 / WTYPE_F16 / WTYPE_BF16), with a fused epilogue. Built for
// memory bandwidth: W is streamed once per chunk of MT rows of x.
//
// Work split: a workgroup of 256 owns `upw` units; a unit is R = 4 rows of
// W (R consecutive outputs), or with `pairs` (SiLU·mul of a merged
// [2·I, K] gate|up weight) R/2 outputs j and their gate rows j and up rows
// I + j. Each subgroup takes units in turn (any subgroup size is correct).
// Its lanes split K: lane l reads element chunks l, l + width, ... of the
// unit's R rows (16-byte loads, 4 f32 or 8 16-bit values, two per step,
// when `vec` = 1: K a multiple of 4 for f32 and of 8 for 16-bit weights;
// one element otherwise) and of the MT rows of x (from L1: every subgroup reads the
// same x), keeping R × MT f32 sums; subgroupAdd finishes each. The `_sg32`
// variants (16-bit weights, subgroups of 32) take linear_loops.glsl's loop
// (CPS chunks per step) and butterfly finish instead; the loop's
// PREFETCH and UNIT_ROWS (R) are for measure/examples/linear_probe.
// With `ksub` > 1 (at most 4 rows of x per pass), ksub subgroups share a
// unit: each takes one of ksub consecutive parts of the K slice, writes its
// sums to shared memory, and after a barrier the parts are added in order
// and stored: narrower workgroups (upw · ksub subgroups' worth of work,
// upw units) in place of a split-K second pass.
// Grid: x = column groups × `mchunks` (the row chunks of one column group
// adjacent, so a repeated read of W hits L2), y = K slices (split-K): slice
// s covers chunks [s·kchunk, (s+1)·kchunk) of every row.
//
// With NORM (the `_norm` variants) the products read RMSNorm(x): row m's
// scale[m] = 1 / sqrt(sum of squares / K + eps), as nn_rmsnorm.comp takes
// it, and every x element enters as x · g[k] (g the norm weight, [K] f32).
// Without split-K (one K slice: every work item's loop reads all of K, or
// with ksub > 1 the unit's items together do) the scale comes last: each
// item sums the squares of the x values its loop reads anyway, the sums
// are finished with the products' (and added over a unit's parts in part
// order), and the finished products are multiplied by scale[m], so the
// first weight loads leave at the kernel's start. With split-K (a slice
// reads part of K) a prologue takes the scale first: the workgroup's
// subgroups each sum the squares over one part of K, the parts meet in
// shared memory (one barrier), every subgroup adds them in part order,
// and x enters as x · scale[m] · g[k].
//
// Stores (`mode`): 0 y = acc; 1 y = acc + res (res may be y itself);
// 2 y[m, j] = silu(gate) · up (y is [M, I]); 3 a split-K partial:
// y[(s·M + m)·N + row] = acc, finished by linear_reduce.comp.
//
// mlp.glsl includes this file for its products with MLP defined: main is
// left out, and the push constants gain two words.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#if defined(BUTTERFLY)
#extension GL_KHR_shader_subgroup_shuffle : require
#endif
#extension GL_EXT_control_flow_attributes : require
#if !defined(WTYPE_F32)
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#endif
#include "activations.glsl"

// Invocations per workgroup: 256 in every built-in kernel (WG_SIZE is
// for measure/examples/linear_probe's builds).
#ifndef WG_SIZE
#define WG_SIZE 256
#endif
layout(local_size_x = WG_SIZE) in;
#ifndef MT
#define MT 4
#endif
#if defined(UNIT_ROWS)
#define R uint(UNIT_ROWS)
#else
#define R 4u
#endif

layout(set = 0, binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(set = 0, binding = 1) readonly buffer X1 { float x1[]; };
#if defined(WTYPE_F32)
layout(set = 0, binding = 2) readonly buffer W4 { vec4 w4[]; };
layout(set = 0, binding = 3) readonly buffer W1 { float w1[]; };
#define WVEC 4u
#else
layout(set = 0, binding = 2) readonly buffer W4 { uvec4 w4[]; };
layout(set = 0, binding = 3) readonly buffer W1 { uint16_t w1[]; };
#define WVEC 8u
#endif
layout(set = 0, binding = 4) readonly buffer Res { float res[]; };
layout(set = 0, binding = 5) writeonly buffer Y { float y[]; };
#if defined(NORM)
layout(set = 0, binding = 6) readonly buffer G4 { vec4 g4[]; };
layout(set = 0, binding = 7) readonly buffer G1 { float g1[]; };
#endif
layout(push_constant) uniform P {
    uint M; uint K; uint N; uint mode; uint vec; uint kchunk; uint upw; uint mchunks; uint pairs;
    uint ksub;
#if defined(NORM)
    float eps;
#endif
#if defined(MLP)
    // mlp.glsl's: down weight rows read in 16-byte chunks (1) or by
    // element (0), and the workgroups in the grid.
    uint dvec; uint wgs;
#endif
};

#if defined(NORM)
// The RMSNorm scale of each row of x this subgroup reads, where the
// prologue takes it first (split-K); 1 where the scale comes last.
float xscale[MT];
// The current work item's sums of squares of the x values it read, per
// row slot (used where the scale comes last).
float xss[MT];
// Each subgroup's part of the sums of squares (subgroups of at least 4
// lanes: at most WG_SIZE / 4 of them).
#define NORM_SGS (uint(WG_SIZE) / 4u)
shared float norm_part[uint(MT) * NORM_SGS];
// An x value (vec4 or float, 0 past the end) of row slot m as the
// products take it: its squares added to the item's sums, then multiplied
// by the row's prologue scale and the norm weight `g` of its element(s).
vec4 xn4(vec4 v, uint m, vec4 g) {
    xss[m] += dot(v, v);
    return v * xscale[m] * g;
}
float xn1(float v, uint m, float g) {
    xss[m] = fma(v, v, xss[m]);
    return v * xscale[m] * g;
}
#define XN4(v, m, g) xn4((v), (m), (g))
#define XN1(v, m, g) xn1((v), (m), (g))
#define GV4(i) g4[i]
#define GV1(i) g1[i]
#else
#define XN4(v, m, g) (v)
#define XN1(v, m, g) (v)
#define GV4(i) vec4(1.0)
#define GV1(i) 1.0
#endif

#if MT <= 4
// Sums of the work items of shared units (ksub > 1: at most KSUB_ITEMS
// items, R × MT sums each).
#define KSUB_ITEMS 64u
shared float kpart_sum[KSUB_ITEMS * R * uint(MT)];
#if defined(NORM)
// Their sums of squares of x (MT each), where the scale comes last.
shared float kpart_ss[KSUB_ITEMS * uint(MT)];
#endif
#endif

#if defined(BUTTERFLY)
// linear_loops.glsl's butterfly: lane (t << BF_SHIFT) holds sum t.
#define OWNS(t, lane, width) ((lane) == ((t) << BF_SHIFT))
#else
// Every lane holds every sum; lane t % width stores sum t.
#define OWNS(t, lane, width) ((t) % (width) == (lane))
#endif

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

#if !defined(WTYPE_F32)
// Eight 16-bit weights (little-endian: the low half of each word first).
void wdecode(uvec4 w, out vec4 lo, out vec4 hi) {
#if defined(WTYPE_F16)
    lo = vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
    hi = vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w));
#else
    lo = uintBitsToFloat(uvec4(w.x << 16, w.x & 0xffff0000u, w.y << 16, w.y & 0xffff0000u));
    hi = uintBitsToFloat(uvec4(w.z << 16, w.z & 0xffff0000u, w.w << 16, w.w & 0xffff0000u));
#endif
}
#endif

// The W row of slot i of unit u; N when the slot is past the end.
uint wrow(uint u, uint i) {
    if (pairs != 0u) {
        uint half_n = N / 2u;
        uint j = u * (R / 2u) + i % (R / 2u);
        if (j >= half_n) return N;
        return i < R / 2u ? j : half_n + j;
    }
    uint r = u * R + i;
    return r < N ? r : N;
}

// Chunks [b, e) of the K slice `s` (of `len` chunks in all) that part
// `part` of its `ksub` parts covers.
uvec2 kpart(uint s, uint part, uint len) {
    uint b = min(s * kchunk, len), e = min(b + kchunk, len);
    uint span = (e - b + ksub - 1u) / ksub;
    uint pb = min(b + part * span, e);
    return uvec2(pb, min(pb + span, e));
}

#if (defined(CPS_LOOP) && !defined(WTYPE_F32)) || defined(BUTTERFLY)
#include "linear_loops.glsl"
#endif

// Adds part `part` of K slice `s` of x's rows `xr` times W's `rows` into acc
// (per lane; the subgroup's lanes split the chunks).
void accumulate(uint rows[R], uint xr[MT], uint s, uint part, uint lane, uint width,
                inout float acc[R][MT]) {
    if (vec != 0u) {
        uint kv = K / WVEC;   // 16-byte chunks per row of W
        uint k4 = K / 4u;     // vec4s per row of x
        uvec2 be = kpart(s, part, kv);
        uint b = be.x, e = be.y;
#if defined(CPS_LOOP) && !defined(WTYPE_F32)
        cps_loop(rows, xr, b, e, kv, k4, lane, width, acc);
#else
        // Two chunks per lane and step (k and k + width), all 2·R loads
        // of W issued before the FMAs: twice the bytes in flight. Past
        // e the second chunk's W and x read as 0 (and add nothing).
        for (uint k = b + lane; k < e; k += 2u * width) {
            uint k2 = k + width;
            bool two = k2 < e;
#if defined(WTYPE_F32)
            vec4 wv[2][R];
            [[unroll]] for (uint i = 0u; i < R; ++i) {
                wv[0][i] = w4[rows[i] * kv + k];
                wv[1][i] = two ? w4[rows[i] * kv + k2] : vec4(0.0);
            }
            vec4 ga = GV4(k), gb = two ? GV4(k2) : vec4(0.0);
            [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
                vec4 xv = XN4(x4[xr[m] * k4 + k], m, ga);
                vec4 xw = XN4(two ? x4[xr[m] * k4 + k2] : vec4(0.0), m, gb);
                [[unroll]] for (uint i = 0u; i < R; ++i) {
                    float a = fma(xv.x, wv[0][i].x, fma(xv.y, wv[0][i].y,
                              fma(xv.z, wv[0][i].z, fma(xv.w, wv[0][i].w, acc[i][m]))));
                    acc[i][m] = fma(xw.x, wv[1][i].x, fma(xw.y, wv[1][i].y,
                                fma(xw.z, wv[1][i].z, fma(xw.w, wv[1][i].w, a))));
                }
            }
#else
            uvec4 wraw[2][R];
            [[unroll]] for (uint i = 0u; i < R; ++i) {
                wraw[0][i] = w4[rows[i] * kv + k];
                wraw[1][i] = two ? w4[rows[i] * kv + k2] : uvec4(0u);
            }
            [[unroll]] for (uint h = 0u; h < 2u; ++h) {
                uint kk = h == 0u ? k : k2;
                bool ok = h == 0u || two;
                vec4 wlo[R], whi[R];
                [[unroll]] for (uint i = 0u; i < R; ++i) wdecode(wraw[h][i], wlo[i], whi[i]);
                vec4 ga = ok ? GV4(2u * kk) : vec4(0.0), gb = ok ? GV4(2u * kk + 1u) : vec4(0.0);
                [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
                    vec4 xa = XN4(ok ? x4[xr[m] * k4 + 2u * kk] : vec4(0.0), m, ga);
                    vec4 xb = XN4(ok ? x4[xr[m] * k4 + 2u * kk + 1u] : vec4(0.0), m, gb);
                    [[unroll]] for (uint i = 0u; i < R; ++i) {
                        float a = fma(xa.x, wlo[i].x, fma(xa.y, wlo[i].y,
                                  fma(xa.z, wlo[i].z, fma(xa.w, wlo[i].w, acc[i][m]))));
                        acc[i][m] = fma(xb.x, whi[i].x, fma(xb.y, whi[i].y,
                                    fma(xb.z, whi[i].z, fma(xb.w, whi[i].w, a))));
                    }
                }
            }
#endif
        }
#endif
    } else {
        uvec2 be = kpart(s, part, K);
        uint b = be.x, e = be.y;
        for (uint k = b + lane; k < e; k += width) {
            float wv[R];
            [[unroll]] for (uint i = 0u; i < R; ++i) wv[i] = wscalar(rows[i] * K + k);
            float gk = GV1(k);
            [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
                float xv = XN1(x1[xr[m] * K + k], m, gk);
                [[unroll]] for (uint i = 0u; i < R; ++i) acc[i][m] = fma(xv, wv[i], acc[i][m]);
            }
        }
    }
}

// Stores unit u's sums (every lane holds every sum; lane t % width stores
// sum t) for rows m0.. of x and K slice s, as `mode` says.
void store(uint u, uint s, uint m0, uint lane, uint width, float acc[R][MT]) {
    if (mode == 2u) {
        uint half_n = N / 2u;
        [[unroll]] for (uint i = 0u; i < R / 2u; ++i) {
            uint j = u * (R / 2u) + i;
            [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
                uint t = i * uint(MT) + m;
                if (OWNS(t, lane, width) && j < half_n && m0 + m < M) {
                    float g = acc[i][m];
                    y[(m0 + m) * half_n + j] = g * vkc_sigmoid(g) * acc[i + R / 2u][m];
                }
            }
        }
    } else {
        [[unroll]] for (uint i = 0u; i < R; ++i) {
            uint row = wrow(u, i);
            [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
                uint t = i * uint(MT) + m;
                if (OWNS(t, lane, width) && row < N && m0 + m < M) {
                    uint at = (m0 + m) * N + row;
                    if (mode == 3u) {
                        y[s * M * N + at] = acc[i][m];
                    } else if (mode == 1u) {
                        y[at] = acc[i][m] + res[at];
                    } else {
                        y[at] = acc[i][m];
                    }
                }
            }
        }
    }
}

#if !defined(MLP)
void main() {
    uint mch = gl_WorkGroupID.x % mchunks;
    uint group = gl_WorkGroupID.x / mchunks;
    uint s = gl_WorkGroupID.y;
    uint m0 = mch * uint(MT);
    uint lane = gl_SubgroupInvocationID;
    uint width = gl_SubgroupSize;
    // Rows of x past M read the last row again and are never stored.
    uint xr[MT];
    [[unroll]] for (uint m = 0u; m < uint(MT); ++m) xr[m] = min(m0 + m, M - 1u);
#if defined(NORM)
    // One K slice: the scale comes last (see the top). Uniform over the
    // dispatch, so the prologue's barrier is in uniform control flow.
    bool late = gl_NumWorkGroups.y == 1u;
    if (late) {
        [[unroll]] for (uint m = 0u; m < uint(MT); ++m) xscale[m] = 1.0;
    } else {
        // The RMSNorm prologue, shared by the workgroup: subgroup g sums
        // the squares of its rows of x over part g of K (vec4 loads when K
        // is a multiple of 4), and every subgroup adds the parts in order.
        uint nsg = gl_NumSubgroups, sg = gl_SubgroupID;
        [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
            float ss = 0.0;
            if (K % 4u == 0u) {
                uint k4 = K / 4u, per = (k4 + nsg - 1u) / nsg;
                uint b = min(sg * per, k4), e = min(b + per, k4);
                for (uint c = b + lane; c < e; c += width) {
                    vec4 v = x4[xr[m] * k4 + c];
                    ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
                }
            } else {
                uint per = (K + nsg - 1u) / nsg;
                uint b = min(sg * per, K), e = min(b + per, K);
                for (uint c = b + lane; c < e; c += width) {
                    float v = x1[xr[m] * K + c];
                    ss += v * v;
                }
            }
            float t = subgroupAdd(ss);
            if (subgroupElect()) norm_part[m * NORM_SGS + sg] = t;
        }
        barrier();
        [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
            float tot = 0.0;
            for (uint g = 0u; g < nsg; ++g) tot += norm_part[m * NORM_SGS + g];
            xscale[m] = inversesqrt(tot / float(K) + eps);
        }
    }
#endif

    // Work items: unit lu's K part p is item lu · ksub + p (ksub subgroups
    // share a unit when the workgroup holds fewer units than subgroups).
    uint items = upw * ksub;
    for (uint it = gl_SubgroupID; it < items; it += gl_NumSubgroups) {
        uint lu = it / ksub, part = it % ksub;
        uint u = group * upw + lu;
        if (wrow(u, 0u) >= N) break;  // uniform: this item and later ones are past the end
        uint rows[R];
        [[unroll]] for (uint i = 0u; i < R; ++i) rows[i] = min(wrow(u, i), N - 1u);
        float acc[R][MT];
        [[unroll]] for (uint i = 0u; i < R; ++i)
            [[unroll]] for (uint m = 0u; m < uint(MT); ++m) acc[i][m] = 0.0;
#if defined(NORM)
        [[unroll]] for (uint m = 0u; m < uint(MT); ++m) xss[m] = 0.0;
#endif
        accumulate(rows, xr, s, part, lane, width, acc);
#if defined(BUTTERFLY)
        butterfly(acc, lane);
#else
        [[unroll]] for (uint i = 0u; i < R; ++i)
            [[unroll]] for (uint m = 0u; m < uint(MT); ++m) acc[i][m] = subgroupAdd(acc[i][m]);
#endif
#if defined(NORM)
        // The scale last: this item's squares cover all of K (ksub = 1),
        // or its part of the unit's (added with the other parts below).
        if (late) {
            [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
                float t = subgroupAdd(xss[m]);
                if (ksub == 1u) {
                    float sc = inversesqrt(t / float(K) + eps);
                    [[unroll]] for (uint i = 0u; i < R; ++i) acc[i][m] *= sc;
#if MT <= 4
                } else if (subgroupElect()) {
                    kpart_ss[it * uint(MT) + m] = t;
#endif
                }
            }
        }
#endif
        if (ksub == 1u) {
            store(u, s, m0, lane, width, acc);
#if MT <= 4
        } else {
            [[unroll]] for (uint i = 0u; i < R; ++i)
                [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
                    uint t = i * uint(MT) + m;
                    if (OWNS(t, lane, width)) kpart_sum[it * R * uint(MT) + t] = acc[i][m];
                }
#endif
        }
    }
#if MT <= 4
    // Shared units: each unit's parts added in part order, then stored.
    if (ksub > 1u) {
        barrier();
        for (uint lu = gl_SubgroupID; lu < upw; lu += gl_NumSubgroups) {
            uint u = group * upw + lu;
            if (wrow(u, 0u) >= N) break;
            float acc[R][MT];
            [[unroll]] for (uint i = 0u; i < R; ++i)
                [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
                    uint t = i * uint(MT) + m;
                    float a = 0.0;
                    for (uint p = 0u; p < ksub; ++p) a += kpart_sum[(lu * ksub + p) * R * uint(MT) + t];
                    acc[i][m] = a;
                }
#if defined(NORM)
            if (late) {
                [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
                    float ss = 0.0;
                    for (uint p = 0u; p < ksub; ++p) ss += kpart_ss[(lu * ksub + p) * uint(MT) + m];
                    float sc = inversesqrt(ss / float(K) + eps);
                    [[unroll]] for (uint i = 0u; i < R; ++i) acc[i][m] *= sc;
                }
            }
#endif
            store(u, s, m0, lane, width, acc);
        }
    }
#endif
}
#endif
