// RMS norm over the last dimension of a bf16 matrix.
//
//   out[r, :] = bf16( x[r, :] * rsqrt(mean_f32(x[r, :]^2) + eps) * weight )
//
// One CTA per row.  The launcher picks the block size from `hidden` (see
// specs/rms_norm.yaml): blockDim.x = 32 * ceil(hidden / 1024), capped at 1024,
// so every thread owns at most 4 uint4 vectors (32 bf16) of the row for any
// hidden <= 32768.  Those vectors stay in registers between the f32 sum of
// squares (warp shuffles, then one shared-memory step across warps) and the
// normalised write, so x is read from memory exactly once.
//
// Alignment: the vector path needs hidden % 8 == 0 (an `applies_if` clause of
// the spec) and 16-byte aligned x / weight / out.  The base-pointer alignment is
// not visible to the launcher, so the kernel checks it and falls back to a
// (slower, still correct) scalar path; the same path serves hidden > 32768.
//
// `out` may be the same buffer as `x` (exact in-place); any other overlap is
// unsupported.  NaN / Inf in x propagate as IEEE arithmetic says.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "../common/pdl.cuh"
#include "bf16x2.cuh"

namespace dflash_rms_norm_detail {

using namespace dflash_common;

template <uint32_t VPT>
static __device__ __forceinline__ void row_vec(const __nv_bfloat16* x,
                                               const __nv_bfloat16* weight,
                                               __nv_bfloat16* out, uint32_t hidden,
                                               float eps, float* red) {
    const uint32_t nvec = hidden >> 3;
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    const uint4* wv = reinterpret_cast<const uint4*>(weight);
    uint4* ov = reinterpret_cast<uint4*>(out);

    uint4 xr[VPT], wr[VPT];
    load_vecs<VPT>(xr, xv, nvec);
    load_vecs<VPT>(wr, wv, nvec);

    float ss = 0.f;
#pragma unroll
    for (uint32_t k = 0; k < VPT; ++k) {
        const uint32_t w[4] = {xr[k].x, xr[k].y, xr[k].z, xr[k].w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const float a = bf16_lo(w[j]), b = bf16_hi(w[j]);
            ss = fmaf(a, a, ss);
            ss = fmaf(b, b, ss);
        }
    }
    store_scaled<VPT>(ov, xr, wr, rms_inverse(ss, red, hidden, eps), nvec);
}

// Any alignment, any hidden: two passes over the row (the second one mostly hits L1/L2).
static __device__ __forceinline__ void row_scalar(const __nv_bfloat16* x,
                                                  const __nv_bfloat16* weight,
                                                  __nv_bfloat16* out, uint32_t hidden, float eps,
                                                  float* red) {
    float ss = 0.f;
    for (uint32_t i = threadIdx.x; i < hidden; i += blockDim.x) {
        const float a = __bfloat162float(x[i]);
        ss = fmaf(a, a, ss);
    }
    store_scaled_scalar(x, weight, out, hidden, rms_inverse(ss, red, hidden, eps));
}

}  // namespace dflash_rms_norm_detail

__global__ void __launch_bounds__(1024)
dflash_rms_norm_bf16_kernel(const __nv_bfloat16* x, const __nv_bfloat16* weight,
                            __nv_bfloat16* out, uint32_t rows, uint32_t hidden, float eps) {
    kcommon::pdl_enter();
    namespace d = dflash_rms_norm_detail;
    __shared__ float red[32];
    const uint32_t row = blockIdx.x;
    if (row >= rows) return;
    const size_t off = static_cast<size_t>(row) * hidden;
    const __nv_bfloat16* xr = x + off;
    __nv_bfloat16* orow = out + off;

    const bool aligned = (hidden & 7u) == 0 && dflash_common::aligned16(x, weight, out);
    const uint32_t nvec = hidden >> 3;
    const uint32_t per = (nvec + blockDim.x - 1) / blockDim.x;
    if (aligned && per <= dflash_common::kMaxVecPerThread) {
        dflash_common::with_vpt(per, [&](auto vpt) {
            d::row_vec<decltype(vpt)::value>(xr, weight, orow, hidden, eps, red);
        });
    } else {
        d::row_scalar(xr, weight, orow, hidden, eps, red);
    }
}
