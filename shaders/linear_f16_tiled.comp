#version 450
// Register-tiled linear layer with f16 weights, for more than 16 rows of x
// (see linear_tiled.glsl).
#define WTYPE_F16
#include "linear_tiled.glsl"
