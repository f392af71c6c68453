// The few-row FP8-weight product of the single-warp tile GEMM for at most 16 rows
// (fp8_gemm_n128_row_scaled_m16). The register-tiled GEMVs (fp8_gemv_rt2, fp8_gemv_rt2_16)
// used it too until they moved to the streamed design of fp8_gemv_rt.cu (the same fragments
// from a cp.async ring instead of one register batch):
//
//   out[m, n] = bf16(scale[n] * sum_k x[m, k] * q[n, k]),  m < rows <= 8 * MT,
//
// x bf16 [rows, K], q E4M3 [N, K] (row-major, like torch.nn.Linear), scale f32 [N].
//
// Work split. A cluster of kSplit = 8 CTAs owns one 128-row tile of the weight; CTA rank r of
// the cluster takes the K range [r * KS, min(K, (r + 1) * KS)), KS = ceil(K / 512) * 64, so a
// weight byte is read by exactly one CTA, and the grid has 8 CTAs per 128 weight rows (256 CTAs
// for N = 4096). The x rows are read once per CTA and kept in shared memory for its K range
// (at most 16 rows x KS bf16), so the bytes read besides the weight are 2 * rows / 128 of it.
//
// Products on the tensor cores with the weight as the A operand ("swap AB"): an m16n8k16 mma
// takes 16 weight rows x 16 k as A and x^T (16 k x 8 x rows) as B, so one mma covers up to 8 x
// rows (MT = 1 B tile, rt2) or two share A (MT = 2, up to 16 rows). The k order inside a 16-k
// step is a permutation chosen so that the fragments come straight from 16-byte loads: lane
// (g = lane / 4, t = lane % 4) loads 16 consecutive weight bytes k0 + 16t .. k0 + 16t + 15 of its
// rows g and g + 8 for a 64-k chunk at k0, and step s (0..3) of the chunk uses the word s of that
// load, bytes j = 0..3 at k = k0 + 16t + 4s + j. The A slots (2t, 2t + 1) hold bytes (0, 2) and
// slots (2t + 8, 2t + 9) hold (1, 3) (the shift-only conversion of fp8_common.cuh); B takes x at
// the same k: (x[k + 0], x[k + 2]) and (x[k + 1], x[k + 3]), two byte permutes of x's words.
// Since the sum over a 16-k step covers exactly these 16 k, the product is unchanged.
//
// Warps. A CTA has ROWGROUPS * KPHASES warps; warp w covers RT * 16 weight rows (row group
// w % ROWGROUPS) and the chunks c = w / ROWGROUPS (mod KPHASES) of the CTA's K range.
//   m16:         1 row group x 4 phases, RT = 8: 4 warps, each one over all 128 rows (one warp
//                per 128-wide N tile) and every 4th chunk.
// Each warp loads U chunks of its weight (U * RT * 2 16-byte loads per lane) before using any,
// the first batch before the x rows are staged, so the weight stream starts at once.
//
// Reduction, deterministic. Each warp writes its f32 partial sums (128 rows x 8 * MT columns
// per phase) to shared memory; after a cluster barrier, rank r sums rows [16r, 16r + 16) of the
// tile over ranks 0..7 and phases 0..KPHASES-1 in that fixed order through distributed shared
// memory, multiplies by scale[n] and rounds to bf16. A second cluster barrier keeps every CTA's
// shared memory alive until all ranks have read it. No atomics; no workspace.
//
// K: the vector path needs K % 16 == 0 and 16-byte aligned q and x (a lane's 16 weight bytes
// are then all in range or all out); otherwise weights and x are read byte by byte with zero
// fill (same arithmetic). Rows of the tile beyond N read as zero and are not stored.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cstdint>

#include "fp8_common.cuh"

namespace dflash_fp8 {

namespace cg = cooperative_groups;

constexpr uint32_t kSplit = 8;      // CTAs per cluster along K; must match __cluster_dims__
constexpr uint32_t kChunk = 64;     // k per chunk: 4 lanes x 16 bytes
constexpr uint32_t kTileN = 128;    // weight rows per cluster

// Per-rank K range, a multiple of the chunk.
static __device__ __forceinline__ uint32_t rank_k_span(uint32_t k) {
    return (k + kSplit * kChunk - 1) / (kSplit * kChunk) * kChunk;
}

template <int MT, int RT, int ROWGROUPS, int KPHASES, int U>
struct RowTile {
    static constexpr int kXRows = 8 * MT;                       // x rows held (zero beyond rows)
    static constexpr int kThreads = 32 * ROWGROUPS * KPHASES;
    static_assert(16 * RT * ROWGROUPS == kTileN, "a CTA covers the cluster's 128 weight rows");
    static_assert(kTileN / kSplit == 16, "each rank finalises 16 rows");

    // Partial sums: [phase][tile row][x row].
    struct Shared {
        float part[KPHASES][kTileN][kXRows];
    };

    // x slice in shared memory, fragment order: the 16-byte unit
    //   ((c * 2 + h) * kXRows + m) * 4 + t  holds x[m, kbeg + 64c + 16t + 8h .. + 7],
    // so lane (g, t) of a warp reads the units of rows 8j + g as 32 consecutive 16-byte units.
    static __device__ __forceinline__ void stage_x(uint4* xs, const __nv_bfloat16* x, uint32_t rows,
                                                   uint32_t k, uint32_t kbeg, uint32_t kend,
                                                   uint32_t nchunks, bool vec) {
        const uint32_t units = nchunks * 2u * kXRows * 4u;
        for (uint32_t u = threadIdx.x; u < units; u += kThreads) {
            const uint32_t t = u & 3u;
            const uint32_t m = (u >> 2) % kXRows;
            const uint32_t ch = (u >> 2) / kXRows;  // c * 2 + h
            const uint32_t kk = kbeg + (ch >> 1) * kChunk + 16u * t + 8u * (ch & 1u);
            uint32_t valid = 0;
            if (m < rows && kk < kend) valid = min(8u, kend - kk);
            xs[u] = valid ? load_x8(x + static_cast<uint64_t>(m) * k + kk, valid, vec)
                          : make_uint4(0u, 0u, 0u, 0u);
        }
    }

    // Loads the weight words of chunks c0, c0 + KPHASES, ... (U of them) for this lane's rows.
    static __device__ __forceinline__ void load_chunks(uint4 (&w)[U][RT][2], const uint8_t* q, uint32_t n,
                                                       uint32_t k, uint32_t kbeg, uint32_t kend,
                                                       uint32_t nchunks, uint32_t c0, uint32_t row0,
                                                       uint32_t lane, bool vec) {
        const uint32_t g = lane >> 2, t = lane & 3u;
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const uint32_t c = c0 + u * KPHASES;
            const uint32_t kk = kbeg + c * kChunk + 16u * t;
            const uint32_t valid = (c < nchunks && kk < kend) ? min(16u, kend - kk) : 0u;
#pragma unroll
            for (int i = 0; i < RT; ++i) {
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const uint32_t row = row0 + 16u * i + 8u * h + g;
                    const uint32_t v = row < n ? valid : 0u;
                    w[u][i][h] = load_w16(q + static_cast<uint64_t>(row) * k + kk, v, vec);
                }
            }
        }
    }

    // acc += the products of U loaded chunks (chunks beyond nchunks are zero weights and skipped).
    static __device__ __forceinline__ void mma_chunks(float (&acc)[RT][MT][4], const uint4 (&w)[U][RT][2],
                                                      const uint4* xs, uint32_t nchunks, uint32_t c0,
                                                      uint32_t lane) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const uint32_t c = c0 + u * KPHASES;
            if (c >= nchunks) break;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                uint4 xv[MT];
#pragma unroll
                for (int j = 0; j < MT; ++j) xv[j] = xs[((c * 2u + h) * kXRows + 8u * j) * 4u + lane];
#pragma unroll
                for (int s2 = 0; s2 < 2; ++s2) {
                    const int s = 2 * h + s2;  // word of the weight load: k0 + 16t + 4s .. + 3
                    uint32_t b0[MT], b1[MT];
#pragma unroll
                    for (int j = 0; j < MT; ++j) {
                        const uint32_t x01 = word(xv[j], 2 * s2), x23 = word(xv[j], 2 * s2 + 1);
                        b0[j] = prmt(x01, x23, 0x5410u);  // (x[k + 0], x[k + 2])
                        b1[j] = prmt(x01, x23, 0x7632u);  // (x[k + 1], x[k + 3])
                    }
#pragma unroll
                    for (int i = 0; i < RT; ++i) {
                        const uint32_t lo = word(w[u][i][0], s), hi = word(w[u][i][1], s);
                        const uint32_t a0 = e4m3_02_to_bf16x2(lo), a2 = e4m3_13_to_bf16x2(lo);
                        const uint32_t a1 = e4m3_02_to_bf16x2(hi), a3 = e4m3_13_to_bf16x2(hi);
#pragma unroll
                        for (int j = 0; j < MT; ++j) mma_bf16_16816(acc[i][j], a0, a1, a2, a3, b0[j], b1[j]);
                    }
                }
            }
        }
    }

    // The vector and byte paths are compiled separately (VEC), so each keeps its registers.
    static __device__ __forceinline__ void run(const __nv_bfloat16* x, const uint8_t* q, const float* scale,
                                               __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k,
                                               uint4* xs, Shared& sh) {
        if ((k & 15u) == 0 && aligned16(q, x)) {
            run_path<true>(x, q, scale, out, rows, n, k, xs, sh);
        } else {
            run_path<false>(x, q, scale, out, rows, n, k, xs, sh);
        }
    }

    template <bool VEC>
    static __device__ __forceinline__ void run_path(const __nv_bfloat16* x, const uint8_t* q, const float* scale,
                                                    __nv_bfloat16* out, uint32_t rows, uint32_t n, uint32_t k,
                                                    uint4* xs, Shared& sh) {
        cg::cluster_group cluster = cg::this_cluster();
        const uint32_t rank = cluster.block_rank();
        const uint32_t tile = blockIdx.x / kSplit;
        const uint32_t span = rank_k_span(k);
        const uint32_t kbeg = min(k, rank * span);
        const uint32_t kend = min(k, kbeg + span);
        const uint32_t nchunks = (kend - kbeg + kChunk - 1) / kChunk;
        const uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
        const uint32_t rg = warp % ROWGROUPS, kp = warp / ROWGROUPS;
        const uint32_t row0 = tile * kTileN + rg * 16u * RT;
        constexpr bool vec = VEC;

        float acc[RT][MT][4];
#pragma unroll
        for (int i = 0; i < RT; ++i)
#pragma unroll
            for (int j = 0; j < MT; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

        uint4 w[U][RT][2];
        load_chunks(w, q, n, k, kbeg, kend, nchunks, kp, row0, lane, vec);  // in flight while x is staged
        stage_x(xs, x, rows, k, kbeg, kend, nchunks, vec);
        __syncthreads();
        for (uint32_t c0 = kp; c0 < nchunks; c0 += U * KPHASES) {
            if (c0 != kp) load_chunks(w, q, n, k, kbeg, kend, nchunks, c0, row0, lane, vec);
            mma_chunks(acc, w, xs, nchunks, c0, lane);
        }

        // Partials: acc[i][j] = rows (g, g + 8) of row tile i, x rows 8j + 2t, 8j + 2t + 1.
        const uint32_t g = lane >> 2, t = lane & 3u;
#pragma unroll
        for (int i = 0; i < RT; ++i) {
            const uint32_t r = rg * 16u * RT + 16u * i + g;
#pragma unroll
            for (int j = 0; j < MT; ++j) {
                const uint32_t m = 8u * j + 2u * t;
                sh.part[kp][r][m] = acc[i][j][0];
                sh.part[kp][r][m + 1] = acc[i][j][1];
                sh.part[kp][r + 8][m] = acc[i][j][2];
                sh.part[kp][r + 8][m + 1] = acc[i][j][3];
            }
        }
        cluster.sync();
        for (uint32_t idx = threadIdx.x; idx < 16u * kXRows; idx += kThreads) {
            const uint32_t m = idx >> 4;
            const uint32_t r = rank * 16u + (idx & 15u);
            const uint32_t row = tile * kTileN + r;
            if (m < rows && row < n) {
                float s = 0.f;
                for (uint32_t src = 0; src < kSplit; ++src) {
                    const Shared* remote = cluster.map_shared_rank(&sh, src);
#pragma unroll
                    for (int p = 0; p < KPHASES; ++p) s += remote->part[p][r][m];
                }
                out[static_cast<uint64_t>(m) * n + row] = __float2bfloat16_rn(s * __ldg(scale + row));
            }
        }
        cluster.sync();  // keep this CTA's partials alive until every rank has read them
    }
};

}  // namespace dflash_fp8
