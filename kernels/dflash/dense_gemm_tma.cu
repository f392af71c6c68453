// Dense bf16 GEMM for many rows on sm_90a (hopper), warp-specialized over TMA:
// out[r, n] = bf16( sum_k f32(x[r, k]) * f32(w[n, k]) ), w [n, k] as nn.Linear.
//
// The launcher encodes two tensor maps (the spec's tensor_maps): x_map over x [m, k], a box of
// 128 rows x 64 k, and w_map over w [n, k], a box of 64 rows x 64 k, both with the 128-byte
// swizzle, so a copy lands as the K-major layout warpgroup MMAs read; rows and k past the arrays
// land as zeros (any m, n; k a multiple of 8, whose rows are then whole 16-byte units).
//
// Tiles: a CTA of 384 threads computes 128 x BN outputs, BN one of 128, 192 and 256, the one
// whose tiles (and K split, below) take the fewest waves of TMA_CTAS CTAs, weighed by the width's
// cost per column (the spec's let `bn`); the spec's 1-D grid is ceil(m / 128) x ceil(n / BN)
// tiles, taken m-first, so CTAs running together share the weight tile (streamed from memory
// about once) and re-read x from L2. The kernel tells BN from the grid: the narrowest of the
// three whose ceil(n / BN) is the grid's tile count along n (any such width covers n). With m of
// at least 128, the last row tile covers the last 128 rows (its x box inside x) and stores only
// the rows past the tile before.
//
// Roles. Warpgroup 0 produces: one thread issues the step's TMA copies (x: 16 KiB; w: BN / 64
// boxes of 8 KiB) into a ring of 192 KiB: 6 slots of 128-wide tiles, 4 of wider ones
// (kcommon::TmaRing: a slot is refilled once its last step is released). Warpgroups 1 and 2
// consume rows 0-63 and 64-127: per 64-k step, four m64nBNk16 MMAs from shared memory, one step
// kept in flight (wgmma.wait_group 1), each warp releasing the step before once it has retired.
//
// Split K (../common/split_k.cuh): when the tiles are fewer than TMA_CTAS (one CTA per SM), the
// grid's z splits the 64-k steps over a cluster along z; each rank stores its f32 pairs into the
// ring of the rank that owns their rows, and each sums its rows' tiles in rank order. No workspace.
//
// Accumulation order (deterministic): k in increasing order, 16 at a time, into one f32
// accumulator per output (per rank when split, then added in rank order); rounded once. Unsplit,
// these are dense_gemm_pipelined's products in its order: the same bits.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cstdint>

#include "../common/split_k.cuh"
#include "../common/tma.cuh"
#include "../common/wgmma.cuh"
#include "dense_mma.cuh"

namespace dense_gemm_tma_detail {

constexpr uint32_t kThreads = 384;
constexpr uint32_t kBM = 128, kBK = 64, kWBoxRows = 64;
constexpr uint32_t kXBoxBytes = kBM * kBK * 2;        // 16 KiB: the x box
constexpr uint32_t kWBoxBytes = kWBoxRows * kBK * 2;  // 8 KiB: one w box
constexpr uint32_t kBarAt = 4 * (kXBoxBytes + 4 * kWBoxBytes);  // 192 KiB of ring, then its mbarriers (TMA_SMEM)
// Bytes of one step (x box and BN weight rows) and the ring's slots: 6 of 128-wide tiles, 4 of
// 192- or 256-wide ones.
template <uint32_t BN>
constexpr uint32_t kSlotBytes = kXBoxBytes + BN / kWBoxRows * kWBoxBytes;
template <uint32_t BN>
constexpr uint32_t kSlots = kBarAt / kSlotBytes<BN>;
static_assert(kSlots<128> == 6 && kSlots<192> == 4 && kSlots<256> == 4, "ring shape (TMA_SMEM)");
// Split K over at most kSplitMax ranks (the spec's TMA_SPLIT_MAX): the slots of the widest tile
// (256 columns) fit the ring.
constexpr uint32_t kSplitMax = 2;
static_assert(kcommon::split_k_smem_bytes(kBM, 256 + 4, kSplitMax) <= kBarAt, "split K's slots fit the ring");

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

template <uint32_t BN>
static __device__ __forceinline__ void mma_k16(float (&acc)[BN / 8][4], uint64_t da, uint64_t db) {
    if constexpr (BN == 256) {
        kcommon::wgmma_m64n256k16_ss(acc, da, db);
    } else if constexpr (BN == 192) {
        kcommon::wgmma_m64n192k16_ss(acc, da, db);
    } else {
        kcommon::wgmma_m64n128k16_ss(acc, da, db);
    }
}

// The CTA's tile: output rows [m0, m0 + 128) of which it stores those >= `first` (below M),
// columns [n0, n0 + BN).
template <uint32_t BN>
static __device__ __forceinline__ void run(const CUtensorMap* x_map, const CUtensorMap* w_map, __nv_bfloat16* out,
                                           uint32_t M, uint32_t N, uint32_t K, uint32_t m0, uint32_t first,
                                           uint32_t n0, uint8_t* smem) {
    constexpr uint32_t kStep = kSlotBytes<BN>, kRing = kSlots<BN>;
    const uint32_t base = kcommon::smem_addr(smem);
    const uint32_t tid = threadIdx.x, wg = tid >> 7;
    const kcommon::TmaRing<kRing> ring(base + kBarAt, 8);  // released by the consumers' 8 warps
    const kcommon::KRange range = kcommon::split_k_range((K + kBK - 1) / kBK);
    const uint32_t steps = range.last - range.first;

    float acc[BN / 8][4];
#pragma unroll
    for (uint32_t j = 0; j < BN / 8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

    if (wg == 0) {
        if (tid == 0) {
            for (uint32_t u = 0; u < steps; ++u) {
                const uint32_t slot = base + (u % kRing) * kStep, k0 = (range.first + u) * kBK;
                const uint32_t bar = ring.acquire(u, kStep);
                kcommon::tma_load_2d(slot, x_map, k0, m0, bar);
#pragma unroll
                for (uint32_t b = 0; b < BN / kWBoxRows; ++b) {
                    kcommon::tma_load_2d(slot + kXBoxBytes + b * kWBoxBytes, w_map, k0, n0 + b * kWBoxRows, bar);
                }
            }
        }
    } else {
        const uint32_t arows = (wg - 1u) * 64u * 128u;  // this warpgroup's 64 rows of the x box
        for (uint32_t t = 0; t < steps; ++t) {
            const uint32_t slot = base + (t % kRing) * kStep;
            ring.wait(t);
            kcommon::wgmma_fence();
#pragma unroll
            for (uint32_t kk = 0; kk < kBK / 16; ++kk) {
                mma_k16<BN>(acc, kcommon::smem_desc_sw128(slot + arows + kk * 32u, 16, 1024),
                            kcommon::smem_desc_sw128(slot + kXBoxBytes + kk * 32u, 16, 1024));
            }
            kcommon::wgmma_commit();
            kcommon::wgmma_wait<1>();
            if (t > 0 && (tid & 31u) == 0) ring.release(t - 1u);
        }
        kcommon::wgmma_retire(acc);
    }

    // Epilogue: each consumer thread's pairs (row g and g + 8 of its warp's 16, columns 2 tq, 2 tq + 1
    // of each 8); the producer has none.
    const uint32_t lane = tid & 31u, r0 = ((tid >> 5) - 4u) * 16u + (lane >> 2), c0 = 2u * (lane & 3u);
    auto pairs = [&](auto&& f) {
        if (wg == 0) return;
#pragma unroll
        for (uint32_t j = 0; j < BN / 8; ++j) {
            f(r0, j * 8u + c0, acc[j][0], acc[j][1]);
            f(r0 + 8u, j * 8u + c0, acc[j][2], acc[j][3]);
        }
    };
    auto store2 = [&](uint32_t r, uint32_t c, float v0, float v1) {
        if (m0 + r >= first) dense_mma::store_pair(out, m0 + r, n0 + c, M, N, v0, v1, 1.0f);
    };
    kcommon::split_k_epilogue<BN, BN + 4u, kThreads, false, kSplitMax>(pairs, store2, smem, min(kBM, M - m0), N - n0);
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

}  // namespace dense_gemm_tma_detail

__global__ void __launch_bounds__(384, 1)
dense_gemm_tma_bf16_kernel(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* out, uint32_t m,
                           uint32_t n, uint32_t k, const __grid_constant__ CUtensorMap x_map,
                           const __grid_constant__ CUtensorMap w_map) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    namespace d = dense_gemm_tma_detail;
    extern __shared__ __align__(1024) uint8_t dense_tma_smem[];
    (void)x;
    (void)w;
    const uint32_t mt = (m + d::kBM - 1u) / d::kBM, nt = gridDim.x / mt;
    const uint32_t mb = blockIdx.x % mt, nb = blockIdx.x / mt;
    // The x box inside x (kcommon::inside_box_row: the last row tile of m >= 128 rows ends at row
    // m; on the H200 m = 129 ran o's 4096 x 4096 in 31.8 us against 20.9 so).
    const uint32_t first = mb * d::kBM, m0 = kcommon::inside_box_row(first, m, d::kBM);
    if ((n + 127u) / 128u == nt) {
        d::run<128>(&x_map, &w_map, out, m, n, k, m0, first, nb * 128u, dense_tma_smem);
    } else if ((n + 191u) / 192u == nt) {
        d::run<192>(&x_map, &w_map, out, m, n, k, m0, first, nb * 192u, dense_tma_smem);
    } else {
        d::run<256>(&x_map, &w_map, out, m, n, k, m0, first, nb * 256u, dense_tma_smem);
    }
#else
    (void)x, (void)w, (void)out, (void)m, (void)n, (void)k, (void)x_map, (void)w_map;
#endif
}
