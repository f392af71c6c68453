// fp8_gemm_tma (sm_90a, hopper): the row-scaled FP8 GEMM for many rows, warp-specialized over TMA,
//
//   out[m, n] = bf16(scale[n] * sum_k x[m, k] * q[n, k])
//
// computed transposed: each warpgroup MMA multiplies 64 weight rows (the A operand, E4M3 bytes
// converted exactly to bf16 in registers) by the x tile (the B operand, bf16 read from shared
// memory), so the weight is never written back to shared memory as bf16.
//
// The launcher encodes two tensor maps (the spec's tensor_maps): x_map over x [m, k] (boxes of
// 128 rows x 64 k, 128-byte swizzle: the K-major layout the MMAs read) and q_map over q [n, k]
// (128 rows x 64 bytes, 64-byte swizzle); rows and k past the arrays land as zeros.
//
// Tiles: a CTA of 384 threads computes 128 weight rows x BM x rows (Shape<BM, SLOTS>):
//   fp8_gemm_tma  BM = 256, 5 slots, past 128 rows when such tiles number at least TMA_WIDE_MIN
//                 (each converted weight fragment then serves 256 x rows), else BM = 128, 8 slots;
//                 the kernel tells which from its grid. On the H200 at 2048 rows the wide tiles
//                 took the drafter's products from 0.61-0.64x cuBLAS bf16 to 0.85-0.92x; with K
//                 split four ways to fill the SMs they were slower than 128-row tiles split in two
//                 (hence TMA_WIDE_MIN; measured again with split_k.cuh's store epilogue, at 256
//                 rows: o 27.2 -> 47.7 us, down 54.8 -> 89.9). The spec's 1-D grid takes the
//                 tiles x-first, so CTAs running together share a weight tile (streamed from
//                 memory about once) and re-read x from L2;
//   fp8_gemv_tma  BM = 16, 10 slots, two CTAs an SM: at most 16 rows (m64n16k16 MMAs, x rows past
//                 `rows` land as zeros), the weight streamed once (fp8_gemv_tma.cu).
// Warpgroup 0 produces: one thread issues each 64-k step's TMA copies (x in boxes of at most 128
// rows, then the weight) into a ring of SLOTS slots (kcommon::TmaRing; x BM x 128 bytes, weight
// 8 KiB; a slot is refilled once its last step is released). Warpgroups 1 and 2 consume weight
// rows 0-63 and 64-127: each thread converts its A fragments of the step (rows g and g + 8 of its
// warp's 16, k 2 tq, 2 tq + 1, 2 tq + 8, 2 tq + 9 of each 16: two 2-byte loads per row and 16 k,
// conflict-free under the 64-byte swizzle) and issues the step's four m64nBMk16 MMAs, from two
// register sets: the next step's fragments converted while the step's MMAs run, each warp
// releasing the step before once it has retired (BM = 256: within the 232 registers a consumer
// thread gets from the producer's).
//
// Split K (../common/split_k.cuh): when the spec's `split` says so, the grid's z splits the 64-k
// steps over a cluster along z; each rank stores its f32 pairs into the ring of the rank that owns
// their weight rows, and each sums its rows in rank order, walking down the weight rows (the
// output's contiguous index). No workspace.
//
// Accumulation order (deterministic): k in increasing order, 16 at a time, into one f32
// accumulator per output (per rank when split, then added in rank order); scaled, rounded once.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cstdint>

#include "../common/pdl.cuh"
#include "../common/split_k.cuh"
#include "../common/tma.cuh"
#include "../common/wgmma.cuh"
#include "fp8_common.cuh"

namespace dflash_fp8_tma_detail {

constexpr uint32_t kThreads = 384;
// The 256-row tiles' register exchange (setmaxnreg): the producer warpgroup drops to kProducerRegs
// a thread and the two consumer warpgroups rise to kConsumerRegs, within the CTA's pool of
// kLaunchRegs a thread (__launch_bounds__(384, 1): ptxas gives a kernel that exchanges registers
// the bound's count, 168); all return to kLaunchRegs for the epilogue.
constexpr uint32_t kLaunchRegs = 168, kProducerRegs = 40, kConsumerRegs = 232;
static_assert(kProducerRegs + 2 * kConsumerRegs == 3 * kLaunchRegs, "the exchange keeps the CTA's pool");
constexpr uint32_t kBN = 128, kBK = 64;  // weight rows per tile, k per step
constexpr uint32_t kWBytes = kBN * kBK;  // 8 KiB of weight bytes a step
// The most CTAs K is split over (a cluster along z): fp8_gemv_tma's specs split up to 8 ways.
constexpr uint32_t kSplitMax = 8;

// The shape of one kernel: BM x rows per tile, SLOTS ring slots (its dynamic shared memory, the
// spec's TMA_SMEM / GEMV_TMA_SMEM: the ring, then 2 * SLOTS mbarriers).
template <uint32_t BM, uint32_t SLOTS>
struct Shape {
    static constexpr uint32_t kBM = BM, kSlots = SLOTS;
    static constexpr uint32_t kXBoxRows = BM < 128 ? BM : 128;  // the x map's box (the spec's)
    static constexpr uint32_t kXBoxes = BM / kXBoxRows;
    static constexpr uint32_t kXBytes = BM * kBK * 2;  // x (bf16) a step
    static constexpr uint32_t kSlotBytes = kXBytes + kWBytes;
    static constexpr uint32_t kBarAt = SLOTS * kSlotBytes;  // the ring, then its mbarriers
    static constexpr uint32_t kPartStride = BM + 4;
    static_assert(kSlotBytes % 1024 == 0, "1024-byte aligned slots (the swizzle patterns)");
    static_assert(kcommon::split_k_smem_bytes(kBN, kPartStride, kSplitMax) <= kBarAt, "split K's slots fit the ring");
};
using GemmShape = Shape<128, 8>;  // fp8_gemm_tma
using WideShape = Shape<256, 5>;  // fp8_gemm_tma past 128 rows, with TMA_WIDE_MIN tiles or more
using GemvShape = Shape<16, 10>;  // fp8_gemv_tma

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

static __device__ __forceinline__ uint32_t lds_u16(uint32_t addr) {
    uint16_t v;
    asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(addr));
    return v;
}

// This thread's bytes in a weight tile (128 rows of 64 bytes, 64-byte swizzle: 16-byte chunk c of
// row r at c ^ ((r / 2) % 4)): k 2 tq and 2 tq + 1 of slice j (k 16 j .. 16 j + 15) of its row
// `row` at at[j], k 2 tq + 8 and 2 tq + 9 eight bytes on; row + 8 (the same swizzle) 512 bytes
// on. Computed once: each step then reads at a slot base plus these offsets.
struct FragOffsets {
    uint32_t at[4];
};
static __device__ __forceinline__ FragOffsets frag_offsets(uint32_t row, uint32_t tq) {
    FragOffsets o;
#pragma unroll
    for (uint32_t j = 0; j < 4; ++j) {
        o.at[j] = row * 64u + ((j ^ ((row >> 1) & 3u)) << 4) + 2u * tq;
        asm volatile("" : "+r"(o.at[j]));  // kept in a register, not recomputed every step
    }
    return o;
}

// This thread's A fragments of one step from the weight tile at `w`: a[j] for k 16 j .. 16 j + 15.
static __device__ __forceinline__ void convert(uint32_t (&a)[4][4], uint32_t w, const FragOffsets& off) {
    using namespace dflash_fp8;
#pragma unroll
    for (uint32_t j = 0; j < 4; ++j) {
#pragma unroll
        for (uint32_t h = 0; h < 2; ++h) {
            const uint32_t at = w + off.at[j] + 512u * h;
            const uint32_t b = prmt(lds_u16(at), lds_u16(at + 8u), 0x5140u);  // (k, k + 8, k + 1, k + 9)
            a[j][h] = e4m3_02_to_bf16x2(b);       // row r, k 2 tq and 2 tq + 1
            a[j][2u + h] = e4m3_13_to_bf16x2(b);  // row r, k 2 tq + 8 and 2 tq + 9
        }
    }
}

// Keeps a step's A registers alive (and in place) until the MMAs reading them have retired.
static __device__ __forceinline__ void hold(const uint32_t (&a)[4][4]) {
#pragma unroll
    for (uint32_t j = 0; j < 4; ++j) {
        asm volatile("" ::"r"(a[j][0]), "r"(a[j][1]), "r"(a[j][2]), "r"(a[j][3]) : "memory");
    }
}

template <uint32_t BM>
static __device__ __forceinline__ void mma_k16(float (&acc)[BM / 8][4], const uint32_t (&a)[4], uint64_t db) {
    if constexpr (BM == 256) {
        kcommon::wgmma_m64n256k16_rs(acc, a, db);
    } else if constexpr (BM == 128) {
        kcommon::wgmma_m64n128k16_rs(acc, a, db);
    } else {
        static_assert(BM == 16, "x tiles of 256, 128 or 16 rows");
        kcommon::wgmma_m64n16k16_rs(acc, a, db);
    }
}

template <typename S>
static __device__ __forceinline__ void run(const CUtensorMap* x_map, const CUtensorMap* q_map, const float* scale,
                                           __nv_bfloat16* out, uint32_t M, uint32_t N, uint32_t K, uint32_t m0,
                                           uint32_t n0, uint8_t* smem) {
    constexpr uint32_t kBM = S::kBM, kSlots = S::kSlots, kXBytes = S::kXBytes, kSlotBytes = S::kSlotBytes;
    // The first x row of box b of the tile: its own rows, kept inside x (kcommon::inside_box_row);
    // the epilogue stores only the box's own rows.
    auto box_row = [&](uint32_t b) { return kcommon::inside_box_row(m0 + b * S::kXBoxRows, M, S::kXBoxRows); };
    const uint32_t base = kcommon::smem_addr(smem);
    const uint32_t tid = threadIdx.x, wg = tid >> 7, lane = tid & 31u;
    const kcommon::TmaRing<kSlots> ring(base + S::kBarAt, 8);  // released by the consumers' 8 warps
    const kcommon::KRange range = kcommon::split_k_range((K + kBK - 1) / kBK);
    const uint32_t steps = range.last - range.first;

    float acc[kBM / 8][4];
#pragma unroll
    for (uint32_t j = 0; j < kBM / 8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

    // This thread's weight row in the tile (rows g of its warp's 16; g + 8 in convert) and k pair.
    const uint32_t row = (wg - 1u) * 64u + ((tid >> 5) & 3u) * 16u + (lane >> 2), tq = lane & 3u;
    const FragOffsets off = frag_offsets(row, tq);
    if (tid != 0) kcommon::pdl_wait();  // thread 0 waits after its first weight boxes
    // A step's MMAs: the four k16 slices of the slot's x box times this thread's fragments.
    auto issue = [&](uint32_t slot, const uint32_t (&frags)[4][4]) {
        const uint64_t desc = kcommon::smem_desc_sw128(slot, 16, 1024);
        kcommon::wgmma_fence();
#pragma unroll
        for (uint32_t kk = 0; kk < kBK / 16; ++kk) mma_k16<kBM>(acc, frags[kk], kcommon::desc_advance(desc, kk * 32u));
        kcommon::wgmma_commit();
    };
    if (wg == 0) {
        if constexpr (kBM == 256) kcommon::setmaxnreg_dec<kProducerRegs>();
        if (tid == 0) {
            // The first kSlots steps' weight boxes go out before the wait for the previous kernel
            // (programmatic dependent launch: the weight is no kernel's output), their x boxes
            // after it; each step's barrier counts both.
            const uint32_t early = min(steps, kSlots);
            for (uint32_t u = 0; u < early; ++u) {
                const uint32_t slot = base + u * kSlotBytes, k0 = (range.first + u) * kBK;
                kcommon::tma_load_2d(slot + kXBytes, q_map, k0, n0, ring.acquire(u, kSlotBytes));
            }
            kcommon::pdl_wait();
            for (uint32_t u = 0; u < steps; ++u) {
                const uint32_t slot = base + (u % kSlots) * kSlotBytes, k0 = (range.first + u) * kBK;
                const uint32_t bar = u < early ? ring.land + 8u * u : ring.acquire(u, kSlotBytes);
#pragma unroll
                for (uint32_t b = 0; b < S::kXBoxes; ++b) {
                    kcommon::tma_load_2d(slot + b * (kXBytes / S::kXBoxes), x_map, k0, box_row(b), bar);
                }
                if (u >= early) kcommon::tma_load_2d(slot + kXBytes, q_map, k0, n0, bar);
            }
        }
        if constexpr (kBM == 256) kcommon::setmaxnreg_inc<kLaunchRegs>();
    } else {
        // Two register sets: step t's MMAs from a[t % 2], then (step t - 1 retired) step t + 1's
        // fragments converted into the other set while they run. The 256-row tiles' 128
        // accumulators a thread fit beside them once the producer has given up registers
        // (without the exchange ptxas serializes every MMA of the kernel); all return to
        // kLaunchRegs after.
        if constexpr (kBM == 256) kcommon::setmaxnreg_inc<kConsumerRegs>();
        if (steps > 0) {
            uint32_t a[2][4][4];
            ring.wait(0);
            convert(a[0], base + kXBytes, off);
            auto step = [&](uint32_t t, uint32_t (&cur)[4][4], uint32_t (&next)[4][4]) {
                issue(base + (t % kSlots) * kSlotBytes, cur);
                kcommon::wgmma_wait<1>();
                hold(next);  // step t - 1's registers: retired now
                if (t > 0 && lane == 0) ring.release(t - 1u);
                if (t + 1u < steps) {
                    ring.wait(t + 1u);
                    convert(next, base + ((t + 1u) % kSlots) * kSlotBytes + kXBytes, off);
                }
            };
            for (uint32_t t = 0; t < steps; t += 2) {
                step(t, a[0], a[1]);
                if (t + 1u < steps) step(t + 1u, a[1], a[0]);
            }
            kcommon::wgmma_retire(acc);
            hold(a[0]);
            hold(a[1]);
        }
        kcommon::pdl_release();  // the first consumer done with its products lets the next kernel in
        if constexpr (kBM == 256) kcommon::setmaxnreg_dec<kLaunchRegs>();
    }

    // Epilogue, in the transposed tile [weight row][x row]: each consumer thread's pairs (weight
    // rows `row` and row + 8, x rows 8 j + 2 tq and + 1); the producer has none.
    auto pairs = [&](auto&& f) {
        if (wg == 0) return;
#pragma unroll
        for (uint32_t j = 0; j < kBM / 8; ++j) {
            f(row, j * 8u + 2u * tq, acc[j][0], acc[j][1]);
            f(row + 8u, j * 8u + 2u * tq, acc[j][2], acc[j][3]);
        }
    };
    // Column c of the tile is x row box_row(b) + c % kXBoxRows of box b = c / kXBoxRows, stored
    // when it is one of the box's own rows (from m0 + b * kXBoxRows on; below M).
    auto store2 = [&](uint32_t r, uint32_t c, float v0, float v1) {
        const uint32_t b = c / S::kXBoxRows, own = m0 + b * S::kXBoxRows;
        const uint32_t n = n0 + r, m = box_row(b) + c % S::kXBoxRows;
        if (n >= N || m >= M) return;
        const float s = __ldg(scale + n);
        if (m >= own) out[static_cast<uint64_t>(m) * N + n] = __float2bfloat16_rn(v0 * s);
        if (m + 1u < M && m + 1u >= own) out[static_cast<uint64_t>(m + 1u) * N + n] = __float2bfloat16_rn(v1 * s);
    };
    kcommon::split_k_epilogue<kBM, S::kPartStride, kThreads, true, kSplitMax>(pairs, store2, smem, min(kBN, N - n0),
                                                                                kBM);
}

// A kernel's body: its tile of the spec's 1-D grid (x-first), K split along z.
template <typename S>
static __device__ __forceinline__ void grid_tile(const CUtensorMap* x_map, const CUtensorMap* q_map, const float* scale,
                                                 __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k,
                                                 uint8_t* smem) {
    const uint32_t mt = (rows + S::kBM - 1u) / S::kBM;
    const uint32_t mb = blockIdx.x % mt, nb = blockIdx.x / mt;
    run<S>(x_map, q_map, scale, out, rows, n, k, mb * S::kBM, nb * kBN, smem);
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

}  // namespace dflash_fp8_tma_detail

// The kernels' signature: the spec's args, then its tensor maps.
#define DFLASH_FP8_TMA_ARGS                                                                              \
    const __nv_bfloat16 *x, const __nv_fp8_e4m3 *q, const float *scale, __nv_bfloat16 *out, uint32_t rows, \
        uint32_t n, uint32_t k, const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap q_map

namespace dflash_fp8_tma_detail {

// A kernel's body: a tile of the grid, of shape S or, when the grid was sized for them, WIDE
// (fp8_gemm_tma: ceil(rows / 128) x-tiles would not cover the rows). x and q are read through
// the maps only. Without sm_90a features it is empty, never launched (the specs build these
// kernels for hopper alone).
template <typename S, typename WIDE = S>
static __device__ __forceinline__ void kernel_body(const __nv_bfloat16* x, const __nv_fp8_e4m3* q, const float* scale,
                                                   __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k,
                                                   const CUtensorMap& x_map, const CUtensorMap& q_map, uint8_t* smem) {
    (void)x, (void)q;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    const uint32_t mt = gridDim.x / ((n + kBN - 1u) / kBN);
    if (WIDE::kBM != S::kBM && mt * S::kBM < rows) {
        grid_tile<WIDE>(&x_map, &q_map, scale, out, rows, n, k, smem);
    } else {
        grid_tile<S>(&x_map, &q_map, scale, out, rows, n, k, smem);
    }
#else
    (void)scale, (void)out, (void)rows, (void)n, (void)k, (void)x_map, (void)q_map, (void)smem;
#endif
}

}  // namespace dflash_fp8_tma_detail
