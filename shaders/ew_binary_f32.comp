#version 450
#include "ew_binary.glsl"
