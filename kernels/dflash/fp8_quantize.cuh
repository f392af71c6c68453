// BF16 -> FP8 E4M3 weight quantization with one f32 scale per row:
//
//   scale[n] = max_k |w[n, k]| / 448   (1 for an all-zero row)
//   q[n, k]  = e4m3_rne(w[n, k] / scale[n])
//
// bit-exact against torch's `(w.float() / scale[:, None]).to(torch.float8_e4m3fn)`: the quotient
// is the correctly rounded f32 quotient (as torch's elementwise division) and the conversion is
// the hardware's round-to-nearest-even E4M3 conversion (cvt ... satfinite; |w / scale| <= 448 up
// to one f32 rounding, which rounds to 448, so saturation never changes a finite result).
//
// The quotient: a full IEEE division per element (div.rn.f32) costs more than the memory traffic
// it serves, so rows whose scale s lies in [2^-80, inf) use r = RN(1/s), q0 = RN(w * r) and one
// correction step, q = RN(q0 + RN(w - q0 * s) * r) with fused multiply-adds. With r correctly
// rounded and q0 within one ulp of w / s, q is the correctly rounded quotient whenever the
// residual does not underflow (Markstein's theorem); checked exhaustively on the CPU for every
// pair of bf16 w and bf16 row maximum with s >= 2^-80: bit-identical f32 quotients wherever
// either is >= 2^-13, and below that both convert to a zero E4M3 of w's sign (the sign of a zero
// w is put back by hand: -0 - 0 rounds to +0). Other rows (a tiny maximum, whose residuals
// underflow; an infinite or NaN maximum) divide with __fdiv_rn.
//
// One CTA of 256 threads per row. The row is read once as 16-byte vectors (8 bf16) held in
// registers (up to 4 per thread: K <= 8192), the maximum |w| is an integer maximum of the bf16
// bit patterns with the sign cleared (monotonic in the magnitude for non-NaN values) reduced by
// warp shuffles and shared memory, and each vector is written as 8 E4M3 bytes (one 8-byte
// store). Longer rows read their vectors a second time (from L2) after the maximum; rows whose
// K is not a multiple of 8, or misaligned pointers, take a scalar path of the same arithmetic.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cstdint>

#include "fp8_common.cuh"

namespace dflash_fp8_quant_detail {

constexpr uint32_t kThreads = 256;
constexpr uint32_t kMaxVpt = 4;

static __device__ __forceinline__ uint32_t abs_max_bits(uint32_t acc, uint32_t v) {
    return max(acc, max(v & 0x7fffu, (v >> 16) & 0x7fffu));
}

static __device__ __forceinline__ uint32_t vec_abs_max(uint32_t acc, const uint4& v) {
    acc = abs_max_bits(acc, v.x);
    acc = abs_max_bits(acc, v.y);
    acc = abs_max_bits(acc, v.z);
    return abs_max_bits(acc, v.w);
}

// Max over the CTA; every thread gets the result. `red` holds one value per warp.
static __device__ __forceinline__ uint32_t block_max(uint32_t v, uint32_t* red) {
    v = __reduce_max_sync(0xffffffffu, v);
    if ((threadIdx.x & 31u) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    uint32_t m = 0;
#pragma unroll
    for (uint32_t i = 0; i < kThreads / 32; ++i) m = max(m, red[i]);
    return m;
}

// The divisor of a row: the scale, its correctly rounded reciprocal, and whether the
// reciprocal-and-correction quotient is exact for it (see the top of this file).
struct Divisor {
    float s;
    float r;
    bool fast;
};

static __device__ __forceinline__ Divisor divisor_of(float s) {
    return Divisor{s, __frcp_rn(s), s >= 0x1p-80f && s < __int_as_float(0x7f800000)};
}

template <bool kFast>
static __device__ __forceinline__ float quotient(float w, const Divisor& d) {
    if (!kFast) return __fdiv_rn(w, d.s);
    const float q0 = __fmul_rn(w, d.r);
    const float e = __fmaf_rn(-q0, d.s, w);
    return __int_as_float(__float_as_int(__fmaf_rn(e, d.r, q0)) | (__float_as_int(w) & 0x80000000));
}

static __device__ __forceinline__ float quotient(float w, const Divisor& d) {
    return d.fast ? quotient<true>(w, d) : quotient<false>(w, d);
}

template <bool kFast>
static __device__ __forceinline__ uint32_t quant2(uint32_t v, const Divisor& d) {
    const float2 f = make_float2(quotient<kFast>(dflash_fp8::bf16_lo(v), d), quotient<kFast>(dflash_fp8::bf16_hi(v), d));
    return static_cast<uint32_t>(__nv_cvt_float2_to_fp8x2(f, __NV_SATFINITE, __NV_E4M3));
}

template <bool kFast>
static __device__ __forceinline__ uint2 quant8(const uint4& v, const Divisor& d) {
    return make_uint2(quant2<kFast>(v.x, d) | (quant2<kFast>(v.y, d) << 16),
                      quant2<kFast>(v.z, d) | (quant2<kFast>(v.w, d) << 16));
}

// 8 bf16 -> 8 E4M3 bytes (k order kept); the row's choice of quotient is made once per vector.
static __device__ __forceinline__ uint2 quant8(const uint4& v, const Divisor& d) {
    return d.fast ? quant8<true>(v, d) : quant8<false>(v, d);
}

static __device__ __forceinline__ float scale_of(uint32_t amax_bits) {
    return amax_bits == 0 ? 1.0f : __fdiv_rn(__uint_as_float(amax_bits << 16), 448.0f);
}

}  // namespace dflash_fp8_quant_detail

__global__ void __launch_bounds__(256)
dflash_quantize_bf16_to_fp8_kernel(const __nv_bfloat16* w, __nv_fp8_e4m3* q, float* scale, uint32_t n,
                                   uint32_t k) {
    namespace d = dflash_fp8_quant_detail;
    __shared__ uint32_t red[d::kThreads / 32];
    const uint64_t row = blockIdx.x;
    const __nv_bfloat16* wr = w + row * k;
    uint8_t* qr = reinterpret_cast<uint8_t*>(q) + row * k;

    const bool vec = (k & 7u) == 0 && dflash_fp8::aligned16(w) && (reinterpret_cast<uintptr_t>(q) & 7u) == 0;
    if (!vec) {
        const uint16_t* h = reinterpret_cast<const uint16_t*>(wr);
        uint32_t m = 0;
        for (uint32_t i = threadIdx.x; i < k; i += d::kThreads) m = max(m, __ldg(h + i) & 0x7fffu);
        const d::Divisor dv = d::divisor_of(d::scale_of(d::block_max(m, red)));
        if (threadIdx.x == 0) scale[row] = dv.s;
        for (uint32_t i = threadIdx.x; i < k; i += d::kThreads) {
            const float f = d::quotient(__uint_as_float(static_cast<uint32_t>(__ldg(h + i)) << 16), dv);
            qr[i] = static_cast<uint8_t>(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3));
        }
        return;
    }

    const uint32_t nvec = k >> 3;
    const uint4* wv = reinterpret_cast<const uint4*>(wr);
    uint2* qv = reinterpret_cast<uint2*>(qr);
    if (nvec <= d::kMaxVpt * d::kThreads) {
        uint4 r[d::kMaxVpt];
        uint32_t m = 0;
#pragma unroll
        for (uint32_t j = 0; j < d::kMaxVpt; ++j) {
            const uint32_t v = threadIdx.x + j * d::kThreads;
            r[j] = v < nvec ? dflash_fp8::ld_stream16(wv + v) : make_uint4(0u, 0u, 0u, 0u);
            m = d::vec_abs_max(m, r[j]);
        }
        const d::Divisor dv = d::divisor_of(d::scale_of(d::block_max(m, red)));
        if (threadIdx.x == 0) scale[row] = dv.s;
#pragma unroll
        for (uint32_t j = 0; j < d::kMaxVpt; ++j) {
            const uint32_t v = threadIdx.x + j * d::kThreads;
            if (v < nvec) qv[v] = d::quant8(r[j], dv);
        }
        return;
    }
    uint32_t m = 0;
    for (uint32_t v = threadIdx.x; v < nvec; v += d::kThreads) m = d::vec_abs_max(m, __ldg(wv + v));
    const d::Divisor dv = d::divisor_of(d::scale_of(d::block_max(m, red)));
    if (threadIdx.x == 0) scale[row] = dv.s;
    for (uint32_t v = threadIdx.x; v < nvec; v += d::kThreads) qv[v] = d::quant8(__ldg(wv + v), dv);
}
