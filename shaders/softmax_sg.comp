#version 450
#define USE_SUBGROUPS
#include "softmax.glsl"
