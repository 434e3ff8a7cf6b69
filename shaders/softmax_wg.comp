#version 450
#include "softmax.glsl"
