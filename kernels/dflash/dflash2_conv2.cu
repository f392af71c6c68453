// DFlash2 grouped dynamic convolution: two taps, groups of 16 channels, over blocks of 16 rows.
//
//   out[t, c] = bf16( (base[0, c] + delta[t, 0, g]) * x[t, c]
//                   + (base[1, c] + delta[t, 1, g]) * x[t - 1, c] ),   g = c / 16,
//
// with x[t - 1] = 0 for the first row of each block of 16 rows.  f32 arithmetic evaluated as
// separately rounded operations (w0 = base0 + d0, w1 = base1 + d1, w0 * x_t, w1 * x_prev, their
// sum: no fused multiply-add), then one rounding to bf16.
//
// Layout (specs/dflash2.yaml): grid [ceil(hidden / 1024), rows / 16], 128 threads.  A thread
// owns one 16-byte column vector (8 channels, inside one group since 16 % 8 == 0) of one block
// of 16 rows: it issues the 16 streaming loads of x and the 32 delta loads before any
// arithmetic, keeps x[t - 1] in registers, and writes 16 output vectors.  So x, delta and out
// are each touched exactly once; base (2 vectors per thread) comes through the read-only cache.
// Misaligned pointers (not 16-byte aligned) take an element-wise path with the same results.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "../common/pdl.cuh"
#include "bf16x2.cuh"

namespace dflash2_conv2_detail {

constexpr uint32_t kBlockRows = 16;  // rows per convolution block (the mask period)
constexpr uint32_t kThreads = 128;   // must match CONV_THREADS in specs/dflash2.yaml

static __device__ __forceinline__ float conv_tap(float w0, float xt, float w1, float xp) {
    return __fadd_rn(__fmul_rn(w0, xt), __fmul_rn(w1, xp));
}

// Vector path: 8 channels c0 .. c0 + 7 of rows t0 .. t0 + 15.
static __device__ __forceinline__ void block_vec(const __nv_bfloat16* __restrict__ x,
                                                 const __nv_bfloat16* __restrict__ base,
                                                 const __nv_bfloat16* __restrict__ delta,
                                                 __nv_bfloat16* __restrict__ out, uint32_t t0,
                                                 uint32_t c0, uint32_t hidden) {
    using namespace dflash_common;
    const uint32_t groups = hidden >> 4;
    const uint32_t g = c0 >> 4;
    uint4 xv[kBlockRows];
#pragma unroll
    for (uint32_t t = 0; t < kBlockRows; ++t) {
        xv[t] = ld_stream(reinterpret_cast<const uint4*>(x + static_cast<size_t>(t0 + t) * hidden + c0));
    }
    const unsigned short* dp = reinterpret_cast<const unsigned short*>(delta);
    unsigned short d0[kBlockRows], d1[kBlockRows];
#pragma unroll
    for (uint32_t t = 0; t < kBlockRows; ++t) {
        const size_t off = static_cast<size_t>(t0 + t) * 2 * groups + g;
        d0[t] = __ldg(dp + off);
        d1[t] = __ldg(dp + off + groups);
    }
    const uint4 b0v = __ldg(reinterpret_cast<const uint4*>(base + c0));
    const uint4 b1v = __ldg(reinterpret_cast<const uint4*>(base + hidden + c0));
    const uint32_t b0w[4] = {b0v.x, b0v.y, b0v.z, b0v.w};
    const uint32_t b1w[4] = {b1v.x, b1v.y, b1v.z, b1v.w};
    float b0[8], b1[8];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        b0[2 * j] = bf16_lo(b0w[j]);
        b0[2 * j + 1] = bf16_hi(b0w[j]);
        b1[2 * j] = bf16_lo(b1w[j]);
        b1[2 * j + 1] = bf16_hi(b1w[j]);
    }
    float prev[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) prev[e] = 0.f;
#pragma unroll
    for (uint32_t t = 0; t < kBlockRows; ++t) {
        const float dt0 = __uint_as_float(static_cast<uint32_t>(d0[t]) << 16);
        const float dt1 = __uint_as_float(static_cast<uint32_t>(d1[t]) << 16);
        const uint32_t xw[4] = {xv[t].x, xv[t].y, xv[t].z, xv[t].w};
        float cur[8];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            cur[2 * j] = bf16_lo(xw[j]);
            cur[2 * j + 1] = bf16_hi(xw[j]);
        }
        uint32_t o[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int e = 2 * j;
            const float lo = conv_tap(__fadd_rn(b0[e], dt0), cur[e], __fadd_rn(b1[e], dt1), prev[e]);
            const float hi =
                conv_tap(__fadd_rn(b0[e + 1], dt0), cur[e + 1], __fadd_rn(b1[e + 1], dt1), prev[e + 1]);
            o[j] = pack_bf16x2(lo, hi);
        }
        *reinterpret_cast<uint4*>(out + static_cast<size_t>(t0 + t) * hidden + c0) =
            make_uint4(o[0], o[1], o[2], o[3]);
#pragma unroll
        for (int e = 0; e < 8; ++e) prev[e] = cur[e];
    }
}

// Element-wise path (any alignment): the same 8 channels, one element at a time.
static __device__ __forceinline__ void block_scalar(const __nv_bfloat16* x, const __nv_bfloat16* base,
                                                    const __nv_bfloat16* delta, __nv_bfloat16* out,
                                                    uint32_t t0, uint32_t c0, uint32_t hidden) {
    const uint32_t groups = hidden >> 4;
    const uint32_t g = c0 >> 4;
    for (uint32_t e = 0; e < 8; ++e) {
        const uint32_t c = c0 + e;
        const float b0 = __bfloat162float(base[c]);
        const float b1 = __bfloat162float(base[hidden + c]);
        float prev = 0.f;
        for (uint32_t t = 0; t < kBlockRows; ++t) {
            const size_t row = t0 + t;
            const float cur = __bfloat162float(x[row * hidden + c]);
            const float dt0 = __bfloat162float(delta[row * 2 * groups + g]);
            const float dt1 = __bfloat162float(delta[row * 2 * groups + groups + g]);
            out[row * hidden + c] =
                __float2bfloat16_rn(conv_tap(__fadd_rn(b0, dt0), cur, __fadd_rn(b1, dt1), prev));
            prev = cur;
        }
    }
}

}  // namespace dflash2_conv2_detail

__global__ void __launch_bounds__(128)
dflash2_conv2_kernel(const __nv_bfloat16* x, const __nv_bfloat16* base, const __nv_bfloat16* delta,
                     __nv_bfloat16* out, uint32_t rows, uint32_t hidden) {
    kcommon::pdl_enter();
    namespace d = dflash2_conv2_detail;
    const uint32_t c0 = (blockIdx.x * blockDim.x + threadIdx.x) * 8u;
    const uint32_t t0 = blockIdx.y * d::kBlockRows;
    if (c0 >= hidden || t0 + d::kBlockRows > rows) return;
    if (dflash_common::aligned16(x, base, out)) {
        d::block_vec(x, base, delta, out, t0, c0, hidden);
    } else {
        d::block_scalar(x, base, delta, out, t0, c0, hidden);
    }
}
