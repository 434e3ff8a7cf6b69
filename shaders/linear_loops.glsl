// Alternatives to two pieces of the skinny linear kernel (linear.glsl),
// chosen by macros. The built-in `_sg32` variants (16-bit weights on
// adapters whose subgroups have 32 lanes) use both: 1 row per pass with
// CPS_LOOP CPS=4 (CPS=2 in the `_c2` builds, for narrower workgroups) and
// BUTTERFLY, 4 rows with CPS_LOOP CPS=1 and BUTTERFLY.
// measure/examples/linear_probe times other combinations (PREFETCH,
// other CPS and UNIT_ROWS) from builds of the same source.
//
// CPS_LOOP (16-bit weights): the K loop with CPS chunks of 16 bytes per
// lane and step (linear.glsl's own loop has 2), every load bounds-tested;
// with PREFETCH the next step's W is loaded into registers before this
// step's products (slower on the H200 in every shape measured).
// BUTTERFLY (subgroups of BF_LANES = 32 lanes, R × MT ≤ 32 sums): the
// lanes' sums are finished by halving exchanges (shuffle-xor at 16, 8,
// ...: at each step a lane keeps half of its sums and adds its partner's
// half of the same ones), V - 1 + 5 − log2 V shuffles for V sums in place
// of 5·V for one subgroupAdd each; lane t << BF_SHIFT ends with sum t.
//
// H200, bf16 weights, Qwen3-4B shapes (docs/runs/2026-11-26c-h200-c5):
// 1 row, the merged gate|up (2560 → 2·9728) 31.6 → 27.9 µs, down (9728 →
// 2560, narrowed) 16.0 → 15.0, o (4096 → 2560) 8.0 → 7.6, q|k|v 9.6 →
// 9.7; 4 rows, gate|up 41.0 → 36.2 µs, down narrowed to 4 subgroups per
// unit 22.5 µs against 32.2 split over K.

#if defined(CPS_LOOP) && !defined(WTYPE_F32)
#ifndef CPS
#define CPS 2
#endif

// Adds chunk kk (16-bit weights of the unit's rows, decoded) into acc.
void cps_chunk(uvec4 w[R], uint kk, bool ok, uint xr[MT], uint k4, inout float acc[R][MT]) {
    vec4 wlo[R], whi[R];
    [[unroll]] for (uint i = 0u; i < R; ++i) wdecode(w[i], wlo[i], whi[i]);
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

void cps_loop(uint rows[R], uint xr[MT], uint b, uint e, uint kv, uint k4, uint lane,
              uint width, inout float acc[R][MT]) {
    uint stride = uint(CPS) * width;
#if defined(PREFETCH)
    uvec4 wn[CPS][R];
    [[unroll]] for (uint c = 0u; c < uint(CPS); ++c) {
        uint kc = b + lane + c * width;
        [[unroll]] for (uint i = 0u; i < R; ++i)
            wn[c][i] = kc < e ? w4[rows[i] * kv + kc] : uvec4(0u);
    }
#endif
    for (uint k = b + lane; k < e; k += stride) {
        uvec4 wraw[CPS][R];
#if defined(PREFETCH)
        [[unroll]] for (uint c = 0u; c < uint(CPS); ++c) {
            uint kc = k + stride + c * width;
            [[unroll]] for (uint i = 0u; i < R; ++i) {
                wraw[c][i] = wn[c][i];
                wn[c][i] = kc < e ? w4[rows[i] * kv + kc] : uvec4(0u);
            }
        }
#else
        [[unroll]] for (uint c = 0u; c < uint(CPS); ++c) {
            uint kc = k + c * width;
            [[unroll]] for (uint i = 0u; i < R; ++i)
                wraw[c][i] = kc < e ? w4[rows[i] * kv + kc] : uvec4(0u);
        }
#endif
        [[unroll]] for (uint c = 0u; c < uint(CPS); ++c) {
            uint kk = k + c * width;
            cps_chunk(wraw[c], kk, kk < e, xr, k4, acc);
        }
    }
}
#endif

#if defined(BUTTERFLY)
// The subgroup size it is compiled for (32; 8 to check it on lavapipe).
#ifndef BF_LANES
#define BF_LANES 32
#endif
const uint BF_V = R * uint(MT);
const uint BF_LV = BF_V >= 32u ? 5u : BF_V >= 16u ? 4u : BF_V >= 8u ? 3u : BF_V >= 4u ? 2u
                 : BF_V >= 2u ? 1u : 0u;
const uint BF_LL = BF_LANES >= 32 ? 5u : BF_LANES >= 16 ? 4u : 3u;
#define BF_SHIFT (BF_LL - BF_LV)
// One exchange at offset o, step s (0 for o = 16): while more than one sum
// is left per lane, halve them; then plain adds.
#define BF_STEP(o, s)                                                              \
    {                                                                              \
        const uint h = BF_V >> ((s) + 1u);                                         \
        bool up = (lane & (o)) != 0u;                                              \
        if (h >= 1u) {                                                             \
            [[unroll]] for (uint j = 0u; j < h; ++j) {                             \
                float sd = up ? v[j] : v[j + h];                                   \
                float kp = up ? v[j + h] : v[j];                                   \
                v[j] = kp + subgroupShuffleXor(sd, (o));                           \
            }                                                                      \
        } else {                                                                   \
            v[0] += subgroupShuffleXor(v[0], (o));                                 \
        }                                                                          \
    }

void butterfly(inout float acc[R][MT], uint lane) {
    float v[BF_V];
    [[unroll]] for (uint i = 0u; i < R; ++i)
        [[unroll]] for (uint m = 0u; m < uint(MT); ++m) v[i * uint(MT) + m] = acc[i][m];
#if BF_LANES >= 32
    BF_STEP(16u, 0u)
    BF_STEP(8u, 1u)
    BF_STEP(4u, 2u)
    BF_STEP(2u, 3u)
    BF_STEP(1u, 4u)
#elif BF_LANES >= 16
    BF_STEP(8u, 0u)
    BF_STEP(4u, 1u)
    BF_STEP(2u, 2u)
    BF_STEP(1u, 3u)
#else
    BF_STEP(4u, 0u)
    BF_STEP(2u, 1u)
    BF_STEP(1u, 2u)
#endif
    // The lane of gate sum t (t < H, the first R/2 rows' sums) also takes
    // sum t + H (the up row's, SiLU·mul's other factor): its lane differs
    // in one bit.
    const uint H = (R / 2u) * uint(MT);
    float other = subgroupShuffleXor(v[0], H << BF_SHIFT);
    uint mine = lane >> BF_SHIFT;
    [[unroll]] for (uint i = 0u; i < R; ++i)
        [[unroll]] for (uint m = 0u; m < uint(MT); ++m)
            if (i * uint(MT) + m == mine) {
                acc[i][m] = v[0];
                if (i < R / 2u) acc[i + R / 2u][m] = other;
            }
}
#endif
