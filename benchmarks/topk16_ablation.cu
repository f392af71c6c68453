// Where dflash2_topk16's time goes: the shipped kernel (kernels/dflash/dflash2_topk16.cu) beside
// itself ended after each stage (its kStopAfter parameter), an empty kernel of the same grid and
// cluster shape, and a plain read of the logits, over 16 x 151936 logits rotated beyond the L2.
// Each prints a "RESULT {json}" line per dtype; benchmarks/bench_topk16_ablation.py builds and
// runs this file and tabulates them.
//
// Two timings per variant: "single", the median CUDA-event time of one launch queued behind a GPU
// spin (the launch's own ramp included, as bench_dflash2.py times the kernel), and "b2b", the
// median over rounds of the mean of 64 back-to-back launches with programmatic dependent launch
// (each starting while the one before ends).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "../kernels/dflash/dflash2_topk16.cu"
#include "ablation_common.cuh"

namespace {

constexpr uint32_t kRows = 16, kVocab = 151936;

__global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(512) empty_kernel(int32_t* ids) {
    if (threadIdx.x == 1023) ids[0] = 0;  // never: 512 threads
}
__global__ void spin(long long cycles) {
    const long long t = clock64();
    while (clock64() - t < cycles) {
    }
}

template <typename T>
void run_case(const char* dtype) {
    const size_t elems = static_cast<size_t>(kRows) * kVocab;
    const int sets = static_cast<int>((400ull << 20) / (elems * sizeof(T))) + 1;
    std::vector<T*> lg(sets);
    for (auto& p : lg) {
        CHECK(cudaMalloc(&p, elems * sizeof(T)));
        if constexpr (sizeof(T) == 2) {
            ablation::fill_bf16<<<1024, 256>>>(reinterpret_cast<__nv_bfloat16*>(p), elems, 17u);
        } else {
            std::vector<float> h(elems);
            for (size_t i = 0; i < elems; ++i) h[i] = static_cast<float>((i * 2654435761u) % 65536u) / 8192.f - 4.f;
            CHECK(cudaMemcpy(p, h.data(), elems * 4, cudaMemcpyHostToDevice));
        }
    }
    int32_t* ids;
    float* scores;
    unsigned* sink;
    CHECK(cudaMalloc(&ids, kRows * 16 * 4));
    CHECK(cudaMalloc(&scores, kRows * 16 * 4));
    CHECK(cudaMalloc(&sink, 16));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));

    // Variant v: 0 the empty kernel, 1 .. 3 the kernel stopped after a stage, 4 the whole kernel.
    using TopK = void (*)(T*, int32_t*, float*, uint32_t, uint32_t, float, float);
    const TopK stages[4] = {dflash2_topk16_kernel<T, 1>, dflash2_topk16_kernel<T, 2>, dflash2_topk16_kernel<T, 3>,
                            dflash2_topk16_kernel<T, 0>};
    auto launch = [&](int v, int i, bool pdl) {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(8, kRows, 1);
        cfg.blockDim = dim3(512, 1, 1);
        cfg.stream = s;
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = at;
        cfg.numAttrs = pdl ? 1 : 0;
        if (v == 0) {
            CHECK(cudaLaunchKernelEx(&cfg, empty_kernel, ids));
        } else {
            CHECK(cudaLaunchKernelEx(&cfg, stages[v - 1], lg[i % sets], ids, scores, kRows, kVocab, 1.f, 30.f));
        }
    };
    const char* names[5] = {"empty", "maxima", "cta_top16", "threshold", "full"};
    std::vector<std::vector<float>> single(5), b2b(5);
    for (int v = 0; v < 5; ++v)
        for (int i = 0; i < sets; ++i) launch(v, i, false);
    CHECK(cudaStreamSynchronize(s));
    for (int round = 0; round < 31; ++round) {
        for (int v = 0; v < 5; ++v) {
            float ms = 0.f;
            spin<<<1, 1, 0, s>>>(200000);
            CHECK(cudaEventRecord(a, s));
            launch(v, round, false);
            CHECK(cudaEventRecord(b, s));
            CHECK(cudaEventSynchronize(b));
            CHECK(cudaEventElapsedTime(&ms, a, b));
            single[v].push_back(1e3f * ms);
            CHECK(cudaEventRecord(a, s));
            for (int i = 0; i < 64; ++i) launch(v, round * 64 + i, true);
            CHECK(cudaEventRecord(b, s));
            CHECK(cudaEventSynchronize(b));
            CHECK(cudaEventElapsedTime(&ms, a, b));
            b2b[v].push_back(1e3f * ms / 64);
        }
    }
    CHECK(cudaGetLastError());
    // The floor: a plain read of one set's logits, timed back to back like b2b.
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    ablation::Timer timer;
    const std::vector<const void*> bufs(lg.begin(), lg.end());
    const double floor_us = ablation::read_floor_us(timer, bufs, elems * sizeof(T), 3 * sets + 30, sms, sink);
    std::printf("RESULT {\"dtype\": \"%s\", \"rows\": %u, \"vocab\": %u, \"mb\": %.3f, \"read_floor_us\": %.3f", dtype,
                kRows, kVocab, elems * sizeof(T) / 1e6, floor_us);
    for (int v = 0; v < 5; ++v) {
        std::sort(single[v].begin(), single[v].end());
        std::sort(b2b[v].begin(), b2b[v].end());
        std::printf(", \"%s_single_us\": %.3f, \"%s_b2b_us\": %.3f", names[v], single[v][15], names[v], b2b[v][15]);
    }
    std::printf("}\n");
    std::fflush(stdout);
    for (auto p : lg) CHECK(cudaFree(p));
    CHECK(cudaFree(ids));
    CHECK(cudaFree(scores));
    CHECK(cudaFree(sink));
    CHECK(cudaStreamDestroy(s));
}

}  // namespace

int main() {
    run_case<__nv_bfloat16>("bfloat16");
    run_case<float>("float32");
    return 0;
}
