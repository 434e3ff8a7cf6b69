#version 450
// Element-wise conversion between f32, f16 and bf16 (ops::convert):
// y[i] = x[i] widened exactly, or narrowed once to nearest even (overflow
// to infinity, NaN stays NaN). 16-bit values are read and written as
// uint16_t words and converted with 32-bit integer arithmetic, so only
// 16-bit storage is needed. The base is f32 to f32; the variants name
// source and destination. Each invocation strides over the elements.
// Push constant: n.
// variant: cast_f32_f16 DST_F16=1
// variant: cast_f32_bf16 DST_BF16=1
// variant: cast_f16_f32 SRC_F16=1
// variant: cast_f16_f16 SRC_F16=1 DST_F16=1
// variant: cast_f16_bf16 SRC_F16=1 DST_BF16=1
// variant: cast_bf16_f32 SRC_BF16=1
// variant: cast_bf16_f16 SRC_BF16=1 DST_F16=1
// variant: cast_bf16_bf16 SRC_BF16=1 DST_BF16=1
#if defined(SRC_F16) || defined(SRC_BF16) || defined(DST_F16) || defined(DST_BF16)
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#endif
#include "common.glsl"

layout(local_size_x = 256) in;
#if defined(SRC_F16) || defined(SRC_BF16)
layout(std430, set = 0, binding = 0) readonly buffer X { uint16_t x[]; };
#else
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
#endif
#if defined(DST_F16) || defined(DST_BF16)
layout(std430, set = 0, binding = 1) writeonly buffer Y { uint16_t y[]; };
#else
layout(std430, set = 0, binding = 1) writeonly buffer Y { float y[]; };
#endif
layout(push_constant) uniform P { uint n; };

// The f32 value of half bits h (exact, subnormals included).
float f16_to_f32(uint h) {
    return unpackHalf2x16(h).x;
}

// The half bits nearest f (ties to even; overflow to infinity; NaN quiet).
uint f32_to_f16(float f) {
    uint b = floatBitsToUint(f);
    uint sign = (b >> 16) & 0x8000u;
    int e = int((b >> 23) & 0xffu);
    uint man = b & 0x7fffffu;
    if (e == 0xff) return sign | 0x7c00u | (man != 0u ? 0x200u : 0u);
    int he = e - 127 + 15;
    if (he >= 0x1f) return sign | 0x7c00u;
    if (he <= 0) {
        if (he < -10) return sign;
        uint m = man | 0x800000u;
        uint shift = uint(14 - he);
        uint half_ = m >> shift;
        uint rem = m & ((1u << shift) - 1u);
        uint mid = 1u << (shift - 1u);
        bool up = rem > mid || (rem == mid && (half_ & 1u) == 1u);
        return sign | (half_ + (up ? 1u : 0u));
    }
    uint half_ = (uint(he) << 10) | (man >> 13);
    uint rem = man & 0x1fffu;
    bool up = rem > 0x1000u || (rem == 0x1000u && (half_ & 1u) == 1u);
    return sign | (half_ + (up ? 1u : 0u));
}

// The bf16 bits nearest f (ties to even; NaN quiet).
uint f32_to_bf16(float f) {
    uint u = floatBitsToUint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

void main() {
    uint step = gl_NumWorkGroups.x * LOCAL;
    for (uint i = gl_GlobalInvocationID.x; i < n; i += step) {
#if defined(SRC_F16)
        float v = f16_to_f32(uint(x[i]));
#elif defined(SRC_BF16)
        float v = uintBitsToFloat(uint(x[i]) << 16);
#else
        float v = x[i];
#endif
#if defined(DST_F16)
        y[i] = uint16_t(f32_to_f16(v));
#elif defined(DST_BF16)
        y[i] = uint16_t(f32_to_bf16(v));
#else
        y[i] = v;
#endif
    }
}
