// Elementwise bf16 add: out[i] = bf16(f32(a[i]) + f32(b[i])) for i < n.
//
// Vector path (all three pointers 16-byte aligned, blockDim.x a multiple of 32): the
// 16-byte vectors (8 bf16 each) are cut into warp chunks of 32 * kVecs vectors; lane
// l of a warp takes vectors l + 32 * k (k < kVecs) of its chunk, so every warp
// instruction moves 512 contiguous bytes and the unrolled offsets are constants.
// A thread issues all 2 * kVecs = 8 loads of 16 bytes (128 bytes in flight) before
// its first add, then kVecs stores.  The launcher sizes the grid as ceil(n / 4096)
// CTAs of 128 threads, one chunk per warp (specs/residual_add.yaml); the grid-stride
// loop over chunks keeps any other grid and block size correct.  Full chunks run
// without bounds checks; only the last, partial chunk checks each vector.  The n % 8
// leftover elements are done by the first threads of the grid.
// Cache policy: inputs are read with ld.global.L1::no_allocate (read once: no L1
// allocation), the output is written with st.global.cs (streamed: evict-first in L2);
// kStreamStores = false gives plain stores.
// Misaligned pointers (which the launcher cannot see) take a scalar grid-stride
// path.  `out` may be the same buffer as `a` or `b` (exact in-place: each element is
// read once, by the thread that then writes it, before it writes it); any other
// overlap is unsupported.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

namespace dflash_residual_add_detail {

constexpr uint32_t kVecs = 4;           // 16-byte vectors per operand per thread per chunk
constexpr bool kStreamStores = true;    // st.global.cs for the output (false: plain st.global)

static __device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
static __device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

static __device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

static __device__ __forceinline__ uint32_t add2(uint32_t a, uint32_t b) {
    return pack_bf16x2(bf16_lo(a) + bf16_lo(b), bf16_hi(a) + bf16_hi(b));
}

static __device__ __forceinline__ uint4 add8(const uint4& a, const uint4& b) {
    return make_uint4(add2(a.x, b.x), add2(a.y, b.y), add2(a.z, b.z), add2(a.w, b.w));
}

// 16-byte streaming load, no L1 allocation.  Coherent (not .nc): `out` may alias an
// input, and a plain load also keeps ptxas from moving loads below the stores.
static __device__ __forceinline__ uint4 ld_stream(const uint4* p) {
    uint4 r;
    asm volatile("ld.global.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

// 16-byte store of the output, streaming (evict-first) unless kStreamStores is false.
static __device__ __forceinline__ void st_stream(uint4* p, const uint4& v) {
    if (kStreamStores) {
        asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};"
                     :
                     : "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                     : "memory");
    } else {
        *p = v;
    }
}

}  // namespace dflash_residual_add_detail

// (256, 4): at most 64 registers.  Without the minimum ptxas keeps ~52 and issues the
// last two of the eight loads only after the first add (a second round trip per chunk);
// with it all eight loads go out first (63 registers: 8 CTAs of 128 threads per SM,
// 128 KiB of loads in flight per SM).  The spec's THREADS must stay <= 256.
__global__ void __launch_bounds__(256, 4)
dflash_residual_add_bf16_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b,
                                __nv_bfloat16* out, uint64_t n) {
    namespace d = dflash_residual_add_detail;
    const uint64_t tid = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const uint64_t nthreads = static_cast<uint64_t>(gridDim.x) * blockDim.x;

    const bool aligned = ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
                           reinterpret_cast<uintptr_t>(out)) & 15u) == 0;
    if (!aligned || (blockDim.x & 31u) != 0) {
        for (uint64_t i = tid; i < n; i += nthreads) {
            out[i] = __float2bfloat16_rn(__bfloat162float(a[i]) + __bfloat162float(b[i]));
        }
        return;
    }

    const uint64_t nvec = n >> 3;
    // Warp w of the CTA covers the 32 * kVecs vectors [base + w * 32 * kVecs, ...) of a
    // step; lane l takes vectors l + 32 * k of them, so the unrolled offsets are
    // compile-time constants (512 bytes apart).
    const uint64_t per_warp = 32u * d::kVecs;
    const uint64_t per_step = per_warp * (blockDim.x >> 5);  // vectors per CTA step
    const uint64_t first = blockIdx.x * per_step + (threadIdx.x >> 5) * per_warp;
    const uint64_t stride = gridDim.x * per_step;
    const uint32_t lane = threadIdx.x & 31u;
    for (uint64_t w0 = first; w0 < nvec; w0 += stride) {
        const uint4* ap = reinterpret_cast<const uint4*>(a) + w0 + lane;
        const uint4* bp = reinterpret_cast<const uint4*>(b) + w0 + lane;
        uint4* op = reinterpret_cast<uint4*>(out) + w0 + lane;
        uint4 ra[d::kVecs], rb[d::kVecs];
        if (w0 + per_warp <= nvec) {
            // Full warp chunk: all loads first (128 bytes in flight per thread), then stores.
#pragma unroll
            for (uint32_t k = 0; k < d::kVecs; ++k) {
                ra[k] = d::ld_stream(ap + 32 * k);
                rb[k] = d::ld_stream(bp + 32 * k);
            }
#pragma unroll
            for (uint32_t k = 0; k < d::kVecs; ++k) d::st_stream(op + 32 * k, d::add8(ra[k], rb[k]));
        } else {
            // The last, partial chunk.
            const uint64_t mine = w0 + lane;
#pragma unroll
            for (uint32_t k = 0; k < d::kVecs; ++k) {
                if (mine + 32u * k < nvec) {
                    ra[k] = d::ld_stream(ap + 32 * k);
                    rb[k] = d::ld_stream(bp + 32 * k);
                }
            }
#pragma unroll
            for (uint32_t k = 0; k < d::kVecs; ++k) {
                if (mine + 32u * k < nvec) d::st_stream(op + 32 * k, d::add8(ra[k], rb[k]));
            }
        }
    }
    const uint64_t rem = n - (nvec << 3);  // 0..7 leftover elements
    if (tid < rem) {
        const uint64_t i = (nvec << 3) + tid;
        out[i] = __float2bfloat16_rn(__bfloat162float(a[i]) + __bfloat162float(b[i]));
    }
}
