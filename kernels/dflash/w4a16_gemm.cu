// W4A16 linear layers: NVFP4 weights x bf16 activations -> bf16, f32 accumulation.
//
//   out[r, n] = bf16( sum_k f32(x[r, k]) * W[n, k] ),
//   W[n, k] = e2m1(code[n, k]) * e4m3(wscale[n, k / 16]) * global_scale
//
// wq [n, k / 2] bytes (two E2M1 codes per byte, the low nibble the even k), wscale [n, k / 16]
// E4M3 bytes, one f32 global scale; k % 16 == 0. Weights are dequantized in registers to the
// exact bf16 values W / global * 2^-8 (w4a16_dequant.cuh) and multiplied on the tensor cores;
// global * 2^8 scales the f32 sums.
//
// w4a16_gemv_kernel (m <= 16, the lm_head's case; memory-bound on the packed weights).
//
// Work split: each CTA (8 warps) owns 128 weight rows (grid ceil(n / 128): 1187 CTAs for the
// lm_head). Warp w takes the 32 rows n0 + 32 (w % 4) .. + 31 (four 8-row MMA tiles) and the
// 128-wide k chunks c with c % 2 == w / 4; warps w and w + 4 add their partial sums at the end
// (w's first, then w + 4's: a fixed order). Four warps of a CTA read the same x chunk at about
// the same time, so x (re-read by every CTA, 2 bytes per k per row against 0.53 bytes per k
// per weight row) mostly hits L1: 128 rows per CTA keep x's L2 traffic near half the weight
// bytes at m = 16 (32 rows per CTA made it twice the weight bytes).
//
// Lane (g, t), per chunk c and tile j: 16 bytes of codes (32 k: 128c + 32t .. + 31) of row
// n0 + 8j + g, and those k's two scale bytes. A 32-bit word of codes (8 k) becomes four bf16
// pairs {k_i, k_{i+4}} (e2m1x8_raw: one shift, 8 logic ops, 4 integer multiplies per 8 codes),
// each multiplied once by its 16-k group's scale (bf16x2, from cvt e4m3x2 -> f16x2 once per
// two groups), feeding two MMAs (pairs 0, 1 as the k slots {2t, 2t+1} and {8+2t, 9+2t} of the
// first, pairs 2, 3 of the second); x's 8 values are permuted the same way with prmt, so the k
// sum is unchanged. The earlier table lookup (about 22 ALU-pipe ops per 8 codes plus a scale
// decode per group) made the kernel issue-bound at ~35% of copy bandwidth.
//
// Memory-level parallelism: codes stream through a per-thread ring of kStages = 4 slots in
// shared memory with cp.async (16 bytes per tile per chunk, L2 only), three chunks ahead:
// 3 x 64 = 192 bytes per lane, 48 KB of codes per CTA in flight, no registers held. The scale
// bytes ride in the same commit groups: lane (g, t) copies the 8 scale bytes (one chunk) of
// row 8t + g of its warp's rows, and after cp.async.wait_group + __syncwarp each lane reads
// the two bytes it needs from its warp's 256-byte scale slot. x is loaded at the top of each
// iteration (mostly L1 hits; a one-chunk-ahead register copy of x spilled at 128 registers).
// Shared memory 72 KB per CTA (the reduction reuses it); H200: 2 CTAs per SM
// (__launch_bounds__(256, 2): <= 128 registers), so ~100 KB per SM in flight, and one CTA's
// start-up latency is covered by the other's stream. Issue budget at 75% of copy bandwidth:
// ~0.1 warp-words (128 bytes of codes) per SM clock, ~20 instructions each (11 on the
// integer/logic pipe, 8 on the FMA pipe, 2 MMAs) -> ~2.3 IPC of 4, ~1.1 logic-pipe IPC of 2.
//
// Fast path: k % 128 == 0, x and wq 16-byte aligned, wscale 8-byte aligned. Otherwise (any
// k % 16 == 0) the CTA walks its 128 rows as four 32-row blocks with the register loads of the
// earlier kernel (byte loads when unaligned), 8 warps splitting k, the same dequantization.
// The f32 sums are scaled by global * 2^8 and rounded once to bf16.
//
// w4a16_gemv_rt2_kernel (hopper; m <= 16, the lm_head's case): the streamed GEMV of
// gemv_stream.cuh with the Nvfp4Rows format, the structure fp8_gemv_rt2 / rt2_16 and
// dense_gemv run (fp8_gemv_rt.cu's header has the design): 2-CTA clusters split K over 64
// weight rows; warp w streams the 32 rows of row group w % 2 over the 128-byte chunks (256 k)
// w / 2 (mod 4) of its rank's range through a 2-slot cp.async ring in whole lines; each
// chunk's x goes through a shared slot the phase's two warps copy once; the CTA's scale bytes
// over its rank's K range are staged once, in whole lines (gemv_stream's group-scale window);
// the codes become bf16 in registers as above (e2m1x8_raw, one bf16 multiply by the group's
// scale per pair) and are the A operand of mma.sync m16n8k16, x^T the B operand (one 8-row
// tile for m <= 8, two for m <= 16). Warp partials are added in phase order, the ranks' in rank
// order; the sum times global * 2^8 is rounded once to bf16. Whole lines against the kernel
// below's half-line code pieces and per-chunk 8-byte scale copies. Its ring (96 KB at m <= 8,
// 128 KB above) and window do not fit gb10's 99 KB a block: gb10 runs w4a16_gemv_kernel.
// Vector path: k % 256 == 0 and x, wq, wscale 16-byte aligned; otherwise (any k % 16 == 0, any
// alignment) the same slots are filled by ordinary loads (correctness path, not tuned).
//
// w4a16_gemm_kernel (any m, tensor cores): dense_gemm_tile.cuh's 64 x 64 tile GEMM with a B
// source that loads 4 bytes of codes and one scale byte per 8 k and stores the dequantized bf16
// (natural k order) into the shared tile.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#include <cstdint>

#include "dense_gemm_tile.cuh"
#include "dense_mma.cuh"
#include "gemv_stream.cuh"
#include "w4a16_dequant.cuh"

namespace w4a16_detail {

using namespace dense_mma;
using namespace w4a16;
using kcommon::lds16;

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kTiles = 4;                    // 8-row tiles per warp
constexpr int kRowsPerWarp = 8 * kTiles;     // 32
constexpr int kRowGroups = 4;                // warps w and w + 4 share rows, split k
constexpr int kRowsPerCta = kRowsPerWarp * kRowGroups;  // 128 (GEMV_ROWS in the spec)
constexpr int kMaxRows = 16;
constexpr uint32_t kChunk = 128;             // k per chunk (32 per lane)
constexpr int kStages = 4;                   // ring slots: kStages - 1 chunks in flight
constexpr int kSlotBytes = kThreads * 16;    // one tile's codes, 16 bytes per thread
constexpr int kCodeBytes = kStages * kTiles * kSlotBytes;   // 65536
constexpr int kScaleSlot = kTiles * 8 * 8;                  // per warp and stage: 32 rows x 8 bytes
constexpr int kScaleBytes = kStages * kWarps * kScaleSlot;  // 8192
constexpr int kSmemBytes = kCodeBytes + kScaleBytes;        // 73728 (GEMV_SMEM in the spec)
static_assert(kWarps * kTiles * 4 * 32 * 4 <= kSmemBytes, "reduction buffer must fit");

// One tile, one chunk: the lane's 16 bytes of codes q (4 words of 8 codes), its two scale
// bytes s01, x rows g / g + 8 permuted (pa, pb: [8-k block][pair]).
static __device__ __forceinline__ void tile_chunk(float (&acc)[4], const uint4& q, uint32_t s01,
                                                  const uint32_t (&pa)[4][4],
                                                  const uint32_t (&pb)[4][4]) {
    uint32_t sc[2];
    e4m3x2_scaled_bf16(s01, sc);
    const uint32_t words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int wd = 0; wd < 4; ++wd) {
        uint32_t r[4];
        e2m1x8_raw(words[wd], r);
#pragma unroll
        for (int i = 0; i < 4; ++i) r[i] = mul_bf16x2(r[i], sc[wd >> 1]);
        mma_bf16(acc, pa[wd][0], pb[wd][0], pa[wd][1], pb[wd][1], r[0], r[1]);
        mma_bf16(acc, pa[wd][2], pb[wd][2], pa[wd][3], pb[wd][3], r[2], r[3]);
    }
}

// 8-byte asynchronous global -> shared copy (L1-allocating .ca: 8 bytes is below .cg's 16);
// zero-fills when !pred.
static __device__ __forceinline__ void cp_async8(uint32_t dst, const void* src, bool pred) {
    const int n = pred ? 8 : 0;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(n)
                 : "memory");
}

// Fast path (see the header). HI: m > 8, so x rows 8..15 exist.
template <bool HI>
static __device__ __forceinline__ void gemv_async(const __nv_bfloat16* __restrict__ x,
                                                  const uint8_t* __restrict__ wq,
                                                  const uint8_t* __restrict__ ws, float global_scale,
                                                  __nv_bfloat16* __restrict__ out, uint32_t M,
                                                  uint32_t N, uint32_t K, uint8_t* smem) {
    const uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const uint32_t g = lane >> 2, t = lane & 3u;
    const uint32_t rg = warp % kRowGroups, kp = warp / kRowGroups;
    const uint32_t n0 = blockIdx.x * kRowsPerCta + rg * kRowsPerWarp;

    const uint8_t* qrow[kTiles];
    bool ok[kTiles];
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
        const uint32_t n = n0 + 8u * j + g;
        ok[j] = n < N;
        qrow[j] = wq + static_cast<uint64_t>(ok[j] ? n : 0u) * (K / 2) + 16u * t;
    }
    // This lane copies the scale bytes of row n0 + 8t + g (tile t, row g).
    const uint32_t sn = n0 + 8u * t + g;
    const bool sok = sn < N;
    const uint8_t* srow = ws + static_cast<uint64_t>(sok ? sn : 0u) * (K / 16);

    const __nv_bfloat16* xa = x + static_cast<uint64_t>(g < M ? g : 0u) * K + 32u * t;
    const __nv_bfloat16* xb = x + static_cast<uint64_t>(g + 8u < M ? g + 8u : 0u) * K + 32u * t;
    const bool xa_ok = g < M, xb_ok = HI && g + 8u < M;

    const uint32_t nchunks = K / kChunk;
    const uint32_t base = smem_addr(smem);
    const uint32_t code_ring = base + threadIdx.x * 16u;
    const uint32_t scale_ring = base + kCodeBytes + warp * kScaleSlot;
    const uint32_t scale_wr = scale_ring + (t * 8u + g) * 8u;
    const uint32_t scale_rd = scale_ring + g * 8u + 2u * t;  // + tile j * 64

    auto issue = [&](uint32_t c, uint32_t s) {
        const bool valid = c < nchunks;
#pragma unroll
        for (int j = 0; j < kTiles; ++j) {
            const bool p = valid && ok[j];
            cp_async16_zfill(code_ring + (s * kTiles + j) * kSlotBytes, p ? qrow[j] + c * (kChunk / 2) : wq, p);
        }
        const bool p = valid && sok;
        cp_async8(scale_wr + s * (kWarps * kScaleSlot), p ? srow + c * (kChunk / 16) : ws, p);
        cp_async_commit();
    };
    auto load_x = [&](uint4 (&u)[4], const __nv_bfloat16* p, bool rok, uint32_t c) {
        const bool v = rok && c < nchunks;
#pragma unroll
        for (int i = 0; i < 4; ++i)
            u[i] = v ? __ldg(reinterpret_cast<const uint4*>(p + c * kChunk + 8 * i)) : make_uint4(0u, 0u, 0u, 0u);
    };

#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) issue(kp + 2u * s, s);

    float acc[kTiles][4];
#pragma unroll
    for (int j = 0; j < kTiles; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

    uint32_t s_read = 0, s_write = kStages - 1;
    for (uint32_t c = kp; c < nchunks; c += 2u) {
        // x for this chunk first (mostly L1 hits: the CTA's four warps of this k parity read
        // the same x chunk at about the same time); its latency overlaps the issue and wait.
        uint4 xa_c[4], xb_c[4];
        load_x(xa_c, xa, xa_ok, c);
        if (HI) load_x(xb_c, xb, xb_ok, c);
        // Every lane of the warp has read the slot refilled now (scale slots are shared by
        // the warp's lanes), and issued the MMAs that used it.
        __syncwarp();
        issue(c + 2u * (kStages - 1), s_write);
        cp_async_wait<kStages - 1>();  // this thread's copies of chunk c have landed
        __syncwarp();                   // ... and the other lanes' (their scale bytes)
        uint32_t pa[4][4], pb[4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            permute_x(pa[i], xa_c[i]);
            if (HI) {
                permute_x(pb[i], xb_c[i]);
            } else {
                pb[i][0] = pb[i][1] = pb[i][2] = pb[i][3] = 0u;
            }
        }
#pragma unroll
        for (int j = 0; j < kTiles; ++j) {
            const uint4 q = lds128(code_ring + (s_read * kTiles + j) * kSlotBytes);
            const uint32_t s01 = lds16(scale_rd + s_read * (kWarps * kScaleSlot) + j * 64u);
            tile_chunk(acc[j], q, s01, pa, pb);
        }
        s_read = s_read + 1 == kStages ? 0u : s_read + 1;
        s_write = s_write + 1 == kStages ? 0u : s_write + 1;
    }
    cp_async_wait<0>();  // drain (zero-fill copies past the end) before the ring is reused
    __syncthreads();

    // Warps 4..7 hand their sums to warps 0..3; those add (own + partner) and store.
    float* red = reinterpret_cast<float*>(smem) + rg * (kTiles * 4 * 32);
    if (kp == 1) {
#pragma unroll
        for (int j = 0; j < kTiles; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) red[(j * 4 + r) * 32 + lane] = acc[j][r];
    }
    __syncthreads();
    if (kp == 0) {
        const float scale = global_scale * 256.0f;
#pragma unroll
        for (int j = 0; j < kTiles; ++j) {
            float v[4];
#pragma unroll
            for (int r = 0; r < 4; ++r) v[r] = acc[j][r] + red[(j * 4 + r) * 32 + lane];
            const uint32_t n = n0 + 8u * j + 2u * t;
            store_pair(out, g, n, M, N, v[0], v[1], scale);
            store_pair(out, g + 8u, n, M, N, v[2], v[3], scale);
        }
    }
}

// General path (any k % 16 == 0, any alignment): per 32-row block, 8 warps split k in
// 128-wide chunks (chunk c to warp c % 8), register loads one chunk ahead.
struct WChunk {
    uint4 q[kTiles];
    uint32_t s[kTiles];  // the lane's two scale bytes, first in bits 0..7
};

template <bool VEC>
static __device__ __forceinline__ void load_w(WChunk& ch, uint32_t c, uint32_t nchunks,
                                              const uint8_t* const (&qrow)[kTiles],
                                              const uint8_t* const (&srow)[kTiles],
                                              const bool (&ok)[kTiles], uint32_t K, uint32_t t) {
    const uint32_t k = c * kChunk + 32u * t;
    const bool any = c < nchunks && k < K;
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
        if (!(any && ok[j])) {
            ch.q[j] = make_uint4(0u, 0u, 0u, 0u);
            ch.s[j] = 0u;
        } else if (VEC) {
            ch.q[j] = ld_stream16(qrow[j] + k / 2);
            ch.s[j] = __ldg(reinterpret_cast<const unsigned short*>(srow[j] + k / 16));
        } else {
            uint32_t wd[4] = {0u, 0u, 0u, 0u};
#pragma unroll
            for (int b = 0; b < 16; ++b) {
                const uint32_t v = k + 2u * b < K ? qrow[j][k / 2 + b] : 0u;
                wd[b >> 2] |= v << (8 * (b & 3));
            }
            ch.q[j] = make_uint4(wd[0], wd[1], wd[2], wd[3]);
            ch.s[j] = srow[j][k / 16] | (k + 16u < K ? static_cast<uint32_t>(srow[j][k / 16 + 1]) << 8 : 0u);
        }
    }
}

// x row p's 32 values at k as 8-k blocks, each permuted to {x0,x4},{x1,x5},{x2,x6},{x3,x7}.
template <bool VEC>
static __device__ __forceinline__ void load_x(uint32_t (&px)[4][4], const __nv_bfloat16* p,
                                              uint32_t k, uint32_t K) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        uint4 u = make_uint4(0u, 0u, 0u, 0u);
        if (p) u = load8<VEC, false>(p + k + 8 * i, static_cast<int64_t>(K) - (k + 8u * i));
        permute_x(px[i], u);
    }
}

template <bool VEC>
static __device__ __noinline__ void gemv_rows32(const __nv_bfloat16* __restrict__ x,
                                                const uint8_t* __restrict__ wq,
                                                const uint8_t* __restrict__ ws, float global_scale,
                                                __nv_bfloat16* __restrict__ out, uint32_t M,
                                                uint32_t N, uint32_t K, uint32_t n0, float* red) {
    const uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const uint32_t g = lane >> 2, t = lane & 3u;

    const uint8_t* qrow[kTiles];
    const uint8_t* srow[kTiles];
    bool ok[kTiles];
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
        const uint32_t n = n0 + 8u * j + g;
        ok[j] = n < N;
        const uint64_t nn = ok[j] ? n : 0u;
        qrow[j] = wq + nn * (K / 2);
        srow[j] = ws + nn * (K / 16);
    }
    const __nv_bfloat16* xa = g < M ? x + static_cast<uint64_t>(g) * K : nullptr;
    const __nv_bfloat16* xb = g + 8u < M ? x + static_cast<uint64_t>(g + 8u) * K : nullptr;

    float acc[kTiles][4];
#pragma unroll
    for (int j = 0; j < kTiles; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

    const uint32_t nchunks = (K + kChunk - 1) / kChunk;
    WChunk cur;
    load_w<VEC>(cur, warp, nchunks, qrow, srow, ok, K, t);
    for (uint32_t c = warp; c < nchunks; c += kWarps) {
        WChunk nxt;
        load_w<VEC>(nxt, c + kWarps, nchunks, qrow, srow, ok, K, t);
        const uint32_t k = c * kChunk + 32u * t;
        uint32_t pa[4][4], pb[4][4];
        load_x<VEC>(pa, k < K ? xa : nullptr, k, K);
        load_x<VEC>(pb, k < K ? xb : nullptr, k, K);
#pragma unroll
        for (int j = 0; j < kTiles; ++j) tile_chunk(acc[j], cur.q[j], cur.s[j], pa, pb);
        cur = nxt;
    }

#pragma unroll
    for (int j = 0; j < kTiles; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) red[(warp * (kTiles * 4) + j * 4 + r) * 32 + lane] = acc[j][r];
    __syncthreads();

    const float out_scale = global_scale * 256.0f;
    for (uint32_t o = threadIdx.x; o < kMaxRows * kRowsPerWarp; o += blockDim.x) {
        const uint32_t r = o / kRowsPerWarp, nl = o % kRowsPerWarp;
        const uint32_t n = n0 + nl;
        if (r >= M || n >= N) continue;
        const uint32_t j = nl >> 3, nn = nl & 7u;
        const uint32_t src_lane = (r & 7u) * 4u + (nn >> 1);
        const uint32_t reg = (r >> 3) * 2u + (nn & 1u);
        float s = 0.f;
#pragma unroll
        for (int wp = 0; wp < kWarps; ++wp) s += red[(wp * (kTiles * 4) + j * 4 + reg) * 32 + src_lane];
        out[static_cast<uint64_t>(r) * N + n] = __float2bfloat16_rn(s * out_scale);
    }
    __syncthreads();  // red is reused by the next 32-row block
}

// B source for dense_gemm_tile.cuh: this thread's two 8-k pieces of the 64 x 32 weight tile,
// dequantized (natural k order). VEC: 4-byte code loads (wq 4-byte aligned; k % 16 == 0 makes
// every row's 8-k piece 4-byte aligned then).
template <bool VEC>
struct Fp4B {
    const uint8_t* wq;
    const uint8_t* ws;
    uint32_t N, K;
    __device__ __forceinline__ void load(uint4 (&r)[2], uint32_t n0, uint32_t k0) const {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const uint32_t id = threadIdx.x + dense_tile::kThreads * i;
            const uint32_t row = id >> 2, k = k0 + (id & 3u) * 8u;
            const uint32_t n = n0 + row;
            if (n >= N || k >= K) {
                r[i] = make_uint4(0u, 0u, 0u, 0u);
                continue;
            }
            const uint8_t* qp = wq + static_cast<uint64_t>(n) * (K / 2) + k / 2;
            uint32_t q;
            if (VEC) {
                q = __ldg(reinterpret_cast<const uint32_t*>(qp));
            } else {
                q = static_cast<uint32_t>(qp[0]) | (static_cast<uint32_t>(qp[1]) << 8) |
                    (static_cast<uint32_t>(qp[2]) << 16) | (static_cast<uint32_t>(qp[3]) << 24);
            }
            const uint32_t s = ws[static_cast<uint64_t>(n) * (K / 16) + k / 16];
            r[i] = e2m1x8_natural(q, splat16(e4m3_scaled_bf16(s)));
        }
    }
};

}  // namespace w4a16_detail

// Dynamic shared memory: w4a16_detail::kSmemBytes (GEMV_SMEM in specs/w4a16_gemm.yaml).
// The weights arrive typed (packed E2M1 pairs, E4M3 scale bytes) and are read as bytes.
__global__ void __launch_bounds__(256, 2)
w4a16_gemv_kernel(const __nv_bfloat16* x, const __nv_fp4x2_e2m1* wq_pairs, const __nv_fp8_e4m3* wscale_e4m3,
                  float global_scale, __nv_bfloat16* out, uint32_t m, uint32_t n, uint32_t k) {
    namespace d = w4a16_detail;
    const uint8_t* wq = reinterpret_cast<const uint8_t*>(wq_pairs);
    const uint8_t* wscale = reinterpret_cast<const uint8_t*>(wscale_e4m3);
    extern __shared__ __align__(128) uint8_t w4a16_gemv_smem[];
    if (m > d::kMaxRows || (k & 15u) != 0) return;  // the launcher's clauses; never reached through it
    const uintptr_t ws_addr = reinterpret_cast<uintptr_t>(wscale);
    if ((k % d::kChunk) == 0 && dense_mma::aligned16(x, wq) && (ws_addr & 7u) == 0) {
        if (m > 8) {
            d::gemv_async<true>(x, wq, wscale, global_scale, out, m, n, k, w4a16_gemv_smem);
        } else {
            d::gemv_async<false>(x, wq, wscale, global_scale, out, m, n, k, w4a16_gemv_smem);
        }
        return;
    }
    const bool vec = (k & 31u) == 0 && dense_mma::aligned16(x, wq) && (ws_addr & 1u) == 0;
    float* red = reinterpret_cast<float*>(w4a16_gemv_smem);
    for (int b = 0; b < d::kRowGroups; ++b) {
        const uint32_t n0 = blockIdx.x * d::kRowsPerCta + b * d::kRowsPerWarp;
        if (n0 >= n) break;  // uniform over the CTA
        if (vec) {
            d::gemv_rows32<true>(x, wq, wscale, global_scale, out, m, n, k, n0, red);
        } else {
            d::gemv_rows32<false>(x, wq, wscale, global_scale, out, m, n, k, n0, red);
        }
    }
}

__global__ void __launch_bounds__(128)
w4a16_gemm_kernel(const __nv_bfloat16* x, const __nv_fp4x2_e2m1* wq_pairs, const __nv_fp8_e4m3* wscale_e4m3,
                  float global_scale, __nv_bfloat16* out, uint32_t m, uint32_t n, uint32_t k) {
    namespace d = w4a16_detail;
    const uint8_t* wq = reinterpret_cast<const uint8_t*>(wq_pairs);
    const uint8_t* wscale = reinterpret_cast<const uint8_t*>(wscale_e4m3);
    if ((k & 15u) != 0) return;  // the launcher's clause; never reached through it
    const float scale = global_scale * 256.0f;
    const bool xvec = dense_mma::aligned16(x);
    const bool wvec = (reinterpret_cast<uintptr_t>(wq) & 3u) == 0;
    if (xvec && wvec) {
        dense_tile::gemm_tile<true>(x, d::Fp4B<true>{wq, wscale, n, k}, out, m, n, k, scale);
    } else {
        dense_tile::gemm_tile<false>(x, d::Fp4B<false>{wq, wscale, n, k}, out, m, n, k, scale);
    }
}

namespace w4a16_rt_detail {

constexpr uint32_t kRows = 64;   // weight rows per cluster (GEMV_TILE_N)
constexpr uint32_t kCluster = 2; // CTAs per cluster along K (GEMV_CLUSTER)
static_assert(kRows == gemv_stream::kRows && kCluster == gemv_stream::kCluster, "gemv_stream's layout");
// GEMV_RING_8 / GEMV_RING_16 in the spec: the rings of Gemv<1> (m <= 8, x slots of 8 rows)
// and Gemv<2>; the group-scale window follows the ring.
constexpr uint32_t kRing8Bytes = 98304;
constexpr uint32_t kRing16Bytes = 131072;
// w4a16_gemv_rt1_128: 128-row tiles (four row groups, two chunk phases), 16-row x slots;
// GEMV_RING_16_128 in the spec.
using Wide = gemv_stream::Gemv<gemv_stream::Nvfp4Rows, 2, gemv_stream::Work::full, 1, 4>;
constexpr uint32_t kRing16WideBytes = 98304;
static_assert(Wide::kRingBytes == kRing16WideBytes && Wide::kRows == 128, "GEMV_RING_16_128, GEMV_ROWS");

template <uint32_t CL>
using Rows = gemv_stream::ByRows<gemv_stream::Nvfp4Rows, CL>;
static_assert(Rows<1>::G1::kRingBytes == kRing8Bytes && Rows<1>::G2::kRingBytes == kRing16Bytes &&
                  Rows<2>::G1::kRingBytes == kRing8Bytes && Rows<2>::G2::kRingBytes == kRing16Bytes,
              "GEMV_RING_8/16");

// One CTA's part of the product with the streamed GEMV R (Rows<CL> or Wide): rank
// blockIdx.x % CL of cluster blockIdx.x / CL.
template <class R, uint32_t CL>
static __device__ __forceinline__ void gemv_tile(const __nv_bfloat16* x, const __nv_fp4x2_e2m1* wq,
                                                 const __nv_fp8_e4m3* wscale, float global_scale,
                                                 __nv_bfloat16* out, uint32_t m, uint32_t n, uint32_t k) {
    if (m > w4a16_detail::kMaxRows || (k & 15u) != 0) return;  // the launcher's clauses; never reached through it
    const gemv_stream::Nvfp4Rows::Scales sc{reinterpret_cast<const uint8_t*>(wscale), global_scale};
    gemv_stream::tile<R, CL>(x, wq, sc, out, m, n, k);
}

}  // namespace w4a16_rt_detail

// Grid: GEMV_CLUSTER * ceil(n / GEMV_TILE_N) CTAs of 256 threads in clusters of 2; dynamic
// shared memory: the ring of Gemv<MT> and the group-scale window after it (64 rows x
// Gemv::window_stride(k) bytes; the spec's shared_mem).
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(256, 2)
w4a16_gemv_rt2_kernel(const __nv_bfloat16* x, const __nv_fp4x2_e2m1* wq, const __nv_fp8_e4m3* wscale,
                      float global_scale, __nv_bfloat16* out, uint32_t m, uint32_t n, uint32_t k) {
    w4a16_rt_detail::gemv_tile<w4a16_rt_detail::Rows<2>, 2>(x, wq, wscale, global_scale, out, m, n, k);
}

// The same with the whole of K in each CTA (clusters of one; grid ceil(n / GEMV_TILE_N)), for
// weights of many row tiles (the lm_head): a CTA streams twice the bytes for the same fixed costs.
// A 3-slot ring (two chunks of each warp in flight; gemv_stream's ST = 3) was measured and not
// taken (H200, cold weights, back-to-back launches, us, 2 / 3 slots): the lm_head at 1 row 115.1
// / 138.6, at 16 rows 170.4 / 178.5; gate / up at 1 row 23.3 / 28.8; qkv 10.3 / 10.8.
__global__ void __cluster_dims__(1, 1, 1) __launch_bounds__(256, 2)
w4a16_gemv_rt1_kernel(const __nv_bfloat16* x, const __nv_fp4x2_e2m1* wq, const __nv_fp8_e4m3* wscale,
                      float global_scale, __nv_bfloat16* out, uint32_t m, uint32_t n, uint32_t k) {
    w4a16_rt_detail::gemv_tile<w4a16_rt_detail::Rows<1>, 1>(x, wq, wscale, global_scale, out, m, n, k);
}

// 9-16 rows over weights of many 128-row tiles (the lm_head at a block's 16 rows): w4a16_gemv_rt1
// with 128 weight rows a CTA (gemv_stream's four row groups: 32 rows a warp as before, the warps
// of a chunk phase sharing its x slots four at a time), so each x chunk a CTA copies serves 128
// weight rows instead of 64. Its 96 KB ring and 34 KB scale window (k = 4096) leave one CTA an
// SM, which pays off only over many waves of CTAs (the spec's RT1_128_WAVES): on the H200 at 16
// rows, cold weights, back-to-back launches, the lm_head (151936 x 4096, 9 waves) took 154 us
// against rt1's 170 us, but gate / up (24576 x 4096, 1.5 waves) 36.5 us against 32.4 and at
// 1-8 rows (the x traffic being half as large there) the lm_head 120 us against 111.5.
__global__ void __cluster_dims__(1, 1, 1) __launch_bounds__(256, 2)
w4a16_gemv_rt1_128_kernel(const __nv_bfloat16* x, const __nv_fp4x2_e2m1* wq, const __nv_fp8_e4m3* wscale,
                          float global_scale, __nv_bfloat16* out, uint32_t m, uint32_t n, uint32_t k) {
    w4a16_rt_detail::gemv_tile<w4a16_rt_detail::Wide, 1>(x, wq, wscale, global_scale, out, m, n, k);
}
