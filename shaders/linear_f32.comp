#version 450
// Skinny linear layer with f32 weights (see linear.glsl); MT rows of x per
// pass: 4 here, the variants below for the other row chunks.
// variant: linear_f32_m1 MT=1
// variant: linear_f32_m2 MT=2
// variant: linear_f32_m8 MT=8
// variant: linear_f32_m16 MT=16
// The same with the RMSNorm prologue (NORM, see linear.glsl):
// variant: linear_f32_norm NORM=1
// variant: linear_f32_m1_norm MT=1 NORM=1
// variant: linear_f32_m2_norm MT=2 NORM=1
// variant: linear_f32_m8_norm MT=8 NORM=1
// variant: linear_f32_m16_norm MT=16 NORM=1
#define WTYPE_F32
#include "linear.glsl"
