// Split K over a thread-block cluster along z, with no workspace (the GEMMs' few-tile case).
//
// A grid of Z > 1 along z, launched as clusters of Z CTAs along z: the CTA of rank r
// (blockIdx.z) runs the K tiles [r * T / Z, (r + 1) * T / Z) of the T (split_k_range), stashes
// its unscaled f32 output tile in its own shared memory (split_k_stash; the caller's stages are
// free by then), and split_k_fold sums the Z partial tiles over distributed shared memory: rank r
// folds rows [r * V / Z, (r + 1) * V / Z) of the V valid rows, 4 columns at a time, always as
// p0 + p1 + ... + p(Z-1). The sums do not depend on which rank or code path computes them, so
// the outputs are deterministic and equal across paths that split alike. split_k_epilogue is the
// whole epilogue of a GEMM that may split: a plain store when it does not, else stash and fold.
#pragma once

#include <cstdint>

#include "ptx.cuh"

namespace kcommon {

struct KRange {
    uint32_t first, last;
};

// This CTA's tiles of `tiles` (all of them when gridDim.z == 1).
static __device__ __forceinline__ KRange split_k_range(uint32_t tiles) {
    return {tiles * blockIdx.z / gridDim.z, tiles * (blockIdx.z + 1u) / gridDim.z};
}

// Writes this thread's accumulator pairs into the partial tile (STRIDE floats a row, a multiple
// of 4). pairs(f) calls f(row, col, v0, v1) for each pair of adjacent accumulators (col even).
template <uint32_t STRIDE, typename Pairs>
static __device__ __forceinline__ void split_k_stash(float* part, Pairs&& pairs) {
    static_assert(STRIDE % 4 == 0, "16-byte partial rows for the fold's vector reads");
    __syncthreads();  // every warp is done with the stages that the partial tile overwrites
    pairs([&](uint32_t r, uint32_t c, float v0, float v1) {
        *reinterpret_cast<float2*>(part + r * STRIDE + c) = make_float2(v0, v1);
    });
}

// The fold: store(row, col, v) receives float4 v = the sums of columns col .. col + 3 of a row of
// this rank's share (col < cols, a multiple of 4; the caller bounds the last ones). Every thread
// of the CTA (THREADS of them) must call it: it holds two cluster barriers. Consecutive threads
// take consecutive column groups of a row, or with DOWN consecutive rows of a column group (for
// a transposed tile, whose rows are the output's contiguous index: the stores then coalesce).
template <uint32_t BN, uint32_t STRIDE, uint32_t THREADS, bool DOWN = false, typename Store>
static __device__ __forceinline__ void split_k_fold(const float* part, uint32_t rows, uint32_t cols,
                                                    Store&& store) {
    cluster_sync();  // every rank's partial tile is written and visible
    const uint32_t z = gridDim.z, rank = blockIdx.z;
    const uint32_t r0 = rows * rank / z, r1 = rows * (rank + 1u) / z, share = r1 - r0;
    const uint32_t base = smem_addr(part);
    for (uint32_t i = threadIdx.x; i < share * (BN / 4); i += THREADS) {
        const uint32_t r = r0 + (DOWN ? i % share : i / (BN / 4)), c = 4u * (DOWN ? i / share : i % (BN / 4));
        if (c >= cols) continue;
        const uint32_t at = base + (r * STRIDE + c) * 4u;
        float4 v = ld_cluster_f32x4(cluster_map(at, 0));
        for (uint32_t s = 1; s < z; ++s) {
            const float4 p = ld_cluster_f32x4(cluster_map(at, s));
            v.x += p.x;
            v.y += p.y;
            v.z += p.z;
            v.w += p.w;
        }
        store(r, c, v);
    }
    cluster_sync();  // no rank leaves while another may still read its tile
}

// A GEMM's epilogue: store2(row, col, v0, v1) writes two adjacent outputs of the tile (col even;
// it bounds-checks). One CTA along z: straight from this thread's accumulator pairs; split K:
// stash, then fold the valid rows x cols (cols from the tile's first column) over the cluster.
template <uint32_t BN, uint32_t STRIDE, uint32_t THREADS, bool DOWN = false, typename Pairs, typename Store2>
static __device__ __forceinline__ void split_k_epilogue(Pairs&& pairs, Store2&& store2, void* smem, uint32_t rows,
                                                        uint32_t cols) {
    if (gridDim.z == 1) {
        pairs(store2);
        return;
    }
    float* part = static_cast<float*>(smem);
    split_k_stash<STRIDE>(part, pairs);
    split_k_fold<BN, STRIDE, THREADS, DOWN>(part, rows, cols, [&](uint32_t r, uint32_t c, const float4& v) {
        store2(r, c, v.x, v.y);
        store2(r, c + 2u, v.z, v.w);
    });
}

}  // namespace kcommon
