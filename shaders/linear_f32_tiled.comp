#version 450
// Register-tiled linear layer with f32 weights, for more than 16 rows of x
// (see linear_tiled.glsl): 64 rows per tile here, 32 in the variant.
// variant: linear_f32_tiled_m32 TILE_M=32
#define WTYPE_F32
#include "linear_tiled.glsl"
