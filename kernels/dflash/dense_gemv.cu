// Dense bf16 GEMV for few rows (m <= 16), memory-bound on the weights:
//
//   out[r, n] = bf16( sum_k f32(x[r, k]) * f32(w[n, k]) ),   x [m, k], w [n, k] (nn.Linear), out [m, n]
//
// Work split: each CTA (8 warps) owns R consecutive weight rows n0 .. n0 + R - 1 and streams
// them once over the whole of k: R = 16 (the grid is ceil(n / 16) CTAs: 256 for n = 4096, 9496
// for the lm_head), or R = 32 for m > 8 on a weight of n >= 8448 rows. Every CTA reads all of
// x's m rows (L1/L2 hits), 2m / R bytes per weight byte: at m = 16 with 16 rows a CTA that
// equals the weight traffic and cost the H200 20% (gate/up 24576 x 4096: 65 us at m = 16
// against 55 us at m = 8); 32 rows cut that to 59.5 us. Within the CTA, k is cut into chunks of
// 64 (128 bytes of a row) and chunk c goes to warp c % 8, so the CTA reads each weight row front
// to back, 1 KB per row per round of the 8 warps.
//
// Products on the tensor cores (mma.sync m16n8k16): B is a weight tile of 8 rows x 16 k and A
// the (up to) 16 rows of x. For each of the R / 8 row tiles j, lane (g, t) multiplies weight row
// n0 + 8j + g at the chunk's 16-byte units t and t + 4 (k = 64c + 8t .. + 7 and 64c + 32 + 8t
// .. + 7) with the same units of x rows g and g + 8. The 8 values of a unit feed two MMAs as k
// slots {2t, 2t+1, 8+2t, 9+2t}: words .x/.y in the first, .z/.w in the second; A uses the same
// assignment, so the sum over k is unchanged (see dense_mma.cuh). Rows of x beyond m and k
// beyond the end read as zeros.
//
// Memory-level parallelism (the point of this design). A GEMV is bound by how many weight
// bytes are in flight and by how many requests carry them: by Little's law the H200 needs
// roughly latency (~1 us loaded) x 4.3 TB/s ~ 4-5 MB in flight over the whole GPU, 30-40 KB per
// SM, at every moment, in whole 128-byte lines (kcommon::LineChunk: half-line requests capped
// the load structure near 80% of a streaming read). Each warp streams its chunks through a ring
// of kStages = 3 slots in shared memory with cp.async (16 bytes a copy, L2 only, zero-filled
// past the end): a chunk is R rows x 128 bytes, R / 4 copies a lane, 8 lanes a line; while
// chunk i is multiplied, chunks i + 1 and i + 2 are in flight, R / 4 KB per warp. No
// register holds data in flight, so the depth costs no registers. Lanes read each other's
// copies, so two warp barriers per chunk order the ring (after the wait, and before a slot is
// refilled); there is no CTA barrier in the loop. x (re-read by every CTA, an L1/L2 hit) goes
// through registers one chunk ahead.
//   In flight per CTA: 2R KB; shared memory 3R KB per CTA (3 slots x R / 4 copies x 256
//   threads x 16 bytes; the reduction buffer reuses it). H200: two CTAs per SM (registers), so
//   n = 4096 is resident in one wave (256 CTAs of 16 rows, or 128 of 32) with 64 KB in flight
//   per SM, and the larger layers keep that while CTAs retire and start. 16 rows per CTA where
//   x is small: twice the CTAs fill the SMs sooner.

// Reduction order (deterministic): each warp accumulates its chunks in increasing order in the
// MMA's f32 accumulators; the 8 warps' partial sums go through shared memory and one thread per
// output adds them in warp order 0..7 to 0.0f, then rounds once to bf16.
//
// Vector path: k % 8 == 0 and x, w 16-byte aligned (the cp.async ring); otherwise loads element
// by element through registers (any k, any alignment; correctness path, not tuned).
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "../common/line_ring.cuh"
#include "dense_mma.cuh"

namespace dense_gemv_detail {

using namespace dense_mma;

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kMaxRows = 16;             // rows of x (one m16 MMA)
constexpr uint32_t kWideN = 8448;        // 32-row CTAs from this n when m > 8 (GEMV_WIDE_N)
constexpr uint32_t kChunkK = 64;         // k per chunk of the vector path: 128 bytes of a row
constexpr int kStages = 3;               // ring slots: kStages - 1 chunks in flight
constexpr int kSlotBytes = kThreads * 16;  // one copy's 16 bytes per thread
// T 8-row weight tiles per CTA (all warps share them): 4 (32 rows) for m > 8 and n >= kWideN,
// else 2 (16 rows) (GEMV_ROWS * min(2, div_ceil(m, 8), 1 + n // GEMV_WIDE_N) in
// specs/dense_linear.yaml).
template <int T>
struct Tiles {
    static constexpr int kRowsPerCta = 8 * T;
    static constexpr int kCopies = kRowsPerCta / 4;                     // 16-byte copies per lane per chunk
    static constexpr int kRingBytes = kStages * kCopies * kSlotBytes;   // 49152 x T / 2 (GEMV_SMEM)
    static_assert(kWarps * T * 4 * 32 * 4 <= kRingBytes, "reduction buffer must fit in the ring");
};

// Warp partials -> shared memory -> fixed-order sum per output, rounded once.
// Output (row r, column n0 + nl): tile nl / 8, accumulator lane (r % 8) * 4 + (nl % 8) / 2,
// register (r / 8) * 2 + nl % 2. Consecutive threads take consecutive columns.
template <int T>
static __device__ __forceinline__ void reduce_store(const float (&acc)[T][4], float* red,
                                                    __nv_bfloat16* __restrict__ out, uint32_t M,
                                                    uint32_t N, uint32_t n0) {
    constexpr int kRows = Tiles<T>::kRowsPerCta;
    const uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
#pragma unroll
    for (int j = 0; j < T; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) red[(warp * (T * 4) + j * 4 + r) * 32 + lane] = acc[j][r];
    __syncthreads();
    for (uint32_t o = threadIdx.x; o < kMaxRows * kRows; o += blockDim.x) {
        const uint32_t r = o / kRows, nl = o % kRows;
        const uint32_t n = n0 + nl;
        if (r >= M || n >= N) continue;
        const uint32_t j = nl >> 3, nn = nl & 7u;
        const uint32_t src_lane = (r & 7u) * 4u + (nn >> 1);
        const uint32_t reg = (r >> 3) * 2u + (nn & 1u);
        float s = 0.f;
#pragma unroll
        for (int wp = 0; wp < kWarps; ++wp) s += red[(wp * (T * 4) + j * 4 + reg) * 32 + src_lane];
        out[static_cast<uint64_t>(r) * N + n] = __float2bfloat16_rn(s);
    }
}

// Vector path: k % 8 == 0, x and w 16-byte aligned.
template <int T>
static __device__ __forceinline__ void run_async(const __nv_bfloat16* __restrict__ x,
                                                 const __nv_bfloat16* __restrict__ w,
                                                 __nv_bfloat16* __restrict__ out, uint32_t M,
                                                 uint32_t N, uint32_t K, uint8_t* smem) {
    using L = kcommon::LineChunk;
    constexpr int kRows = Tiles<T>::kRowsPerCta, kCopies = Tiles<T>::kCopies;
    const uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const uint32_t g = lane >> 2, t = lane & 3u;
    const uint32_t n0 = blockIdx.x * kRows;

    // This lane's copies: row n0 + copy_row(l) of every chunk, 16-byte unit copy_unit.
    const __nv_bfloat16* wsrc[kCopies];
    bool wok[kCopies];
#pragma unroll
    for (int l = 0; l < kCopies; ++l) {
        const uint32_t n = n0 + L::copy_row(l, lane);
        wok[l] = n < N;
        wsrc[l] = w + static_cast<uint64_t>(wok[l] ? n : 0u) * K + 8u * L::copy_unit(lane);
    }
    const __nv_bfloat16* xa = g < M ? x + static_cast<uint64_t>(g) * K : nullptr;
    const __nv_bfloat16* xb = g + 8u < M ? x + static_cast<uint64_t>(g + 8u) * K : nullptr;

    const uint32_t nchunks = (K + kChunkK - 1) / kChunkK;
    // Stage s holds copies s * kCopies .. + kCopies - 1 of this warp's ring (kcommon::LineChunk).
    const uint32_t ring = smem_addr(smem) + L::warp_offset(warp);

    // One commit group per chunk (empty-but-committed past the end keeps the group count
    // uniform, so wait_group<kStages - 1> always means "chunk i has landed").
    auto issue = [&](uint32_t c, uint32_t s) {
        const uint32_t k = c * kChunkK + 8u * L::copy_unit(lane);
        const bool valid = c < nchunks && k < K;  // k % 8 == 0: all 8 values exist
#pragma unroll
        for (int l = 0; l < kCopies; ++l) {
            const bool p = valid && wok[l];
            cp_async16_zfill(ring + L::copy_offset<kThreads>(s * kCopies + l, lane),
                             p ? wsrc[l] + c * kChunkK : w, p);
        }
        cp_async_commit();
    };
    // x rows g and g + 8 at the lane's k: units t and t + 4 of the chunk (the units its weight
    // fragments hold), one chunk ahead.
    auto load_x = [&](const __nv_bfloat16* p, uint32_t c, uint32_t h) {
        const uint32_t k = c * kChunkK + 8u * (t + 4u * h);
        return (p != nullptr && c < nchunks && k < K) ? __ldg(reinterpret_cast<const uint4*>(p + k))
                                                      : make_uint4(0u, 0u, 0u, 0u);
    };

#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) issue(warp + kWarps * s, s);

    float acc[T][4];
#pragma unroll
    for (int j = 0; j < T; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

    uint4 xa_n[2], xb_n[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) xa_n[h] = load_x(xa, warp, h), xb_n[h] = load_x(xb, warp, h);
    uint32_t s_read = 0, s_write = kStages - 1;
    for (uint32_t c = warp; c < nchunks; c += kWarps) {
        __syncwarp();  // every lane has read the slot refilled next (iteration c - 8)
        issue(c + kWarps * (kStages - 1), s_write);
        uint4 a[2], b[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            a[h] = xa_n[h], b[h] = xb_n[h];
            xa_n[h] = load_x(xa, c + kWarps, h);
            xb_n[h] = load_x(xb, c + kWarps, h);
        }
        cp_async_wait<kStages - 1>();  // this thread's copies of chunk c have landed
        __syncwarp();                  // ... and every other lane's
#pragma unroll
        for (int j = 0; j < T; ++j) {
            // Weight row n0 + 8j + g (chunk row 8j + g), units t and t + 4.
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const uint32_t r = 8u * j + g;
                const uint4 wv = lds128(ring + L::read_offset<kThreads>(s_read * kCopies, r, t + 4u * h));
                mma_bf16(acc[j], a[h].x, b[h].x, a[h].y, b[h].y, wv.x, wv.y);
                mma_bf16(acc[j], a[h].z, b[h].z, a[h].w, b[h].w, wv.z, wv.w);
            }
        }
        s_read = s_read + 1 == kStages ? 0u : s_read + 1;
        s_write = s_write + 1 == kStages ? 0u : s_write + 1;
    }
    cp_async_wait<0>();  // drain (zero-fill copies past the end) before the ring is reused
    __syncthreads();
    reduce_store(acc, reinterpret_cast<float*>(smem), out, M, N, n0);
}

// Element path (k % 8 != 0 or a pointer not 16-byte aligned): register double buffer.
template <int T>
struct Chunk {
    uint4 w[T];
    uint4 a, b;  // x rows g and g + 8
};

template <int T>
static __device__ __forceinline__ void load_chunk(Chunk<T>& ch, uint32_t c, uint32_t nchunks,
                                                  const __nv_bfloat16* const (&wrow)[T],
                                                  const bool (&wok)[T],
                                                  const __nv_bfloat16* xa, const __nv_bfloat16* xb,
                                                  uint32_t K, uint32_t t) {
    const uint32_t k = c * 32u + 8u * t;
    const int64_t valid = c < nchunks ? static_cast<int64_t>(K) - k : 0;
#pragma unroll
    for (int j = 0; j < T; ++j)
        ch.w[j] = wok[j] ? load8<false, true>(wrow[j] + k, valid) : make_uint4(0u, 0u, 0u, 0u);
    ch.a = xa ? load8<false, false>(xa + k, valid) : make_uint4(0u, 0u, 0u, 0u);
    ch.b = xb ? load8<false, false>(xb + k, valid) : make_uint4(0u, 0u, 0u, 0u);
}

template <int T>
static __device__ __noinline__ void run_elementwise(const __nv_bfloat16* __restrict__ x,
                                                    const __nv_bfloat16* __restrict__ w,
                                                    __nv_bfloat16* __restrict__ out, uint32_t M,
                                                    uint32_t N, uint32_t K, float* red) {
    constexpr int kRows = Tiles<T>::kRowsPerCta;
    const uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const uint32_t g = lane >> 2, t = lane & 3u;
    const uint32_t n0 = blockIdx.x * kRows;

    const __nv_bfloat16* wrow[T];
    bool wok[T];
#pragma unroll
    for (int j = 0; j < T; ++j) {
        const uint32_t n = n0 + 8u * j + g;
        wok[j] = n < N;
        wrow[j] = w + static_cast<uint64_t>(wok[j] ? n : 0u) * K;
    }
    const __nv_bfloat16* xa = g < M ? x + static_cast<uint64_t>(g) * K : nullptr;
    const __nv_bfloat16* xb = g + 8u < M ? x + static_cast<uint64_t>(g + 8u) * K : nullptr;

    float acc[T][4];
#pragma unroll
    for (int j = 0; j < T; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

    const uint32_t nchunks = (K + 31u) / 32u;
    Chunk<T> cur;
    load_chunk(cur, warp, nchunks, wrow, wok, xa, xb, K, t);
    for (uint32_t c = warp; c < nchunks; c += kWarps) {
        Chunk<T> nxt;
        load_chunk(nxt, c + kWarps, nchunks, wrow, wok, xa, xb, K, t);
#pragma unroll
        for (int j = 0; j < T; ++j) {
            mma_bf16(acc[j], cur.a.x, cur.b.x, cur.a.y, cur.b.y, cur.w[j].x, cur.w[j].y);
            mma_bf16(acc[j], cur.a.z, cur.b.z, cur.a.w, cur.b.w, cur.w[j].z, cur.w[j].w);
        }
        cur = nxt;
    }
    reduce_store(acc, red, out, M, N, n0);
}

}  // namespace dense_gemv_detail

// Dynamic shared memory: dense_gemv_detail::Tiles<T>::kRingBytes (GEMV_SMEM * T / 2 in
// specs/dense_linear.yaml), T = 4 for m > 8 and n >= GEMV_WIDE_N, else 2; the grid has one CTA
// per 8 * T weight rows.
template <int T>
static __device__ __forceinline__ void dense_gemv_run(const __nv_bfloat16* x, const __nv_bfloat16* w,
                                                      __nv_bfloat16* out, uint32_t m, uint32_t n, uint32_t k,
                                                      uint8_t* smem) {
    namespace d = dense_gemv_detail;
    if ((k & 7u) == 0 && dense_mma::aligned16(x, w)) {
        d::run_async<T>(x, w, out, m, n, k, smem);
    } else {
        d::run_elementwise<T>(x, w, out, m, n, k, reinterpret_cast<float*>(smem));
    }
}

__global__ void __launch_bounds__(256, 2)
dense_gemv_bf16_kernel(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* out,
                       uint32_t m, uint32_t n, uint32_t k) {
    extern __shared__ __align__(128) uint8_t dense_gemv_smem[];
    if (m > dense_gemv_detail::kMaxRows) return;  // the launcher's applies_if; never reached through it
    // More rows of x make every CTA read more of x (an L1/L2 hit, all of it per CTA): past 8
    // rows, 32 weight rows a CTA keep that traffic at the 8-row level per weight byte, where the
    // weight is wide enough (n >= GEMV_WIDE_N) for such CTAs to fill the GPU twice over (on
    // 4096 x 12288 at 16 rows, 128 CTAs of 32 rows took 34.5 us against 32.6 for 256 of 16).
    if (m > 8 && n >= dense_gemv_detail::kWideN) {
        dense_gemv_run<4>(x, w, out, m, n, k, dense_gemv_smem);
    } else {
        dense_gemv_run<2>(x, w, out, m, n, k, dense_gemv_smem);
    }
}
