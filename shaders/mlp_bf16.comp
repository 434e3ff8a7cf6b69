#version 450
#extension GL_EXT_shader_atomic_float : require
// Fused SwiGLU MLP with bf16 weights (see mlp.glsl); MT rows of x per pass:
// 4 here, the variants below for 1 and 2.
// variant: mlp_bf16_m1 MT=1
// variant: mlp_bf16_m2 MT=2
// The same with the RMSNorm before it (NORM, see linear.glsl):
// variant: mlp_bf16_norm NORM=1
// variant: mlp_bf16_m1_norm MT=1 NORM=1
// variant: mlp_bf16_m2_norm MT=2 NORM=1
#define WTYPE_BF16
#include "mlp.glsl"
