#version 450
// Skinny linear layer with bf16 weights (see linear.glsl); MT rows of x per
// pass: 4 here, the variants below for the other row chunks.
// variant: linear_bf16_m1 MT=1
// variant: linear_bf16_m2 MT=2
// variant: linear_bf16_m8 MT=8
// variant: linear_bf16_m16 MT=16
#define WTYPE_BF16
#include "linear.glsl"
