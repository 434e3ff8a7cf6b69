#version 450
#include "reduce.glsl"
