// Helpers shared by the drafter's bf16 kernels: packed bf16x2 <-> f32 conversion, 16-byte
// loads (streaming, and a row kernel's per-thread vectors), the vector paths' alignment test and
// vectors-per-thread dispatch, and f32 reductions over a warp and a CTA. Everything is static and
// inlined, so including this header from several kernels in one translation unit is safe.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "../common/bf16x2.cuh"

namespace dflash_common {

using kcommon::bf16_hi;
using kcommon::bf16_lo;
using kcommon::pack_bf16x2;

// 16-byte streaming load of data read once: ld.global.nc with no L1 allocation.
static __device__ __forceinline__ uint4 ld_stream(const uint4* p) {
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

// True when every pointer is 16-byte aligned (the vector paths' uint4 accesses).
template <typename... P>
static __device__ __forceinline__ bool aligned16(const P*... p) {
    return ((reinterpret_cast<uintptr_t>(p) | ...) & 15u) == 0;
}

// This thread's VPT vectors v = threadIdx.x + k * blockDim.x of src (zeros at v >= nvec).
template <uint32_t VPT>
static __device__ __forceinline__ void load_vecs(uint4 (&r)[VPT], const uint4* src, uint32_t nvec) {
#pragma unroll
    for (uint32_t k = 0; k < VPT; ++k) {
        const uint32_t v = threadIdx.x + k * blockDim.x;
        r[k] = v < nvec ? __ldg(src + v) : make_uint4(0u, 0u, 0u, 0u);
    }
}

// Calls f(Vpt<N>{}) with N = per clamped to 1..kMaxVecPerThread: the row kernels' dispatch from
// vectors per thread to a compile-time count.
constexpr uint32_t kMaxVecPerThread = 4;
template <uint32_t N>
struct Vpt {
    static constexpr uint32_t value = N;
};
template <typename F>
static __device__ __forceinline__ void with_vpt(uint32_t per, F&& f) {
    switch (per) {
        case 0:
        case 1: f(Vpt<1>{}); break;
        case 2: f(Vpt<2>{}); break;
        case 3: f(Vpt<3>{}); break;
        default: f(Vpt<4>{}); break;
    }
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

// RMS norm tail shared by rms_norm and residual_rms_norm. rms_inverse: 1 / sqrt(mean of squares
// + eps) of a row of `hidden` values, from each thread's partial sum of squares `ss`.
static __device__ __forceinline__ float rms_inverse(float ss, float* red, uint32_t hidden, float eps) {
    const float total = block_sum(ss, red);
    return rsqrtf(total / static_cast<float>(hidden) + eps);
}

// Vector path: out vector v = bf16(src * rinv * weight), element by element, for this thread's
// VPT vectors v = threadIdx.x + k * blockDim.x < nvec (src and weight already loaded).
template <uint32_t VPT>
static __device__ __forceinline__ void store_scaled(uint4* ov, const uint4 (&src)[VPT],
                                                    const uint4 (&weight)[VPT], float rinv,
                                                    uint32_t nvec) {
#pragma unroll
    for (uint32_t k = 0; k < VPT; ++k) {
        const uint32_t v = threadIdx.x + k * blockDim.x;
        if (v < nvec) {
            const uint32_t sw[4] = {src[k].x, src[k].y, src[k].z, src[k].w};
            const uint32_t ww[4] = {weight[k].x, weight[k].y, weight[k].z, weight[k].w};
            uint32_t o[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                o[j] = pack_bf16x2(bf16_lo(sw[j]) * rinv * bf16_lo(ww[j]),
                                   bf16_hi(sw[j]) * rinv * bf16_hi(ww[j]));
            }
            ov[v] = make_uint4(o[0], o[1], o[2], o[3]);
        }
    }
}

// Scalar path: out[i] = bf16(src[i] * rinv * weight[i]) for i < hidden, block-strided.
static __device__ __forceinline__ void store_scaled_scalar(const __nv_bfloat16* src,
                                                           const __nv_bfloat16* weight,
                                                           __nv_bfloat16* out, uint32_t hidden,
                                                           float rinv) {
    for (uint32_t i = threadIdx.x; i < hidden; i += blockDim.x) {
        out[i] = __float2bfloat16_rn(__bfloat162float(src[i]) * rinv * __bfloat162float(weight[i]));
    }
}

}  // namespace dflash_common
