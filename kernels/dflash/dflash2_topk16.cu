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
// Layout (specs/dflash2.yaml): grid [8, rows] of 512 threads, compile-time clusters of 8 CTAs:
// the cluster of a row splits it, CTA `rank` owning ceil(ceil(vocab / W) / 8) consecutive
// 16-byte vectors of W elements (4 f32 or 8 bf16), thread tid the vectors v0 + tid + k * 512.
// Two CTAs fit an SM (at most 64 registers), so that the 16 clusters of 16 rows are all
// resident at once (with one CTA of 1024 threads an SM, a GPC held fewer 8-CTA clusters and the
// last rows waited for a second wave).  Up to 40 elements a thread (vocab <= 163840) are loaded
// at once into registers (one 16-byte streaming load a vector, predicated rather than branched
// over so that all are in flight together, when the row is 16-byte aligned; element loads
// otherwise), as f32 bit patterns in quads of 4; a longer row's further vectors are streamed
// through and read again in step 4.
// Then:
//   1. each thread's largest key (from whole, aligned vectors in f32 arithmetic: the largest
//      value, then the first element equal to it, about three instructions an element where
//      forming every element's key takes a dozen; the keys are formed only in step 4, for the
//      candidates: on the H200 the kernel went from 14.8 to 12.0 us); each warp sorts its 32
//      maxima (bitonic, shuffles) and keeps 16; a tree of bitonic merges (one warp per pair of
//      sorted lists, shared memory) gives the CTA's 16 largest thread maxima. The bf16 instance
//      sorts and merges 32-bit keys (cta_key: a bf16 value's key and the element's index in the
//      CTA's chunk, the same order as the 64-bit keys) and widens the CTA's 16 afterwards; on the
//      H200 (A/B/A in one run) this step went from 2.3 to 1.4 us and the kernel from 11.6 to
//      10.6 us single, 9.5 to 8.5 us back to back (16-byte loads of 8 bf16, taken with it,
//      changed nothing on their own: 11.6 us);
//   2. each CTA writes that list into every CTA of the cluster (distributed shared memory),
//      one cluster barrier;
//   3. every CTA merges the 8 lists the same way: the row's 16 largest thread maxima, whose
//      smallest, T, is a lower bound of the row's 16th largest key (16 distinct elements reach
//      it; T = 0 when fewer than 16 threads hold elements);
//   4. elements with key >= T are the candidates: they come from the (at most 16) threads whose
//      maximum reaches T, so there are at most 16 * 128 of them, and for random logits about 16;
//      their threads park their elements' bits in shared memory, and a warp per such thread
//      forms their keys and appends the ones >= T to CTA 0's buffer (one shared-memory atomic
//      across the cluster per warp and 32 keys), one cluster barrier;
//   5. CTA 0 sorts the candidates (up to 32, as for random logits: one warp, no barrier; more:
//      warps of 32, the same merge tree, 512 at a time), writes ids and scores and overwrites
//      the selected logits; the logit value comes back from its key (read again only for a NaN
//      or a zero, whose sign or payload the key drops).
// No counter, no global scratch, nothing allocated; no result depends on timing.
// Measured on the H200 and not taken (16 x 151936, benchmarks/topk16_ablation.cu, A/B/A in one
// run, the whole kernel single / back to back, bf16): the warp sort as a loop instead of unrolled,
// 12.0 / 9.9 us either way; relaxed cluster arrivals for the warps that store nothing remote in
// steps 2 and 4, 12.9 / 10.8 (slower); step 2's lists sent as asynchronous stores counted on the
// receivers' mbarriers instead of a cluster barrier, 12.0 / 9.9 (no change); the merge trees of
// steps 1 and 3 replaced by one rank per key (binary searches in the other lists, one barrier),
// 14.4 / 12.2 (slower). After the bf16 step 1 on 32-bit keys (10.6 / 8.5 us): step 5's sort of
// at most 32 candidates replaced by each lane counting the candidates ranked before its own
// (independent compares), 10.7 / 8.5 (no change); rows in clusters of 4 CTAs of 1024 threads
// (one an SM) instead of 8 of 512, 10.6 / 8.6, the empty launch 2.9 against 2.8 (no change).
// On the H100, side by side in one process: steps 4-5 skipped when no thread whose maximum
// reaches T holds a third element at or above it (each listed thread's second key and third
// value sent with the lists, the 16 maxima and 16 second keys sorted by one warp of CTA 0; the
// same bits on random, tied, NaN / inf / signed-zero, -inf rows, vocab 202048, unaligned
// rows), 16.1 / 14.4 us against 11.2 / 9.1 (bf16) and 17.6 / 16.2 against 13.4 / 11.6 (f32):
// ptxas spilled 16 and 20 bytes of stores a thread in its two instances (the kernel here: 8, in one).
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>

#include "../common/pdl.cuh"
#include "../common/ptx.cuh"

namespace dflash2_topk_detail {

constexpr uint32_t kCluster = 8;        // CTAs per row: CLUSTER_TOPK in specs/dflash2.yaml
constexpr uint32_t kThreads = 512;      // must match TOPK_THREADS
constexpr uint32_t kWarps = kThreads / 32;
constexpr uint32_t kQuadReg = 10;       // quads (4 elements) a thread keeps in registers
constexpr uint32_t kMaxQuads = 32;      // quads a thread owns at vocab 524288 (TOPK_MAX_VOCAB)
constexpr uint32_t kTop = 16;
constexpr uint32_t kSlotElems = kMaxQuads * 4;   // elements of one candidate thread
// A vector: the 16 bytes one load reads, kW<T> elements, kQ<T> quads (f32: 4 and 1, bf16: 8 and 2).
template <typename T>
constexpr uint32_t kW = 16u / sizeof(T);
template <typename T>
constexpr uint32_t kQ = kW<T> / 4u;
constexpr uint32_t kMaxCand = kTop * kSlotElems;  // 16 threads x their 128 elements
static_assert(kTop <= kWarps, "one warp per candidate thread of a CTA");

using u64 = unsigned long long;

using kcommon::float_key;

static __device__ __forceinline__ u64 make_key(uint32_t k32, uint32_t idx) {
    return (static_cast<u64>(k32) << 32) | static_cast<uint32_t>(~idx);
}

// The bf16 instance's step 1 on 32-bit keys: a bf16 value's f32 key (float_key) is fixed by its
// upper half (the lower half is 0x0000 for +0 and positive values, 0xffff for negative ones and
// NaN, whose upper half alone is 0xffff), and the chunk of a CTA holds at most 65536 elements, so
// (upper half << 16 | ~local index) orders a CTA's elements exactly as their 64-bit keys do, with
// half the shuffles and compares. 0 (no element) stays 0: an element's upper half is >= 0x007f.
static __device__ __forceinline__ uint32_t cta_key(uint32_t k32, uint32_t local) {
    return k32 != 0u ? (k32 & 0xffff0000u) | (~local & 0xffffu) : 0u;
}
static __device__ __forceinline__ u64 row_key(uint32_t ck, uint32_t e0) {
    if (ck == 0u) return 0ull;
    const uint32_t hi = ck >> 16, lo = hi == 0xffffu || (hi & 0x8000u) == 0u ? 0xffffu : 0u;
    return make_key((hi << 16) | lo, e0 + (~ck & 0xffffu));
}

template <typename K>
static __device__ __forceinline__ K umax(K a, K b) { return a > b ? a : b; }
template <typename K>
static __device__ __forceinline__ K umin(K a, K b) { return a < b ? a : b; }

// Sorts the warp's 32 keys (one per lane; 64-bit, or the bf16 instance's 32-bit CTA keys) in
// descending order over the lanes.
template <typename K>
static __device__ __forceinline__ K warp_sort_desc(K x, uint32_t lane) {
#pragma unroll
    for (uint32_t k = 2; k <= 32; k <<= 1) {
#pragma unroll
        for (uint32_t j = k >> 1; j > 0; j >>= 1) {
            const K o = __shfl_xor_sync(0xffffffffu, x, j);
            const bool keep_max = ((lane & j) == 0) == ((lane & k) == 0);
            x = keep_max ? umax(x, o) : umin(x, o);
        }
    }
    return x;
}

// Lanes hold a bitonic sequence (descending, then ascending); returns it sorted descending.
template <typename K>
static __device__ __forceinline__ K warp_merge_desc(K x, uint32_t lane) {
#pragma unroll
    for (uint32_t j = 16; j > 0; j >>= 1) {
        const K o = __shfl_xor_sync(0xffffffffu, x, j);
        x = ((lane & j) == 0) ? umax(x, o) : umin(x, o);
    }
    return x;
}

// lists[0 .. n) are sorted (descending) lists of 16 keys; afterwards lists[0] holds the 16
// largest keys of them all, sorted. n <= 2 * kWarps. Called by the whole CTA (it syncs).
// Kept as a loop: the kernel's code is read cold from L2 at each launch, so short code is
// fast code here.
template <typename K>
static __device__ __forceinline__ void tree_merge(K (*lists)[kTop], uint32_t n, uint32_t warp, uint32_t lane) {
#pragma unroll 1
    for (uint32_t step = 1; step < n; step <<= 1) {
        const uint32_t a = warp * 2 * step, b = a + step;
        if (b < n) {
            K x = lane < kTop ? lists[a][lane] : lists[b][31 - lane];
            x = warp_merge_desc(x, lane);
            if (lane < kTop) lists[a][lane] = x;
        }
        __syncthreads();
    }
}

// Step 1 of the kernel: each warp sorts its lanes' keys and keeps 16 (lists[warp]), then the
// merge tree leaves the CTA's 16 largest in lists[0]. Called by the whole CTA (it syncs).
template <typename K>
static __device__ __forceinline__ void cta_top16(K x, K (*lists)[kTop], uint32_t warp, uint32_t lane) {
    x = warp_sort_desc(x, lane);
    if (lane < kTop) lists[warp][lane] = x;
    __syncthreads();
    tree_merge(lists, kWarps, warp, lane);
}

constexpr uint32_t kNegInf = 0xff800000u;  // f32 -inf
constexpr uint32_t kInf = 0x7f800000u;     // f32 +inf (larger magnitudes: NaN)

// Vector v (elements kW v .. kW v + kW - 1) as f32 bit patterns, in kQ quads at q[0 ..].
// load_vec: one predicated 16-byte load (streaming, no L1 allocation), -inf when !p; predicated
// rather than branched over, so that the compiler issues every load of a thread before the
// first use.  load_elems: element loads, zeros past the row (unaligned rows, the last vector).
static __device__ __forceinline__ void load_vec(const float* row, uint32_t v, bool p, uint4* q) {
    uint4 r = make_uint4(kNegInf, kNegInf, kNegInf, kNegInf);
    asm volatile(
        "{\n .reg .pred q;\n setp.ne.u32 q, %5, 0;\n"
        " @q ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n}"
        : "+r"(r.x), "+r"(r.y), "+r"(r.z), "+r"(r.w)
        : "l"(row + v * 4u), "r"(static_cast<uint32_t>(p)));
    q[0] = r;
}
static __device__ __forceinline__ void load_vec(const __nv_bfloat16* row, uint32_t v, bool p, uint4* q) {
    uint4 r;
    r.x = r.y = r.z = r.w = kNegInf | (kNegInf >> 16);
    asm volatile(
        "{\n .reg .pred q;\n setp.ne.u32 q, %5, 0;\n"
        " @q ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n}"
        : "+r"(r.x), "+r"(r.y), "+r"(r.z), "+r"(r.w)
        : "l"(reinterpret_cast<const unsigned short*>(row) + v * 8u), "r"(static_cast<uint32_t>(p)));
    q[0] = make_uint4(r.x << 16, r.x & 0xffff0000u, r.y << 16, r.y & 0xffff0000u);  // little-endian halves
    q[1] = make_uint4(r.z << 16, r.z & 0xffff0000u, r.w << 16, r.w & 0xffff0000u);
}
static __device__ __forceinline__ uint32_t load_elem(const float* row, uint32_t e) {
    return __float_as_uint(__ldg(row + e));
}
static __device__ __forceinline__ uint32_t load_elem(const __nv_bfloat16* row, uint32_t e) {
    return static_cast<uint32_t>(__ldg(reinterpret_cast<const unsigned short*>(row) + e)) << 16;
}
template <typename T>
static __device__ __forceinline__ void load_elems(const T* row, uint32_t v, uint32_t v1, uint32_t vocab, uint4* q) {
#pragma unroll
    for (uint32_t h = 0; h < kQ<T>; ++h) {
        const uint32_t e = v * kW<T> + 4u * h;
        q[h].x = v < v1 && e < vocab ? load_elem(row, e) : 0u;
        q[h].y = v < v1 && e + 1u < vocab ? load_elem(row, e + 1u) : 0u;
        q[h].z = v < v1 && e + 2u < vocab ? load_elem(row, e + 2u) : 0u;
        q[h].w = v < v1 && e + 3u < vocab ? load_elem(row, e + 3u) : 0u;
    }
}

// Folds the 4 keys of a quad whose first element is e, of a vector inside the chunk (in_chunk)
// or not, into the running maximum key `best` and its element `best_e`, keeping the first of
// equal keys (the quads come in increasing order); an element outside the chunk or past the row
// has key 0. No branches.
static __device__ __forceinline__ void quad_best(uint4 r, uint32_t e, bool in_chunk, uint32_t vocab, uint32_t& best,
                                                 uint32_t& best_e) {
    const uint32_t w[4] = {r.x, r.y, r.z, r.w};
    uint32_t kk[4];
#pragma unroll
    for (uint32_t i = 0; i < 4; ++i) kk[i] = float_key(w[i]) & (0u - static_cast<uint32_t>(in_chunk && e + i < vocab));
#pragma unroll
    for (uint32_t i = 0; i < 4; ++i) {
        const bool gt = kk[i] > best;
        best = gt ? kk[i] : best;
        best_e = gt ? e + i : best_e;
    }
}

// One logit's f32 bits, read again (for a NaN or a zero, whose key drops the payload or
// sign), and the -inf written over a selected one.
static __device__ __forceinline__ uint32_t read_bits(const float* p) { return __float_as_uint(__ldcg(p)); }
static __device__ __forceinline__ uint32_t read_bits(const __nv_bfloat16* p) {
    return static_cast<uint32_t>(__ldcg(reinterpret_cast<const unsigned short*>(p))) << 16;
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

// max with NaN propagation (either input NaN -> NaN): the thread maximum's value, before its key.
static __device__ __forceinline__ float fmax_nan(float a, float b) {
    float d;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
    return d;
}

// The thread's largest key and its element from whole, aligned vectors (raw: -inf past v1), in
// f32 arithmetic: the largest value m (a NaN if any element is one), then the first element equal
// to it (-0 == +0) or, for a NaN, the first NaN; its key is float_key(m) (float_key gives every
// zero one key and every NaN another). About three instructions an element where the keys take
// a dozen; the keys themselves are formed only for the candidates (step 4).
template <typename T, uint32_t N>
static __device__ __forceinline__ void vec_max(const uint4 (&raw)[N], uint32_t first_v, bool any, uint32_t& best,
                                               uint32_t& best_e) {
    float m4[4] = {__uint_as_float(kNegInf), __uint_as_float(kNegInf), __uint_as_float(kNegInf),
                   __uint_as_float(kNegInf)};
#pragma unroll
    for (uint32_t k = 0; k < N; ++k) {
        m4[0] = fmax_nan(m4[0], __uint_as_float(raw[k].x));
        m4[1] = fmax_nan(m4[1], __uint_as_float(raw[k].y));
        m4[2] = fmax_nan(m4[2], __uint_as_float(raw[k].z));
        m4[3] = fmax_nan(m4[3], __uint_as_float(raw[k].w));
    }
    const float m = fmax_nan(fmax_nan(m4[0], m4[1]), fmax_nan(m4[2], m4[3]));
    // Position q * 4 + i (quad q, element i) of the first match, scanning down so that the smallest one stays. The
    // -inf fill of vectors past v1 comes after every element of the thread, so it is never the
    // first match while the thread has one.
    uint32_t pos = 0;
    if (m == m) {
#pragma unroll
        for (int k = N - 1; k >= 0; --k) {
            pos = __uint_as_float(raw[k].w) == m ? k * 4 + 3 : pos;
            pos = __uint_as_float(raw[k].z) == m ? k * 4 + 2 : pos;
            pos = __uint_as_float(raw[k].y) == m ? k * 4 + 1 : pos;
            pos = __uint_as_float(raw[k].x) == m ? k * 4 : pos;
        }
    } else {
#pragma unroll
        for (int k = N - 1; k >= 0; --k) {
            const uint4 r = raw[k];
            pos = (r.w & 0x7fffffffu) > kInf ? k * 4 + 3 : pos;
            pos = (r.z & 0x7fffffffu) > kInf ? k * 4 + 2 : pos;
            pos = (r.y & 0x7fffffffu) > kInf ? k * 4 + 1 : pos;
            pos = (r.x & 0x7fffffffu) > kInf ? k * 4 : pos;
        }
    }
    best = any ? float_key(__float_as_uint(m)) : 0u;
    const uint32_t q = pos >> 2;  // quad q: vector q / kQ of the thread, its quad q % kQ
    best_e = (first_v + q / kQ<T> * kThreads) * kW<T> + q % kQ<T> * 4u + (pos & 3u);
}

using kcommon::cluster_arrive_relaxed;
using kcommon::cluster_arrive_release;
using kcommon::cluster_wait;

}  // namespace dflash2_topk_detail

// kStopAfter (benchmarks/topk16_ablation.cu; the catalog's instances are 0, the whole kernel):
// 1, 2 or 3 ends the kernel after the thread maxima, the CTA's 16 largest of them or the row's
// threshold T (steps below), writing one value that keeps the work alive, to time the stages.
template <typename T, int kStopAfter = 0>
__global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(512, 2)
dflash2_topk16_kernel(T* logits, int32_t* ids, float* scores, uint32_t rows, uint32_t vocab, float multiplier, float cap) {
    kcommon::pdl_enter();
    namespace d = dflash2_topk_detail;
    namespace cg = cooperative_groups;
    using d::u64;
    static_assert(d::kCluster == 8, "__cluster_dims__ above must match kCluster");
    __shared__ u64 lists[d::kWarps + 1][d::kTop];   // step 5: [0] holds the running result
    __shared__ u64 rowlists[d::kCluster][d::kTop];  // every CTA's list, written by its owner
    __shared__ __align__(16) uint32_t slot_bits[d::kTop][d::kSlotElems];  // elements of the CTA's candidate threads
    __shared__ uint32_t slot_tid[d::kTop];          // ... and their thread ids
    __shared__ u64 cand[d::kMaxCand];               // CTA 0: the row's candidates
    __shared__ uint32_t nslot, ncand;

    cg::cluster_group cluster = cg::this_cluster();
    const uint32_t rank = cluster.block_rank();
    const uint32_t tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    const uint32_t row = blockIdx.y;  // uniform over the cluster: all its CTAs leave together
    if (row >= rows) return;
    if (tid == 0) {
        nslot = 0;
        ncand = 0;
    }
    d::cluster_arrive_relaxed();  // "started": remote shared memory is written after the wait
    T* lrow = logits + static_cast<size_t>(row) * vocab;

    // The chunk: vectors [v0, v1) of the row, this thread's v0 + tid + k * kThreads; its quad q
    // is quad q % kQ of its vector q / kQ, first element quad_e(tid, q).
    constexpr uint32_t W = d::kW<T>, Q = d::kQ<T>, VR = d::kQuadReg / Q;  // VR: vectors in registers
    static_assert(d::kQuadReg % Q == 0, "whole vectors in registers");
    const uint32_t nvec = (vocab + W - 1u) / W;
    const uint32_t per = (nvec + d::kCluster - 1u) / d::kCluster;
    const uint32_t v0 = min(nvec, rank * per);
    const uint32_t v1 = min(nvec, v0 + per);
    const bool aligned = (reinterpret_cast<uintptr_t>(lrow) & 15u) == 0;
    const uint32_t nk = (per + d::kThreads - 1u) / d::kThreads;  // vectors a thread owns
    auto quad_v = [&](uint32_t t, uint32_t q) { return v0 + t + q / Q * d::kThreads; };
    auto quad_e = [&](uint32_t t, uint32_t q) { return quad_v(t, q) * W + q % Q * 4u; };

    // Every load first (one branch for the CTA: all vectors whole and aligned, or not), then
    // the maximum.
    const bool fast = aligned && v1 * W <= vocab;
    uint4 raw[d::kQuadReg];
    if (fast) {
#pragma unroll
        for (uint32_t k = 0; k < VR; ++k) {
            const uint32_t v = v0 + tid + k * d::kThreads;
            d::load_vec(lrow, v, v < v1, &raw[k * Q]);
        }
    } else {
#pragma unroll
        for (uint32_t k = 0; k < VR; ++k) d::load_elems(lrow, v0 + tid + k * d::kThreads, v1, vocab, &raw[k * Q]);
    }
    // The thread's largest key, the first (smallest index) of equal ones: indices increase
    // with q and i.
    uint32_t best = 0, best_e = 0;
    if (fast) {
        d::vec_max<T>(raw, v0 + tid, v0 + tid < v1, best, best_e);
    } else {
#pragma unroll
        for (uint32_t q = 0; q < d::kQuadReg; ++q) d::quad_best(raw[q], quad_e(tid, q), quad_v(tid, q) < v1, vocab, best, best_e);
    }
#pragma unroll 1
    for (uint32_t k = VR; k < nk; ++k) {  // rows longer than 163840: streamed
        const uint32_t v = v0 + tid + k * d::kThreads;
        uint4 vq[Q];
        if (fast) {
            d::load_vec(lrow, v, v < v1, vq);
        } else {
            d::load_elems(lrow, v, v1, vocab, vq);
        }
#pragma unroll
        for (uint32_t h = 0; h < Q; ++h) d::quad_best(vq[h], v * W + 4u * h, v < v1, vocab, best, best_e);
    }
    const u64 tmax = best != 0u ? d::make_key(best, best_e) : 0ull;

    if constexpr (kStopAfter == 1) {  // every thread's maximum feeds the barrier's vote
        if (__syncthreads_or(tmax == 1ull) && tid == 0) ids[static_cast<size_t>(row) * d::kTop + rank] = -1;
        d::cluster_wait();  // the entry's arrival
        return;
    }
    // 1: the CTA's 16 largest thread maxima (bf16: on 32-bit CTA keys, cta_key).
    constexpr bool kKey32 = sizeof(T) == 2;
    __shared__ uint32_t lists32[kKey32 ? d::kWarps : 1][d::kTop];
    if constexpr (kKey32) {
        d::cta_top16(d::cta_key(best, best_e - v0 * W), lists32, warp, lane);
    } else {
        d::cta_top16(tmax, lists, warp, lane);
    }
    // Key i of the CTA's list, as the row's 64-bit key.
    auto cta_list = [&](uint32_t i) {
        if constexpr (kKey32) return d::row_key(lists32[0][i], v0 * W);
        return lists[0][i];
    };

    if constexpr (kStopAfter == 2) {
        if (tid == 0) ids[static_cast<size_t>(row) * d::kTop + rank] = static_cast<int32_t>(cta_list(d::kTop - 1));
        d::cluster_wait();  // the entry's arrival
        return;
    }
    // 2: the list into every CTA of the cluster.
    d::cluster_wait();
    if (tid < d::kCluster * d::kTop) {
        u64* dst = cluster.map_shared_rank(&rowlists[rank][0], tid / d::kTop);
        dst[tid % d::kTop] = cta_list(tid % d::kTop);
    }
    d::cluster_arrive_release();
    d::cluster_wait();

    // 3: the row's 16 largest thread maxima; T = the smallest of them (0 if fewer than 16).
    d::tree_merge(rowlists, d::kCluster, warp, lane);
    const u64 thr = rowlists[0][d::kTop - 1];

    if constexpr (kStopAfter == 3) {
        if (tid == 0) ids[static_cast<size_t>(row) * d::kTop + rank] = static_cast<int32_t>(thr);
        return;
    }
    // 4: the (at most 16) threads of the CTA whose maximum reaches T park their elements' bits in
    // a slot; warp w then sends slot w's keys >= T to CTA 0 (one atomic per warp and round),
    // forming each key as it reads it (a loop: code run by few warps stays short).
    if (tmax != 0 && tmax >= thr) {
        const uint32_t sl = atomicAdd(&nslot, 1u);  // < 16: see above
        slot_tid[sl] = tid;
        uint4* dst = reinterpret_cast<uint4*>(slot_bits[sl]);
#pragma unroll
        for (uint32_t q = 0; q < d::kQuadReg; ++q) dst[q] = raw[q];
#pragma unroll 1
        for (uint32_t k = VR; k < nk; ++k) {
            const uint32_t v = v0 + tid + k * d::kThreads;
            if (fast) {
                d::load_vec(lrow, v, v < v1, &dst[k * Q]);
            } else {
                d::load_elems(lrow, v, v1, vocab, &dst[k * Q]);
            }
        }
    }
    __syncthreads();
    if (warp < nslot) {
        const uint32_t t = slot_tid[warp];
        uint32_t* n0 = cluster.map_shared_rank(&ncand, 0u);
        u64* c0 = cluster.map_shared_rank(&cand[0], 0u);
#pragma unroll 1
        for (uint32_t j0 = 0; j0 < nk * W; j0 += 32u) {
            const uint32_t j = j0 + lane;
            const uint32_t v = quad_v(t, j >> 2), e = quad_e(t, j >> 2) + (j & 3u);
            const uint32_t k32 = j < nk * W && v < v1 && e < vocab ? d::float_key(slot_bits[warp][j]) : 0u;
            const u64 x = k32 != 0u ? d::make_key(k32, e) : 0ull;
            const bool take = x != 0ull && x >= thr;
            const uint32_t m = __ballot_sync(0xffffffffu, take);
            uint32_t base = 0;
            if (lane == 0 && m != 0u) base = atomicAdd(n0, static_cast<uint32_t>(__popc(m)));
            base = __shfl_sync(0xffffffffu, base, 0);
            const uint32_t pos = base + static_cast<uint32_t>(__popc(m & ((1u << lane) - 1u)));
            if (take && pos < d::kMaxCand) c0[pos] = x;
        }
    }
    d::cluster_arrive_release();
    d::cluster_wait();
    if (rank != 0) return;

    // 5: CTA 0 sorts the candidates and writes the 16 largest. Up to 32 of them (random logits:
    // about 16): one warp sort, no barrier. More: kThreads at a time, warps sorting 32 each into
    // lists[1 ..], merged with the running result in lists[0].
    const uint32_t n = min(ncand, d::kMaxCand);
    if (n <= 32u && warp != 0) return;  // (uniform) the one sort is warp 0's: the others leave its issue slots
    u64 kk = 0ull;
    if (tid < d::kTop) lists[0][tid] = 0ull;
#pragma unroll 1
    for (uint32_t c0 = 0; c0 < n; c0 += d::kThreads) {
        const uint32_t i = c0 + tid;
        const u64 x = d::warp_sort_desc(i < n ? cand[i] : 0ull, lane);
        if (n <= 32u) {  // warp 0's lanes 0 .. 15 hold the result
            kk = x;
            break;
        }
        if (lane < d::kTop) lists[1 + warp][lane] = x;
        __syncthreads();
        d::tree_merge(lists, 1u + min(d::kWarps, (n - c0 + 31u) / 32u), warp, lane);
    }
    if (n > 32u) kk = lists[0][tid % d::kTop];
    if (tid < d::kTop) {
        const uint32_t idx = ~static_cast<uint32_t>(kk);
        const uint32_t k32 = static_cast<uint32_t>(kk >> 32);
        uint32_t bits = (k32 & 0x80000000u) ? (k32 & 0x7fffffffu) : ~k32;
        if (k32 == 0xffffffffu || k32 == 0x80000000u) bits = d::read_bits(lrow + idx);
        ids[static_cast<size_t>(row) * d::kTop + tid] = static_cast<int32_t>(idx);
        scores[static_cast<size_t>(row) * d::kTop + tid] = d::unary(__uint_as_float(bits), multiplier, cap);
        d::write_neg_inf(lrow + idx);
    }
}
