#version 450
// C_i = A_i·B_i for `count` products with bf16 B (f32 accumulation and
// result), one launch: the path for adapters without workgroup-scope
// cooperative matrices (matmul_cm2_decode.comp is the tensor-core one).
// A is f16, or f32 with A_F32; B is bfloat16 held as 16-bit words, widened
// exactly to f32 (the bits shifted up 16). 16×16 output tiles per
// workgroup, 16-deep slices of A and B staged through shared memory, any
// M, K, N (zeros past the edges). Needs storageBuffer16BitAccess only (no
// 16-bit arithmetic).
//
// With B_NK, each B_i is stored N×K row-major (nn.Linear's [out, in]
// weight): the slice is read along K (consecutive invocations, consecutive
// elements) and stored transposed into shared memory.
//
// Push constants: M, K, N and the element strides between consecutive A,
// B and C matrices. Grid: (ceil(N/16), ceil(M/16), count).
//
// variant: matmul_bf16w_batched_bt B_NK=1
// variant: matmul_bf16w_batched_a32 A_F32=1
// variant: matmul_bf16w_batched_a32_bt A_F32=1 B_NK=1
#extension GL_EXT_shader_16bit_storage : require

layout(local_size_x = 16, local_size_y = 16, local_size_z = 1) in;
#ifdef A_F32
layout(std430, set = 0, binding = 0) readonly buffer MatA { float a[]; };
#define A_AT(i) a[i]
#else
layout(std430, set = 0, binding = 0) readonly buffer MatA { uint16_t a[]; };
#define A_AT(i) unpackHalf2x16(uint(a[i])).x
#endif
layout(std430, set = 0, binding = 1) readonly buffer MatB { uint16_t b[]; };
#define B_AT(i) uintBitsToFloat(uint(b[i]) << 16)
layout(std430, set = 0, binding = 2) writeonly buffer MatC { float c[]; };
layout(push_constant) uniform Shape {
    uint M; uint K; uint N; uint strideA; uint strideB; uint strideC;
};

const uint T = 16;
shared float sa[T][T + 1];
shared float sb[T][T + 1];

void main() {
    const uint tx = gl_LocalInvocationID.x;
    const uint ty = gl_LocalInvocationID.y;
    const uint row = gl_WorkGroupID.y * T + ty;
    const uint col = gl_WorkGroupID.x * T + tx;
    const uint oa = gl_WorkGroupID.z * strideA;
    const uint ob = gl_WorkGroupID.z * strideB;
    const uint oc = gl_WorkGroupID.z * strideC;
    float acc = 0.0;
    for (uint k0 = 0; k0 < K; k0 += T) {
        const uint ka = k0 + tx;
        const uint kb = k0 + ty;
        sa[ty][tx] = (row < M && ka < K) ? A_AT(oa + row * K + ka) : 0.0;
#ifdef B_NK
        // This invocation loads B[n = first column + ty][k = k0 + tx].
        const uint nb = gl_WorkGroupID.x * T + ty;
        sb[tx][ty] = (ka < K && nb < N) ? B_AT(ob + nb * K + ka) : 0.0;
#else
        sb[ty][tx] = (kb < K && col < N) ? B_AT(ob + kb * N + col) : 0.0;
#endif
        barrier();
        for (uint kk = 0; kk < T; ++kk) {
            acc += sa[ty][kk] * sb[kk][tx];
        }
        barrier();
    }
    if (row < M && col < N) {
        c[oc + row * N + col] = acc;
    }
}
