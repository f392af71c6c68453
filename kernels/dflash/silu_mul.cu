// SiLU-and-multiply (SwiGLU activation), bf16 in / bf16 out, f32 math:
//
//   input [rows, 2 * inter] = [gate | up]
//   out[r, j] = bf16( silu(f32 gate[r, j]) * f32 up[r, j] ),  silu(g) = g / (1 + exp(-g))
//
// Work is flattened over the rows * inter / 8 output vectors (8 bf16 = 16 bytes).
// Each thread handles two output vectors per grid-stride step (v and v + blockDim.x),
// i.e. four 16-byte loads (gate, up) in flight and two 16-byte stores.  The
// launcher sizes the grid as ceil(rows * inter / 8 / 512) CTAs of 256 threads.
//
// Alignment: the vector path needs inter % 8 == 0 (an `applies_if` clause) and
// 16-byte aligned input / out; misaligned base pointers (invisible to the
// launcher) take a scalar grid-stride path.  exp is __expf (a few f32 ulps),
// far below one bf16 ulp.  `out` must not overlap `input`.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "../common/pdl.cuh"
#include "bf16x2.cuh"

namespace dflash_silu_mul_detail {

using namespace dflash_common;

static __device__ __forceinline__ float silu_mul1(float g, float u) {
    return g / (1.0f + __expf(-g)) * u;
}

static __device__ __forceinline__ uint32_t silu_mul2(uint32_t g, uint32_t u) {
    return pack_bf16x2(silu_mul1(bf16_lo(g), bf16_lo(u)), silu_mul1(bf16_hi(g), bf16_hi(u)));
}

static __device__ __forceinline__ uint4 silu_mul8(const uint4& g, const uint4& u) {
    return make_uint4(silu_mul2(g.x, u.x), silu_mul2(g.y, u.y), silu_mul2(g.z, u.z),
                      silu_mul2(g.w, u.w));
}

// Output vector v -> (row, column vector); 32-bit division when everything fits.
static __device__ __forceinline__ void split(uint64_t v, uint32_t nvec, bool small, uint64_t& row,
                                             uint32_t& col) {
    if (small) {
        const uint32_t r = static_cast<uint32_t>(v) / nvec;
        row = r;
        col = static_cast<uint32_t>(v) - r * nvec;
    } else {
        row = v / nvec;
        col = static_cast<uint32_t>(v - row * nvec);
    }
}

}  // namespace dflash_silu_mul_detail

__global__ void __launch_bounds__(256)
dflash_silu_mul_bf16_kernel(const __nv_bfloat16* input, __nv_bfloat16* out, uint32_t rows,
                            uint32_t inter) {
    kcommon::pdl_enter();
    namespace d = dflash_silu_mul_detail;
    const uint64_t tid = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const uint64_t nthreads = static_cast<uint64_t>(gridDim.x) * blockDim.x;

    const bool aligned = (inter & 7u) == 0 && dflash_common::aligned16(input, out);
    if (!aligned) {
        const uint64_t total = static_cast<uint64_t>(rows) * inter;
        for (uint64_t i = tid; i < total; i += nthreads) {
            const uint64_t r = i / inter, c = i - r * inter;
            const __nv_bfloat16* in_row = input + r * 2ull * inter;
            out[i] = __float2bfloat16_rn(
                d::silu_mul1(__bfloat162float(in_row[c]), __bfloat162float(in_row[inter + c])));
        }
        return;
    }

    const uint32_t nvec = inter >> 3;  // output vectors per row
    const uint64_t total = static_cast<uint64_t>(rows) * nvec;
    const bool small = total <= 0xffffffffull;
    const uint4* in_v = reinterpret_cast<const uint4*>(input);
    uint4* out_v = reinterpret_cast<uint4*>(out);
    const uint64_t step = 2ull * nthreads;
    for (uint64_t base = 2ull * blockIdx.x * blockDim.x; base < total; base += step) {
        const uint64_t v0 = base + threadIdx.x;
        const uint64_t v1 = v0 + blockDim.x;
        const bool ok0 = v0 < total, ok1 = v1 < total;
        uint4 g0 = make_uint4(0u, 0u, 0u, 0u), u0 = g0, g1 = g0, u1 = g0;
        if (ok0) {
            uint64_t r; uint32_t c;
            d::split(v0, nvec, small, r, c);
            const uint4* p = in_v + r * 2ull * nvec + c;
            g0 = __ldg(p);
            u0 = __ldg(p + nvec);
        }
        if (ok1) {
            uint64_t r; uint32_t c;
            d::split(v1, nvec, small, r, c);
            const uint4* p = in_v + r * 2ull * nvec + c;
            g1 = __ldg(p);
            u1 = __ldg(p + nvec);
        }
        if (ok0) out_v[v0] = d::silu_mul8(g0, u0);
        if (ok1) out_v[v1] = d::silu_mul8(g1, u1);
    }
}
