#version 450
// The cooperative-matrix f16 matmul with 16-byte shared stores (see the include).
#define VEC_SHARED 1
#include "matmul_f16_coopmat.glsl"
