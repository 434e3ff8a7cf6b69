// Storage types of the transformer kernels (nn_*.comp): f32 by default,
// f16 where the including file defines DTYPE_F16, bf16 (16-bit words,
// the top half of an f32) where it defines DTYPE_BF16. Arithmetic is f32
// either way: LD widens a stored element, TO narrows an f32 (bf16 rounds to
// nearest even; NaN stays NaN).
#ifndef VKC_NN_DTYPE_GLSL
#define VKC_NN_DTYPE_GLSL
#if defined(DTYPE_F16)
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define ST float16_t
#define LD(v) float(v)
#define TO(v) float16_t(v)
#elif defined(DTYPE_BF16)
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#define ST uint16_t
#define LD(v) uintBitsToFloat(uint(v) << 16)
uint f32_to_bf16(float f) {
    uint u = floatBitsToUint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;  // quiet NaN
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
#define TO(v) uint16_t(f32_to_bf16(v))
#else
#define ST float
#define LD(v) (v)
#define TO(v) (v)
#endif
#endif
