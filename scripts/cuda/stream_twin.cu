// A CUDA twin of measure/examples/stream_floor.rs's pattern chain and of
// the floor's chain of tiny dependent dispatches (barrier_floor): the same
// work through CUDA graphs on the same card, so that what NVIDIA's Vulkan
// driver charges per dependent launch can be set beside what CUDA charges.
//
// Pattern chain: `launches` dispatches (default 72), dispatch j reading
// its own buffer of pattern[j % len] MB (default 31.5,21,99.6,49.8: a
// Qwen3-4B decode layer's q|k|v, o, gate|up and down weights in bf16),
// each buffer read once per replay, so the reads come from memory. The
// kernel is stream_floor's: a resident grid (compute units x resident
// blocks of 256), grid-stride 16-byte loads, 4 in flight per thread
// before any is used, XORed and folded into one word per block. Each
// dispatch follows the one before in the stream (a kernel boundary, as
// the Vulkan chain's barrier). Captured once as a graph; warmed for
// 300 ms, then `reps` replays (default 20), each timed by events (and by the host's clock
// from launch to the end of the wait, as stream_floor times): min /
// median / max us per round of the pattern and the median's GB/s.
// Checked once: the XOR of one dispatch's words equals the buffer's XOR
// computed on the host.
//
// Tiny chain: 100 and 1000 dependent kernels of 4 blocks x 256 threads
// (x[i] = x[i] * 1 + 1 over 1024 floats), captured as a graph, 30 timed
// replays: us per kernel; checked: x[i] = i + n after each replay.
//
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90 -o /tmp/stream_twin stream_twin.cu
//   /tmp/stream_twin [--pattern 31.5,21,99.6,49.8] [--launches 72] [--reps 20] [--plain]
// (`--plain`: W read through a plain pointer, not `__ldg`.)

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CHECK(x)                                                                       \
    do {                                                                               \
        cudaError_t e = (x);                                                           \
        if (e != cudaSuccess) {                                                        \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

constexpr int LOCAL = 256;
constexpr int ILP = 4;

__global__ void fill(uint4* w, size_t n4, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t a = (uint32_t)i * 2654435761u ^ seed;
        w[i] = make_uint4(a, a * 3u + 1u, a ^ 0x9e3779b9u, a + seed);
    }
}

// stream_floor's read kernel: words[blockIdx] ^= fold of what the block
// read. NC: W through a `const __restrict__` pointer (the compiler may use
// the non-coherent load path); otherwise a plain pointer, which may alias
// `words`.
template <bool NC>
__global__ void __launch_bounds__(LOCAL) read_kernel(const uint4* w, size_t n4, uint32_t* words) {
    size_t stride = (size_t)gridDim.x * LOCAL;
    uint4 acc = make_uint4(0, 0, 0, 0);
    uint4 v[ILP];
    for (size_t base = blockIdx.x * (size_t)LOCAL + threadIdx.x; base < n4; base += stride * ILP) {
#pragma unroll
        for (int k = 0; k < ILP; ++k) {
            size_t i = base + k * stride;
            v[k] = i < n4 ? (NC ? __ldg(&w[i]) : w[i]) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int k = 0; k < ILP; ++k) {
            acc.x ^= v[k].x;
            acc.y ^= v[k].y;
            acc.z ^= v[k].z;
            acc.w ^= v[k].w;
        }
    }
    uint32_t x = acc.x ^ acc.y ^ acc.z ^ acc.w;
    for (int o = 16; o > 0; o >>= 1) x ^= __shfl_xor_sync(0xffffffffu, x, o);
    if ((threadIdx.x & 31) == 0) atomicXor(&words[blockIdx.x], x);
}

__global__ void tiny(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * 1.0f + 1.0f;
}

static double median_of(std::vector<double> v, double* lo, double* hi) {
    std::sort(v.begin(), v.end());
    *lo = v.front();
    *hi = v.back();
    return v[v.size() / 2];
}

int main(int argc, char** argv) {
    std::vector<double> pattern = {31.5, 21.0, 99.6, 49.8};
    int launches = 72, reps = 20;
    bool plain = false;
    for (int i = 1; i < argc; i += 2) {
        std::string a = argv[i];
        if (a != "--plain" && i + 1 >= argc) {
            fprintf(stderr, "%s needs a value\n", argv[i]);
            return 2;
        }
        if (a == "--pattern") {
            pattern.clear();
            std::string s = argv[i + 1];
            size_t p = 0;
            while (p <= s.size()) {
                size_t q = s.find(',', p);
                if (q == std::string::npos) q = s.size();
                pattern.push_back(atof(s.substr(p, q - p).c_str()));
                p = q + 1;
            }
        } else if (a == "--plain") {
            plain = true;
            --i;
        } else if (a == "--launches") {
            launches = atoi(argv[i + 1]);
        } else if (a == "--reps") {
            reps = atoi(argv[i + 1]);
        } else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    int dev = 0, sms = 0, per_sm = 0;
    CHECK(cudaSetDevice(dev));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, dev));
    sms = prop.multiProcessorCount;
    auto kernel = plain ? read_kernel<false> : read_kernel<true>;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, LOCAL, 0));
    int grid = sms * per_sm;
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    printf("device: %s, %d SMs, %d resident blocks of %d each, CUDA driver %d runtime %d\n",
           prop.name, sms, per_sm, LOCAL, driver, runtime);

    // One buffer per dispatch.
    std::vector<uint4*> bufs(launches);
    std::vector<size_t> n4s(launches);
    double total_bytes = 0, round_bytes = 0;
    for (double mb : pattern) round_bytes += mb * 1e6;
    for (int j = 0; j < launches; ++j) {
        size_t bytes = (size_t)(pattern[j % pattern.size()] * 1e6) / 16 * 16;
        n4s[j] = bytes / 16;
        CHECK(cudaMalloc(&bufs[j], bytes));
        fill<<<1024, 256>>>(bufs[j], n4s[j], (uint32_t)j * 7919u + 17u);
        total_bytes += (double)bytes;
    }
    uint32_t* words;
    CHECK(cudaMalloc(&words, sizeof(uint32_t) * grid));
    CHECK(cudaMemset(words, 0, sizeof(uint32_t) * grid));
    CHECK(cudaDeviceSynchronize());

    // Check once: dispatch 0's words fold to buffer 0's XOR.
    {
        kernel<<<grid, LOCAL>>>(bufs[0], n4s[0], words);
        CHECK(cudaDeviceSynchronize());
        std::vector<uint32_t> got(grid);
        CHECK(cudaMemcpy(got.data(), words, sizeof(uint32_t) * grid, cudaMemcpyDeviceToHost));
        uint32_t fold = 0;
        for (uint32_t g : got) fold ^= g;
        std::vector<uint4> host(n4s[0]);
        CHECK(cudaMemcpy(host.data(), bufs[0], n4s[0] * 16, cudaMemcpyDeviceToHost));
        uint32_t want = 0;
        for (const uint4& v : host) want ^= v.x ^ v.y ^ v.z ^ v.w;
        printf("check: dispatch 0 folds to %08x, the buffer's XOR is %08x: %s\n", fold, want,
               fold == want ? "right" : "WRONG");
        if (fold != want) return 1;
    }

    cudaStream_t st;
    CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int j = 0; j < launches; ++j) kernel<<<grid, LOCAL, 0, st>>>(bufs[j], n4s[j], words);
    CHECK(cudaStreamEndCapture(st, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(300)) {
        CHECK(cudaGraphLaunch(exec, st));
        CHECK(cudaStreamSynchronize(st));
    }
    double rounds = (double)launches / pattern.size();
    std::vector<double> per_round, wall_round;
    for (int r = 0; r < reps; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        CHECK(cudaEventRecord(e0, st));
        CHECK(cudaGraphLaunch(exec, st));
        CHECK(cudaEventRecord(e1, st));
        CHECK(cudaEventSynchronize(e1));
        double wall = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        per_round.push_back(ms * 1e3 / rounds);
        wall_round.push_back(wall / rounds);
    }
    double wlo, whi, wmed = median_of(wall_round, &wlo, &whi);
    double lo, hi, med = median_of(per_round, &lo, &hi);
    printf("pattern [");
    for (size_t i = 0; i < pattern.size(); ++i) printf("%s%g", i ? ", " : "", pattern[i]);
    printf("] MB, %s loads, grid %d, %d dispatches in a CUDA graph (%.2f GB): %.2f / %.2f / %.2f "
           "us per round of the pattern (min / median / max), %.1f GB/s\n",
           plain ? "plain" : "non-coherent (__ldg)", grid, launches, total_bytes / 1e9, lo, med, hi, round_bytes / (med * 1e-6) / 1e9);
    printf("  the same, wall time from launch to the end of the wait: %.2f / %.2f / %.2f us per "
           "round, %.1f GB/s\n",
           wlo, wmed, whi, round_bytes / (wmed * 1e-6) / 1e9);

    // Tiny dependent chains.
    float* x;
    const int elems = 1024;
    CHECK(cudaMalloc(&x, sizeof(float) * elems));
    std::vector<float> init(elems), back(elems);
    for (int i = 0; i < elems; ++i) init[i] = (float)i;
    for (int n : {100, 1000}) {
        cudaGraph_t g2;
        cudaGraphExec_t x2;
        CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
        for (int j = 0; j < n; ++j) tiny<<<elems / 256, 256, 0, st>>>(x, elems);
        CHECK(cudaStreamEndCapture(st, &g2));
        CHECK(cudaGraphInstantiate(&x2, g2, 0));
        std::vector<double> per;
        for (int r = 0; r <= 30; ++r) {
            CHECK(cudaMemcpy(x, init.data(), sizeof(float) * elems, cudaMemcpyHostToDevice));
            CHECK(cudaEventRecord(e0, st));
            CHECK(cudaGraphLaunch(x2, st));
            CHECK(cudaEventRecord(e1, st));
            CHECK(cudaEventSynchronize(e1));
            float ms = 0;
            CHECK(cudaEventElapsedTime(&ms, e0, e1));
            CHECK(cudaMemcpy(back.data(), x, sizeof(float) * elems, cudaMemcpyDeviceToHost));
            for (int i = 0; i < elems; ++i) {
                if (back[i] != (float)(i + n)) {
                    printf("tiny chain of %d: x[%d] = %g, expected %d: WRONG\n", n, i, back[i], i + n);
                    return 1;
                }
            }
            if (r > 0) per.push_back(ms * 1e3 / n);
        }
        double l2, h2, m2 = median_of(per, &l2, &h2);
        printf("tiny chain of %d dependent kernels in a CUDA graph, 30 replays: %.3f / %.3f / %.3f "
               "us per kernel (min / median / max), values right\n",
               n, l2, m2, h2);
        CHECK(cudaGraphExecDestroy(x2));
        CHECK(cudaGraphDestroy(g2));
    }
    return 0;
}
