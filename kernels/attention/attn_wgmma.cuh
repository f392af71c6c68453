// Hopper (sm_90a) compute path of the 128-row prefill twins: the per-warp arithmetic of
// attn_common.cuh with both products issued as warpgroup MMAs (wgmma) instead of per-warp mma.sync.
//
// Two warpgroups of 4 warps each own 64 of the CTA's 128 query rows. Per 32-key tile:
//   S = Q K^T: 16 wgmma m64n32k16, A = Q from registers (each warp's 16 rows, loaded once per
//     CTA as mma.sync A fragments) and B = K read from shared memory through a matrix
//     descriptor, accumulated over head_dim in 16-wide steps from 0 up, exactly as warp_qk's 16
//     mma.sync steps; the accumulator fragment of each warp (rows 16w .. 16w + 15 of the
//     warpgroup) has the m16n8 layout that warp_softmax expects;
//   warp_softmax (the shared code, unchanged) turns S into P in registers and rescales O;
//   O += P V: 2 wgmma m64n256k16 with A = P from registers (its fragment layout is mma.sync's A
//     layout) and B = V read from shared memory transposed (V rows are keys, so B is MN-major).
// The tensor-core products are the same bf16 x bf16 -> f32 operations in the same accumulation
// order as the mma.sync path, so each output row is bit-identical to the 64-row kernels' (the GPU
// tests compare the raw bits).
//
// Both warpgroups issue MMAs for every tile of the CTA (the union of its warps' tiles); a warp
// whose own rows see no key of such a tile (the causal diagonal) applies the full mask there:
// its scores become -inf, so its running max stays, alpha is exactly 1, P is 0 and
// O + 0 * V = O, l + 0 = l exactly. That is the same state as skipping the tile, which is what
// the mma.sync path does.
//
// Shared memory: the same 96 KiB (128 Q rows, one K tile, one V tile of 256 bf16 per row) in
// the layout the descriptors read (Q too, though it is only read once, into registers): each
// tile is stored as four 64-column blocks, a block being ROWS x 128 bytes with 16-byte chunk c
// of row r at chunk c ^ (r & 7) (the 128-byte swizzle), each block 1024-byte aligned.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "../common/wgmma.cuh"
#include "attn_common.cuh"

namespace attn_detail {

using kcommon::BlockSwizzle;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

using kcommon::fence_proxy_async;
using kcommon::pin;
using kcommon::smem_desc_sw128;
using kcommon::wgmma_commit;
using kcommon::wgmma_fence;
using kcommon::wgmma_m64n256k16_rs_tb;
using kcommon::wgmma_m64n32k16_rs;
using kcommon::wgmma_wait_all;

// One CTA of 8 warps (two warpgroups) x 16 rows; the loads, barriers and tile ranges of attn_cta's
// LOAD_PIPELINED schedule, plus the proxy fence that wgmma's shared-memory reads need. (Measured
// on an H200 and not kept: a ping-pong schedule in which the warpgroups run half a tile apart,
// one on QK^T + softmax while the other runs PV, was ~20% slower, because with one K and one V
// buffer each buffer is then busy for two consecutive intervals and every tile load is exposed;
// issuing the next K load right after QK^T, at the cost of a third barrier, was no faster; nor was
// an mbarrier on which each warp signals "done with K" so that the next K load starts after the
// softmax without a third CTA barrier: 5-12% slower, at 255 registers; nor was running PV of tile
// t - 1 on the tensor cores during the softmax of tile t (QK^T[t] and PV[t - 1] issued together,
// the O rescale after PV[t - 1], P double-buffered across a loop unrolled by two, four barriers
// per tile): bit-identical, but the tile took the same ~2.7k cycles, 1-3% faster at L 4096 and
// 16384 and 4% slower at L 512, with ~150 bytes of spills. Nsight Compute on the kept schedule,
// L 4096: one instruction issued every 2.7 cycles per scheduler, a third of the warp stall
// cycles at the two CTA barriers.)
template <int HEAD_DIM, int NWARPS, typename KV>
__device__ __forceinline__ void attn_cta_wgmma(const __nv_bfloat16* q_base, int64_t q_stride,
                                               __nv_bfloat16* o_base, const __nv_bfloat16* k_base,
                                               const __nv_bfloat16* v_base, const KV& kv,
                                               const MaskParams& mp, int q_block,
                                               float inv_sqrt_d) {
    static_assert(HEAD_DIM == 256 && NWARPS == 8, "the wgmma path is the 128-row, head_dim 256 twin");
    constexpr int NTHREADS = NWARPS * 32;
    constexpr int QROWS = NWARPS * WARP_ROWS;
    using QLay = BlockSwizzle<QROWS>;
    using KLay = BlockSwizzle<KV_TILE>;
    using QL = TileLoad<HEAD_DIM, NTHREADS, QROWS, QLay>;
    using KL = TileLoad<HEAD_DIM, NTHREADS, KV_TILE, KLay>;

    extern __shared__ __align__(1024) unsigned char attn_wg_smem[];
    const uint32_t sQ = smem_addr(attn_wg_smem);
    const uint32_t sK = sQ + QROWS * HEAD_DIM * 2;
    const uint32_t sV = sK + KV_TILE * HEAD_DIM * 2;
    if (sQ & 1023u) __trap();  // the 128-byte swizzle is anchored at 1024-byte boundaries

    // Both warpgroups run every tile of the CTA's range (the union of its 8 warps'), so that the
    // MMAs are issued and awaited on every path (ptxas serializes wgmma otherwise).
    const CtaThread<NWARPS> c(mp, q_block, inv_sqrt_d);

    WarpState<HEAD_DIM> st;
    warp_init(st);

    issue_q_rows<QL>(sQ, q_base, q_stride, c.row0, mp.q_len, c.tid);
    KvRows<KL, KV> rows;

    // Descriptors: the K tile is K-major (a 16-wide head_dim step kk sits in 64-column block
    // kk / 4 at byte 32 * (kk % 4) of the 128-byte row; 8-row groups are 1024 bytes apart). V is
    // MN-major: the 16 keys of step kk start at row 16 * kk; 8-key groups are 1024 bytes apart,
    // 64-column blocks KV_TILE * 128 bytes apart.
    // A byte offset added to a descriptor goes, in 16-byte units, into its start-address field
    // (the tiles lie far below the field's 256 KiB range, so it never carries out).
    const uint64_t desc_k0 = smem_desc_sw128(sK, 16, 1024);
    const uint64_t desc_v0 = smem_desc_sw128(sV, KLay::BLOCK, 1024);
    auto desc_k = [&](int kk) {
        return desc_k0 + static_cast<uint64_t>(((kk >> 2) * KLay::BLOCK + (kk & 3) * 32) >> 4);
    };
    auto desc_v = [&](int kk) { return desc_v0 + static_cast<uint64_t>((kk * 16 * 128) >> 4); };

    // The warp's 16 Q rows are held in registers for the whole CTA (loaded once, after the Q
    // tile lands, as the 16 mma.sync A fragments of head_dim steps 0 .. 15: 64 registers), so
    // QK^T reads only K from shared memory. (Reading Q through descriptors instead, with every
    // QK^T, measured 9% slower at L 16384 on an H200: the m64n32k16 MMAs were bound by
    // shared-memory reads of Q.)
    uint32_t qf[HEAD_DIM / 16][4];
    auto load_q_fragments = [&]() {
#pragma unroll
        for (int kk = 0; kk < HEAD_DIM / 16; ++kk) {
            ldmatrix_x4(qf[kk], sQ + QLay::offset(c.wr0 + (c.lane & 15), kk * 2 + (c.lane >> 4)));
        }
    };

    // S = Q K^T of this warpgroup: qk_issue starts the MMAs, qk_wait waits for them (the next
    // tile's addresses are computed in between, while the tensor cores run).
    auto qk_issue = [&](float (&s)[4][4]) {
#pragma unroll
        for (int n = 0; n < 4; ++n) {
#pragma unroll
            for (int e = 0; e < 4; ++e) s[n][e] = 0.f;
        }
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < HEAD_DIM / 16; ++kk) wgmma_m64n32k16_rs(s, qf[kk], desc_k(kk));
        wgmma_commit();
    };
    auto qk_wait = [&](float (&s)[4][4]) {
        wgmma_wait_all();
#pragma unroll
        for (int n = 0; n < 4; ++n) {
#pragma unroll
            for (int e = 0; e < 4; ++e) pin(s[n][e]);
        }
    };
    auto softmax = [&](float (&s)[4][4], uint32_t (&P)[2][4], int t) {
        const bool active = t >= c.mine.lo && t <= c.mine.hi;
        const bool nm = !active || tile_needs_mask(mp, c.row0 + c.wr0, t);
        warp_softmax<HEAD_DIM>(st, P, s, t * KV_TILE, nm, mp, c.pos0, c.pos1, c.scale_log2,
                               c.lane);
    };
    auto pv = [&](const uint32_t (&P)[2][4]) {
        wgmma_fence();
        wgmma_m64n256k16_rs_tb(st.o, P[0], desc_v(0));
        wgmma_m64n256k16_rs_tb(st.o, P[1], desc_v(1));
        wgmma_commit();
        wgmma_wait_all();
#pragma unroll
        for (int n = 0; n < HEAD_DIM / 8; ++n) {
#pragma unroll
            for (int e = 0; e < 4; ++e) pin(st.o[n][e]);
        }
    };

    // Row addresses run a tile ahead of the loads and block-table reads two tiles ahead: the
    // offsets of tile t + 1 are computed while the tensor cores run QK^T of tile t, so the
    // loads after each barrier issue at once; the rows of tile t + 1 are requested into L2 at
    // the same time. (On an H200, hq 16, hkv 4, when they were added: the L2 requests made
    // L 16384, whose K + V do not fit L2, 6% (contiguous) and 3% (paged) faster; at L 4096 the
    // paged twin measured 3% slower with them, the contiguous one the same. Requesting only V,
    // or only above an L2-size threshold, measured worse; so did reading the block table while
    // PV runs instead of while QK^T runs.)
    if (c.t_begin <= c.t_end) {
        rows.fetch(kv, c.t_begin, c.tid);
        rows.offsets(kv, mp, c.t_begin, c.tid);
        rows.issue(sK, k_base, c.tid);
        if (c.t_begin < c.t_end) rows.fetch(kv, c.t_begin + 1, c.tid);
    }
    cp_async_commit();
    for (int t = c.t_begin; t <= c.t_end; ++t) {
        uint32_t P[2][4];
        float s[4][4];
        cp_async_wait_all();  // K tile t (and Q) landed
        fence_proxy_async();
        __syncthreads();      // ... for every thread; every warpgroup is done with V tile t - 1
        rows.issue(sV, v_base, c.tid);  // offsets of tile t
        cp_async_commit();
        if (t == c.t_begin) load_q_fragments();
        qk_issue(s);
        if (t < c.t_end) {
            rows.offsets(kv, mp, t + 1, c.tid);
            rows.prefetch_l2(k_base, v_base, c.tid);
            if (t + 1 < c.t_end) rows.fetch(kv, t + 2, c.tid);
        }
        qk_wait(s);
        softmax(s, P, t);
        cp_async_wait_all();  // V tile t landed
        fence_proxy_async();
        __syncthreads();      // ... for every thread; every warpgroup is done with K tile t
        if (t < c.t_end) {
            rows.issue(sK, k_base, c.tid);  // offsets of tile t + 1
            cp_async_commit();
        }
        pv(P);
    }
    cp_async_wait_all();
    __syncthreads();  // every warp has its Q fragments before the Q rows are reused for staging

    if (c.row0 + c.wr0 < mp.q_len) {
        auto o_row = [&](int r) { return o_base + static_cast<int64_t>(r) * q_stride; };
        warp_store<HEAD_DIM>(st, sQ, c.wr0, c.row0 + c.wr0, mp.q_len, o_row, c.lane);
    }
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

}  // namespace attn_detail
