// Elementwise bf16 add: out[i] = bf16(f32(a[i]) + f32(b[i])) for i < n.
//
// Vector path (all three pointers 16-byte aligned): each thread handles two uint4
// vectors (16 elements) per grid-stride step, so four 16-byte loads are in flight
// per thread; the n % 8 leftover elements are done by the first threads of the
// grid.  The launcher sizes the grid as ceil(n / 2048) CTAs of 128 threads (one
// step each); the grid-stride loop keeps any other grid (and block) correct.
// Misaligned pointers (which the launcher cannot see) take a scalar grid-stride
// path.  `out` may be the same buffer as `a` or `b` (exact in-place); any other
// overlap is unsupported.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "bf16x2.cuh"

namespace dflash_residual_add_detail {

using namespace dflash_common;

static __device__ __forceinline__ uint32_t add2(uint32_t a, uint32_t b) {
    return pack_bf16x2(bf16_lo(a) + bf16_lo(b), bf16_hi(a) + bf16_hi(b));
}

static __device__ __forceinline__ uint4 add8(const uint4& a, const uint4& b) {
    return make_uint4(add2(a.x, b.x), add2(a.y, b.y), add2(a.z, b.z), add2(a.w, b.w));
}

}  // namespace dflash_residual_add_detail

__global__ void __launch_bounds__(1024)
dflash_residual_add_bf16_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b,
                                __nv_bfloat16* out, uint64_t n) {
    namespace d = dflash_residual_add_detail;
    const uint64_t tid = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const uint64_t nthreads = static_cast<uint64_t>(gridDim.x) * blockDim.x;

    const bool aligned = ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
                           reinterpret_cast<uintptr_t>(out)) & 15u) == 0;
    if (!aligned) {
        for (uint64_t i = tid; i < n; i += nthreads) {
            out[i] = __float2bfloat16_rn(__bfloat162float(a[i]) + __bfloat162float(b[i]));
        }
        return;
    }

    const uint64_t nvec = n >> 3;
    const uint4* av = reinterpret_cast<const uint4*>(a);
    const uint4* bv = reinterpret_cast<const uint4*>(b);
    uint4* ov = reinterpret_cast<uint4*>(out);
    // Step s of this CTA covers vectors [base, base + 2 * blockDim.x).
    const uint64_t step = 2ull * nthreads;
    for (uint64_t base = 2ull * blockIdx.x * blockDim.x; base < nvec; base += step) {
        const uint64_t v0 = base + threadIdx.x;
        const uint64_t v1 = v0 + blockDim.x;
        const bool ok0 = v0 < nvec, ok1 = v1 < nvec;
        uint4 a0 = make_uint4(0u, 0u, 0u, 0u), b0 = a0, a1 = a0, b1 = a0;
        if (ok0) { a0 = __ldg(av + v0); b0 = __ldg(bv + v0); }
        if (ok1) { a1 = __ldg(av + v1); b1 = __ldg(bv + v1); }
        if (ok0) ov[v0] = d::add8(a0, b0);
        if (ok1) ov[v1] = d::add8(a1, b1);
    }
    const uint64_t rem = n - (nvec << 3);  // 0..7 leftover elements
    if (tid < rem) {
        const uint64_t i = (nvec << 3) + tid;
        out[i] = __float2bfloat16_rn(__bfloat162float(a[i]) + __bfloat162float(b[i]));
    }
}
