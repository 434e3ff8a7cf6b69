#version 450
// A chain of up to four skinny linear layers in one persistent dispatch
// (ops::linear_chain): stage s computes y_s = epilogue_s(x̂_s · W_sᵀ) for
// M ≤ MT rows, x̂ the f32 rows of x_s (RMSNorm-ed as they are read when
// the stage says so) and W_s stored [N, K] row-major in WTYPE, and every
// stage may read what the earlier ones wrote. Between stages the
// workgroups meet at a device-wide barrier; the grid is at most what the
// adapter keeps resident at once (the host's rule), and every spin is
// bounded: one that runs out adds 1 to the fault word and goes on (the
// results are then wrong, and the host reports it).
//
// Why one dispatch: a decoder layer's projections are too small to reach
// memory bandwidth one launch at a time (each pays a launch, a ramp and a
// drain). Here a workgroup that has finished its share of stage s loads
// the weights of its first step of stage s + 1 (they do not depend on
// stage s) before it waits at the barrier, so the next stage's stream
// is in flight while the last workgroups of stage s drain.
//
// Work split, per stage: units of R = 4 rows of W (with the SiLU·mul
// epilogue, 2 gate rows j and the matching up rows N/2 + j); workgroup g
// of G takes units [g·U/G, (g+1)·U/G) in passes of at most `pass_units`
// (what its shared memory holds); a pass's chunks (16-byte loads of W:
// 8 16-bit or 4 f32 weights) laid end to end are cut into one equal
// contiguous range per subgroup, which may span the end of one unit and
// the start of the next. Each subgroup sums its part of each unit it
// touches (its lanes split the chunks, two per step), finishes the sums
// with subgroupAdd and leaves them in shared memory; after a workgroup
// barrier each output adds its parts in subgroup order and is stored with
// its epilogue.
//
// Push constants: per stage (M, K, N, flags), flags bits 0-1 the epilogue
// (0 store, 1 add the residual, 2 SiLU(gate)·up of a merged gate|up
// weight: y is [M, N/2]), bit 2 the RMSNorm prologue (with eps[s] and the
// norm weight G_s).
//
// Visibility across workgroups: the activations are `coherent` (their
// loads skip the compute unit's cache, which other workgroups' stores do
// not update; a plain load read stale activations on an H200 from two
// workgroups on), and each stage reads its x once, into shared memory.
// The barrier is the classic one: atomics, with memoryBarrierBuffer
// around them ordering each invocation's stores before its workgroup's
// arrival. (The Vulkan memory model's form, nonprivate activations and
// acquire/release barriers with MakeAvailable / MakeVisible, was correct
// but took a decode layer's chain from 95 µs of separate launches to
// 128-136 µs on an H100.)
//
// The file itself: bf16 weights, up to 4 rows; the variants:
// variant: linear_chain_f32_m1 WTYPE_F32=1 MT=1
// variant: linear_chain_f32 WTYPE_F32=1 MT=4
// variant: linear_chain_f16_m1 WTYPE_F16=1 MT=1
// variant: linear_chain_f16 WTYPE_F16=1 MT=4
// variant: linear_chain_bf16_m1 WTYPE_BF16=1 MT=1
#define ACT coherent
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
#include "activations.glsl"

#define WG_SIZE 512
layout(local_size_x = WG_SIZE) in;
#ifndef MT
#define MT 4
#endif
#define R 4u
// 16-byte chunks per row each lane loads per step: 4 at one row (16 loads
// in flight per lane), 2 at four rows (the 16 sums need registers too).
#if MT == 1
#define CPS 4u
#else
#define CPS 2u
#endif

#if !defined(WTYPE_F32) && !defined(WTYPE_F16)
#define WTYPE_BF16 1
#endif
#if defined(WTYPE_F32)
#define WV vec4
#define WVEC 4u
#else
#define WV uvec4
#define WVEC 8u
#endif

// [arrivals, generation, own fault count, unused]
layout(set = 0, binding = 0) buffer Sync { uint sync_w[]; };
layout(set = 0, binding = 1) buffer Fault { uint fault_w[]; };
// Stage s's buffers at bindings 2 + 5s ... 6 + 5s: x, W, residual, y, norm
// weight. The activations are plain (neither readonly nor writeonly): a
// later stage reads what an earlier one wrote, through another binding.
layout(set = 0, binding = 2) ACT buffer X0 { vec4 x_0[]; };
layout(set = 0, binding = 3) readonly buffer W0 { WV w_0[]; };
layout(set = 0, binding = 4) ACT buffer Q0 { float r_0[]; };
layout(set = 0, binding = 5) ACT buffer Y0 { float y_0[]; };
layout(set = 0, binding = 6) readonly buffer G0 { vec4 g_0[]; };
layout(set = 0, binding = 7) ACT buffer X1 { vec4 x_1[]; };
layout(set = 0, binding = 8) readonly buffer W1 { WV w_1[]; };
layout(set = 0, binding = 9) ACT buffer Q1 { float r_1[]; };
layout(set = 0, binding = 10) ACT buffer Y1 { float y_1[]; };
layout(set = 0, binding = 11) readonly buffer G1 { vec4 g_1[]; };
layout(set = 0, binding = 12) ACT buffer X2 { vec4 x_2[]; };
layout(set = 0, binding = 13) readonly buffer W2 { WV w_2[]; };
layout(set = 0, binding = 14) ACT buffer Q2 { float r_2[]; };
layout(set = 0, binding = 15) ACT buffer Y2 { float y_2[]; };
layout(set = 0, binding = 16) readonly buffer G2 { vec4 g_2[]; };
layout(set = 0, binding = 17) ACT buffer X3 { vec4 x_3[]; };
layout(set = 0, binding = 18) readonly buffer W3 { WV w_3[]; };
layout(set = 0, binding = 19) ACT buffer Q3 { float r_3[]; };
layout(set = 0, binding = 20) ACT buffer Y3 { float y_3[]; };
layout(set = 0, binding = 21) readonly buffer G3 { vec4 g_3[]; };

layout(push_constant) uniform P {
    uvec4 dims[4];
    vec4 eps;
    uint stages;
    uint fault_at;
    uint spin_limit;
};

// Per-subgroup sums of the units a pass touches: SLOTS floats in all.
#define SLOTS 2048u
shared float part[SLOTS];
// Each subgroup's part of the norm's sums of squares (subgroups of at
// least 8 lanes; 4 rows' worth in every variant).
#define MAX_SGS (uint(WG_SIZE) / 8u)
shared float norm_part[4u * MAX_SGS];
// The stage's x (M rows of K, normalised when the stage has the norm),
// read once per stage from memory: the products read it here. XV vec4s,
// what the adapter's shared memory holds beside the rest (the host sets
// it; M·K ≤ 4·XV).
layout(constant_id = 0) const uint XV = 2432u;
shared vec4 xs[XV];

// The weights of this subgroup's first step of the next stage, loaded
// before the device-wide barrier.
WV pre[CPS][R];
float xscale[MT];

// One stored 16-byte chunk of weights as two vec4 (f32: one, hi unused).
void wdecode(WV w, out vec4 lo, out vec4 hi) {
#if defined(WTYPE_F32)
    lo = w;
    hi = vec4(0.0);
#elif defined(WTYPE_F16)
    lo = vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
    hi = vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w));
#else
    lo = uintBitsToFloat(uvec4(w.x << 16, w.x & 0xffff0000u, w.y << 16, w.y & 0xffff0000u));
    hi = uintBitsToFloat(uvec4(w.z << 16, w.z & 0xffff0000u, w.w << 16, w.w & 0xffff0000u));
#endif
}

// Units of a stage of N rows (pairs: SiLU·mul).
uint units_of(uint N, bool pairs) {
    return pairs ? (N / 2u + R / 2u - 1u) / (R / 2u) : (N + R - 1u) / R;
}

// The W row of slot i of unit u; N when the slot is past the end.
uint wrow(uint u, uint i, uint N, bool pairs) {
    if (pairs) {
        uint half_n = N / 2u;
        uint j = u * (R / 2u) + i % (R / 2u);
        if (j >= half_n) return N;
        return i < R / 2u ? j : half_n + j;
    }
    uint r = u * R + i;
    return r < N ? r : N;
}

// The units one pass of a workgroup takes: every subgroup's range then
// touches at most SLOTS / (S·R·MT) units.
uint pass_units(uint S) {
    uint j = SLOTS / (S * R * uint(MT));
    return S * (j - 1u);
}

// A stage's geometry for this workgroup: its units [u0, u1).
uvec2 wg_units(uint U) {
    uint g = gl_WorkGroupID.x, G = gl_NumWorkGroups.x;
    return uvec2(g * U / G, (g + 1u) * U / G);
}

// Subgroup sg's chunk range [a, b) of a pass of n units of C chunks, and
// its span (the range's length before clamping).
uvec3 sg_range(uint n, uint C, uint sg, uint S) {
    uint total = n * C;
    uint span = (total + S - 1u) / S;
    uint a = min(sg * span, total);
    return uvec3(a, min(a + span, total), span);
}

// Adds one step's products to acc: the chunks k, k + width, ... (those
// before ke) of the R weight rows in wv times x in shared memory.
void products(WV wv[CPS][R], uint k, uint ke, uint width, uint M, uint k4,
              inout float acc[R][MT]) {
    [[unroll]] for (uint c = 0u; c < CPS; ++c) {
        uint kc = k + c * width;
        uint kk = kc < ke ? kc : k;
        [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
            if (m >= M) continue;
#if defined(WTYPE_F32)
            vec4 xa = xs[m * k4 + kk];
#else
            vec4 xa = xs[m * k4 + 2u * kk];
            vec4 xb = xs[m * k4 + 2u * kk + 1u];
#endif
            [[unroll]] for (uint i = 0u; i < R; ++i) {
                vec4 lo, hi;
                wdecode(wv[c][i], lo, hi);
#if defined(WTYPE_F32)
                acc[i][m] += dot(lo, xa);
#else
                acc[i][m] += dot(lo, xa) + dot(hi, xb);
#endif
            }
        }
    }
}

// The sum, in subgroup order, of the parts of output slot (i, m) of the
// pass's unit ul: the subgroups whose ranges (of `span` chunks each) meet
// the unit's chunks each left one in their slot for it.
float sum_parts(uint ul, uint i, uint m, uint C, uint span, uint S, uint J) {
    uint s0 = ul * C / span, s1 = min(((ul + 1u) * C - 1u) / span, S - 1u);
    float a = 0.0;
    for (uint s = s0; s <= s1; ++s)
        a += part[((s * J + (ul - s * span / C)) * R + i) * uint(MT) + m];
    return a;
}

// The device-wide barrier: every workgroup's writes before it are seen by
// every read after it. One invocation per workgroup arrives; the last to
// arrive resets the arrival count and moves the generation on.
void grid_sync() {
    memoryBarrierBuffer();
    barrier();
    if (gl_LocalInvocationIndex == 0u) {
        uint seen = atomicAdd(sync_w[1], 0u);
        memoryBarrierBuffer();
        if (atomicAdd(sync_w[0], 1u) == gl_NumWorkGroups.x - 1u) {
            atomicExchange(sync_w[0], 0u);
            memoryBarrierBuffer();
            atomicAdd(sync_w[1], 1u);
        } else {
            uint n = 0u;
            while (atomicAdd(sync_w[1], 0u) == seen) {
                if (++n >= spin_limit) {
                    atomicAdd(fault_w[fault_at], 1u);
                    break;
                }
            }
        }
        memoryBarrierBuffer();
    }
    barrier();
    memoryBarrierBuffer();
}

#define CS 0
#define CX x_0
#define CW w_0
#define CQ r_0
#define CY y_0
#define CG g_0
#define CPRE chain_pre0
#define CRUN chain_run0
#include "linear_chain_stage.glsl"
#undef CS
#undef CX
#undef CW
#undef CQ
#undef CY
#undef CG
#undef CPRE
#undef CRUN
#define CS 1
#define CX x_1
#define CW w_1
#define CQ r_1
#define CY y_1
#define CG g_1
#define CPRE chain_pre1
#define CRUN chain_run1
#include "linear_chain_stage.glsl"
#undef CS
#undef CX
#undef CW
#undef CQ
#undef CY
#undef CG
#undef CPRE
#undef CRUN
#define CS 2
#define CX x_2
#define CW w_2
#define CQ r_2
#define CY y_2
#define CG g_2
#define CPRE chain_pre2
#define CRUN chain_run2
#include "linear_chain_stage.glsl"
#undef CS
#undef CX
#undef CW
#undef CQ
#undef CY
#undef CG
#undef CPRE
#undef CRUN
#define CS 3
#define CX x_3
#define CW w_3
#define CQ r_3
#define CY y_3
#define CG g_3
#define CPRE chain_pre3
#define CRUN chain_run3
#include "linear_chain_stage.glsl"

void main() {
    chain_pre0();
    chain_run0();
    if (stages > 1u) {
        chain_pre1();
        grid_sync();
        chain_run1();
    }
    if (stages > 2u) {
        chain_pre2();
        grid_sync();
        chain_run2();
    }
    if (stages > 3u) {
        chain_pre3();
        grid_sync();
        chain_run3();
    }
}
