// Paged KV-cache write, FP8 E4M3 cache:
//
//   key, value       [num_tokens, num_kv_heads, head_dim]                bf16
//   k_cache, v_cache [num_blocks, block_size, num_kv_heads, head_dim]    E4M3 (contiguous)
//   slot_mapping     [num_tokens] int64
//   k_scale, v_scale [1] f32, read from device memory when the kernel starts
//   for each token t with s = slot_mapping[t]:
//     k_cache[s / block_size][s % block_size] = e4m3(key[t] / k_scale);  likewise v
//
// Negative slots (padding) and slots >= num_blocks * block_size are skipped, as in
// reshape_cache_bf16.cu, whose layout this kernel follows: one warp per token, the
// token's slot read once, lane l taking 16-byte vectors (8 bf16) l + 32 * k of the key
// and the value rows, 2 * kVecs = 8 loads in flight per lane (a whole 8 x 128 row pair
// per pass), each vector written as one 8-byte store of 8 E4M3 bytes.  The scales are
// device arrays so that a captured CUDA graph picks up new scales on replay.
//
// The conversion is bit-exact against torch's `(x.float() / scale).to(torch.float8_e4m3fn)`
// with `scale` a one-element CUDA tensor:
//   1. q = the correctly rounded f32 quotient x / scale (torch divides elementwise with
//      IEEE division; with a Python-float scale torch would multiply by the reciprocal
//      instead, which is not what is matched here);
//   2. e4m3(q) with torch's rules: round to nearest even; |q| > 464 (the midpoint between
//      448 and the would-be 480), +-inf and NaN give the NaN byte 0x7f with q's sign bit.
//      torch does not saturate to 448.  For |q| <= 464 the hardware conversion
//      (cvt.rn.satfinite.e4m3x2.f32) rounds identically, subnormals included.
//
// The quotient without a full IEEE division per element: with r = RN(1 / s) (once per
// kernel) and q0 = RN(x * r), two correction steps q_{n+1} = RN(q_n + RN(x - q_n * s) * r)
// (fused multiply-adds).  q0 is within 2 ulps of x / s, so q1 is within 1 ulp (faithful),
// and then q2 is the correctly rounded quotient by Markstein's theorem, provided the
// residuals do not underflow and nothing overflows.  The fast path is used only for
// 2^-20 <= s <= 2^20: then for |x| >= 2^-40 the residuals are normal numbers, and for
// |x| < 2^-40 both the fast quotient and the exact one are below 2^-10 in magnitude, so
// both convert to a zero of x's sign (the fast path ORs x's sign into q, which also fixes
// -0 / s, where the fused steps give +0).  A vector holding any |q| > 464 or NaN (from
// inf / NaN inputs or an overflowing quotient) is redone with __fdiv_rn, which is the
// division torch performs, so NaN signs agree too.  Other scales divide with __fdiv_rn.
//
// Alignment: the vector path needs (num_kv_heads * head_dim) % 8 == 0 (an `applies_if`
// clause), 16-byte aligned key / value and 8-byte aligned caches; other base pointers take
// a scalar path (one warp per token, lane strided) with the exact division.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cstdint>

#include "bf16x2.cuh"

namespace dflash_reshape_cache_fp8_detail {

constexpr uint32_t kVecs = 4;  // 16-byte vectors per lane per row (key and value each) per pass

using dflash_common::bf16_hi;
using dflash_common::bf16_lo;
using dflash_common::ld_stream;  // key and value are read once

// The divisor: the scale, its correctly rounded reciprocal, and whether the fast quotient
// applies (false for NaN, negative, tiny or huge scales).
struct Divisor {
    float s;
    float r;
    bool fast;
};

static __device__ __forceinline__ Divisor divisor_of(float s) {
    return Divisor{s, __frcp_rn(s), s >= 0x1p-20f && s <= 0x1p20f};
}

// x / s correctly rounded, for fast divisors and finite quotients (see the top of the file).
static __device__ __forceinline__ float quotient_fast(float x, const Divisor& d) {
    const float q0 = __fmul_rn(x, d.r);
    const float q1 = __fmaf_rn(__fmaf_rn(-q0, d.s, x), d.r, q0);
    const float q2 = __fmaf_rn(__fmaf_rn(-q1, d.s, x), d.r, q1);
    return __int_as_float(__float_as_int(q2) | (__float_as_int(x) & static_cast<int>(0x80000000u)));
}

// One E4M3 byte of an f32 value with torch's rules (no saturation: beyond 464 is NaN).
static __device__ __forceinline__ uint32_t e4m3_torch(float q) {
    if (fabsf(q) <= 464.0f) {
        return static_cast<uint32_t>(__nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3));
    }
    return 0x7fu | ((__float_as_uint(q) >> 24) & 0x80u);
}

// Two E4M3 bytes (a in the low byte) of values known to lie within [-464, 464].
static __device__ __forceinline__ uint32_t e4m3x2(float a, float b) {
    return static_cast<uint32_t>(__nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3));
}

// 8 bf16 -> 8 E4M3 bytes of value / s through the exact division: the rare path, a rolled loop.
static __device__ __forceinline__ uint2 quant8_exact(const uint4& v, float s) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    uint32_t o[2] = {0u, 0u};
#pragma unroll 1
    for (uint32_t e = 0; e < 8; ++e) {  // element e, in k order
        const uint32_t h = (w[e >> 1] >> (16 * (e & 1))) & 0xffffu;
        o[e >> 2] |= e4m3_torch(__fdiv_rn(__uint_as_float(h << 16), s)) << (8 * (e & 3));
    }
    return make_uint2(o[0], o[1]);
}

// 8 bf16 (a 16-byte vector, k order) -> 8 E4M3 bytes of value / s through the fast quotient.
// `ok` is false when the result is not to be used: the divisor is not a fast one, or some
// quotient is NaN or beyond 464 (the caller then redoes the vector with quant8_exact).
static __device__ __forceinline__ uint2 quant8_fast(const uint4& v, const Divisor& d, bool& ok) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    float q[8];
    bool in_range = d.fast;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        q[2 * j] = quotient_fast(bf16_lo(w[j]), d);
        q[2 * j + 1] = quotient_fast(bf16_hi(w[j]), d);
        in_range &= fabsf(q[2 * j]) <= 464.0f;  // false for NaN
        in_range &= fabsf(q[2 * j + 1]) <= 464.0f;
    }
    ok = in_range;
    // Out-of-range values saturate here; such a vector is rewritten by the caller.
    return make_uint2(e4m3x2(q[0], q[1]) | (e4m3x2(q[2], q[3]) << 16),
                      e4m3x2(q[4], q[5]) | (e4m3x2(q[6], q[7]) << 16));
}

}  // namespace dflash_reshape_cache_fp8_detail

__global__ void __launch_bounds__(256)
dflash_reshape_cache_fp8_kernel(const __nv_bfloat16* key, const __nv_bfloat16* value,
                                __nv_fp8_e4m3* k_cache, __nv_fp8_e4m3* v_cache,
                                const int64_t* slot_mapping, const float* k_scale,
                                const float* v_scale, uint32_t num_tokens, uint32_t num_kv_heads,
                                uint32_t head_dim, uint32_t block_size, uint32_t num_blocks) {
    namespace d = dflash_reshape_cache_fp8_detail;
    const uint64_t row = static_cast<uint64_t>(num_kv_heads) * head_dim;  // elements per token
    const int64_t num_slots = static_cast<int64_t>(num_blocks) * static_cast<int64_t>(block_size);
    const d::Divisor kd = d::divisor_of(__ldg(k_scale));
    const d::Divisor vd = d::divisor_of(__ldg(v_scale));
    uint8_t* kc = reinterpret_cast<uint8_t*>(k_cache);
    uint8_t* vc = reinterpret_cast<uint8_t*>(v_cache);

    if ((blockDim.x & 31u) != 0) {
        // Not whole warps (the spec launches 128 threads): one CTA per token, scalar.
        for (uint64_t t = blockIdx.x; t < num_tokens; t += gridDim.x) {
            const int64_t slot = __ldg(slot_mapping + t);
            if (slot < 0 || slot >= num_slots) continue;
            for (uint64_t j = threadIdx.x; j < row; j += blockDim.x) {
                kc[static_cast<uint64_t>(slot) * row + j] =
                    static_cast<uint8_t>(d::e4m3_torch(__fdiv_rn(__bfloat162float(key[t * row + j]), kd.s)));
                vc[static_cast<uint64_t>(slot) * row + j] =
                    static_cast<uint8_t>(d::e4m3_torch(__fdiv_rn(__bfloat162float(value[t * row + j]), vd.s)));
            }
        }
        return;
    }
    const uint32_t lane = threadIdx.x & 31u;
    const uint32_t warps = blockDim.x >> 5;
    const bool aligned = (row & 7u) == 0 && dflash_common::aligned16(key, value) &&
                         ((reinterpret_cast<uintptr_t>(k_cache) | reinterpret_cast<uintptr_t>(v_cache)) & 7u) == 0;
    const uint64_t nvec = row >> 3;
    const uint64_t warp_stride = static_cast<uint64_t>(gridDim.x) * warps;

    for (uint64_t t = static_cast<uint64_t>(blockIdx.x) * warps + (threadIdx.x >> 5);
         t < num_tokens; t += warp_stride) {
        const int64_t slot = __ldg(slot_mapping + t);  // same address in every lane: one request
        const __nv_bfloat16* ks = key + t * row;
        const __nv_bfloat16* vs = value + t * row;

        if (!aligned) {
            if (slot < 0 || slot >= num_slots) continue;
            uint8_t* kdst = kc + static_cast<uint64_t>(slot) * row;
            uint8_t* vdst = vc + static_cast<uint64_t>(slot) * row;
            for (uint64_t j = lane; j < row; j += 32) {
                kdst[j] = static_cast<uint8_t>(d::e4m3_torch(__fdiv_rn(__bfloat162float(ks[j]), kd.s)));
                vdst[j] = static_cast<uint8_t>(d::e4m3_torch(__fdiv_rn(__bfloat162float(vs[j]), vd.s)));
            }
            continue;
        }

        const uint4* ksv = reinterpret_cast<const uint4*>(ks) + lane;
        const uint4* vsv = reinterpret_cast<const uint4*>(vs) + lane;
        for (uint64_t base = 0; base < nvec; base += 32u * d::kVecs) {
            const uint64_t mine = base + lane;  // this lane's vector k is mine + 32 * k
            uint4 kr[d::kVecs], vr[d::kVecs];
#pragma unroll
            for (uint32_t k = 0; k < d::kVecs; ++k) {
                if (mine + 32u * k < nvec) {
                    kr[k] = d::ld_stream(ksv + base + 32u * k);
                    vr[k] = d::ld_stream(vsv + base + 32u * k);
                }
            }
            if (slot < 0 || slot >= num_slots) break;  // padding / out of the cache: drop the row
            uint2* kdv = reinterpret_cast<uint2*>(kc + static_cast<uint64_t>(slot) * row) + lane;
            uint2* vdv = reinterpret_cast<uint2*>(vc + static_cast<uint64_t>(slot) * row) + lane;
            uint32_t redo = 0;  // bit k: key vector k, bit kVecs + k: value vector k
#pragma unroll
            for (uint32_t k = 0; k < d::kVecs; ++k) {
                if (mine + 32u * k < nvec) {
                    bool ok_k, ok_v;
                    kdv[base + 32u * k] = d::quant8_fast(kr[k], kd, ok_k);
                    vdv[base + 32u * k] = d::quant8_fast(vr[k], vd, ok_v);
                    redo |= (ok_k ? 0u : 1u << k) | (ok_v ? 0u : 1u << (d::kVecs + k));
                }
            }
            // Rare: vectors with NaN / inf / |q| > 464, or a divisor outside the fast range.
            // The same lane rewrites them (program order makes its second store the last).
            while (redo != 0) {
                const uint32_t b = __ffs(redo) - 1;
                redo &= redo - 1;
                const uint32_t k = b % d::kVecs;
                const bool is_v = b >= d::kVecs;
                const uint4 src = __ldg((is_v ? vsv : ksv) + base + 32u * k);
                (is_v ? vdv : kdv)[base + 32u * k] = d::quant8_exact(src, is_v ? vd.s : kd.s);
            }
        }
    }
}
