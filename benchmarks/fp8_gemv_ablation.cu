// Where the time of the FP8 register-tiled GEMVs goes (benchmarks/bench_fp8_gemv_ablation.py
// builds and runs this program).
//
// For each drafter shape and row count it times, in one process and one pass over the same
// rotated weights:
//   floor    a plain streaming read of the weight (ld.global.nc, 16 loads of 16 bytes in flight a
//            thread), the fastest of a grid-stride and a one-shot grid: what one launch reading
//            those bytes can reach;
//   full     the shipped kernel (dflash_fp8_gemv_rt2_kernel, ..._rt2_16_kernel above 8 rows,
//            ..._rt2_64_kernel at 48 and 64 rows: six or eight x tiles);
//   loads    the same kernel with Work::loads: weight ring, x loads, warp reduction, cluster
//            exchange and stores kept, the conversions and tensor-core products left out (at 48
//            and 64 rows the shared-memory reads of x and their permutes kept too);
//   convert  Work::convert: the E4M3 -> bf16 conversions kept, the products left out;
//   mma      Work::mma: the products kept (on the raw weight bytes), the conversions left out;
//   rt1      the whole-K form (dflash_fp8_gemv_rt1 / rt1_16 / rt1_64: one CTA over all of K, no cluster), which
//            the chain takes for weights of more than SMs / 2 row tiles.
// Each time is the mean of back-to-back launches over weights rotated among enough copies to
// exceed the L2 (400 MB), so every launch reads its weight from memory. Output: one line
// "RESULT {json}" per case.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../kernels/dflash/fp8_gemv_rt.cu"
#include "ablation_common.cuh"

namespace {

namespace rt = dflash_fp8_rt_detail;
using ablation::Timer;

template <int MT, rt::Work W>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(256, 2)
ablation_kernel(const __nv_bfloat16* x, const __nv_fp8_e4m3* q, const float* scale, __nv_bfloat16* out,
                uint32_t rows, uint32_t n, uint32_t k) {
    gemv_stream::tile<rt::Gemv<MT, W>, rt::kCluster>(x, q, scale, out, rows, n, k);
}

// 33-64 rows: the split form (dflash_fp8_gemv_rt2_64_kernel's clusters, ring and occupancy) with
// part of its work left out.
template <int MT, rt::Work W>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(256, 1)
ablation64_kernel(const __nv_bfloat16* x, const __nv_fp8_e4m3* q, const float* scale, __nv_bfloat16* out,
                  uint32_t rows, uint32_t n, uint32_t k) {
    gemv_stream::tile<rt::Gemv<MT, W>, rt::kCluster>(x, q, scale, out, rows, n, k);
}

__global__ void fill_x(__nv_bfloat16* p, uint64_t n) {
    for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<uint64_t>(gridDim.x) * blockDim.x)
        p[i] = __float2bfloat16(static_cast<float>(static_cast<int>(i * 7919u % 200u) - 100) / 64.f);
}

using KernelFn = void (*)(const __nv_bfloat16*, const __nv_fp8_e4m3*, const float*, __nv_bfloat16*, uint32_t,
                          uint32_t, uint32_t);

// The ablated kernel for `rows`: the x tiles the shipped kernel takes there (1, 2, 6 or 8).
template <rt::Work W>
KernelFn ablated(uint32_t rows) {
    return rows <= 8 ? ablation_kernel<1, W> : rows <= 16 ? ablation_kernel<2, W>
                                             : rows <= 48 ? ablation64_kernel<6, W> : ablation64_kernel<8, W>;
}

void run_case(Timer& timer, const char* name, uint32_t n, uint32_t k, uint32_t rows, int sms, unsigned* sink) {
    const uint64_t wbytes = static_cast<uint64_t>(n) * k;
    const int sets = std::max<int>(2, static_cast<int>((400ull << 20) / wbytes) + 1);
    const int reps = std::max(30, 3 * sets);
    std::vector<uint8_t*> w(sets);
    for (int i = 0; i < sets; ++i) {
        CHECK(cudaMalloc(&w[i], wbytes));
        ablation::fill_e4m3<<<1024, 256>>>(w[i], wbytes, 77u + i);
    }
    __nv_bfloat16 *x, *out;
    float* scale;
    CHECK(cudaMalloc(&x, static_cast<size_t>(rows) * k * 2));
    CHECK(cudaMalloc(&out, static_cast<size_t>(rows) * n * 2));
    CHECK(cudaMalloc(&scale, static_cast<size_t>(n) * 4));
    fill_x<<<256, 256>>>(x, static_cast<uint64_t>(rows) * k);
    std::vector<float> ones(n, 0.01f);
    CHECK(cudaMemcpy(scale, ones.data(), n * 4, cudaMemcpyHostToDevice));

    const double floor_us =
        ablation::read_floor_us(timer, std::vector<const void*>(w.begin(), w.end()), wbytes, reps, sms, sink);

    const bool wide = rows > 8, x64 = rows > 32;
    const int smem = static_cast<int>(x64 ? rt::kRing64Bytes : rt::kRingBytes);
    const unsigned tiles = (n + rt::kRows - 1) / rt::kRows;
    // The whole-K form as its spec launches it: half an SM's shared memory when its grid has at
    // most one CTA an SM (the 64-row ring is more already).
    int per_sm = 0;
    CHECK(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0));
    const int smem_rt1 = tiles <= static_cast<unsigned>(sms) ? std::max(smem, per_sm / 2) : smem;
    struct Variant {
        const char* label;
        KernelFn fn;
        int smem;
        unsigned grid;
    };
    const KernelFn full = x64 ? dflash_fp8_gemv_rt2_64_kernel : wide ? dflash_fp8_gemv_rt2_16_kernel
                                                                     : dflash_fp8_gemv_rt2_kernel;
    const KernelFn rt1 = x64 ? dflash_fp8_gemv_rt1_64_kernel : wide ? dflash_fp8_gemv_rt1_16_kernel
                                                                    : dflash_fp8_gemv_rt1_kernel;
    const Variant variants[] = {
        {"full", full, smem, tiles * rt::kCluster},
        {"loads", ablated<rt::Work::loads>(rows), smem, tiles * rt::kCluster},
        {"convert", ablated<rt::Work::convert>(rows), smem, tiles * rt::kCluster},
        {"mma", ablated<rt::Work::mma>(rows), smem, tiles * rt::kCluster},
        {"rt1", rt1, smem_rt1, tiles},
    };
    std::printf("RESULT {\"shape\": \"%s\", \"n\": %u, \"k\": %u, \"rows\": %u, \"weight_mb\": %.3f, \"floor_us\": %.3f",
                name, n, k, rows, wbytes / 1e6, floor_us);
    for (const Variant& v : variants) {
        CHECK(cudaFuncSetAttribute(v.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, v.smem));
        auto f = [&](int i) {
            v.fn<<<v.grid, rt::kThreads, v.smem>>>(x, reinterpret_cast<const __nv_fp8_e4m3*>(w[i]), scale, out, rows, n, k);
        };
        std::printf(", \"%s_us\": %.3f", v.label, timer.us(f, sets, reps));
        CHECK(cudaGetLastError());
    }
    std::printf("}\n");
    std::fflush(stdout);
    for (auto p : w) CHECK(cudaFree(p));
    CHECK(cudaFree(x));
    CHECK(cudaFree(out));
    CHECK(cudaFree(scale));
}

}  // namespace

int main(int argc, char** argv) {
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    unsigned* sink;
    CHECK(cudaMalloc(&sink, 16));
    Timer timer;
    struct Shape {
        const char* name;
        uint32_t n, k;
    };
    const Shape shapes[] = {{"qkv", 6144, 4096},   {"o", 4096, 4096},        {"gate_up", 24576, 4096},
                            {"down", 4096, 12288}, {"lm_head", 151936, 4096}, {"delta", 512, 4096}};
    for (const Shape& s : shapes) {
        if (quick && std::strcmp(s.name, "gate_up") != 0 && std::strcmp(s.name, "o") != 0) continue;
        for (uint32_t rows : {1u, 16u, 48u, 64u}) {
            if (quick && rows > 16) continue;
            run_case(timer, s.name, s.n, s.k, rows, sms, sink);
        }
    }
    return 0;
}
