// Storage types of the element-wise kernels: f32 by default, f16 storage
// (arithmetic in f32) where the including file defines DTYPE_F16.
#ifndef VKC_DTYPE_GLSL
#define VKC_DTYPE_GLSL
#ifdef DTYPE_F16
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define S1 float16_t
#define S4 f16vec4
#else
#define S1 float
#define S4 vec4
#endif
#endif
