#version 450
// The cooperative-matrix f16 matmul with f16 shared tiles (see the include).
#define VEC_SHARED 0
#include "matmul_f16_coopmat.glsl"
