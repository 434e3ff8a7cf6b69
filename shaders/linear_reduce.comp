#version 450
// Finishes a split-K linear layer (linear.glsl, mode 3): sums the `splits`
// partials part[(s·M + m)·N + row] in slice order, then applies the
// epilogue (`mode`): 0 y = sum; 1 y = sum + res (res may be y itself);
// 2 y[m, j] = silu(sum of gate row j) · (sum of up row I + j), y [M, N/2].
// Grid-stride over the outputs: any grid covers them.
#include "activations.glsl"
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer Part { float part[]; };
layout(set = 0, binding = 1) readonly buffer Res { float res[]; };
layout(set = 0, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint M; uint N; uint mode; uint splits; };

float total(uint m, uint row) {
    float a = 0.0;
    for (uint s = 0u; s < splits; ++s) a += part[(s * M + m) * N + row];
    return a;
}

void main() {
    uint cols = mode == 2u ? N / 2u : N;
    uint outputs = M * cols;
    for (uint i = gl_GlobalInvocationID.x; i < outputs; i += gl_NumWorkGroups.x * 256u) {
        uint m = i / cols, c = i % cols;
        float a = total(m, c);
        if (mode == 2u) {
            y[i] = a * vkc_sigmoid(a) * total(m, cols + c);
        } else if (mode == 1u) {
            y[i] = a + res[i];
        } else {
            y[i] = a;
        }
    }
}
