// E4M3 -> bf16, exact, in integer and bf16 arithmetic: no conversion instruction (sm_90 runs those
// at 16 a clock per SM, a quarter of its integer rate), which matters wherever every byte of a
// weight or an FP8 KV cache is converted. An E4M3 byte s.eeee.mmm placed into a bf16 as
// s.0000eeee.mmm0000 (the exponent field's low four bits, the mantissa's top three) reads as the
// true value times 2^-120: normal codes become normal bf16 numbers of exponent e - 127 instead of
// e - 7, and the subnormal codes (e = 0) become bf16 subnormals with the same factor. One bf16x2
// multiply by 2^120 (bf16 arithmetic keeps subnormal inputs) restores the value; every E4M3 value
// is exact in bf16. Four bytes of a 32-bit word (k0, k1, k2, k3 from the low byte up) give two
// bf16 pairs: (k0, k2) by a sign-replicating byte permute, a shift and a mask, (k1, k3) by a shift
// and two masks, and a multiply each. Callers either feed these pairs to mma fragments whose k
// slots they permute to match (see fp8_rowtile.cuh), or take the natural (k0, k1), (k2, k3) pairs
// through other permutes (e4m3_01_to_bf16x2, e4m3_23_to_bf16x2).
#pragma once

#include <cstdint>

#include "bf16x2.cuh"
#include "ptx.cuh"

namespace kcommon {

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


// Two E4M3 bytes (the first in bits 0..7 of b01, the second in bits 8..15) -> f16x2 (the first
// in the low half), exactly: every E4M3 value, subnormals included, is a normal f16 and NaN stays
// NaN. One conversion instruction a pair (sm_89 and later), at sm_90's conversion rate.
static __device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t b01) {
    uint32_t h2;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(static_cast<unsigned short>(b01)));
    return h2;
}

// Four E4M3 bytes of w -> four f16 as two pairs (bytes 0, 1 and 2, 3), exactly. The halves of w
// go to the conversions as 16-bit registers (a shift of w for the high one costs an instruction
// a word: ptxas reads the upper half in place only from such a split).
static __device__ __forceinline__ uint2 e4m3x4_to_f16x4(uint32_t w) {
    uint32_t lo, hi;
    asm("{\n.reg .b16 a, b;\nmov.b32 {a, b}, %2;\n"
        "cvt.rn.f16x2.e4m3x2 %0, a;\ncvt.rn.f16x2.e4m3x2 %1, b;\n}"
        : "=r"(lo), "=r"(hi)
        : "r"(w));
    return make_uint2(lo, hi);
}

// One E4M3 byte -> f32, exact.
static __device__ __forceinline__ float e4m3_to_f32(uint8_t b) {
    return bf16_lo(e4m3_02_to_bf16x2(b));
}

}  // namespace kcommon
