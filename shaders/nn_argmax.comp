#version 450
// Argmax of each row of a rows x cols row-major matrix into out[row] (u32).
// Ties give the lowest index; NaN counts as greater than every number (the
// first NaN wins, as in PyTorch); a row of only -inf gives 0.
//
// mode 0: one workgroup per row (x, y of the grid: rows), straight into o.
// mode 1: a wide row split in chunks of `chunk` columns, workgroup
//         (x = chunk, y = row) writes its chunk's best (value bits, column)
//         to p[row * chunks + x].
// mode 2: one workgroup per row (x, y: rows) reduces the row's `chunks`
//         pairs of p into o.
// variant: nn_argmax_f16 DTYPE_F16=1
// variant: nn_argmax_bf16 DTYPE_BF16=1
#include "common.glsl"
#include "nn_dtype.glsl"
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer X { ST x[]; };
layout(set = 0, binding = 1) writeonly buffer O { uint o[]; };
layout(set = 0, binding = 2) buffer Part { uvec2 p[]; };
layout(push_constant) uniform P { uint rows; uint cols; uint chunk; uint chunks; uint mode; };

shared float sv[LOCAL];
shared uint si[LOCAL];

// Whether (a, ia) beats (b, ib).
bool better(float a, uint ia, float b, uint ib) {
    bool na = isnan(a), nb = isnan(b);
    if (na != nb) return na;
    if (na || a == b) return ia < ib;
    return a > b;
}

void main() {
    uint t = gl_LocalInvocationIndex;
    uint row, lo, hi;
    if (mode == 1u) {
        row = gl_WorkGroupID.y;
        lo = gl_WorkGroupID.x * chunk;
        hi = min(lo + chunk, cols);
    } else {
        row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
        lo = 0u;
        hi = mode == 2u ? chunks : cols;
    }
    if (row >= rows) return;  // uniform across the workgroup
    float bv = NEG_INF;
    uint bi = 0xffffffffu;
    for (uint c = lo + t; c < hi; c += LOCAL) {
        float v;
        uint i;
        if (mode == 2u) {
            uvec2 e = p[row * chunks + c];
            v = uintBitsToFloat(e.x);
            i = e.y;
        } else {
            v = LD(x[row * cols + c]);
            i = c;
        }
        if (bi == 0xffffffffu || better(v, i, bv, bi)) {
            bv = v;
            bi = i;
        }
    }
    sv[t] = bv;
    si[t] = bi;
    barrier();
    for (uint s = LOCAL / 2u; s > 0u; s >>= 1u) {
        if (t < s && si[t + s] != 0xffffffffu &&
            (si[t] == 0xffffffffu || better(sv[t + s], si[t + s], sv[t], si[t]))) {
            sv[t] = sv[t + s];
            si[t] = si[t + s];
        }
        barrier();
    }
    if (t == 0u) {
        if (mode == 1u) {
            p[row * chunks + gl_WorkGroupID.x] = uvec2(floatBitsToUint(sv[0]), si[0]);
        } else {
            o[row] = si[0];
        }
    }
}
