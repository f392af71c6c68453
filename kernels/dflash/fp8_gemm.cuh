// Row-scaled BF16 x FP8 -> BF16 tile GEMM, any rows, any K (fp8_gemm_n128_row_scaled):
//
//   out[m, n] = bf16(scale[n] * sum_k x[m, k] * q[n, k])
//
// x bf16 [rows, K], q E4M3 [N, K], scale f32 [N], f32 accumulation on the tensor cores:
// mma.sync m16n8k16 bf16 (sm_121a), or on sm_90a the same products as warpgroup MMAs
// (gemm_wgmma_ring, gemm_wgmma_bytes; the same bits).
//
// Tiling. A CTA of 256 threads computes a 128 (rows) x 128 (N) output tile, stepping through K
// 64 at a time; its 8 warps form a 2 x 4 grid of 64 x 32 warp tiles (4 x 4 mma tiles, 64 f32
// accumulators per lane). The grid is [ceil(rows / 128), ceil(N / 128)] with the row tiles
// fastest, so the CTAs that run together share a weight tile in L2.
//
// Dequantize on the way into shared memory. Each K step, every thread loads 4 x 16 bytes of x
// and 16 weight bytes into registers (the next step's loads are issued before the current step's
// products, so they overlap), then converts its 16 E4M3 bytes exactly to 16 bf16 (fp8_common.cuh)
// and stores both operands as bf16 into the other of two shared-memory stages (2 x 32 KiB). Each
// weight byte is converted once per CTA, and the product loop is that of a plain bf16 GEMM:
// ldmatrix.x4 for A (x, row-major) and B (the weight tile, [n][k], which is mma's "col" B), 16
// mma per 16-k step per warp. Shared rows are 128 bytes (8 16-byte chunks), chunk c of row r
// stored at c ^ (r % 8), so every ldmatrix phase reads 8 distinct bank groups.
//
// sm_90a, vector path (gemm_wgmma_ring): x and the raw E4M3 weight bytes stream through a
// kRingSlots-deep cp.async ring (x 128 x 64 bf16 in the swizzled layout above, 16 KiB; the weight
// 128 x 64 bytes, 8 KiB), fetched two K steps ahead; each step every thread converts the weight
// bytes it copied itself into the one bf16 weight tile, and the warpgroup MMAs read x from its
// ring slot and that tile. Register-staged loads one step ahead (the other paths) left the
// global latency exposed at few rows (0.2-0.5x cuBLAS at 256 rows). A tile of at most 64 rows
// (all of them when rows <= 64) takes the ring's few-row form: 64-row x slots, kRingSlots64 = 4
// slots fetched three steps ahead in the same shared memory, and each warpgroup all 64 rows x
// half the weight tile (m64n64k16); on the H200 it took 17-23% off the time at 1-64 rows.
//
// Split K (../common/split_k.cuh). With a grid of Z > 1 along z (clusters of Z CTAs along z,
// which the spec launches when the output tiles alone would leave most of the GPU idle), each CTA
// runs its share of the K steps, and the Z unscaled f32 tiles (kPartStride floats a row, in the
// ring's shared memory) are summed in rank order, then scaled and rounded once. The same sums
// whichever path or rank computes them, and no workspace.
//
// Bounds. Rows beyond `rows`, weight rows beyond N and k beyond K read as zero (so the tails
// add nothing) and outputs beyond the matrix are not stored. The vector path needs K % 16 == 0
// and 16-byte aligned x and q (then every 16-byte load is wholly in range or out); otherwise x
// and the weight are read element by element with the same zero fill. Deterministic: each
// output's sum is one lane's fixed sequence of mma steps.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cstdint>

#include "../common/split_k.cuh"
#include "../common/wgmma.cuh"
#include "fp8_common.cuh"

namespace dflash_fp8_gemm_detail {

using namespace dflash_fp8;

constexpr uint32_t kBM = 128, kBN = 128, kBK = 64, kThreads = 256;
constexpr uint32_t kStageUnits = kBM * kBK * 2 / 16;  // 16-byte units per operand per stage (1024)
static_assert(kBM == kBN, "x and weight stages have the same size");
// The sm_90a vector path's ring (gemm_wgmma_ring): slots of x (bf16) and raw weight (E4M3) tiles,
// then the converted weight tile. GEMM_SMEM in specs/fp8_linear.yaml is the larger of this and
// the two-stage layout of the other paths (2 x 2 x 16 KiB).
constexpr uint32_t kRingSlots = 3;
constexpr uint32_t kXTileBytes = kBM * kBK * 2;                  // 16 KiB
constexpr uint32_t kRawTileBytes = kBN * kBK;                    // 8 KiB
constexpr uint32_t kSlotBytes = kXTileBytes + kRawTileBytes;     // 24 KiB (a multiple of 1024)
constexpr uint32_t kRingSmem = kRingSlots * kSlotBytes + kBN * kBK * 2;  // 88 KiB
// The ring's few-row form (a tile of at most 64 rows): slots of 8 KiB of x and 8 KiB of weight
// bytes, so 4 slots (three steps ahead) fit the same shared memory.
constexpr uint32_t kRingSlots64 = 4;

// 16-byte unit of chunk c (0..7) of tile row r, swizzled.
static __device__ __forceinline__ uint32_t swz(uint32_t r, uint32_t c) { return r * 8u + (c ^ (r & 7u)); }

// Split K: this CTA's K steps [first, last), and the row stride of the f32 partial tile (132
// floats: 16-byte rows for the sum's vector reads, rows 4 banks apart).
static __device__ __forceinline__ kcommon::KRange k_steps_of_rank(uint32_t k) {
    return kcommon::split_k_range((k + kBK - 1) / kBK);
}
constexpr uint32_t kPartStride = kBN + 4;
static_assert(kcommon::split_k_smem_bytes(kBM, kPartStride, 4) <= kRingSmem,
              "split K's slots fit GEMM_SMEM, which every path gets");

static __device__ __forceinline__ void ldsm_x4(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3,
                                               const uint4* p) {
    const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(a));
}

// Weight unit u of a K step (row u / 4, bytes 16 (u % 4) .. + 15: 16 E4M3 values) converted
// exactly to bf16 into the swizzled weight tile ws (two 16-byte chunks of row u / 4).
static __device__ __forceinline__ void store_converted(uint4* ws, uint32_t u, const uint4& w) {
    const uint32_t r = u >> 2, c = 2u * (u & 3u);
    ws[swz(r, c)] = make_uint4(e4m3_01_to_bf16x2(w.x), e4m3_23_to_bf16x2(w.x), e4m3_01_to_bf16x2(w.y),
                               e4m3_23_to_bf16x2(w.y));
    ws[swz(r, c + 1)] = make_uint4(e4m3_01_to_bf16x2(w.z), e4m3_23_to_bf16x2(w.z), e4m3_01_to_bf16x2(w.w),
                                   e4m3_23_to_bf16x2(w.w));
}

// One K step's global loads of this thread, held in registers until stored.
template <bool VEC>
struct StepLoads {
    uint4 xr[4];  // x: units tid + 256 i of the 128 x 8 chunk tile (row u / 8, chunk u % 8)
    uint4 wr[2];  // weight: units tid + 256 i of the 128 x 4 16-byte tile (row u / 4, part u % 4)

    __device__ __forceinline__ void load(const __nv_bfloat16* x, const uint8_t* q, uint32_t rows, uint32_t n,
                                         uint32_t k, uint32_t m0, uint32_t n0, uint32_t kt) {
#pragma unroll
        for (uint32_t i = 0; i < 4; ++i) {
            const uint32_t u = threadIdx.x + i * kThreads;
            const uint32_t m = m0 + (u >> 3), kk = kt + 8u * (u & 7u);
            const uint32_t valid = (m < rows && kk < k) ? min(8u, k - kk) : 0u;
            xr[i] = load_x8(x + static_cast<uint64_t>(m) * k + kk, valid, VEC);
        }
#pragma unroll
        for (uint32_t i = 0; i < 2; ++i) {
            const uint32_t u = threadIdx.x + i * kThreads;
            const uint32_t r = n0 + (u >> 2), kk = kt + 16u * (u & 3u);
            const uint32_t valid = (r < n && kk < k) ? min(16u, k - kk) : 0u;
            wr[i] = load_w16(q + static_cast<uint64_t>(r) * k + kk, valid, VEC);
        }
    }

    __device__ __forceinline__ void store(uint4* xs, uint4* ws) const {
#pragma unroll
        for (uint32_t i = 0; i < 4; ++i) {
            const uint32_t u = threadIdx.x + i * kThreads;
            xs[swz(u >> 3, u & 7u)] = xr[i];
        }
#pragma unroll
        for (uint32_t i = 0; i < 2; ++i) store_converted(ws, threadIdx.x + i * kThreads, wr[i]);
    }
};

// acc += the products of one 64-k stage for this warp's 64 x 32 tile.
static __device__ __forceinline__ void mma_stage(float (&acc)[4][4][4], const uint4* xs, const uint4* ws,
                                                 uint32_t wm, uint32_t wn, uint32_t lane) {
#pragma unroll
    for (uint32_t s = 0; s < kBK / 16; ++s) {
        uint32_t a[4][4];
#pragma unroll
        for (uint32_t mi = 0; mi < 4; ++mi) {
            // lanes 0-15: rows 0-15 at k 0-7 (a0, a1); lanes 16-31: the same rows at k 8-15 (a2, a3)
            const uint32_t r = wm * 64u + mi * 16u + (lane & 15u);
            ldsm_x4(a[mi][0], a[mi][1], a[mi][2], a[mi][3], xs + swz(r, 2u * s + (lane >> 4)));
        }
        uint32_t b[4][2];
#pragma unroll
        for (uint32_t nj = 0; nj < 2; ++nj) {
            // matrices: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15)
            const uint32_t r = wn * 32u + nj * 16u + ((lane >> 4) << 3) + (lane & 7u);
            ldsm_x4(b[2 * nj][0], b[2 * nj][1], b[2 * nj + 1][0], b[2 * nj + 1][1],
                    ws + swz(r, 2u * s + ((lane >> 3) & 1u)));
        }
#pragma unroll
        for (uint32_t mi = 0; mi < 4; ++mi)
#pragma unroll
            for (uint32_t ni = 0; ni < 4; ++ni)
                mma_bf16_16816(acc[mi][ni], a[mi][0], a[mi][1], a[mi][2], a[mi][3], b[ni][0], b[ni][1]);
    }
}

static __device__ __forceinline__ void store_pair(__nv_bfloat16* out, const float* scale, uint32_t rows,
                                                  uint32_t n, uint32_t m, uint32_t col, float v0, float v1) {
    if (m >= rows || col >= n) return;
    __nv_bfloat16* o = out + static_cast<uint64_t>(m) * n + col;
    const __nv_bfloat16 b0 = __float2bfloat16_rn(v0 * __ldg(scale + col));
    if (col + 1 < n) {
        const __nv_bfloat16 b1 = __float2bfloat16_rn(v1 * __ldg(scale + col + 1));
        if ((n & 1u) == 0 && (reinterpret_cast<uintptr_t>(o) & 3u) == 0) {
            *reinterpret_cast<__nv_bfloat162*>(o) = __halves2bfloat162(b0, b1);
            return;
        }
        o[1] = b1;
    }
    o[0] = b0;
}

// The epilogue of every path (kcommon::split_k_epilogue), out = bf16(v * scale). pairs(f) calls
// f(row, col, v0, v1) for each pair of adjacent accumulators of this thread (row, col: within the
// tile). The caller has waited for its copies and products.
template <typename Pairs>
static __device__ __forceinline__ void epilogue(Pairs&& pairs, __nv_bfloat16* out, const float* scale,
                                                uint32_t rows, uint32_t n, uint32_t m0, uint32_t n0, void* smem) {
    kcommon::split_k_epilogue<kBN, kPartStride, kThreads>(
        pairs,
        [&](uint32_t r, uint32_t c, float v0, float v1) { store_pair(out, scale, rows, n, m0 + r, n0 + c, v0, v1); },
        smem, min(kBM, rows - m0), n - n0);
}

// The K loop both product paths share. Each K step: the next step's loads are issued, then
// issue(cur) starts the products of stage cur, the next step's operands are converted and stored
// into the other stage (last read by the previous step's products, retired before its barrier),
// retire() waits for this step's products, and a barrier publishes the stored stage. With
// ASYNC_PROXY (wgmma reads the stages) each thread's stores are fenced for the async proxy before
// the barriers that publish them.
template <bool VEC, bool ASYNC_PROXY, typename Issue, typename Retire>
static __device__ __forceinline__ void k_steps(const __nv_bfloat16* x, const uint8_t* q, uint32_t rows,
                                               uint32_t n, uint32_t k, uint32_t m0, uint32_t n0,
                                               uint4* smem, Issue&& issue, Retire&& retire) {
    uint4* xs = smem;                     // [2][kStageUnits]
    uint4* ws = smem + 2 * kStageUnits;   // [2][kStageUnits]
    const kcommon::KRange range = k_steps_of_rank(k);
    if (range.first == range.last) return;
    auto publish = [] {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
        if constexpr (ASYNC_PROXY) kcommon::fence_proxy_async();
#endif
    };

    StepLoads<VEC> ld;
    ld.load(x, q, rows, n, k, m0, n0, range.first * kBK);
    ld.store(xs, ws);
    publish();
    __syncthreads();
    for (uint32_t st = range.first; st < range.last; ++st) {
        const uint32_t cur = (st - range.first) & 1u;
        const bool more = st + 1 < range.last;
        if (more) ld.load(x, q, rows, n, k, m0, n0, (st + 1) * kBK);
        issue(cur);
        if (more) ld.store(xs + (cur ^ 1u) * kStageUnits, ws + (cur ^ 1u) * kStageUnits);
        publish();
        retire();
        __syncthreads();
    }
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// sm_90a: the same shared-memory layout (rows of 128 bytes, chunk c of row r at c ^ (r % 8):
// wgmma's 128-byte swizzle of K-major operands); warpgroup wg (warps 4wg .. 4wg + 3) computes
// rows 64wg .. 64wg + 63 x all 128 columns. The same bf16 products in the same k order as
// mma_stage: the same bits. The two paths below share these three pieces:
//
// one K step: 4 wgmma m64n128k16 of this warpgroup's 64 x rows of the x tile at shared address
// xt and the 128-row weight tile at wt, committed as one group;
//
// BM = 128: warpgroup wg takes rows 64wg .. 64wg + 63 of the x tile and all 128 weight rows
// (m64n128k16); BM = 64 (a tile of at most 64 rows, the ring's few-row form): all 64 rows and
// weight rows 64wg .. 64wg + 63 (m64n64k16). kCols: the output columns of a warpgroup.
template <uint32_t BM>
struct WgTile {
    static_assert(BM == 128 || BM == 64, "row tiles of 128 or 64");
    static constexpr uint32_t kCols = BM == 128 ? 128 : 64;
    static constexpr uint32_t kFrags = kCols / 8;  // m16n8 fragments a warp holds
};
template <uint32_t BM>
static __device__ __forceinline__ void wgmma_step(float (&acc)[WgTile<BM>::kFrags][4], uint32_t xt, uint32_t wt,
                                                  uint32_t wg) {
    const uint32_t a = BM == 128 ? xt + wg * 64u * 128u : xt;
    const uint32_t b = BM == 128 ? wt : wt + wg * 64u * 128u;
    kcommon::wgmma_fence();
#pragma unroll
    for (uint32_t s = 0; s < kBK / 16; ++s) {
        const uint64_t da = kcommon::smem_desc_sw128(a + s * 32u, 16, 1024);
        const uint64_t db = kcommon::smem_desc_sw128(b + s * 32u, 16, 1024);
        if constexpr (BM == 128) {
            kcommon::wgmma_m64n128k16_ss(acc, da, db);
        } else {
            kcommon::wgmma_m64n64k16_ss(acc, da, db);
        }
    }
    kcommon::wgmma_commit();
}
// waiting for this warpgroup's MMAs (kcommon::wgmma_retire);
// and the accumulator pairs for the epilogue (tile row and column of each).
template <uint32_t BM>
static __device__ __forceinline__ auto wgmma_pairs(const float (&acc)[WgTile<BM>::kFrags][4]) {
    return [&acc](auto&& f) {
        const uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
        const uint32_t g = lane >> 2, t = lane & 3u;
        const uint32_t r = (BM == 128 ? (warp >> 2) * 64u : 0u) + (warp & 3u) * 16u + g;
        const uint32_t c0 = BM == 128 ? 0u : (warp >> 2) * 64u;
#pragma unroll
        for (uint32_t j = 0; j < WgTile<BM>::kFrags; ++j) {
            f(r, c0 + j * 8u + 2u * t, acc[j][0], acc[j][1]);
            f(r + 8u, c0 + j * 8u + 2u * t, acc[j][2], acc[j][3]);
        }
    };
}

// The byte path (K % 16 != 0 or misaligned pointers): k_steps' two register-staged stages, the
// MMAs of a stage running while the next stage is converted and stored.
static __device__ __forceinline__ void gemm_wgmma_bytes(const __nv_bfloat16* x, const uint8_t* q,
                                                        const float* scale, __nv_bfloat16* out,
                                                        uint32_t rows, uint32_t n, uint32_t k, uint4* smem) {
    const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
    if (base & 1023u) __trap();  // the 128-byte swizzle is anchored at 1024-byte boundaries
    const uint32_t m0 = blockIdx.x * kBM, n0 = blockIdx.y * kBN;
    const uint32_t wg = threadIdx.x >> 7;
    constexpr uint32_t kStageBytes = kStageUnits * 16;

    float acc[16][4];
#pragma unroll
    for (uint32_t j = 0; j < 16; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    k_steps<false, true>(
        x, q, rows, n, k, m0, n0, smem,
        [&](uint32_t cur) { wgmma_step<128>(acc, base + cur * kStageBytes, base + (2u + cur) * kStageBytes, wg); },
        [&] { kcommon::wgmma_retire(acc); });
    epilogue(wgmma_pairs<128>(acc), out, scale, rows, n, m0, n0, smem);
}

// The vector path (K % 16 == 0, 16-byte aligned x and q) with the cp.async ring described at the
// top: step t's x tile is read by the MMAs straight from its slot, its weight bytes are converted
// by the threads that copied them into the bf16 tile (after a barrier that retires step t - 1's
// MMAs, which read that tile), and step t + SLOTS - 1 is fetched into the slot of step t - 1
// (BM rows of x a slot: 128, or 64 in the few-row form). The same products in the same k order
// as gemm_wgmma_bytes and mma_stage: the same bits.
template <uint32_t BM, uint32_t SLOTS>
static __device__ __forceinline__ void gemm_wgmma_ring(const __nv_bfloat16* x, const uint8_t* q,
                                                       const float* scale, __nv_bfloat16* out,
                                                       uint32_t rows, uint32_t n, uint32_t k, uint8_t* smem) {
    constexpr uint32_t kX = BM * kBK * 2;            // the slot's x tile (BM rows, swizzled)
    constexpr uint32_t kSlot = kX + kRawTileBytes;   // then the raw weight tile
    static_assert(kSlot % 1024 == 0 && SLOTS * kSlot + kBN * kBK * 2 <= kRingSmem, "the ring fits GEMM_SMEM");
    const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
    if (base & 1023u) __trap();  // the 128-byte swizzle is anchored at 1024-byte boundaries
    const uint32_t m0 = blockIdx.x * kBM, n0 = blockIdx.y * kBN;
    const uint32_t tid = threadIdx.x, wg = tid >> 7;
    const uint32_t wtile = base + SLOTS * kSlot;  // the converted weight tile
    uint4* ws = reinterpret_cast<uint4*>(smem + SLOTS * kSlot);
    const kcommon::KRange range = k_steps_of_rank(k);

    // This thread's copies: x units tid + 256 i (row u / 8, chunk u % 8) and weight units
    // tid + 256 i (row u / 4, 16-byte part u % 4), as StepLoads.
    auto fetch = [&](uint32_t t) {  // step range.first + t
        const uint32_t slot = base + (t % SLOTS) * kSlot;
        const uint32_t kt = (range.first + t) * kBK;
#pragma unroll
        for (uint32_t i = 0; i < BM * 8 / kThreads; ++i) {
            const uint32_t u = tid + i * kThreads;
            const uint32_t m = m0 + (u >> 3), kk = kt + 8u * (u & 7u);
            const bool ok = m < rows && kk < k;
            kcommon::cp_async16_zfill(slot + swz(u >> 3, u & 7u) * 16u, ok ? x + static_cast<uint64_t>(m) * k + kk : x, ok);
        }
#pragma unroll
        for (uint32_t i = 0; i < 2; ++i) {
            const uint32_t u = tid + i * kThreads;
            const uint32_t r = n0 + (u >> 2), kk = kt + 16u * (u & 3u);
            const bool ok = r < n && kk < k;
            kcommon::cp_async16_zfill(slot + kX + u * 16u, ok ? q + static_cast<uint64_t>(r) * k + kk : q, ok);
        }
    };

    float acc[WgTile<BM>::kFrags][4];
#pragma unroll
    for (uint32_t j = 0; j < WgTile<BM>::kFrags; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

    const uint32_t steps = range.last - range.first;
#pragma unroll
    for (uint32_t t = 0; t + 1 < SLOTS; ++t) {
        if (t < steps) fetch(t);
        cp_async_commit();
    }
    for (uint32_t t = 0; t < steps; ++t) {
        cp_async_wait<SLOTS - 2>();  // this thread's copies of step t have landed
        __syncthreads();             // every warpgroup has retired step t - 1's MMAs
        const uint8_t* raw = smem + (t % SLOTS) * kSlot + kX;
#pragma unroll
        for (uint32_t i = 0; i < 2; ++i) {
            const uint32_t u = tid + i * kThreads;
            store_converted(ws, u, *reinterpret_cast<const uint4*>(raw + u * 16u));
        }
        kcommon::fence_proxy_async();  // the landed x and the stored weight tile, for the MMAs
        __syncthreads();
        if (t + SLOTS - 1 < steps) fetch(t + SLOTS - 1);  // into the slot of step t - 1
        cp_async_commit();

        wgmma_step<BM>(acc, base + (t % SLOTS) * kSlot, wtile, wg);
        kcommon::wgmma_retire(acc);
    }
    cp_async_wait<0>();
    epilogue(wgmma_pairs<BM>(acc), out, scale, rows, n, m0, n0, smem);
}
#endif

template <bool VEC>
static __device__ __forceinline__ void gemm(const __nv_bfloat16* x, const uint8_t* q, const float* scale,
                                            __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k,
                                            uint4* smem) {
    const uint32_t m0 = blockIdx.x * kBM, n0 = blockIdx.y * kBN;
    const uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
    const uint32_t wm = warp >> 2, wn = warp & 3u;

    float acc[4][4][4];
#pragma unroll
    for (uint32_t mi = 0; mi < 4; ++mi)
#pragma unroll
        for (uint32_t ni = 0; ni < 4; ++ni)
#pragma unroll
            for (uint32_t e = 0; e < 4; ++e) acc[mi][ni][e] = 0.f;

    k_steps<VEC, false>(
        x, q, rows, n, k, m0, n0, smem,
        [&](uint32_t cur) {
            mma_stage(acc, smem + cur * kStageUnits, smem + (2u + cur) * kStageUnits, wm, wn, lane);
        },
        [] {});

    const uint32_t g = lane >> 2, t = lane & 3u;
    auto pairs = [&](auto&& f) {
#pragma unroll
        for (uint32_t mi = 0; mi < 4; ++mi) {
            const uint32_t r = wm * 64u + mi * 16u + g;
#pragma unroll
            for (uint32_t ni = 0; ni < 4; ++ni) {
                const uint32_t c = wn * 32u + ni * 8u + 2u * t;
                f(r, c, acc[mi][ni][0], acc[mi][ni][1]);
                f(r + 8u, c, acc[mi][ni][2], acc[mi][ni][3]);
            }
        }
    };
    epilogue(pairs, out, scale, rows, n, m0, n0, smem);
}

}  // namespace dflash_fp8_gemm_detail

__global__ void __launch_bounds__(256, 2)
dflash_fp8_gemm_n128_row_scaled_kernel(const __nv_bfloat16* x, const __nv_fp8_e4m3* q, const float* scale,
                                       __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k) {
    namespace d = dflash_fp8_gemm_detail;
    extern __shared__ __align__(1024) uint4 dflash_fp8_dyn[];
    const uint8_t* qb = reinterpret_cast<const uint8_t*>(q);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if ((k & 15u) == 0 && dflash_fp8::aligned16(x, qb)) {
        if (rows - blockIdx.x * d::kBM <= 64) {  // the tile's rows fit its few-row form
            d::gemm_wgmma_ring<64, d::kRingSlots64>(x, qb, scale, out, rows, n, k, reinterpret_cast<uint8_t*>(dflash_fp8_dyn));
        } else {
            d::gemm_wgmma_ring<128, d::kRingSlots>(x, qb, scale, out, rows, n, k, reinterpret_cast<uint8_t*>(dflash_fp8_dyn));
        }
    } else {
        d::gemm_wgmma_bytes(x, qb, scale, out, rows, n, k, dflash_fp8_dyn);
    }
#else
    if ((k & 15u) == 0 && dflash_fp8::aligned16(x, qb)) {
        d::gemm<true>(x, qb, scale, out, rows, n, k, dflash_fp8_dyn);
    } else {
        d::gemm<false>(x, qb, scale, out, rows, n, k, dflash_fp8_dyn);
    }
#endif
}
