#version 450
// c = a·B for a vector a (K) and row-major B (K×N), N a multiple of 4: the
// M = 1 GEMV path with 16-byte loads and K split over workgroup layers
// (MatmulKernel::VecMat4). Bandwidth-bound, so the point is bytes in
// flight: a workgroup owns COLS4 consecutive vec4 columns (128 floats) and
// splits its K range into SLICES interleaved slices; each invocation walks
// its vec4 column down its slice eight rows per step (eight independent
// 16-byte loads in flight; a subgroup's load is 512 contiguous bytes of one
// row), then the slices are summed in shared memory in a fixed order.
//
// Workgroup layer y takes k in [y·KS, min(K, (y + 1)·KS)) and writes its
// sums to c[y·N + col] (the host adds the layers in order in a second pass,
// `linear_reduce`); with one layer (KS ≥ K) that is c itself.
//
// Push constants: K, N, KS. Grid: (ceil(N / (4·COLS4)), layers, 1).
// Bindings: a (K), B (K·N as vec4s), c (layers·N as vec4s).
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer VecA { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer MatB { vec4 b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer VecC { vec4 c[]; };
layout(push_constant) uniform Shape { uint K; uint N; uint KS; };

const uint COLS4 = 32;
const uint SLICES = 256 / COLS4;
shared vec4 part[SLICES][COLS4];

void main() {
    uint t = gl_LocalInvocationID.x;
    uint lc = t % COLS4;
    uint slice = t / COLS4;
    uint n4 = N / 4;
    uint col = gl_WorkGroupID.x * COLS4 + lc;
    uint kbeg = gl_WorkGroupID.y * KS;
    uint kend = min(K, kbeg + KS);
    vec4 s0 = vec4(0.0), s1 = vec4(0.0), s2 = vec4(0.0), s3 = vec4(0.0);
    if (col < n4) {
        uint k = kbeg + slice;
        for (; k + 7 * SLICES < kend; k += 8 * SLICES) {
            vec4 b0 = b[k * n4 + col];
            vec4 b1 = b[(k + SLICES) * n4 + col];
            vec4 b2 = b[(k + 2 * SLICES) * n4 + col];
            vec4 b3 = b[(k + 3 * SLICES) * n4 + col];
            vec4 b4 = b[(k + 4 * SLICES) * n4 + col];
            vec4 b5 = b[(k + 5 * SLICES) * n4 + col];
            vec4 b6 = b[(k + 6 * SLICES) * n4 + col];
            vec4 b7 = b[(k + 7 * SLICES) * n4 + col];
            s0 = fma(vec4(a[k]), b0, s0);
            s1 = fma(vec4(a[k + SLICES]), b1, s1);
            s2 = fma(vec4(a[k + 2 * SLICES]), b2, s2);
            s3 = fma(vec4(a[k + 3 * SLICES]), b3, s3);
            s0 = fma(vec4(a[k + 4 * SLICES]), b4, s0);
            s1 = fma(vec4(a[k + 5 * SLICES]), b5, s1);
            s2 = fma(vec4(a[k + 6 * SLICES]), b6, s2);
            s3 = fma(vec4(a[k + 7 * SLICES]), b7, s3);
        }
        for (; k < kend; k += SLICES) {
            s0 = fma(vec4(a[k]), b[k * n4 + col], s0);
        }
    }
    part[slice][lc] = (s0 + s1) + (s2 + s3);
    barrier();
    if (slice == 0 && col < n4) {
        vec4 s = part[0][lc];
        for (uint i = 1; i < SLICES; i++) {
            s += part[i][lc];
        }
        c[gl_WorkGroupID.y * n4 + col] = s;
    }
}
