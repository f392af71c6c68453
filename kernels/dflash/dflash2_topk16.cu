// DFlash2 top-16 of each row of logits (f32 or bf16), with unary scores, overwriting the
// selected logits.
//
// For each row: the 16 largest logits in descending order (ties -> the smaller index; NaN of
// either sign counts as larger than +inf, NaNs among themselves by index; -0 == +0; -inf is an
// ordinary value), ids[row, i] = their indices, scores[row, i] = cap * tanh(multiplier * logit /
// cap) (multiplier * logit when cap == 0), in f32 with separately rounded operations, and
// logits[row, id] = -inf for the 16 selected ids.  BF16 logits are read as the f32 values they
// are exactly (their bits << 16), so the f32 and bf16 instances give the same ids and scores
// for the same values; the bf16 instance reads half the bytes (an lm_head's BF16 output needs
// no conversion first).
//
// Every element becomes a unique 64-bit key (ordered 32-bit value key << 32 | ~index), larger
// key = ranked first, so the selection is a top-16 of distinct integers: deterministic whatever
// the order of the work.  Key 0 is never produced and marks "no element".
//
// Layout (specs/dflash2.yaml): grid [split, rows], 512 threads; CTA `part` of row `row` owns
// ceil(ceil(vocab / 4) / split) consecutive 4-element vectors, at most 8 per thread (the spec's
// split guarantees it), all loaded at once (16-byte streaming loads of f32, 8-byte ones of
// bf16, when the row is aligned to a vector; element loads otherwise).  Local top-16 of the chunk:
//   1. each thread's largest key; each warp sorts its 32 (bitonic, shuffles) and keeps 16;
//   2. a tree of bitonic merges (one warp per pair of sorted lists, shared memory) gives the
//      16 largest thread maxima; their smallest, T, is a lower bound of the chunk's 16th
//      largest key (16 distinct elements reach it);
//   3. elements with key >= T are the candidates: they come from the (at most 16) threads whose
//      maximum reaches T, so at most 16 * 32; they are sorted by warps in groups of 32 and
//      merged by the same tree.
// The CTA writes its sorted 16 keys to work[row, part, :] and counts itself done on
// counter[row] (zeroed by the launcher before each launch); the last CTA of the row merges the
// split lists (same tree), writes ids and scores and overwrites the selected logits.  Nothing
// is allocated; no result depends on timing.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace dflash2_topk_detail {

constexpr uint32_t kThreads = 512;      // must match TOPK_THREADS in specs/dflash2.yaml
constexpr uint32_t kWarps = kThreads / 32;
constexpr uint32_t kVecPerThread = 8;   // TOPK_TILE = kThreads * kVecPerThread * 4 elements
constexpr uint32_t kMaxSplit = 32;      // must match TOPK_MAX_SPLIT
constexpr uint32_t kTop = 16;
constexpr uint32_t kMaxCand = kTop * kVecPerThread * 4;  // 16 threads x their 32 elements

using u64 = unsigned long long;

// Ordered key of an f32 bit pattern: larger value -> larger key; NaN -> 0xffffffff;
// -0 and +0 -> 0x80000000; -inf -> 0x007fffff. Never 0.
static __device__ __forceinline__ uint32_t fkey(uint32_t b) {
    const uint32_t a = b & 0x7fffffffu;
    if (a > 0x7f800000u) return 0xffffffffu;
    if (a == 0u) return 0x80000000u;
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

static __device__ __forceinline__ u64 make_key(uint32_t k32, uint32_t idx) {
    return (static_cast<u64>(k32) << 32) | static_cast<uint32_t>(~idx);
}

static __device__ __forceinline__ u64 umax(u64 a, u64 b) { return a > b ? a : b; }
static __device__ __forceinline__ u64 umin(u64 a, u64 b) { return a < b ? a : b; }

// Sorts the warp's 32 keys (one per lane) in descending order over the lanes.
static __device__ __forceinline__ u64 warp_sort_desc(u64 x, uint32_t lane) {
#pragma unroll
    for (uint32_t k = 2; k <= 32; k <<= 1) {
#pragma unroll
        for (uint32_t j = k >> 1; j > 0; j >>= 1) {
            const u64 o = __shfl_xor_sync(0xffffffffu, x, j);
            const bool keep_max = ((lane & j) == 0) == ((lane & k) == 0);
            x = keep_max ? umax(x, o) : umin(x, o);
        }
    }
    return x;
}

// Lanes hold a bitonic sequence (descending, then ascending); returns it sorted descending.
static __device__ __forceinline__ u64 warp_merge_desc(u64 x, uint32_t lane) {
#pragma unroll
    for (uint32_t j = 16; j > 0; j >>= 1) {
        const u64 o = __shfl_xor_sync(0xffffffffu, x, j);
        x = ((lane & j) == 0) ? umax(x, o) : umin(x, o);
    }
    return x;
}

// lists[0 .. n) are sorted (descending) lists of 16 keys; afterwards lists[0] holds the 16
// largest keys of them all, sorted. n <= 2 * kWarps. Called by the whole CTA (it syncs).
static __device__ __forceinline__ void tree_merge(u64 (*lists)[kTop], uint32_t n, uint32_t warp,
                                                  uint32_t lane) {
    for (uint32_t step = 1; step < n; step <<= 1) {
        const uint32_t a = warp * 2 * step, b = a + step;
        if (b < n) {
            u64 x = lane < kTop ? lists[a][lane] : lists[b][31 - lane];
            x = warp_merge_desc(x, lane);
            if (lane < kTop) lists[a][lane] = x;
        }
        __syncthreads();
    }
}

// One warp's 32 keys (one per lane, any order) -> lists[warp], its 16 largest, sorted.
static __device__ __forceinline__ void warp_list(u64 x, u64 (*lists)[kTop], uint32_t warp,
                                                 uint32_t lane) {
    x = warp_sort_desc(x, lane);
    if (lane < kTop) lists[warp][lane] = x;
}

static __device__ __forceinline__ uint4 load_vec(const float* row, uint32_t v, uint32_t vocab,
                                                 bool aligned) {
    const uint32_t e = v * 4u;
    if (aligned && e + 3u < vocab) {
        uint4 r;
        asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                     : "l"(row + e));
        return r;
    }
    // Element loads; positions past the row give bits whose key is replaced by 0 below.
    uint32_t w[4];
#pragma unroll
    for (uint32_t i = 0; i < 4; ++i) w[i] = e + i < vocab ? __float_as_uint(__ldg(row + e + i)) : 0u;
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// The same for bf16: 4 elements (8 bytes) as their f32 bit patterns.
static __device__ __forceinline__ uint4 load_vec(const __nv_bfloat16* row, uint32_t v, uint32_t vocab,
                                                 bool aligned) {
    const uint32_t e = v * 4u;
    const unsigned short* r = reinterpret_cast<const unsigned short*>(row);
    if (aligned && e + 3u < vocab) {
        uint32_t a, b;
        asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(a), "=r"(b) : "l"(r + e));
        return make_uint4(a << 16, a & 0xffff0000u, b << 16, b & 0xffff0000u);  // little-endian halves
    }
    uint32_t w[4];
#pragma unroll
    for (uint32_t i = 0; i < 4; ++i) w[i] = e + i < vocab ? static_cast<uint32_t>(__ldg(r + e + i)) << 16 : 0u;
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// One logit as f32 (read through L2: other CTAs of the row have just finished with it), and
// the -inf written over a selected one.
static __device__ __forceinline__ float read_logit(const float* p) { return __ldcg(p); }
static __device__ __forceinline__ float read_logit(const __nv_bfloat16* p) {
    return __uint_as_float(static_cast<uint32_t>(__ldcg(reinterpret_cast<const unsigned short*>(p))) << 16);
}
static __device__ __forceinline__ void write_neg_inf(float* p) { *p = __uint_as_float(0xff800000u); }
static __device__ __forceinline__ void write_neg_inf(__nv_bfloat16* p) {
    *reinterpret_cast<unsigned short*>(p) = 0xff80u;
}

static __device__ __forceinline__ float unary(float logit, float multiplier, float cap) {
    const float z = __fmul_rn(multiplier, logit);
    if (cap == 0.f) return z;
    return __fmul_rn(cap, tanhf(__fdiv_rn(z, cap)));
}

}  // namespace dflash2_topk_detail

template <typename T>
__global__ void __launch_bounds__(512)
dflash2_topk16_kernel(T* logits, int32_t* ids, float* scores, int64_t* work, int32_t* counter,
                      uint32_t rows, uint32_t vocab, float multiplier, float cap) {
    namespace d = dflash2_topk_detail;
    using d::u64;
    __shared__ u64 lists[2 * d::kWarps][d::kTop];
    __shared__ u64 cand[d::kMaxCand];
    __shared__ uint32_t ncand;
    __shared__ int last;

    const uint32_t tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    const uint32_t row = blockIdx.y, part = blockIdx.x, split = gridDim.x;
    if (row >= rows) return;
    T* lrow = logits + static_cast<size_t>(row) * vocab;
    if (tid == 0) ncand = 0;

    // The chunk: vectors [v0, v1) of the row, this thread's v0 + tid + k * kThreads.
    const uint32_t nvec = (vocab + 3u) / 4u;
    const uint32_t per = (nvec + split - 1u) / split;
    const uint32_t v0 = min(nvec, part * per);
    const uint32_t v1 = min(nvec, v0 + per);
    const bool aligned = (reinterpret_cast<uintptr_t>(lrow) & (4u * sizeof(T) - 1u)) == 0;

    uint32_t key[d::kVecPerThread][4];
#pragma unroll
    for (uint32_t k = 0; k < d::kVecPerThread; ++k) {
        const uint32_t v = v0 + tid + k * d::kThreads;
        const uint4 r = v < v1 ? d::load_vec(lrow, v, vocab, aligned) : make_uint4(0u, 0u, 0u, 0u);
        key[k][0] = r.x;
        key[k][1] = r.y;
        key[k][2] = r.z;
        key[k][3] = r.w;
    }
    u64 tmax = 0;
#pragma unroll
    for (uint32_t k = 0; k < d::kVecPerThread; ++k) {
        const uint32_t v = v0 + tid + k * d::kThreads;
#pragma unroll
        for (uint32_t i = 0; i < 4; ++i) {
            const uint32_t e = v * 4u + i;
            key[k][i] = (v < v1 && e < vocab) ? d::fkey(key[k][i]) : 0u;
            if (key[k][i] != 0u) tmax = d::umax(tmax, d::make_key(key[k][i], e));
        }
    }

    // 1-2: the 16 largest thread maxima; T = the smallest of them (0 if fewer than 16).
    d::warp_list(tmax, lists, warp, lane);
    __syncthreads();
    d::tree_merge(lists, d::kWarps, warp, lane);
    const u64 thr = lists[0][d::kTop - 1];

    // 3: candidates (key >= T), at most 16 threads x 32 elements.
    if (tmax != 0 && tmax >= thr) {
#pragma unroll
        for (uint32_t k = 0; k < d::kVecPerThread; ++k) {
            const uint32_t v = v0 + tid + k * d::kThreads;
#pragma unroll
            for (uint32_t i = 0; i < 4; ++i) {
                if (key[k][i] != 0u) {
                    const u64 kk = d::make_key(key[k][i], v * 4u + i);
                    if (kk >= thr) {
                        const uint32_t pos = atomicAdd(&ncand, 1u);
                        if (pos < d::kMaxCand) cand[pos] = kk;
                    }
                }
            }
        }
    }
    __syncthreads();
    const uint32_t n = min(ncand, d::kMaxCand);
    {
        const uint32_t i = warp * 32u + lane;
        d::warp_list(i < n ? cand[i] : 0ull, lists, warp, lane);
    }
    __syncthreads();
    d::tree_merge(lists, max(1u, (n + 31u) / 32u), warp, lane);

    // This CTA's sorted 16 -> work[row, part, :]; the row's last CTA merges them all.
    u64* wrow = reinterpret_cast<u64*>(work) + static_cast<size_t>(row) * d::kMaxSplit * d::kTop;
    if (tid < d::kTop) wrow[part * d::kTop + tid] = lists[0][tid];
    __threadfence();
    __syncthreads();
    if (tid == 0) last = atomicAdd(counter + row, 1) == static_cast<int>(split - 1u);
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (uint32_t i = tid; i < split * d::kTop; i += d::kThreads) {
        lists[i / d::kTop][i % d::kTop] = __ldcg(wrow + i);
    }
    __syncthreads();
    d::tree_merge(lists, split, warp, lane);
    if (tid < d::kTop) {
        const u64 kk = lists[0][tid];
        const uint32_t idx = ~static_cast<uint32_t>(kk);
        const float logit = d::read_logit(lrow + idx);
        ids[static_cast<size_t>(row) * d::kTop + tid] = static_cast<int32_t>(idx);
        scores[static_cast<size_t>(row) * d::kTop + tid] = d::unary(logit, multiplier, cap);
        d::write_neg_inf(lrow + idx);
    }
}
