// Shared per-warp flash-attention prefill code (BF16 in/out, f32 softmax and accumulation).
//
// A warp owns 16 query rows. Per 32-row KV tile it runs
//   phase 1 (warp_qk_softmax): S = Q K^T with mma.sync m16n8k16 (bf16 x bf16 -> f32), masking,
//            the online-softmax update (running max m, running sum l, rescale of O),
//            P = exp2(S * scale_log2 - m * scale_log2) packed to bf16 A fragments in registers;
//   phase 2 (warp_pv): O += P V with mma.sync.
// and at the end warp_store normalises O by 1 / l and writes bf16 rows.
//
// Every kernel built on this header (the 64-row CTAs of attn_prefill.cu and the 128-row CTAs
// of attn_prefill_fa128.cu) runs exactly this code for each warp, over exactly the same KV
// tiles, in the same order: the tiles a warp processes depend only on its own 16 rows
// (warp_tile_range), never on the CTA it sits in, and a warp skips every tile outside that
// range. All floating-point operations outside the mma instructions are written with explicit
// rounding intrinsics (__fmul_rn, __fadd_rn, __fmaf_rn, ex2.approx.ftz) so that no compiler
// contraction decision can differ between two kernels. Hence the outputs of two such kernels
// are bit-identical for rows they both compute.
// (attn_wgmma.cuh issues the same two products as warpgroup MMAs on sm_90a for the 128-row twins;
// the softmax code between them is this header's, and the products keep mma.sync's operations
// and accumulation order, which the GPU tests check bit for bit.)
//
// Shared-memory tiles hold rows of HEAD_DIM bf16 (HEAD_DIM * 2 bytes, a multiple of 128);
// 16-byte chunk c of row r lives at chunk (c ^ (r & 7)) of that row, so the 8 row addresses
// of each ldmatrix 8x8 matrix fall in 8 distinct 16-byte bank groups.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "../common/bf16x2.cuh"
#include "../common/ptx.cuh"

namespace attn_detail {

constexpr int KV_TILE = 32;     // keys per KV tile
constexpr int WARP_ROWS = 16;   // query rows per warp

// ---------------------------------------------------------------------------------------------
// Small PTX wrappers
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

using kcommon::cp_async16_zfill;
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// D = A * B + D, m16n8k16, bf16 inputs, f32 accumulate.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                               uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

using kcommon::pack_bf16x2;

// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled tile of HEAD_DIM-wide rows.
template <int HEAD_DIM>
__device__ __forceinline__ uint32_t swz(int row, int chunk) {
    return static_cast<uint32_t>(row * (HEAD_DIM * 2) + ((chunk ^ (row & 7)) << 4));
}

// ---------------------------------------------------------------------------------------------
// Masking and per-warp tile ranges
// ---------------------------------------------------------------------------------------------
// A query at absolute position p sees key k (0 <= k < kv_len) when
//   (causal == 0 || k <= p) and (window == 0 || (p - window < k && k <= p)).
// (A nonzero sliding window implies the upper bound k <= p, causal or not.)
struct MaskParams {
    int kv_len;
    int q_len;
    int q_offset;
    int causal;   // 0 / 1
    int window;   // 0 = none
};

__device__ __forceinline__ bool key_visible(const MaskParams& mp, int key, int pos) {
    if (key >= mp.kv_len) return false;
    if ((mp.causal || mp.window) && key > pos) return false;
    if (mp.window && key <= pos - mp.window) return false;
    return true;
}

// Tiles [lo, hi] (inclusive) that hold at least one key visible to at least one valid row
// (row < q_len) of the warp whose first row is r0; lo > hi when none. It is a function of the
// warp's rows only, so every kernel gives a warp the same tiles.
struct TileRange {
    int lo, hi;
};
__device__ __forceinline__ TileRange warp_tile_range(const MaskParams& mp, int r0) {
    TileRange tr{1, 0};
    if (r0 >= mp.q_len || mp.kv_len <= 0) return tr;
    const int r_last = min(r0 + WARP_ROWS - 1, mp.q_len - 1);
    const int p_lo = mp.q_offset + r0;
    const int p_hi = mp.q_offset + r_last;
    int k_hi = mp.kv_len - 1;
    if (mp.causal || mp.window) k_hi = min(k_hi, p_hi);
    int k_lo = 0;
    if (mp.window) k_lo = max(0, p_lo - mp.window + 1);
    if (k_hi < k_lo) return tr;
    tr.lo = k_lo / KV_TILE;
    tr.hi = k_hi / KV_TILE;
    return tr;
}

// True when some key of tile t is hidden from some valid row of the warp (r0 first row):
// only then does the warp apply the element-wise mask (masking a fully visible tile would be
// a no-op, so this decides speed, not results).
__device__ __forceinline__ bool tile_needs_mask(const MaskParams& mp, int r0, int t) {
    const int r_last = min(r0 + WARP_ROWS - 1, mp.q_len - 1);
    const int p_lo = mp.q_offset + r0;
    const int p_hi = mp.q_offset + r_last;
    int all_hi = mp.kv_len - 1;  // keys visible to every valid row of the warp: [all_lo, all_hi]
    if (mp.causal || mp.window) all_hi = min(all_hi, p_lo);
    int all_lo = 0;
    if (mp.window) all_lo = max(0, p_hi - mp.window + 1);
    const int k0 = t * KV_TILE;
    return !(k0 >= all_lo && k0 + KV_TILE - 1 <= all_hi);
}

// ---------------------------------------------------------------------------------------------
// Per-warp state and the two phases
// ---------------------------------------------------------------------------------------------
// Fragment layout (mma m16n8k16 accumulator): lane holds rows g = lane / 4 and g + 8,
// columns 2 * (lane % 4) + {0, 1} of each n8 tile: [0], [1] row g; [2], [3] row g + 8.
template <int HEAD_DIM>
struct WarpState {
    float o[HEAD_DIM / 8][4];  // O accumulator, 16 rows x HEAD_DIM
    float m[2];                // running max of raw scores (rows g, g + 8), -inf = none yet
    float l[2];                // this lane's partial running sum of probabilities
};

template <int HEAD_DIM>
__device__ __forceinline__ void warp_init(WarpState<HEAD_DIM>& st) {
#pragma unroll
    for (int n = 0; n < HEAD_DIM / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) st.o[n][e] = 0.f;
    }
    st.m[0] = st.m[1] = -INFINITY;
    st.l[0] = st.l[1] = 0.f;
}

// Phase 1 = warp_qk + warp_softmax. sQ: shared address of the Q tile (row wr0 = this warp's
// first row in it); sK: shared address of the 32-row K tile holding keys key0 .. key0 + 31.
// pos0 / pos1: absolute positions of this lane's rows g and g + 8.
//
// Scores S = Q K^T of the warp's 16 rows against the tile's 32 keys, accumulated over head_dim
// in 16-wide steps from 0 up (s[n] covers keys n*8 .. n*8+7 in the accumulator layout).
template <int HEAD_DIM>
__device__ __forceinline__ void warp_qk(float (&s)[4][4], uint32_t sQ, int wr0, uint32_t sK,
                                        int lane) {
#pragma unroll
    for (int n = 0; n < 4; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] = 0.f;
    }

    const int mi = lane >> 3;
#pragma unroll
    for (int kk = 0; kk < HEAD_DIM / 16; ++kk) {
        uint32_t a[4];
        ldmatrix_x4(a, sQ + swz<HEAD_DIM>(wr0 + (lane & 15), kk * 2 + (lane >> 4)));
#pragma unroll
        for (int np = 0; np < 2; ++np) {
            uint32_t b[4];
            const int krow = np * 16 + (mi >> 1) * 8 + (lane & 7);
            ldmatrix_x4(b, sK + swz<HEAD_DIM>(krow, kk * 2 + (mi & 1)));
            mma_bf16_16816(s[2 * np], a, b[0], b[1]);
            mma_bf16_16816(s[2 * np + 1], a, b[2], b[3]);
        }
    }
}

// Masking and the online-softmax update of the warp's state from the scores s of one tile
// (keys key0 .. key0 + 31); leaves P, the bf16 probabilities, as A fragments: P[kk] covers keys
// kk*16 .. kk*16+15. s is consumed.
template <int HEAD_DIM>
__device__ __forceinline__ void warp_softmax(WarpState<HEAD_DIM>& st, uint32_t (&P)[2][4],
                                             float (&s)[4][4], int key0, bool need_mask,
                                             const MaskParams& mp, int pos0, int pos1,
                                             float scale_log2, int lane) {
    if (need_mask) {
#pragma unroll
        for (int n = 0; n < 4; ++n) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int key = key0 + n * 8 + 2 * (lane & 3) + (e & 1);
                const int pos = (e < 2) ? pos0 : pos1;
                if (!key_visible(mp, key, pos)) s[n][e] = -INFINITY;
            }
        }
    }

    // Row maxima (including the old max), reduced over the 4 lanes of a row.
    float mx0 = st.m[0], mx1 = st.m[1];
#pragma unroll
    for (int n = 0; n < 4; ++n) {
        mx0 = fmaxf(mx0, fmaxf(s[n][0], s[n][1]));
        mx1 = fmaxf(mx1, fmaxf(s[n][2], s[n][3]));
    }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));

    // Scaled maxima; a row that has seen no visible key keeps m = -inf and uses 0 instead.
    const float ms0 = (mx0 == -INFINITY) ? 0.f : __fmul_rn(mx0, scale_log2);
    const float ms1 = (mx1 == -INFINITY) ? 0.f : __fmul_rn(mx1, scale_log2);
    const float alpha0 =
        (st.m[0] == -INFINITY) ? 0.f : fast_exp2(__fsub_rn(__fmul_rn(st.m[0], scale_log2), ms0));
    const float alpha1 =
        (st.m[1] == -INFINITY) ? 0.f : fast_exp2(__fsub_rn(__fmul_rn(st.m[1], scale_log2), ms1));
    st.m[0] = mx0;
    st.m[1] = mx1;

    float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
    for (int n = 0; n < 4; ++n) {
        s[n][0] = fast_exp2(__fmaf_rn(s[n][0], scale_log2, -ms0));
        s[n][1] = fast_exp2(__fmaf_rn(s[n][1], scale_log2, -ms0));
        s[n][2] = fast_exp2(__fmaf_rn(s[n][2], scale_log2, -ms1));
        s[n][3] = fast_exp2(__fmaf_rn(s[n][3], scale_log2, -ms1));
        sum0 = __fadd_rn(sum0, s[n][0]);
        sum0 = __fadd_rn(sum0, s[n][1]);
        sum1 = __fadd_rn(sum1, s[n][2]);
        sum1 = __fadd_rn(sum1, s[n][3]);
    }
    st.l[0] = __fadd_rn(__fmul_rn(st.l[0], alpha0), sum0);
    st.l[1] = __fadd_rn(__fmul_rn(st.l[1], alpha1), sum1);

    // Rescale O. Multiplying by exactly 1 changes no bits, so skipping it when no row of the
    // warp moved its max is exact.
    if (__any_sync(0xffffffffu, alpha0 != 1.f || alpha1 != 1.f)) {
#pragma unroll
        for (int n = 0; n < HEAD_DIM / 8; ++n) {
            st.o[n][0] = __fmul_rn(st.o[n][0], alpha0);
            st.o[n][1] = __fmul_rn(st.o[n][1], alpha0);
            st.o[n][2] = __fmul_rn(st.o[n][2], alpha1);
            st.o[n][3] = __fmul_rn(st.o[n][3], alpha1);
        }
    }

#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
        P[kk][0] = pack_bf16x2(s[2 * kk][0], s[2 * kk][1]);
        P[kk][1] = pack_bf16x2(s[2 * kk][2], s[2 * kk][3]);
        P[kk][2] = pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        P[kk][3] = pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    }
}

// Phase 1 as one call: warp_qk then warp_softmax.
template <int HEAD_DIM>
__device__ __forceinline__ void warp_qk_softmax(WarpState<HEAD_DIM>& st, uint32_t (&P)[2][4],
                                                uint32_t sQ, int wr0, uint32_t sK, int key0,
                                                bool need_mask, const MaskParams& mp, int pos0,
                                                int pos1, float scale_log2, int lane) {
    float s[4][4];
    warp_qk<HEAD_DIM>(s, sQ, wr0, sK, lane);
    warp_softmax<HEAD_DIM>(st, P, s, key0, need_mask, mp, pos0, pos1, scale_log2, lane);
}

// Phase 2: O += P V. sV: shared address of the 32-row V tile.
template <int HEAD_DIM>
__device__ __forceinline__ void warp_pv(WarpState<HEAD_DIM>& st, const uint32_t (&P)[2][4],
                                        uint32_t sV, int lane) {
    const int mi = lane >> 3;
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
#pragma unroll
        for (int dn = 0; dn < HEAD_DIM / 16; ++dn) {
            uint32_t b[4];
            const int vrow = kk * 16 + (mi & 1) * 8 + (lane & 7);
            ldmatrix_x4_trans(b, sV + swz<HEAD_DIM>(vrow, dn * 2 + (mi >> 1)));
            mma_bf16_16816(st.o[2 * dn], P[kk], b[0], b[1]);
            mma_bf16_16816(st.o[2 * dn + 1], P[kk], b[2], b[3]);
        }
    }
}

// Normalise O by 1 / l and write the warp's valid rows (row0 + r < q_len) to out_row(row).
// sStage: shared address of the warp's own 16 Q rows (only this warp reads them), reused to
// turn the fragments into 16-byte coalesced global stores.
template <int HEAD_DIM, typename OutRow>
__device__ __forceinline__ void warp_store(const WarpState<HEAD_DIM>& st, uint32_t sQ, int wr0,
                                           int row0, int q_len, OutRow out_row, int lane) {
    float l0 = st.l[0], l1 = st.l[1];
    l0 = __fadd_rn(l0, __shfl_xor_sync(0xffffffffu, l0, 1));
    l0 = __fadd_rn(l0, __shfl_xor_sync(0xffffffffu, l0, 2));
    l1 = __fadd_rn(l1, __shfl_xor_sync(0xffffffffu, l1, 1));
    l1 = __fadd_rn(l1, __shfl_xor_sync(0xffffffffu, l1, 2));
    const float inv0 = (l0 > 0.f) ? __frcp_rn(l0) : 0.f;
    const float inv1 = (l1 > 0.f) ? __frcp_rn(l1) : 0.f;

    __syncwarp();
    const int g = lane >> 2;
    const int cw = (lane & 3) * 4;  // byte offset inside the 16-byte chunk
#pragma unroll
    for (int n = 0; n < HEAD_DIM / 8; ++n) {
        const uint32_t v0 = pack_bf16x2(__fmul_rn(st.o[n][0], inv0), __fmul_rn(st.o[n][1], inv0));
        const uint32_t v1 = pack_bf16x2(__fmul_rn(st.o[n][2], inv1), __fmul_rn(st.o[n][3], inv1));
        const uint32_t a0 = sQ + swz<HEAD_DIM>(wr0 + g, n) + cw;
        const uint32_t a1 = sQ + swz<HEAD_DIM>(wr0 + g + 8, n) + cw;
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(a0), "r"(v0) : "memory");
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(a1), "r"(v1) : "memory");
    }
    __syncwarp();
    constexpr int CPR = HEAD_DIM / 8;  // 16-byte chunks per row
#pragma unroll
    for (int i = 0; i < WARP_ROWS * CPR / 32; ++i) {
        const int idx = lane + i * 32;
        const int r = idx / CPR;
        const int c = idx % CPR;
        if (row0 + r < q_len) {
            uint32_t x, y, z, w;
            asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                         : "=r"(x), "=r"(y), "=r"(z), "=r"(w)
                         : "r"(sQ + swz<HEAD_DIM>(wr0 + r, c)));
            uint4 val = make_uint4(x, y, z, w);
            *reinterpret_cast<uint4*>(out_row(row0 + r) + c * 8) = val;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// CTA-level driver shared by all four kernels
// ---------------------------------------------------------------------------------------------
// Tile loads: 8 consecutive threads cover 128 contiguous bytes of one row (coalesced), so a
// thread's chunks of a KV tile all sit in RPT whole rows: one address computation (and, paged,
// one block-table entry) per row, not per chunk.
constexpr int LOAD_TPR = 8;  // threads per row segment

// Shared-memory layout of the tiles the per-warp code reads: swizzled rows of HEAD_DIM bf16.
template <int HEAD_DIM>
struct RowSwizzle {
    __device__ static __forceinline__ uint32_t offset(int row, int chunk) {
        return swz<HEAD_DIM>(row, chunk);
    }
};

template <int HEAD_DIM, int NT, int ROWS, typename Layout = RowSwizzle<HEAD_DIM>>
struct TileLoad {
    static constexpr int RPT = ROWS * LOAD_TPR / NT;        // rows per thread
    static constexpr int CPT = HEAD_DIM / 8 / LOAD_TPR;     // 16-byte chunks per thread per row
    static constexpr int ROW_BYTES = HEAD_DIM * 2;
    static_assert(RPT >= 1 && (ROWS * LOAD_TPR) % NT == 0, "tile rows must divide among threads");
    static_assert(CPT >= 1, "HEAD_DIM >= 64");
    __device__ static __forceinline__ int row(int ltid, int i) {
        return ltid / LOAD_TPR + (NT / LOAD_TPR) * i;
    }
    __device__ static __forceinline__ int chunk(int ltid, int j) {
        return ltid % LOAD_TPR + LOAD_TPR * j;
    }
    // Rows of the tile are at base + off[i] (elements); rows with !ok[i] are zero-filled and
    // must have off[i] == 0: their (unread) source address is then the valid row at base.
    __device__ static __forceinline__ void issue(uint32_t sdst, const __nv_bfloat16* base,
                                                 const int64_t (&off)[RPT], const bool (&ok)[RPT],
                                                 int ltid) {
#pragma unroll
        for (int i = 0; i < RPT; ++i) {
            const int r = row(ltid, i);
#pragma unroll
            for (int j = 0; j < CPT; ++j) {
                const int c = chunk(ltid, j);
                cp_async16_zfill(sdst + Layout::offset(r, c), base + off[i] + c * 8, ok[i]);
            }
        }
    }
};

// KV row addressing. fetch(key) does the (possibly slow) part that can be issued a phase ahead
// (the block-table load of a paged cache); offset(fetched, key) gives the element offset of
// key's row from k / v base.
struct ContigKV {
    int64_t stride;  // elements between rows
    using Fetched = int;  // nothing to fetch
    __device__ __forceinline__ Fetched fetch(int) const { return 0; }
    __device__ __forceinline__ int64_t offset(Fetched, int key) const {
        return static_cast<int64_t>(key) * stride;
    }
};

// Division by a divisor fixed for the whole kernel, as a multiply-high, an add and a shift
// (valid for numerators below 2^31): l = ceil(log2 d), m = floor(2^32 (2^l - d) / d) + 1,
// n / d = (umulhi(n, m) + n) >> l.
struct FastDiv {
    uint32_t d, m;
    int l;
    __device__ __forceinline__ void init(uint32_t divisor) {
        d = divisor;
        l = 0;
        while ((1u << l) < d && l < 31) ++l;
        // d > 2^31 exceeds every numerator: m = 0 and l = 31 give 0.
        m = (1u << l) < d ? 0u
                          : static_cast<uint32_t>(((1ull << 32) * ((1ull << l) - d)) / d + 1);
    }
    __device__ __forceinline__ int div(int n) const {
        const uint32_t u = static_cast<uint32_t>(n);
        return static_cast<int>((__umulhi(u, m) + u) >> l);
    }
};

struct PagedKV {
    const int32_t* block_table;
    FastDiv block_size;
    int kv_len;
    int64_t stride;
    struct Fetched {
        int blk;  // block-table entry of the key's block
        int rem;  // key % block_size
    };
    // Keys past kv_len read the last valid entry (their rows are zero-filled anyway), so the
    // load needs no branch; a tile is only fetched when kv_len >= 1.
    __device__ __forceinline__ Fetched fetch(int key) const {
        const int idx = block_size.div(min(key, kv_len - 1));
        return {__ldg(block_table + idx), key - idx * static_cast<int>(block_size.d)};
    }
    // Element offset of key's row: cache slot blk * block_size + key % block_size. (A cache has
    // fewer than 2^32 token slots: each takes at least 128 bytes per kv head.)
    __device__ __forceinline__ int64_t offset(const Fetched& f, int) const {
        const uint32_t slot =
            static_cast<uint32_t>(f.blk) * block_size.d + static_cast<uint32_t>(f.rem);
        return static_cast<int64_t>(slot) * stride;
    }
};

// Load schedules (they never touch the arithmetic, see attn_cta):
//   LOAD_SERIAL: per tile, load K and V, wait, barrier, QK^T + softmax + PV, barrier.
//   LOAD_PIPELINED: wait K[t]; barrier; load V[t]; QK^T + softmax; wait V[t]; barrier;
//     load K[t + 1]; PV — the V load overlaps QK^T / softmax, the K load overlaps PV.
//   WGMMA_PIPELINED: LOAD_PIPELINED's schedule with the products issued as warpgroup MMAs
//     (attn_wgmma.cuh, sm_90a only, the 128-row head_dim 256 twins).
// (A split schedule, half the warps loading K and half V with arrival on mbarriers, measured ~4%
// faster than LOAD_PIPELINED for the mma.sync twin on an H200 but was dropped: compute-sanitizer
// racecheck flagged its cp.async-vs-ldmatrix ordering, which it does not seem to model.)
enum LoadMode { LOAD_SERIAL = 0, LOAD_PIPELINED = 1, WGMMA_PIPELINED = 3 };

template <int HEAD_DIM, int NWARPS, typename KV>
__device__ __forceinline__ void attn_cta_wgmma(const __nv_bfloat16* q_base, int64_t q_stride,
                                               __nv_bfloat16* o_base, const __nv_bfloat16* k_base,
                                               const __nv_bfloat16* v_base, const KV& kv,
                                               const MaskParams& mp, int q_block,
                                               float inv_sqrt_d);

// Union of the tile ranges of the NW warps from w_first on of a CTA whose first query row is row0
// (fully masked tiles are never loaded); lo > hi when none.
template <int NW>
__device__ __forceinline__ TileRange warps_tile_range(const MaskParams& mp, int row0, int w_first) {
    TileRange u{0x7fffffff, -1};
#pragma unroll
    for (int w = w_first; w < w_first + NW; ++w) {
        const TileRange r = warp_tile_range(mp, row0 + w * WARP_ROWS);
        if (r.lo <= r.hi) {
            u.lo = min(u.lo, r.lo);
            u.hi = max(u.hi, r.hi);
        }
    }
    return u;
}

// The calling thread's place in a CTA of NWARPS warps x 16 query rows (query block q_block): its
// warp and lane, the CTA's first row, the warp's first row inside the CTA, the tile range of the
// CTA (the union of its warps') and of the warp, and the absolute positions of its two rows.
template <int NWARPS>
struct CtaThread {
    int tid, warp, lane;
    int row0;  // first query row of the CTA
    int wr0;   // first row of this warp inside the CTA
    float scale_log2;
    int t_begin, t_end;
    TileRange mine;
    int pos0, pos1;
    __device__ __forceinline__ CtaThread(const MaskParams& mp, int q_block, float inv_sqrt_d)
        : tid(threadIdx.x),
          warp(tid >> 5),
          lane(tid & 31),
          row0(q_block * NWARPS * WARP_ROWS),
          wr0(warp * WARP_ROWS) {
        scale_log2 = __fmul_rn(inv_sqrt_d, 1.4426950408889634f);
        const TileRange cta = warps_tile_range<NWARPS>(mp, row0, 0);
        t_begin = cta.lo;
        t_end = cta.hi;
        mine = warp_tile_range(mp, row0 + wr0);
        pos0 = mp.q_offset + row0 + wr0 + (lane >> 2);
        pos1 = pos0 + 8;
    }
};

// Starts the copy of the CTA's query rows row0 .. row0 + ROWS - 1 into sQ (zero-filled past q_len).
template <typename QL>
__device__ __forceinline__ void issue_q_rows(uint32_t sQ, const __nv_bfloat16* q_base,
                                             int64_t q_stride, int row0, int q_len, int tid) {
    int64_t off[QL::RPT];
    bool ok[QL::RPT];
#pragma unroll
    for (int i = 0; i < QL::RPT; ++i) {
        const int r = row0 + QL::row(tid, i);
        ok[i] = r < q_len;
        off[i] = static_cast<int64_t>(ok[i] ? r : 0) * q_stride;
    }
    QL::issue(sQ, q_base, off, ok, tid);
}

// A loading thread's KV rows: the fetched values (paged: block-table entries and in-block
// indices) of the next tile to issue, and the element offsets of the tile in flight.
template <typename KL, typename KV>
struct KvRows {
    typename KV::Fetched fetched[KL::RPT];
    int64_t off[KL::RPT];
    bool ok[KL::RPT];
    __device__ __forceinline__ void fetch(const KV& kv, int t, int ltid) {
#pragma unroll
        for (int i = 0; i < KL::RPT; ++i) fetched[i] = kv.fetch(t * KV_TILE + KL::row(ltid, i));
    }
    __device__ __forceinline__ void offsets(const KV& kv, const MaskParams& mp, int t, int ltid) {
#pragma unroll
        for (int i = 0; i < KL::RPT; ++i) {
            const int key = t * KV_TILE + KL::row(ltid, i);
            ok[i] = key < mp.kv_len;
            off[i] = ok[i] ? kv.offset(fetched[i], key) : 0;
        }
    }
    __device__ __forceinline__ void issue(uint32_t sdst, const __nv_bfloat16* base, int ltid) const {
        KL::issue(sdst, base, off, ok, ltid);
    }
    // Asks L2 for the K and V rows of the tile whose offsets are held: of the LOAD_TPR threads
    // of a row, the first half each request 128-byte lines of the K row, the others of V.
    __device__ __forceinline__ void prefetch_l2(const __nv_bfloat16* k_base,
                                                const __nv_bfloat16* v_base, int ltid) const {
        constexpr int HALF = LOAD_TPR / 2;
        constexpr int LINES = KL::ROW_BYTES / 128;
        const int part = ltid % LOAD_TPR;
        const __nv_bfloat16* base = part < HALF ? k_base : v_base;
#pragma unroll
        for (int i = 0; i < KL::RPT; ++i) {
#pragma unroll
            for (int j = part % HALF; j < LINES; j += HALF) {
                if (ok[i]) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(base + off[i] + j * 64));
            }
        }
    }
};

// One CTA: NWARPS warps x 16 query rows. Shared memory: Q (NWARPS * 16 rows), K tile, V tile.
// Each warp runs warp_qk_softmax / warp_pv on the tiles of warp_tile_range (a function of its
// own rows only) in increasing order, whatever NWARPS and MODE are: the results of a row do
// not depend on the CTA shape or the load schedule.
template <int HEAD_DIM, int NWARPS, int MODE, typename KV>
__device__ __forceinline__ void attn_cta(const __nv_bfloat16* q_base, int64_t q_stride,
                                         __nv_bfloat16* o_base, const __nv_bfloat16* k_base,
                                         const __nv_bfloat16* v_base, const KV& kv,
                                         const MaskParams& mp, int q_block, float inv_sqrt_d) {
    static_assert(MODE == LOAD_SERIAL || MODE == LOAD_PIPELINED, "attn_cta's schedules");
    constexpr int NTHREADS = NWARPS * 32;
    constexpr int QROWS = NWARPS * WARP_ROWS;
    constexpr int TILE_BYTES = KV_TILE * HEAD_DIM * 2;
    using QL = TileLoad<HEAD_DIM, NTHREADS, QROWS>;
    using KL = TileLoad<HEAD_DIM, NTHREADS, KV_TILE>;

    extern __shared__ __align__(128) unsigned char attn_smem[];
    const uint32_t sQ = smem_addr(attn_smem);
    const uint32_t sK = sQ + QROWS * HEAD_DIM * 2;
    const uint32_t sV = sK + TILE_BYTES;

    const CtaThread<NWARPS> c(mp, q_block, inv_sqrt_d);

    WarpState<HEAD_DIM> st;
    warp_init(st);

    issue_q_rows<QL>(sQ, q_base, q_stride, c.row0, mp.q_len, c.tid);
    KvRows<KL, KV> rows;

    if constexpr (MODE == LOAD_SERIAL) {
        cp_async_commit();
        if (c.t_begin <= c.t_end) rows.fetch(kv, c.t_begin, c.tid);
        for (int t = c.t_begin; t <= c.t_end; ++t) {
            const int key0 = t * KV_TILE;
            rows.offsets(kv, mp, t, c.tid);
            rows.issue(sK, k_base, c.tid);
            rows.issue(sV, v_base, c.tid);
            cp_async_commit();
            if (t < c.t_end) rows.fetch(kv, t + 1, c.tid);
            cp_async_wait_all();
            __syncthreads();
            if (t >= c.mine.lo && t <= c.mine.hi) {
                uint32_t P[2][4];
                const bool nm = tile_needs_mask(mp, c.row0 + c.wr0, t);
                warp_qk_softmax<HEAD_DIM>(st, P, sQ, c.wr0, sK, key0, nm, mp, c.pos0, c.pos1,
                                          c.scale_log2, c.lane);
                warp_pv<HEAD_DIM>(st, P, sV, c.lane);
            }
            __syncthreads();
        }
    } else {
        if (c.t_begin <= c.t_end) {
            rows.fetch(kv, c.t_begin, c.tid);
            rows.offsets(kv, mp, c.t_begin, c.tid);
            rows.issue(sK, k_base, c.tid);
        }
        cp_async_commit();
        for (int t = c.t_begin; t <= c.t_end; ++t) {
            const int key0 = t * KV_TILE;
            const bool active = t >= c.mine.lo && t <= c.mine.hi;
            uint32_t P[2][4];
            cp_async_wait_all();  // K tile t (and Q) landed
            __syncthreads();      // ... for every thread; every warp is done with V tile t - 1
            rows.issue(sV, v_base, c.tid);  // offsets of tile t, computed with K[t]
            cp_async_commit();
            if (t < c.t_end) rows.fetch(kv, t + 1, c.tid);
            if (active) {
                const bool nm = tile_needs_mask(mp, c.row0 + c.wr0, t);
                warp_qk_softmax<HEAD_DIM>(st, P, sQ, c.wr0, sK, key0, nm, mp, c.pos0, c.pos1,
                                          c.scale_log2, c.lane);
            }
            cp_async_wait_all();  // V tile t landed
            __syncthreads();      // ... for every thread; every warp is done with K tile t
            if (t < c.t_end) {
                rows.offsets(kv, mp, t + 1, c.tid);
                rows.issue(sK, k_base, c.tid);
                cp_async_commit();
            }
            if (active) warp_pv<HEAD_DIM>(st, P, sV, c.lane);
        }
    }
    cp_async_wait_all();  // Q copies are complete even when the CTA had no tile
    __syncthreads();

    if (c.row0 + c.wr0 < mp.q_len) {
        auto o_row = [&](int r) { return o_base + static_cast<int64_t>(r) * q_stride; };
        warp_store<HEAD_DIM>(st, sQ, c.wr0, c.row0 + c.wr0, mp.q_len, o_row, c.lane);
    }
}

template <int HEAD_DIM, int NWARPS, int MODE, typename KV>
__device__ __forceinline__ void run_cta(const __nv_bfloat16* q_base, int64_t q_stride,
                                        __nv_bfloat16* o_base, const __nv_bfloat16* k_base,
                                        const __nv_bfloat16* v_base, const KV& kv,
                                        const MaskParams& mp, int q_block, float inv_sqrt_d) {
    if constexpr (MODE == WGMMA_PIPELINED) {
        attn_cta_wgmma<HEAD_DIM, NWARPS>(q_base, q_stride, o_base, k_base, v_base, kv, mp, q_block,
                                         inv_sqrt_d);
    } else {
        attn_cta<HEAD_DIM, NWARPS, MODE>(q_base, q_stride, o_base, k_base, v_base, kv, mp, q_block,
                                         inv_sqrt_d);
    }
}

// Entry points used by the kernels.
template <int HEAD_DIM, int NWARPS, int MODE>
__device__ __forceinline__ void attn_paged_cta(const __nv_bfloat16* q, const __nv_bfloat16* k_cache,
                                               const __nv_bfloat16* v_cache, __nv_bfloat16* output,
                                               const int32_t* block_table, uint32_t q_len,
                                               uint32_t kv_len, uint32_t q_offset,
                                               uint32_t num_q_heads, uint32_t num_kv_heads,
                                               uint32_t cache_block_size, uint32_t causal,
                                               uint32_t sliding_window, float inv_sqrt_d) {
    const int head = blockIdx.x;
    // Heaviest (causal) query blocks first: the arithmetic does not depend on the order.
    const int q_block = gridDim.y - 1 - blockIdx.y;
    const int kv_head = head / static_cast<int>(num_q_heads / num_kv_heads);
    MaskParams mp;
    mp.kv_len = static_cast<int>(kv_len);
    mp.q_len = static_cast<int>(q_len);
    mp.q_offset = static_cast<int>(q_offset);
    mp.causal = causal ? 1 : 0;
    mp.window = static_cast<int>(min(sliding_window, 0x40000000u));
    const int64_t q_stride = static_cast<int64_t>(num_q_heads) * HEAD_DIM;
    PagedKV kv;
    kv.block_table = block_table;
    kv.block_size.init(cache_block_size);
    kv.kv_len = mp.kv_len;
    kv.stride = static_cast<int64_t>(num_kv_heads) * HEAD_DIM;
    const int64_t hoff = static_cast<int64_t>(head) * HEAD_DIM;
    const int64_t kvoff = static_cast<int64_t>(kv_head) * HEAD_DIM;
    run_cta<HEAD_DIM, NWARPS, MODE>(q + hoff, q_stride, output + hoff, k_cache + kvoff,
                                     v_cache + kvoff, kv, mp, q_block, inv_sqrt_d);
}

template <int HEAD_DIM, int NWARPS, int MODE>
__device__ __forceinline__ void attn_contig_cta(const __nv_bfloat16* q, const __nv_bfloat16* k,
                                                const __nv_bfloat16* v, __nv_bfloat16* output,
                                                uint32_t seq_len, uint32_t num_q_heads,
                                                uint32_t num_kv_heads, uint32_t causal,
                                                uint32_t sliding_window, float inv_sqrt_d) {
    const int head = blockIdx.x;
    const int q_block = gridDim.y - 1 - blockIdx.y;
    const int64_t b = blockIdx.z;
    const int kv_head = head / static_cast<int>(num_q_heads / num_kv_heads);
    MaskParams mp;
    mp.kv_len = static_cast<int>(seq_len);
    mp.q_len = static_cast<int>(seq_len);
    mp.q_offset = 0;
    mp.causal = causal ? 1 : 0;
    mp.window = static_cast<int>(min(sliding_window, 0x40000000u));
    const int64_t q_stride = static_cast<int64_t>(num_q_heads) * HEAD_DIM;
    ContigKV kv;
    kv.stride = static_cast<int64_t>(num_kv_heads) * HEAD_DIM;
    const int64_t q_base = (b * seq_len * num_q_heads + head) * HEAD_DIM;
    const int64_t kv_base = (b * seq_len * num_kv_heads + kv_head) * HEAD_DIM;
    run_cta<HEAD_DIM, NWARPS, MODE>(q + q_base, q_stride, output + q_base, k + kv_base,
                                     v + kv_base, kv, mp, q_block, inv_sqrt_d);
}

}  // namespace attn_detail
