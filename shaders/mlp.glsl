// Fused SwiGLU MLP for a few rows of x: y = x + (silu(n·Wgᵀ) * (n·Wuᵀ))·Wdᵀ,
// n = x, or RMSNorm(x) with NORM (as linear.glsl takes it, scale last),
// in one dispatch. Wgu is the merged [2·I, K] gate|up weight (gate rows
// first), Wd the [K, I] down weight, both as nn.Linear stores them, in
// f32, f16 or bf16 (WTYPE_*); x and y are [M, K] f32, y may be x.
//
// The two layers of the block as tasks of one dispatch, with no launch
// boundary between them. Each workgroup takes a ticket (a device-wide
// counter) and runs one task: tickets [0, mchunks · gtasks) are gate|up
// tasks, the rest down tasks, row chunk by row chunk. A gate|up task is
// linear.glsl's products for `upw` units (2 features each: their gate and
// up rows, one subgroup per unit over all of K), stored as
// h = silu(gate) · up to the [M, I] f32 scratch `h`. A down task is `dupw`
// units of 4 rows of Wd, `dksub` subgroups sharing each unit's I (part p
// of a unit reads features [p·span, (p+1)·span) in chunks of 16 bytes or
// elements), the parts added in part order in shared memory and stored
// as y = x + sum, as ops::linear's narrower workgroups do.
//
// Part p of row chunk c waits for the gate|up tasks that write its
// features: each such task, after its stores, adds 1 to the part's
// counter (release: a buffer memory barrier first); the part's subgroup
// spins on an atomic read of the counter until every one has (acquire: a
// buffer memory barrier after), then reads h through L2 (`coherent`).
// Tickets are taken in the order workgroups start, and every gate|up
// ticket precedes every down ticket, so a waiting workgroup waits only on
// tasks that running workgroups hold and finish without waiting: no
// schedule deadlocks, whatever the grid's size against the GPU. The
// workgroup that finishes last sets the counters back to 0 for the next
// dispatch. Down tasks of a chunk write y only after all of its gate|up
// tasks (which read x) are done, so y may be x.
//
// Bindings 0-7 as linear.glsl's (W = Wgu, Res = x, Y = y); then Wd as
// 16-byte chunks and as elements, h as vec4s and as elements, and the
// counters: [0] tickets, [1] finished workgroups, [2 + c·dksub + p] part
// p of row chunk c. Grid: x = mchunks · (gtasks + dtasks), y = 1.
#define MLP
#include "linear.glsl"

#if defined(WTYPE_F32)
layout(set = 0, binding = 8) readonly buffer D4 { vec4 d4[]; };
layout(set = 0, binding = 9) readonly buffer D1 { float d1[]; };
#else
layout(set = 0, binding = 8) readonly buffer D4 { uvec4 d4[]; };
layout(set = 0, binding = 9) readonly buffer D1 { uint16_t d1[]; };
#endif
layout(set = 0, binding = 10) coherent buffer H4 { vec4 h4[]; };
layout(set = 0, binding = 11) coherent buffer H1 { float h1[]; };
layout(set = 0, binding = 12) coherent buffer Cnt { uint cnt[]; };

shared uint task_ticket;

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

// Features of h per chunk of a Wd row (16 bytes where `dvec`, else 1),
// and the chunks of a row.
uint dwidth() { return dvec != 0u ? WVEC : 1u; }
uint dchunks() { return (N / 2u) / dwidth(); }
// Chunks of each of the dksub parts.
uint dspan() { return (dchunks() + dksub - 1u) / dksub; }

// Gate|up tasks of one row chunk that write features of part p.
uint part_need(uint p) {
    uint inter = N / 2u, f = 2u * upw, w = dwidth();
    uint fb = min(p * dspan(), dchunks()) * w;
    uint fe = min(min((p + 1u) * dspan(), dchunks()) * w, inter);
    return fb >= fe ? 0u : (fe - 1u) / f - fb / f + 1u;
}

// Gate|up task g of row chunk c: its units' h, then its parts' counters.
void gate_up_task(uint g, uint c, uint lane, uint width) {
    uint m0 = c * uint(MT);
    uint xr[MT];
    [[unroll]] for (uint m = 0u; m < uint(MT); ++m) xr[m] = min(m0 + m, M - 1u);
#if defined(NORM)
    [[unroll]] for (uint m = 0u; m < uint(MT); ++m) xscale[m] = 1.0;
#endif
    uint inter = N / 2u;
    for (uint lu = gl_SubgroupID; lu < upw; lu += gl_NumSubgroups) {
        uint u = g * upw + lu;
        if (wrow(u, 0u) >= N) break;  // uniform: this unit and later ones are past the end
        uint rows[R];
        [[unroll]] for (uint i = 0u; i < R; ++i) rows[i] = min(wrow(u, i), N - 1u);
        float acc[R][MT];
        [[unroll]] for (uint i = 0u; i < R; ++i)
            [[unroll]] for (uint m = 0u; m < uint(MT); ++m) acc[i][m] = 0.0;
#if defined(NORM)
        [[unroll]] for (uint m = 0u; m < uint(MT); ++m) xss[m] = 0.0;
#endif
        accumulate(rows, xr, 0u, 0u, lane, width, acc);
        [[unroll]] for (uint i = 0u; i < R; ++i)
            [[unroll]] for (uint m = 0u; m < uint(MT); ++m) acc[i][m] = subgroupAdd(acc[i][m]);
#if defined(NORM)
        [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
            float sc = inversesqrt(subgroupAdd(xss[m]) / float(K) + eps);
            [[unroll]] for (uint i = 0u; i < R; ++i) acc[i][m] *= sc;
        }
#endif
        [[unroll]] for (uint i = 0u; i < R / 2u; ++i) {
            uint j = u * (R / 2u) + i;
            [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
                uint t = i * uint(MT) + m;
                if (OWNS(t, lane, width) && j < inter && m0 + m < M) {
                    float gv = acc[i][m];
                    h1[(m0 + m) * inter + j] = gv * vkc_sigmoid(gv) * acc[i + R / 2u][m];
                }
            }
        }
    }
    // Release: every subgroup's stores of h before the counters move.
    memoryBarrierBuffer();
    barrier();
    if (gl_LocalInvocationIndex == 0u) {
        uint f = 2u * upw, w = dwidth();
        uint a = g * f, b = min(a + f, inter);
        uint p0 = min((a / w) / dspan(), dksub - 1u);
        uint p1 = min(((b - 1u) / w) / dspan(), dksub - 1u);
        for (uint p = p0; p <= p1; ++p) atomicAdd(cnt[2u + c * dksub + p], 1u);
    }
}

// Adds chunks [b, e) of Wd's `rows` times h's rows `hr` into acc (per
// lane; the subgroup's lanes split the chunks, two per lane and step).
void down_accumulate(uint rows[R], uint hr[MT], uint b, uint e, uint lane, uint width,
                     inout float acc[R][MT]) {
    uint inter = N / 2u;
    if (dvec != 0u) {
        uint kv = inter / WVEC, k4 = inter / 4u;
        for (uint k = b + lane; k < e; k += 2u * width) {
            uint k2 = k + width;
            bool two = k2 < e;
            [[unroll]] for (uint h = 0u; h < 2u; ++h) {
                uint kk = h == 0u ? k : k2;
                bool ok = h == 0u || two;
#if defined(WTYPE_F32)
                vec4 wv[R];
                [[unroll]] for (uint i = 0u; i < R; ++i) wv[i] = ok ? d4[rows[i] * kv + kk] : vec4(0.0);
                [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
                    vec4 hv = ok ? h4[hr[m] * k4 + kk] : vec4(0.0);
                    [[unroll]] for (uint i = 0u; i < R; ++i) acc[i][m] += dot(hv, wv[i]);
                }
#else
                vec4 wlo[R], whi[R];
                [[unroll]] for (uint i = 0u; i < R; ++i)
                    wdecode(ok ? d4[rows[i] * kv + kk] : uvec4(0u), wlo[i], whi[i]);
                [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
                    vec4 ha = ok ? h4[hr[m] * k4 + 2u * kk] : vec4(0.0);
                    vec4 hb = ok ? h4[hr[m] * k4 + 2u * kk + 1u] : vec4(0.0);
                    [[unroll]] for (uint i = 0u; i < R; ++i)
                        acc[i][m] += dot(ha, wlo[i]) + dot(hb, whi[i]);
                }
#endif
            }
        }
    } else {
        for (uint k = b + lane; k < e; k += width) {
            float wv[R];
            [[unroll]] for (uint i = 0u; i < R; ++i) wv[i] = dscalar(rows[i] * inter + k);
            [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
                float hv = h1[hr[m] * inter + k];
                [[unroll]] for (uint i = 0u; i < R; ++i) acc[i][m] = fma(hv, wv[i], acc[i][m]);
            }
        }
    }
}

// Down task d of row chunk c: y = x + h·Wdᵀ for its units' rows.
void down_task(uint d, uint c, uint lane, uint width) {
    uint m0 = c * uint(MT);
    uint hr[MT];
    [[unroll]] for (uint m = 0u; m < uint(MT); ++m) hr[m] = min(m0 + m, M - 1u);
    uint items = dupw * dksub;
    for (uint it = gl_SubgroupID; it < items; it += gl_NumSubgroups) {
        uint lu = it / dksub, p = it % dksub;
        uint u = d * dupw + lu;
        if (u * R >= K) break;  // uniform: this item and later ones are past the end
        uint rows[R];
        [[unroll]] for (uint i = 0u; i < R; ++i) rows[i] = min(u * R + i, K - 1u);
        // Acquire: wait for the part's gate|up tasks, then order the reads.
        uint need = part_need(p);
        if (subgroupElect()) {
            // Between polls, a pause of dependent arithmetic (its result
            // kept by the loop's exit test), so that waiting subgroups
            // leave the counter's L2 slice to the tasks that add to it.
            float pause = float(need);
            while (atomicAdd(cnt[2u + c * dksub + p], 0u) < need && pause >= 0.0) {
                for (uint i = 0u; i < 64u; ++i) pause = fma(pause, 0.999, 0.5);
            }
        }
        subgroupBarrier();
        memoryBarrierBuffer();
        float acc[R][MT];
        [[unroll]] for (uint i = 0u; i < R; ++i)
            [[unroll]] for (uint m = 0u; m < uint(MT); ++m) acc[i][m] = 0.0;
        uint b = min(p * dspan(), dchunks()), e = min(b + dspan(), dchunks());
        down_accumulate(rows, hr, b, e, lane, width, acc);
        [[unroll]] for (uint i = 0u; i < R; ++i)
            [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
                float a = subgroupAdd(acc[i][m]);
                uint t = i * uint(MT) + m;
                if (t % width == lane) kpart_sum[it * R * uint(MT) + t] = a;
            }
    }
    barrier();
    // Each unit's parts added in part order, then stored with x added.
    for (uint lu = gl_SubgroupID; lu < dupw; lu += gl_NumSubgroups) {
        uint u = d * dupw + lu;
        if (u * R >= K) break;
        [[unroll]] for (uint i = 0u; i < R; ++i)
            [[unroll]] for (uint m = 0u; m < uint(MT); ++m) {
                uint t = i * uint(MT) + m, row = u * R + i;
                if (t % width == lane && row < K && m0 + m < M) {
                    float a = 0.0;
                    for (uint p = 0u; p < dksub; ++p) a += kpart_sum[(lu * dksub + p) * R * uint(MT) + t];
                    uint at = (m0 + m) * K + row;
                    y[at] = res[at] + a;
                }
            }
    }
}

void main() {
    uint lane = gl_SubgroupInvocationID;
    uint width = gl_SubgroupSize;
    uint tid = gl_LocalInvocationIndex;
    if (tid == 0u) task_ticket = atomicAdd(cnt[0], 1u);
    barrier();
    uint t = task_ticket;
    uint gate_up_tickets = mchunks * gtasks;
    if (t < gate_up_tickets) {
        gate_up_task(t % gtasks, t / gtasks, lane, width);
    } else {
        uint d = t - gate_up_tickets;
        down_task(d % dtasks, d / dtasks, lane, width);
    }
    // The last workgroup to finish sets the counters back to 0.
    memoryBarrierBuffer();
    barrier();
    if (tid == 0u) {
        uint done = atomicAdd(cnt[1], 1u);
        if (done == gl_NumWorkGroups.x - 1u) {
            for (uint i = 0u; i < 2u + mchunks * dksub; ++i) atomicExchange(cnt[i], 0u);
        }
    }
}
