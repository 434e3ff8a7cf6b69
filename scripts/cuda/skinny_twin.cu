// A CUDA twin of the skinny linear kernel's subgroup-32 loop
// (shaders/linear.glsl with linear_loops.glsl's CPS loop and butterfly):
// y[m][n] = sum_k x[m][k] * W[n][k], W bf16 [N, K] row-major (nn.Linear's
// [out, in]), x f32 [M, K], f32 sums. Each warp owns a unit of R = 4 rows
// of W; lane l reads 16-byte chunks l, l + 32, ... of the unit's rows
// (CPS chunks per step) and the same chunks of the M rows of x (through
// the read-only cache), keeping R x M sums, finished by warp shuffles.
// 256 threads (8 warps, 8 units) per block, one block per 8 units.
//
// It answers one question for the Vulkan kernels: at 4 rows of x, does
// this loop's arithmetic hide under its loads when NVIDIA's CUDA compiler
// builds it (where the Vulkan build adds 8.3 us to gate|up's 35.4, calls
// v2-v3)? Variants: the loop as it is (`base`), the next step's W loaded
// before this step's products (`prefetch`), two chunks a step (`cps2`),
// and the loads alone (`loads`: the words folded, no products). Beside
// them a grid-stride read of the same bytes (`read`), the floor.
//
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90 -Xptxas -v -o /tmp/skinny_twin skinny_twin.cu
//   /tmp/skinny_twin [N K]        (default: Qwen3-4B's gate|up, 19456 2560)
// Weights from memory: 4 copies of W, launch i reads copy i % 4. Each
// variant's output is checked once against a CPU sum in double (a sample
// of outputs); timing: 20 warm-up launches, then 15 rounds of 20 launches
// back to back (CUDA events around each round), min / median / max us per
// launch.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(x)                                                                       \
    do {                                                                               \
        cudaError_t e = (x);                                                           \
        if (e != cudaSuccess) {                                                        \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

constexpr int R = 4;
constexpr int WARPS = 8;

__device__ __forceinline__ void decode(uint4 w, float (&v)[8]) {
    v[0] = __uint_as_float(w.x << 16);
    v[1] = __uint_as_float(w.x & 0xffff0000u);
    v[2] = __uint_as_float(w.y << 16);
    v[3] = __uint_as_float(w.y & 0xffff0000u);
    v[4] = __uint_as_float(w.z << 16);
    v[5] = __uint_as_float(w.z & 0xffff0000u);
    v[6] = __uint_as_float(w.w << 16);
    v[7] = __uint_as_float(w.w & 0xffff0000u);
}

// Adds chunk c of the unit's rows (raw in w[R]) into acc.
template <int M>
__device__ __forceinline__ void chunk(const uint4 (&w)[R], const float4* __restrict__ x4, int k4,
                                      int c, float (&acc)[R][M]) {
    float wv[R][8];
#pragma unroll
    for (int i = 0; i < R; ++i) decode(w[i], wv[i]);
#pragma unroll
    for (int m = 0; m < M; ++m) {
        float4 a = __ldg(&x4[m * k4 + 2 * c]);
        float4 b = __ldg(&x4[m * k4 + 2 * c + 1]);
#pragma unroll
        for (int i = 0; i < R; ++i) {
            float s = acc[i][m];
            s = fmaf(a.x, wv[i][0], s);
            s = fmaf(a.y, wv[i][1], s);
            s = fmaf(a.z, wv[i][2], s);
            s = fmaf(a.w, wv[i][3], s);
            s = fmaf(b.x, wv[i][4], s);
            s = fmaf(b.y, wv[i][5], s);
            s = fmaf(b.z, wv[i][6], s);
            s = fmaf(b.w, wv[i][7], s);
            acc[i][m] = s;
        }
    }
}

template <int M>
__device__ __forceinline__ void finish(float (&acc)[R][M], float* __restrict__ y, int n0, int N,
                                       int lane) {
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
        for (int m = 0; m < M; ++m) {
            float s = acc[i][m];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
            if (lane == i * M + m && n0 + i < N) y[m * N + n0 + i] = s;
        }
}

// VARIANT 0 base, 1 prefetch, 2 cps2, 3 loads only.
template <int M, int VARIANT>
__global__ void __launch_bounds__(256) linear(const uint4* __restrict__ w4, const float4* __restrict__ x4,
                                              float* __restrict__ y, int N, int K) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int unit = blockIdx.x * WARPS + warp;
    const int n0 = unit * R;
    if (n0 >= N) return;
    const int kv = K / 8, k4 = K / 4;
    const uint4* rows[R];
#pragma unroll
    for (int i = 0; i < R; ++i) rows[i] = w4 + (size_t)min(n0 + i, N - 1) * kv;
    float acc[R][M];
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
        for (int m = 0; m < M; ++m) acc[i][m] = 0.f;
    if (VARIANT == 0) {
        for (int c = lane; c < kv; c += 32) {
            uint4 w[R];
#pragma unroll
            for (int i = 0; i < R; ++i) w[i] = __ldg(&rows[i][c]);
            chunk<M>(w, x4, k4, c, acc);
        }
    } else if (VARIANT == 1) {
        uint4 next[R];
#pragma unroll
        for (int i = 0; i < R; ++i) next[i] = lane < kv ? __ldg(&rows[i][lane]) : make_uint4(0, 0, 0, 0);
        for (int c = lane; c < kv; c += 32) {
            uint4 w[R];
#pragma unroll
            for (int i = 0; i < R; ++i) {
                w[i] = next[i];
                next[i] = c + 32 < kv ? __ldg(&rows[i][c + 32]) : make_uint4(0, 0, 0, 0);
            }
            chunk<M>(w, x4, k4, c, acc);
        }
    } else if (VARIANT == 2) {
        for (int c = lane; c < kv; c += 64) {
            uint4 w[R], v[R];
            const bool two = c + 32 < kv;
#pragma unroll
            for (int i = 0; i < R; ++i) {
                w[i] = __ldg(&rows[i][c]);
                v[i] = two ? __ldg(&rows[i][c + 32]) : make_uint4(0, 0, 0, 0);
            }
            chunk<M>(w, x4, k4, c, acc);
            if (two) chunk<M>(v, x4, k4, c + 32, acc);
        }
    } else {
        unsigned h = 0;
        for (int c = lane; c < kv; c += 32) {
#pragma unroll
            for (int i = 0; i < R; ++i) {
                uint4 w = __ldg(&rows[i][c]);
                h ^= w.x ^ w.y ^ w.z ^ w.w;
            }
        }
        acc[0][0] = __uint_as_float((h & 0x007fffffu) | 0x3f800000u);
    }
    finish<M>(acc, y, n0, N, lane);
}

// The floor: every thread reads 16-byte words grid-stride, four in flight.
__global__ void __launch_bounds__(256) read_all(const uint4* __restrict__ w4, size_t n4, unsigned* out) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    unsigned h = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += 4 * stride) {
        uint4 v[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) v[j] = i + j * stride < n4 ? __ldg(&w4[i + j * stride]) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int j = 0; j < 4; ++j) h ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
    }
    if (h == 0x12345678u) out[0] = h;  // keeps the loads
}

static float bf16_to_f32(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

struct Stats {
    float lo, med, hi;
};

template <class F>
static Stats time_it(F launch) {
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    for (int i = 0; i < 20; ++i) launch(i);
    std::vector<float> per;
    for (int r = 0; r < 15; ++r) {
        CHECK(cudaEventRecord(a));
        for (int i = 0; i < 20; ++i) launch(i);
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        per.push_back(ms * 1000.f / 20.f);
    }
    std::sort(per.begin(), per.end());
    CHECK(cudaEventDestroy(a));
    CHECK(cudaEventDestroy(b));
    return {per.front(), per[per.size() / 2], per.back()};
}

template <int M, int V>
static void run(const char* name, uint4* w4[4], const float4* x4, float* y, int N, int K,
                const std::vector<uint16_t>& hw, const std::vector<float>& hx) {
    const int units = (N + R - 1) / R, blocks = (units + WARPS - 1) / WARPS;
    cudaFuncAttributes attr;
    CHECK(cudaFuncGetAttributes(&attr, linear<M, V>));
    CHECK(cudaMemset(y, 0, sizeof(float) * M * N));
    linear<M, V><<<blocks, 256>>>(w4[0], x4, y, N, K);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    std::vector<float> hy((size_t)M * N);
    CHECK(cudaMemcpy(hy.data(), y, sizeof(float) * hy.size(), cudaMemcpyDeviceToHost));
    double worst = 0, big = 0;
    for (int n = 0; n < N; n += 97) {
        for (int m = 0; m < M; ++m) {
            double s = 0;
            for (int k = 0; k < K; ++k) s += (double)hx[(size_t)m * K + k] * bf16_to_f32(hw[(size_t)n * K + k]);
            worst = std::max(worst, std::fabs(s - hy[(size_t)m * N + n]));
            big = std::max(big, std::fabs(s));
        }
    }
    Stats t = time_it([&](int i) { linear<M, V><<<blocks, 256>>>(w4[i % 4], x4, y, N, K); });
    const double bytes = 2.0 * N * K;
    printf("M=%d %-9s regs %3d, local %4zu B: us min %.2f / median %.2f / max %.2f; %.0f GB/s; "
           "check %s (max |err| / max |y| = %.2e)\n",
           M, name, attr.numRegs, (size_t)attr.localSizeBytes, t.lo, t.med, t.hi, bytes / t.med / 1e3,
           V == 3 ? "n/a (loads only)" : (worst <= 1e-5 * big ? "ok" : "FAIL"), big > 0 ? worst / big : 0.0);
}

int main(int argc, char** argv) {
    const int N = argc > 2 ? atoi(argv[1]) : 19456;
    const int K = argc > 2 ? atoi(argv[2]) : 2560;
    if (K % 8 != 0 || N <= 0) {
        fprintf(stderr, "K must be a multiple of 8\n");
        return 2;
    }
    cudaDeviceProp p;
    CHECK(cudaGetDeviceProperties(&p, 0));
    printf("%s, %d SMs; W [%d x %d] bf16 (%.1f MB), 4 copies\n", p.name, p.multiProcessorCount, N, K,
           2.0 * N * K / 1e6);
    std::vector<uint16_t> hw((size_t)N * K);
    std::vector<float> hx((size_t)4 * K);
    uint32_t s = 12345;
    auto rnd = [&]() {
        s = s * 1664525u + 1013904223u;
        return ((s >> 8) & 0xffff) / 65536.0f - 0.5f;
    };
    for (auto& v : hw) {
        float f = rnd() * 0.1f;
        uint32_t u;
        memcpy(&u, &f, 4);
        v = (uint16_t)(u >> 16);
    }
    for (auto& v : hx) v = rnd();
    uint4* w4[4];
    for (auto& w : w4) {
        CHECK(cudaMalloc(&w, hw.size() * 2));
        CHECK(cudaMemcpy(w, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
    }
    float4* x4;
    float* y;
    unsigned* sink;
    CHECK(cudaMalloc(&x4, hx.size() * 4));
    CHECK(cudaMemcpy(x4, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMalloc(&y, sizeof(float) * 4 * N));
    CHECK(cudaMalloc(&sink, 4));

    const size_t n4 = (size_t)N * K / 8;
    int per_sm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, read_all, 256, 0));
    const int grid = per_sm * p.multiProcessorCount;
    Stats f = time_it([&](int i) { read_all<<<grid, 256>>>(w4[i % 4], n4, sink); });
    printf("read (floor, %d blocks): us min %.2f / median %.2f / max %.2f; %.0f GB/s\n", grid, f.lo, f.med,
           f.hi, 2.0 * N * K / f.med / 1e3);

    run<1, 0>("base", w4, x4, y, N, K, hw, hx);
    run<1, 1>("prefetch", w4, x4, y, N, K, hw, hx);
    run<1, 3>("loads", w4, x4, y, N, K, hw, hx);
    run<4, 0>("base", w4, x4, y, N, K, hw, hx);
    run<4, 1>("prefetch", w4, x4, y, N, K, hw, hx);
    run<4, 2>("cps2", w4, x4, y, N, K, hw, hx);
    run<4, 3>("loads", w4, x4, y, N, K, hw, hx);
    return 0;
}
