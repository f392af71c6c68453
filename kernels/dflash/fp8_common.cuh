// Helpers shared by the drafter's FP8-weight kernels (E4M3 weight bytes [N, K], one f32 scale
// per weight row): exact E4M3 -> bf16 conversion of packed bytes, the bf16 tensor-core product
// (mma.sync m16n8k16, f32 accumulation) and the 16-byte weight loads. Everything is static and
// inlined, so several kernels of one translation unit may include this header.
//
// E4M3 -> bf16 conversions: kernels/common/e4m3.cuh.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cstdint>

#include "../common/bf16x2.cuh"
#include "../common/e4m3.cuh"
#include "../common/ptx.cuh"

namespace dflash_fp8 {

using kcommon::aligned16;
using kcommon::cp_async_commit;
using kcommon::cp_async_wait;
using kcommon::lds128;
using kcommon::prmt;
using kcommon::smem_addr;
using kcommon::sts128;
using kcommon::bf16_hi;
using kcommon::bf16_lo;

using kcommon::e4m3_01_to_bf16x2;
using kcommon::e4m3_02_to_bf16x2;
using kcommon::e4m3_13_to_bf16x2;
using kcommon::e4m3_23_to_bf16x2;
using kcommon::e4m3_to_f32;

// d += A(16x16, row) * B(16x8, col), bf16 inputs, f32 accumulation.
static __device__ __forceinline__ void mma_bf16_16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                                      uint32_t a3, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// 16-byte streaming load of weight bytes read once: ld.global.nc with no L1 allocation.
static __device__ __forceinline__ uint4 ld_stream16(const void* p) {
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

// Asynchronous 16-byte copies global -> shared (cp.async, L2 only: no L1 allocation), for the
// weight rings of the GEMVs. `src_bytes` 0 zero-fills the slot (the source is then not read).
// `policy` is an L2 eviction policy (evict_first for weight bytes read once).
static __device__ __forceinline__ uint64_t l2_evict_first_policy() {
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}

static __device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, uint32_t src_bytes,
                                                  uint64_t policy) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;"
                 :
                 : "r"(dst), "l"(src), "r"(src_bytes), "l"(policy)
                 : "memory");
}


// 16 weight bytes starting at p, of which the first `valid` (0..16) exist; the rest read as 0
// (E4M3 +0). `vec`: p is 16-byte aligned and valid is 0 or 16 (one vector load).
static __device__ __forceinline__ uint4 load_w16(const uint8_t* p, uint32_t valid, bool vec) {
    if (vec) return valid ? ld_stream16(p) : make_uint4(0u, 0u, 0u, 0u);
    uint32_t w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (uint32_t b = 0; b < 16; ++b) {
        if (b < valid) w[b >> 2] |= static_cast<uint32_t>(__ldg(p + b)) << (8 * (b & 3));
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// 8 bf16 starting at p, of which the first `valid` (0..8) exist; the rest read as +0.
// `vec`: p is 16-byte aligned and valid is 0 or 8.
static __device__ __forceinline__ uint4 load_x8(const __nv_bfloat16* p, uint32_t valid, bool vec) {
    if (vec) return valid ? __ldg(reinterpret_cast<const uint4*>(p)) : make_uint4(0u, 0u, 0u, 0u);
    const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
    uint32_t w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (uint32_t e = 0; e < 8; ++e) {
        if (e < valid) w[e >> 1] |= static_cast<uint32_t>(__ldg(h + e)) << (16 * (e & 1));
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

static __device__ __forceinline__ uint32_t word(const uint4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}


}  // namespace dflash_fp8
