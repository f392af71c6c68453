// Plain FP8-weight GEMV for a few rows (rows <= 8), any K:
//
//   out[m, n] = bf16(scale[n] * sum_k x[m, k] * q[n, k])
//
// One warp per weight row n (8 warps per 256-thread CTA). Lane l walks the row's 16-byte
// vectors l, l + 32, ... (one streaming load each, 16 E4M3 values converted exactly to f32)
// and multiplies them with the same 16 k of every x row (two 16-byte loads through L1, where
// the x rows stay: every warp of the GPU reads them), f32 FMAs in k order per lane. The lanes'
// sums meet in a fixed xor-shuffle tree, so the result is deterministic. K % 16 != 0 or
// misaligned pointers take a scalar path (lane l takes k = l, l + 32, ...).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cstdint>

#include "fp8_common.cuh"

namespace dflash_fp8_gemv_detail {

constexpr uint32_t kMaxRows = 8;

static __device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
    return v;
}

// acc += sum over 8 k of (bf16 x words) * (f32 weights w[0..7]).
static __device__ __forceinline__ float dot8(float acc, const uint4& xv, const float (&w)[8]) {
    using dflash_fp8::bf16_hi;
    using dflash_fp8::bf16_lo;
    acc = fmaf(bf16_lo(xv.x), w[0], acc);
    acc = fmaf(bf16_hi(xv.x), w[1], acc);
    acc = fmaf(bf16_lo(xv.y), w[2], acc);
    acc = fmaf(bf16_hi(xv.y), w[3], acc);
    acc = fmaf(bf16_lo(xv.z), w[4], acc);
    acc = fmaf(bf16_hi(xv.z), w[5], acc);
    acc = fmaf(bf16_lo(xv.w), w[6], acc);
    acc = fmaf(bf16_hi(xv.w), w[7], acc);
    return acc;
}

// 8 E4M3 bytes (two words) -> 8 f32, k order.
static __device__ __forceinline__ void e4m3x8_to_f32(uint32_t w0, uint32_t w1, float (&f)[8]) {
    using namespace dflash_fp8;
    const uint32_t p0 = e4m3_01_to_bf16x2(w0), p1 = e4m3_23_to_bf16x2(w0);
    const uint32_t p2 = e4m3_01_to_bf16x2(w1), p3 = e4m3_23_to_bf16x2(w1);
    f[0] = bf16_lo(p0); f[1] = bf16_hi(p0); f[2] = bf16_lo(p1); f[3] = bf16_hi(p1);
    f[4] = bf16_lo(p2); f[5] = bf16_hi(p2); f[6] = bf16_lo(p3); f[7] = bf16_hi(p3);
}

}  // namespace dflash_fp8_gemv_detail

__global__ void __launch_bounds__(256)
dflash_dense_gemv_fp8w_kernel(const __nv_bfloat16* x, const __nv_fp8_e4m3* q, const float* scale,
                              __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k) {
    namespace d = dflash_fp8_gemv_detail;
    const uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
    const uint32_t row = blockIdx.x * 8u + warp;
    if (row >= n) return;
    const uint8_t* qr = reinterpret_cast<const uint8_t*>(q) + static_cast<uint64_t>(row) * k;
    float acc[d::kMaxRows];
#pragma unroll
    for (uint32_t m = 0; m < d::kMaxRows; ++m) acc[m] = 0.f;

    if ((k & 15u) == 0 && dflash_fp8::aligned16(q, x)) {
        const uint32_t nvec = k >> 4;
        for (uint32_t v = lane; v < nvec; v += 32) {
            const uint4 wv = dflash_fp8::ld_stream16(qr + 16ull * v);
            float lo[8], hi[8];
            d::e4m3x8_to_f32(wv.x, wv.y, lo);
            d::e4m3x8_to_f32(wv.z, wv.w, hi);
#pragma unroll
            for (uint32_t m = 0; m < d::kMaxRows; ++m) {
                if (m < rows) {
                    const uint4* xr = reinterpret_cast<const uint4*>(x + static_cast<uint64_t>(m) * k) + 2u * v;
                    acc[m] = d::dot8(acc[m], __ldg(xr), lo);
                    acc[m] = d::dot8(acc[m], __ldg(xr + 1), hi);
                }
            }
        }
    } else {
        const uint16_t* xh = reinterpret_cast<const uint16_t*>(x);
        for (uint32_t i = lane; i < k; i += 32) {
            const float wf = dflash_fp8::e4m3_to_f32(__ldg(qr + i));
#pragma unroll
            for (uint32_t m = 0; m < d::kMaxRows; ++m) {
                if (m < rows) {
                    const float xf = __uint_as_float(static_cast<uint32_t>(__ldg(xh + static_cast<uint64_t>(m) * k + i)) << 16);
                    acc[m] = fmaf(xf, wf, acc[m]);
                }
            }
        }
    }
    const float s = __ldg(scale + row);
#pragma unroll
    for (uint32_t m = 0; m < d::kMaxRows; ++m) {
        if (m < rows) {
            const float total = d::warp_sum(acc[m]);
            if (lane == 0) out[static_cast<uint64_t>(m) * n + row] = __float2bfloat16_rn(total * s);
        }
    }
}
