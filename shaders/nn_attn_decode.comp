#version 450
// Decode attention, pass 1 of 2: one query per head (q [batch, q_heads,
// dim]) against a KV cache (k, v [batch, kv_heads, max_seq, dim]) holding
// len[b] = min(lens[b], max_seq) positions of sequence b. Workgroup
// (x = chunk, y = (b, kv head, head slice)) takes up to `group` query heads
// sharing one kv head and the `span` positions [chunk * span, +span) below
// len (nn_attn_span.glsl: the span grows with len so that all `chunks`
// workgroups along x share a long sequence). It walks them in tiles of
// TILE positions with the online softmax, keeping per head the running
// max m, the running sum of exp(s - m) and the exp-weighted sum of v rows,
// and writes them to part[(b * q_heads + head) * chunks + chunk] as dim + 2
// floats (acc, m, sum). Workgroups whose chunk starts at or past len
// return at once, so the work grows with the current length, not max_seq.
//
// K and V rows are read in items of W elements: with `vec` = 1 (dim a
// multiple of 4, k and v 16-byte aligned) W = 4, one vector load per item
// (vec4 for f32: 16 bytes; 4 16-bit values: 8 bytes) through the aliases
// K4 and V4 of k and v; else W = 1, one element. Per tile:
// - scores s = scale * q.k: each subgroup takes positions in turn, its
//   lanes split the row's items (lane l reads items l, l + lanes, ...:
//   adjacent lanes read adjacent items of one K row), every lane keeping
//   one partial dot product per query head (the heads' queries sit in
//   shared memory), subgroupAdd finishing each;
// - softmax: a subgroup per head takes the tile's max and sum of
//   exponentials with subgroupMax / subgroupAdd and rescales the head's
//   running sum;
// - V: invocation t owns item i = t % items (items = dim / W) for the
//   positions p of the tile with p % (LOCAL / items) = t / items (adjacent
//   invocations read adjacent items of one V row), rescaling and adding
//   into one vec4 register per head.
// After the last tile the position subsets' sums are added in subset order
// through shared memory. Specialization constant 0 (GROUP) is `group`.
// Without subgroup arithmetic (the `_wg` variants, NO_SUBGROUPS) a
// "subgroup" is one invocation: the same code, one position per invocation
// and a serial loop over dim.
//
// With FUSED (the nn_attn_decode1 variants) pass 2 happens in the same
// dispatch: each invocation of an active workgroup, after writing its
// partials, issues a device-scope release fence (memoryBarrierBuffer: an
// OpMemoryBarrier at device scope, acquire-release, on buffer memory); the
// workgroup's invocation 0 then adds 1 to its head group's counter
// cnt[y]. The workgroup that brings the counter to the group's number of
// active chunks is the last: it sets the counter back to 0 for the next
// launch, issues the matching acquire fence and merges the chunks of its
// query heads into o with nn_attn_combine.comp's arithmetic in its order
// (a subgroup per head takes the max of the chunks' maxima; invocations
// over the heads' elements, adjacent invocations reading adjacent floats
// of a chunk's partial, each computing a chunk's weight where it uses it).
// `part` is coherent so those reads see the other workgroups' writes. (The crate's megakernel pairs fences and atomics the
// same way where the device has no Vulkan memory model.) A sequence of
// length 0 has no active chunk: chunk 0 writes its zeros. A sequence with
// one active chunk (len <= MIN_SPAN, or one span) needs no merge: that
// chunk's workgroup applies pass 2's arithmetic to its own sums and writes
// o directly, touching neither the partials nor the counter.
//
// With QK (the nn_attn_decode1_qk variants, FUSED with subgroups) the
// dispatch also does nn_qk_rope_append.comp's work for the one new token
// of each sequence: q, k and v arrive as the projection wrote them (f32:
// q [batch, q_heads, dim], k and v [batch, kv_heads, dim], or the column
// blocks of one merged q|k|v output: push constants q_row, kv_row, k_off
// and v_off); each workgroup
// normalises its heads' queries and its kv head's key (per-head RMSNorm
// with qw / kw, when has_norm: a subgroup per head, the squares added by
// subgroupAdd), rotates them at position pos[b] (the same angle reduction)
// and rounds them, and v, to the cache's type. The new position's key and
// value come from shared memory in the tile loop, never from the cache;
// one workgroup per (sequence, kv head) (head slice 0, the chunk holding
// the position, else chunk 0) writes them to the caches at pos[b], or,
// past max_seq, adds 1 to flag[0] and writes nothing. The prologue's
// inputs are loaded together, and each invocation's first key and value
// items of the first tile before the prologue (they do not depend on it).
// variant: nn_attn_decode1_qk FUSED=1 QK=1
// variant: nn_attn_decode1_qk_f16 FUSED=1 QK=1 DTYPE_F16=1
// variant: nn_attn_decode1_qk_bf16 FUSED=1 QK=1 DTYPE_BF16=1
// variant: nn_attn_decode_f16 DTYPE_F16=1
// variant: nn_attn_decode_bf16 DTYPE_BF16=1
// variant: nn_attn_decode1 FUSED=1
// variant: nn_attn_decode1_f16 FUSED=1 DTYPE_F16=1
// variant: nn_attn_decode1_bf16 FUSED=1 DTYPE_BF16=1
// variant: nn_attn_decode_wg NO_SUBGROUPS=1
// variant: nn_attn_decode_wg_f16 DTYPE_F16=1 NO_SUBGROUPS=1
// variant: nn_attn_decode_wg_bf16 DTYPE_BF16=1 NO_SUBGROUPS=1
// variant: nn_attn_decode1_wg FUSED=1 NO_SUBGROUPS=1
// variant: nn_attn_decode1_wg_f16 FUSED=1 DTYPE_F16=1 NO_SUBGROUPS=1
// variant: nn_attn_decode1_wg_bf16 FUSED=1 DTYPE_BF16=1 NO_SUBGROUPS=1
#ifndef NO_SUBGROUPS
#define USE_SUBGROUPS
#endif
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "nn_dtype.glsl"
#include "nn_attn_span.glsl"
#ifdef QK
#include "rope_angle.glsl"
#endif
layout(local_size_x = 256) in;
#ifdef QK
layout(set = 0, binding = 0) readonly buffer Q { float q[]; };
layout(set = 0, binding = 1) buffer K { ST k[]; };
layout(set = 0, binding = 2) buffer V { ST v[]; };
#else
layout(set = 0, binding = 0) readonly buffer Q { ST q[]; };
layout(set = 0, binding = 1) readonly buffer K { ST k[]; };
layout(set = 0, binding = 2) readonly buffer V { ST v[]; };
#endif
layout(set = 0, binding = 3) readonly buffer L { uint lens[]; };
#if defined(DTYPE_F16)
#define VT f16vec4
#define LDV(x) vec4(x)
#elif defined(DTYPE_BF16)
#define VT u16vec4
#define LDV(x) uintBitsToFloat(uvec4(x) << 16)
#else
#define VT vec4
#define LDV(x) (x)
#endif
#ifdef FUSED
layout(set = 0, binding = 4) coherent buffer Part { float part[]; };
layout(set = 0, binding = 5) writeonly buffer O { ST o[]; };
layout(set = 0, binding = 6) coherent buffer Cnt { uint cnt[]; };
layout(set = 0, binding = 7) readonly buffer K4 { VT k4[]; };
layout(set = 0, binding = 8) readonly buffer V4 { VT v4[]; };
#else
layout(set = 0, binding = 4) writeonly buffer Part { float part[]; };
layout(set = 0, binding = 5) readonly buffer K4 { VT k4[]; };
layout(set = 0, binding = 6) readonly buffer V4 { VT v4[]; };
#endif
#ifdef QK
layout(set = 0, binding = 9) readonly buffer KR { float kr[]; };
layout(set = 0, binding = 10) readonly buffer VR { float vr[]; };
layout(set = 0, binding = 11) readonly buffer QW { float qw[]; };
layout(set = 0, binding = 12) readonly buffer KW { float kw[]; };
layout(set = 0, binding = 13) readonly buffer F { float inv_freq[]; };
layout(set = 0, binding = 14) readonly buffer Pos { uint pos[]; };
layout(set = 0, binding = 15) buffer Flag { uint flag[]; };
#endif
layout(push_constant) uniform P {
    uint q_heads; uint kv_heads; uint dim; uint max_seq;
    uint chunks; uint group; float scale; uint vec;
#ifdef QK
    float eps; uint has_norm;
    // Elements from one sequence's q row to the next's (q_row) and from
    // one sequence's k and v rows to the next's (kv_row), and where k's and
    // v's rows start in their bindings (k_off, v_off): q_heads * dim,
    // kv_heads * dim, 0, 0 for three tensors of their own; the merged
    // projection's width twice and its k and v column offsets when the
    // three bindings are one q|k|v output.
    uint q_row; uint kv_row; uint k_off; uint v_off;
#endif
};

#define TILE 64u
// Key rows a subgroup's scores step loads together: SROWS where the
// workgroup takes 4 or more query heads, else 2 (H100, Qwen3-4B decode:
// 4 rows took the step after 4000 positions (4 heads per workgroup) from
// 6.91 to 6.68 ms but after 600 (1 head) from 4.24 to 4.73); values an
// invocation's V step loads together: VROWS.
#define SROWS 4u
#define VROWS 4u
// A statement for each of the 4 rows (SROWS = VROWS = 4), written out:
// the head loops around them are then innermost, which the SPIR-V
// optimiser unrolls (it leaves a loop holding another loop as it is).
#define ROWS4(M) M(0u) M(1u) M(2u) M(3u)
#define MAX_GROUP 16u
// The query heads one workgroup takes, as the plan gives them (`group`,
// at most MAX_GROUP): bounds the per-head registers (HEAD_ON below), so
// that a small group holds few.
layout(constant_id = 0) const uint GROUP = MAX_GROUP;
// The key rows a scores step loads (see SROWS).
const uint SROWS_USED = GROUP >= 4u ? SROWS : 2u;
// Head slot g of the per-head registers holds one of this workgroup's `ng`
// query heads. The register arrays are sized by MAX_GROUP and walked by
// loops of MAX_GROUP steps, which the SPIR-V optimiser unrolls, so that
// every index is a constant and the arrays live in registers (an array
// indexed by a loop counter the driver does not unroll goes to local
// memory); the driver folds `g < GROUP` (a specialization constant) and
// drops the slots past the plan's group.
#define HEAD_ON(g) ((g) < GROUP && (g) < ng)
#define MAX_QS 2048u  // group * dim
// Chunks whose partials the merge loads before adding them.
#define MERGE_LOADS 8u

#ifdef USE_SUBGROUPS
#define SG_LANES gl_SubgroupSize
#define SG_LANE gl_SubgroupInvocationID
#define SG_ID gl_SubgroupID
#define SG_COUNT gl_NumSubgroups
#define SG_SUM(x) subgroupAdd(x)
#define SG_MAX(x) subgroupMax(x)
#else
#define SG_LANES 1u
#define SG_LANE 0u
#define SG_ID gl_LocalInvocationIndex
#define SG_COUNT LOCAL
#define SG_SUM(x) (x)
#define SG_MAX(x) (x)
#endif

// The queries of the workgroup's heads, then (after the last tile) the
// position subsets' sums on their way to subset 0.
shared float qs[MAX_QS];
shared float sc[MAX_GROUP * TILE];  // scores, then exponentials
// Per head: running max and sum (double-buffered by tile parity), and the
// tile's rescale factor of the earlier tiles' sums.
shared float hm[2u * MAX_GROUP];
shared float hs[2u * MAX_GROUP];
shared float ha[MAX_GROUP];
#ifdef FUSED
shared uint is_last;
#endif
#ifdef QK
#define MAX_DIM 256u
// The new position's key and value (rounded to the cache's type), and
// the per-head norm scales (the workgroup's query heads, then its key).
shared float kn[MAX_DIM];
shared float vn[MAX_DIM];
shared float nsc[MAX_GROUP + 1u];
// The norms' weights and the rotation's cos / sin at the new position,
// read with the rest of the prologue's inputs (one round trip, not three).
shared float qwn[MAX_DIM];
shared float kwn[MAX_DIM];
shared vec2 csn[MAX_DIM / 2u];
// The new token's position (its sequence's pos[b]).
uint pnew;
#endif

// Item i of the row starting at element `row` of k / v (W elements, the
// rest zeros when W = 1).
vec4 load_k(uint row, uint i) {
    if (vec != 0u) return LDV(k4[(row >> 2u) + i]);
    return vec4(LD(k[row + i]), 0.0, 0.0, 0.0);
}
vec4 load_v(uint row, uint i) {
    if (vec != 0u) return LDV(v4[(row >> 2u) + i]);
    return vec4(LD(v[row + i]), 0.0, 0.0, 0.0);
}
#ifdef QK
// Item i of the new key (`key`) or value, from shared memory.
vec4 new_item(bool key, uint i) {
    if (vec != 0u) {
        uint e = 4u * i;
        return key ? vec4(kn[e], kn[e + 1u], kn[e + 2u], kn[e + 3u])
                   : vec4(vn[e], vn[e + 1u], vn[e + 2u], vn[e + 3u]);
    }
    return vec4(key ? kn[i] : vn[i], 0.0, 0.0, 0.0);
}
// Item i of position `pabs`'s key / value row (starting at element `row`):
// the new position's from shared memory, the others from the cache.
vec4 key_item(uint row, uint pabs, uint i) {
    if (pabs == pnew) return new_item(true, i);
    return load_k(row, i);
}
vec4 value_item(uint row, uint pabs, uint i) {
    if (pabs == pnew) return new_item(false, i);
    return load_v(row, i);
}

// The q/k side of the new token: queries of heads head0 .. + ng into qs,
// the key and value of kv head kvh into kn / vn (normed with has_norm,
// rotated at pnew, rounded to the cache's type); the writer stores them
// in the caches at pnew, or flags a position past max_seq.
void qk_prologue(uint b, uint kvh, uint head0, uint ng, bool writer, uint t) {
    uint half_dim = dim / 2u;
    uint kb = k_off + b * kv_row + kvh * dim;
    uint vb = v_off + b * kv_row + kvh * dim;
    uint qb = b * q_row + (head0 - b * q_heads) * dim;
    // Invocation t's element of the key, value, norm weights and inverse
    // frequencies (dim <= LOCAL), loaded before the queries so that every
    // load of the prologue is in flight at once.
    float kt = 0.0, vt = 0.0, qwt = 1.0, kwt = 1.0, ft = 0.0;
    if (t < dim) {
        kt = kr[kb + t];
        vt = vr[vb + t];
        if (has_norm != 0u) {
            qwt = qw[t];
            kwt = kw[t];
        }
        if (t < half_dim) ft = inv_freq[t];
    }
    for (uint i = t; i < ng * dim; i += LOCAL) qs[i] = q[qb + i];
    if (t < dim) {
        kn[t] = kt;
        vn[t] = LD(TO(vt));
        qwn[t] = qwt;
        kwn[t] = kwt;
        if (t < half_dim) csn[t] = rope_cos_sin(pnew, ft);
    }
    barrier();
    if (has_norm != 0u) {
        for (uint h = SG_ID; h <= ng; h += SG_COUNT) {
            float ss = 0.0;
            for (uint e = SG_LANE; e < dim; e += SG_LANES) {
                float x = h < ng ? qs[h * dim + e] : kn[e];
                ss += x * x;
            }
            float tot = SG_SUM(ss);
            if (SG_LANE == 0u) nsc[h] = inversesqrt(tot / float(dim) + eps);
        }
        barrier();
        for (uint i = t; i < (ng + 1u) * dim; i += LOCAL) {
            uint h = i / dim, e = i - h * dim;
            if (h < ng) {
                qs[i] = qs[i] * nsc[h] * qwn[e];
            } else {
                kn[e] = kn[e] * nsc[ng] * kwn[e];
            }
        }
        barrier();
    }
    for (uint i = t; i < (ng + 1u) * half_dim; i += LOCAL) {
        uint h = i / half_dim, p = i - h * half_dim;
        float cs = csn[p].x, sn = csn[p].y;
        if (h < ng) {
            uint e = h * dim + p;
            float x0 = qs[e], x1 = qs[e + half_dim];
            qs[e] = LD(TO(x0 * cs - x1 * sn));
            qs[e + half_dim] = LD(TO(x1 * cs + x0 * sn));
        } else {
            float x0 = kn[p], x1 = kn[p + half_dim];
            kn[p] = LD(TO(x0 * cs - x1 * sn));
            kn[p + half_dim] = LD(TO(x1 * cs + x0 * sn));
        }
    }
    barrier();
    if (writer) {
        if (pnew < max_seq) {
            uint dst = ((b * kv_heads + kvh) * max_seq + pnew) * dim;
            for (uint i = t; i < dim; i += LOCAL) {
                k[dst + i] = TO(kn[i]);
                v[dst + i] = TO(vn[i]);
            }
        } else if (t == 0u) {
            atomicAdd(flag[0], 1u);
        }
    }
}
#define KEY(row, pabs, i) key_item(row, pabs, i)
#define VALUE(row, pabs, i) value_item(row, pabs, i)
#else
#define KEY(row, pabs, i) load_k(row, i)
#define VALUE(row, pabs, i) load_v(row, i)
#endif
// Item i of head g's query.
vec4 query(uint g, uint i) {
    if (vec != 0u) {
        uint e = g * dim + 4u * i;
        return vec4(qs[e], qs[e + 1u], qs[e + 2u], qs[e + 3u]);
    }
    return vec4(qs[g * dim + i], 0.0, 0.0, 0.0);
}

// Item `a` (W elements: all of a with `vec`, else a.x) stored at element
// `at` of qs, part or o, or read from qs (the rest zeros): written out
// component by component, so that no register is indexed by a loop counter.
void put_qs(uint at, vec4 a) {
    qs[at] = a.x;
    if (vec != 0u) {
        qs[at + 1u] = a.y;
        qs[at + 2u] = a.z;
        qs[at + 3u] = a.w;
    }
}
vec4 get_qs(uint at) {
    if (vec != 0u) return vec4(qs[at], qs[at + 1u], qs[at + 2u], qs[at + 3u]);
    return vec4(qs[at], 0.0, 0.0, 0.0);
}
void put_part(uint at, vec4 a) {
    part[at] = a.x;
    if (vec != 0u) {
        part[at + 1u] = a.y;
        part[at + 2u] = a.z;
        part[at + 3u] = a.w;
    }
}
#ifdef FUSED
void put_o(uint at, vec4 a) {
    o[at] = TO(a.x);
    if (vec != 0u) {
        o[at + 1u] = TO(a.y);
        o[at + 2u] = TO(a.z);
        o[at + 3u] = TO(a.w);
    }
}
#endif

// The tile walk's geometry: the cache rows' base, the items of a row, and
// this invocation's position subset r and item d in the V phase (the QK
// variants take it before their prologue, to load the first tile early).
#define ATTN_GEOMETRY \
    uint kbase = ((b * kv_heads + kvh) * max_seq + p0) * dim; \
    uint w = vec != 0u ? 4u : 1u; \
    uint items = dim / w; \
    uint subsets = LOCAL / items; \
    uint r = t / items, d = t - (t / items) * items;

void main() {
    uint c = gl_WorkGroupID.x;
    uint ratio = q_heads / kv_heads;
    uint slices = (ratio + group - 1u) / group;
    uint y = gl_WorkGroupID.y;
    uint slice = y % slices;
    uint bh = y / slices;
    uint kvh = bh % kv_heads;
    uint b = bh / kv_heads;
    uint len = min(lens[b], max_seq);
    uint span = attn_span(len, chunks);
    uint p0 = c * span;
    uint g0 = slice * group;
    uint ng = min(group, ratio - g0);
    uint head0 = b * q_heads + kvh * ratio + g0;  // first query head (flat)
    uint t = gl_LocalInvocationIndex;
#ifdef QK
    ATTN_GEOMETRY
    pnew = pos[b];
    bool writer = slice == 0u && c == (pnew < len ? pnew / span : 0u);
    if (p0 >= len && !writer && !(len == 0u && c == 0u)) return;  // uniform
    // This invocation's first key items of the first tile's scores (rows
    // SG_ID and SG_ID + SG_COUNT, item SG_LANE) and its first value item,
    // loaded before the prologue, which they do not depend on (the new
    // position's come from shared memory instead).
    bool pre = p0 < len;
    vec4 kp0 = vec4(0.0), kp1 = vec4(0.0), vp0 = vec4(0.0);
    if (pre) {
        uint nt0 = min(TILE, min(span, len - p0));
        if (SG_ID < nt0 && SG_LANE < items) {
            kp0 = load_k(kbase + SG_ID * dim, SG_LANE);
            kp1 = load_k(kbase + min(SG_ID + SG_COUNT, nt0 - 1u) * dim, SG_LANE);
        }
        if (r < subsets && r < nt0) vp0 = load_v(kbase + r * dim, d);
    }
    qk_prologue(b, kvh, head0, ng, writer, t);
#endif
#ifdef FUSED
    if (len == 0u && c == 0u) {
        for (uint i = t; i < ng * dim; i += LOCAL) o[head0 * dim + i] = TO(0.0);
        return;
    }
#endif
    if (p0 >= len) return;  // uniform across the workgroup
    uint np = min(span, len - p0);
#ifndef QK
    for (uint i = t; i < ng * dim; i += LOCAL) qs[i] = LD(q[head0 * dim + i]);
#endif
    if (t < MAX_GROUP) {
        hm[t] = NEG_INF;
        hs[t] = 0.0;
    }
    barrier();
#ifndef QK
    ATTN_GEOMETRY
#endif
    vec4 acc[MAX_GROUP];
    [[unroll]] for (uint g = 0u; g < MAX_GROUP; ++g) acc[g] = vec4(0.0);
    uint cur = 0u;  // parity of the running max and sum being read
    for (uint tp = 0u; tp < np; tp += TILE) {
        uint nt = min(TILE, np - tp);
        uint tbase = kbase + tp * dim;
        // Scores: a subgroup per position, its lanes over the row's items;
        // positions p + j·SG_COUNT (j < SROWS) together, so that all their
        // rows' loads are in flight at once (one past the tile reads the
        // tile's last row and is dropped).
        for (uint p = SG_ID; p < nt; p += SROWS_USED * SG_COUNT) {
            float pd[SROWS][MAX_GROUP];
            uint rowj[SROWS];
#ifdef QK
            uint paj[SROWS];
#endif
            [[unroll]] for (uint j = 0u; j < SROWS; ++j) {
                uint pj = min(p + j * SG_COUNT, nt - 1u);
                rowj[j] = tbase + pj * dim;
#ifdef QK
                paj[j] = p0 + tp + pj;
#endif
                [[unroll]] for (uint g = 0u; g < MAX_GROUP; ++g) pd[j][g] = 0.0;
            }
            for (uint e = SG_LANE; e < items; e += SG_LANES) {
                vec4 kv[SROWS];
#ifdef QK
                if (pre && tp == 0u && p == SG_ID && e == SG_LANE) {
                    kv[0] = paj[0] == pnew ? new_item(true, e) : kp0;
                    kv[1] = paj[1] == pnew ? new_item(true, e) : kp1;
                    [[unroll]] for (uint j = 2u; j < SROWS; ++j)
                        kv[j] = j < SROWS_USED ? KEY(rowj[j], paj[j], e) : vec4(0.0);
                } else
#endif
                {
                    [[unroll]] for (uint j = 0u; j < SROWS; ++j)
                        kv[j] = j < SROWS_USED ? KEY(rowj[j], paj[j], e) : vec4(0.0);
                }
                [[unroll]] for (uint g = 0u; g < MAX_GROUP; ++g) {
                    if (HEAD_ON(g)) {
                        vec4 qg = query(g, e);
#define DOT_ROW(j) pd[j][g] += dot(qg, kv[j]);
                        ROWS4(DOT_ROW)
#undef DOT_ROW
                    }
                }
            }
            [[unroll]] for (uint g = 0u; g < MAX_GROUP; ++g) {
                if (HEAD_ON(g)) {
#define SUM_ROW(j)                                                              \
    if (j < SROWS_USED) {                                                       \
        float sj = SG_SUM(pd[j][g]);                                            \
        uint pj = p + j * SG_COUNT;                                             \
        if (SG_LANE == 0u && pj < nt) sc[g * TILE + pj] = sj * scale;           \
    }
                    ROWS4(SUM_ROW)
#undef SUM_ROW
                }
            }
        }
        barrier();
        // Softmax: a subgroup per head.
        for (uint g = SG_ID; g < ng; g += SG_COUNT) {
            float m_old = hm[cur * MAX_GROUP + g];
            float s_old = hs[cur * MAX_GROUP + g];
            float lm = NEG_INF;
            for (uint p = SG_LANE; p < nt; p += SG_LANES) lm = nmax(lm, sc[g * TILE + p]);
            bool has_nan = SG_MAX(isnan(lm) ? 1u : 0u) != 0u;
            float tm = SG_MAX(isnan(lm) ? NEG_INF : lm);
            float m = nmax(m_old, has_nan ? QNAN : tm);
            float a = m_old == NEG_INF ? 0.0 : exp(m_old - m);
            float ls = 0.0;
            for (uint p = SG_LANE; p < nt; p += SG_LANES) {
                float e = exp(sc[g * TILE + p] - m);
                sc[g * TILE + p] = e;
                ls += e;
            }
            float ts = SG_SUM(ls);
            if (SG_LANE == 0u) {
                hm[(1u - cur) * MAX_GROUP + g] = m;
                hs[(1u - cur) * MAX_GROUP + g] = s_old * a + ts;
                ha[g] = a;
            }
        }
        barrier();
        // V: invocation (r, d) over the tile's positions of subset r.
        if (r < subsets) {
            [[unroll]] for (uint g = 0u; g < MAX_GROUP; ++g) {
                if (HEAD_ON(g)) acc[g] *= ha[g];
            }
            // VROWS positions' values loaded before they are added (in
            // position order, as one at a time would).
            for (uint p = r; p < nt; p += VROWS * subsets) {
                vec4 x[VROWS];
                [[unroll]] for (uint j = 0u; j < VROWS; ++j) {
                    uint pj = p + j * subsets;
#ifdef QK
                    if (j == 0u && pre && tp == 0u && p == r)
                        x[j] = p0 + pj == pnew ? new_item(false, d) : vp0;
                    else
#endif
                        x[j] = pj < nt ? VALUE(tbase + pj * dim, p0 + tp + pj, d) : vec4(0.0);
                }
                [[unroll]] for (uint g = 0u; g < MAX_GROUP; ++g) {
                    if (HEAD_ON(g)) {
#define V_ROW(j) \
    if (p + j * subsets < nt) acc[g] += sc[g * TILE + p + j * subsets] * x[j];
                        ROWS4(V_ROW)
#undef V_ROW
                    }
                }
            }
        }
        cur = 1u - cur;
        barrier();  // sc and ha are rewritten by the next tile
    }
    // The subsets' sums, added into subset 0 in subset order through qs:
    // each round, as many subsets as qs holds (ng * dim <= MAX_QS floats
    // each) store theirs side by side and subset 0 adds them.
    uint used = min(subsets, np);
    uint slots = MAX_QS / (ng * dim);
    for (uint first = 1u; first < used; first += slots) {
        uint last = min(first + slots, used);
        if (r >= first && r < last) {
            uint sb = (r - first) * ng * dim;
            [[unroll]] for (uint g = 0u; g < MAX_GROUP; ++g) {
                if (HEAD_ON(g)) {
                    put_qs(sb + g * dim + d * w, acc[g]);
                }
            }
        }
        barrier();
        if (r == 0u) {
            for (uint rr = first; rr < last; ++rr) {
                uint sb = (rr - first) * ng * dim;
                [[unroll]] for (uint g = 0u; g < MAX_GROUP; ++g) {
                    if (HEAD_ON(g)) {
                        acc[g] += get_qs(sb + g * dim + d * w);
                    }
                }
            }
        }
        barrier();
    }
#ifdef FUSED
    uint nc = attn_active(len, chunks);
    if (nc == 1u) {
        // The only active chunk of its heads (c = 0): pass 2's arithmetic
        // on it alone, in its order (M = the chunk's max, or NaN; weight
        // exp(m - M), 1 for a finite m), written to o at once: no partials,
        // no fence, no counter.
        if (r == 0u) {
            [[unroll]] for (uint g = 0u; g < MAX_GROUP; ++g) {
                if (HEAD_ON(g)) {
                    float m = hm[cur * MAX_GROUP + g];
                    float lm = nmax(NEG_INF, m);
                    float wt = exp(m - (isnan(lm) ? QNAN : lm));
                    float sum = 0.0 + hs[cur * MAX_GROUP + g] * wt;
                    uint ob = (head0 + g) * dim + d * w;
                    put_o(ob, (0.0 + acc[g] * wt) / sum);
                }
            }
        }
        return;
    }
#endif
    uint stride = dim + 2u;
    if (r == 0u) {
        [[unroll]] for (uint g = 0u; g < MAX_GROUP; ++g) {
            if (HEAD_ON(g)) {
                uint pb = ((head0 + g) * chunks + c) * stride + d * w;
                put_part(pb, acc[g]);
            }
        }
    }
    if (t < ng) {
        uint off = ((head0 + t) * chunks + c) * stride + dim;
        part[off] = hm[cur * MAX_GROUP + t];
        part[off + 1u] = hs[cur * MAX_GROUP + t];
    }
#ifdef FUSED
    memoryBarrierBuffer();  // release: this invocation's partials, then the count
    barrier();
    if (t == 0u) {
        uint done = atomicAdd(cnt[y], 1u) + 1u;
        is_last = done == nc ? 1u : 0u;
        // Every active workgroup of y has counted: back to 0 for the next
        // launch.
        if (done == nc) atomicExchange(cnt[y], 0u);
    }
    barrier();
    if (is_last == 0u) return;  // uniform across the workgroup
    memoryBarrierBuffer();  // acquire: every other workgroup's partials
    // Per head, the max of the chunks' maxima (a subgroup per head), then
    // per element, in chunk order, the sums of the weighted partial sums
    // and values, each chunk's weight exp(m_c - M) computed where it is
    // used: nn_attn_combine.comp's arithmetic in its order. (One loop over
    // the elements, holding no array, so that nothing goes to local memory.)
    for (uint g = SG_ID; g < ng; g += SG_COUNT) {
        uint hb = (head0 + g) * chunks * stride;
        float lm = NEG_INF;
        for (uint cc = SG_LANE; cc < nc; cc += SG_LANES) lm = nmax(lm, part[hb + cc * stride + dim]);
        bool has_nan = SG_MAX(isnan(lm) ? 1u : 0u) != 0u;
        float mx = SG_MAX(isnan(lm) ? NEG_INF : lm);
        if (SG_LANE == 0u) ha[g] = has_nan ? QNAN : mx;
    }
    barrier();  // ha written
    for (uint i = t; i < ng * dim; i += LOCAL) {
        uint g = i / dim, e = i - g * dim;
        uint hb = (head0 + g) * chunks * stride;
        float mx = ha[g];
        float sum = 0.0, val = 0.0;
        // MERGE_LOADS chunks' values loaded together, then added in chunk
        // order: the same sums, with the loads in flight at once rather
        // than one chunk's after another's.
        for (uint j0 = 0u; j0 < nc; j0 += MERGE_LOADS) {
            float pm[MERGE_LOADS];
            float ps[MERGE_LOADS];
            float pa[MERGE_LOADS];
            [[unroll]] for (uint u = 0u; u < MERGE_LOADS; ++u) {
                uint pc = hb + min(j0 + u, nc - 1u) * stride;
                pm[u] = part[pc + dim];
                ps[u] = part[pc + dim + 1u];
                pa[u] = part[pc + e];
            }
            [[unroll]] for (uint u = 0u; u < MERGE_LOADS; ++u) {
                if (j0 + u < nc) {
                    float w = exp(pm[u] - mx);
                    sum += ps[u] * w;
                    val += pa[u] * w;
                }
            }
        }
        o[head0 * dim + i] = TO(val / sum);
    }
#endif
}
