#version 450
#include "ew_unary.glsl"
