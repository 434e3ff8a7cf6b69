#version 450
// Register-tiled linear layer with f32 weights, for more than 16 rows of x
// (see linear_tiled.glsl): 64 rows per tile here, 32 in the variant.
// variant: linear_f32_tiled_m32 TILE_M=32
#define WTYPE_F32
// The 64-row tile: 8 rows per invocation (64 invocations), 16 FMAs per
// 16-byte shared-memory read in place of 10.7.
#if !defined(TILE_M)
#define ROWS8
#endif
#include "linear_tiled.glsl"
