// The tensor-core tile GEMM behind dense_gemm and w4a16_gemm:
//
//   out[r, n] = bf16( scale * sum_k f32(x[r, k]) * f32(B[n, k]) ),  x [m, k] bf16, out [m, n]
//
// where the weight operand B [n, k] comes from a "B source": plain bf16 rows (dense_gemm) or
// NVFP4 bytes dequantized to bf16 on the way into shared memory (w4a16_gemm).
//
// One CTA of 4 warps (2 x 2) computes a 64 x 64 tile of out; each warp a 32 x 32 sub-tile as
// 2 x 4 mma.sync m16n8k16 products per 16 k. k advances 32 at a time: the 64 x 32 tiles of x
// and B are loaded into registers (two 8-element pieces per thread each), stored to shared
// memory, and read back as fragments with ldmatrix. Shared rows are padded to 40 bf16 (80
// bytes), so the 8 rows an ldmatrix matrix reads fall in 8 distinct 16-byte bank groups. The
// next k tile's global loads are issued before the current tile's MMAs (register double
// buffering). Rows beyond m or n and k beyond the end are zero-filled.
//
// Accumulation order (deterministic): each output's f32 accumulator takes the k tiles in
// increasing order, 16 k per MMA; the result is scaled and rounded once to bf16.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "dense_mma.cuh"

namespace dense_tile {

using namespace dense_mma;

constexpr int kThreads = 128;
constexpr int kTileM = 64;
constexpr int kTileN = 64;
constexpr int kTileK = 32;
constexpr int kStride = kTileK + 8;  // padded shared row, in bf16

// Plain bf16 weights: this thread's two 8-element pieces of the 64 x 32 tile at (n0, k0), the
// same (row, 8-column piece) assignment as the x tile.
template <bool VEC>
struct DenseB {
    const __nv_bfloat16* w;
    uint32_t N, K;
    __device__ __forceinline__ void load(uint4 (&r)[2], uint32_t n0, uint32_t k0) const {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const uint32_t id = threadIdx.x + kThreads * i;
            const uint32_t row = id >> 2, kc = (id & 3u) * 8u;
            const uint32_t n = n0 + row, k = k0 + kc;
            r[i] = n < N ? load8<VEC, false>(w + static_cast<uint64_t>(n) * K + k,
                                             static_cast<int64_t>(K) - k)
                         : make_uint4(0u, 0u, 0u, 0u);
        }
    }
};

template <bool XVEC>
static __device__ __forceinline__ void load_x(uint4 (&r)[2], const __nv_bfloat16* x, uint32_t M,
                                              uint32_t K, uint32_t m0, uint32_t k0) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const uint32_t id = threadIdx.x + kThreads * i;
        const uint32_t row = id >> 2, kc = (id & 3u) * 8u;
        const uint32_t m = m0 + row, k = k0 + kc;
        r[i] = m < M ? load8<XVEC, false>(x + static_cast<uint64_t>(m) * K + k,
                                          static_cast<int64_t>(K) - k)
                     : make_uint4(0u, 0u, 0u, 0u);
    }
}

static __device__ __forceinline__ void store_tile(__nv_bfloat16 (*s)[kStride], const uint4 (&r)[2]) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const uint32_t id = threadIdx.x + kThreads * i;
        *reinterpret_cast<uint4*>(&s[id >> 2][(id & 3u) * 8u]) = r[i];
    }
}

template <bool XVEC, class BSrc>
static __device__ __forceinline__ void gemm_tile(const __nv_bfloat16* __restrict__ x, const BSrc& bsrc,
                                                 __nv_bfloat16* __restrict__ out, uint32_t M,
                                                 uint32_t N, uint32_t K, float scale) {
    __shared__ __align__(16) __nv_bfloat16 sa[kTileM][kStride];
    __shared__ __align__(16) __nv_bfloat16 sb[kTileN][kStride];

    const uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const uint32_t wm = warp >> 1, wn = warp & 1u;
    const uint32_t m0 = blockIdx.y * kTileM, n0 = blockIdx.x * kTileN;

    float acc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;

    uint4 ra[2], rb[2];
    load_x<XVEC>(ra, x, M, K, m0, 0);
    bsrc.load(rb, n0, 0);
    for (uint32_t k0 = 0; k0 < K; k0 += kTileK) {
        __syncthreads();  // the previous tile's fragments have been read
        store_tile(sa, ra);
        store_tile(sb, rb);
        __syncthreads();
        if (k0 + kTileK < K) {
            load_x<XVEC>(ra, x, M, K, m0, k0 + kTileK);
            bsrc.load(rb, n0, k0 + kTileK);
        }
#pragma unroll
        for (int kk = 0; kk < kTileK; kk += 16) {
            uint32_t a[2][4], b[2][4];
#pragma unroll
            for (int i = 0; i < 2; ++i)
                ldmatrix_x4(a[i], smem_addr(&sa[wm * 32 + i * 16 + (lane & 15u)][kk + (lane >> 4) * 8]));
#pragma unroll
            for (int p = 0; p < 2; ++p)
                ldmatrix_x4(b[p], smem_addr(&sb[wn * 32 + p * 16 + (lane & 7u) + (lane >> 4) * 8]
                                               [kk + ((lane >> 3) & 1u) * 8]));
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    mma_bf16(acc[i][j], a[i][0], a[i][1], a[i][2], a[i][3], b[j >> 1][(j & 1) * 2],
                             b[j >> 1][(j & 1) * 2 + 1]);
        }
    }

    const uint32_t g = lane >> 2, t = lane & 3u;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const uint32_t m = m0 + wm * 32 + i * 16 + g, n = n0 + wn * 32 + j * 8 + 2 * t;
            store_pair(out, m, n, M, N, acc[i][j][0], acc[i][j][1], scale);
            store_pair(out, m + 8, n, M, N, acc[i][j][2], acc[i][j][3], scale);
        }
}

}  // namespace dense_tile
