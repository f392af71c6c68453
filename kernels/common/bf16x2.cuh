// Packed bf16 pairs (and the f16 pack), shared by every kernel family: a 32-bit word holds two
// bf16, the first (lower index) in its low half.
#pragma once

#include <cstdint>

namespace kcommon {

// The low / high bf16 of a packed pair, widened exactly to f32.
static __device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
static __device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

// Two f32 -> one packed bf16x2 word (round to nearest even), `lo` in the low half.
static __device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// The same for an f16 pair (the drafter attention's f16 products over an FP8 cache).
static __device__ __forceinline__ uint32_t pack_f16x2(float lo, float hi) {
    uint32_t r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

}  // namespace kcommon
