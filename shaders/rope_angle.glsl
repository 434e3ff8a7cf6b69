// The rotary embedding's rotation: cos and sin of a = pos * inv (one f32
// product, as the reference models compute it), shared by nn_rope.comp,
// nn_qk_rope_append.comp and nn_attn_decode.comp's QK variants.
//
// cos and sin see the angle reduced to r = a - k 2pi, k = round(a / 2pi),
// since fast GPU sin/cos are accurate only near [-pi, pi] (NVIDIA's error
// grows with |x|). Cody-Waite with 2pi = C1 + C2 + C3: C1 and C2 carry few
// bits, so k C1 and k C2 are exact and so are both subtractions for
// angles below 2^20.6 (the rope unit tests check every 61st f32 there);
// only k C3 and the last subtraction round: |r - (a - k 2pi)| <= 2^-21,
// and |r| <= pi + 2^-22 |a| (k comes from a rounded quotient). `precise`
// keeps the compiler from fusing the product a into the reduction or
// reassociating the steps, either of which loses what the split keeps.
#ifndef VKC_ROPE_ANGLE_GLSL
#define VKC_ROPE_ANGLE_GLSL
// 2pi = C1 + C2 + C3 (C1: 5 significant bits, C2: 6, C3: the rest).
const float ROPE_C1 = 6.25;
const float ROPE_C2 = 0.033203125;
const float ROPE_C3 = -1.781782e-5;
const float ROPE_INV_TWO_PI = 0.15915494309189535;

// (cos a, sin a) for a = float(pos) * inv, reduced as above.
vec2 rope_cos_sin(uint pos, float inv) {
    precise float a = float(pos) * inv;
    float k = round(a * ROPE_INV_TWO_PI);
    precise float r1 = a - k * ROPE_C1;
    precise float r2 = r1 - k * ROPE_C2;
    precise float r = r2 - k * ROPE_C3;
    return vec2(cos(r), sin(r));
}
#endif
