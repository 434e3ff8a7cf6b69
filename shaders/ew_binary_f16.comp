#version 450
#define DTYPE_F16
#include "ew_binary.glsl"
