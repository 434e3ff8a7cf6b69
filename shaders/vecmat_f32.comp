#version 450
// c = a·B for a vector a (K) and row-major B (K×N): the GEMV path of matmul
// when M = 1. Bandwidth-bound: a workgroup owns COLS consecutive columns and
// splits K into SLICES interleaved slices; each thread walks its column down
// its slice (consecutive threads read consecutive columns of one row, whole
// 32-byte sectors), then the slices are summed in shared memory in a fixed
// order. Push constants: K, N. Grid: ceil(N/COLS) workgroups.
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer VecA { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer MatB { float b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer VecC { float c[]; };
layout(push_constant) uniform Shape { uint K; uint N; };

const uint COLS = 16;
const uint SLICES = 256 / COLS;
shared float part[SLICES][COLS];

void main() {
    uint t = gl_LocalInvocationID.x;
    uint lc = t % COLS;
    uint slice = t / COLS;
    uint col = gl_WorkGroupID.x * COLS + lc;
    float s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    if (col < N) {
        uint k = slice;
        for (; k + 3 * SLICES < K; k += 4 * SLICES) {
            s0 = fma(a[k], b[k * N + col], s0);
            s1 = fma(a[k + SLICES], b[(k + SLICES) * N + col], s1);
            s2 = fma(a[k + 2 * SLICES], b[(k + 2 * SLICES) * N + col], s2);
            s3 = fma(a[k + 3 * SLICES], b[(k + 3 * SLICES) * N + col], s3);
        }
        for (; k < K; k += SLICES) {
            s0 = fma(a[k], b[k * N + col], s0);
        }
    }
    part[slice][lc] = (s0 + s1) + (s2 + s3);
    barrier();
    if (slice == 0 && col < N) {
        float s = 0.0;
        for (uint i = 0; i < SLICES; i++) {
            s += part[i][lc];
        }
        c[col] = s;
    }
}
