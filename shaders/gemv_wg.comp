#version 450
#include "gemv.glsl"
