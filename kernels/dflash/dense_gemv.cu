// Dense bf16 GEMV for few rows (m <= 16), memory-bound on the weights:
//
//   out[r, n] = bf16( sum_k f32(x[r, k]) * f32(w[n, k]) ),   x [m, k], w [n, k] (nn.Linear), out [m, n]
//
// Work split: each CTA (8 warps) owns 16 consecutive weight rows n0 .. n0 + 15 and streams them
// once over the whole of k; the grid is ceil(n / 16) CTAs (256 for n = 4096, 9496 for the
// lm_head). Within the CTA, k is cut into chunks of 32 and chunk c goes to warp c % 8, so the
// CTA reads each weight row front to back, 512 contiguous bytes per row per round of the 8 warps.
//
// Products on the tensor cores (mma.sync m16n8k16): B is a weight tile of 8 rows x 16 k and A
// the (up to) 16 rows of x. Lane (g, t) takes 16 bytes of weight row n0 + 8j + g at
// k = 32c + 8t .. + 7 for each of its warp's four 8-row tiles j, and the matching 16 bytes of x
// rows g and g + 8. The 8 values of a lane feed two MMAs as k slots {2t, 2t+1, 8+2t, 9+2t}:
// words .x/.y in the first, .z/.w in the second; A uses the same assignment, so the sum over k
// is unchanged (see dense_mma.cuh). Rows of x beyond m and k beyond the end read as zeros.
//
// Memory-level parallelism (the point of this design). A GEMV is bound by how many weight
// bytes are in flight: by Little's law the H200 needs roughly latency (~1 us loaded) x 4.3 TB/s
// ~ 4-5 MB in flight over the whole GPU, 30-40 KB per SM, at every moment. A register double
// buffer (the earlier design) keeps about one 64-byte chunk per lane outstanding, 16 KB per CTA,
// which capped n = 4096 (128 CTAs, one per SM) near 45% of copy bandwidth. Here each thread
// streams its weights through a private ring of kStages = 5 slots in shared memory with
// cp.async (16 bytes each, L2 only, zero-filled past the end): while chunk i is multiplied,
// chunks i + 1 .. i + 4 are in flight, 4 x 32 = 128 bytes per lane, 32 KB per CTA. No register
// holds data in flight, so the depth costs no registers. A thread only ever reads the slots it
// wrote itself, so cp.async.wait_group is the only synchronisation in the loop (no barrier);
// a slot is refilled only after the MMAs that read it were issued. x (re-read by every CTA, an
// L1/L2 hit) goes through registers one chunk ahead.
//   In flight per CTA: 32 KB; shared memory 40 KB per CTA (5 slots x 2 tiles x 256 threads x
//   16 bytes; the reduction buffer reuses it). H200: two CTAs per SM (registers), so n = 4096
//   (256 CTAs) is resident in one wave with 64 KB in flight per SM, and the larger layers keep
//   that while CTAs retire and start. 16 rows per CTA rather than 32: twice the CTAs fill the
//   SMs sooner and keep more requests in flight (measured on the H200 with cold weights, rows 1
//   / 16: o 15.3 / 16.4 -> 13.6 / 14.9 us, down 38.7 / 41.8 -> 33.5 / 34.3 us, lm_head 317 / 379
//   -> 317 / 338 us), although every CTA reads all of x (an L1/L2 hit) for half the weight bytes.

// Reduction order (deterministic): each warp accumulates its chunks in increasing order in the
// MMA's f32 accumulators; the 8 warps' partial sums go through shared memory and one thread per
// output adds them in warp order 0..7 to 0.0f, then rounds once to bf16.
//
// Vector path: k % 8 == 0 and x, w 16-byte aligned (the cp.async ring); otherwise loads element
// by element through registers (any k, any alignment; correctness path, not tuned).
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "dense_mma.cuh"

namespace dense_gemv_detail {

using namespace dense_mma;

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kTiles = 2;                // 8-row weight tiles per CTA (all warps share them)
constexpr int kRowsPerCta = 8 * kTiles;  // 16 (GEMV_ROWS in specs/dense_linear.yaml)
constexpr int kMaxRows = 16;             // rows of x (one m16 MMA)
constexpr int kStages = 5;               // ring slots per thread: kStages - 1 chunks in flight
constexpr int kSlotBytes = kThreads * 16;                      // one tile's 16 bytes per thread
constexpr int kRingBytes = kStages * kTiles * kSlotBytes;      // 40960 (GEMV_SMEM in the spec)
constexpr int kRedFloats = kWarps * kTiles * 4 * 32;           // 8 KB, reuses the ring
static_assert(kRedFloats * 4 <= kRingBytes, "reduction buffer must fit in the ring");

// Warp partials -> shared memory -> fixed-order sum per output, rounded once.
// Output (row r, column n0 + nl): tile nl / 8, accumulator lane (r % 8) * 4 + (nl % 8) / 2,
// register (r / 8) * 2 + nl % 2. Consecutive threads take consecutive columns.
static __device__ __forceinline__ void reduce_store(const float (&acc)[kTiles][4], float* red,
                                                    __nv_bfloat16* __restrict__ out, uint32_t M,
                                                    uint32_t N, uint32_t n0) {
    const uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
#pragma unroll
    for (int j = 0; j < kTiles; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) red[(warp * (kTiles * 4) + j * 4 + r) * 32 + lane] = acc[j][r];
    __syncthreads();
    for (uint32_t o = threadIdx.x; o < kMaxRows * kRowsPerCta; o += blockDim.x) {
        const uint32_t r = o / kRowsPerCta, nl = o % kRowsPerCta;
        const uint32_t n = n0 + nl;
        if (r >= M || n >= N) continue;
        const uint32_t j = nl >> 3, nn = nl & 7u;
        const uint32_t src_lane = (r & 7u) * 4u + (nn >> 1);
        const uint32_t reg = (r >> 3) * 2u + (nn & 1u);
        float s = 0.f;
#pragma unroll
        for (int wp = 0; wp < kWarps; ++wp) s += red[(wp * (kTiles * 4) + j * 4 + reg) * 32 + src_lane];
        out[static_cast<uint64_t>(r) * N + n] = __float2bfloat16_rn(s);
    }
}

// Vector path: k % 8 == 0, x and w 16-byte aligned.
static __device__ __forceinline__ void run_async(const __nv_bfloat16* __restrict__ x,
                                                 const __nv_bfloat16* __restrict__ w,
                                                 __nv_bfloat16* __restrict__ out, uint32_t M,
                                                 uint32_t N, uint32_t K, uint8_t* smem) {
    const uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const uint32_t g = lane >> 2, t = lane & 3u;
    const uint32_t n0 = blockIdx.x * kRowsPerCta;

    const __nv_bfloat16* wrow[kTiles];
    bool wok[kTiles];
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
        const uint32_t n = n0 + 8u * j + g;
        wok[j] = n < N;
        wrow[j] = w + static_cast<uint64_t>(wok[j] ? n : 0u) * K;
    }
    const __nv_bfloat16* xa = g < M ? x + static_cast<uint64_t>(g) * K : nullptr;
    const __nv_bfloat16* xb = g + 8u < M ? x + static_cast<uint64_t>(g + 8u) * K : nullptr;

    const uint32_t nchunks = (K + 31u) / 32u;
    // Slot (stage s, tile j) of this thread: ring + (s * kTiles + j) * kSlotBytes.
    const uint32_t ring = smem_addr(smem) + threadIdx.x * 16u;

    // One commit group per chunk (empty-but-committed past the end keeps the group count
    // uniform, so wait_group<kStages - 1> always means "chunk i has landed").
    auto issue = [&](uint32_t c, uint32_t s) {
        const uint32_t k = c * 32u + 8u * t;
        const bool valid = c < nchunks && k < K;  // k % 8 == 0: all 8 values exist
#pragma unroll
        for (int j = 0; j < kTiles; ++j) {
            const bool p = valid && wok[j];
            cp_async16_zfill(ring + (s * kTiles + j) * kSlotBytes, p ? wrow[j] + k : w, p);
        }
        cp_async_commit();
    };
    auto load_x = [&](const __nv_bfloat16* p, uint32_t c) {
        const uint32_t k = c * 32u + 8u * t;
        return (p != nullptr && c < nchunks && k < K) ? __ldg(reinterpret_cast<const uint4*>(p + k))
                                                      : make_uint4(0u, 0u, 0u, 0u);
    };

#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) issue(warp + kWarps * s, s);

    float acc[kTiles][4];
#pragma unroll
    for (int j = 0; j < kTiles; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

    uint4 xa_n = load_x(xa, warp), xb_n = load_x(xb, warp);
    uint32_t s_read = 0, s_write = kStages - 1;
    for (uint32_t c = warp; c < nchunks; c += kWarps) {
        // Refill the slot read in the previous iteration (its MMAs are already issued).
        issue(c + kWarps * (kStages - 1), s_write);
        const uint4 a = xa_n, b = xb_n;
        xa_n = load_x(xa, c + kWarps);
        xb_n = load_x(xb, c + kWarps);
        cp_async_wait<kStages - 1>();  // this thread's copies of chunk c have landed
        uint4 wv[kTiles];
#pragma unroll
        for (int j = 0; j < kTiles; ++j) wv[j] = lds128(ring + (s_read * kTiles + j) * kSlotBytes);
#pragma unroll
        for (int j = 0; j < kTiles; ++j) {
            mma_bf16(acc[j], a.x, b.x, a.y, b.y, wv[j].x, wv[j].y);
            mma_bf16(acc[j], a.z, b.z, a.w, b.w, wv[j].z, wv[j].w);
        }
        s_read = s_read + 1 == kStages ? 0u : s_read + 1;
        s_write = s_write + 1 == kStages ? 0u : s_write + 1;
    }
    cp_async_wait<0>();  // drain (zero-fill copies past the end) before the ring is reused
    __syncthreads();
    reduce_store(acc, reinterpret_cast<float*>(smem), out, M, N, n0);
}

// Element path (k % 8 != 0 or a pointer not 16-byte aligned): register double buffer.
struct Chunk {
    uint4 w[kTiles];
    uint4 a, b;  // x rows g and g + 8
};

static __device__ __forceinline__ void load_chunk(Chunk& ch, uint32_t c, uint32_t nchunks,
                                                  const __nv_bfloat16* const (&wrow)[kTiles],
                                                  const bool (&wok)[kTiles],
                                                  const __nv_bfloat16* xa, const __nv_bfloat16* xb,
                                                  uint32_t K, uint32_t t) {
    const uint32_t k = c * 32u + 8u * t;
    const int64_t valid = c < nchunks ? static_cast<int64_t>(K) - k : 0;
#pragma unroll
    for (int j = 0; j < kTiles; ++j)
        ch.w[j] = wok[j] ? load8<false, true>(wrow[j] + k, valid) : make_uint4(0u, 0u, 0u, 0u);
    ch.a = xa ? load8<false, false>(xa + k, valid) : make_uint4(0u, 0u, 0u, 0u);
    ch.b = xb ? load8<false, false>(xb + k, valid) : make_uint4(0u, 0u, 0u, 0u);
}

static __device__ __noinline__ void run_elementwise(const __nv_bfloat16* __restrict__ x,
                                                    const __nv_bfloat16* __restrict__ w,
                                                    __nv_bfloat16* __restrict__ out, uint32_t M,
                                                    uint32_t N, uint32_t K, float* red) {
    const uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const uint32_t g = lane >> 2, t = lane & 3u;
    const uint32_t n0 = blockIdx.x * kRowsPerCta;

    const __nv_bfloat16* wrow[kTiles];
    bool wok[kTiles];
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
        const uint32_t n = n0 + 8u * j + g;
        wok[j] = n < N;
        wrow[j] = w + static_cast<uint64_t>(wok[j] ? n : 0u) * K;
    }
    const __nv_bfloat16* xa = g < M ? x + static_cast<uint64_t>(g) * K : nullptr;
    const __nv_bfloat16* xb = g + 8u < M ? x + static_cast<uint64_t>(g + 8u) * K : nullptr;

    float acc[kTiles][4];
#pragma unroll
    for (int j = 0; j < kTiles; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

    const uint32_t nchunks = (K + 31u) / 32u;
    Chunk cur;
    load_chunk(cur, warp, nchunks, wrow, wok, xa, xb, K, t);
    for (uint32_t c = warp; c < nchunks; c += kWarps) {
        Chunk nxt;
        load_chunk(nxt, c + kWarps, nchunks, wrow, wok, xa, xb, K, t);
#pragma unroll
        for (int j = 0; j < kTiles; ++j) {
            mma_bf16(acc[j], cur.a.x, cur.b.x, cur.a.y, cur.b.y, cur.w[j].x, cur.w[j].y);
            mma_bf16(acc[j], cur.a.z, cur.b.z, cur.a.w, cur.b.w, cur.w[j].z, cur.w[j].w);
        }
        cur = nxt;
    }
    reduce_store(acc, red, out, M, N, n0);
}

}  // namespace dense_gemv_detail

// Dynamic shared memory: dense_gemv_detail::kRingBytes (GEMV_SMEM in specs/dense_linear.yaml).
__global__ void __launch_bounds__(256, 2)
dense_gemv_bf16_kernel(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* out,
                       uint32_t m, uint32_t n, uint32_t k) {
    namespace d = dense_gemv_detail;
    extern __shared__ __align__(128) uint8_t dense_gemv_smem[];
    if (m > d::kMaxRows) return;  // the launcher's applies_if; never reached through it
    if ((k & 7u) == 0 && dense_mma::aligned16(x, w)) {
        d::run_async(x, w, out, m, n, k, dense_gemv_smem);
    } else {
        d::run_elementwise(x, w, out, m, n, k, reinterpret_cast<float*>(dense_gemv_smem));
    }
}
