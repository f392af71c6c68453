// Register-tiled row-scaled FP8-weight GEMVs (module fp8_gemv_rt, kill switch
// METRALE_NO_DFLASH_FP8_RT):
//
//   out[m, n] = bf16(scale[n] * sum_k x[m, k] * q[n, k])
//
// x bf16 [rows, K], q E4M3 [N, K], scale f32 [N], f32 accumulation.
//   fp8_gemv_rt2:    rows <= 8,  one 8-column B tile per mma (MT = 1).
//   fp8_gemv_rt2_16: rows <= 16, two B tiles sharing each converted weight fragment (MT = 2).
// Both need K % 16 == 0 (the launchers' applies_if) so that every 16-byte weight piece is whole.
// The GEMV itself (gemv_stream::Gemv, with the E4M3 format gemv_stream::E4M3Rows) lives in
// gemv_stream.cuh, which dense_gemv.cu shares for BF16 weights; this header explains its design.
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
// Halving the x re-reads instead, with 128-row tiles (gemv_stream's RG = 4: four row groups,
// two chunk phases, x slots shared by four warps), was measured and not taken (H200, cold
// weights, back-to-back launches, us, shipped / 128 rows in 2-CTA clusters / 128 rows in
// 4-CTA clusters at the shipped CTA count): 16 rows, qkv 13.2 / 13.3 / 15.8, o 8.9 / 12.5 /
// 15.1, gate_up 33.3 / 38.2 / 44.7, down 17.3 / 26.4 / 28.2, lm_head 170.0 / 166.1 / 225.9;
// 1 row, o 8.0 / 10.5 / 11.1. Half the CTAs (or longer K ranges) cost more than the x traffic
// saves, and clusters of 4 along K are slower than of 2 (64-row tiles in 4-CTA clusters: o at
// 16 rows 13.2 us). 128-row tiles over the whole of K (no cluster, us against rt1's 64-row
// tiles, 16 / 1 rows): gate_up 32.0 / 28.1 against 33.4 / 29.0, but the lm_head 158.8 against
// 154.6, qkv 17.8 against 11.3 (fewer CTAs than SMs), down 45.6 against 25.1; not taken for one
// shape's 4%. (NVFP4 weights, whose x traffic per weight byte is twice E4M3's, gain at 9-16 rows
// on the lm_head: w4a16_gemv_rt1_128.)
//
// Waves (H200, 132 SMs, 2 CTAs per SM): qkv 192 CTAs, o and down 128, all resident at once
// with 32-64 KB of weight in flight per SM; gate_up 768 and the lm_head 4748 CTAs keep 64 KB
// in flight per SM while CTAs retire and start. Resident CTAs share the memory system, so an
// uneven count of CTAs per SM does not idle the memory: an SM with one CTA left still has
// 32 KB in flight. The split along K pays only for the small layers, though: where the 2-CTA
// grid exceeds one CTA an SM (qkv, gate_up, the lm_head), the whole-K form without a cluster
// (fp8_gemv_rt1 / rt1_16, below) is faster, and the chain takes it there.
//
// What bounds a warp (Nsight Compute on the H200, o at 16 rows: 128 CTAs, 2 warps a scheduler):
// 0.40 instructions issued a cycle per scheduler, 60% of cycles with no eligible warp, the
// stalls led by the wait for a chunk to land (long_sb at the phase barrier, 21% of samples); at
// 1 row the same (0.37 issued, long_sb 27%). A loop with 23% fewer instructions a chunk (copies
// of whole chunks with no per-copy selects, the ring's slots unrolled: 514 -> 396 at 16 rows)
// was measured and not taken: qkv at 16 rows 13.3 -> 12.5 us, o and down unchanged, gate_up
// 33.3 -> 34.3 and the lm_head 169 -> 170-172 (A/B/A, cold weights, back-to-back launches).
// Two chunks of each warp in flight instead (gemv_stream's ST = 3: a 3-slot ring, 144 KB, one
// CTA an SM, the same bytes in flight an SM) was measured and not taken either (us, shipped /
// 3 slots, 16 rows): o 9.1 / 9.8, down 17.3 / 17.5, qkv 13.4 / 16.5; whole K (rt1 / rt1 with 3
// slots): qkv 11.3 / 11.9, gate_up 33.4 / 32.9, lm_head 150.7 / 169.6. (BF16 weights, whose
// whole-K CTAs stream twice the bytes, gain from it on qkv: dense_gemv_rt1.)
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

#include "gemv_stream.cuh"

namespace dflash_fp8_rt_detail {

constexpr uint32_t kCluster = 2;  // CTAs per cluster along K (CLUSTER)
constexpr uint32_t kRows = 64;    // weight rows per cluster (TILE_N)
static_assert(kCluster == gemv_stream::kCluster && kRows == gemv_stream::kRows, "gemv_stream's layout");
using gemv_stream::kThreads;  // THREADS
using Work = gemv_stream::Work;
template <int MT, Work W = Work::full, uint32_t CL = kCluster>
using Gemv = gemv_stream::Gemv<gemv_stream::E4M3Rows, MT, W, CL>;
constexpr uint32_t kRingBytes = 98304;  // RING_SMEM in the spec: the rings of Gemv<1> and Gemv<2>
static_assert(Gemv<1>::kRingBytes == kRingBytes && Gemv<2>::kRingBytes == kRingBytes, "RING_SMEM");
constexpr uint32_t kRing32Bytes = 131072;  // RING_SMEM_32: Gemv<4>'s, x slots of 32 rows
static_assert(Gemv<4>::kRingBytes == kRing32Bytes, "RING_SMEM_32");
// The 64-row kernels (below): six x tiles up to 48 rows, eight above, over 64- or (RG = 4) 128-row
// tiles; one ring (the eight tiles') serves both.
template <uint32_t C, uint32_t RG = gemv_stream::kRowGroups>
using Rows64 = gemv_stream::ByRows<gemv_stream::E4M3Rows, C, gemv_stream::kStages, RG, 6, 8>;
constexpr uint32_t kRing64Bytes = 196608;      // RING_SMEM_64: x slots of 64 rows
constexpr uint32_t kRing64x128Bytes = 131072;  // RING_SMEM_64_128: the 128-row tiles' (two phases)
static_assert(Rows64<2>::G2::kRingBytes == kRing64Bytes && Rows64<1, 4>::G2::kRingBytes == kRing64x128Bytes,
              "RING_SMEM_64, RING_SMEM_64_128");

// The _ks, rt1 and 32-row kernels' body: the weight-row tile blockIdx.x / C of one product with MT
// 8-row x tiles, in clusters of C CTAs (dynamic shared memory: the ring; static: the receive
// buffer). (The rt2, rt2_16 and x3 kernels declare their ring themselves: through this helper,
// the byte-path function an x3 kernel shares with rt2_16 or rt1_16 compiled to other machine
// code, not measured.)
template <int MT, uint32_t C>
static __device__ __forceinline__ void gemv_tile(const __nv_bfloat16* x, const __nv_fp8_e4m3* q, const float* scale,
                                                 __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k) {
    gemv_stream::tile<Gemv<MT, Work::full, C>, C>(x, q, scale, out, rows, n, k);
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

// Weights of many row tiles (qkv, gate / up, the lm_head): the same GEMVs without the cluster,
// each CTA streaming the whole of K for its 64 weight rows (twice the bytes for the same fixed
// costs: start-up, reduction, and no cluster barrier). The chain takes them when the 2-CTA
// grid would exceed one CTA an SM (specs/fp8_gemv_rt.yaml). Measured on the H200 (cold weights,
// back-to-back launches, benchmarks/fp8_gemv_ablation.cu, rt2 / rt1 us): 16 rows, qkv 13.2 /
// 11.1, gate_up 33.4 / 33.1, lm_head 169.1 / 154.4; 1 row, qkv 11.0 / 10.0, gate_up 29.3 / 28.6,
// lm_head 144.4 / 141.9; with fewer tiles than that the split K wins (o, 64 tiles: 8.9 / 10.6 at
// 16 rows; down, 64 tiles of K = 12288: 17.2 / 24.7).
__global__ void __cluster_dims__(1, 1, 1) __launch_bounds__(256, 2)
dflash_fp8_gemv_rt1_kernel(const __nv_bfloat16* x, const __nv_fp8_e4m3* q, const float* scale,
                           __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k) {
    dflash_fp8_rt_detail::gemv_tile<1, 1>(x, q, scale, out, rows, n, k);
}

__global__ void __cluster_dims__(1, 1, 1) __launch_bounds__(256, 2)
dflash_fp8_gemv_rt1_16_kernel(const __nv_bfloat16* x, const __nv_fp8_e4m3* q, const float* scale,
                              __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k) {
    dflash_fp8_rt_detail::gemv_tile<2, 1>(x, q, scale, out, rows, n, k);
}

// 17-32 rows (two 16-row blocks of a batch, say): the same GEMVs with four 8-column x tiles
// sharing each converted weight fragment and x slots of 32 rows (RING_SMEM_32, one CTA an SM),
// split K (rt2_32) or whole K (rt1_32) by the rule of the 8- and 16-row forms. At these rows the
// tile GEMMs stream the weight no faster than at 64 (fp8_gemm_n128_row_scaled: qkv 22.2 us at 17
// rows on the H200, 24.4 at 64, against 18.5 for cuBLAS on bf16 weights, twice the bytes). For
// few weight rows (the delta projection), K split over clusters of C = 8 or 4 (rt2_32_ks, as
// rt2_16_ks).
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(256, 1)
dflash_fp8_gemv_rt2_32_kernel(const __nv_bfloat16* x, const __nv_fp8_e4m3* q, const float* scale,
                              __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k) {
    dflash_fp8_rt_detail::gemv_tile<4, 2>(x, q, scale, out, rows, n, k);
}

template <uint32_t C>
__global__ void __cluster_dims__(C, 1, 1) __launch_bounds__(256, 1)
dflash_fp8_gemv_rt2_32_ks_kernel(const __nv_bfloat16* x, const __nv_fp8_e4m3* q, const float* scale,
                                 __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k) {
    dflash_fp8_rt_detail::gemv_tile<4, C>(x, q, scale, out, rows, n, k);
}

__global__ void __cluster_dims__(1, 1, 1) __launch_bounds__(256, 1)
dflash_fp8_gemv_rt1_32_kernel(const __nv_bfloat16* x, const __nv_fp8_e4m3* q, const float* scale,
                              __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k) {
    dflash_fp8_rt_detail::gemv_tile<4, 1>(x, q, scale, out, rows, n, k);
}

// Three products of the same x in one launch (a layer's q, k and v projections): the clusters
// (of C CTAs along K: 2, or 1 for the whole of K) take the weight-row tiles of q0, then of q1,
// then of q2 (ceil(n_i / TILE_N) each), and each computes its tile exactly as
// dflash_fp8_gemv_rt2_16_kernel (C = 2) or dflash_fp8_gemv_rt1_16_kernel (C = 1) does, so every
// output has the bits of the separate launches. One grid streams all three weights: the small
// ones (k and v: 4 MB at 1024 x 4096) no longer each pay a launch's start-up and tail.
namespace dflash_fp8_rt_detail {
template <uint32_t C>
static __device__ __forceinline__ void gemv_x3(const __nv_bfloat16* x, const __nv_fp8_e4m3* q0, const float* scale0,
                                               __nv_bfloat16* out0, const __nv_fp8_e4m3* q1, const float* scale1,
                                               __nv_bfloat16* out1, const __nv_fp8_e4m3* q2, const float* scale2,
                                               __nv_bfloat16* out2, uint32_t rows, uint32_t n0, uint32_t n1,
                                               uint32_t n2, uint32_t k, uint8_t* ring,
                                               typename Gemv<2, Work::full, C>::Shared& sh) {
    using G = Gemv<2, Work::full, C>;
    const uint32_t t0 = (n0 + kRows - 1) / kRows, t1 = (n1 + kRows - 1) / kRows;
    const uint32_t tile = blockIdx.x / C;
    if (tile < t0) {
        G::launch(x, q0, scale0, out0, rows, n0, k, tile, ring, sh);
    } else if (tile < t0 + t1) {
        G::launch(x, q1, scale1, out1, rows, n1, k, tile - t0, ring, sh);
    } else {
        G::launch(x, q2, scale2, out2, rows, n2, k, tile - t0 - t1, ring, sh);
    }
}
}  // namespace dflash_fp8_rt_detail

#define DFLASH_FP8_X3_ARGS                                                                               \
    const __nv_bfloat16 *x, const __nv_fp8_e4m3 *q0, const float *scale0, __nv_bfloat16 *out0,           \
        const __nv_fp8_e4m3 *q1, const float *scale1, __nv_bfloat16 *out1, const __nv_fp8_e4m3 *q2,     \
        const float *scale2, __nv_bfloat16 *out2, uint32_t rows, uint32_t n0, uint32_t n1, uint32_t n2, \
        uint32_t k

__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(256, 2) dflash_fp8_gemv_rt2_16_x3_kernel(DFLASH_FP8_X3_ARGS) {
    extern __shared__ __align__(128) uint8_t dflash_fp8_rt_ring[];
    __shared__ dflash_fp8_rt_detail::Gemv<2, dflash_fp8_rt_detail::Work::full, 2>::Shared sh;
    dflash_fp8_rt_detail::gemv_x3<2>(x, q0, scale0, out0, q1, scale1, out1, q2, scale2, out2, rows, n0, n1, n2, k,
                                     dflash_fp8_rt_ring, sh);
}

__global__ void __cluster_dims__(1, 1, 1) __launch_bounds__(256, 2) dflash_fp8_gemv_rt1_16_x3_kernel(DFLASH_FP8_X3_ARGS) {
    extern __shared__ __align__(128) uint8_t dflash_fp8_rt_ring[];
    __shared__ dflash_fp8_rt_detail::Gemv<2, dflash_fp8_rt_detail::Work::full, 1>::Shared sh;
    dflash_fp8_rt_detail::gemv_x3<1>(x, q0, scale0, out0, q1, scale1, out1, q2, scale2, out2, rows, n0, n1, n2, k,
                                     dflash_fp8_rt_ring, sh);
}

// 33-64 rows (a batch of up to four 16-row blocks): the same GEMVs with six 8-column x tiles up
// to 48 rows, eight above (x slots of 48 or 64 rows: RING_SMEM_64, one CTA an SM). More than
// four tiles' B fragments do not fit the registers beside their accumulators, so these convert
// each weight fragment first and then take the x tiles one at a time (E4M3Rows::wide_half).
// Split K (rt2_64), K split over clusters of C = 8 or 4 for few weight rows (rt2_64_ks), whole K
// (rt1_64) by the rule of the 8- to 32-row forms; for weights of very many tiles, whole K over
// 128-row tiles (rt1_64_128: four warps share each x slot, halving the x read a weight byte).
// Measured on the H200 (bench_fp8_linear: cold weights, single launches, us at 33 / 48 / 64 rows;
// the tile GEMM fp8_gemm_n128_row_scaled, which the chain took before, and cuBLAS on the bf16
// weights beside them): o (rt2_64) 15.5 / 15.6 / 18.0 against 23.1 / 23.6 / 24.0 and 15.8 /
// 16.4 / 13.7; down (rt2_64) 29.1 / 28.6 / 33.0 against 51.3 / 51.3 / 51.4 and 31.5 / 32.4 /
// 33.6; qkv (rt1_64) 19.8 / 19.3 / 21.9 against 23.4 / 23.8 / 24.5 and 18.6 / 18.5 / 18.4;
// gate_up (rt1_64) 50.9 / 49.8 / 57.5 against 66.1 / 66.1 / 65.8 and 52.2 / 52.6 / 53.2; the
// lm_head (rt1_64_128) 246.8 / 246.3 / 283.5 against 310.2 / 310.1 / 313.7 and 298-302 (rt1_64:
// 284.0 / 274.1 / 323.0). The time grows with the tiles at the same weight bytes: o takes 10.9
// us at 16 rows (two tiles), 13.2 at 32 (four), 15.6 at 48 (six), 18.0 at 64 (eight). It is the x
// operand's traffic (at eight tiles two bytes of x from the L2 a weight byte, four read out of
// shared memory a warp), not the products: without the conversions and products the 64-row
// kernel takes as long (benchmarks/fp8_gemv_ablation.cu, RESULTS.md).
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(256, 1)
dflash_fp8_gemv_rt2_64_kernel(const __nv_bfloat16* x, const __nv_fp8_e4m3* q, const float* scale,
                              __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k) {
    gemv_stream::tile<dflash_fp8_rt_detail::Rows64<2>, 2>(x, q, scale, out, rows, n, k);
}

template <uint32_t C>
__global__ void __cluster_dims__(C, 1, 1) __launch_bounds__(256, 1)
dflash_fp8_gemv_rt2_64_ks_kernel(const __nv_bfloat16* x, const __nv_fp8_e4m3* q, const float* scale,
                                 __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k) {
    gemv_stream::tile<dflash_fp8_rt_detail::Rows64<C>, C>(x, q, scale, out, rows, n, k);
}

__global__ void __cluster_dims__(1, 1, 1) __launch_bounds__(256, 1)
dflash_fp8_gemv_rt1_64_kernel(const __nv_bfloat16* x, const __nv_fp8_e4m3* q, const float* scale,
                              __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k) {
    gemv_stream::tile<dflash_fp8_rt_detail::Rows64<1>, 1>(x, q, scale, out, rows, n, k);
}

__global__ void __cluster_dims__(1, 1, 1) __launch_bounds__(256, 1)
dflash_fp8_gemv_rt1_64_128_kernel(const __nv_bfloat16* x, const __nv_fp8_e4m3* q, const float* scale,
                                  __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k) {
    gemv_stream::tile<dflash_fp8_rt_detail::Rows64<1, 4>, 1>(x, q, scale, out, rows, n, k);
}
