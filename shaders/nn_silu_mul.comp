#version 450
// SwiGLU's gate: out[r, c] = silu(gate[r, c]) * up[r, c] over rows x cols,
// silu(g) = g / (1 + exp(-g)). The gate and up rows are read at their own
// strides and offsets, so they may be two buffers or the two halves of one
// [rows, 2 cols] buffer. Each invocation strides over the items.
// variant: nn_silu_mul_f16 DTYPE_F16=1
// variant: nn_silu_mul_bf16 DTYPE_BF16=1
#include "common.glsl"
#include "nn_dtype.glsl"
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer G { ST g[]; };
layout(set = 0, binding = 1) readonly buffer U { ST u[]; };
layout(set = 0, binding = 2) writeonly buffer O { ST o[]; };
layout(push_constant) uniform P {
    uint rows; uint cols;
    uint g_stride; uint g_off;
    uint u_stride; uint u_off;
};

void main() {
    uint n = rows * cols;
    uint step = gl_NumWorkGroups.x * LOCAL;
    for (uint i = gl_GlobalInvocationID.x; i < n; i += step) {
        uint r = i / cols, c = i - r * cols;
        float gv = LD(g[r * g_stride + g_off + c]);
        float uv = LD(u[r * u_stride + u_off + c]);
        o[i] = TO(gv / (1.0 + exp(-gv)) * uv);
    }
}
