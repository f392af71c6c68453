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
// w4a16_gemv_kernel (m <= 16, the lm_head's case; memory-bound on the packed weights): the
// structure of dense_gemv.cu with 4-bit weights. Each CTA (8 warps) owns 32 weight rows, k is
// cut into chunks of 128 and chunk c goes to warp c % 8. Lane (g, t) streams 16 bytes of codes
// (32 k: 128c + 32t .. + 31) and the two scale bytes of those k for each of its four 8-row
// tiles, and reads the matching 32 values of x rows g and g + 8 (cached loads). A 32-bit word
// of codes (8 k) becomes four bf16 pairs {k_i, k_{i+4}} (w4a16_dequant.cuh) feeding two MMAs
// (pairs 0, 1 as the k slots {2t, 2t+1} and {8+2t, 9+2t} of the first, pairs 2, 3 of the
// second); x's 8 values are permuted the same way with prmt, so the k sum is unchanged. The
// next chunk's weight loads are issued before the current chunk's MMAs. The 8 warps' partial
// sums are added in warp order 0..7 (deterministic), scaled by global * 2^8 and rounded once.
// Vector path: k % 32 == 0, x and wq 16-byte aligned, wscale 2-byte aligned; otherwise byte
// and element loads (any k % 16 == 0).
//
// w4a16_gemm_kernel (any m, tensor cores): dense_gemm_tile.cuh's 64 x 64 tile GEMM with a B
// source that loads 4 bytes of codes and one scale byte per 8 k and stores the dequantized bf16
// (natural k order) into the shared tile.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "dense_gemm_tile.cuh"
#include "dense_mma.cuh"
#include "w4a16_dequant.cuh"

namespace w4a16_detail {

using namespace dense_mma;
using namespace w4a16;

constexpr int kWarps = 8;
constexpr int kTiles = 4;
constexpr int kRowsPerCta = 8 * kTiles;  // 32
constexpr int kMaxRows = 16;
constexpr uint32_t kChunk = 128;  // k per chunk (32 per lane)

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
        px[i][0] = prmt(u.x, u.z, 0x5410u);
        px[i][1] = prmt(u.x, u.z, 0x7632u);
        px[i][2] = prmt(u.y, u.w, 0x5410u);
        px[i][3] = prmt(u.y, u.w, 0x7632u);
    }
}

template <bool VEC>
static __device__ __forceinline__ void gemv(const __nv_bfloat16* __restrict__ x,
                                            const uint8_t* __restrict__ wq,
                                            const uint8_t* __restrict__ ws, float global_scale,
                                            __nv_bfloat16* __restrict__ out, uint32_t M, uint32_t N,
                                            uint32_t K, float (*red)[kTiles * 4][32]) {
    const uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const uint32_t g = lane >> 2, t = lane & 3u;
    const uint32_t n0 = blockIdx.x * kRowsPerCta;

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
        for (int j = 0; j < kTiles; ++j) {
            const uint32_t sc[2] = {splat16(e4m3_scaled_bf16(cur.s[j] & 0xFFu)),
                                    splat16(e4m3_scaled_bf16((cur.s[j] >> 8) & 0xFFu))};
            const uint32_t words[4] = {cur.q[j].x, cur.q[j].y, cur.q[j].z, cur.q[j].w};
#pragma unroll
            for (int wd = 0; wd < 4; ++wd) {
                uint32_t r[4];
                e2m1x8(words[wd], r);
#pragma unroll
                for (int i = 0; i < 4; ++i) r[i] = mul_bf16x2(r[i], sc[wd >> 1]);
                mma_bf16(acc[j], pa[wd][0], pb[wd][0], pa[wd][1], pb[wd][1], r[0], r[1]);
                mma_bf16(acc[j], pa[wd][2], pb[wd][2], pa[wd][3], pb[wd][3], r[2], r[3]);
            }
        }
        cur = nxt;
    }

#pragma unroll
    for (int j = 0; j < kTiles; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) red[warp][j * 4 + r][lane] = acc[j][r];
    __syncthreads();

    const float out_scale = global_scale * 256.0f;
    for (uint32_t o = threadIdx.x; o < kMaxRows * kRowsPerCta; o += blockDim.x) {
        const uint32_t r = o / kRowsPerCta, nl = o % kRowsPerCta;
        const uint32_t n = n0 + nl;
        if (r >= M || n >= N) continue;
        const uint32_t j = nl >> 3, nn = nl & 7u;
        const uint32_t src_lane = (r & 7u) * 4u + (nn >> 1);
        const uint32_t reg = (r >> 3) * 2u + (nn & 1u);
        float s = 0.f;
#pragma unroll
        for (int wp = 0; wp < kWarps; ++wp) s += red[wp][j * 4 + reg][src_lane];
        out[static_cast<uint64_t>(r) * N + n] = __float2bfloat16_rn(s * out_scale);
    }
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

__global__ void __launch_bounds__(256)
w4a16_gemv_kernel(const __nv_bfloat16* x, const uint8_t* wq, const uint8_t* wscale,
                  float global_scale, __nv_bfloat16* out, uint32_t m, uint32_t n, uint32_t k) {
    namespace d = w4a16_detail;
    __shared__ float red[d::kWarps][d::kTiles * 4][32];
    if (m > d::kMaxRows || (k & 15u) != 0) return;  // the launcher's clauses; never reached through it
    const bool vec = (k & 31u) == 0 && dense_mma::aligned16(x, wq) &&
                     (reinterpret_cast<uintptr_t>(wscale) & 1u) == 0;
    if (vec) {
        d::gemv<true>(x, wq, wscale, global_scale, out, m, n, k, red);
    } else {
        d::gemv<false>(x, wq, wscale, global_scale, out, m, n, k, red);
    }
}

__global__ void __launch_bounds__(128)
w4a16_gemm_kernel(const __nv_bfloat16* x, const uint8_t* wq, const uint8_t* wscale,
                  float global_scale, __nv_bfloat16* out, uint32_t m, uint32_t n, uint32_t k) {
    namespace d = w4a16_detail;
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
