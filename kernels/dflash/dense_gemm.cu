// Dense bf16 GEMM on the tensor cores for any number of rows (mma.sync m16n8k16, f32
// accumulation), out[r, n] = bf16( sum_k f32(x[r, k]) * f32(w[n, k]) ), w [n, k] as nn.Linear.
//
// 64 x 64 output tiles, one 128-thread CTA each (grid ceil(n / 64) x ceil(m / 64)); the tile
// loop is dense_gemm_tile.cuh's. Vector path (16-byte loads) when k % 8 == 0 and x, w are
// 16-byte aligned; otherwise element loads, so any k and alignment are accepted.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "dense_gemm_tile.cuh"

__global__ void __launch_bounds__(128)
dense_gemm_bf16_kernel(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* out,
                       uint32_t m, uint32_t n, uint32_t k) {
    namespace d = dense_tile;
    if ((k & 7u) == 0 && dense_mma::aligned16(x, w)) {
        d::gemm_tile<true>(x, d::DenseB<true>{w, n, k}, out, m, n, k, 1.0f);
    } else {
        d::gemm_tile<false>(x, d::DenseB<false>{w, n, k}, out, m, n, k, 1.0f);
    }
}
