#version 450
#define USE_SUBGROUPS
#include "gemv.glsl"
