// The streamed few-row GEMV shared by fp8_gemv_rt.cu (E4M3 weights with a scale per row),
// dense_gemv.cu (BF16 weights) and w4a16_gemm.cu's rt1 / rt2 (NVFP4 weights):
//
//   out[m, n] = bf16(scale[n] * sum_k x[m, k] * w[n, k])   (no scale for BF16 weights; for NVFP4
//                                                          w carries its group scales, scale is
//                                                          the global one)
//
// x bf16 [rows <= 16, K], f32 accumulation. fp8_gemv_rt.cu's header explains the design (work
// split, streaming, the products, the reduction) and what it measured; in short: clusters of CL
// CTAs split K over 64 weight rows; warp w of a CTA takes the 32 rows of row group w % 2 and the
// 128-byte chunks w / 2 (mod 4) of its rank's K range; each warp streams its chunks (32 rows x
// one 128-byte line each) through a 2-slot cp.async ring in whole lines (kcommon::LineChunk),
// and each chunk's x goes through a shared-memory slot that the two warps of a phase copy once
// (whole lines); the weight is the A operand of mma.sync m16n8k16, x^T the B operand; warp
// partials are added in phase order, ranks' partials in rank order (distributed shared memory).
// CL = 1 is a CTA over all of K (no cluster exchange). With RG = 4 row groups (w4a16_gemv_rt1_128)
// a CTA takes 128 weight rows, warp w row group w % 4 and the chunks w / 4 (mod 2), and each
// phase's x slot serves four warps.
//
// What depends on the weight format (the Format policy):
//   E4M3Rows  1 byte a weight, a chunk covers 128 k; the weight fragments are converted to bf16
//             in registers with a k permutation inside each 16-k step (fp8_gemv_rt.cu); the
//             sum is scaled by scale[n].
//   Bf16Rows  2 bytes a weight, a chunk covers 64 k; lane (g, t) of half h multiplies 16-byte
//             unit u = t + 4h (k = 8u .. 8u + 7 of the chunk) of weight rows g and g + 8 of a
//             16-row tile with the same unit of x row g: words .x / .y feed one mma as the k
//             slots (2t, 2t + 1) / (2t + 8, 2t + 9), words .z / .w a second one (the A and B
//             operands use the same slot assignment, so each mma sums 16 distinct k). No scale.
//   Nvfp4Rows half a byte a weight, a chunk covers 256 k and 16 E4M3 group-scale bytes a row,
//             which the CTA stages once for its K range (the group-scale window, below); codes
//             are dequantized exactly in registers (w4a16_dequant.cuh); x slots hold only the
//             8 * MT rows covered.
// All need 16-byte units that are whole (K % 16 == 0 for E4M3, K % 8 == 0 for BF16, K % 256 ==
// 0 for NVFP4, whose scale rows must be whole units too) and 16-byte aligned arrays for the
// cp.async path; otherwise the byte path fills the same slots with ordinary loads (the same
// arithmetic, not tuned).
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "../common/line_ring.cuh"
#include "../common/pdl.cuh"
#include "fp8_common.cuh"
#include "w4a16_dequant.cuh"

namespace gemv_stream {

using namespace dflash_fp8;
using L = kcommon::LineChunk;

constexpr uint32_t kCluster = 2;                         // CTAs per cluster along K (default)
constexpr uint32_t kWarps = 8;
constexpr uint32_t kThreads = 32 * kWarps;
constexpr uint32_t kRows = 64;                           // weight rows per cluster
constexpr uint32_t kRowGroups = 2;                       // warps w and w ^ 1 share a chunk's rows
constexpr uint32_t kPhases = kWarps / kRowGroups;        // ... and the chunks go round 4 phases
constexpr uint32_t kWarpRows = kRows / kRowGroups;       // 32 weight rows per warp
constexpr uint32_t kTiles = kWarpRows / 16;              // 16-row weight tiles per warp
constexpr uint32_t kChunkBytes = 128;                    // one 128-byte line of a weight row
constexpr uint32_t kCopies = kWarpRows / 4;              // 16-byte copies per lane per chunk
constexpr uint32_t kStages = 2;                          // ring slots: kStages - 1 chunks in flight
constexpr uint32_t kSlotBytes = kThreads * 16;           // one 16-byte copy per thread
constexpr uint32_t kStageBytes = kCopies * kSlotBytes;   // 32 KB: one chunk of every warp
constexpr uint32_t kWRingBytes = kStages * kStageBytes;  // the weight ring
constexpr uint32_t kRedStride = 33;                      // floats per partial row (bank skew)

using kcommon::cluster_rank;
using kcommon::cluster_arrive_relaxed;
using kcommon::cluster_arrive_release;
using kcommon::cluster_wait;
static __device__ __forceinline__ void st_cluster_f32(uint32_t local_addr, uint32_t rank, float v) {
    const uint32_t remote = kcommon::cluster_map(local_addr, rank);
    asm volatile("st.shared::cluster.f32 [%0], %1;" : : "r"(remote), "f"(v) : "memory");
}

// What a CTA does with each landed chunk. The kernels compute (Work::full); the other values
// exist for benchmarks/fp8_gemv_ablation.cu, which times the E4M3 kernel with part of the work
// left out to show where the time goes: loads (weight ring, x loads, reduction and cluster
// exchange kept; the shared-memory words are only folded together), convert (plus the E4M3 ->
// bf16 conversions, no tensor-core product) and mma (the products on the raw weight bytes,
// without the conversions). Only Work::full gives the product.
enum class Work { full, loads, convert, mma };

// E4M3 weights, one f32 scale per weight row.
struct E4M3Rows {
    static constexpr uint32_t kChunkK = 128;  // k per 128-byte chunk of a weight row
    static __device__ __forceinline__ uint32_t row_bytes(uint32_t k) { return k; }
    using Scales = const float*;              // scale[n]
    static __device__ __forceinline__ float out_scale(Scales sc, uint32_t row) { return __ldg(sc + row); }
    static constexpr uint32_t kGroupBytes = 0;  // group-scale bytes a chunk row (Nvfp4Rows has them)
    static constexpr uint32_t kXSlotRows = 16;  // x rows a slot holds at least (Gemv: kXSlotRowsUsed)
    // The first weight chunks are requested before the programmatic-dependent wait: the FP8
    // weights are quantized once, never the output of the kernel just before (fp8_gemv_rt.cu).
    static constexpr bool kWeightsBeforeWait = true;
    static constexpr uint32_t kXRowBytes = 256;  // one x row of a chunk: 128 bf16
    // x slot: [row][16-byte unit u ^ (row % 2)] (the fragment reads below are conflict-free).
    static __device__ __forceinline__ uint32_t x_unit(uint32_t row, uint32_t u) {
        return row * kXRowBytes + ((u ^ (row & 1u)) << 4);
    }
    static __device__ __forceinline__ bool vec_ok(const void* w, const void* x, uint32_t k, Scales) {
        return (k & 15u) == 0 && aligned16(w, x);
    }

    // acc[j] += 16-row tile (rows g, g + 8) x x tile j over one 64-k half of a chunk, with the k
    // permutation of fp8_gemv_rt.cu: w lo16 / hi16 = 16 weight bytes of rows g / g + 8 at
    // 16t + 64h, b[s][j] = x at the same k in the order the shift-only conversion produces.
    template <int MT>
    static __device__ __forceinline__ void b_frags(uint32_t (&b)[4][MT][2], const uint4 (&xv)[MT][2]) {
#pragma unroll
        for (int s = 0; s < 4; ++s) {
#pragma unroll
            for (int j = 0; j < MT; ++j) {
                const uint32_t x01 = word(xv[j][s >> 1], 2 * (s & 1)), x23 = word(xv[j][s >> 1], 2 * (s & 1) + 1);
                b[s][j][0] = prmt(x01, x23, 0x5410u);  // (x[k + 0], x[k + 2])
                b[s][j][1] = prmt(x01, x23, 0x7632u);  // (x[k + 1], x[k + 3])
            }
        }
    }
    // The A fragment of one 16-k step from word s of rows g (lo) and g + 8 (hi): the E4M3 bytes
    // converted to bf16 (CONVERT), or for the ablations' products without the conversions the raw
    // bytes kept finite as bf16 operands (no exponent field of all ones).
    template <bool CONVERT>
    static __device__ __forceinline__ void a_frag(uint32_t (&a)[4], uint32_t lo, uint32_t hi) {
        if constexpr (CONVERT) {
            a[0] = e4m3_02_to_bf16x2(lo);
            a[2] = e4m3_13_to_bf16x2(lo);
            a[1] = e4m3_02_to_bf16x2(hi);
            a[3] = e4m3_13_to_bf16x2(hi);
        } else {
            const uint32_t m = 0x3f3f3f3fu;
            a[0] = lo & m;
            a[1] = hi & m;
            a[2] = (lo >> 2) & m;
            a[3] = (hi >> 2) & m;
        }
    }
    template <int MT>
    static __device__ __forceinline__ void mma_tile(float (&acc)[MT][4], const uint4& lo16, const uint4& hi16,
                                                    const uint32_t (&b)[4][MT][2]) {
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            uint32_t a[4];
            a_frag<true>(a, word(lo16, s), word(hi16, s));
#pragma unroll
            for (int j = 0; j < MT; ++j) mma_bf16_16816(acc[j], a[0], a[1], a[2], a[3], b[s][j][0], b[s][j][1]);
        }
    }
    // The ablations' stand-in for mma_tile (see Work): each keeps the named part of the work and
    // folds its results into the accumulator so that nothing is optimised away.
    template <int MT, Work W>
    static __device__ __forceinline__ void ablated_tile(float (&acc)[MT][4], const uint4& lo16, const uint4& hi16,
                                                        const uint32_t (&b)[4][MT][2]) {
        uint32_t z = 0;
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            const uint32_t lo = word(lo16, s), hi = word(hi16, s);
            if constexpr (W == Work::loads) {
                z ^= lo ^ hi;
            } else {
                uint32_t a[4];
                a_frag<W == Work::convert>(a, lo, hi);
                if constexpr (W == Work::convert) {
                    z ^= a[0] ^ a[2] ^ a[1] ^ a[3];
                } else {
#pragma unroll
                    for (int j = 0; j < MT; ++j) mma_bf16_16816(acc[j], a[0], a[1], a[2], a[3], b[s][j][0], b[s][j][1]);
                }
            }
        }
        if constexpr (W != Work::mma) acc[0][0] += __uint_as_float(z & 0x3fffffffu);
    }

    // Half h of a landed chunk: weight units t + 4h (k = 64h + 16t .. + 15) of rows g and g + 8
    // of each tile; x rows 8j + g at the same k (units 8h + 2t, 8h + 2t + 1 of the row).
    template <int MT, uint32_t TILES, Work W>
    static __device__ __forceinline__ void half(float (&acc)[TILES][MT][4], uint32_t slot, uint32_t xs,
                                                uint32_t g, uint32_t t, uint32_t h, uint32_t, uint32_t) {
        if constexpr (MT > 4) {
            wide_half<MT, TILES, W>(acc, slot, xs, g, t, h);
        } else {
            uint4 xv[MT][2];
#pragma unroll
            for (int j = 0; j < MT; ++j)
#pragma unroll
                for (uint32_t hh = 0; hh < 2; ++hh) xv[j][hh] = lds128(xs + x_unit(8u * j + g, 8u * h + 2u * t + hh));
            uint32_t b[4][MT][2];
            b_frags(b, xv);
#pragma unroll
            for (uint32_t ti = 0; ti < TILES; ++ti) {
                const uint32_t r = 16u * ti + g, u = t + 4u * h;
                const uint4 lo16 = lds128(slot + L::read_offset<kThreads>(0, r, u));
                const uint4 hi16 = lds128(slot + L::read_offset<kThreads>(0, r + 8u, u));
                if constexpr (W == Work::full) {
                    mma_tile(acc[ti], lo16, hi16, b);
                } else {
                    ablated_tile<MT, W>(acc[ti], lo16, hi16, b);
                }
            }
        }
    }

    // More than four x tiles (33-64 rows): their B fragments all at once (64 registers at eight
    // tiles, beside 64 of accumulators) would not fit, so the weight fragments are converted
    // first (each once, as above) and the x tiles are then taken one at a time, each tile's B
    // fragments made from its two x units just before its products. Same products, same k order.
    // (W: the ablations' parts, as ablated_tile.)
    template <int MT, uint32_t TILES, Work W>
    static __device__ __forceinline__ void wide_half(float (&acc)[TILES][MT][4], uint32_t slot, uint32_t xs,
                                                     uint32_t g, uint32_t t, uint32_t h) {
        uint32_t a[TILES][4][4];
#pragma unroll
        for (uint32_t ti = 0; ti < TILES; ++ti) {
            const uint32_t r = 16u * ti + g, u = t + 4u * h;
            const uint4 lo16 = lds128(slot + L::read_offset<kThreads>(0, r, u));
            const uint4 hi16 = lds128(slot + L::read_offset<kThreads>(0, r + 8u, u));
#pragma unroll
            for (int s = 0; s < 4; ++s)
                a_frag<W == Work::full || W == Work::convert>(a[ti][s], word(lo16, s), word(hi16, s));
        }
        uint32_t z = 0;  // the ablations' fold
#pragma unroll
        for (int j = 0; j < MT; ++j) {
            uint4 xv[1][2];
#pragma unroll
            for (uint32_t hh = 0; hh < 2; ++hh) xv[0][hh] = lds128(xs + x_unit(8u * j + g, 8u * h + 2u * t + hh));
            uint32_t b[4][1][2];
            b_frags<1>(b, xv);
#pragma unroll
            for (uint32_t ti = 0; ti < TILES; ++ti)
#pragma unroll
                for (int s = 0; s < 4; ++s) {
                    if constexpr (W == Work::full || W == Work::mma) {
                        mma_bf16_16816(acc[ti][j], a[ti][s][0], a[ti][s][1], a[ti][s][2], a[ti][s][3], b[s][0][0],
                                       b[s][0][1]);
                    } else {
                        z ^= a[ti][s][0] ^ a[ti][s][1] ^ a[ti][s][2] ^ a[ti][s][3] ^ b[s][0][0] ^ b[s][0][1];
                    }
                }
        }
        if constexpr (W == Work::loads || W == Work::convert) acc[0][0][0] += __uint_as_float(z & 0x3fffffffu);
    }
};

// BF16 weights, no scale.
struct Bf16Rows {
    static constexpr uint32_t kChunkK = 64;
    static __device__ __forceinline__ uint32_t row_bytes(uint32_t k) { return 2u * k; }
    using Scales = const float*;  // unused (null)
    static __device__ __forceinline__ float out_scale(Scales, uint32_t) { return 1.f; }
    static constexpr uint32_t kGroupBytes = 0;
    static constexpr uint32_t kXSlotRows = 16;
    // A BF16 weight may be the previous kernel's output (a general linear layer): nothing is
    // read before the programmatic-dependent wait.
    static constexpr bool kWeightsBeforeWait = false;
    static constexpr uint32_t kXRowBytes = 128;  // one x row of a chunk: 64 bf16
    // x slot: [row][16-byte unit u ^ 4 (row % 2)]: a quarter warp reads unit t + 4h of rows g
    // and g + 1, which land in distinct banks.
    static __device__ __forceinline__ uint32_t x_unit(uint32_t row, uint32_t u) {
        return row * kXRowBytes + ((u ^ ((row & 1u) << 2)) << 4);
    }
    static __device__ __forceinline__ bool vec_ok(const void* w, const void* x, uint32_t k, Scales) {
        return (k & 7u) == 0 && aligned16(w, x);
    }

    // Half h of a landed chunk: unit u = t + 4h (k = 8u .. 8u + 7) of weight rows g and g + 8
    // of each tile and of x rows 8j + g; words .x / .y in one mma, .z / .w in another.
    template <int MT, uint32_t TILES, Work W>
    static __device__ __forceinline__ void half(float (&acc)[TILES][MT][4], uint32_t slot, uint32_t xs,
                                                uint32_t g, uint32_t t, uint32_t h, uint32_t, uint32_t) {
        static_assert(W == Work::full, "the ablations are the E4M3 kernel's");
        const uint32_t u = t + 4u * h;
        uint4 xv[MT];
#pragma unroll
        for (int j = 0; j < MT; ++j) xv[j] = lds128(xs + x_unit(8u * j + g, u));
#pragma unroll
        for (uint32_t ti = 0; ti < TILES; ++ti) {
            const uint32_t r = 16u * ti + g;
            const uint4 lo = lds128(slot + L::read_offset<kThreads>(0, r, u));
            const uint4 hi = lds128(slot + L::read_offset<kThreads>(0, r + 8u, u));
#pragma unroll
            for (int j = 0; j < MT; ++j) {
                mma_bf16_16816(acc[ti][j], lo.x, hi.x, lo.y, hi.y, xv[j].x, xv[j].y);
                mma_bf16_16816(acc[ti][j], lo.z, hi.z, lo.w, hi.w, xv[j].z, xv[j].w);
            }
        }
    }
};

// NVFP4 weights (w4a16): E2M1 codes packed two a byte along k (the low nibble the even k), an
// E4M3 scale byte per 16 k of a row ([n, k / 16]) and one f32 global scale:
//   W[n, k] = e2m1(code) * e4m3(scale byte) * global.
// A chunk (128 bytes of a row) covers 256 k and 16 scale bytes; the scales go through the
// group-scale window (Gemv). The codes become exact bf16 w' = W / global * 2^-8 in registers
// (w4a16_dequant.cuh: integer multiply and mask per pair of codes, one bf16 multiply by the
// group's scale), the sum is scaled by global * 2^8.
struct Nvfp4Rows {
    static constexpr uint32_t kChunkK = 256;
    static __device__ __forceinline__ uint32_t row_bytes(uint32_t k) { return k / 2u; }
    struct Scales {
        const uint8_t* group;  // [n, k / 16] E4M3 bytes
        float global;
    };
    static __device__ __forceinline__ float out_scale(Scales sc, uint32_t) { return sc.global * 256.0f; }
    static constexpr uint32_t kGroupK = 16, kGroupBytes = kChunkK / kGroupK;  // 16 scale bytes a chunk
    static __device__ __forceinline__ uint32_t group_row_bytes(uint32_t k) { return k / kGroupK; }
    static constexpr bool kWeightsBeforeWait = true;  // quantized once, never a kernel's output
    static constexpr uint32_t kXRowBytes = 512;       // one x row of a chunk: 256 bf16
    static constexpr uint32_t kXSlotRows = 0;         // slots of 8 * MT rows (8 KB at 16 rows)
    // x slot: [row][16-byte unit]. A lane reads units 4t + 16h + wd (wd = 0..3 for the four
    // words of its code unit) of rows g: the unit's low two bits are xor-ed with bit 3 of the
    // unit and the row's parity, so a quarter warp (rows g, g + 1; t = 0..3) reads 8 distinct
    // 16-byte bank groups.
    static __device__ __forceinline__ uint32_t x_unit(uint32_t row, uint32_t u) {
        return row * kXRowBytes + ((u ^ (((u >> 3) & 1u) | ((row & 1u) << 1))) << 4);
    }
    // Codes 16-byte rows (k % 32 == 0), scale rows whole 16-byte units (k % 256 == 0), all
    // three arrays 16-byte aligned.
    static __device__ __forceinline__ bool vec_ok(const void* w, const void* x, uint32_t k, Scales sc) {
        return (k & 255u) == 0 && aligned16(w, x, sc.group);
    }

    // Half h of a landed chunk: code unit u = t + 4h (k = 32u .. 32u + 31 of the chunk, scale
    // bytes 2u and 2u + 1) of rows g and g + 8 of each tile. Each 32-bit word (8 codes, one
    // scale group) gives four pairs {c_i, c_{i + 4}} (e2m1x8_raw): pairs 0, 1 are the k slots
    // {2t, 2t + 1} and {2t + 8, 2t + 9} of one mma, pairs 2, 3 of a second; x rows 8j + g at the
    // same k, permuted the same way ({x0, x4}, {x1, x5}, ...), so each mma sums 16 distinct k.
    // gs: the chunk's scale bytes of the warp's first row; gstride: bytes a window row.
    template <int MT, uint32_t TILES, Work W>
    static __device__ __forceinline__ void half(float (&acc)[TILES][MT][4], uint32_t slot, uint32_t xs,
                                                uint32_t g, uint32_t t, uint32_t h, uint32_t gs, uint32_t gstride) {
        const uint32_t u = t + 4u * h;
        uint32_t px[MT][4][4];
#pragma unroll
        for (int j = 0; j < MT; ++j)
#pragma unroll
            for (uint32_t wd = 0; wd < 4; ++wd) w4a16::permute_x(px[j][wd], lds128(xs + x_unit(8u * j + g, 4u * u + wd)));
#pragma unroll
        for (uint32_t ti = 0; ti < TILES; ++ti) {
            const uint32_t r = 16u * ti + g;
            const uint4 lo16 = lds128(slot + L::read_offset<kThreads>(0, r, u));
            const uint4 hi16 = lds128(slot + L::read_offset<kThreads>(0, r + 8u, u));
            uint32_t slo[2], shi[2];
            w4a16::e4m3x2_scaled_bf16(kcommon::lds16(gs + r * gstride + 2u * u), slo);
            w4a16::e4m3x2_scaled_bf16(kcommon::lds16(gs + (r + 8u) * gstride + 2u * u), shi);
            uint32_t z = 0;  // the ablations' fold (Work)
#pragma unroll
            for (int wd = 0; wd < 4; ++wd) {
                uint32_t a[4], b[4];
                if constexpr (W == Work::full || W == Work::convert) {
                    w4a16::e2m1x8_raw(word(lo16, wd), a);
                    w4a16::e2m1x8_raw(word(hi16, wd), b);
#pragma unroll
                    for (int i = 0; i < 4; ++i) {
                        a[i] = w4a16::mul_bf16x2(a[i], slo[wd >> 1]);
                        b[i] = w4a16::mul_bf16x2(b[i], shi[wd >> 1]);
                    }
                } else {
                    // raw code words as bf16 operands, kept finite
                    const uint32_t m = 0x3f3f3f3fu;
#pragma unroll
                    for (int i = 0; i < 4; ++i) {
                        a[i] = (word(lo16, wd) >> i) & m;
                        b[i] = (word(hi16, wd) >> i) & m;
                    }
                }
                if constexpr (W == Work::full || W == Work::mma) {
#pragma unroll
                    for (int j = 0; j < MT; ++j) {
                        mma_bf16_16816(acc[ti][j], a[0], b[0], a[1], b[1], px[j][wd][0], px[j][wd][1]);
                        mma_bf16_16816(acc[ti][j], a[2], b[2], a[3], b[3], px[j][wd][2], px[j][wd][3]);
                    }
                } else if constexpr (W == Work::convert) {
                    z ^= a[0] ^ a[1] ^ a[2] ^ a[3] ^ b[0] ^ b[1] ^ b[2] ^ b[3];
                } else {
                    z ^= word(lo16, wd) ^ word(hi16, wd) ^ slo[0] ^ shi[1] ^ px[0][wd][0];
                }
            }
            if constexpr (W == Work::convert || W == Work::loads) acc[ti][0][0] += __uint_as_float(z & 0x3fffffffu);
        }
    }
};

// RG row groups of 32 weight rows (a CTA's tile: 32 * RG rows), the 8 warps going round
// 8 / RG phases of chunks: the default 2 (64 rows, 4 phases, x slots shared by warp pairs) or
// 4 (128 rows, 2 phases, x slots shared by 4 warps: x re-read at half the rate per weight byte).
// ST ring slots (ST - 1 chunks of each warp in flight).
template <class F, int MT, Work W = Work::full, uint32_t CL = kCluster, uint32_t RG = kRowGroups,
          uint32_t ST = kStages>
struct Gemv {
    static_assert(CL == 1 || CL == 2 || CL == 4 || CL == 8, "no cluster, or clusters of 2, 4 or 8 CTAs along K");
    static_assert(RG == 2 || RG == 4, "64 or 128 weight rows a tile");
    static_assert(ST >= 2, "a chunk in flight while one is read");
    // The tile's geometry and ring (these shadow the namespace's defaults, which are RG = 2's
    // and ST = 2's).
    static constexpr uint32_t kStages = ST;
    static constexpr uint32_t kWRingBytes = kStages * kStageBytes;
    static constexpr uint32_t kRowGroups = RG;                // warps w, w + RG, ... share rows
    static constexpr uint32_t kPhases = kWarps / kRowGroups;  // chunk phases
    static constexpr uint32_t kRows = kWarpRows * kRowGroups; // weight rows a tile
    static constexpr bool kGroupScales = F::kGroupBytes > 0;  // the format has group scales (the window below)
    static constexpr uint32_t kChunkK = F::kChunkK;               // k per chunk
    static constexpr uint32_t kXUnits = kChunkK / 8;              // 16-byte units of an x row of a chunk
    static constexpr uint32_t kXRows = 8 * MT;                    // x rows covered (zero beyond rows)
    // A phase's x of one chunk: F::kXSlotRows rows (16: one ring size for 8 and 16 rows), the
    // kXRows the kernel covers where that is more (32-row kernels) or the format says 0.
    static constexpr uint32_t kXSlotRowsUsed = F::kXSlotRows > kXRows ? F::kXSlotRows : kXRows;
    static constexpr uint32_t kXSlotBytes = kXSlotRowsUsed * F::kXRowBytes;
    static constexpr uint32_t kRingBytes = kWRingBytes + kStages * kPhases * kXSlotBytes;
    static constexpr uint32_t kXHalf = kXRows / kRowGroups;       // x rows of a chunk each warp of a phase copies
    static constexpr uint32_t kXCopies = kXHalf * kXUnits / 32;   // ... 16-byte copies per lane
    static_assert(kXRows % kRowGroups == 0 && kXHalf * kXUnits % 32 == 0 && kXRows <= 64 && F::kXRowBytes == 16 * kXUnits,
                  "x slot layout");
    static constexpr uint32_t kOwned = kRows / CL;             // weight rows each rank finalises
    static constexpr uint32_t kOutPerThread = kRows * kXRows / kThreads;
    static_assert(kRows * kXRows % kThreads == 0 && kThreads % kRows == 0, "output mapping");
    static_assert(kWarps * kTiles * MT * 4 * kRedStride * 4 <= kRingBytes, "partials fit the ring");
    static_assert(kWarpRows % 16 == 0 && kChunkBytes == kcommon::LineChunk::kLineBytes, "warp chunk layout");

    // The other ranks' partial sums of this rank's kOwned rows: [rank][row - kOwned * rank][x row]
    // (this rank's own slot unused).
    struct Shared {
        float recv[CL][kOwned][kXRows];
    };

    // Formats with group scales (F::kGroupBytes > 0: a scale byte per F::kGroupK k of a weight
    // row, F::kGroupBytes of them per chunk) stage the scales of the CTA's kRows rows over its
    // rank's chunks in shared memory once, after the ring: row r at r * window_stride, the rank's
    // chunk i at byte i * kGroupBytes, 16 bytes of padding a row (bank spread). Read whole
    // lines, a CTA's scales cost 64 requests beside its 64 x (chunks) weight line requests;
    // per chunk they would double the request count (32 rows, 16 bytes each).
    static __device__ __forceinline__ uint32_t window_stride(uint32_t k) {
        const uint32_t nch = (F::row_bytes(k) + kChunkBytes - 1) / kChunkBytes;
        return ((nch + CL - 1) / CL + 1) * F::kGroupBytes;
    }

    template <bool VEC>
    static __device__ __forceinline__ void run(const __nv_bfloat16* x, const uint8_t* q, typename F::Scales scale,
                                               __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k,
                                               uint32_t tile, uint8_t* ring, Shared& sh) {
        if constexpr (CL > 1) cluster_arrive_relaxed();  // phase 1: "this CTA has started" (waited on before DSMEM use)
        const uint32_t rank = CL > 1 ? cluster_rank() : 0u;
        const uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
        const uint32_t g = lane >> 2, t = lane & 3u;
        const uint32_t rgroup = warp % kRowGroups, phase = warp / kRowGroups;
        const uint32_t kb = F::row_bytes(k);  // bytes of a weight row
        const uint32_t nch = (kb + kChunkBytes - 1) / kChunkBytes;
        const uint32_t per_rank = (nch + CL - 1) / CL;
        const uint32_t cbeg = min(nch, rank * per_rank);
        const uint32_t cend = min(nch, cbeg + per_rank);
        const uint32_t mine = cend > cbeg + phase ? (cend - cbeg - phase + kPhases - 1) / kPhases : 0u;
        const uint32_t row0 = tile * kRows;
        const uint32_t wrow0 = row0 + rgroup * kWarpRows;  // this warp's 32 rows

        // This lane's copies: chunk row copy_row(l) (weight row wrow0 + 4l + lane / 8), unit
        // copy_unit: one base pointer, offsets l * 4 rows.
        const uint32_t unit = L::copy_unit(lane);
        uint32_t rows_ok = 0;
#pragma unroll
        for (uint32_t l = 0; l < kCopies; ++l) rows_ok |= (wrow0 + L::copy_row(l, lane) < n ? 1u : 0u) << l;
        const uint8_t* wbase = q + static_cast<uint64_t>(wrow0 + L::copy_row(0, lane)) * kb + 16u * unit;
        const uint64_t rstride = 4ull * kb;
        // Chunk index of local chunk i; false past this warp's chunks.
        auto chunk_of = [&](uint32_t i, uint32_t& c) {
            c = cbeg + phase + kPhases * i;
            return i < mine;
        };

        float acc[kTiles][MT][4];
#pragma unroll
        for (int i = 0; i < kTiles; ++i)
#pragma unroll
            for (int j = 0; j < MT; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

        {
            const uint64_t policy = VEC ? l2_evict_first_policy() : 0ull;
            // Slot s holds copies s * kCopies .. + kCopies - 1 of this warp's ring (kcommon::LineChunk).
            const uint32_t base = smem_addr(ring) + L::warp_offset(warp);
            // The phase's x slots: [stage][x row][16-byte unit] (F::x_unit's swizzle).
            const uint32_t xbase = smem_addr(ring) + kWRingBytes + phase * kXSlotBytes;
            constexpr uint32_t kXStageBytes = kPhases * kXSlotBytes;
            // The RG warps of a phase (w = RG * phase + row group) share its x slots, so their
            // order is a barrier of those warps (named barrier 1 + phase, 32 * RG threads)
            // rather than of the warp.
            const uint32_t phase_bar = 1u + phase;
            auto phase_sync = [&]() { kcommon::named_barrier_sync<32 * kRowGroups>(phase_bar); };
            // The weight units of chunk i: this lane's kCopies copies (16 bytes each, zero past
            // the end). The byte path (!VEC) fills the same slots synchronously from byte loads.
            auto issue_w = [&](uint32_t i, uint32_t slot) {
                uint32_t c;
                const bool ok = chunk_of(i, c) && c * kChunkBytes + 16u * unit < kb;
                const uint32_t off = c * kChunkBytes;
#pragma unroll
                for (uint32_t l = 0; l < kCopies; ++l) {
                    const bool v = ok && ((rows_ok >> l) & 1u);
                    const uint32_t dst = base + L::copy_offset<kThreads>(slot * kCopies + l, lane);
                    if constexpr (VEC) {
                        cp_async16(dst, v ? wbase + l * rstride + off : q, v ? 16u : 0u, policy);
                    } else {
                        const uint32_t nb = v ? min(16u, kb - off - 16u * unit) : 0u;
                        sts128(dst, load_w16(wbase + l * rstride + off, nb, false));
                    }
                }
            };
            // x rows [kXHalf * rgroup, + kXHalf) of chunk i (8 k a 16-byte unit, kXUnits units a
            // row, whole lines; zero past `rows` and past k): the phase's warps copy the chunk's x once.
            auto issue_x = [&](uint32_t i, uint32_t slot) {
                uint32_t c;
                const bool ok = chunk_of(i, c);
                const uint32_t k0 = c * kChunkK;
#pragma unroll
                for (uint32_t cp = 0; cp < kXCopies; ++cp) {
                    const uint32_t idx = cp * 32u + lane;
                    const uint32_t xr = kXHalf * rgroup + idx / kXUnits, kk = k0 + 8u * (idx % kXUnits);
                    const uint32_t valid = !(ok && xr < rows) ? 0u : kk >= k ? 0u : VEC ? 8u : min(8u, k - kk);
                    const __nv_bfloat16* src = x + static_cast<uint64_t>(xr) * k + kk;
                    const uint32_t dst = xbase + slot * kXStageBytes + F::x_unit(xr, idx % kXUnits);
                    if constexpr (VEC) {
                        kcommon::cp_async16_zfill(dst, valid ? src : x, valid != 0u);
                    } else {
                        sts128(dst, valid ? load_x8(src, valid, false) : make_uint4(0u, 0u, 0u, 0u));
                    }
                }
            };
            // One commit group per chunk, empty-but-committed past the end, so that
            // wait_group<kStages - 1> always means "chunk i has landed".
            // Where the weight is no kernel's output (F::kWeightsBeforeWait), its first chunks
            // stream in while the kernel before this one on the stream finishes (programmatic
            // dependent launch); x is an output. (The first group holds the first weight
            // copies and chunk 0's x.)
            if constexpr (!F::kWeightsBeforeWait) kcommon::pdl_wait();
            // The group-scale window (its own commit group, the first: landed once chunk 0 has).
            const uint32_t wstride = kGroupScales ? window_stride(k) : 0u;
            const uint32_t wbase_s = smem_addr(ring) + kRingBytes;
            if constexpr (kGroupScales) {
                const uint32_t units = wstride / 16u - 1u;  // 16-byte units of a row's window
                const uint32_t gb = F::group_row_bytes(k), gbeg = cbeg * F::kGroupBytes;
                for (uint32_t idx = threadIdx.x; idx < kRows * units; idx += kThreads) {
                    const uint32_t r = idx / units, u = idx % units;
                    const uint32_t off = gbeg + 16u * u;
                    const uint32_t nb = row0 + r < n && off < gb ? min(16u, gb - off) : 0u;
                    const uint8_t* src = scale.group + static_cast<uint64_t>(row0 + r) * gb + off;
                    const uint32_t dst = wbase_s + r * wstride + 16u * u;
                    if constexpr (VEC) {
                        kcommon::cp_async16_zfill(dst, nb ? src : scale.group, nb != 0u);
                    } else {
                        sts128(dst, load_w16(src, nb, false));
                    }
                }
                if constexpr (VEC) cp_async_commit();
            }
#pragma unroll
            for (uint32_t s = 0; s + 1 < kStages; ++s) issue_w(s, s);
            if constexpr (F::kWeightsBeforeWait) kcommon::pdl_wait();
#pragma unroll
            for (uint32_t s = 0; s + 1 < kStages; ++s) {
                issue_x(s, s);
                if constexpr (VEC) cp_async_commit();
            }
            uint32_t s_read = 0, s_write = kStages - 1;
            if constexpr (kGroupScales) {
                // Every thread passes one CTA barrier after its window copies have landed: the
                // warps with chunks at their first chunk (below), the others here.
                if (mine == 0) {
                    if constexpr (VEC) cp_async_wait<0>();
                    __syncthreads();
                }
            }
            for (uint32_t i = 0; i < mine; ++i) {
                phase_sync();  // the phase's warps have read the slots refilled next
                issue_w(i + kStages - 1, s_write);
                issue_x(i + kStages - 1, s_write);
                if constexpr (VEC) {
                    cp_async_commit();
                    cp_async_wait<kStages - 1>();  // this thread's copies of chunk i have landed
                }
                if (kGroupScales && i == 0) {
                    __syncthreads();  // ... and every other lane's (the window's too)
                } else {
                    phase_sync();  // ... and every other lane's of the phase
                }
                const uint32_t slot = base + s_read * kStageBytes;
                const uint32_t xs = xbase + s_read * kXStageBytes;
                uint32_t c;
                chunk_of(i, c);
                // This chunk's group scales of the warp's first row.
                const uint32_t ws = wbase_s + rgroup * kWarpRows * wstride + (c - cbeg) * F::kGroupBytes;
#pragma unroll
                for (uint32_t h = 0; h < 2; ++h) F::template half<MT, kTiles, W>(acc, slot, xs, g, t, h, ws, wstride);
                s_read = s_read + 1 == kStages ? 0u : s_read + 1;
                s_write = s_write + 1 == kStages ? 0u : s_write + 1;
            }
            if constexpr (VEC) cp_async_wait<0>();  // drain the zero-fill groups before the ring is reused
        }
        __syncthreads();  // every thread is done with the ring
        // The weight stream is done: the next kernel's CTAs may take this SM's free room for
        // their own prefetch while the partials are summed (released any earlier, they would
        // sit beside the stream for all of it).
        kcommon::pdl_release();

        // Warp partials: acc[i][j][e] = weight row 32 * rgroup + 16i + g + 8 * (e / 2), x row
        // 8j + 2t + e % 2.
        float* red = reinterpret_cast<float*>(ring);
#pragma unroll
        for (int i = 0; i < kTiles; ++i)
#pragma unroll
            for (int j = 0; j < MT; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    red[(((warp * kTiles + i) * MT + j) * 4 + e) * kRedStride + lane] = acc[i][j][e];
        __syncthreads();

        // Thread -> outputs (r = tid % kRows, x rows m = tid / kRows + (kThreads / kRows) u): the
        // CTA's partial, the row group's warps added in phase order; rows owned by another rank
        // go to its receive buffer.
        const uint32_t r = threadIdx.x % kRows;
        const uint32_t owner = r / kOwned;
        const uint32_t rg = r / kWarpRows, ri = (r % kWarpRows) / 16u, rr = r % 16u;
        const uint32_t src_lane = (rr % 8u) * 4u;
        float part[kOutPerThread];
#pragma unroll
        for (uint32_t u = 0; u < kOutPerThread; ++u) {
            const uint32_t m = threadIdx.x / kRows + u * (kThreads / kRows);
            const uint32_t j = m / 8u, col = m % 8u;
            const uint32_t e = (rr / 8u) * 2u + col % 2u;
            float s = 0.f;
#pragma unroll
            for (uint32_t p = 0; p < kPhases; ++p) {
                const uint32_t w = p * kRowGroups + rg;
                s += red[(((w * kTiles + ri) * MT + j) * 4 + e) * kRedStride + src_lane + col / 2u];
            }
            part[u] = s;
        }
        if constexpr (CL > 1) cluster_wait();  // phase 1: the partner CTA has started, its shared memory exists
        if (owner != rank) {
#pragma unroll
            for (uint32_t u = 0; u < kOutPerThread; ++u) {
                const uint32_t m = threadIdx.x / kRows + u * (kThreads / kRows);
                st_cluster_f32(smem_addr(&sh.recv[rank][r % kOwned][m]), owner, part[u]);
            }
        }
        if constexpr (CL > 1) {
            cluster_arrive_release();  // phase 2: partials delivered
            cluster_wait();
        }
        const uint32_t row = row0 + r;
        if (owner == rank && row < n) {
            const float sc = F::out_scale(scale, row);
#pragma unroll
            for (uint32_t u = 0; u < kOutPerThread; ++u) {
                const uint32_t m = threadIdx.x / kRows + u * (kThreads / kRows);
                if (m < rows) {
                    // The ranks' partials in rank order, p0 + p1 + ... (with two ranks f32
                    // addition's commutativity makes the finalising rank irrelevant; with more,
                    // the fixed order does)
                    float s = rank == 0 ? part[u] : sh.recv[0][r % kOwned][m];
#pragma unroll
                    for (uint32_t j = 1; j < CL; ++j) s += j == rank ? part[u] : sh.recv[j][r % kOwned][m];
                    out[static_cast<uint64_t>(m) * n + row] = __float2bfloat16_rn(s * sc);
                }
            }
        }
    }

    // Weight-row tile `tile` (rows [kRows tile, kRows tile + kRows)) of one product. `scale` is unused
    // (may be null) for unscaled formats.
    static __device__ __forceinline__ void launch(const __nv_bfloat16* x, const void* w, typename F::Scales scale,
                                                  __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k,
                                                  uint32_t tile, uint8_t* ring, Shared& sh) {
        const uint8_t* q = static_cast<const uint8_t*>(w);
        if (F::vec_ok(q, x, k, scale)) {
            run<true>(x, q, scale, out, rows, n, k, tile, ring, sh);
        } else {
            run_bytes(x, q, scale, out, rows, n, k, tile, ring, sh);
        }
    }
    // The byte path out of line, so that it does not add to the vector path's registers.
    static __device__ __noinline__ void run_bytes(const __nv_bfloat16* x, const uint8_t* q, typename F::Scales scale,
                                                  __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k,
                                                  uint32_t tile, uint8_t* ring, Shared& sh) {
        run<false>(x, q, scale, out, rows, n, k, tile, ring, sh);
    }
};

// One kernel for two row ranges: Gemv<F, LO> (LO 8-row x tiles) for rows <= 8 LO, Gemv<F, HI>
// above (the default: one tile up to 8 rows, two up to 16); Gemv<F, HI>'s receive buffer (the
// larger) serves both. The 64-row FP8 GEMVs take six tiles up to 48 rows, eight above.
template <class F, uint32_t CL = kCluster, uint32_t ST = kStages, uint32_t RG = kRowGroups, int LO = 1, int HI = 2>
struct ByRows {
    using G1 = Gemv<F, LO, Work::full, CL, RG, ST>;
    using G2 = Gemv<F, HI, Work::full, CL, RG, ST>;
    using Shared = typename G2::Shared;
    static_assert(sizeof(typename G1::Shared) <= sizeof(Shared), "one receive buffer serves both");
    static_assert(G1::kRingBytes <= G2::kRingBytes, "one ring serves both");
    static __device__ __forceinline__ void launch(const __nv_bfloat16* x, const void* w, typename F::Scales scale,
                                                  __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k,
                                                  uint32_t tile, uint8_t* ring, Shared& sh) {
        if (rows <= 8u * LO) {
            G1::launch(x, w, scale, out, rows, n, k, tile, ring, reinterpret_cast<typename G1::Shared&>(sh));
        } else {
            G2::launch(x, w, scale, out, rows, n, k, tile, ring, sh);
        }
    }
};

// A kernel's body: weight-row tile blockIdx.x / CL of one product with the streamed GEMV R (a
// Gemv or ByRows) in clusters of CL CTAs along K; the ring in the launch's dynamic shared
// memory, R's receive buffer static.
template <class R, uint32_t CL, class Scales>
static __device__ __forceinline__ void tile(const __nv_bfloat16* x, const void* w, Scales scale, __nv_bfloat16* out,
                                            uint32_t rows, uint32_t n, uint32_t k) {
    extern __shared__ __align__(128) uint8_t gemv_stream_ring[];
    __shared__ typename R::Shared sh;
    R::launch(x, w, scale, out, rows, n, k, blockIdx.x / CL, gemv_stream_ring, sh);
}

}  // namespace gemv_stream
