// How the shape of a warp's weight copies decides a GEMV's read rate (kernels/common/
// line_ring.cuh): the load structure of a streamed GEMV with no arithmetic, over cold weights,
// beside a plain streaming read of the same bytes. One "RESULT {json}" line per weight shape.
//
// Every variant is dense_gemv's / fp8_gemv_rt2's skeleton: a CTA of 8 warps owns R weight rows
// (and a contiguous 1 / KS of their bytes), chunk c of the rows goes to warp c % 8, each warp
// streams its chunks through a 3-slot cp.async ring in shared memory (2 chunks in flight), and
// the landed 16-byte words are folded together so that nothing is optimised away.
//   half:   chunks of 64 bytes a row, 4 lanes a row (the mma fragments' layout): each copy
//           instruction touches half of 8 rows' 128-byte lines;
//   halves: chunks of 128 bytes a row copied as two such instructions, back to back;
//   line:   chunks of 128 bytes a row, 8 lanes a row (kcommon::LineChunk): each instruction
//           touches 4 whole lines.
// Same bytes in flight per warp for all three (4 KB for bf16's 16-row CTAs, 8 KB for FP8's,
// whose CTAs take half of K).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "../kernels/common/line_ring.cuh"
#include "../kernels/common/ptx.cuh"
#include "ablation_common.cuh"

namespace {

using ablation::Timer;

enum class Shape { half, halves, line };

template <int ROWS, int W, Shape SH, int KS>
__global__ void __launch_bounds__(256, 2) pattern_kernel(const uint8_t* w, uint32_t row_bytes, unsigned* sink) {
    extern __shared__ __align__(128) uint8_t smem[];
    constexpr int kStages = 3;
    constexpr int kCopies = ROWS * W / 16 / 32;  // 16-byte copies per lane per chunk
    const uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const uint32_t span = row_bytes / KS;
    const uint8_t* base =
        w + static_cast<uint64_t>(blockIdx.x / KS) * ROWS * row_bytes + (blockIdx.x % KS) * span;
    const uint32_t nch = span / W;
    const uint32_t ring = kcommon::smem_addr(smem) + threadIdx.x * 16u;
    auto issue = [&](uint32_t c, uint32_t s) {
#pragma unroll
        for (int l = 0; l < kCopies; ++l) {
            uint32_t row, unit;
            if (SH == Shape::line) {
                row = kcommon::LineChunk::copy_row(l, lane);
                unit = kcommon::LineChunk::copy_unit(lane);
            } else {  // 4 lanes a row, 8 rows an instruction; `halves` takes both halves of a line
                constexpr int kHalves = W / 64;
                row = 8u * (l / kHalves) + (lane >> 2);
                unit = 4u * (l % kHalves) + (lane & 3u);
            }
            const bool p = c < nch;
            kcommon::cp_async16_zfill(ring + (s * kCopies + l) * 256u * 16u,
                                      p ? base + row * row_bytes + c * W + unit * 16u : w, p);
        }
        kcommon::cp_async_commit();
    };
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) issue(warp + 8u * s, s);
    unsigned acc = 0;
    uint32_t s_read = 0, s_write = kStages - 1;
    for (uint32_t c = warp; c < nch; c += 8u) {
        issue(c + 8u * (kStages - 1), s_write);
        kcommon::cp_async_wait<kStages - 1>();
#pragma unroll
        for (int l = 0; l < kCopies; ++l) {
            const uint4 v = kcommon::lds128(ring + (s_read * kCopies + l) * 256u * 16u);
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
        }
        s_read = s_read + 1 == kStages ? 0u : s_read + 1;
        s_write = s_write + 1 == kStages ? 0u : s_write + 1;
    }
    kcommon::cp_async_wait<0>();
    if (acc == 0x9e3779b9u) sink[0] = acc;
}

template <int ROWS, int W, Shape SH, int KS>
double time_pattern(Timer& timer, const std::vector<const void*>& bufs, uint32_t n, uint32_t row_bytes, int reps,
                    unsigned* sink) {
    auto kern = pattern_kernel<ROWS, W, SH, KS>;
    const int smem = 3 * ROWS * W * 8;  // 3 slots x 8 warps x ROWS x W bytes
    CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const unsigned grid = n / ROWS * KS;
    const double us = timer.us(
        [&](int i) { kern<<<grid, 256, smem>>>(static_cast<const uint8_t*>(bufs[i]), row_bytes, sink); },
        static_cast<int>(bufs.size()), reps);
    CHECK(cudaGetLastError());
    return us;
}

}  // namespace

int main() {
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const uint64_t pool_bytes = 1600ull << 20;
    uint8_t* pool;
    CHECK(cudaMalloc(&pool, pool_bytes));
    CHECK(cudaMemset(pool, 1, pool_bytes));
    unsigned* sink;
    CHECK(cudaMalloc(&sink, 16));
    Timer timer;
    struct Case {
        const char* name;
        const char* dtype;
        uint32_t n, row_bytes;
    };
    const Case cases[] = {{"o", "bf16", 4096, 8192},      {"gate_up", "bf16", 24576, 8192},
                          {"down", "bf16", 4096, 24576},  {"lm_head", "bf16", 151936, 8192},
                          {"o", "fp8", 4096, 4096},       {"qkv", "fp8", 6144, 4096},
                          {"gate_up", "fp8", 24576, 4096}, {"down", "fp8", 4096, 12288},
                          {"lm_head", "fp8", 151936, 4096}};
    for (const Case& cs : cases) {
        const uint64_t nbytes = static_cast<uint64_t>(cs.n) * cs.row_bytes;
        // enough copies to total at least 480 MB (8x an H200's L2) where they fit the pool
        const uint64_t sets = std::max<uint64_t>(1, std::min<uint64_t>(pool_bytes / nbytes, (uint64_t{480} << 20) / nbytes + 1));
        std::vector<const void*> bufs;
        for (uint64_t i = 0; i < sets; ++i) bufs.push_back(pool + i * nbytes);
        const int reps = std::max<int>(20, static_cast<int>(2000 / std::max<uint64_t>(1, nbytes >> 20)));
        const double floor = ablation::read_floor_us(timer, bufs, nbytes, reps, sms, sink);
        double half, halves, line;
        if (cs.dtype[0] == 'b') {  // dense_gemv: 16 rows a CTA, whole rows
            half = time_pattern<16, 64, Shape::half, 1>(timer, bufs, cs.n, cs.row_bytes, reps, sink);
            halves = time_pattern<16, 128, Shape::halves, 1>(timer, bufs, cs.n, cs.row_bytes, reps, sink);
            line = time_pattern<16, 128, Shape::line, 1>(timer, bufs, cs.n, cs.row_bytes, reps, sink);
        } else {  // fp8: K split over 2 CTAs; 64-byte pieces over 64 rows (fp8_gemv_rt2's former
                  // chunks), 128-byte chunks over 32 rows (a warp's chunk in fp8_gemv_rt2 now)
            half = time_pattern<64, 64, Shape::half, 2>(timer, bufs, cs.n, cs.row_bytes, reps, sink);
            halves = time_pattern<32, 128, Shape::halves, 2>(timer, bufs, cs.n, cs.row_bytes, reps, sink);
            line = time_pattern<32, 128, Shape::line, 2>(timer, bufs, cs.n, cs.row_bytes, reps, sink);
        }
        std::printf("RESULT {\"shape\": \"%s\", \"dtype\": \"%s\", \"weight_mb\": %.1f, \"floor_us\": %.2f, "
                    "\"half_us\": %.2f, \"halves_us\": %.2f, \"line_us\": %.2f}\n",
                    cs.name, cs.dtype, nbytes / 1e6, floor, half, halves, line);
    }
    return 0;
}
