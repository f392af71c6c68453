// Row-wise argmax of bf16 logits [rows, vocab] -> int32 index, torch.argmax semantics.
//
// Semantics (identical to torch.argmax on CUDA):
//   * ties -> the smallest index; -0.0 and +0.0 are equal;
//   * NaN is larger than everything (+Inf included): a row holding a NaN (of either
//     sign, any payload) returns the index of its first NaN;
//   * a row of all -Inf returns 0.
// All comparisons are done on integer keys, so compiler flags such as -ftz or
// --use_fast_math do not change the result (subnormals compare as themselves).
//
// Design: one launch, two modes chosen from the grid the spec computes
// (specs/argmax.yaml: grid.x = max(min(rows, 128) * 8, ceil(rows / 8) * 8) CTAs of
// 512 threads, compile-time __cluster_dims__(8) so a plain <<<>>> launch works):
//   * split mode, rows <= 128 (grid.x >= 8 * rows): the 8 CTAs of cluster r share row r,
//     each scanning an eighth of its 16-byte vectors; the 8 CTA results are combined
//     through distributed shared memory by CTA rank 0, which writes out[r].  For
//     rows = 1, vocab = 151936 that is 8 SMs with ~4.6 vector loads per thread.
//   * row mode, rows > 128: every CTA scans whole rows (grid-stride) on its own, with
//     no cluster traffic: for many rows the per-row cluster reduction costs more than
//     it saves (measured on H200: the crossover is at about 128-256 rows).
// 512 threads rather than 1024 so that several CTAs of a cluster can share an SM and a
// cluster fits in a GPC with few free SMs (e.g. on GB10).
// A row is read as a scalar head up to the first 16-byte boundary (any vocab and any
// 2-byte-aligned base pointer work), 16-byte vectors, then a scalar tail.  Each
// thread loads up to four uint4 at once; per vector a bf16x2 max.NaN tree gives the
// vector maximum, and only when its key beats the thread's best does the thread look
// for the first element equal to it (rare: O(log n) times per thread).  A thread's
// elements are visited in increasing index order, so a strict '>' keeps the smallest
// index.  Thread bests become 64-bit keys
//   (ordered value key << 32) | ~index
// whose unsigned maximum is the (largest value, smallest index) pair, max-reduced
// with warp shuffles, then across warps in shared memory (then across the cluster).
// No atomics, no workspace, deterministic.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cstdint>

namespace dflash_argmax_detail {

constexpr uint32_t kClusterSize = 8;  // must match CLUSTER in specs/argmax.yaml
constexpr uint32_t kUnroll = 4;

// Ordered 16-bit key of a bf16 bit pattern: larger value -> larger key; every NaN
// -> 0xffff (above +Inf = 0xff80); -0 and +0 -> 0x8000; -Inf -> 0x0080.  Key 0 is
// never produced, so it marks "no element seen".
static __device__ __forceinline__ uint32_t key16(uint32_t h) {
    const uint32_t a = h & 0x7fffu;
    if (a > 0x7f80u) return 0xffffu;
    return (h & 0x8000u) ? 0x8000u - a : 0x8000u + a;
}

// max.NaN on two packed bf16x2 words: NaN if either input is NaN.
static __device__ __forceinline__ uint32_t max_nan_bf16x2(uint32_t a, uint32_t b) {
    uint32_t r;
    asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

struct Best {
    uint32_t key;  // key16 of the best value, 0 = none yet
    uint32_t idx;
};

// Elements with indices greater than everything seen so far by this thread.
static __device__ __forceinline__ void visit_vec(Best& best, const uint4& v, uint32_t base_idx) {
    const uint32_t m = max_nan_bf16x2(max_nan_bf16x2(v.x, v.y), max_nan_bf16x2(v.z, v.w));
    const uint32_t k0 = key16(m & 0xffffu), k1 = key16(m >> 16);
    const uint32_t vk = k0 > k1 ? k0 : k1;
    if (vk > best.key) {
        // First element of the vector whose key equals the vector maximum.
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
        uint32_t j = 7;
#pragma unroll
        for (int e = 7; e >= 0; --e) {
            const uint32_t h = (e & 1) ? (w[e >> 1] >> 16) : (w[e >> 1] & 0xffffu);
            if (key16(h) == vk) j = static_cast<uint32_t>(e);
        }
        best.key = vk;
        best.idx = base_idx + j;
    }
}

static __device__ __forceinline__ void visit_scalar(Best& best, uint32_t h, uint32_t idx) {
    const uint32_t k = key16(h);
    if (k > best.key || (k == best.key && idx < best.idx)) {
        best.key = k;
        best.idx = idx;
    }
}

static __device__ __forceinline__ unsigned long long pack(const Best& b) {
    if (b.key == 0) return 0ull;
    return (static_cast<unsigned long long>(b.key) << 32) | static_cast<uint32_t>(~b.idx);
}

static __device__ __forceinline__ unsigned long long umax64(unsigned long long a,
                                                            unsigned long long b) {
    return a > b ? a : b;
}

static __device__ __forceinline__ unsigned long long warp_max(unsigned long long v) {
#pragma unroll
    for (int m = 16; m > 0; m >>= 1) v = umax64(v, __shfl_xor_sync(0xffffffffu, v, m));
    return v;
}

// Scans part `part` of `nparts` of one row: a scalar head up to the first 16-byte
// boundary (part 0), the 16-byte vectors split evenly over the parts, then a scalar
// tail (last part).  Returns this thread's packed best key (0 if it saw nothing).
static __device__ __forceinline__ unsigned long long scan_row(const __nv_bfloat16* p,
                                                              uint32_t vocab, uint32_t part,
                                                              uint32_t nparts) {
    const uint16_t* ph = reinterpret_cast<const uint16_t*>(p);
    uint32_t head = static_cast<uint32_t>((16u - (reinterpret_cast<uintptr_t>(p) & 15u)) & 15u) >> 1;
    if (head > vocab) head = vocab;
    const uint32_t nvec = (vocab - head) >> 3;
    const uint32_t tail0 = head + (nvec << 3);
    const uint32_t tid = threadIdx.x, bd = blockDim.x;

    Best best{0u, 0u};
    if (part == 0 && tid < head) visit_scalar(best, __ldg(ph + tid), tid);

    const uint32_t chunk = (nvec + nparts - 1) / nparts;
    const uint32_t beg = part * chunk;
    const uint32_t end = min(nvec, beg + chunk);
    const uint4* pv = reinterpret_cast<const uint4*>(p + head);
    for (uint32_t v = beg + tid; v < end; v += kUnroll * bd) {
        uint4 r[kUnroll];
#pragma unroll
        for (uint32_t k = 0; k < kUnroll; ++k) {
            const uint32_t vk = v + k * bd;
            r[k] = vk < end ? __ldg(pv + vk) : make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (uint32_t k = 0; k < kUnroll; ++k) {
            const uint32_t vk = v + k * bd;
            if (vk < end) visit_vec(best, r[k], head + (vk << 3));
        }
    }

    if (part == nparts - 1 && tid < vocab - tail0) visit_scalar(best, __ldg(ph + tail0 + tid), tail0 + tid);
    return pack(best);
}

// CTA-wide maximum of `key`; the result is valid in warp 0.  blockDim.x must be a
// multiple of 32.  Ends with the shared buffer free for reuse by the next call.
static __device__ __forceinline__ unsigned long long block_max(unsigned long long key,
                                                               unsigned long long* warp_best) {
    key = warp_max(key);
    if ((threadIdx.x & 31) == 0) warp_best[threadIdx.x >> 5] = key;
    __syncthreads();
    if (threadIdx.x < 32) {
        key = threadIdx.x < (blockDim.x >> 5) ? warp_best[threadIdx.x] : 0ull;
        key = warp_max(key);
    }
    __syncthreads();
    return key;
}

static __device__ __forceinline__ int32_t index_of(unsigned long long key) {
    return static_cast<int32_t>(~static_cast<uint32_t>(key));
}

}  // namespace dflash_argmax_detail

__global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(512)
dflash_argmax_bf16_kernel(const __nv_bfloat16* logits, int32_t* out, uint32_t rows,
                          uint32_t vocab) {
    namespace d = dflash_argmax_detail;
    namespace cg = cooperative_groups;
    static_assert(d::kClusterSize == 8, "__cluster_dims__ above must match kClusterSize");
    __shared__ unsigned long long warp_best[32];
    __shared__ unsigned long long cta_best;

    if (static_cast<uint64_t>(gridDim.x) < static_cast<uint64_t>(rows) * d::kClusterSize) {
        // Row mode (many rows): each CTA scans whole rows on its own; no cluster traffic.
        for (uint32_t row = blockIdx.x; row < rows; row += gridDim.x) {
            const unsigned long long key =
                d::block_max(d::scan_row(logits + static_cast<size_t>(row) * vocab, vocab, 0, 1),
                             warp_best);
            if (threadIdx.x == 0) out[row] = d::index_of(key);
        }
        return;
    }

    // Split mode (few rows): the 8 CTAs of a cluster share one row.
    cg::cluster_group cluster = cg::this_cluster();
    const uint32_t rank = cluster.block_rank();
    const uint32_t row = blockIdx.x / d::kClusterSize;  // uniform over the cluster
    if (row >= rows) return;                            // whole cluster leaves together

    const unsigned long long key = d::block_max(
        d::scan_row(logits + static_cast<size_t>(row) * vocab, vocab, rank, d::kClusterSize),
        warp_best);
    if (threadIdx.x == 0) cta_best = key;

    // Cluster reduction through distributed shared memory.
    cluster.sync();
    if (rank == 0 && threadIdx.x < 32) {
        unsigned long long k =
            threadIdx.x < d::kClusterSize ? *cluster.map_shared_rank(&cta_best, threadIdx.x) : 0ull;
        k = d::warp_max(k);
        if (threadIdx.x == 0) out[row] = d::index_of(k);
    }
    cluster.sync();  // keep every CTA's shared memory alive until rank 0 has read it
}
