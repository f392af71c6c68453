// The drafter's FP8-weight linear layers other than the register-tiled GEMVs (module
// fp8_linear, kill switch METRALE_NO_DFLASH_FP8_LINEAR). Weights are E4M3 bytes q [N, K],
// row-major like torch.nn.Linear, with one f32 scale per row; every product computes
//
//   out[m, n] = bf16(scale[n] * sum_k x[m, k] * q[n, k])
//
// with bf16 activations x [rows, K] and f32 accumulation (each E4M3 value is exact in bf16).
//
//   quantize_bf16_to_fp8           fp8_quantize.cuh  one CTA per weight row
//   dense_gemv_fp8w                fp8_gemv.cuh      one warp per weight row, rows <= 8, any K
//   fp8_gemm_n128_row_scaled_m16   below             one warp per 128-wide N tile, rows <= 16
//   fp8_gemm_n128_row_scaled       fp8_gemm.cuh      128 x 128 tensor-core tiles, any rows
//   fp8_gemm_tma                   fp8_gemm_tma.cuh  hopper, many rows: TMA ring, weight as A in registers
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cstdint>

#include "fp8_gemm.cuh"
#include "fp8_gemm_tma.cuh"
#include "fp8_gemv.cuh"
#include "fp8_quantize.cuh"
#include "fp8_rowtile.cuh"

// fp8_gemm_n128_row_scaled_m16: the few-row product of fp8_rowtile.cuh with 4 warps per CTA,
// each warp covering all 128 weight rows of the cluster's tile (8 row tiles of 16, both 8-row
// x tiles: 64 accumulators per lane) over every 4th 64-k chunk of the CTA's K range, one chunk
// (16 x 16 weight bytes per lane) loaded at a time; clusters of 8 CTAs along K as for the
// GEMVs, so the grid is 8 CTAs per 128 weight rows. Any K (byte loads when K % 16 != 0).
// Dynamic shared memory: the CTA's x slice (16 rows); static: 4 x 128 x 16 f32 partials.
namespace dflash_fp8_m16_detail {
using Tile = dflash_fp8::RowTile<2, 8, 1, 4, 1>;
}  // namespace dflash_fp8_m16_detail

__global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(128)
dflash_fp8_gemm_n128_row_scaled_m16_kernel(const __nv_bfloat16* x, const __nv_fp8_e4m3* q, const float* scale,
                                           __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k) {
    using T = dflash_fp8_m16_detail::Tile;
    extern __shared__ uint4 dflash_fp8_dyn[];
    __shared__ T::Shared sh;
    T::run(x, reinterpret_cast<const uint8_t*>(q), scale, out, rows, n, k, dflash_fp8_dyn, sh);
}

// fp8_gemm_tma (hopper): 128 weight rows x 128 or 256 x rows a tile (fp8_gemm_tma.cuh).
__global__ void __launch_bounds__(384, 1) dflash_fp8_gemm_tma_kernel(DFLASH_FP8_TMA_ARGS) {
    extern __shared__ __align__(1024) uint8_t fp8_tma_smem[];
    dflash_fp8_tma_detail::kernel_body<dflash_fp8_tma_detail::GemmShape, dflash_fp8_tma_detail::WideShape>(
        x, q, scale, out, rows, n, k, x_map, q_map, fp8_tma_smem);
}
