// The output projection's workgroups of nn_attn_decode.comp's OPROJ
// variants: y[m, n] += sum_k o[m, k] · W[n, k] for the pm rows of the
// attention output o ([pm, pk], f32, written by the same dispatch's
// attention workgroups) and W [pn, pk] row-major (nn.Linear's [out, in]):
// f32 (PW_F32), f16 (PW_F16) or bfloat16 (16-bit words widened exactly).
//
// Work split, as the skinny linear kernel's narrowed form (linear.glsl):
// a unit is PR = 4 consecutive rows of W; workgroup pw owns units
// pw·upw .. + upw, and each unit's K is cut into ksub consecutive parts of
// kspan 16-byte chunks. Work item it = unit · ksub + part goes to subgroup
// it % subgroups (items past the first of a subgroup in turn); its lanes
// read chunks lane, lane + width, ... of the part for the unit's 4 rows,
// STEP chunks per lane and step, and o's matching 16 bytes (o4, coherent).
//
// The order of events: each subgroup loads its first item's first step of
// W (it does not depend on the attention), invocation 0 waits until the
// head groups' counter cnt[proj_y0] reaches proj_y0 (every head group's
// output written and released), the workgroup meets at a barrier and an
// acquire fence, and the products follow. The first step's W is used at
// once, so the registers holding it are free for the loop's (the kernel's
// registers are the larger of the attention's and this part's). Each
// item's sums are finished by subgroupAdd into shared memory, and after a
// barrier each output adds its unit's parts in part order and y's old
// value. The workgroups then count themselves on cnt[proj_y0 + 1]; the
// last sets both counters back to 0 for the next launch.
//
// The attention's workgroups come first in the grid and never wait, so the
// waits end wherever workgroups start in grid order (NVIDIA's hardware,
// lavapipe's thread pool).

#define PR 4u
#define STEP 2u
#define PMT_MAX 4u
// Rows of o the sums hold (pm ≤ PMT): specialization constant 1.
layout(constant_id = 1) const uint PMT = PMT_MAX;
// Each item's finished sums: at most 64 items per workgroup.
shared float psum[64u * PR * PMT_MAX];

#if defined(PW_F32)
#define PWT vec4
#define PW_ZERO vec4(0.0)
#define PWVEC 4u
#else
#define PWT uvec4
#define PW_ZERO uvec4(0u)
#define PWVEC 8u
#endif

// The PWVEC weights of a 16-byte chunk as f32: lo, then hi (zeros for f32).
void pw_decode(PWT w, out vec4 lo, out vec4 hi) {
#if defined(PW_F32)
    lo = w;
    hi = vec4(0.0);
#elif defined(PW_F16)
    lo = vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
    hi = vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w));
#else
    lo = uintBitsToFloat(uvec4(w.x << 16, w.x & 0xffff0000u, w.y << 16, w.y & 0xffff0000u));
    hi = uintBitsToFloat(uvec4(w.z << 16, w.z & 0xffff0000u, w.w << 16, w.w & 0xffff0000u));
#endif
}

// Adds chunk kc of the unit's rows (w, as loaded) times o's rows into acc.
void proj_chunk(PWT w[PR], uint kc, inout float acc[PR][PMT_MAX]) {
    uint e4 = kc * (PWVEC / 4u);
    [[unroll]] for (uint m = 0u; m < PMT_MAX; ++m) {
        if (m < PMT) {
            uint xb = min(m, pm - 1u) * (pk / 4u) + e4;
            vec4 xa = o4[xb];
#if !defined(PW_F32)
            vec4 xc = o4[xb + 1u];
#endif
            [[unroll]] for (uint i = 0u; i < PR; ++i) {
                vec4 lo, hi;
                pw_decode(w[i], lo, hi);
#if defined(PW_F32)
                acc[i][m] += dot(xa, lo);
#else
                acc[i][m] += dot(xa, lo) + dot(xc, hi);
#endif
            }
        }
    }
}

// Chunks [b, e) of item it's part of K, and its W rows (clamped; `live`
// false past the last row or the workgroup's items).
void proj_item(uint pw, uint it, out uint rows[PR], out uvec2 be, out bool live) {
    uint lu = it / ksub, part = it - lu * ksub;
    uint u = pw * upw + lu;
    uint kv = pk / PWVEC;
    uint b = min(part * kspan, kv);
    be = uvec2(b, min(b + kspan, kv));
    live = u * PR < pn && it < upw * ksub;
    [[unroll]] for (uint i = 0u; i < PR; ++i) rows[i] = min(u * PR + i, pn - 1u);
}

// Chunk kc (and the STEP · width after it, c = 0 .. STEP - 1 apart by
// width) of the rows, zeros at or past e.
void proj_load(uint rows[PR], uint k, uint e, uint width, out PWT w[STEP][PR]) {
    uint kv = pk / PWVEC;
    [[unroll]] for (uint c = 0u; c < STEP; ++c) {
        uint kc = k + c * width;
        [[unroll]] for (uint i = 0u; i < PR; ++i)
            w[c][i] = kc < e ? pw4[rows[i] * kv + kc] : PW_ZERO;
    }
}

// The steps from chunk k on.
void proj_steps(uint rows[PR], uint k, uint e, uint width, inout float acc[PR][PMT_MAX]) {
    for (; k < e; k += STEP * width) {
        PWT w[STEP][PR];
        proj_load(rows, k, e, width, w);
        [[unroll]] for (uint c = 0u; c < STEP; ++c)
            if (k + c * width < e) proj_chunk(w[c], k + c * width, acc);
    }
}

// Item it's sums, finished across the subgroup, into psum.
void proj_finish(uint it, uint lane, float acc[PR][PMT_MAX]) {
    [[unroll]] for (uint i = 0u; i < PR; ++i)
        [[unroll]] for (uint m = 0u; m < PMT_MAX; ++m) {
            if (m < PMT) {
                float s = subgroupAdd(acc[i][m]);
                if (lane == 0u) psum[(it * PR + i) * PMT_MAX + m] = s;
            }
        }
}

void project(uint pw, uint t) {
    uint lane = gl_SubgroupInvocationID, width = gl_SubgroupSize;
    uint sg = gl_SubgroupID, nsg = gl_NumSubgroups;
    uint items = upw * ksub;
    // The first item's first step of W, before the wait.
    uint rows0[PR];
    uvec2 be0;
    bool live0;
    proj_item(pw, sg, rows0, be0, live0);
    PWT w0[STEP][PR];
    proj_load(rows0, be0.x + lane, live0 ? be0.y : 0u, width, w0);
    if (t == 0u) {
        // An atomic read each time round (a plain load may be hoisted).
        while (atomicAdd(cnt[proj_y0], 0u) < proj_y0) {
        }
    }
    barrier();
    memoryBarrierBuffer();  // acquire: the head groups' outputs
    if (sg < items) {
        float acc[PR][PMT_MAX];
        [[unroll]] for (uint i = 0u; i < PR; ++i)
            [[unroll]] for (uint m = 0u; m < PMT_MAX; ++m) acc[i][m] = 0.0;
        if (live0) {
            uint k = be0.x + lane;
            [[unroll]] for (uint c = 0u; c < STEP; ++c)
                if (k + c * width < be0.y) proj_chunk(w0[c], k + c * width, acc);
            proj_steps(rows0, k + STEP * width, be0.y, width, acc);
        }
        proj_finish(sg, lane, acc);
    }
    for (uint it = sg + nsg; it < items; it += nsg) {
        uint rows[PR];
        uvec2 be;
        bool live;
        proj_item(pw, it, rows, be, live);
        float acc[PR][PMT_MAX];
        [[unroll]] for (uint i = 0u; i < PR; ++i)
            [[unroll]] for (uint m = 0u; m < PMT_MAX; ++m) acc[i][m] = 0.0;
        if (live) proj_steps(rows, be.x + lane, be.y, width, acc);
        proj_finish(it, lane, acc);
    }
    barrier();
    // Each output: its unit's parts in part order, added to y's value.
    for (uint j = t; j < upw * PR * PMT_MAX; j += LOCAL) {
        uint lu = j / (PR * PMT_MAX), rest = j - lu * (PR * PMT_MAX);
        uint i = rest / PMT_MAX, m = rest - i * PMT_MAX;
        uint row = (pw * upw + lu) * PR + i;
        if (m < pm && row < pn) {
            float s = 0.0;
            for (uint p = 0u; p < ksub; ++p) s += psum[((lu * ksub + p) * PR + i) * PMT_MAX + m];
            uint at = m * pn + row;
            py[at] = py[at] + s;
        }
    }
    if (t == 0u) {
        uint n = atomicAdd(cnt[proj_y0 + 1u], 1u) + 1u;
        if (n == proj_wgs) {
            // Every projection workgroup has passed its wait.
            atomicExchange(cnt[proj_y0], 0u);
            atomicExchange(cnt[proj_y0 + 1u], 0u);
        }
    }
}
