// The persistent-kernel part of the project's CUDA reference (what PyTorch
// cannot express). Built and run by scripts/cuda_reference.py on the GPU
// machine (nvcc -O3 -arch=sm_XY), or by hand:
//   nvcc -O3 -arch=sm_90 -o cuda_reference_persist scripts/cuda_reference_persist.cu
//   ./cuda_reference_persist [--quick]
// Prints one flat JSON object:
//  - gridsync_b<B>_us_per_step: one cooperative kernel of B blocks x 256
//    runs STEPS dependent steps over a 1 Ki f32 ring, a grid.sync() after
//    each (step s: x'[i] = 0.5 (x[i] + x[i-1]), so each step reads values
//    other blocks wrote in the step before); GPU time (events) / STEPS.
//    Checked against the same steps on the CPU.
//  - mailbox_roundtrip_us (p10, p90): a resident one-block kernel polls a
//    request word in mapped host memory; the host writes a sequence number
//    and spins until the kernel, having added 1 to a 1 Ki f32 array, writes
//    it back. Checked: the array holds the number of requests.
//  - launch_sync_roundtrip_us: launch one tiny kernel + cudaStreamSynchronize.
//  - graph1_roundtrip_us: launch a one-node CUDA graph + synchronize.
//  - graph_chain_us_per_kernel: a graph of STEPS dependent tiny kernels,
//    GPU time per kernel. Checked.
#include <cooperative_groups.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace cg = cooperative_groups;

#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t err_ = (call);                                                    \
        if (err_ != cudaSuccess) {                                                    \
            fprintf(stderr, "%s failed: %s (line %d)\n", #call, cudaGetErrorString(err_), \
                    __LINE__);                                                        \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

static const int RING = 1024;

__global__ void ring_steps(float* x, float* y, int steps) {
    cg::grid_group grid = cg::this_grid();
    for (int s = 0; s < steps; ++s) {
        const float* src = (s % 2 == 0) ? x : y;
        float* dst = (s % 2 == 0) ? y : x;
        for (unsigned i = grid.thread_rank(); i < RING; i += grid.size())
            dst[i] = 0.5f * (src[i] + src[(i + RING - 1) % RING]);
        grid.sync();
    }
}

__global__ void add_one(float* a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < RING) a[i] += 1.0f;
}

__global__ void resident(volatile unsigned* request, volatile unsigned* reply, float* a,
                         unsigned count) {
    __shared__ unsigned seq;
    for (unsigned served = 0; served < count;) {
        if (threadIdx.x == 0) {
            unsigned r;
            while ((r = *request) == served) {
            }
            seq = r;
        }
        __syncthreads();
        // Every thread reads the request before the barrier below; thread 0
        // writes `seq` again only after that barrier and the next request.
        unsigned current = seq;
        for (int i = threadIdx.x; i < RING; i += blockDim.x) a[i] += 1.0f;
        __threadfence_system();
        __syncthreads();
        if (threadIdx.x == 0) *reply = current;
        served = current;
    }
}

static double now_us() {
    using namespace std::chrono;
    return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

static double pct(std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    return v[(size_t)(q * (v.size() - 1))];
}

static void ring_cpu(std::vector<float>& x, int steps) {
    std::vector<float> y(RING);
    for (int s = 0; s < steps; ++s) {
        for (int i = 0; i < RING; ++i) y[i] = 0.5f * (x[i] + x[(i + RING - 1) % RING]);
        x.swap(y);
    }
}

int main(int argc, char** argv) {
    bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    const int STEPS = 1000;
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    int sms = prop.multiProcessorCount;
    printf("{\n \"sms\": %d", sms);

    float *x, *y;
    CHECK(cudaMalloc(&x, RING * 4));
    CHECK(cudaMalloc(&y, RING * 4));
    std::vector<float> init(RING);
    for (int i = 0; i < RING; ++i) init[i] = (float)((i * 37) % 101);
    std::vector<float> want = init;
    ring_cpu(want, STEPS);
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));

    int per_sm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, ring_steps, 256, 0));
    int counts[] = {1, 8, 32, sms / 2, sms};
    for (int blocks : counts) {
        if (blocks < 1 || blocks > per_sm * sms) continue;
        std::vector<double> t;
        for (int r = 0; r < (quick ? 3 : 9); ++r) {
            CHECK(cudaMemcpy(x, init.data(), RING * 4, cudaMemcpyHostToDevice));
            int steps = STEPS;
            void* args[] = {&x, &y, &steps};
            CHECK(cudaEventRecord(e0));
            CHECK(cudaLaunchCooperativeKernel((void*)ring_steps, blocks, 256, args, 0, 0));
            CHECK(cudaEventRecord(e1));
            CHECK(cudaEventSynchronize(e1));
            float ms;
            CHECK(cudaEventElapsedTime(&ms, e0, e1));
            if (r > 0) t.push_back(ms * 1000.0 / STEPS);
            std::vector<float> got(RING);
            CHECK(cudaMemcpy(got.data(), STEPS % 2 == 0 ? x : y, RING * 4, cudaMemcpyDeviceToHost));
            for (int i = 0; i < RING; ++i) {
                if (std::fabs(got[i] - want[i]) > 1e-4f * std::max(1.0f, std::fabs(want[i]))) {
                    fprintf(stderr, "grid.sync ring, %d blocks: x[%d] = %g, want %g\n", blocks, i,
                            got[i], want[i]);
                    return 1;
                }
            }
        }
        printf(",\n \"gridsync_b%d_us_per_step\": %.3f", blocks, pct(t, 0.5));
    }

    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    // Round trips: one tiny kernel, then a one-node graph.
    int reps = quick ? 300 : 3000, warm = quick ? 50 : 500;
    std::vector<double> rt;
    for (int i = 0; i < warm + reps; ++i) {
        double t0 = now_us();
        add_one<<<RING / 256, 256, 0, s>>>(x);
        CHECK(cudaStreamSynchronize(s));
        if (i >= warm) rt.push_back(now_us() - t0);
    }
    printf(",\n \"launch_sync_roundtrip_us\": %.2f", pct(rt, 0.5));
    cudaGraph_t g1;
    cudaGraphExec_t g1x;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    add_one<<<RING / 256, 256, 0, s>>>(x);
    CHECK(cudaStreamEndCapture(s, &g1));
    CHECK(cudaGraphInstantiate(&g1x, g1, 0));
    rt.clear();
    for (int i = 0; i < warm + reps; ++i) {
        double t0 = now_us();
        CHECK(cudaGraphLaunch(g1x, s));
        CHECK(cudaStreamSynchronize(s));
        if (i >= warm) rt.push_back(now_us() - t0);
    }
    printf(",\n \"graph1_roundtrip_us\": %.2f", pct(rt, 0.5));

    // A graph of STEPS dependent tiny kernels.
    cudaGraph_t gc;
    cudaGraphExec_t gcx;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < STEPS; ++i) add_one<<<RING / 256, 256, 0, s>>>(y);
    CHECK(cudaStreamEndCapture(s, &gc));
    CHECK(cudaGraphInstantiate(&gcx, gc, 0));
    std::vector<double> tc;
    for (int r = 0; r < (quick ? 3 : 11); ++r) {
        CHECK(cudaMemsetAsync(y, 0, RING * 4, s));
        CHECK(cudaEventRecord(e0, s));
        CHECK(cudaGraphLaunch(gcx, s));
        CHECK(cudaEventRecord(e1, s));
        CHECK(cudaEventSynchronize(e1));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (r > 0) tc.push_back(ms * 1000.0 / STEPS);
    }
    std::vector<float> got(RING);
    CHECK(cudaMemcpy(got.data(), y, RING * 4, cudaMemcpyDeviceToHost));
    for (int i = 0; i < RING; ++i)
        if (got[i] != (float)STEPS) {
            fprintf(stderr, "graph chain: y[%d] = %g, want %d\n", i, got[i], STEPS);
            return 1;
        }
    printf(",\n \"graph_chain_us_per_kernel\": %.3f", pct(tc, 0.5));

    // Mailbox round trip with a resident kernel.
    unsigned *request, *reply, *d_request, *d_reply;
    CHECK(cudaHostAlloc(&request, 64, cudaHostAllocMapped));
    CHECK(cudaHostAlloc(&reply, 64, cudaHostAllocMapped));
    *request = 0;
    *reply = 0;
    CHECK(cudaHostGetDevicePointer(&d_request, request, 0));
    CHECK(cudaHostGetDevicePointer(&d_reply, reply, 0));
    CHECK(cudaMemset(x, 0, RING * 4));
    CHECK(cudaDeviceSynchronize());
    unsigned count = quick ? 2000 : 20000, skip = count / 10;
    resident<<<1, 256, 0, s>>>(d_request, d_reply, x, count);
    volatile unsigned* vreq = request;
    volatile unsigned* vrep = reply;
    std::vector<double> mb;
    for (unsigned i = 1; i <= count; ++i) {
        double t0 = now_us();
        *vreq = i;
        double deadline = t0 + 10e6;
        while (*vrep != i) {
            if (now_us() > deadline) {
                fprintf(stderr, "mailbox: no reply to request %u\n", i);
                return 1;
            }
        }
        if (i > skip) mb.push_back(now_us() - t0);
    }
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(got.data(), x, RING * 4, cudaMemcpyDeviceToHost));
    for (int i = 0; i < RING; ++i)
        if (got[i] != (float)count) {
            fprintf(stderr, "mailbox: a[%d] = %g, want %u\n", i, got[i], count);
            return 1;
        }
    printf(",\n \"mailbox_roundtrip_us\": %.2f,\n \"mailbox_roundtrip_p10_us\": %.2f,\n"
           " \"mailbox_roundtrip_p90_us\": %.2f",
           pct(mb, 0.5), pct(mb, 0.1), pct(mb, 0.9));
    printf("\n}\n");
    return 0;
}
