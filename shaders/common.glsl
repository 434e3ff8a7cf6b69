// Shared pieces of the built-in kernels: workgroup size, NaN-aware max,
// and workgroup reductions in a fixed order (subgroup operations where the
// including file defines USE_SUBGROUPS, a shared-memory tree otherwise).
#ifndef VKC_COMMON_GLSL
#define VKC_COMMON_GLSL

#ifdef USE_SUBGROUPS
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

#define LOCAL 256u
#define NEG_INF uintBitsToFloat(0xff800000u)
#define QNAN uintBitsToFloat(0x7fc00000u)

// max that propagates NaN: NaN if either operand is NaN.
float nmax(float a, float b) { return (a > b || isnan(a)) ? a : b; }


shared float wg_red[LOCAL];

#ifdef USE_SUBGROUPS
// Sum over the workgroup: subgroupAdd, then the subgroups' sums added by
// invocation 0 in subgroup order. Every invocation gets the result.
float wg_sum(float v) {
    float s = subgroupAdd(v);
    if (subgroupElect()) wg_red[gl_SubgroupID] = s;
    barrier();
    if (gl_LocalInvocationIndex == 0u) {
        float t = wg_red[0];
        for (uint i = 1u; i < gl_NumSubgroups; ++i) t += wg_red[i];
        wg_red[LOCAL - 1u] = t;
    }
    barrier();
    float r = wg_red[LOCAL - 1u];
    barrier();
    return r;
}

float wg_max(float v) {
    bool n = subgroupMax(isnan(v) ? 1u : 0u) != 0u;
    float m = subgroupMax(isnan(v) ? NEG_INF : v);
    if (subgroupElect()) wg_red[gl_SubgroupID] = n ? QNAN : m;
    barrier();
    if (gl_LocalInvocationIndex == 0u) {
        float t = wg_red[0];
        for (uint i = 1u; i < gl_NumSubgroups; ++i) t = nmax(t, wg_red[i]);
        wg_red[LOCAL - 1u] = t;
    }
    barrier();
    float r = wg_red[LOCAL - 1u];
    barrier();
    return r;
}
#else
// Shared-memory tree, halving each step (a fixed order).
float wg_sum(float v) {
    uint t = gl_LocalInvocationIndex;
    wg_red[t] = v;
    barrier();
    for (uint s = LOCAL / 2u; s > 0u; s >>= 1u) {
        if (t < s) wg_red[t] += wg_red[t + s];
        barrier();
    }
    float r = wg_red[0];
    barrier();
    return r;
}

float wg_max(float v) {
    uint t = gl_LocalInvocationIndex;
    wg_red[t] = v;
    barrier();
    for (uint s = LOCAL / 2u; s > 0u; s >>= 1u) {
        if (t < s) wg_red[t] = nmax(wg_red[t], wg_red[t + s]);
        barrier();
    }
    float r = wg_red[0];
    barrier();
    return r;
}
#endif

#endif
