// Row-wise argmax of bf16 logits [rows, vocab] -> int32 index, torch.argmax semantics.
//
// Semantics (identical to torch.argmax on CUDA):
//   * ties -> the smallest index; -0.0 and +0.0 are equal;
//   * NaN is larger than everything (+Inf included): a row holding a NaN (of either
//     sign, any payload) returns the index of its first NaN;
//   * a row of all -Inf returns 0.
// Comparisons are done on integer keys or with inline-PTX max.NaN.bf16x2 (no .ftz:
// subnormals compare as themselves; +0 > -0, which the scan treats as equal), so
// compiler flags such as -ftz or --use_fast_math do not change the result.
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
// cluster fits in a GPC with few free SMs (e.g. on GB10).  At most 40 registers on
// sm_90 (3 CTAs, 1536 threads per SM).
// A row is read as a scalar head up to the first 16-byte boundary (any vocab and any
// 2-byte-aligned base pointer work), 16-byte vectors, then a scalar tail.  Each
// thread issues four 16-byte streaming loads (ld.global.nc.L1::no_allocate) before
// using any (64 bytes in flight per thread, 96 KiB per SM), then folds each vector
// into its running best without a branch (track(): a max.NaN tree, one compare, six
// selects, ~16 instructions per vector).  The old per-vector "beats the best? then
// find the element" branch diverged in almost every warp, since a thread sees only
// ~37 vectors of a 151936-entry row and each is a new record for some lane of the
// warp early on: ~95 instructions per vector, enough to make the scan issue-bound.
// Which element of the best vector holds the maximum is found once per thread at
// the end.  A thread's vectors are visited in increasing index order and only a
// strictly larger value replaces the best, so the smallest index wins a tie.  Thread
// bests become 64-bit keys
//   (ordered value key << 32) | ~index
// whose unsigned maximum is the (largest value, smallest index) pair, max-reduced
// with warp shuffles, then across warps in shared memory (then across the cluster).
// No atomics, no workspace, deterministic.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cstdint>

#include "bf16x2.cuh"

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

using dflash_common::ld_stream;  // logits are read once

constexpr uint32_t kNone = 0xffffffffu;
constexpr uint32_t kNegInf2 = 0xff80ff80u;  // bf16x2 (-inf, -inf)

// A thread's scan of its 16-byte vectors, branch-free.  `best2` holds the best value
// so far in both halves, as max.NaN produced it (so a NaN is the canonical NaN);
// `elem0` is the index of the first element of the first vector that reached it and
// `w` that vector.  Which element of `w` it is is found once, at the end (finish).
struct VecTrack {
    uint32_t best2;
    uint32_t elem0;
    uint4 w;
};

// Starts at -inf with the thread's first vector (elem0 = kNone if it has none): if no
// vector ever beats -inf, every element this thread sees is -inf and the first one
// wins, which is element 0 of its first vector; w holds -inf so finish() finds it.
static __device__ __forceinline__ VecTrack track_init(uint32_t first_elem) {
    return VecTrack{kNegInf2, first_elem, make_uint4(kNegInf2, kNegInf2, kNegInf2, kNegInf2)};
}

// Vectors must come in increasing index order.  The vector's maximum h (max.NaN over
// its 8 elements, in both halves) replaces the best only if t = max.NaN(h, best2)
// differs from best2, i.e. h is larger, or h is a NaN and best2 is not (then
// t is the canonical NaN, after which further NaNs leave t == best2: the first NaN
// wins); -0 against +0 (the only equal values with different bits) is not an update.
// Equal values never update, so the earliest vector keeps a tie.  No branch: the
// update would otherwise diverge in most warps for the first few dozen vectors of a
// thread, which is all a thread sees of a 150k-entry row.
static __device__ __forceinline__ void track(VecTrack& s, const uint4& v, uint32_t elem0) {
    const uint32_t m = max_nan_bf16x2(max_nan_bf16x2(v.x, v.y), max_nan_bf16x2(v.z, v.w));
    const uint32_t h = max_nan_bf16x2(m, __byte_perm(m, 0u, 0x1032u));  // both halves
    const uint32_t t = max_nan_bf16x2(h, s.best2);
    const bool up = (t != s.best2) & (((t | s.best2) & 0x7fffu) != 0u);
    s.best2 = up ? t : s.best2;
    s.elem0 = up ? elem0 : s.elem0;
    s.w.x = up ? v.x : s.w.x;
    s.w.y = up ? v.y : s.w.y;
    s.w.z = up ? v.z : s.w.z;
    s.w.w = up ? v.w : s.w.w;
}

// The thread's (key, index) from its vectors: the first element of w whose key is
// that of best2 (there is one: best2 is an element of w, up to the sign of a zero or
// the payload of a NaN, which have equal keys).
static __device__ __forceinline__ Best track_finish(const VecTrack& s) {
    if (s.elem0 == kNone) return Best{0u, 0u};
    const uint32_t k = key16(s.best2 & 0xffffu);
    const uint32_t w[4] = {s.w.x, s.w.y, s.w.z, s.w.w};
    uint32_t j = 7;
#pragma unroll
    for (int e = 7; e >= 0; --e) {
        const uint32_t h = (e & 1) ? (w[e >> 1] >> 16) : (w[e >> 1] & 0xffffu);
        if (key16(h) == k) j = static_cast<uint32_t>(e);
    }
    return Best{k, s.elem0 + j};
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

    const uint32_t chunk = (nvec + nparts - 1) / nparts;
    const uint32_t beg = part * chunk;
    const uint32_t end = min(nvec, beg + chunk);
    const uint4* pv = reinterpret_cast<const uint4*>(p + head);
    uint32_t v = beg + tid;
    VecTrack s = track_init(v < end ? head + (v << 3) : kNone);
    // Full batches: kUnroll loads in flight, no bounds checks.  (nvec < 2^28 and
    // bd <= 1024, so nothing here overflows 32 bits.)
    {
        const uint4* q = pv + v;
        const size_t sb = bd;
        for (; v + (kUnroll - 1) * bd < end; v += kUnroll * bd, q += kUnroll * sb) {
            uint4 r[kUnroll];
#pragma unroll
            for (uint32_t k = 0; k < kUnroll; ++k) r[k] = ld_stream(q + k * sb);
#pragma unroll
            for (uint32_t k = 0; k < kUnroll; ++k) track(s, r[k], head + ((v + k * bd) << 3));
        }
    }
    // The last, partial batch (at most kUnroll - 1 vectors), loads issued together.
    {
        uint4 r[kUnroll - 1];
#pragma unroll
        for (uint32_t k = 0; k < kUnroll - 1; ++k) {
            if (v + k * bd < end) r[k] = ld_stream(pv + v + k * bd);
        }
#pragma unroll
        for (uint32_t k = 0; k < kUnroll - 1; ++k) {
            if (v + k * bd < end) track(s, r[k], head + ((v + k * bd) << 3));
        }
    }
    const Best vb = track_finish(s);
    Best best{0u, 0u};
    if (part == 0 && tid < head) visit_scalar(best, __ldg(ph + tid), tid);
    if (part == nparts - 1 && tid < vocab - tail0) visit_scalar(best, __ldg(ph + tail0 + tid), tail0 + tid);
    return umax64(pack(best), pack(vb));
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

// At least 3 resident CTAs of 512 threads per SM on sm_90 (40 registers: 1536 threads
// with 64 bytes of loads in flight each, 96 KiB per SM); on sm_12x (GB10) at 40
// registers ptxas spills, so 2 there.  The device pass alone sees __CUDA_ARCH__; the
// host pass ignores the bound.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
#define DFLASH_ARGMAX_MIN_CTAS_PER_SM 2
#else
#define DFLASH_ARGMAX_MIN_CTAS_PER_SM 3
#endif

__global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(512, DFLASH_ARGMAX_MIN_CTAS_PER_SM)
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
