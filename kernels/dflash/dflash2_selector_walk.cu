// DFlash2 candidate selector: a greedy walk over per-slot 16 x 16 score tables.
//
// For sequence b, slots s < S (S <= 16), candidates c < 16:
//   score[s, p, c] = u[s, c] + sum_j P[pred(s, p), j] * h[s, j] * Q[cand[s, c], j],
//   pred(0, p) = anchor[b], pred(s, p) = cand[s - 1, p];
//   c_0 = argmax_c score[0, 0, c], c_s = argmax_c score[s, c_{s-1}, c] (ties -> the smaller c,
//   NaN counts as the largest), out[b, s] = cand[s, c_s].
// A token id outside [0, vocab) (anchor or candidate) reads as an all-zero codebook row.
//
// Layout (specs/dflash2.yaml): one cluster of 8 CTAs per sequence (grid [8 * batch]), 512
// threads each; CTA r builds the tables of slots 2r and 2r + 1, so the 16 slots' codebook rows
// (32 rows of rank bf16 a slot, 256 KiB at rank 256) are fetched by 8 SMs at once.  Eight warps
// share a slot: warp q multiplies the 32-column chunks q, q + 8, ... of the 16 x 16 x rank
// product on the tensor cores (mma.sync m16n8k16, f32 accumulation), A[p, j] = P[pred(s, p), j]
// * h[s, j], B[j, c] = Q[cand[s, c], j].  The product of two bf16 has at most 16 significant
// bits, so A is split exactly into two bf16 parts (hi = bf16(A), lo = A - hi) and both are
// multiplied by B: each product term is exact in f32, as in an f32 evaluation; only the order
// of the f32 additions differs (within a chunk, then the 8 warps' partial tables in warp
// order, then u).  Fragments come straight from 16-byte loads of the codebook rows and of h
// (lane 4g + t reads j = 32 i + 8 t .. + 7 of rows g and g + 8; the same permutation of j is
// used for A and B, which the sum over j allows), every chunk of a warp requested before the
// first product.
// Each row (s, p) of a table is then reduced at once to its choice best[s, p] = argmax_c (16
// lanes, shuffles) and the chosen id cand[s, best[s, p]]; these pairs go into CTA 0's shared
// memory (distributed shared memory, one cluster barrier), where warp 0 walks: c_s =
// best[s, c_{s-1}], one shuffle per slot.  rank % 32 == 0 and rank <= 512.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cstdint>

#include "../common/pdl.cuh"
#include "../common/ptx.cuh"
#include "dense_mma.cuh"

namespace dflash2_walk_detail {

constexpr uint32_t kCluster = 8;    // CTAs per sequence: CLUSTER_WALK in specs/dflash2.yaml
constexpr uint32_t kThreads = 512;  // must match WALK_THREADS
constexpr uint32_t kK = 16;         // candidates per slot
constexpr uint32_t kMaxSlots = 16;
constexpr uint32_t kSlotsPerCta = kMaxSlots / kCluster;
constexpr uint32_t kWarpsPerSlot = kThreads / 32 / kSlotsPerCta;
constexpr uint32_t kMaxRank = 512;  // must match WALK_MAX_RANK
constexpr uint32_t kMaxChunks = kMaxRank / 32 / kWarpsPerSlot;  // 32-column chunks a warp owns
static_assert(kSlotsPerCta * kK * kK == kThreads, "one thread per table entry of the CTA's slots");

using u64 = unsigned long long;

using kcommon::float_key;

// 8 bf16 of a row from element j, zeros when !p.  load8_fast: one predicated 16-byte load
// (predicated rather than branched over, so that every load of a warp is issued before the
// first product); load8_elems: element loads, for rows that are not 16-byte aligned.
static __device__ __forceinline__ uint4 load8_fast(const __nv_bfloat16* row, uint32_t j, bool p) {
    uint4 r = make_uint4(0u, 0u, 0u, 0u);
    asm volatile(
        "{\n .reg .pred q;\n setp.ne.u32 q, %5, 0;\n @q ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n}"
        : "+r"(r.x), "+r"(r.y), "+r"(r.z), "+r"(r.w)
        : "l"(row + j), "r"(static_cast<uint32_t>(p)));
    return r;
}
static __device__ __forceinline__ uint4 load8_elems(const __nv_bfloat16* row, uint32_t j, bool p) {
    const unsigned short* q = reinterpret_cast<const unsigned short*>(row + j);
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        w[i] = p ? static_cast<uint32_t>(__ldg(q + 2 * i)) | (static_cast<uint32_t>(__ldg(q + 2 * i + 1)) << 16) : 0u;
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// The two bf16 of pw times the two of hw (exact f32 products), split into hi + lo bf16 pairs.
static __device__ __forceinline__ void split_prod(uint32_t pw, uint32_t hw, uint32_t& hi, uint32_t& lo) {
    using kcommon::bf16_hi;
    using kcommon::bf16_lo;
    const float a = __fmul_rn(bf16_lo(pw), bf16_lo(hw));
    const float b = __fmul_rn(bf16_hi(pw), bf16_hi(hw));
    hi = kcommon::pack_bf16x2(a, b);
    lo = kcommon::pack_bf16x2(__fsub_rn(a, bf16_lo(hi)), __fsub_rn(b, bf16_hi(hi)));
}

static __device__ __forceinline__ uint32_t word(const uint4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

using kcommon::cluster_arrive_relaxed;
using kcommon::cluster_arrive_release;
using kcommon::cluster_wait;

}  // namespace dflash2_walk_detail

__global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(512, 1)
dflash2_selector_walk_kernel(const int32_t* cand, const float* u, const __nv_bfloat16* h,
                             const __nv_bfloat16* p_codebook, const __nv_bfloat16* q_codebook,
                             const int32_t* anchor, int32_t* out, uint32_t batch, uint32_t slots,
                             uint32_t rank, uint32_t vocab) {
    kcommon::pdl_enter();
    namespace d = dflash2_walk_detail;
    namespace cg = cooperative_groups;
    using d::u64;
    static_assert(d::kCluster == 8, "__cluster_dims__ above must match kCluster");
    __shared__ float part[d::kSlotsPerCta][d::kWarpsPerSlot][d::kK][d::kK + 1];
    __shared__ int2 walk[d::kMaxSlots][d::kK];  // CTA 0: (best[s, p], cand[s, best[s, p]])

    cg::cluster_group cluster = cg::this_cluster();
    const uint32_t crank = cluster.block_rank();
    const uint32_t b = blockIdx.x / d::kCluster;  // uniform over the cluster
    if (b >= batch || slots > d::kMaxSlots || rank > d::kMaxRank || (rank & 31u) != 0) return;
    d::cluster_arrive_relaxed();  // "started": CTA 0's shared memory is written after the wait
    const uint32_t tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    const size_t sb = static_cast<size_t>(b) * slots;

    // Products: warp (sl, q) of slot s = kSlotsPerCta * crank + sl, chunks q, q + 8, ...
    const uint32_t sl = warp / d::kWarpsPerSlot, q = warp % d::kWarpsPerSlot;
    const uint32_t s = d::kSlotsPerCta * crank + sl;
    if (s < slots) {
        const uint32_t g = lane >> 2, t = lane & 3u;
        const int32_t a_id = __ldg(anchor + b);
        const int32_t* cs = cand + (sb + s) * d::kK;
        const int32_t ids[4] = {s == 0 ? a_id : __ldg(cs - d::kK + g), s == 0 ? a_id : __ldg(cs - d::kK + g + 8),
                                __ldg(cs + g), __ldg(cs + g + 8)};
        const __nv_bfloat16* rowp[4];
        bool valid[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            valid[r] = ids[r] >= 0 && static_cast<uint32_t>(ids[r]) < vocab;
            const __nv_bfloat16* cb = r < 2 ? p_codebook : q_codebook;
            rowp[r] = cb + (valid[r] ? static_cast<size_t>(ids[r]) * rank : 0);
        }
        const __nv_bfloat16* hs = h + (sb + s) * rank;
        const bool fast =
            ((reinterpret_cast<uintptr_t>(p_codebook) | reinterpret_cast<uintptr_t>(q_codebook) |
              reinterpret_cast<uintptr_t>(hs)) & 15u) == 0;
        const uint32_t nchunk = rank / 32u;
        uint4 v[d::kMaxChunks][4], hv[d::kMaxChunks];
        if (fast) {
#pragma unroll
            for (uint32_t i = 0; i < d::kMaxChunks; ++i) {
                const uint32_t ch = q + i * d::kWarpsPerSlot;
                const uint32_t j = ch * 32u + 8u * t;
                const bool in = ch < nchunk;
#pragma unroll
                for (int r = 0; r < 4; ++r) v[i][r] = d::load8_fast(rowp[r], j, in && valid[r]);
                hv[i] = d::load8_fast(hs, j, in);
            }
        } else {
#pragma unroll
            for (uint32_t i = 0; i < d::kMaxChunks; ++i) {
                const uint32_t ch = q + i * d::kWarpsPerSlot;
                const uint32_t j = ch * 32u + 8u * t;
                const bool in = ch < nchunk;
#pragma unroll
                for (int r = 0; r < 4; ++r) v[i][r] = d::load8_elems(rowp[r], j, in && valid[r]);
                hv[i] = d::load8_elems(hs, j, in);
            }
        }
        float acc0[4] = {0.f, 0.f, 0.f, 0.f}, acc1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (uint32_t i = 0; i < d::kMaxChunks; ++i) {
            if (q + i * d::kWarpsPerSlot < nchunk) {
#pragma unroll
                for (int ks = 0; ks < 2; ++ks) {
                    const int i0 = 2 * ks, i1 = 2 * ks + 1;
                    uint32_t ah[4], al[4];
                    d::split_prod(d::word(v[i][0], i0), d::word(hv[i], i0), ah[0], al[0]);
                    d::split_prod(d::word(v[i][1], i0), d::word(hv[i], i0), ah[1], al[1]);
                    d::split_prod(d::word(v[i][0], i1), d::word(hv[i], i1), ah[2], al[2]);
                    d::split_prod(d::word(v[i][1], i1), d::word(hv[i], i1), ah[3], al[3]);
                    const uint32_t b00 = d::word(v[i][2], i0), b01 = d::word(v[i][2], i1);
                    const uint32_t b10 = d::word(v[i][3], i0), b11 = d::word(v[i][3], i1);
                    dense_mma::mma_bf16(acc0, ah[0], ah[1], ah[2], ah[3], b00, b01);
                    dense_mma::mma_bf16(acc0, al[0], al[1], al[2], al[3], b00, b01);
                    dense_mma::mma_bf16(acc1, ah[0], ah[1], ah[2], ah[3], b10, b11);
                    dense_mma::mma_bf16(acc1, al[0], al[1], al[2], al[3], b10, b11);
                }
            }
        }
        float(*pt)[d::kK + 1] = part[sl][q];
        const uint32_t c = 2u * t;
        pt[g][c] = acc0[0];
        pt[g][c + 1] = acc0[1];
        pt[g + 8][c] = acc0[2];
        pt[g + 8][c + 1] = acc0[3];
        pt[g][c + 8] = acc1[0];
        pt[g][c + 9] = acc1[1];
        pt[g + 8][c + 8] = acc1[2];
        pt[g + 8][c + 9] = acc1[3];
    }
    __syncthreads();

    // Thread (sl, p, c): score[s, p, c]; the 16 lanes of row p pick its best c.
    {
        const uint32_t es = tid / (d::kK * d::kK), p = (tid / d::kK) % d::kK, c = tid % d::kK;
        const uint32_t s2 = d::kSlotsPerCta * crank + es;  // uniform over the warp
        d::cluster_wait();
        if (s2 < slots) {
            const int32_t id = __ldg(cand + (sb + s2) * d::kK + c);
            float sc = part[es][0][p][c];
#pragma unroll
            for (uint32_t w = 1; w < d::kWarpsPerSlot; ++w) sc = __fadd_rn(sc, part[es][w][p][c]);
            sc = __fadd_rn(sc, __ldg(u + (sb + s2) * d::kK + c));
            u64 key = (static_cast<u64>(d::float_key(__float_as_uint(sc))) << 32) | (d::kK - 1u - c);
#pragma unroll
            for (uint32_t m = d::kK / 2; m > 0; m >>= 1) {
                const u64 o = __shfl_xor_sync(0xffffffffu, key, m);
                key = o > key ? o : key;
            }
            const uint32_t best = d::kK - 1u - static_cast<uint32_t>(key & (d::kK - 1u));
            const int32_t best_id = __shfl_sync(0xffffffffu, id, (lane & ~(d::kK - 1u)) | best);
            if (c == 0) *cluster.map_shared_rank(&walk[s2][p], 0u) = make_int2(static_cast<int32_t>(best), best_id);
        }
    }
    d::cluster_arrive_release();
    d::cluster_wait();

    // CTA 0, warp 0: c_s = best[s, c_{s-1}], lane s keeps out[b, s].
    if (crank == 0 && warp == 0) {
        int2 w[d::kMaxSlots];
#pragma unroll
        for (uint32_t i = 0; i < d::kMaxSlots; ++i) w[i] = i < slots ? walk[i][lane % d::kK] : make_int2(0, 0);
        int32_t prev = 0, mine = 0;
#pragma unroll
        for (uint32_t i = 0; i < d::kMaxSlots; ++i) {
            if (i < slots) {
                const int32_t id = __shfl_sync(0xffffffffu, w[i].y, prev);
                prev = __shfl_sync(0xffffffffu, w[i].x, prev);
                if (lane == i) mine = id;
            }
        }
        if (lane < slots) out[sb + lane] = mine;
    }
}
