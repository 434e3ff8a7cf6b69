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
// Other feature counts per workgroup (J) and workgroup sizes, for
// measure/examples/ffn_stack (`--blocks mlp_jJ_wW`):
// variant: mlp_bf16_m1_j16_w256 MT=1 MLP_J=16 WG_SIZE=256
// variant: mlp_bf16_m1_norm_j16_w256 MT=1 NORM=1 MLP_J=16 WG_SIZE=256
// variant: mlp_bf16_m1_j32_w256 MT=1 MLP_J=32 WG_SIZE=256
// variant: mlp_bf16_m1_norm_j32_w256 MT=1 NORM=1 MLP_J=32 WG_SIZE=256
// variant: mlp_bf16_m1_j32_w512 MT=1 MLP_J=32 WG_SIZE=512
// variant: mlp_bf16_m1_norm_j32_w512 MT=1 NORM=1 MLP_J=32 WG_SIZE=512
// variant: mlp_bf16_m1_j64_w512 MT=1 MLP_J=64 WG_SIZE=512
// variant: mlp_bf16_m1_norm_j64_w512 MT=1 NORM=1 MLP_J=64 WG_SIZE=512
// variant: mlp_bf16_m1_j64_w1024 MT=1 MLP_J=64 WG_SIZE=1024
// variant: mlp_bf16_m1_norm_j64_w1024 MT=1 NORM=1 MLP_J=64 WG_SIZE=1024
// variant: mlp_bf16_m1_j128_w1024 MT=1 MLP_J=128 WG_SIZE=1024
// variant: mlp_bf16_m1_norm_j128_w1024 MT=1 NORM=1 MLP_J=128 WG_SIZE=1024
#define WTYPE_BF16
#include "mlp.glsl"
