// Split K over a thread-block cluster along z, with no workspace (the GEMMs' few-tile case).
//
// A grid of Z > 1 along z, launched as clusters of Z CTAs along z: the CTA of rank r
// (blockIdx.z) runs the K tiles [r * T / Z, (r + 1) * T / Z) of the T (split_k_range), and
// split_k_epilogue sums the Z partial tiles over distributed shared memory, each rank adding up
// its share of the rows in rank order (p0 + p1 + ... + p(Z-1)), so that the outputs are
// deterministic and equal across paths that split alike.
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

// Bytes of shared memory split_k_epilogue's slots need for tiles of up to ROWS rows of STRIDE
// floats, K split over at most ZMAX ranks: each rank receives ZMAX slots of ceil(ROWS / ZMAX)
// rows at most, (ROWS + ZMAX - 1) rows in all. Callers check that their stages hold it.
constexpr uint32_t split_k_smem_bytes(uint32_t rows, uint32_t stride, uint32_t zmax) {
    return (rows + zmax - 1u) * stride * 4u;
}

// A GEMM's epilogue: store2(row, col, v0, v1) writes two adjacent outputs of the tile (col even;
// it bounds-checks). pairs(f) calls f(row, col, v0, v1) for each pair of adjacent accumulators of
// this thread (col even, below BN, the tile's width). Every thread of the CTA (THREADS of them)
// must call it: it holds two cluster barriers when K is split.
//
// One CTA along z: straight from the accumulator pairs. Split K (a cluster of Z <= ZMAX ranks
// along z): rank r owns the tile's rows [r * V / Z, (r + 1) * V / Z) of its V valid rows. Once
// every rank is done with its shared memory, each thread stores each of its pairs of valid rows
// into the owner's shared memory (its own CTA's or another's: slot r, ceil(V / Z) rows of STRIDE
// floats a slot, over the caller's stages); stores, not loads, cross the cluster, so nothing waits
// on another CTA's memory. After a cluster barrier each rank sums its rows' Z slots from its own
// shared memory, always as p0 + p1 + ... + p(Z-1), 4 columns at a time, consecutive threads on
// consecutive column groups of a row, or with DOWN consecutive rows of a column group (for a
// transposed tile, whose rows are the output's contiguous index: the stores then coalesce), and
// stores them. The sums do not depend on which rank computes them, so the outputs are
// deterministic and equal across paths that split alike. The slots need
// split_k_smem_bytes(rows, STRIDE, ZMAX) bytes of `smem`; a larger cluster traps.
template <uint32_t BN, uint32_t STRIDE, uint32_t THREADS, bool DOWN = false, uint32_t ZMAX = 4, typename Pairs,
          typename Store2>
static __device__ __forceinline__ void split_k_epilogue(Pairs&& pairs, Store2&& store2, void* smem, uint32_t rows,
                                                        uint32_t cols) {
    static_assert(STRIDE % 4 == 0 && STRIDE >= BN, "16-byte slot rows of at least BN floats");
    const uint32_t z = gridDim.z;
    if (z == 1) {
        pairs(store2);
        return;
    }
    if (z > ZMAX) __trap();
    const uint32_t rank = blockIdx.z, share = (rows + z - 1u) / z, part = smem_addr(smem);
    const uint32_t slot_bytes = share * STRIDE * 4u;
    // Each rank's first row (rows past the cluster: no row reaches them), and where this rank's
    // slot lies in its window, less (r - first) * STRIDE * 4.
    uint32_t first[ZMAX], to[ZMAX];
#pragma unroll
    for (uint32_t s = 0; s < ZMAX; ++s) {
        first[s] = s < z ? rows * s / z : rows;
        to[s] = cluster_map(part, s < z ? s : rank) + rank * slot_bytes;
    }
    __syncthreads();  // the warps reconverged and done with the stages (the cluster barrier's "aligned")
    cluster_sync();   // every rank is done with the stages that the slots overwrite
    pairs([&](uint32_t r, uint32_t c, float v0, float v1) {
        // the owner's slot row of r (the last rank whose first row is <= r), computed before the
        // branch: pure in r, so shared by all of a thread's pairs of one row
        uint32_t at = to[0], f = first[0];
#pragma unroll
        for (uint32_t s = 1; s < ZMAX; ++s) {
            at = r >= first[s] ? to[s] : at;
            f = r >= first[s] ? first[s] : f;
        }
        at += (r - f) * STRIDE * 4u;
        if (r < rows) st_cluster_f32x2(at + c * 4u, v0, v1);
    });
    cluster_sync();  // every pair is in its owner's slots
    const uint32_t r0 = rows * rank / z, mine = rows * (rank + 1u) / z - r0;
    auto f32x4 = [](const uint4& u) {
        return make_float4(__uint_as_float(u.x), __uint_as_float(u.y), __uint_as_float(u.z), __uint_as_float(u.w));
    };
    for (uint32_t i = threadIdx.x; i < mine * (BN / 4); i += THREADS) {
        const uint32_t lr = DOWN ? i % mine : i / (BN / 4), c = 4u * (DOWN ? i / mine : i % (BN / 4));
        if (c >= cols) continue;
        const uint32_t at = part + (lr * STRIDE + c) * 4u;
        float4 v = f32x4(lds128(at));
        for (uint32_t s = 1; s < z; ++s) {
            const float4 p = f32x4(lds128(at + s * slot_bytes));
            v.x += p.x;
            v.y += p.y;
            v.z += p.z;
            v.w += p.w;
        }
        store2(r0 + lr, c, v.x, v.y);
        store2(r0 + lr, c + 2u, v.z, v.w);
    }
}

}  // namespace kcommon
