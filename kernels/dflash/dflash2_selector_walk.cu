// DFlash2 candidate selector: a greedy walk over per-slot 16 x 16 score tables.
//
// For sequence b (one CTA), slots s < S (S <= 16), candidates c < 16:
//   score[s, p, c] = u[s, c] + sum_j P[pred(s, p), j] * h[s, j] * Q[cand[s, c], j],
//   pred(0, p) = anchor[b], pred(s, p) = cand[s - 1, p];
//   c_0 = argmax_c score[0, 0, c], c_s = argmax_c score[s, c_{s-1}, c] (ties -> the smaller c,
//   NaN counts as the largest), out[b, s] = cand[s, c_s].
// A token id outside [0, vocab) (anchor or candidate) reads as an all-zero codebook row.
//
// Layout (specs/dflash2.yaml): 512 threads = 16 warps, warp s computes slot s's whole table
// as a 16 x 16 x rank product on the tensor cores (mma.sync m16n8k16, f32 accumulation):
// A[p, j] = P[pred(s, p), j] * h[s, j], B[j, c] = Q[cand[s, c], j].  The product of two bf16
// has at most 16 significant bits, so A is split exactly into two bf16 parts (hi = bf16(A),
// lo = A - hi) and both are multiplied by B: each product term is exact in f32, as in an f32
// evaluation; only the order of the f32 additions differs.  Fragments come straight from
// 16-byte loads of the codebook rows (lane 4g + t reads j = 32 i + 8 t .. + 7 of rows g and
// g + 8; the same permutation of j is used for A and B, which the sum over j allows), four
// 32-column chunks per batch of loads, the rows' later chunks prefetched into L2 at the
// start.  h, cand and u are staged in shared memory first.  The tables (16 KiB) then go to
// shared memory and warp 0 walks the slots: 16 lanes read row c_{s-1} of slot s and a
// shuffle reduction picks c_s.  rank % 32 == 0 and rank <= 512.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "dense_mma.cuh"

namespace dflash2_walk_detail {

constexpr uint32_t kThreads = 512;  // must match WALK_THREADS in specs/dflash2.yaml
constexpr uint32_t kK = 16;         // candidates per slot
constexpr uint32_t kMaxSlots = 16;
constexpr uint32_t kMaxRank = 512;  // must match WALK_MAX_RANK
constexpr uint32_t kBatch = 4;      // 32-column chunks loaded together

using u64 = unsigned long long;

static __device__ __forceinline__ uint32_t fkey(uint32_t b) {
    const uint32_t a = b & 0x7fffffffu;
    if (a > 0x7f800000u) return 0xffffffffu;
    if (a == 0u) return 0x80000000u;
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// 8 bf16 of a codebook row from element j (a zero vector for an invalid row).
static __device__ __forceinline__ uint4 load8(const __nv_bfloat16* row, uint32_t j, bool valid,
                                              bool aligned) {
    if (!valid) return make_uint4(0u, 0u, 0u, 0u);
    if (aligned) return __ldg(reinterpret_cast<const uint4*>(row + j));
    const unsigned short* p = reinterpret_cast<const unsigned short*>(row + j);
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        w[i] = static_cast<uint32_t>(__ldg(p + 2 * i)) | (static_cast<uint32_t>(__ldg(p + 2 * i + 1)) << 16);
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

}  // namespace dflash2_walk_detail

__global__ void __launch_bounds__(512, 1)
dflash2_selector_walk_kernel(const int32_t* cand, const float* u, const __nv_bfloat16* h,
                             const __nv_bfloat16* p_codebook, const __nv_bfloat16* q_codebook,
                             const int32_t* anchor, int32_t* out, uint32_t batch, uint32_t slots,
                             uint32_t rank, uint32_t vocab) {
    namespace d = dflash2_walk_detail;
    using d::u64;
    __shared__ uint4 hsh[d::kMaxSlots * d::kMaxRank / 8];
    __shared__ float tab[d::kMaxSlots][d::kK][d::kK];
    __shared__ int32_t cand_sh[d::kMaxSlots][d::kK];
    __shared__ float u_sh[d::kMaxSlots][d::kK];

    const uint32_t b = blockIdx.x;
    if (b >= batch || slots > d::kMaxSlots || rank > d::kMaxRank || (rank & 31u) != 0) return;
    const uint32_t tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;

    // Stage cand, u and h of this sequence.
    const size_t sb = static_cast<size_t>(b) * slots;
    for (uint32_t i = tid; i < slots * d::kK; i += d::kThreads) {
        cand_sh[i / d::kK][i % d::kK] = __ldg(cand + sb * d::kK + i);
        u_sh[i / d::kK][i % d::kK] = __ldg(u + sb * d::kK + i);
    }
    {
        const __nv_bfloat16* hb = h + sb * rank;
        const bool ha = (reinterpret_cast<uintptr_t>(hb) & 15u) == 0;
        const uint32_t nv = slots * rank / 8u;
        for (uint32_t i = tid; i < nv; i += d::kThreads) hsh[i] = d::load8(hb, i * 8u, true, ha);
    }
    const int32_t anc = __ldg(anchor + b);
    __syncthreads();

    if (warp < slots) {
        const uint32_t s = warp, g = lane >> 2, t = lane & 3u;
        const int32_t ids[4] = {s == 0 ? anc : cand_sh[s - 1][g], s == 0 ? anc : cand_sh[s - 1][g + 8],
                                cand_sh[s][g], cand_sh[s][g + 8]};
        const __nv_bfloat16* rowp[4];
        bool valid[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            valid[r] = ids[r] >= 0 && static_cast<uint32_t>(ids[r]) < vocab;
            const __nv_bfloat16* cb = r < 2 ? p_codebook : q_codebook;
            rowp[r] = cb + (valid[r] ? static_cast<size_t>(ids[r]) * rank : 0);
        }
        const bool aligned = ((reinterpret_cast<uintptr_t>(p_codebook) | reinterpret_cast<uintptr_t>(q_codebook)) & 15u) == 0;
        const uint32_t nchunk = rank / 32u;
        for (uint32_t c = d::kBatch; c < nchunk; ++c) {
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                if (valid[r]) asm volatile("prefetch.global.L2 [%0];" ::"l"(rowp[r] + c * 32u + 8u * t));
            }
        }
        float acc0[4] = {0.f, 0.f, 0.f, 0.f}, acc1[4] = {0.f, 0.f, 0.f, 0.f};
        for (uint32_t c0 = 0; c0 < nchunk; c0 += d::kBatch) {
            uint4 v[d::kBatch][4];
#pragma unroll
            for (uint32_t cb = 0; cb < d::kBatch; ++cb) {
                const uint32_t j = (c0 + cb) * 32u + 8u * t;
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    v[cb][r] = c0 + cb < nchunk ? d::load8(rowp[r], j, valid[r], aligned) : make_uint4(0u, 0u, 0u, 0u);
                }
            }
#pragma unroll
            for (uint32_t cb = 0; cb < d::kBatch; ++cb) {
                if (c0 + cb < nchunk) {
                    const uint4 hv = hsh[(s * rank + (c0 + cb) * 32u + 8u * t) / 8u];
#pragma unroll
                    for (int ks = 0; ks < 2; ++ks) {
                        const int i0 = 2 * ks, i1 = 2 * ks + 1;
                        uint32_t ah[4], al[4];
                        d::split_prod(d::word(v[cb][0], i0), d::word(hv, i0), ah[0], al[0]);
                        d::split_prod(d::word(v[cb][1], i0), d::word(hv, i0), ah[1], al[1]);
                        d::split_prod(d::word(v[cb][0], i1), d::word(hv, i1), ah[2], al[2]);
                        d::split_prod(d::word(v[cb][1], i1), d::word(hv, i1), ah[3], al[3]);
                        const uint32_t b00 = d::word(v[cb][2], i0), b01 = d::word(v[cb][2], i1);
                        const uint32_t b10 = d::word(v[cb][3], i0), b11 = d::word(v[cb][3], i1);
                        dense_mma::mma_bf16(acc0, ah[0], ah[1], ah[2], ah[3], b00, b01);
                        dense_mma::mma_bf16(acc0, al[0], al[1], al[2], al[3], b00, b01);
                        dense_mma::mma_bf16(acc1, ah[0], ah[1], ah[2], ah[3], b10, b11);
                        dense_mma::mma_bf16(acc1, al[0], al[1], al[2], al[3], b10, b11);
                    }
                }
            }
        }
        const uint32_t c = 2u * t;
        tab[s][g][c] = __fadd_rn(acc0[0], u_sh[s][c]);
        tab[s][g][c + 1] = __fadd_rn(acc0[1], u_sh[s][c + 1]);
        tab[s][g + 8][c] = __fadd_rn(acc0[2], u_sh[s][c]);
        tab[s][g + 8][c + 1] = __fadd_rn(acc0[3], u_sh[s][c + 1]);
        tab[s][g][c + 8] = __fadd_rn(acc1[0], u_sh[s][c + 8]);
        tab[s][g][c + 9] = __fadd_rn(acc1[1], u_sh[s][c + 9]);
        tab[s][g + 8][c + 8] = __fadd_rn(acc1[2], u_sh[s][c + 8]);
        tab[s][g + 8][c + 9] = __fadd_rn(acc1[3], u_sh[s][c + 9]);
    }
    __syncthreads();

    if (warp == 0) {
        uint32_t prev = 0;
        for (uint32_t s = 0; s < slots; ++s) {
            const float sc = lane < d::kK ? tab[s][prev][lane] : 0.f;
            u64 key = lane < d::kK ? ((static_cast<u64>(d::fkey(__float_as_uint(sc))) << 32) | (31u - lane)) : 0ull;
#pragma unroll
            for (int m = 16; m > 0; m >>= 1) {
                const u64 o = __shfl_xor_sync(0xffffffffu, key, m);
                key = o > key ? o : key;
            }
            prev = 31u - static_cast<uint32_t>(key & 31ull);
            if (lane == 0) out[sb + s] = cand_sh[s][prev];
        }
    }
}
