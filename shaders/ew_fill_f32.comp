#version 450
#include "ew_fill.glsl"
