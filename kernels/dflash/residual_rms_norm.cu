// Fused residual add + RMS norm (bf16).
//
//   s             = bf16(x[r, :] + residual[r, :])          (f32 add, one rounding)
//   residual[r,:] = s                                      (in place: the new residual)
//   out[r, :]     = bf16( s * rsqrt(mean_f32(s^2) + eps) * weight )
//
// The norm is taken over the new residual *as stored* (rounded to bf16), which is
// what an unfused `residual = x + residual; out = rms_norm(residual)` computes.
//
// One CTA per row, blockDim.x = 32 * ceil(hidden / 1024) capped at 1024 (see
// specs/residual_rms_norm.yaml), so each thread owns at most 4 uint4 vectors of x
// and of residual.  The sums are kept in registers (packed bf16) between the f32
// sum of squares (warp shuffles + one shared-memory step) and the normalised
// write: x and residual are read once, residual and out written once.
//
// Alignment: the vector path needs hidden % 8 == 0 (an `applies_if` clause) and
// 16-byte aligned pointers; misaligned base pointers (invisible to the launcher)
// and hidden > 32768 take a scalar fallback path that is slower but correct.
// `out` may be the same buffer as `x` (exact in-place); `out` must not overlap
// `residual`.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "../common/pdl.cuh"
#include "bf16x2.cuh"

namespace dflash_residual_rms_norm_detail {

using namespace dflash_common;

template <uint32_t VPT>
static __device__ __forceinline__ void row_vec(const __nv_bfloat16* x, __nv_bfloat16* residual,
                                               const __nv_bfloat16* weight, __nv_bfloat16* out,
                                               uint32_t hidden, float eps, float* red) {
    const uint32_t nvec = hidden >> 3;
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    uint4* rv = reinterpret_cast<uint4*>(residual);
    const uint4* wv = reinterpret_cast<const uint4*>(weight);
    uint4* ov = reinterpret_cast<uint4*>(out);

    uint4 sr[VPT], xr[VPT], wr[VPT];
#pragma unroll
    for (uint32_t k = 0; k < VPT; ++k) {
        const uint32_t v = threadIdx.x + k * blockDim.x;
        const bool ok = v < nvec;
        xr[k] = ok ? __ldg(xv + v) : make_uint4(0u, 0u, 0u, 0u);
        sr[k] = ok ? rv[v] : make_uint4(0u, 0u, 0u, 0u);  // residual is written: no nc load
    }
    load_vecs<VPT>(wr, wv, nvec);

    float ss = 0.f;
#pragma unroll
    for (uint32_t k = 0; k < VPT; ++k) {
        const uint32_t a[4] = {xr[k].x, xr[k].y, xr[k].z, xr[k].w};
        const uint32_t b[4] = {sr[k].x, sr[k].y, sr[k].z, sr[k].w};
        uint32_t s[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            s[j] = pack_bf16x2(bf16_lo(a[j]) + bf16_lo(b[j]), bf16_hi(a[j]) + bf16_hi(b[j]));
            const float lo = bf16_lo(s[j]), hi = bf16_hi(s[j]);
            ss = fmaf(lo, lo, ss);
            ss = fmaf(hi, hi, ss);
        }
        sr[k] = make_uint4(s[0], s[1], s[2], s[3]);
        const uint32_t v = threadIdx.x + k * blockDim.x;
        if (v < nvec) rv[v] = sr[k];
    }
    store_scaled<VPT>(ov, sr, wr, rms_inverse(ss, red, hidden, eps), nvec);
}

// Any alignment, any hidden.  Pass 1 writes the new residual; pass 2 reads it back
// (each element is re-read by the thread that wrote it).
static __device__ __forceinline__ void row_scalar(const __nv_bfloat16* x, __nv_bfloat16* residual,
                                                  const __nv_bfloat16* weight, __nv_bfloat16* out,
                                                  uint32_t hidden, float eps, float* red) {
    float ss = 0.f;
    for (uint32_t i = threadIdx.x; i < hidden; i += blockDim.x) {
        const __nv_bfloat16 s =
            __float2bfloat16_rn(__bfloat162float(x[i]) + __bfloat162float(residual[i]));
        residual[i] = s;
        const float f = __bfloat162float(s);
        ss = fmaf(f, f, ss);
    }
    store_scaled_scalar(residual, weight, out, hidden, rms_inverse(ss, red, hidden, eps));
}

}  // namespace dflash_residual_rms_norm_detail

__global__ void __launch_bounds__(1024)
dflash_residual_rms_norm_bf16_kernel(const __nv_bfloat16* x, __nv_bfloat16* residual,
                                     const __nv_bfloat16* weight, __nv_bfloat16* out,
                                     uint32_t rows, uint32_t hidden, float eps) {
    kcommon::pdl_enter();
    namespace d = dflash_residual_rms_norm_detail;
    __shared__ float red[32];
    const uint32_t row = blockIdx.x;
    if (row >= rows) return;
    const size_t off = static_cast<size_t>(row) * hidden;

    const bool aligned =
        (hidden & 7u) == 0 && dflash_common::aligned16(x, residual, weight, out);
    const uint32_t nvec = hidden >> 3;
    const uint32_t per = (nvec + blockDim.x - 1) / blockDim.x;
    if (aligned && per <= dflash_common::kMaxVecPerThread) {
        dflash_common::with_vpt(per, [&](auto vpt) {
            d::row_vec<decltype(vpt)::value>(x + off, residual + off, weight, out + off, hidden,
                                             eps, red);
        });
    } else {
        d::row_scalar(x + off, residual + off, weight, out + off, hidden, eps, red);
    }
}
