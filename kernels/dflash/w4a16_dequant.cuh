// NVFP4 weight dequantization in registers, exact, for the W4A16 kernels.
//
// Format: W[n, k] = e2m1(code[n, k]) * e4m3(scale[n, k / 16]) * global, codes packed two per
// byte along k (the low nibble is the even k), E2M1 magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 for
// codes 0..7, bit 3 the sign.
//
// The kernels multiply bf16 weights w'[n, k] = e2m1(code) * e4m3(scale) * 2^-8 on the tensor
// cores and apply global * 2^8 to the f32 sum. Every w' is exact in bf16: an E2M1 value has 2
// significant bits and an E4M3 value 4, so the product has at most 6, and its magnitude lies in
// [2^-18, 2688 * 2^-8], inside bf16's normal range.
//
// Scale byte -> bf16 (e4m3_scaled_bf16): the E4M3 fields shifted into an f16 (sign to bit 15,
// exponent and mantissa to bits 7..13) are the E4M3 value times 2^-8 exactly, subnormals
// included (f16's exponent bias is 15 = 7 + 8, and an E4M3 subnormal m * 2^-9 lands on the f16
// subnormal m * 2^-17). The f16 -> f32 conversion is exact and the f32 -> bf16 truncation is
// exact for 4 significant bits. Bytes 0x7F and 0xFF (E4M3 NaN) give a bf16 NaN.
//
// Codes -> bf16 (e2m1x8): byte permutes (prmt) look the low and the high byte of each
// magnitude's bf16 pattern up in two 8-entry tables, then the sign bit of each code is moved to
// bit 15 of its half. A 32-bit word of 8 codes c0..c7 (c0 in bits 0..3) gives four words
// r[i] = {w(c_i), w(c_{i+4})} (low half, high half): the k pairing (i, i + 4) lets one shift per
// word place both signs. The GEMV feeds these pairs to the MMA directly, with x permuted the
// same way; e2m1x8_natural reorders them to {c0, c1}, {c2, c3}, ... for shared-memory tiles.
// (The GEMV uses the cheaper e2m1x8_raw + e4m3x2_scaled_bf16 below; the tile GEMM keeps the
// table path, where the dequantization is not the bottleneck.)
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>

#include "../common/ptx.cuh"

namespace w4a16 {

using kcommon::prmt;

// bf16 bits of E4M3(b) * 2^-8 (b in 0..255), exact; a NaN for the two NaN bytes.
static __device__ __forceinline__ uint32_t e4m3_scaled_bf16(uint32_t b) {
    const uint32_t h = ((b & 0x80u) << 8) | ((b & 0x7Fu) << 7);
    const float f = __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
    const uint32_t r = __float_as_uint(f) >> 16;
    return (b & 0x7Fu) == 0x7Fu ? 0x7FC0u : r;
}

static __device__ __forceinline__ uint32_t splat16(uint32_t bits) { return bits | (bits << 16); }


// Packed bf16 product a * b (round to nearest even; exact for the products formed here).
static __device__ __forceinline__ uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
    uint32_t r;
    asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

// Low and high bytes of the bf16 patterns of magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6
// (0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0), as prmt's 8-byte pools.
constexpr uint32_t kLoBytes03 = 0xC0800000u, kLoBytes47 = 0xC0804000u;
constexpr uint32_t kHiBytes03 = 0x3F3F3F00u, kHiBytes47 = 0x40404040u;

// Eight codes q (c_j in bits 4j..4j+3) -> r[i] = {e2m1(c_i), e2m1(c_{i+4})}, i = 0..3.
static __device__ __forceinline__ void e2m1x8(uint32_t q, uint32_t (&r)[4]) {
    const uint32_t idx = q & 0x77777777u;
    const uint32_t sel_a = prmt(idx, 0u, 0x4420u);  // nibbles c0, c1, c4, c5
    const uint32_t sel_b = prmt(idx, 0u, 0x4431u);  // nibbles c2, c3, c6, c7
    const uint32_t lo_a = prmt(kLoBytes03, kLoBytes47, sel_a), hi_a = prmt(kHiBytes03, kHiBytes47, sel_a);
    const uint32_t lo_b = prmt(kLoBytes03, kLoBytes47, sel_b), hi_b = prmt(kHiBytes03, kHiBytes47, sel_b);
    // {lo, hi} of c_i in the low half, of c_{i+4} in the high half; then the signs (bit 4i + 3
    // and bit 4i + 19 of q) go to bits 15 and 31: a shift by 12 - 4i.
    r[0] = prmt(lo_a, hi_a, 0x6240u) | ((q << 12) & 0x80008000u);
    r[1] = prmt(lo_a, hi_a, 0x7351u) | ((q << 8) & 0x80008000u);
    r[2] = prmt(lo_b, hi_b, 0x6240u) | ((q << 4) & 0x80008000u);
    r[3] = prmt(lo_b, hi_b, 0x7351u) | (q & 0x80008000u);
}

// GEMV fast conversion (integer multiply + mask, no table), per 32-bit word of 8 codes:
//   r[i] = {c_i, c_{i+4}} as bf16 bit patterns of e2m1(c) * 2^-126, exactly.
// The pairing is e2m1x8's, so x is permuted the same way. Codes i and i + 4 sit 16 bits apart,
// one per half. Masking one code per half (bits 0..3 of the half) and multiplying by
// 0x1040 = 2^6 + 2^12 writes two copies of it, at bits 6..9 and 12..15 (disjoint, no carries,
// nothing crosses into the other half); the mask 0x81C0 per half then keeps the magnitude bits
// e1 e0 m at bits 8..6 (bf16 exponent bits 1..0 and the top mantissa bit) and the sign at bit
// 15. That bf16 has exponent field e and mantissa m / 2: 2^(e - 127) (1 + m / 2) for e >= 1,
// and for e = 0 the bf16 subnormal (m / 2) 2^-126, i.e. e2m1(c) * 2^-126 in both cases (E2M1
// and bf16 subnormals line up). Codes at bits 4..7 of a half use 0x104 (the same copies, the
// input already 4 bits higher); codes 2, 3, 6, 7 come from q >> 8. Per word: one shift, eight
// logic ops, four integer multiplies (on the FMA pipe), versus about eighteen byte permutes
// and logic ops for the table lookup. The 2^126 goes into the scale (e4m3x2_scaled_bf16), and
// the products e2m1 * 2^-126 * (e4m3 * 2^118) are exact and normal in bf16 (the tensor-core
// input w' = e2m1 * e4m3 * 2^-8 as before); bf16 multiplies take subnormal inputs (there is no
// flush-to-zero form of the bf16 arithmetic instructions).
static __device__ __forceinline__ void e2m1x8_raw(uint32_t q, uint32_t (&r)[4]) {
    const uint32_t q8 = q >> 8;
    r[0] = ((q & 0x000F000Fu) * 0x1040u) & 0x81C081C0u;
    r[1] = ((q & 0x00F000F0u) * 0x0104u) & 0x81C081C0u;
    r[2] = ((q8 & 0x000F000Fu) * 0x1040u) & 0x81C081C0u;
    r[3] = ((q8 & 0x00F000F0u) * 0x0104u) & 0x81C081C0u;
}

// Eight x values (one 8-k block, bf16) -> {x0, x4}, {x1, x5}, {x2, x6}, {x3, x7}: the pairing of
// e2m1x8_raw's words, so that x and the weights meet at the same k in each mma slot.
static __device__ __forceinline__ void permute_x(uint32_t (&px)[4], const uint4& u) {
    px[0] = prmt(u.x, u.z, 0x5410u);
    px[1] = prmt(u.x, u.z, 0x7632u);
    px[2] = prmt(u.y, u.w, 0x5410u);
    px[3] = prmt(u.y, u.w, 0x7632u);
}

// Two E4M3 scale bytes (b0 in bits 0..7, b1 in bits 8..15) -> bf16 pairs {s0, s0} and {s1, s1}
// with s_i = E4M3(b_i) * 2^118 (to multiply e2m1x8_raw's words). cvt e4m3x2 -> f16x2 is exact
// (every E4M3 value, subnormals included, is a normal f16; NaN stays NaN), f16 -> f32 exact,
// the multiply by 2^118 exact (at most 448 * 2^118 < 2^127), and the f32 -> bf16 rounding exact
// (4 significant bits). sm_89 and later (cvt.rn.f16x2.e4m3x2).
static __device__ __forceinline__ void e4m3x2_scaled_bf16(uint32_t b01, uint32_t (&s)[2]) {
    const uint32_t h2 = kcommon::e4m3x2_to_f16x2(b01);
    const float f0 = __half2float(__ushort_as_half(static_cast<unsigned short>(h2 & 0xFFFFu))) * 0x1p118f;
    const float f1 = __half2float(__ushort_as_half(static_cast<unsigned short>(h2 >> 16))) * 0x1p118f;
    uint32_t b;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(b) : "f"(f1), "f"(f0));
    s[0] = prmt(b, b, 0x1010u);
    s[1] = prmt(b, b, 0x3232u);
}

// Eight codes -> four words {w(c0), w(c1)}, {w(c2), w(c3)}, ..., each times `scale2` (a bf16
// pair holding the same scale twice).
static __device__ __forceinline__ uint4 e2m1x8_natural(uint32_t q, uint32_t scale2) {
    uint32_t r[4];
    e2m1x8(q, r);
    return make_uint4(mul_bf16x2(prmt(r[0], r[1], 0x5410u), scale2),
                      mul_bf16x2(prmt(r[2], r[3], 0x5410u), scale2),
                      mul_bf16x2(prmt(r[0], r[1], 0x7632u), scale2),
                      mul_bf16x2(prmt(r[2], r[3], 0x7632u), scale2));
}

}  // namespace w4a16
