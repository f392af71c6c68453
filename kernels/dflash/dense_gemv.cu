// Dense bf16 GEMV for few rows (m <= 16), memory-bound on the weights:
//
//   out[r, n] = bf16( sum_k f32(x[r, k]) * f32(w[n, k]) ),   x [m, k], w [n, k] (nn.Linear), out [m, n]
//
// The streamed GEMV of gemv_stream.cuh with BF16 weights (Bf16Rows), the one fp8_gemv_rt2 /
// rt2_16 run on E4M3 weights (fp8_gemv_rt.cu's header has the design and its measurements):
// a cluster of 2 CTAs owns 64 consecutive weight rows and splits K between its ranks; in a CTA,
// warp w streams the 32 rows of row group w % 2 over the 128-byte chunks (64 k) w / 2 (mod 4)
// of its rank's range through a 2-slot cp.async ring in whole lines (32 KB of weight in flight
// a CTA, two CTAs an SM); each chunk's x (16 rows x 128 bytes) is copied once per pair of warps
// into a shared slot, as whole lines. The weight is the A operand of mma.sync m16n8k16 (16
// weight rows), x^T the B operand (8 rows of x per tile: one tile for m <= 8, two for m <= 16),
// so at m <= 8 no product is spent on rows of zeros. Every CTA re-reads x for its half of K from
// the L2: m / 64 bytes per weight byte (16 rows: a quarter of the weight traffic).
//
// Replaced design (16 or 32 weight rows a CTA over all of K, each warp loading its chunks' x
// through registers as 64-byte pieces, x as the A operand): x's requests outnumbered the
// weight's at 16 rows (x traffic equal to the weight's with 16-row CTAs).
//
// dense_gemv_rt1 (below): the same without the cluster, each CTA over the whole of K through a
// 3-slot ring (two chunks of each warp in flight, 120 KiB, one CTA an SM), for weights of more
// row tiles than half the SMs and at most GEMV_RT1_WAVES an SM (qkv: 96 tiles, gate/up: 384).
// Measured on the H200 (cold weights, back-to-back launches, us: split (dense_gemv) / whole K
// with 2 slots and two CTAs an SM / whole K with 3 slots / with 4 slots / cuBLAS) at 16 rows: qkv
// 17.6 / 15.7 / 15.4 / 16.2 / 16.1, gate_up 52.4 / 50.9 / 50.7 / 51.9 / 50.1; at 1 row qkv 16.0
// / 15.2 / 14.8 / 15.6 / 16.3. In single launches the 2-slot whole K lost on gate_up (1 row: 51.5
// against 55.9) where the 3-slot one gains (16 rows: 54.7 against 53.1). The lm_head (2374 tiles)
// keeps the split K (16 rows, single launches: 291.7 against 293.0), and so do weights of fewer
// tiles (o, 64 tiles, 16 rows: 11.9 against 12.5; down: 27.0 against 28.3). BF16 rows are twice
// as long as E4M3's, and a whole-K CTA streams twice the bytes of a split one. Also measured and
// not taken, 16 rows: 128-row tiles (qkv 17.9, gate_up 54.1, down 36.2; whole K with 3 slots:
// 19.5, 53.4, 47.5), clusters of 4 (qkv 20.0, gate_up 58.1), and 3 slots for the split K (qkv
// 18.9, gate_up 57.8, o 11.9).
//
// Reduction order (deterministic): each warp accumulates its chunks in increasing order in the
// MMA's f32 accumulators; the four warps of a row group are added in phase order, then the two
// ranks in rank order, and the sum is rounded once to bf16.
//
// Vector path: k % 8 == 0 and x, w 16-byte aligned (the cp.async ring); otherwise the same slots
// are filled element by element (any k, any alignment; correctness path, not tuned).
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "gemv_stream.cuh"

namespace dense_gemv_detail {

constexpr int kMaxRows = 16;     // rows of x (two 8-row B tiles)
constexpr uint32_t kRows = 64;   // weight rows per cluster (GEMV_TILE_N)
constexpr uint32_t kCluster = 2; // CTAs per cluster along K (GEMV_CLUSTER)
static_assert(kRows == gemv_stream::kRows && kCluster == gemv_stream::kCluster, "gemv_stream's layout");
using ByRows = gemv_stream::ByRows<gemv_stream::Bf16Rows>;  // one 8-row x tile up to m = 8, two above
constexpr uint32_t kRingBytes = 81920;  // GEMV_SMEM in the spec: the rings of both
static_assert(ByRows::G1::kRingBytes == kRingBytes && ByRows::G2::kRingBytes == kRingBytes, "GEMV_SMEM");
// dense_gemv_rt1: one CTA over all of K, 3 ring slots.
using ByRowsRt1 = gemv_stream::ByRows<gemv_stream::Bf16Rows, 1, 3>;
constexpr uint32_t kRt1RingBytes = 122880;  // GEMV_RT1_SMEM in the spec
static_assert(ByRowsRt1::G1::kRingBytes == kRt1RingBytes && ByRowsRt1::G2::kRingBytes == kRt1RingBytes,
              "GEMV_RT1_SMEM");

// The kernels' body: rows past kMaxRows never come through the launchers (their applies_if).
template <class R, uint32_t CL>
static __device__ __forceinline__ void gemv(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* out,
                                            uint32_t m, uint32_t n, uint32_t k) {
    if (m > kMaxRows) return;
    gemv_stream::tile<R, CL>(x, w, gemv_stream::Bf16Rows::Scales{nullptr}, out, m, n, k);
}

}  // namespace dense_gemv_detail

// Grid: GEMV_CLUSTER * ceil(n / GEMV_TILE_N) CTAs of 256 threads in clusters of 2; dynamic
// shared memory GEMV_SMEM (the rings, reused for the warps' partials); static: the receive buffer.
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(256, 2)
dense_gemv_bf16_kernel(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* out,
                       uint32_t m, uint32_t n, uint32_t k) {
    dense_gemv_detail::gemv<dense_gemv_detail::ByRows, dense_gemv_detail::kCluster>(x, w, out, m, n, k);
}

// Grid: ceil(n / GEMV_TILE_N) CTAs of 256 threads, no cluster, at most one an SM; dynamic shared
// memory GEMV_RT1_SMEM.
__global__ void __cluster_dims__(1, 1, 1) __launch_bounds__(256, 1)
dense_gemv_bf16_rt1_kernel(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* out,
                           uint32_t m, uint32_t n, uint32_t k) {
    dense_gemv_detail::gemv<dense_gemv_detail::ByRowsRt1, 1>(x, w, out, m, n, k);
}
