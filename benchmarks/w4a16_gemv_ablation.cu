// Where the time of the NVFP4 few-row GEMVs goes (benchmarks/bench_w4a16_gemv_ablation.py builds
// and runs this program).
//
// For each drafter shape at 1 and 16 rows it times, in one process over the same rotated weights
// (packed codes and scale bytes, 400 MB in all, so every launch reads from memory):
//   floor      a plain streaming read of the codes and scales (ablation_common.cuh);
//   gemv       w4a16_gemv_kernel (128 rows a CTA, half-line code pieces, per-chunk scale copies);
//   rt2        w4a16_gemv_rt2_kernel (gemv_stream, 2-CTA clusters split K);
//   rt1        w4a16_gemv_rt1_kernel (the same, one CTA over all of K);
//   rt1_loads  rt1 with Work::loads: code ring, scale window, x slots, reduction and stores kept,
//              the E2M1 / scale conversions and the tensor-core products left out;
//   rt1_convert  the conversions kept, the products left out;
//   rt1_mma    the products kept (on the raw code words), the conversions left out.
// Each time is the mean of back-to-back launches. Output: one line "RESULT {json}" per case.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../kernels/dflash/w4a16_gemm.cu"
#include "ablation_common.cuh"

namespace {

using ablation::Timer;
using gemv_stream::Work;
namespace rt = w4a16_rt_detail;

template <int MT, Work W>
__global__ void __cluster_dims__(1, 1, 1) __launch_bounds__(256, 2)
ablation_kernel(const __nv_bfloat16* x, const __nv_fp4x2_e2m1* wq, const __nv_fp8_e4m3* ws, float gs,
                __nv_bfloat16* out, uint32_t m, uint32_t n, uint32_t k) {
    gemv_stream::tile<gemv_stream::Gemv<gemv_stream::Nvfp4Rows, MT, W, 1>, 1>(
        x, wq, gemv_stream::Nvfp4Rows::Scales{reinterpret_cast<const uint8_t*>(ws), gs}, out, m, n, k);
}

using KernelFn = void (*)(const __nv_bfloat16*, const __nv_fp4x2_e2m1*, const __nv_fp8_e4m3*, float,
                          __nv_bfloat16*, uint32_t, uint32_t, uint32_t);

struct Variant {
    const char* label;
    KernelFn fn;
    uint32_t ctas_per_tile;  // 0: w4a16_gemv_kernel's grid (128 rows a CTA)
};

void run_case(Timer& timer, const char* name, uint32_t n, uint32_t k, uint32_t rows, int sms, unsigned* sink) {
    const uint64_t cbytes = static_cast<uint64_t>(n) * k / 2, sbytes = static_cast<uint64_t>(n) * k / 16;
    const uint64_t wbytes = cbytes + sbytes;  // codes, then scales, in one allocation a copy
    const int sets = std::max<int>(2, static_cast<int>((400ull << 20) / wbytes) + 1);
    const int reps = std::max(30, 3 * sets);
    std::vector<uint8_t*> w(sets);
    for (int i = 0; i < sets; ++i) {
        CHECK(cudaMalloc(&w[i], wbytes));
        ablation::fill_e4m3<<<1024, 256>>>(w[i], cbytes, 77u + i);  // any byte is two codes
        ablation::fill_e4m3<<<1024, 256>>>(w[i] + cbytes, sbytes, 99u + i);
    }
    __nv_bfloat16 *x, *out;
    CHECK(cudaMalloc(&x, static_cast<size_t>(rows) * k * 2));
    CHECK(cudaMalloc(&out, static_cast<size_t>(rows) * n * 2));
    ablation::fill_bf16<<<256, 256>>>(x, static_cast<uint64_t>(rows) * k, 5u);

    const double floor_us =
        ablation::read_floor_us(timer, std::vector<const void*>(w.begin(), w.end()), wbytes, reps, sms, sink);
    const bool wide = rows > 8;
    const Variant variants[] = {
        {"gemv", w4a16_gemv_kernel, 0},
        {"rt2", w4a16_gemv_rt2_kernel, 2},
        {"rt1", w4a16_gemv_rt1_kernel, 1},
        {"rt1_loads", wide ? ablation_kernel<2, Work::loads> : ablation_kernel<1, Work::loads>, 1},
        {"rt1_convert", wide ? ablation_kernel<2, Work::convert> : ablation_kernel<1, Work::convert>, 1},
        {"rt1_mma", wide ? ablation_kernel<2, Work::mma> : ablation_kernel<1, Work::mma>, 1},
    };
    std::printf("RESULT {\"shape\": \"%s\", \"n\": %u, \"k\": %u, \"rows\": %u, \"weight_mb\": %.3f, \"floor_us\": %.3f",
                name, n, k, rows, wbytes / 1e6, floor_us);
    const uint32_t chunks = (k / 2 + 127) / 128;
    for (const Variant& v : variants) {
        unsigned grid = (n + 127) / 128;
        int smem = static_cast<int>(w4a16_detail::kSmemBytes);
        if (v.ctas_per_tile) {  // the spec's shared_mem: the ring and the scale window
            const uint32_t per_rank = (chunks + v.ctas_per_tile - 1) / v.ctas_per_tile;
            grid = (n + rt::kRows - 1) / rt::kRows * v.ctas_per_tile;
            smem = static_cast<int>((wide ? rt::kRing16Bytes : rt::kRing8Bytes) + rt::kRows * (per_rank + 1) * 16);
        }
        CHECK(cudaFuncSetAttribute(v.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        auto f = [&](int i) {
            v.fn<<<grid, 256, smem>>>(x, reinterpret_cast<const __nv_fp4x2_e2m1*>(w[i]),
                                      reinterpret_cast<const __nv_fp8_e4m3*>(w[i] + cbytes), 0.01f, out, rows, n, k);
        };
        std::printf(", \"%s_us\": %.3f", v.label, timer.us(f, sets, reps));
        CHECK(cudaGetLastError());
    }
    std::printf("}\n");
    std::fflush(stdout);
    for (auto p : w) CHECK(cudaFree(p));
    CHECK(cudaFree(x));
    CHECK(cudaFree(out));
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
    // k <= 8192: w4a16_gemv_rt1's limit (down is timed with rt2 in bench_dense_linear)
    const Shape shapes[] = {{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 24576, 4096}, {"lm_head", 151936, 4096}};
    for (const Shape& s : shapes) {
        if (quick && std::strcmp(s.name, "lm_head") != 0) continue;
        for (uint32_t rows : {1u, 16u}) run_case(timer, s.name, s.n, s.k, rows, sms, sink);
    }
    return 0;
}
