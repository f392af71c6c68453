// Dense bf16 GEMM for many rows: multi-stage cp.async pipeline, ldmatrix, mma.sync m16n8k16
// (f32 accumulation); out[r, n] = bf16( sum_k f32(x[r, k]) * f32(w[n, k]) ), w [n, k] as
// nn.Linear. sm_121a (gb10) runs the mma.sync path; sm_90a (hopper) issues the same products
// as warpgroup MMAs (run_wgmma below; the same bits).
//
// Tiles: a CTA of 8 warps (2 along m x 4 along n) computes BM x 128 outputs, BM = 128 (warp
// tile 64 x 32: 4 x 4 MMAs per 16 k) or BM = 64 (warp tile 32 x 32) when the 128-row tiling
// would give fewer than 256 CTAs (small m: more, smaller CTAs fill the GPU). The grid is always
// ceil(n / 128) x ceil(m / 64), its CTAs mapped to tiles m-first (see dispatch); with BM = 128
// the CTAs of odd 64-row tiles exit at once. The choice does not change any output bit: both
// tilings run the same MMAs in the same k order.
//
// Pipeline: k advances 32 at a time through STAGES = 4 shared-memory stages, each holding the
// BM x 32 x tile and the 128 x 32 weight tile (16 KiB for BM = 128; 64 KiB in all, dynamic
// shared memory). Stage s + 3 is fetched with cp.async (16 bytes per copy, zero-filled past m,
// n or k) while stage s is multiplied; cp.async.wait_group keeps at most 2 groups in flight
// behind the one consumed. Shared rows are 64 bytes (four 16-byte chunks); chunk c of row r is
// stored at chunk c ^ ((r / 2) % 4), so the 8 rows one ldmatrix matrix reads hit 8 distinct
// 16-byte bank groups and the cp.async writes of a warp cover whole 512-byte spans.
//
// Vector path: k % 8 == 0 and x, w 16-byte aligned (cp.async); otherwise the same pipeline is
// filled with element loads and plain shared stores (any k and alignment).
//
// Split K (../common/split_k.cuh): when the 64-row tiles are few (the spec's grid z, launched
// as clusters along z; always with BM = 64, whose 64 x 132 f32 partial tile fits the stages), each
// CTA of a cluster runs its share of the k tiles and the partial tiles are summed in rank order
// over distributed shared memory, then rounded once. No workspace.
//
// Accumulation order (deterministic): k tiles in increasing order, 16 k per MMA, into one f32
// accumulator per output (per rank when K is split, the ranks' sums then added in rank order);
// rounded once to bf16.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "../common/split_k.cuh"
#include "../common/wgmma.cuh"
#include "dense_mma.cuh"

namespace dense_gemm_pipelined_detail {

using namespace dense_mma;

constexpr int kThreads = 256;
constexpr int kTileN = 128;
constexpr int kTileK = 32;
constexpr int kStages = 4;
constexpr int kMaxTileM = 128;
constexpr uint32_t kRowBytes = kTileK * 2;                                      // 64
constexpr uint32_t kStageBytes = (kMaxTileM + kTileN) * kRowBytes;              // 16 KiB
constexpr uint32_t kSmemBytes = kStages * kStageBytes;                          // 64 KiB
constexpr uint32_t kBigTileCtas = 256;  // use 128-row tiles from this many 128 x 128 tiles
constexpr uint32_t kPartStride = kTileN + 4;  // floats a row of the split-K partial tile
static_assert(kcommon::split_k_smem_bytes(64, kPartStride, 4) <= kSmemBytes, "split K's slots fit the stages");

static __device__ __forceinline__ uint32_t swz(uint32_t row, uint32_t chunk) {
    return row * kRowBytes + ((chunk ^ ((row >> 1) & 3u)) << 4);
}

// Rows r0 .. r0 + ROWS - 1 of src ([rows, K]) at k0 .. k0 + 31 into the swizzled tile at dst;
// with l2pf the copies ask the L2 for whole 256-byte blocks (see k_loop).
template <int ROWS, bool VEC>
static __device__ __forceinline__ void load_rows(uint32_t dst, uint8_t* dst_ptr,
                                                 const __nv_bfloat16* src, uint32_t rows,
                                                 uint32_t K, uint32_t r0, uint32_t k0, bool l2pf = false) {
    constexpr int kPer = ROWS * 4 / kThreads;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
        const uint32_t id = threadIdx.x + kThreads * i;
        const uint32_t row = id >> 2, c = id & 3u;
        const uint32_t r = r0 + row, k = k0 + c * 8u;
        const bool ok = r < rows && k < K;
        const __nv_bfloat16* p = src + (ok ? static_cast<uint64_t>(r) * K + k : 0ull);
        if (VEC) {
            if (l2pf) {
                cp_async16_zfill<true>(dst + swz(row, c), p, ok);
            } else {
                cp_async16_zfill(dst + swz(row, c), p, ok);
            }
        } else {
            const uint4 v = ok ? load8<false, false>(p, static_cast<int64_t>(K) - k)
                               : make_uint4(0u, 0u, 0u, 0u);
            *reinterpret_cast<uint4*>(dst_ptr + swz(row, c)) = v;
        }
    }
}

// The k loop both product paths share: this CTA's k tiles (all of them, or its share when K is
// split) through the kStages-deep cp.async pipeline;
// stage(a, b) multiplies the BM x 32 x tile at shared address a with the 128 x 32 weight tile at
// b. With ASYNC_PROXY (wgmma reads the stages) each thread's stage writes are fenced for the
// async proxy before the barrier that publishes them; stage() must be done reading its tiles
// when it returns (the next barrier hands them to the loads).
template <int BM, bool VEC, bool ASYNC_PROXY, typename Stage>
static __device__ __forceinline__ void k_loop(const __nv_bfloat16* __restrict__ x,
                                              const __nv_bfloat16* __restrict__ w, uint32_t M,
                                              uint32_t N, uint32_t K, uint32_t m0, uint32_t n0,
                                              uint8_t* smem, Stage&& stage) {
    const uint32_t base = smem_addr(smem);
    const kcommon::KRange range = kcommon::split_k_range((K + kTileK - 1) / kTileK);
    const uint32_t ktiles = range.last - range.first;
    // One 64-row tile in all (m <= 64): no other CTA reads this CTA's weight rows, which it
    // takes 64 bytes a k tile; prefetching their 256-byte blocks into the L2 measured 10-28%
    // faster on the H200 at 64 rows, and slower where CTAs share the weight (more rows).
    const bool l2pf = gridDim.y == 1;
    auto load_stage = [&](uint32_t i) {  // the i-th k tile of the range
        const uint32_t s = i % kStages, kt = range.first + i;
        const uint32_t a = s * kStageBytes, b = a + BM * kRowBytes;
        load_rows<BM, VEC>(base + a, smem + a, x, M, K, m0, kt * kTileK);
        load_rows<kTileN, VEC>(base + b, smem + b, w, N, K, n0, kt * kTileK, l2pf);
    };

#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (static_cast<uint32_t>(s) < ktiles) load_stage(s);
        cp_async_commit();
    }
    for (uint32_t i = 0; i < ktiles; ++i) {
        cp_async_wait<kStages - 2>();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
        if constexpr (ASYNC_PROXY) kcommon::fence_proxy_async();
#endif
        __syncthreads();  // stage i is complete for all threads; stage i - 1 is free
        if (i + kStages - 1 < ktiles) load_stage(i + kStages - 1);
        cp_async_commit();

        const uint32_t a = base + (i % kStages) * kStageBytes;
        stage(a, a + BM * kRowBytes);
    }
    cp_async_wait<0>();
}

// The epilogue both paths share (kcommon::split_k_epilogue). pairs(f) calls f(row, col, v0, v1)
// for each pair of adjacent accumulators of this thread (row, col within the BM x 128 tile).
template <int BM, typename Pairs>
static __device__ __forceinline__ void epilogue(Pairs&& pairs, __nv_bfloat16* out, uint32_t M, uint32_t N,
                                                uint32_t m0, uint32_t n0, uint8_t* smem) {
    auto store2 = [&](uint32_t r, uint32_t c, float v0, float v1) { store_pair(out, m0 + r, n0 + c, M, N, v0, v1, 1.0f); };
    if constexpr (BM == 64) {
        kcommon::split_k_epilogue<kTileN, kPartStride, kThreads>(pairs, store2, smem, min(64u, M - m0), N - n0);
    } else {
        if (gridDim.z != 1) __trap();  // the spec splits K only when the 64-row tiles are few (BM = 64)
        pairs(store2);
    }
}

template <int BM, bool VEC>
static __device__ __forceinline__ void run(const __nv_bfloat16* __restrict__ x,
                                           const __nv_bfloat16* __restrict__ w,
                                           __nv_bfloat16* __restrict__ out, uint32_t M, uint32_t N,
                                           uint32_t K, uint32_t m0, uint32_t nb, uint8_t* smem) {
    constexpr int MI = BM / 32;  // m16 tiles per warp
    const uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const uint32_t wm = warp >> 2, wn = warp & 3u;
    const uint32_t n0 = nb * kTileN;

    float acc[MI][4][4];
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;

    k_loop<BM, VEC, false>(x, w, M, N, K, m0, n0, smem, [&](uint32_t a, uint32_t b) {
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
            uint32_t fa[MI][4], fb[2][4];
#pragma unroll
            for (int i = 0; i < MI; ++i)
                ldmatrix_x4(fa[i], a + swz(wm * (BM / 2) + i * 16 + (lane & 15u), kk * 2 + (lane >> 4)));
#pragma unroll
            for (int p = 0; p < 2; ++p)
                ldmatrix_x4(fb[p], b + swz(wn * 32 + p * 16 + (lane & 7u) + (lane >> 4) * 8,
                                           kk * 2 + ((lane >> 3) & 1u)));
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    mma_bf16(acc[i][j], fa[i][0], fa[i][1], fa[i][2], fa[i][3],
                             fb[j >> 1][(j & 1) * 2], fb[j >> 1][(j & 1) * 2 + 1]);
        }
    });

    const uint32_t g = lane >> 2, t = lane & 3u;
    auto pairs = [&](auto&& f) {
#pragma unroll
        for (int i = 0; i < MI; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const uint32_t r = wm * (BM / 2) + i * 16 + g, c = wn * 32 + j * 8 + 2 * t;
                f(r, c, acc[i][j][0], acc[i][j][1]);
                f(r + 8, c, acc[i][j][2], acc[i][j][3]);
            }
    };
    epilogue<BM>(pairs, out, M, N, m0, n0, smem);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// sm_90a: the same tiles, pipeline and shared-memory layout (the swizzle above is wgmma's 64-byte
// swizzle of K-major operands), the products issued as warpgroup MMAs reading both operands
// from shared memory. Warpgroup wg (warps 4wg .. 4wg + 3) computes rows 64wg .. 64wg + 63 x all
// 128 columns (BM = 128: m64n128k16) or all 64 rows x columns 64wg .. 64wg + 63 (BM = 64:
// m64n64k16); two k16 steps per k tile, awaited before the next barrier (whose loads refill the
// stage just read). The same bf16 products in the same k order as the mma.sync path: the same
// bits.
template <int BM, bool VEC>
static __device__ __forceinline__ void run_wgmma(const __nv_bfloat16* __restrict__ x,
                                                 const __nv_bfloat16* __restrict__ w,
                                                 __nv_bfloat16* __restrict__ out, uint32_t M,
                                                 uint32_t N, uint32_t K, uint32_t m0, uint32_t nb,
                                                 uint8_t* smem) {
    constexpr int NW = BM == 128 ? 128 : 64;  // columns per warpgroup
    const uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const uint32_t wg = warp >> 2;
    const uint32_t n0 = nb * kTileN;
    if (smem_addr(smem) & 511u) __trap();  // the 64-byte swizzle repeats every 512 bytes

    float acc[NW / 8][4];
#pragma unroll
    for (int j = 0; j < NW / 8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

    // Operand rows of this warpgroup in a stage: A rows 64wg (BM = 128) or 0, B rows 0 or 64wg.
    const uint32_t a_row = BM == 128 ? 64u * wg : 0u, b_row = BM == 128 ? 0u : 64u * wg;
    k_loop<BM, VEC, true>(x, w, M, N, K, m0, n0, smem, [&](uint32_t a, uint32_t b) {
        kcommon::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
            const uint64_t da = kcommon::smem_desc_sw64(a + a_row * kRowBytes + kk * 32, 512);
            const uint64_t db = kcommon::smem_desc_sw64(b + b_row * kRowBytes + kk * 32, 512);
            if constexpr (BM == 128) {
                kcommon::wgmma_m64n128k16_ss(acc, da, db);
            } else {
                kcommon::wgmma_m64n64k16_ss(acc, da, db);
            }
        }
        kcommon::wgmma_commit();
        kcommon::wgmma_retire(acc);
    });

    const uint32_t g = lane >> 2, t = lane & 3u;
    const uint32_t r = a_row + (warp & 3u) * 16 + g;
    auto pairs = [&](auto&& f) {
#pragma unroll
        for (int j = 0; j < NW / 8; ++j) {
            const uint32_t c = b_row + j * 8 + 2 * t;
            f(r, c, acc[j][0], acc[j][1]);
            f(r + 8, c, acc[j][2], acc[j][3]);
        }
    };
    epilogue<BM>(pairs, out, M, N, m0, n0, smem);
}
#endif

template <int BM, bool VEC>
static __device__ __forceinline__ void run_tile(const __nv_bfloat16* x, const __nv_bfloat16* w,
                                                __nv_bfloat16* out, uint32_t M, uint32_t N,
                                                uint32_t K, uint32_t m0, uint32_t nb, uint8_t* smem) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    run_wgmma<BM, VEC>(x, w, out, M, N, K, m0, nb, smem);
#else
    run<BM, VEC>(x, w, out, M, N, K, m0, nb, smem);
#endif
}

template <bool VEC>
static __device__ __forceinline__ void dispatch(const __nv_bfloat16* x, const __nv_bfloat16* w,
                                                __nv_bfloat16* out, uint32_t M, uint32_t N,
                                                uint32_t K, uint8_t* smem) {
    const uint32_t big_tiles = ((M + 127u) / 128u) * ((N + 127u) / 128u);
    // CTA order: the grid is [n tiles, m tiles (of 64 rows)]; consecutive CTAs take consecutive
    // m tiles of one n tile, so the CTAs resident together share weight tiles (read from memory
    // about once) and re-read x, which stays in L2. (In the grid's own order every m tile
    // streamed the whole weight again: a 24576 x 4096 weight 16 times at m = 2048.)
    const uint32_t id = blockIdx.x + blockIdx.y * gridDim.x;
    const uint32_t mb = id % gridDim.y, nb = id / gridDim.y;
    if (big_tiles >= kBigTileCtas) {
        if (mb & 1u) return;
        run_tile<128, VEC>(x, w, out, M, N, K, mb * 64u, nb, smem);
    } else {
        run_tile<64, VEC>(x, w, out, M, N, K, mb * 64u, nb, smem);
    }
}

}  // namespace dense_gemm_pipelined_detail

__global__ void __launch_bounds__(256)
dense_gemm_pipelined_bf16_kernel(const __nv_bfloat16* x, const __nv_bfloat16* w,
                                 __nv_bfloat16* out, uint32_t m, uint32_t n, uint32_t k) {
    namespace d = dense_gemm_pipelined_detail;
    extern __shared__ __align__(1024) uint8_t dense_pipe_smem[];
    if ((k & 7u) == 0 && dense_mma::aligned16(x, w)) {
        d::dispatch<true>(x, w, out, m, n, k, dense_pipe_smem);
    } else {
        d::dispatch<false>(x, w, out, m, n, k, dense_pipe_smem);
    }
}
