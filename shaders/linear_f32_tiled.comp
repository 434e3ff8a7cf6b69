#version 450
// Register-tiled linear layer with f32 weights, for more than 16 rows of x
// (see linear_tiled.glsl).
#define WTYPE_F32
#include "linear_tiled.glsl"
