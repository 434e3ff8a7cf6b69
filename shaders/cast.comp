#version 450
// Element-wise conversion between f32, f16 and bf16 (ops::convert):
// y[i] = x[i] widened exactly, or narrowed once to nearest even (overflow
// to infinity, NaN stays NaN). 16-bit values are read and written as
// 16-bit words and converted with 32-bit integer arithmetic, so only
// 16-bit storage is needed. The base is f32 to f32; the variants name
// source and destination.
//
// The first 8·n8 elements go in groups of 8 per invocation and step: one
// 16-byte load of 16-bit values (two for f32) and one 16-byte store (two
// for f32), through the bindings X8 and Y8 (n8 = 0 where the ranges are
// not 16-byte aligned, and where the op finds the conversion within one
// wave of the adapter); the rest, one element at a time through X1 and Y1.
// Both loops stride over the whole grid, so any grid size is correct.
// bf16 to f16 takes a shortcut where the value lies in f16's normal range:
// the bits move, nothing rounds (bf16's 8 significant bits fit f16's 11),
// which is what the general rounding gives there.
// Push constants: n, n8.
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
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x = 256) in;
#if defined(SRC_F16) || defined(SRC_BF16)
#define SRC16
layout(std430, set = 0, binding = 0) readonly buffer X8 { uvec4 x8[]; };
layout(std430, set = 0, binding = 1) readonly buffer X1 { uint16_t x[]; };
#else
layout(std430, set = 0, binding = 0) readonly buffer X8 { vec4 x4[]; };
layout(std430, set = 0, binding = 1) readonly buffer X1 { float x[]; };
#endif
#if defined(DST_F16) || defined(DST_BF16)
#define DST16
layout(std430, set = 0, binding = 2) writeonly buffer Y8 { uvec4 y8[]; };
layout(std430, set = 0, binding = 3) writeonly buffer Y1 { uint16_t y[]; };
#else
layout(std430, set = 0, binding = 2) writeonly buffer Y8 { vec4 y4[]; };
layout(std430, set = 0, binding = 3) writeonly buffer Y1 { float y[]; };
#endif
layout(push_constant) uniform P { uint n; uint n8; };

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

#if defined(SRC16)
// The f32 value of the 16-bit source value with bits h.
float widen(uint h) {
#if defined(SRC_F16)
    return f16_to_f32(h);
#else
    return uintBitsToFloat(h << 16);
#endif
}
#endif

#if defined(DST16)
// The destination bits of f (a 16-bit type).
uint narrow(float f) {
#if defined(DST_F16)
    return f32_to_f16(f);
#else
    return f32_to_bf16(f);
#endif
}
#endif

#if defined(SRC16) && defined(DST16)
// The destination bits of the source value with bits h.
uint convert16(uint h) {
#if defined(SRC_BF16) && defined(DST_F16)
    // Biased exponent e of the bf16 value; e - 112 is f16's. In f16's
    // normal range (1 ≤ e - 112 ≤ 30) the bits move: f16 = sign |
    // (e - 112) << 10 | mantissa << 3, i.e. sign | ((h & 0x7fff) << 3) -
    // (112 << 10).
    uint e = (h >> 7) & 0xffu;
    if (e >= 113u && e <= 142u) return (h & 0x8000u) | (((h & 0x7fffu) << 3) - (112u << 10));
#endif
    return narrow(widen(h));
}
#endif

void main() {
    uint step = gl_NumWorkGroups.x * LOCAL;
    uint gid = gl_GlobalInvocationID.x;
    for (uint i = gid; i < n8; i += step) {
#if defined(SRC16) && defined(DST16)
        uvec4 w = x8[i], o;
        [[unroll]] for (uint c = 0u; c < 4u; ++c)
            o[c] = convert16(w[c] & 0xffffu) | (convert16(w[c] >> 16) << 16);
        y8[i] = o;
#elif defined(SRC16)
        uvec4 w = x8[i];
        y4[2u * i] = vec4(widen(w.x & 0xffffu), widen(w.x >> 16), widen(w.y & 0xffffu), widen(w.y >> 16));
        y4[2u * i + 1u] = vec4(widen(w.z & 0xffffu), widen(w.z >> 16), widen(w.w & 0xffffu), widen(w.w >> 16));
#elif defined(DST16)
        vec4 a = x4[2u * i], b = x4[2u * i + 1u];
        y8[i] = uvec4(narrow(a.x) | (narrow(a.y) << 16), narrow(a.z) | (narrow(a.w) << 16),
                      narrow(b.x) | (narrow(b.y) << 16), narrow(b.z) | (narrow(b.w) << 16));
#else
        y4[2u * i] = x4[2u * i];
        y4[2u * i + 1u] = x4[2u * i + 1u];
#endif
    }
    for (uint i = 8u * n8 + gid; i < n; i += step) {
#if defined(SRC16) && defined(DST16)
        y[i] = uint16_t(convert16(uint(x[i])));
#elif defined(SRC16)
        y[i] = widen(uint(x[i]));
#elif defined(DST16)
        y[i] = uint16_t(narrow(x[i]));
#else
        y[i] = x[i];
#endif
    }
}
