#version 450
// Argmax of each row of a rows x cols row-major matrix, one workgroup per
// row, into out[row] (u32). Ties give the lowest index; NaN counts as
// greater than every number (the first NaN wins, as in PyTorch); a row of
// only -inf gives 0.
// variant: nn_argmax_f16 DTYPE_F16=1
// variant: nn_argmax_bf16 DTYPE_BF16=1
#include "common.glsl"
#include "nn_dtype.glsl"
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer X { ST x[]; };
layout(set = 0, binding = 1) writeonly buffer O { uint o[]; };
layout(push_constant) uniform P { uint rows; uint cols; };

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
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row >= rows) return;  // uniform across the workgroup
    uint t = gl_LocalInvocationIndex;
    uint base = row * cols;
    float bv = NEG_INF;
    uint bi = 0xffffffffu;
    for (uint c = t; c < cols; c += LOCAL) {
        float v = LD(x[base + c]);
        if (bi == 0xffffffffu || better(v, c, bv, bi)) {
            bv = v;
            bi = c;
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
    if (t == 0u) o[row] = si[0];
}
