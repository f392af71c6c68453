// Where the time of the drafter attention's split kernels goes (benchmarks/
// bench_attn_dflash_ablation.py builds and runs this program).
//
// The drafter's shape (16 query rows, hq 32, hkv 8, head_dim 128, paged cache of block size 16,
// shuffled block table), BF16 and FP8 caches, kv_len 1024, 8192 and 32768. For each it times, in one
// process over the same rotated caches:
//   floor        a plain streaming read of the K / V bytes the kernel must read;
//   full         the shipped split kernel (dflash_attn_{bf16,fp8}_split_kernel);
//   no_fold      Work::no_fold: partial states sent (through distributed shared memory) to the
//                CTAs that fold them and counted, the folds left out;
//   no_partials  Work::no_partials: no partial states and no folds (cluster barriers and
//                counters kept; the products and softmax run, their result kept alive);
//   loads        Work::loads: no_partials without the tiles' products and softmax (the K / V
//                ring, block-table reads, barriers and the FP8 conversion kept);
//   reads        Work::reads: loads without the FP8 conversion (for a bf16 cache, loads again).
// The split counters are zeroed once: every launch leaves them zero.
// Each time is the mean of back-to-back launches over caches rotated among enough copies to
// exceed the L2 (400 MB). Output: one line "RESULT {json}" per case.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "../kernels/attention/dflash_attn.cu"
#include "ablation_common.cuh"

namespace {

namespace da = dflash_attn;
using ablation::Timer;

constexpr int kQRows = 16, kHq = 32, kHkv = 8, kBlock = 16;

template <bool FP8, da::Work W>
__global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(128, SPLIT_MIN_CTAS)
ablation_kernel(const __nv_bfloat16* q, const void* k, const void* v, const float* k_scale,
                const float* v_scale, __nv_bfloat16* out, const int32_t* table, uint32_t kv_len,
                float* ws, int32_t* counters) {
    // The parameters the shipped kernels build (dflash_attn.cu), non-causal, no window.
    constexpr float kScale = 0.08838834764831845f;  // 1 / sqrt(128)
    da::Params p =
        FP8 ? dflash_fp8_params(q, static_cast<const __nv_fp8_e4m3*>(k), static_cast<const __nv_fp8_e4m3*>(v),
                                k_scale, v_scale, out, table, kQRows, kv_len, kv_len - kQRows, kHq, kHkv, kBlock, 0,
                                0, kScale)
            : da::make_params(q, k, v, out, table, kQRows, static_cast<int>(kv_len),
                              static_cast<int>(kv_len) - kQRows, kHq, kHkv, kBlock, 0, 0, kScale);
    p.ws = ws;
    p.counters = counters;
    da::attn_cta<FP8, true, da::SPLIT_KEYS, W>(p);
}

using KernelFn = void (*)(const __nv_bfloat16*, const void*, const void*, const float*, const float*,
                          __nv_bfloat16*, const int32_t*, uint32_t, float*, int32_t*);

template <bool FP8>
void run_case(Timer& timer, uint32_t kv_len, int sms, unsigned* sink) {
    const int esize = FP8 ? 1 : 2;
    const uint32_t blocks = (kv_len + kBlock - 1) / kBlock;
    const uint64_t cache_bytes = static_cast<uint64_t>(blocks) * kBlock * kHkv * da::D * esize;
    const uint64_t kv_bytes = static_cast<uint64_t>(kv_len) * kHkv * da::D * 2 * esize;  // K and V read
    const int sets = std::max<int>(2, static_cast<int>((400ull << 20) / (2 * cache_bytes)) + 1);
    const int reps = std::max(30, 3 * sets);
    // One allocation per set holds the K cache, then the V cache (the floor reads both at once).
    std::vector<uint8_t*> k(sets), v(sets);
    std::vector<int32_t*> table(sets);
    std::mt19937 rng(7);
    for (int i = 0; i < sets; ++i) {
        CHECK(cudaMalloc(&k[i], 2 * cache_bytes));
        v[i] = k[i] + cache_bytes;
        CHECK(cudaMalloc(&table[i], blocks * 4));
        if (FP8) {
            ablation::fill_e4m3<<<1024, 256>>>(k[i], cache_bytes, 11u + i);
            ablation::fill_e4m3<<<1024, 256>>>(v[i], cache_bytes, 101u + i);
        } else {
            ablation::fill_bf16<<<1024, 256>>>(reinterpret_cast<__nv_bfloat16*>(k[i]), cache_bytes / 2, 11u + i);
            ablation::fill_bf16<<<1024, 256>>>(reinterpret_cast<__nv_bfloat16*>(v[i]), cache_bytes / 2, 101u + i);
        }
        std::vector<int32_t> perm(blocks);
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        CHECK(cudaMemcpy(table[i], perm.data(), blocks * 4, cudaMemcpyHostToDevice));
    }
    __nv_bfloat16 *q, *out;
    float *scales, *ws;
    int32_t* counters;
    const int mblocks = (kQRows * (kHq / kHkv) + da::ROWS - 1) / da::ROWS;
    const int splits = std::min(static_cast<int>((kv_len + da::SPLIT_KEYS * da::CLUSTER - 1) /
                                                 (da::SPLIT_KEYS * da::CLUSTER)),
                                da::MAX_GROUPS) *
                       da::CLUSTER;
    const size_t counter_bytes = static_cast<size_t>(kHkv) * mblocks * da::CLUSTER * 4;
    CHECK(cudaMalloc(&q, kQRows * kHq * da::D * 2));
    CHECK(cudaMalloc(&out, kQRows * kHq * da::D * 2));
    CHECK(cudaMalloc(&scales, 8));
    CHECK(cudaMalloc(&ws, static_cast<size_t>(kHkv) * mblocks * (splits / da::CLUSTER) * da::ROWS * da::WS_ROW * 4));
    CHECK(cudaMalloc(&counters, counter_bytes));
    CHECK(cudaMemset(counters, 0, counter_bytes));
    ablation::fill_bf16<<<64, 256>>>(q, kQRows * kHq * da::D, 5u);
    const float sc[2] = {0.05f, 0.05f};
    CHECK(cudaMemcpy(scales, sc, 8, cudaMemcpyHostToDevice));

    // The floor reads the first kv_bytes of a set's K and V caches: as many bytes as the kernel
    // reads (all of both caches when kv_len is a multiple of the block size).
    const std::vector<const void*> bufs(k.begin(), k.end());
    const double floor_us = ablation::read_floor_us(timer, bufs, kv_bytes, reps, sms, sink);

    const KernelFn fns[5] = {ablation_kernel<FP8, da::Work::full>, ablation_kernel<FP8, da::Work::no_fold>,
                             ablation_kernel<FP8, da::Work::no_partials>, ablation_kernel<FP8, da::Work::loads>,
                             ablation_kernel<FP8, da::Work::reads>};
    const char* labels[5] = {"full", "no_fold", "no_partials", "loads", "reads"};
    const int smem = (FP8 ? da::SMEM_FP8 : da::SMEM_BF16) + da::FOLD_ML_BYTES;
    const dim3 grid(splits, kHkv * mblocks);
    std::printf("RESULT {\"cache\": \"%s\", \"kv_len\": %u, \"kv_mb\": %.3f, \"floor_us\": %.3f", FP8 ? "fp8" : "bf16",
                kv_len, kv_bytes / 1e6, floor_us);
    for (int w = 0; w < 5; ++w) {
        CHECK(cudaFuncSetAttribute(fns[w], cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        auto f = [&](int i) {
            fns[w]<<<grid, da::NTHREADS, smem>>>(q, k[i], v[i], scales, scales + 1, out, table[i], kv_len, ws,
                                                 counters);
        };
        std::printf(", \"%s_us\": %.3f", labels[w], timer.us(f, sets, reps));
        CHECK(cudaGetLastError());
    }
    std::printf("}\n");
    std::fflush(stdout);
    for (int i = 0; i < sets; ++i) {
        CHECK(cudaFree(k[i]));
        CHECK(cudaFree(table[i]));
    }
    CHECK(cudaFree(q));
    CHECK(cudaFree(out));
    CHECK(cudaFree(scales));
    CHECK(cudaFree(ws));
    CHECK(cudaFree(counters));
}

}  // namespace

int main() {
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    unsigned* sink;
    CHECK(cudaMalloc(&sink, 16));
    Timer timer;
    for (uint32_t kv_len : {1024u, 8192u, 32768u}) {
        run_case<false>(timer, kv_len, sms, sink);
        run_case<true>(timer, kv_len, sms, sink);
    }
    return 0;
}
