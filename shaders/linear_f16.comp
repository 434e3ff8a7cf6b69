#version 450
// Skinny linear layer with f16 weights (see linear.glsl); MT rows of x per
// pass: 4 here, the variants below for the other row chunks.
// variant: linear_f16_m1 MT=1
// variant: linear_f16_m2 MT=2
// variant: linear_f16_m8 MT=8
// variant: linear_f16_m16 MT=16
// The same with the RMSNorm prologue (NORM, see linear.glsl):
// variant: linear_f16_norm NORM=1
// variant: linear_f16_m1_norm MT=1 NORM=1
// variant: linear_f16_m2_norm MT=2 NORM=1
// variant: linear_f16_m8_norm MT=8 NORM=1
// variant: linear_f16_m16_norm MT=16 NORM=1
// Subgroups of 32 lanes (linear_loops.glsl's loop and butterfly), 1 and 4 rows;
// at 1 row also with two chunks per lane and step (narrower workgroups) and
// with the norm prologue (layers of one or two workgroups per compute unit):
// variant: linear_f16_m1_sg32 MT=1 CPS_LOOP=1 CPS=4 BUTTERFLY=1
// variant: linear_f16_m1_sg32_c2 MT=1 CPS_LOOP=1 CPS=2 BUTTERFLY=1
// variant: linear_f16_m1_norm_sg32 MT=1 NORM=1 CPS_LOOP=1 CPS=4 BUTTERFLY=1
// variant: linear_f16_sg32 MT=4 CPS_LOOP=1 CPS=1 BUTTERFLY=1
// variant: linear_f16_norm_sg32 MT=4 NORM=1 CPS_LOOP=1 CPS=1 BUTTERFLY=1
#define WTYPE_F16
#include "linear.glsl"
