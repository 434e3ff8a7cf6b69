#version 450
// Causal attention for prefill on workgroup-scope cooperative matrices
// (VK_NV_cooperative_matrix2: tensor cores), f16 tensors: q [batch, tokens,
// q_heads, dim] against k, v [batch, tokens, kv_heads, dim] (query i sees
// keys 0..=i; query head h reads kv head h / (q_heads / kv_heads)), out
// like q. The same computation as nn_attn_prefill.comp, flash-attention
// style, with the two products on the tensor cores:
//
//   per key tile of BC keys up to the tile's last query:
//     S = scale · Q·Kᵀ                  (f16 operands, f32 accumulator)
//     S = -big where key > query or key >= tokens (tiles on the diagonal)
//     m' = max(m, rowmax S);  P = exp(S - m');  e = exp(m - m')
//     l = e·l + rowsum P;     O = e·O + P·V     (P rounded to f16)
//   out = O / l, rounded to f16.
//
// Each row's m, l and e are held smeared across a BR×BC accumulator (every
// column the row's value); a row sum is P times a matrix of ones, so l sums
// the f16 probabilities that P·V weights. Workgroups of 128 invocations:
// x = tile of BR queries (the last tiles, with the most key tiles, first),
// y = (b, query head). HEAD_D is the padded head width (64 or 128): q, k
// and v are read through clamped tensor layouts of `dim` columns, so
// columns past dim read zero, and the store writes only the first dim
// columns of the first `tokens` rows.
//
// Push constants: tokens, q_heads, kv_heads, dim, scale. Grid:
// (ceil(tokens / BR), batch · q_heads).
//
// Needs cooperativeMatrixReductions, cooperativeMatrixConversions,
// cooperativeMatrixPerElementOperations and tensor addressing; compiled for
// Vulkan 1.3 by a glslang that knows GL_NV_cooperative_matrix2
// (scripts/glslang_trixie.sh on Debian 12).
//
// target-env: vulkan1.3
// variant: nn_attn_prefill_tc_d64 HEAD_D=64
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : enable

#ifndef HEAD_D
#define HEAD_D 128
#endif
const uint D = HEAD_D;
// Queries per workgroup and keys per step. On an H200 at Qwen3-4B's shape
// (512 tokens, 32 / 8 heads of 128) steps of 32 keys ran in 36 µs against
// 48 for steps of 64 (fewer registers: 221 against 255 and spills), and
// 256 threads instead of 128 in 50 µs (docs/runs/2026-11-27r-h200-r2).
const uint BR = 64;
const uint BC = 32;

layout(local_size_x = 128, local_size_y = 1, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) readonly buffer Q { float16_t q[]; };
layout(std430, set = 0, binding = 1) readonly buffer K { float16_t k[]; };
layout(std430, set = 0, binding = 2) readonly buffer V { float16_t v[]; };
layout(std430, set = 0, binding = 3) writeonly buffer O { float16_t o[]; };
layout(push_constant) uniform P {
    uint tokens; uint q_heads; uint kv_heads; uint dim; float scale;
};

#define ROWS coopmat<float, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator>
#define ACC_O coopmat<float, gl_ScopeWorkgroup, BR, D, gl_MatrixUseAccumulator>
#define OUT16 coopmat<float16_t, gl_ScopeWorkgroup, BR, D, gl_MatrixUseAccumulator>
#define MAT_Q coopmat<float16_t, gl_ScopeWorkgroup, BR, D, gl_MatrixUseA>
#define MAT_KT coopmat<float16_t, gl_ScopeWorkgroup, D, BC, gl_MatrixUseB>
#define MAT_P coopmat<float16_t, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseA>
#define MAT_V coopmat<float16_t, gl_ScopeWorkgroup, BC, D, gl_MatrixUseB>
#define ONES coopmat<float16_t, gl_ScopeWorkgroup, BC, BC, gl_MatrixUseB>
#define CLAMP gl_CooperativeMatrixClampModeConstantNV

// A large finite negative: exp of it less any finite max is 0, and the
// difference of two of them is 0, not NaN.
const float NEG = -1.7014117e38;  // -FLT_MAX / 2

float row_max(const in float a, const in float b) {
    return max(a, b);
}

// Reduces a row to its first element: spreads a smeared row value over a
// matrix of another width.
float first(const in float a, const in float b) {
    return a;
}

// Masks the score of query q0 + row against key k0 + col.
float causal(const in uint row, const in uint col, const in float s, const in uint q0,
             const in uint k0, const in uint n) {
    const uint key = k0 + col;
    return (key > q0 + row || key >= n) ? NEG : s;
}

void main() {
    const uint q0 = (gl_NumWorkGroups.x - 1u - gl_WorkGroupID.x) * BR;
    const uint bh = gl_WorkGroupID.y;
    const uint h = bh % q_heads, b = bh / q_heads;
    const uint kvh = h / (q_heads / kv_heads);
    const uint qstride = q_heads * dim, kstride = kv_heads * dim;
    const uint qbase = b * tokens * qstride + h * dim;
    const uint kbase = b * tokens * kstride + kvh * dim;

    tensorLayoutNV<2, CLAMP> lq = createTensorLayoutNV(2, CLAMP);
    lq = setTensorLayoutDimensionNV(lq, tokens, dim);
    lq = setTensorLayoutStrideNV(lq, qstride, 1);
    tensorLayoutNV<2, CLAMP> lkv = createTensorLayoutNV(2, CLAMP);
    lkv = setTensorLayoutDimensionNV(lkv, tokens, dim);
    lkv = setTensorLayoutStrideNV(lkv, kstride, 1);
    tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);

    MAT_Q mq;
    coopMatLoadTensorNV(mq, q, qbase, sliceTensorLayoutNV(lq, q0, BR, 0, D));
    const ONES ones = ONES(1.0);
    ACC_O acc = ACC_O(0.0);
    ROWS m = ROWS(NEG);
    ROWS l = ROWS(0.0);
    const uint kend = min(q0 + BR, tokens);  // keys this tile's queries see
    [[dont_unroll]]
    for (uint k0 = 0u; k0 < kend; k0 += BC) {
        MAT_KT kt;
        coopMatLoadTensorNV(kt, k, kbase, sliceTensorLayoutNV(lkv, k0, BC, 0, D), transposed);
        MAT_V mv;
        coopMatLoadTensorNV(mv, v, kbase, sliceTensorLayoutNV(lkv, k0, BC, 0, D));
        ROWS s = coopMatMulAdd(mq, kt, ROWS(0.0));
        s *= scale;
        if (k0 + BC > q0 + 1u) {
            coopMatPerElementNV(s, s, causal, q0, k0, tokens);
        }
        ROWS rmax;
        coopMatReduceNV(rmax, s, gl_CooperativeMatrixReduceRowNV, row_max);
        // Same type, same layout: element i of each is the same entry.
        ROWS e;
        [[unroll]] for (int i = 0; i < s.length(); ++i) {
            const float mi = max(m[i], rmax[i]);
            s[i] = exp(s[i] - mi);
            e[i] = exp(m[i] - mi);
            m[i] = mi;
        }
        const MAT_P p = MAT_P(s);
        const ROWS sums = coopMatMulAdd(p, ones, ROWS(0.0));
        [[unroll]] for (int i = 0; i < l.length(); ++i) {
            l[i] = e[i] * l[i] + sums[i];
        }
        ACC_O ew;
        coopMatReduceNV(ew, e, gl_CooperativeMatrixReduceRowNV, first);
        [[unroll]] for (int i = 0; i < acc.length(); ++i) {
            acc[i] *= ew[i];
        }
        acc = coopMatMulAdd(p, mv, acc);
    }
    ACC_O lw;
    coopMatReduceNV(lw, l, gl_CooperativeMatrixReduceRowNV, first);
    [[unroll]] for (int i = 0; i < acc.length(); ++i) {
        acc[i] = lw[i] == 0.0 ? 0.0 : acc[i] / lw[i];
    }
    const OUT16 out16 = OUT16(acc);
    coopMatStoreTensorNV(out16, o, qbase, sliceTensorLayoutNV(lq, q0, BR, 0, D));
}
