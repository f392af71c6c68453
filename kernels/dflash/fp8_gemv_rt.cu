// Register-tiled row-scaled FP8-weight GEMVs (module fp8_gemv_rt, kill switch
// METRALE_NO_DFLASH_FP8_RT):
//
//   out[m, n] = bf16(scale[n] * sum_k x[m, k] * q[n, k])
//
// x bf16 [rows, K], q E4M3 [N, K], scale f32 [N], f32 accumulation.
//   fp8_gemv_rt2:    rows <= 8,  one 8-column B tile per mma (MT = 1).
//   fp8_gemv_rt2_16: rows <= 16, two B tiles sharing each converted weight fragment (MT = 2).
// Both need K % 16 == 0 (the launchers' applies_if) so that every 16-byte weight piece is whole.
//
// The problem is pure bandwidth: the weight (N * K bytes) is read once, x (<= 16 rows) is an
// L1/L2 hit, and the arithmetic is far below the SM's issue rate. What decides the speed is
//   (1) bytes in flight: by Little's law the H200 needs ~4.5 TB/s x ~1 us ~ 4.5 MB of weight
//       requests outstanding at every moment, 30-40 KB per SM;
//   (2) start-up and tail: the small layers (o: 16.8 MB, 3.6 us at full speed) are a few
//       microseconds long, so the stream must start at once and no SM may sit idle;
//   (3) the x traffic: every CTA re-reads x for its K range from the L2, 2 * rows / R bytes per
//       weight byte for R weight rows sharing each x read, and the L2's request rate counts
//       as much as its bytes (see below).
// The previous design (8-CTA clusters over 128 rows, 64 KB of weight per CTA read in one batch,
// x staged in shared memory first, two cluster barriers) was start-up bound at 21-61% of copy
// bandwidth.
//
// Work split. A cluster of kCluster = 2 CTAs owns kRows = 64 consecutive weight rows; rank r
// takes the 128-k chunks [r * H, min(C, (r + 1) * H)) with C = ceil(K / 128), H = ceil(C / 2).
// The grid is 2 * ceil(N / 64) CTAs (128 for N = 4096, 192 for 6144, 768 for 24576, 4748 for
// the lm_head); each CTA reads 64 rows x K / 2 bytes (128 KB at K = 4096, 384 KB at 12288),
// as 64 contiguous streams. 64 rows per CTA keep the x re-reads at 2 * rows / 64 of the weight
// (25% at 8 rows, 50% at 16, L2 hits); the split along K doubles the CTA count so that the
// small layers still cover the 132 SMs.
//
// Streaming. Inside a CTA, warp w takes the 32 rows of row group w % 2 and the chunks
// c = w / 2 (mod 4) of the CTA's range (its phase), so the CTA walks its rows front to back,
// 512 bytes per row per round. A chunk of a warp is 32 rows x 128 bytes (one line of each
// row), copied with cp.async (16 bytes per copy, L2 only, evict-first, zero-filled past the
// end) in whole lines, 8 lanes a line, 8 copies a lane (kcommon::LineChunk: copies of 64 bytes
// per row capped the load structure near 80% of a streaming read). The chunk's x (8 * MT rows
// x 128 k) goes the same way into a slot that the phase's two warps share, each copying half
// of its rows as whole lines. Each warp streams its chunks through a ring of kStages = 2
// slots: while chunk i is multiplied, chunk i + 1 is in flight, 4 KB of weight a warp, 32 KB
// a CTA, 64 KB an SM (two CTAs resident: 64 KB of weight ring and 32 KB of x slots each, <= 128
// registers). Lanes read units other lanes of the pair copied, so two barriers of the pair
// (named barrier 1 + phase, 64 threads) per chunk order the slots (after the wait, before a
// slot is refilled); no CTA barrier in the loop. No barrier precedes the first weight request.
// Measured on the H200 at 16 rows (cold weights, one process), against x loaded into
// registers one chunk ahead by each warp (__ldg) with a 3-slot weight ring: those loads were
// two requests of 64 bytes per x line per warp, as many x requests as weight requests, and
// cost more than the third slot gains (gate_up 39.2 -> 33.8 us, qkv 15.9 -> 13.5, o 10.4 ->
// 9.1, down 19.0 -> 17.4, lm_head 189.4 -> 172.3; 1 and 8 rows gain too, the bits are equal).
//
// Waves (H200, 132 SMs, 2 CTAs per SM): qkv 192 CTAs, o and down 128, all resident at once
// with 32-64 KB of weight in flight per SM; gate_up 768 and the lm_head 4748 CTAs keep 64 KB
// in flight per SM while CTAs retire and start. Resident CTAs share the memory system, so an
// uneven count of CTAs per SM does not idle the memory: an SM with one CTA left still has
// 32 KB in flight.
//
// Products on the tensor cores with the weight as the A operand: an m16n8k16 mma takes 16
// weight rows x 16 k as A and x^T (16 k x 8 x rows) as B. The k order inside a 16-k step is a
// permutation chosen so that the fragments come straight from 16-byte units: for half h of a
// chunk, lane (g = lane / 4, t = lane % 4) multiplies unit t + 4h (bytes 64h + 16t .. + 15) of
// rows g and g + 8 of a 16-row tile, and step s (0..3) of the half uses word s of them, bytes
// j = 0..3 at k = 64h + 16t + 4s + j. The A slots (2t, 2t + 1) hold bytes (0, 2) and slots
// (2t + 8, 2t + 9) hold (1, 3) (the shift-only conversion of fp8_common.cuh); B takes x at the
// same k: (x[k + 0], x[k + 2]) and (x[k + 1], x[k + 3]), two byte permutes of x's words. The sum
// over a 16-k step covers the same 16 k, so the product is unchanged. Per lane and chunk: 8
// 16-byte shared loads, 32 conversions, 16 * MT mma.
//
// Reduction, deterministic. Each warp accumulates its chunks in increasing order; the warps'
// partials go through shared memory (the ring, drained) and each row's four (one row group's)
// are summed in phase order 0..3 to the CTA's partial; rank r finalises rows [32r, 32r + 32) of
// the tile: the other rank stores its partial for them into r's receive buffer (distributed
// shared memory), one cluster barrier (release / acquire), then out = bf16((p0 + p1) *
// scale[n]). (The _ks kernels below: C ranks, rank r finalising rows [64r / C, 64(r + 1) / C)
// as bf16((p0 + p1 + ... + p(C-1)) * scale[n]), added in rank order.) No atomics, no workspace;
// nothing touches another CTA's shared memory after the barrier, so no second barrier. The
// cluster barrier's first phase is arrived at when the CTA starts and waited on just before
// the remote stores (the partner CTA has started by then), so it costs nothing.
//
// K: the vector path needs 16-byte aligned q and x (with K % 16 == 0 a lane's 16 bytes are all
// in range or all out); otherwise weights and x are read byte by byte and stored into the same
// slots (the same arithmetic, not tuned). Rows of the tile beyond N read as zero and are not stored.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cstdint>

#include "../common/line_ring.cuh"
#include "../common/pdl.cuh"
#include "fp8_common.cuh"

namespace dflash_fp8_rt_detail {

using namespace dflash_fp8;
using L = kcommon::LineChunk;

constexpr uint32_t kCluster = 2;                         // CTAs per cluster along K (CLUSTER)
constexpr uint32_t kWarps = 8;
constexpr uint32_t kThreads = 32 * kWarps;               // THREADS
constexpr uint32_t kRows = 64;                           // weight rows per cluster (TILE_N)
constexpr uint32_t kRowGroups = 2;                       // warps w and w ^ 1 share a chunk's rows
constexpr uint32_t kPhases = kWarps / kRowGroups;        // ... and the chunks go round 4 phases
constexpr uint32_t kWarpRows = kRows / kRowGroups;       // 32 weight rows per warp
constexpr uint32_t kTiles = kWarpRows / 16;              // 16-row weight tiles per warp
constexpr uint32_t kChunk = 128;                         // k per chunk: one 128-byte line of a row
constexpr uint32_t kCopies = kWarpRows / 4;              // 16-byte copies per lane per chunk
constexpr uint32_t kStages = 2;                          // ring slots: kStages - 1 chunks in flight
constexpr uint32_t kSlotBytes = kThreads * 16;           // one 16-byte copy per thread
constexpr uint32_t kStageBytes = kCopies * kSlotBytes;   // 32 KB: one chunk of every warp
constexpr uint32_t kWRingBytes = kStages * kStageBytes;  // the weight ring
constexpr uint32_t kXRowBytes = 2 * kChunk;              // one x row of a chunk: 128 bf16
constexpr uint32_t kXSlotBytes = 16 * kXRowBytes;        // a phase's x of one chunk (<= 16 rows)
constexpr uint32_t kRingBytes = kWRingBytes + kStages * kPhases * kXSlotBytes;  // 98304 (RING_SMEM in the spec)
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
// exist for benchmarks/fp8_gemv_ablation.cu, which times the same kernel with part of the work
// left out to show where the time goes: loads (weight ring, x loads, reduction and cluster
// exchange kept; the shared-memory words are only folded together), convert (plus the E4M3 ->
// bf16 conversions, no tensor-core product) and mma (the products on the raw weight bytes,
// without the conversions). Only Work::full gives the product.
enum class Work { full, loads, convert, mma };

template <int MT, Work W = Work::full, uint32_t CL = kCluster>
struct Gemv {
    static_assert(CL == 2 || CL == 4 || CL == 8, "clusters of 2, 4 or 8 CTAs along K");
    static constexpr uint32_t kXRows = 8 * MT;                 // x rows covered (zero beyond rows)
    static constexpr uint32_t kXHalf = kXRows / kRowGroups;    // x rows of a chunk each warp of a pair copies
    static constexpr uint32_t kXCopies = kXHalf * 16 / 32;     // ... 16-byte copies per lane
    static_assert(kRowGroups == 2 && kXHalf * 16 % 32 == 0 && kXRows <= 16, "x slot layout");
    static constexpr uint32_t kOwned = kRows / CL;             // weight rows each rank finalises
    static constexpr uint32_t kOutPerThread = kRows * kXRows / kThreads;
    static_assert(kRows * kXRows % kThreads == 0 && kThreads % kRows == 0, "output mapping");
    static_assert(kWarps * kTiles * MT * 4 * kRedStride * 4 <= kRingBytes, "partials fit the ring");
    static_assert(kWarpRows % 16 == 0 && kChunk == kcommon::LineChunk::kLineBytes, "warp chunk layout");

    // The other ranks' partial sums of this rank's kOwned rows: [rank][row - kOwned * rank][x row]
    // (this rank's own slot unused).
    struct Shared {
        float recv[CL][kOwned][kXRows];
    };

    // acc[i][j] += tile i (rows g, g + 8 of 16) x x tile j, over one 64-k chunk:
    // w[i][h] = 16 weight bytes of row 16i + 8h + g at k0 + 16t, xv[j][h] = x row 8j + g,
    // k0 + 16t + 8h .. + 7.
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
    static __device__ __forceinline__ void mma_tile(float (&acc)[MT][4], const uint4& lo16, const uint4& hi16,
                                                    const uint32_t (&b)[4][MT][2]) {
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            const uint32_t lo = word(lo16, s), hi = word(hi16, s);
            const uint32_t a0 = e4m3_02_to_bf16x2(lo), a2 = e4m3_13_to_bf16x2(lo);
            const uint32_t a1 = e4m3_02_to_bf16x2(hi), a3 = e4m3_13_to_bf16x2(hi);
#pragma unroll
            for (int j = 0; j < MT; ++j) mma_bf16_16816(acc[j], a0, a1, a2, a3, b[s][j][0], b[s][j][1]);
        }
    }

    // The ablations' stand-in for mma_tile (see Work): each keeps the named part of the work
    // and folds its results into the accumulator so that nothing is optimised away.
    static __device__ __forceinline__ void ablated_tile(float (&acc)[MT][4], const uint4& lo16, const uint4& hi16,
                                                        const uint32_t (&b)[4][MT][2]) {
        uint32_t z = 0;
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            const uint32_t lo = word(lo16, s), hi = word(hi16, s);
            if constexpr (W == Work::loads) {
                z ^= lo ^ hi;
            } else if constexpr (W == Work::convert) {
                z ^= e4m3_02_to_bf16x2(lo) ^ e4m3_13_to_bf16x2(lo) ^ e4m3_02_to_bf16x2(hi) ^ e4m3_13_to_bf16x2(hi);
            } else {
                // raw bytes as bf16 operands, kept finite (no exponent field of all ones)
                const uint32_t m = 0x3f3f3f3fu;
#pragma unroll
                for (int j = 0; j < MT; ++j)
                    mma_bf16_16816(acc[j], lo & m, hi & m, (lo >> 2) & m, (hi >> 2) & m, b[s][j][0], b[s][j][1]);
            }
        }
        if constexpr (W != Work::mma) acc[0][0] += __uint_as_float(z & 0x3fffffffu);
    }

    template <bool VEC>
    static __device__ __forceinline__ void run(const __nv_bfloat16* x, const uint8_t* q, const float* scale,
                                               __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k,
                                               uint32_t tile, uint8_t* ring, Shared& sh) {
        cluster_arrive_relaxed();  // phase 1: "this CTA has started" (waited on before DSMEM use)
        const uint32_t rank = cluster_rank();
        const uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
        const uint32_t g = lane >> 2, t = lane & 3u;
        const uint32_t rgroup = warp % kRowGroups, phase = warp / kRowGroups;
        const uint32_t nch = (k + kChunk - 1) / kChunk;
        const uint32_t per_rank = (nch + CL - 1) / CL;
        const uint32_t cbeg = min(nch, rank * per_rank);
        const uint32_t cend = min(nch, cbeg + per_rank);
        const uint32_t mine = cend > cbeg + phase ? (cend - cbeg - phase + kPhases - 1) / kPhases : 0u;
        const uint32_t row0 = tile * kRows;
        const uint32_t wrow0 = row0 + rgroup * kWarpRows;  // this warp's 32 rows

        // This lane's copies: chunk row copy_row(l) (weight row wrow0 + 4l + lane / 8), unit
        // copy_unit: one base pointer, offsets l * 4k.
        const uint32_t unit = L::copy_unit(lane);
        uint32_t rows_ok = 0;
#pragma unroll
        for (uint32_t l = 0; l < kCopies; ++l) rows_ok |= (wrow0 + L::copy_row(l, lane) < n ? 1u : 0u) << l;
        const uint8_t* wbase = q + static_cast<uint64_t>(wrow0 + L::copy_row(0, lane)) * k + 16u * unit;
        const uint64_t rstride = 4ull * k;
        // Byte offset within a row of local chunk i; false past this warp's chunks.
        auto chunk_off = [&](uint32_t i, uint32_t& off) {
            off = (cbeg + phase + kPhases * i) * kChunk;
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
            // The phase's x slots: [stage][x row][16-byte unit u ^ (row % 2)] (the swizzle keeps
            // the fragment reads below free of bank conflicts).
            const uint32_t xbase = smem_addr(ring) + kWRingBytes + phase * kXSlotBytes;
            constexpr uint32_t kXStageBytes = kPhases * kXSlotBytes;
            auto x_unit = [](uint32_t row, uint32_t u) { return row * kXRowBytes + ((u ^ (row & 1u)) << 4); };
            // The two warps of a phase (w, w ^ 1) share its x slots, so their order is a barrier
            // of the pair (named barrier 1 + phase, 64 threads) rather than of the warp.
            const uint32_t pair_bar = 1u + phase;
            auto pair_sync = [&]() { kcommon::named_barrier_sync<32 * kRowGroups>(pair_bar); };
            // The weight units of chunk i: this lane's kCopies copies (16 bytes each, zero past
            // the end). The byte path (!VEC) fills the same slots synchronously from byte loads.
            auto issue_w = [&](uint32_t i, uint32_t slot) {
                uint32_t off;
                const bool ok = chunk_off(i, off) && off + 16u * unit < k;
#pragma unroll
                for (uint32_t l = 0; l < kCopies; ++l) {
                    const bool v = ok && ((rows_ok >> l) & 1u);
                    const uint32_t dst = base + L::copy_offset<kThreads>(slot * kCopies + l, lane);
                    if constexpr (VEC) {
                        cp_async16(dst, v ? wbase + l * rstride + off : q, v ? 16u : 0u, policy);
                    } else {
                        const uint32_t nb = v ? min(16u, k - off - 16u * unit) : 0u;
                        sts128(dst, load_w16(wbase + l * rstride + off, nb, false));
                    }
                }
            };
            // x rows [kXHalf * rgroup, + kXHalf) of chunk i (8 k a 16-byte unit, 16 units a row,
            // whole lines; zero past `rows` and past k): the pair copies the chunk's x once.
            auto issue_x = [&](uint32_t i, uint32_t slot) {
                uint32_t off;
                const bool ok = chunk_off(i, off);
#pragma unroll
                for (uint32_t c = 0; c < kXCopies; ++c) {
                    const uint32_t idx = c * 32u + lane;
                    const uint32_t xr = kXHalf * rgroup + idx / 16u, kk = off + 8u * (idx % 16u);
                    const uint32_t valid = !(ok && xr < rows) ? 0u : kk >= k ? 0u : VEC ? 8u : min(8u, k - kk);
                    const __nv_bfloat16* src = x + static_cast<uint64_t>(xr) * k + kk;
                    const uint32_t dst = xbase + slot * kXStageBytes + x_unit(xr, idx % 16u);
                    if constexpr (VEC) {
                        kcommon::cp_async16_zfill(dst, valid ? src : x, valid != 0u);
                    } else {
                        sts128(dst, valid ? load_x8(src, valid, false) : make_uint4(0u, 0u, 0u, 0u));
                    }
                }
            };
            // One commit group per chunk, empty-but-committed past the end, so that
            // wait_group<kStages - 1> always means "chunk i has landed".
#pragma unroll
            for (uint32_t s = 0; s + 1 < kStages; ++s) issue_w(s, s);
            // The weight is no kernel's output: its first chunks stream in while the kernel
            // before this one on the stream finishes (programmatic dependent launch); x is.
            // (The first group holds those weight copies and chunk 0's x.)
            kcommon::pdl_wait();
#pragma unroll
            for (uint32_t s = 0; s + 1 < kStages; ++s) {
                issue_x(s, s);
                if constexpr (VEC) cp_async_commit();
            }
            uint32_t s_read = 0, s_write = kStages - 1;
            for (uint32_t i = 0; i < mine; ++i) {
                pair_sync();  // both warps of the pair have read the slots refilled next
                issue_w(i + kStages - 1, s_write);
                issue_x(i + kStages - 1, s_write);
                if constexpr (VEC) {
                    cp_async_commit();
                    cp_async_wait<kStages - 1>();  // this thread's copies of chunk i have landed
                }
                pair_sync();  // ... and every other lane's of the pair
                const uint32_t slot = base + s_read * kStageBytes;
                const uint32_t xs = xbase + s_read * kXStageBytes;
#pragma unroll
                for (uint32_t h = 0; h < 2; ++h) {
                    // Half h of the chunk: weight units t + 4h (k = 64h + 16t .. + 15) of rows
                    // g and g + 8 of each tile; x rows 8j + g at the same k (units 8h + 2t,
                    // 8h + 2t + 1 of the row).
                    uint4 xv[MT][2];
#pragma unroll
                    for (int j = 0; j < MT; ++j)
#pragma unroll
                        for (uint32_t hh = 0; hh < 2; ++hh) xv[j][hh] = lds128(xs + x_unit(8u * j + g, 8u * h + 2u * t + hh));
                    uint32_t b[4][MT][2];
                    b_frags(b, xv);
#pragma unroll
                    for (uint32_t ti = 0; ti < kTiles; ++ti) {
                        const uint32_t r = 16u * ti + g, u = t + 4u * h;
                        const uint4 lo16 = lds128(slot + L::read_offset<kThreads>(0, r, u));
                        const uint4 hi16 = lds128(slot + L::read_offset<kThreads>(0, r + 8u, u));
                        if constexpr (W == Work::full) {
                            mma_tile(acc[ti], lo16, hi16, b);
                        } else {
                            ablated_tile(acc[ti], lo16, hi16, b);
                        }
                    }
                }
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

        // Thread -> outputs (r = tid % 64, x rows m = tid / 64 + 4u): the CTA's partial, the
        // row group's warps added in phase order; rows owned by the other rank go to its
        // receive buffer.
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
        cluster_wait();  // phase 1: the partner CTA has started, its shared memory exists
        if (owner != rank) {
#pragma unroll
            for (uint32_t u = 0; u < kOutPerThread; ++u) {
                const uint32_t m = threadIdx.x / kRows + u * (kThreads / kRows);
                st_cluster_f32(smem_addr(&sh.recv[rank][r % kOwned][m]), owner, part[u]);
            }
        }
        cluster_arrive_release();  // phase 2: partials delivered
        cluster_wait();
        const uint32_t row = row0 + r;
        if (owner == rank && row < n) {
            const float sc = __ldg(scale + row);
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

    // Weight-row tile `tile` (rows [64 tile, 64 tile + 64)) of one product.
    static __device__ __forceinline__ void launch(const __nv_bfloat16* x, const __nv_fp8_e4m3* q8,
                                                  const float* scale, __nv_bfloat16* out, uint32_t rows,
                                                  uint32_t n, uint32_t k, uint32_t tile, uint8_t* ring,
                                                  Shared& sh) {
        const uint8_t* q = reinterpret_cast<const uint8_t*>(q8);
        if ((k & 15u) == 0 && aligned16(q, x)) {
            run<true>(x, q, scale, out, rows, n, k, tile, ring, sh);
        } else {
            run_bytes(x, q, scale, out, rows, n, k, tile, ring, sh);
        }
    }
    // The byte path out of line, so that it does not add to the vector path's registers.
    static __device__ __noinline__ void run_bytes(const __nv_bfloat16* x, const uint8_t* q, const float* scale,
                                                  __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k,
                                                  uint32_t tile, uint8_t* ring, Shared& sh) {
        run<false>(x, q, scale, out, rows, n, k, tile, ring, sh);
    }
};

// The _ks kernels' body: the weight-row tile blockIdx.x / C of one product, in clusters of C
// CTAs (dynamic shared memory RING_SMEM; static: the receive buffer).
template <int MT, uint32_t C>
static __device__ __forceinline__ void gemv_tile(const __nv_bfloat16* x, const __nv_fp8_e4m3* q, const float* scale,
                                                 __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k) {
    using G = Gemv<MT, Work::full, C>;
    extern __shared__ __align__(128) uint8_t dflash_fp8_rt_ring[];
    __shared__ typename G::Shared sh;
    G::launch(x, q, scale, out, rows, n, k, blockIdx.x / C, dflash_fp8_rt_ring, sh);
}

}  // namespace dflash_fp8_rt_detail

// Grid: CLUSTER * ceil(n / TILE_N) CTAs of THREADS; dynamic shared memory RING_SMEM (the
// weight ring, reused for the warps' partials); static: the f32 receive buffer.
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(256, 2)
dflash_fp8_gemv_rt2_kernel(const __nv_bfloat16* x, const __nv_fp8_e4m3* q, const float* scale,
                           __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k) {
    using G = dflash_fp8_rt_detail::Gemv<1>;
    extern __shared__ __align__(128) uint8_t dflash_fp8_rt_ring[];
    __shared__ G::Shared sh;
    G::launch(x, q, scale, out, rows, n, k, blockIdx.x / dflash_fp8_rt_detail::kCluster, dflash_fp8_rt_ring, sh);
}

__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(256, 2)
dflash_fp8_gemv_rt2_16_kernel(const __nv_bfloat16* x, const __nv_fp8_e4m3* q, const float* scale,
                              __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k) {
    using G = dflash_fp8_rt_detail::Gemv<2>;
    extern __shared__ __align__(128) uint8_t dflash_fp8_rt_ring[];
    __shared__ G::Shared sh;
    G::launch(x, q, scale, out, rows, n, k, blockIdx.x / dflash_fp8_rt_detail::kCluster, dflash_fp8_rt_ring, sh);
}

// Few weight rows (delta and selector projections: N = 512 and 256, 8 and 4 tiles): the same
// GEMVs with K split over a cluster of C = 4 or 8 CTAs instead of 2, so that such a weight
// still spreads over 64 CTAs (32 KB each at K = 4096) rather than 16 or 8, each rank
// finalising 64 / C rows with the other ranks' partials added in rank order. Measured on the
// H200 (16 rows, cold weights): N = 512 6.2 us with C = 8 against 8.3 us with C = 2; from 128
// CTAs on (N >= 4096), C = 2 is faster.
template <uint32_t C>
__global__ void __cluster_dims__(C, 1, 1) __launch_bounds__(256, 2)
dflash_fp8_gemv_rt2_ks_kernel(const __nv_bfloat16* x, const __nv_fp8_e4m3* q, const float* scale,
                              __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k) {
    dflash_fp8_rt_detail::gemv_tile<1, C>(x, q, scale, out, rows, n, k);
}

template <uint32_t C>
__global__ void __cluster_dims__(C, 1, 1) __launch_bounds__(256, 2)
dflash_fp8_gemv_rt2_16_ks_kernel(const __nv_bfloat16* x, const __nv_fp8_e4m3* q, const float* scale,
                                 __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k) {
    dflash_fp8_rt_detail::gemv_tile<2, C>(x, q, scale, out, rows, n, k);
}

// Three products of the same x in one launch (a layer's q, k and v projections): the clusters
// take the weight-row tiles of q0, then of q1, then of q2 (ceil(n_i / TILE_N) each), and each
// computes its tile exactly as dflash_fp8_gemv_rt2_16_kernel does, so every output has the
// bits of the separate launches. One grid streams all three weights: the small ones (k and v:
// 4 MB at 1024 x 4096) no longer each pay a launch's start-up and tail.
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(256, 2)
dflash_fp8_gemv_rt2_16_x3_kernel(const __nv_bfloat16* x, const __nv_fp8_e4m3* q0, const float* scale0,
                                 __nv_bfloat16* out0, const __nv_fp8_e4m3* q1, const float* scale1,
                                 __nv_bfloat16* out1, const __nv_fp8_e4m3* q2, const float* scale2,
                                 __nv_bfloat16* out2, uint32_t rows, uint32_t n0, uint32_t n1, uint32_t n2,
                                 uint32_t k) {
    namespace d = dflash_fp8_rt_detail;
    using G = d::Gemv<2>;
    extern __shared__ __align__(128) uint8_t dflash_fp8_rt_ring[];
    __shared__ G::Shared sh;
    const uint32_t t0 = (n0 + d::kRows - 1) / d::kRows, t1 = (n1 + d::kRows - 1) / d::kRows;
    const uint32_t tile = blockIdx.x / d::kCluster;
    if (tile < t0) {
        G::launch(x, q0, scale0, out0, rows, n0, k, tile, dflash_fp8_rt_ring, sh);
    } else if (tile < t0 + t1) {
        G::launch(x, q1, scale1, out1, rows, n1, k, tile - t0, dflash_fp8_rt_ring, sh);
    } else {
        G::launch(x, q2, scale2, out2, rows, n2, k, tile - t0 - t1, dflash_fp8_rt_ring, sh);
    }
}
