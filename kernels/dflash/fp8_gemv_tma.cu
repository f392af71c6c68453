// fp8_gemv_tma (hopper): the row-scaled FP8-weight GEMV for at most 16 rows over TMA,
//
//   out[m, n] = bf16(scale[n] * sum_k x[m, k] * q[n, k]),  rows <= 16,
//
// the warp-specialized tile of fp8_gemm_tma.cuh with a 16-row x tile (its GemvShape):
// one producer thread streams each 64-k step's weight box (128 rows x 64 bytes) and x box (16
// rows x 64 bf16; rows past `rows` land as zeros) into a 10-slot ring, and two warpgroups convert
// their 64 weight rows to bf16 in registers and issue m64n16k16 warpgroup MMAs with the weight
// as A. Two CTAs fit an SM (66 registers a thread), so up to 20 steps (160 KiB of weight) are
// in flight per SM and the copies need no thread's attention. When the 128-row tiles are fewer
// than GEMV_TMA_CTAS (one per SM), K is split over a cluster of up to GEMV_TMA_SPLIT CTAs along
// z, whose f32 partial tiles are summed in rank order over distributed shared memory (no
// workspace). k % 16 == 0 and 16-byte aligned x and q (tensor maps; else not launched).
// Accumulation order: k in increasing order per rank, ranks in order; deterministic.
//
// Speed (H200): a CTA retires one 64-k step about every microsecond (about 12 GB/s of weight:
// the consumers' per-step chain of barrier wait, shared loads, conversions, MMAs and release, not
// the copies; splitting a step's four MMAs over two accumulator sets measured the same), so the
// kernel reaches the memory's rate only with many CTAs resident for long: 80% of
// copy bandwidth on the 151936 x 4096 lm_head (fp8_gemv_rt2_16: 71% at 16 rows), 54% on 24576 x
// 4096 (the same as rt2_16), 33-55% below. The chain takes it where it is faster
// (fp8_gemv_tma_wide).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cstdint>

#include "fp8_gemm_tma.cuh"

__global__ void __launch_bounds__(384, 2) dflash_fp8_gemv_tma_kernel(DFLASH_FP8_TMA_ARGS) {
    extern __shared__ __align__(1024) uint8_t fp8_gemv_tma_smem[];
    dflash_fp8_tma_detail::kernel_body<dflash_fp8_tma_detail::GemvShape>(x, q, scale, out, rows, n, k, x_map, q_map, fp8_gemv_tma_smem);
}
