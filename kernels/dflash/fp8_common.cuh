// Helpers shared by the drafter's FP8-weight kernels (E4M3 weight bytes [N, K], one f32 scale
// per weight row): exact E4M3 -> bf16 conversion of packed bytes, the bf16 tensor-core product
// (mma.sync m16n8k16, f32 accumulation) and the 16-byte weight loads. Everything is static and
// inlined, so several kernels of one translation unit may include this header.
//
// E4M3 -> bf16, exact. An E4M3 byte s.eeee.mmm placed into a bf16 as s.0000eeee.mmm0000 (the
// exponent field's low four bits, the mantissa's top three) reads as the true value times
// 2^-120: normal codes become normal bf16 numbers of exponent e - 127 instead of e - 7, and the
// subnormal codes (e = 0) become bf16 subnormals with the same factor. One bf16x2 multiply by
// 2^120 (bf16 arithmetic keeps subnormal inputs) restores the value; every E4M3 value is exact
// in bf16. Four bytes of a 32-bit word (k0, k1, k2, k3 from the low byte up) give two bf16
// pairs: (k0, k2) by a sign-replicating byte permute, a shift and a mask, (k1, k3) by a shift
// and two masks, and a multiply each. Callers either feed these pairs to mma fragments whose
// k slots they permute to match (see fp8_rowtile.cuh), or take the natural (k0, k1), (k2, k3)
// pairs through other permutes (e4m3_01_to_bf16x2, e4m3_23_to_bf16x2).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cstdint>

#include "../common/bf16x2.cuh"
#include "../common/ptx.cuh"

namespace dflash_fp8 {

using kcommon::aligned16;
using kcommon::cp_async_commit;
using kcommon::cp_async_wait;
using kcommon::lds128;
using kcommon::prmt;
using kcommon::smem_addr;
using kcommon::bf16_hi;
using kcommon::bf16_lo;

// 2^120 in bf16 (biased exponent 247), twice.
constexpr uint32_t kBf16x2Pow120 = 0x7b807b80u;

static __device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
    uint32_t d;
    // fma with -0 as the addend: the product's sign and value are kept (x * y + -0 == x * y).
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
    return d;
}

// Two bytes of w (E4M3) -> bf16x2. A byte permute with sign replication (SEL) makes each half
// (sign byte, byte) = s...s.seeeemmm; shifted left by 4, its sign lands on bit 15 and eeeemmm
// on bits 10..4, and one mask clears the rest (bits 14..11 hold copies of the sign, bits 3..0
// the half below's). SEL 0xA280: bytes 0 and 2 (byte 0 in the low half); 0x9180: bytes 0 and 1;
// 0xB3A2: bytes 2 and 3. For bytes 0 and 2 these are the bits of ((w & 0x007f007f) << 4) |
// ((w & 0x00800080) << 8) in one instruction fewer (the GEMVs convert every weight byte: 1-1.5%
// of fp8_gemv_rt2_16's time on the H200).
template <uint32_t SEL>
static __device__ __forceinline__ uint32_t e4m3_pair_to_bf16x2(uint32_t w) {
    const uint32_t v = prmt(w, 0u, SEL);
    return bf16x2_mul((v << 4) & 0x87f087f0u, kBf16x2Pow120);
}
static __device__ __forceinline__ uint32_t e4m3_02_to_bf16x2(uint32_t w) { return e4m3_pair_to_bf16x2<0xA280u>(w); }

// Bytes 1 and 3 of w (E4M3) -> bf16x2 (byte 1 in the low half).
static __device__ __forceinline__ uint32_t e4m3_13_to_bf16x2(uint32_t w) {
    const uint32_t r = ((w & 0x7f007f00u) >> 4) | (w & 0x80008000u);
    return bf16x2_mul(r, kBf16x2Pow120);
}


// Bytes 0 and 1 of w -> bf16x2 (natural order), and bytes 2 and 3.
static __device__ __forceinline__ uint32_t e4m3_01_to_bf16x2(uint32_t w) { return e4m3_pair_to_bf16x2<0x9180u>(w); }
static __device__ __forceinline__ uint32_t e4m3_23_to_bf16x2(uint32_t w) { return e4m3_pair_to_bf16x2<0xB3A2u>(w); }


// One E4M3 byte -> f32, exact.
static __device__ __forceinline__ float e4m3_to_f32(uint8_t b) {
    return bf16_lo(e4m3_02_to_bf16x2(b));
}

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



static __device__ __forceinline__ void sts128(uint32_t addr, const uint4& v) {
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" : : "r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
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
