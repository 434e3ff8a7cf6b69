// Fused SwiGLU MLP for a few rows of x: y = x + (silu(n·Wgᵀ) * (n·Wuᵀ))·Wdᵀ,
// n = x, or RMSNorm(x) with NORM (as linear.glsl takes it, scale last),
// in one dispatch. Wgu is the merged [2·I, K] gate|up weight (gate rows
// first), Wd the [K, I] down weight, both as nn.Linear stores them, in
// f32, f16 or bf16 (WTYPE_*); x and y are [M, K] f32, y may be x.
//
// The intermediate dimension splits the work with no exchange between
// workgroups: workgroup g owns J = 2·upw consecutive intermediate
// features [g·J, g·J + J). It first computes h = silu(gate) · up for them
// with linear.glsl's products (units of 2 features: their gate and up
// rows), into shared memory; then it streams Wd's columns [g·J, g·J + J)
// of every one of the K rows (each invocation whole rows: J weights, 16
// bytes per load where `dvec`) and adds h·Wd[row, slice]ᵀ, its part of
// the down projection, into the accumulator `acc` ([M, K] f32, zero
// between dispatches) with f32 atomic adds. The last workgroup to finish
// (a device-wide counter) writes y = x + acc and sets acc and the counter
// back to 0 for the next dispatch. The sum over workgroups is in the
// order the atomics land: not bitwise reproducible from run to run.
//
// Bindings 0-7 as linear.glsl's (W = Wgu, Res = x, Y = y); then Wd as
// 16-byte chunks and as elements, acc, and the counter. Grid: x = groups
// × mchunks (row chunks of MT rows), y = 1.
#define MLP
#include "linear.glsl"

#if defined(WTYPE_F32)
layout(set = 0, binding = 8) readonly buffer D4 { vec4 d4[]; };
layout(set = 0, binding = 9) readonly buffer D1 { float d1[]; };
#else
layout(set = 0, binding = 8) readonly buffer D4 { uvec4 d4[]; };
layout(set = 0, binding = 9) readonly buffer D1 { uint16_t d1[]; };
#endif
layout(set = 0, binding = 10) coherent buffer Acc { float accb[]; };
layout(set = 0, binding = 11) coherent buffer Cnt { uint counter[]; };

// The intermediate features one workgroup owns (J; upw = J / 2 units).
#ifndef MLP_J
#define MLP_J 32
#endif
#define MLP_MAX_J uint(MLP_J)
shared float hsh[uint(MT) * MLP_MAX_J];
shared uint is_last;

// One down weight as f32 (element i of Wd).
float dscalar(uint i) {
#if defined(WTYPE_F32)
    return d1[i];
#elif defined(WTYPE_F16)
    return unpackHalf2x16(uint(d1[i])).x;
#else
    return uintBitsToFloat(uint(d1[i]) << 16);
#endif
}

// Stores unit u's (local unit lu's) features h = silu(gate) · up into
// shared memory: R/2 features, gate sums in acc[0 .. R/2), up sums after.
void store_h(uint u, uint lu, uint m0, uint lane, uint width, float acc[R][MT]) {
    uint half_n = N / 2u;
    [[unroll]] for (uint i = 0u; i < R / 2u; ++i) {
        uint j = u * (R / 2u) + i;
        [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
            uint t = i * uint(MT) + m;
            if (OWNS(t, lane, width)) {
                float g = acc[i][m];
                float h = g * vkc_sigmoid(g) * acc[i + R / 2u][m];
                hsh[m * MLP_MAX_J + lu * (R / 2u) + i] = (j < half_n && m0 + m < M) ? h : 0.0;
            }
        }
    }
}

// Chunks of 16 bytes in one row of Wd's slice, and rows each invocation
// takes per step (their loads issued together: at least 8 chunks).
#define MLP_CHUNKS (MLP_MAX_J / WVEC)
#define MLP_RU (MLP_CHUNKS >= 8u ? 1u : 8u / MLP_CHUNKS)

// Adds rows row0 + r·WG_SIZE (r < MLP_RU) of Wd's slice (features
// j0 + [0, jn)) times h into out_[r] (one sum per row of x); rows past K
// add nothing.
void down_rows(uint row0, uint j0, uint jn, inout float out_[MLP_RU][MT]) {
    uint inter = N / 2u;
    if (dvec != 0u && jn == MLP_MAX_J) {
        // All loads of the step issued before the products.
#if defined(WTYPE_F32)
        vec4 wv[MLP_RU][MLP_CHUNKS];
#else
        uvec4 wv[MLP_RU][MLP_CHUNKS];
#endif
        [[unroll]] for (uint r = 0u; r < MLP_RU; ++r) {
            uint row = min(row0 + r * uint(WG_SIZE), K - 1u);
            uint base = (row * inter + j0) / WVEC;
            [[unroll]] for (uint c = 0u; c < MLP_CHUNKS; ++c) wv[r][c] = d4[base + c];
        }
        [[unroll]] for (uint r = 0u; r < MLP_RU; ++r) {
            [[unroll]] for (uint c = 0u; c < MLP_CHUNKS; ++c) {
#if defined(WTYPE_F32)
                vec4 lo = wv[r][c];
                [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
                    uint hb = m * MLP_MAX_J + c * 4u;
                    out_[r][m] = fma(lo.x, hsh[hb], fma(lo.y, hsh[hb + 1u],
                                 fma(lo.z, hsh[hb + 2u], fma(lo.w, hsh[hb + 3u], out_[r][m]))));
                }
#else
                vec4 lo, hi;
                wdecode(wv[r][c], lo, hi);
                [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
                    uint hb = m * MLP_MAX_J + c * 8u;
                    float a = fma(lo.x, hsh[hb], fma(lo.y, hsh[hb + 1u],
                              fma(lo.z, hsh[hb + 2u], fma(lo.w, hsh[hb + 3u], out_[r][m]))));
                    out_[r][m] = fma(hi.x, hsh[hb + 4u], fma(hi.y, hsh[hb + 5u],
                                 fma(hi.z, hsh[hb + 6u], fma(hi.w, hsh[hb + 7u], a))));
                }
#endif
            }
        }
    } else {
        [[unroll]] for (uint r = 0u; r < MLP_RU; ++r) {
            uint row = min(row0 + r * uint(WG_SIZE), K - 1u);
            for (uint jl = 0u; jl < jn; ++jl) {
                float wv = dscalar(row * inter + j0 + jl);
                [[unroll]] for (uint m = 0u; m < uint(MT); ++m)
                    out_[r][m] = fma(wv, hsh[m * MLP_MAX_J + jl], out_[r][m]);
            }
        }
    }
}

void main() {
    uint mch = gl_WorkGroupID.x % mchunks;
    uint group = gl_WorkGroupID.x / mchunks;
    uint m0 = mch * uint(MT);
    uint lane = gl_SubgroupInvocationID;
    uint width = gl_SubgroupSize;
    uint tid = gl_LocalInvocationIndex;
    uint xr[MT];
    [[unroll]] for (uint m = 0u; m < uint(MT); ++m) xr[m] = min(m0 + m, M - 1u);
#if defined(NORM)
    // One K slice: the scale comes last (linear.glsl).
    [[unroll]] for (uint m = 0u; m < uint(MT); ++m) xscale[m] = 1.0;
#endif
    for (uint i = tid; i < uint(MT) * MLP_MAX_J; i += uint(WG_SIZE)) hsh[i] = 0.0;
    barrier();

    // h for this workgroup's features: linear.glsl's units, one subgroup
    // each in turn over all of K (ksub = 1), stored to shared memory.
    for (uint lu = gl_SubgroupID; lu < upw; lu += gl_NumSubgroups) {
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
        accumulate(rows, xr, 0u, 0u, lane, width, acc);
#if defined(BUTTERFLY)
        butterfly(acc, lane);
#else
        [[unroll]] for (uint i = 0u; i < R; ++i)
            [[unroll]] for (uint m = 0u; m < uint(MT); ++m) acc[i][m] = subgroupAdd(acc[i][m]);
#endif
#if defined(NORM)
        [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
            float sc = inversesqrt(subgroupAdd(xss[m]) / float(K) + eps);
            [[unroll]] for (uint i = 0u; i < R; ++i) acc[i][m] *= sc;
        }
#endif
        store_h(u, lu, m0, lane, width, acc);
    }
    barrier();

    // This workgroup's part of the down projection: every invocation whole
    // rows of Wd's slice, the sums added into acc.
    uint inter = N / 2u;
    uint j0 = group * 2u * upw;
    uint jn = min(2u * upw, inter - min(j0, inter));
    for (uint row0 = tid; row0 < K; row0 += MLP_RU * uint(WG_SIZE)) {
        float o[MLP_RU][MT];
        [[unroll]] for (uint r = 0u; r < MLP_RU; ++r)
            [[unroll]] for (uint m = 0u; m < uint(MT); ++m) o[r][m] = 0.0;
        down_rows(row0, j0, jn, o);
        [[unroll]] for (uint r = 0u; r < MLP_RU; ++r) {
            uint row = row0 + r * uint(WG_SIZE);
            [[unroll]] for (uint m = 0u; m < uint(MT); ++m)
                if (row < K && m0 + m < M) atomicAdd(accb[(m0 + m) * K + row], o[r][m]);
        }
    }

    // The last workgroup to arrive writes y = x + acc and resets acc and
    // the counter.
    memoryBarrierBuffer();
    barrier();
    if (tid == 0u) is_last = atomicAdd(counter[0], 1u) == wgs - 1u ? 1u : 0u;
    barrier();
    if (is_last != 0u) {
        memoryBarrierBuffer();
        for (uint i = tid; i < M * K; i += uint(WG_SIZE)) {
            float v = atomicAdd(accb[i], 0.0);
            accb[i] = 0.0;
            y[i] = res[i] + v;
        }
        if (tid == 0u) counter[0] = 0u;
    }
}
