#version 450
// Sampling of one token per row of logits [rows, vocab], one workgroup per
// row, deterministic: z = x * inv_temp; keep the top_k largest z (0: all;
// ties with the k-th kept), then the smallest set of the largest z whose
// probability reaches top_p of the kept mass (1: all; ties kept); draw u
// in [0, 1) from a counter-based hash of (seed, counters[row], row) and
// take the token where the kept probability mass, added in index order,
// passes u times its total. Thresholds are found bit by bit over the
// order-preserving 32-bit keys of z (32 counting passes for top-k, 32
// mass passes for top-p). NaN logits are never drawn; a row whose kept
// mass is 0 or not finite gives its argmax (the first largest key).
// variant: nn_sample_f16 DTYPE_F16=1
// variant: nn_sample_bf16 DTYPE_BF16=1
#include "common.glsl"
#include "nn_dtype.glsl"
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer X { ST x[]; };
layout(set = 0, binding = 1) readonly buffer C { uint counters[]; };
layout(set = 0, binding = 2) writeonly buffer O { uint o[]; };
layout(push_constant) uniform P {
    uint rows; uint vocab; uint top_k; float top_p; float inv_temp;
    uint seed_lo; uint seed_hi;
};

shared float part[LOCAL];
shared uint best_key[LOCAL];
shared uint best_idx[LOCAL];

// PCG hash (one round of a 32-bit PCG's output permutation).
uint pcg(uint v) {
    uint s = v * 747796405u + 2891336453u;
    uint w = ((s >> ((s >> 28u) + 4u)) ^ s) * 277803737u;
    return (w >> 22u) ^ w;
}

// Order-preserving key of a float (larger float, larger key).
uint okey(float z) {
    uint u = floatBitsToUint(z);
    return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
}

float zval(uint base, uint c) { return LD(x[base + c]) * inv_temp; }

// Elements with key >= tau (NaN excluded), over the workgroup.
float count_at_least(uint base, uint tau) {
    float n = 0.0;
    for (uint c = gl_LocalInvocationIndex; c < vocab; c += LOCAL) {
        float z = zval(base, c);
        if (!isnan(z) && okey(z) >= tau) n += 1.0;
    }
    return wg_sum(n);
}

// Sum of exp(z - m) over elements with key >= tau (NaN excluded).
float mass_at_least(uint base, uint tau, float m) {
    float s = 0.0;
    for (uint c = gl_LocalInvocationIndex; c < vocab; c += LOCAL) {
        float z = zval(base, c);
        if (!isnan(z) && okey(z) >= tau) s += exp(z - m);
    }
    return wg_sum(s);
}

void main() {
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row >= rows) return;  // uniform across the workgroup
    uint t = gl_LocalInvocationIndex;
    uint base = row * vocab;
    // The largest key and its first index (NaN skipped).
    uint bk = 0u, bi = 0xffffffffu;
    for (uint c = t; c < vocab; c += LOCAL) {
        float z = zval(base, c);
        if (isnan(z)) continue;
        uint kz = okey(z);
        if (bi == 0xffffffffu || kz > bk) {
            bk = kz;
            bi = c;
        }
    }
    best_key[t] = bk;
    best_idx[t] = bi;
    barrier();
    for (uint s = LOCAL / 2u; s > 0u; s >>= 1u) {
        if (t < s) {
            uint ok = best_key[t + s], oi = best_idx[t + s];
            if (oi != 0xffffffffu && (best_idx[t] == 0xffffffffu || ok > best_key[t] ||
                                      (ok == best_key[t] && oi < best_idx[t]))) {
                best_key[t] = ok;
                best_idx[t] = oi;
            }
        }
        barrier();
    }
    uint top_key = best_key[0], top_idx = best_idx[0];
    barrier();
    if (top_idx == 0xffffffffu) {  // only NaN
        if (t == 0u) o[row] = 0u;
        return;
    }
    // The max z, from its key.
    float m = uintBitsToFloat((top_key & 0x80000000u) != 0u ? (top_key & 0x7fffffffu) : ~top_key);
    // Top-k threshold: the largest tau with at least top_k keys >= tau.
    uint tau = 0u;
    if (top_k != 0u && top_k < vocab) {
        for (int bit = 31; bit >= 0; --bit) {
            uint cand = tau | (1u << uint(bit));
            if (count_at_least(base, cand) >= float(top_k)) tau = cand;
        }
    }
    // Top-p threshold among the kept: the largest tau' >= tau whose mass
    // reaches top_p of the kept mass.
    if (top_p < 1.0 && m != NEG_INF) {
        float want = top_p * mass_at_least(base, tau, m);
        uint tp = 0u;
        for (int bit = 31; bit >= 0; --bit) {
            uint cand = tp | (1u << uint(bit));
            if (mass_at_least(base, max(cand, tau), m) >= want) tp = cand;
        }
        tau = max(tau, tp);
    }
    // Each invocation's contiguous segment of indices and its kept mass.
    uint seg = (vocab + LOCAL - 1u) / LOCAL;
    uint lo = min(t * seg, vocab), hi = min(lo + seg, vocab);
    float s = 0.0;
    if (m != NEG_INF) {
        for (uint c = lo; c < hi; ++c) {
            float z = zval(base, c);
            if (!isnan(z) && okey(z) >= tau) s += exp(z - m);
        }
    }
    part[t] = s;
    barrier();
    if (t == 0u) {
        float total = 0.0;
        for (uint i = 0u; i < LOCAL; ++i) total += part[i];
        uint pick = top_idx;
        if (total > 0.0 && !isinf(total)) {
            uint h = pcg(seed_lo ^ pcg(seed_hi ^ pcg(counters[row] ^ pcg(row))));
            float target = float(h >> 8) * (1.0 / 16777216.0) * total;
            float acc = 0.0;
            uint i = 0u;
            // The segment where the running mass passes target (the last
            // with mass if rounding never passes it).
            uint last = 0u;
            for (; i < LOCAL; ++i) {
                if (part[i] > 0.0) last = i;
                if (part[i] > 0.0 && acc + part[i] > target) break;
                acc += part[i];
            }
            if (i == LOCAL) {
                i = last;
                acc = total - part[last];
                target = total;  // take the segment's last kept token
            }
            uint slo = i * seg, shi = min(slo + seg, vocab);
            for (uint c = slo; c < shi; ++c) {
                float z = zval(base, c);
                if (isnan(z) || okey(z) < tau) continue;
                pick = c;
                acc += exp(z - m);
                if (acc > target) break;
            }
        }
        o[row] = pick;
    }
}
