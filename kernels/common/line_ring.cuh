// Full-line weight loads for the streamed GEMVs (dense_gemv, fp8_gemv_rt2 / rt2_16).
//
// Why. A warp's 16-byte cp.async copies are coalesced per instruction: the L2 gets one request
// for each 128-byte line the instruction touches. When four lanes cover 64 bytes of each of 8
// rows (the mma fragment's natural layout), an instruction makes 8 half-line requests; the
// same bytes as full lines take half the requests, and the L2's request rate, not the bytes,
// is what caps a GEMV's weight stream. Measured on the H200 with cold weights (the load
// structure alone, no arithmetic, against a plain streaming read of the same bytes;
// benchmarks/load_pattern.cu): 64-byte pieces per row per instruction reached 72-94% of the
// read, whole lines 92-100%; two back-to-back instructions each covering one half of the lines
// did no better than 64-byte pieces.
//
// Layout. A warp loads a chunk of R rows x 128 bytes (R a multiple of 4) with R / 4 copies per
// lane: copy l of lane L takes 16-byte unit L % 8 of row 4l + L / 8, a whole line per 8 lanes.
// The mma fragments need other units than the lane copied (a lane uses units t and t + 4 of
// rows g, g + 8, ...), so lanes read each other's copies: after cp.async.wait_group a warp
// barrier (__syncwarp) orders them, and another one keeps a slot from being refilled before
// every lane has read it. A ring is a sequence of copies, C a slot: copy c of every warp, then
// copy c + 1, ...; copy c of warp w occupies 32 consecutive 16-byte units at (c * THREADS +
// 32 w) x 16 bytes, and within them unit u of row r sits at position (r % 4) * 8 +
// (u ^ 4 (r % 2)). The
// swizzle makes the fragment reads conflict-free: a quarter warp reads units t + 4h
// (t = 0..3) of rows g and g + 1, which land in 8 distinct 16-byte bank groups.
#pragma once

#include <cstdint>

namespace kcommon {

struct LineChunk {
    static constexpr uint32_t kLineBytes = 128;
    // Copy l of lane: its row within the chunk, its 16-byte unit within the row's 128 bytes,
    // and its position among the warp's 32 units of copy l.
    static __device__ __forceinline__ uint32_t copy_row(uint32_t l, uint32_t lane) { return 4u * l + (lane >> 3); }
    static __device__ __forceinline__ uint32_t copy_unit(uint32_t lane) { return lane & 7u; }
    static __device__ __forceinline__ uint32_t copy_pos(uint32_t lane) {
        return (lane & 24u) | ((lane & 7u) ^ ((lane & 8u) >> 1));
    }
    // Where unit u of chunk row r was stored: copy r / 4, position (r % 4) * 8 + (u ^ 4 (r % 2)).
    static __device__ __forceinline__ uint32_t read_copy(uint32_t r) { return r >> 2; }
    static __device__ __forceinline__ uint32_t read_pos(uint32_t r, uint32_t u) {
        return ((r & 3u) << 3) | (u ^ ((r & 1u) << 2));
    }

    // Byte offsets in a ring of copies (slot s of C copies a lane holds copies s * C .. s * C +
    // C - 1) for a CTA of THREADS threads: where warp `warp`'s units start (add it to the ring's
    // address once), where copy c of `lane` goes, and where unit u of chunk row r of the chunk
    // whose first copy is c0 is read, both from the warp's start.
    static __device__ __forceinline__ uint32_t warp_offset(uint32_t warp) { return warp * 32u * 16u; }
    template <uint32_t THREADS>
    static __device__ __forceinline__ uint32_t copy_offset(uint32_t c, uint32_t lane) {
        return (c * THREADS + copy_pos(lane)) * 16u;
    }
    template <uint32_t THREADS>
    static __device__ __forceinline__ uint32_t read_offset(uint32_t c0, uint32_t r, uint32_t u) {
        return ((c0 + read_copy(r)) * THREADS + read_pos(r, u)) * 16u;
    }
};

}  // namespace kcommon
