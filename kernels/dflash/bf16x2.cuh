// Helpers shared by the drafter's bf16 kernels: packed bf16x2 <-> f32 conversion and
// f32 reductions over a warp and a CTA. Everything is static and inlined, so including
// this header from several kernels in one translation unit is safe.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

namespace dflash_common {

// The low / high bf16 of a packed pair, widened exactly to f32.
static __device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
static __device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

// Two f32 -> one packed bf16x2 word (round to nearest even), `lo` in the low half.
static __device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

static __device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
    return v;
}

// Sum over the CTA; every thread gets the (bitwise identical) total. `red` holds one
// float per warp. blockDim.x must be a multiple of 32.
static __device__ __forceinline__ float block_sum(float v, float* red) {
    v = warp_sum(v);
    const uint32_t nwarps = blockDim.x >> 5;
    if (nwarps == 1) return v;
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    float t = 0.f;
    for (uint32_t i = 0; i < nwarps; ++i) t += red[i];
    return t;
}

}  // namespace dflash_common
