// The output projection's workgroups of nn_attn_decode.comp's OPROJ
// variants: y[n] += sum_k o[k] · W[n, k] for one sequence's attention
// output o ([pk] f32, written by the same dispatch's attention
// workgroups) and W [pn, pk] row-major (nn.Linear's [out, in]) with
// 16-bit elements: f16 (PW_F16) or bfloat16 (16-bit words widened
// exactly).
//
// The projection's weights are read while the attention runs, not after
// it: every workgroup loads all of its rows of W onto the chip, then
// waits. Workgroup pw owns rows pw·rw .. + rw of W (y's elements); a row
// is pk / 8 chunks of 16 bytes, and invocation t holds chunks t + j·LOCAL
// (j < cpt) of each of them: slot s = i·cpt + j for row i, at most SLOTS
// = rw·cpt of them, the first REG_SLOTS in registers and the others in
// shared memory (each invocation reads back only its own). The host sizes
// rw and the grid so that every workgroup's rows fit its slots (cpt ≤
// CPT_MAX).
//
// The order of events: the loads of the workgroup's slots and of its rows'
// old y values leave at the workgroup's start (none depends on the
// attention); invocation 0 waits until the head groups' counter
// cnt[proj_y0] reaches proj_y0 (every head group's output written and
// released: the counter's writers fence first); the workgroup meets at a
// barrier and an acquire fence; each invocation reads its chunks of o
// (cpt pairs of 16 bytes, coherent: another workgroup wrote them) and
// multiplies its slots; each slot's sums are finished by subgroupAdd into
// shared memory, and after a barrier invocation i < rw adds row i's sums
// in subgroup and chunk order to y's old value and stores it. The
// workgroups then count themselves on cnt[proj_y0 + 1]; the last sets both
// counters back to 0 for the next launch.
//
// The attention's workgroups come first in the grid and never wait, so the
// waits end wherever workgroups start in grid order (NVIDIA's hardware);
// the host takes this form on GPUs only (lavapipe's loops end after a
// fixed count of iterations).

#ifndef REG_SLOTS
#define REG_SLOTS 4u
#endif
#ifndef SMEM_SLOTS
#define SMEM_SLOTS 7u
#endif
#define SLOTS (REG_SLOTS + SMEM_SLOTS)
#define CPT_MAX 2u
// Subgroups of at least 8 lanes: at most LOCAL / 8 of them.
#define PROJ_SGS (LOCAL / 8u)
// Loads in flight: each group of PGROUP slots' loads waits for the last
// of the group before (a dependency through pzero, which is 0); SLOTS:
// all at once; 0: the loads after the wait.
layout(constant_id = 1) const uint PGROUP = SLOTS;
// Dependent multiply-adds between two polls of the counter (0: none);
// PGROUP 99: no wait at all (wrong results: a measurement's knob).
layout(constant_id = 2) const uint POLL_GAP = 0u;
shared uvec4 wsm[max(SMEM_SLOTS, 1u) * LOCAL];
shared float psum[PROJ_SGS * SLOTS];

// The 8 weights of a 16-byte chunk as f32: lo, then hi.
void pw_decode(uvec4 w, out vec4 lo, out vec4 hi) {
#if defined(PW_F16)
    lo = vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
    hi = vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w));
#else
    lo = uintBitsToFloat(uvec4(w.x << 16, w.x & 0xffff0000u, w.y << 16, w.y & 0xffff0000u));
    hi = uintBitsToFloat(uvec4(w.z << 16, w.z & 0xffff0000u, w.w << 16, w.w & 0xffff0000u));
#endif
}

// Invocation 0 waits for the head groups' outputs; the workgroup meets
// it at a barrier and an acquire fence.
void proj_wait(uint t) {
    if (t == 0u && PGROUP < 97u) {
        // An atomic read each time round (a plain load may be hoisted).
        float f = float(t) + 1.0;
        while (atomicAdd(cnt[proj_y0], 0u) < proj_y0) {
            for (uint i = 0u; i < POLL_GAP; ++i) f = f * 0.999 + 0.001;
        }
        if (f == 12345.0) py[0] = f;
    }
    barrier();
    memoryBarrierBuffer();  // acquire: the head groups' outputs
}

void project(uint pw, uint t) {
    uint kv = pk / 8u;  // 16-byte chunks per row of W
    uint row0 = pw * rw;
    uint nslot = rw * cpt;
    // Every slot's chunk (zeros past W's rows, past a row's chunks and
    // past rw·cpt), loaded before the wait.
    if (PGROUP == 0u) proj_wait(t);
    uvec4 wr[REG_SLOTS];
    uint dep = 0u;
#if defined(TEMP_FIRST)
    uvec4 tmp[SLOTS];
#endif
    [[unroll]] for (uint s = 0u; s < SLOTS; ++s) {
        uint i = s / cpt, j = s - (s / cpt) * cpt;
        uint row = row0 + i, c = t + j * LOCAL;
        bool ok = s < nslot && row < pn && c < kv;
        uvec4 w = ok ? pw4[row * kv + c + (dep & pzero)] : uvec4(0u);
        if (PGROUP != 0u && PGROUP < SLOTS && (s + 1u) % max(PGROUP, 1u) == 0u) dep = w.x;
#if defined(TEMP_FIRST)
        tmp[s] = w;
    }
    [[unroll]] for (uint s = 0u; s < SLOTS; ++s) {
        uvec4 w = tmp[s];
#endif
        if (s < REG_SLOTS) {
            wr[s] = w;
        } else {
            wsm[(s - REG_SLOTS) * LOCAL + t] = w;
        }
    }
    float yold = 0.0;
    if (t < rw && row0 + t < pn) yold = py[row0 + t];
    if (PGROUP != 0u) proj_wait(t);
    // This invocation's chunks of o: elements 8c .. 8c + 7 of chunk c.
    vec4 xa[CPT_MAX], xb[CPT_MAX];
    [[unroll]] for (uint j = 0u; j < CPT_MAX; ++j) {
        uint c = t + j * LOCAL;
        bool ok = j < cpt && c < kv;
        xa[j] = ok ? o4[2u * c] : vec4(0.0);
        xb[j] = ok ? o4[2u * c + 1u] : vec4(0.0);
    }
    uint lane = gl_SubgroupInvocationID, sg = gl_SubgroupID;
    [[unroll]] for (uint s = 0u; s < SLOTS; ++s) {
        if (s < nslot) {  // uniform
            uvec4 w = s < REG_SLOTS ? wr[s] : wsm[(s - REG_SLOTS) * LOCAL + t];
            uint j = s - (s / cpt) * cpt;
            vec4 lo, hi;
            pw_decode(w, lo, hi);
            vec4 x0 = j == 0u ? xa[0] : xa[CPT_MAX - 1u];
            vec4 x1 = j == 0u ? xb[0] : xb[CPT_MAX - 1u];
            float v = subgroupAdd(dot(x0, lo) + dot(x1, hi));
            if (lane == 0u) psum[sg * SLOTS + s] = v;
        }
    }
    barrier();
    if (t < rw && row0 + t < pn) {
        float sum = 0.0;
        for (uint g = 0u; g < gl_NumSubgroups; ++g)
            for (uint j = 0u; j < cpt; ++j) sum += psum[g * SLOTS + t * cpt + j];
        py[row0 + t] = yold + sum;
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
