// Register-tiled row-scaled FP8-weight GEMVs (module fp8_gemv_rt, kill switch
// METRALE_NO_DFLASH_FP8_RT):
//
//   out[m, n] = bf16(scale[n] * sum_k x[m, k] * q[n, k])
//
// x bf16 [rows, K], q E4M3 [N, K], scale f32 [N], f32 accumulation.
//   fp8_gemv_rt2:    rows <= 8,  one 8-column B tile per mma (MT = 1).
//   fp8_gemv_rt2_16: rows <= 16, two B tiles sharing each converted weight fragment (MT = 2).
// Both need K % 16 == 0 (the launchers' applies_if) so that every 16-byte weight load is whole.
// Design (clusters of 8 CTAs along K over 128 weight rows, 8 warps x 16 rows per CTA, weight as
// the mma A operand, fixed-order cluster reduction) in fp8_rowtile.cuh. Grid: 8 CTAs per 128
// weight rows; block 256; dynamic shared memory: the CTA's x slice, 8 * MT rows x KS bf16.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cstdint>

#include "fp8_rowtile.cuh"

namespace dflash_fp8_rt_detail {
// MT, RT, row groups, K phases, chunks per load batch (8 x 2 x 16 bytes in flight per lane).
template <int MT>
using Tile = dflash_fp8::RowTile<MT, 1, 8, 1, 8>;
}  // namespace dflash_fp8_rt_detail

__global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(256, 2)
dflash_fp8_gemv_rt2_kernel(const __nv_bfloat16* x, const __nv_fp8_e4m3* q, const float* scale,
                           __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k) {
    using T = dflash_fp8_rt_detail::Tile<1>;
    extern __shared__ uint4 dflash_fp8_dyn[];
    __shared__ T::Shared sh;
    T::run(x, reinterpret_cast<const uint8_t*>(q), scale, out, rows, n, k, dflash_fp8_dyn, sh);
}

__global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(256, 2)
dflash_fp8_gemv_rt2_16_kernel(const __nv_bfloat16* x, const __nv_fp8_e4m3* q, const float* scale,
                              __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k) {
    using T = dflash_fp8_rt_detail::Tile<2>;
    extern __shared__ uint4 dflash_fp8_dyn[];
    __shared__ T::Shared sh;
    T::run(x, reinterpret_cast<const uint8_t*>(q), scale, out, rows, n, k, dflash_fp8_dyn, sh);
}
