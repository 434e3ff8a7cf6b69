#version 450
// Register-tiled linear layer with bf16 weights, for more than 16 rows of x
// (see linear_tiled.glsl).
#define WTYPE_BF16
#include "linear_tiled.glsl"
