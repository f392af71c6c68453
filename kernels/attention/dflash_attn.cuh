// Drafter (DFlash) attention over a paged KV cache, head_dim 128, BF16 or FP8 E4M3 cache.
//
// CTA shape: 4 warps x 16 rows = 64 "flattened" rows of one KV head. With group = hq / hkv,
// flattened row m (0 <= m < q_rows * group) is query row m / group of q head
// kvh * group + m % group, so one CTA holds every q head that shares kv head kvh and K / V
// are read once per kv head (per split). Grid: [splits, hkv * mblocks, 1] with
// mblocks = ceil(q_rows * group / 64).
//
// Per 32-key tile: S = Q K^T (bf16 x bf16 -> f32, f16 x f16 for an FP8 cache; Q fragments stay
// in registers for the whole kernel), masking, online softmax in the exp2 domain, P rounded to
// bf16 (f16), O += P V. A row's
// reference max (the exponent P and its sum are taken against) moves only when a tile's max passes
// it by more than LAZY_MAX (so P < 2^8 and most tiles leave the accumulators alone). The products
// are per-warp mma.sync m16n8k16 fed by ldmatrix, or on sm_90a (hopper) the warpgroup's wgmma
// (m64n32k16 and m64n128k16, A = Q / P from registers in the same fragments, K / V read by the
// tensor cores through descriptors; PV left running into the next tile): the same products in the
// same order, so both give the same bits (tests/gpu/test_attn_dflash_mma_path.py builds the
// mma.sync path for sm_90 and compares). K / V tiles (16-bit tiles in kcommon::BlockSwizzle
// layout, the one wgmma's descriptors read) arrive with 16-byte cp.async copies through a
// STAGES-deep ring of shared-memory slots (the block-table entries of the first tiles loaded
// together, later ones fetched one tile ahead). An FP8 tile is copied raw, then converted
// cooperatively (E4M3 -> f16, exact, one cvt a pair) into one of two f16 tiles that the products
// read; Q goes to f16 with a power-of-two scale per row (see attn_cta), k_scale is folded into the
// softmax scale and v_scale into the final normalisation. (The earlier bf16 products took four
// integer and bf16 instructions a pair to convert: on the H200 at kv_len 32768 the FP8 tile loop
// issued 1.56x the bf16 one's instructions. Converting K instead in integer arithmetic to f16
// times 2^-8 (three instructions a pair on the integer pipes, the 2^8 folded into the row's
// scale), so that K's and V's conversions use different pipes, was measured and not taken (its
// tests passed): 44.5 -> 45.9 us at kv_len 32768, unchanged at 1024 and 8192.)
// Converting while QK^T runs was measured and not taken either (its tests passed): each thread
// converting the chunks it copied itself (no barrier between its cp.async wait and the
// conversion), the next tile's K and this tile's V between QK^T's commit and its wait, so that
// the tile loop has one barrier a tile instead of two: H100, benchmarks/attn_dflash_ablation.cu's
// full kernel at kv_len 8192 / 32768, 22.4 / 45.6 us shipped against 23.1 / 48.9 us.
//
// Masks: query row i sits at position pos = qpos0 + i; key k (0 <= k < kv_len) is visible
// when (causal == 0 || k <= pos) and (window == 0 || k > pos - window). A row with no visible
// key is written as zeros.
//
// Chunks: a CTA's span is the keys some row of its row block can see (masks above), from the first
// 32-key tile holding one of them: keys [B, E) with B = TILE * floor(lo / TILE), lo the window's
// first visible key for the block's first row (0 without a window) and E = kv_len (causal: at most
// the block's last position + 1). The span is cut into chunks of C = chunk_keys(E - B) keys, at
// most MAX_CHUNKS of them: bf16, SPLIT_KEYS doubled while more would be needed (128 up to 5120
// keys, 256 up to 10240, ...); fp8, the fewest whole 32-key tiles, at least SPLIT_KEYS (128 up to
// 5120 keys, 832 at 32768): a function of kv_len, the masks and the row block's positions alone,
// the same in every kernel. A sliding window of 2048 keys is cut into 128-key chunks whatever
// kv_len (chunks from key 0 left most splits without a visible key and gave the others up to 26
// tiles each at kv_len 32768; H100, split kernel, 16 query rows, hq 32, hkv 8, window 2048, chunks
// from key 0 -> from the span: kv_len 8208 bf16 19.5 -> 16.2 us, fp8 20.4 -> 17.1; 32784 bf16 41.6
// -> 15.2, fp8 43.0 -> 16.2; without a window the same bits and times). Each chunk gets its own
// online-softmax state, and the chunks' states are folded in chunk order with merge_weights / lin2.
// Measured for the bf16 cache and not taken (H200, 16 query rows, hq 32, hkv 8, A/B/A in one run,
// split kernel us at kv_len 8208 / 16384 / 32768, shipped 22.9 / 30.8 / 46.8): the fp8 rule (up to
// 40 chunks of whole tiles) 22.9 / 32.1 / 48.6; the same with at most 24 chunks, 23.8 / 34.9 /
// 55.7.
//
// Split-KV: split s covers chunk s, keys [B + s * C, B + (s + 1) * C); the split kernels run in
// clusters of CLUSTER CTAs along x; the first nsplit = ceil((E - B) / (C * CLUSTER)) * CLUSTER CTAs
// (at least one cluster, at most MAX_GROUPS) work, the grid's further clusters (it is sized for
// SPLIT_KEYS-key splits, from kv_len or, for the indirect kernels, from max_kv_len) return at once.
// Each working CTA sends its partial state (per row: raw max m, sum l, unnormalised accumulator)
// through distributed shared memory to the CTAs that fold it: row slice j (rows 8j .. 8j + 7) to
// cluster rank j, which after the cluster barrier folds the cluster's states of its slice in split
// order from its own shared memory (a state with m = -inf for a row is skipped for that row). With
// one cluster (E - B <= CLUSTER * C) that is the output. Otherwise it is the cluster's group state:
// it goes to the workspace, CTA rank j bumps the i32 counter of row slice j of its (kv head,
// m-block) with atomicInc (which takes it back to zero on the last arrival: the counters are zero
// before the first launch and after every launch), and the CTA that arrives last folds that slice
// of the group states in cluster order with the same arithmetic. The result does not depend on
// which CTA finishes last, and CLUSTER CTAs share each fold. Splits without any visible key send
// only m = -inf, so the rounding to whole clusters gives the same bits. The unsplit kernels run the
// same chunks one after the other and fold them in chunk order with the same arithmetic (running
// accumulator in shared memory, TOTALS_BYTES past the tile buffers): up to CLUSTER chunks (one
// group) split and unsplit outputs are identical bits; beyond, the split kernels' two-level fold
// rounds differently (a few f32 ulp before the bf16 output). The indirect kernels equal the direct
// ones bit for bit: whenever the two chains can pick different members (kv_len < 512, where the
// split members begin), the keys fit one group.
//
// Floating-point operations outside the mma instructions use explicit rounding intrinsics so
// the direct and indirect kernels (same template) produce identical bits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cstdint>

#include "../common/bf16x2.cuh"
#include "../common/e4m3.cuh"
#include "../common/pdl.cuh"
#include "../common/ptx.cuh"
#include "../common/wgmma.cuh"

namespace dflash_attn {

constexpr int D = 128;          // head_dim
constexpr int TILE = 32;        // keys per tile
constexpr int NWARPS = 4;
constexpr int NTHREADS = NWARPS * 32;
constexpr int ROWS = NWARPS * 16;  // flattened rows per CTA
constexpr int STAGES = 4;          // cp.async ring depth (tiles)
// Deeper rings measured slower (H100, benchmarks/attn_dflash_ablation.cu's full kernel at kv_len
// 8192 / 32768; shipped: bf16 24.1 / 58.1 us, fp8 22.4 / 45.8): 5 tiles, bf16 29.3 / 74.5 and fp8
// 23.4 / 47.2; 6 tiles, bf16 29.5 / 74.2 and fp8 32.2 / 67.9. A bf16 CTA then takes 81 KB or more
// of shared memory, and two CTAs fit an SM instead of three (fp8: at 6 tiles).
constexpr int BF16_TILE = TILE * D * 2;  // bytes of one bf16 K (or V) tile
constexpr int FP8_TILE = TILE * D;       // bytes of one fp8 K (or V) tile
// Dynamic shared memory: bf16, STAGES slots of K + V; fp8, STAGES raw slots of K + V plus two
// converted f16 K + V tiles.
constexpr int SMEM_BF16 = STAGES * 2 * BF16_TILE;
constexpr int SMEM_FP8 = STAGES * 2 * FP8_TILE + 2 * 2 * BF16_TILE;
constexpr int TOTALS_BYTES = NWARPS * 16 * D * 4;  // unsplit: running accumulator
constexpr float LAZY_MAX = 8.f;  // exp2 units a row's max may rise before the state is rescaled
constexpr int MAX_CHUNKS = 40;  // chunks (splits) per row block above which the chunk doubles
constexpr int WS_ROW = D + 2;  // workspace floats per row and group (accumulator, then m / l)
constexpr int CLUSTER = 8;     // split kernels: CTAs per cluster = row slices of the merge
constexpr int SLICE = ROWS / CLUSTER;  // rows a CTA of the cluster folds
// Split kernels: the fold's buffers. Once every CTA of the cluster is done with its ring, the
// ring holds at [0, 32 KB) the accumulators the cluster's CTAs send this one (rank k's rows of
// this CTA's slice at [k][row]) and at [32 KB, 64 KB) this CTA's own accumulators on their way
// out; their (m, l) pairs live past the ring (FOLD_ML_BYTES).
constexpr int FOLD_ACC_BYTES = ROWS * D * 4;
constexpr int FOLD_ML_BYTES = 2 * ROWS * 8;
constexpr int MAX_GROUPS = MAX_CHUNKS / CLUSTER;  // clusters (group states) a row block at most
static_assert(ROWS % CLUSTER == 0 && MAX_CHUNKS % CLUSTER == 0 && SLICE == 8 &&
                  2 * FOLD_ACC_BYTES <= SMEM_BF16 && 2 * FOLD_ACC_BYTES <= SMEM_FP8,
              "merge shape");

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
using kcommon::cp_async16_zfill_at;
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait_groups() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
// d += A * B on bf16 operands, or on f16 ones with F16.
#define DFLASH_MMA16816(T)                                                                  \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." T "." T ".f32 "                    \
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"          \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                            \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
template <bool F16 = false>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
    if constexpr (F16) {
        DFLASH_MMA16816("f16");
    } else {
        DFLASH_MMA16816("bf16");
    }
}
#undef DFLASH_MMA16816
using kcommon::cluster_rank;
using kcommon::cluster_sync;
__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// bf16 tile (TILE rows of 128 values): kcommon::BlockSwizzle, two 64-column blocks of TILE rows x
// 128 bytes, 16-byte chunk c of row r of a block at chunk c ^ (r & 7); the layout wgmma's
// 128-byte-swizzle descriptors read, and conflict-free for ldmatrix.
using KvLayout = kcommon::BlockSwizzle<TILE>;
__device__ __forceinline__ uint32_t swz(int row, int chunk) { return KvLayout::offset(row, chunk); }
// raw fp8 tile: rows of 128 bytes, chunk c of row r at chunk c ^ (r & 7).
__host__ __device__ constexpr uint32_t swz8(int row, int chunk) {
    return static_cast<uint32_t>(row * D + ((chunk ^ (row & 7)) << 4));
}

// FP8 tiles convert to f16 with one instruction a pair (kcommon/e4m3.cuh; its bf16 conversion
// takes four).
using kcommon::e4m3x4_to_f16x4;
using kcommon::pack_f16x2;

// Chunk merge, the same arithmetic in the unsplit kernels (chunk by chunk, in registers and
// shared memory) and in the split merge (split by split, from the workspace): with running max
// Mt and a chunk max mc (!= -inf), Mt' = max(Mt, mc), wa = 2^((Mt - Mt') s), wb = 2^((mc - Mt') s),
// and every running value x becomes x * wa + y * wb (y the chunk's value).
__device__ __forceinline__ void merge_weights(float& Mt, float mc, float sl2, float& wa, float& wb) {
    const float Mn = fmaxf(Mt, mc);
    const float Mns = __fmul_rn(Mn, sl2);
    wa = Mt == -INFINITY ? 0.f : ex2(__fsub_rn(__fmul_rn(Mt, sl2), Mns));
    wb = ex2(__fsub_rn(__fmul_rn(mc, sl2), Mns));
    Mt = Mn;
}
__device__ __forceinline__ float lin2(float x, float wa, float y, float wb) {
    return __fadd_rn(__fmul_rn(x, wa), __fmul_rn(y, wb));
}
__device__ __forceinline__ float quad_sum(float v) {
    v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

// What a split CTA does. The kernels do everything (Work::full); the other values exist for
// benchmarks/attn_dflash_ablation.cu, which times the split kernel with part of its work left
// out to show where the time goes: no_fold (partial states staged, sent to the CTAs that fold
// them and counted; neither fold runs), no_partials (no partial states and no folds; the cluster
// barriers and the counters kept; the products and softmax still run), loads (no_partials,
// and the tiles' products and softmax left out too: the K / V ring, block-table reads, barriers
// and the FP8 conversion kept) and reads (loads without the FP8 conversion; for a bf16 cache the
// same as loads).
enum class Work { full, no_fold, no_partials, loads, reads };

struct Params {
    const __nv_bfloat16* q;
    const void* k;  // bf16 or fp8 cache [num_blocks, block_size, hkv, 128]
    const void* v;
    __nv_bfloat16* out;
    const int32_t* block_table;
    int q_rows, kv_len, qpos0, hq, hkv, block_size, causal, window;
    float scale_log2;  // softmax scale (times k_scale for fp8) times log2(e)
    float v_scale;     // 1 for bf16
    float* ws;         // split workspace
    int32_t* counters; // split counters, one per (kv head, m-block), zero at launch
};

// Keys per chunk (and per split) for a span of that many keys (kv_len without masks; the numbers
// below are of unmasked spans). BF16 cache: SPLIT_KEYS, doubled while more than MAX_CHUNKS chunks
// would cover the span. FP8 cache: the fewest whole tiles, at least SPLIT_KEYS keys, that cover
// the span in at most MAX_CHUNKS chunks, so that long caches use every CTA of the
// grid (MAX_GROUPS clusters a row block; the doubling leaves 8 of 40 idle at 8192 < kv_len <=
// 10240, 16384 < kv_len <= 20480, ...). Most of the FP8 kernels' time past their loads is each
// CTA's tile loop (products, softmax), which more CTAs an SM hide better: at kv_len 32768, 48.2
// us against 55.2 on the H200; the bf16 kernels, near their loads' time, measured 3% slower cut
// that way. Spreading the bf16 keys over one cluster fewer when the last would hold at most two
// chunks' keys (kv_len 8208, the drafter's 8192 context rows and its block: 4 clusters of
// 288-key chunks instead of 5 of 256) measured no faster (H200, split chain 23.5 -> 23.3 us;
// 8192, 8704 and 16400 unchanged).
// One cluster of 16 CTAs a kv head (non-portable size; 128 CTAs, one an SM, the fold wholly in
// distributed shared memory, no workspace; 8-tile ring), against the shipped kernel (H100,
// kv_len 1024 / 8192 / 32768): bf16 15.6 / 34.0 / 93.5 us against 9.7 / 24.4 / 57.3, fp8
// 11.7 / 24.5 / 65.8 against 10.4 / 22.7 / 46.7: cudaOccupancyMaxActiveClusters placed 7 (bf16)
// or 14 (fp8) such clusters at once, fewer than the 8 kv heads need.
// Other chunk counts for the FP8 cache (H100, the ablation's full kernel at kv_len 8192 / 32768,
// shipped MAX_CHUNKS 40: 22.4 / 45.6 us): 32 chunks, 22.1 / 51.1 us; 48 chunks (6 clusters a row
// block, 48 clusters of 8 CTAs in all), 30.3 / 62.5 us: cudaOccupancyMaxActiveClusters gives 45
// clusters of the split kernels at once on the H100 (3 CTAs an SM), fewer than 48.
// A function of the span's length alone for each cache type, so every kernel of a type (split
// or not, direct or indirect, whatever its grid) cuts the keys the same way.
template <int SPLIT_KEYS, bool FP8>
__device__ __forceinline__ int chunk_keys(int span) {
    if constexpr (FP8) {
        const int tiles = (span + TILE * MAX_CHUNKS - 1) / (TILE * MAX_CHUNKS);
        return max(SPLIT_KEYS, tiles * TILE);
    } else {
        int keys = SPLIT_KEYS;
        while ((span + MAX_CHUNKS - 1) / MAX_CHUNKS > keys) keys <<= 1;
        return keys;
    }
}

template <bool FP8, bool SPLIT, int SPLIT_KEYS, Work W = Work::full>
__device__ __forceinline__ void attn_cta(const Params& p) {
    static_assert(SPLIT_KEYS % TILE == 0, "split length");
    constexpr bool kCompute = W != Work::loads && W != Work::reads;  // the tiles' products, softmax
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, c = lane & 3;
    const int group = p.hq / p.hkv;
    const int mblocks = static_cast<int>(gridDim.y) / p.hkv;
    const int kvh = blockIdx.y / mblocks, mb = blockIdx.y % mblocks;
    const int M = p.q_rows * group;
    const int cta_m0 = mb * ROWS;

    // ---- key ranges of the CTA
    const int m_last = min(cta_m0 + ROWS, M) - 1;
    const int p_lo = p.qpos0 + cta_m0 / group, p_hi = p.qpos0 + m_last / group;
    int k_hi = p.kv_len - 1, k_lo = 0;  // keys visible to some row
    int a_hi = p.kv_len - 1, a_lo = 0;  // keys visible to every row
    if (p.causal) {
        k_hi = min(k_hi, p_hi);
        a_hi = min(a_hi, p_lo);
    }
    if (p.window) {
        k_lo = max(0, p_lo - p.window + 1);
        a_lo = max(0, p_hi - p.window + 1);
    }
    // The span: keys [span0, k_hi] from the tile of the first visible one, cut into chunks.
    const int span0 = k_lo / TILE * TILE;
    const int span = max(1, k_hi + 1 - span0);
    const int chunk = chunk_keys<SPLIT_KEYS, FP8>(span);
    // Split kernels: the splits that cover the span, in whole clusters (at least one); the grid
    // may hold more (it is sized for SPLIT_KEYS-key splits of kv_len, or of a bound of kv_len),
    // and their clusters have nothing to do.
    const int nsplit = SPLIT ? max(1, (span + chunk * CLUSTER - 1) / (chunk * CLUSTER)) * CLUSTER : 1;
    if (SPLIT && static_cast<int>(blockIdx.x) >= nsplit) return;
    extern __shared__ __align__(1024) unsigned char smem[];
    const uint32_t sbase = smem_u32(smem);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if (sbase & 1023u) __trap();  // the 128-byte swizzle is anchored at 1024-byte boundaries
#endif

    // ---- rows of this lane
    const int m0 = cta_m0 + warp * 16 + g, m1 = m0 + 8;
    const bool v0 = m0 < M, v1 = m1 < M;
    auto row_off = [&](int m) -> int64_t {
        const int i = m / group;
        const int h = kvh * group + m % group;
        return (static_cast<int64_t>(i) * p.hq + h) * D;
    };
    const int64_t off0 = v0 ? row_off(m0) : 0, off1 = v1 ? row_off(m1) : 0;
    const int pos0 = p.qpos0 + m0 / group, pos1 = p.qpos0 + m1 / group;

    if (SPLIT) {
        k_lo = max(k_lo, span0 + static_cast<int>(blockIdx.x) * chunk);
        k_hi = min(k_hi, span0 + static_cast<int>(blockIdx.x) * chunk + chunk - 1);
    }
    const int t_begin = k_lo <= k_hi ? k_lo / TILE : 1;
    const int t_end = k_lo <= k_hi ? k_hi / TILE : 0;

    // ---- K / V loads: thread rows tid / 8 and tid / 8 + 16 of a tile; bf16: chunks tid % 8
    // and tid % 8 + 8 of 16; fp8: chunk tid % 8 of 8.
    const int lrow = tid >> 3, lchunk = tid & 7;
    const int64_t kv_stride = static_cast<int64_t>(p.hkv) * D;
    // Block of key k: k >> bs_shift and offset k & (block_size - 1) when block_size is a power of
    // two (the cache layouts in use), a division otherwise.
    const int bs_shift = (p.block_size & (p.block_size - 1)) == 0 ? __ffs(p.block_size) - 1 : -1;
    // Next tile to look up, rows lrow and lrow + 16: block-table entry and offset in the block
    // (of the key clamped to kv_len - 1, the same as the key's own whenever it is loaded).
    int nblk[2], nrem[2];
    auto table_entry = [&](int t, int i, int& rem) -> int {
        const int key = min(t * TILE + lrow + 16 * i, p.kv_len - 1);
        const int b = bs_shift >= 0 ? key >> bs_shift : key / p.block_size;
        rem = key - b * p.block_size;
        return __ldg(p.block_table + b);
    };
    auto lookup = [&](int t) {
#pragma unroll
        for (int i = 0; i < 2; ++i) nblk[i] = table_entry(t, i, nrem[i]);
    };
    // Prologue: the block-table entries of the first STAGES + 1 tiles, all loads in flight
    // together (issue() consumes them through use_pre()).
    int pre[STAGES + 1][2], pre_rem[STAGES + 1][2];
    auto lookup_prologue = [&]() {
#pragma unroll
        for (int k = 0; k <= STAGES; ++k) {
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                pre_rem[k][i] = 0;
                pre[k][i] = t_begin + k <= t_end ? table_entry(t_begin + k, i, pre_rem[k][i]) : 0;
            }
        }
    };
    auto use_pre = [&](int k) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            nblk[i] = pre[k][i];
            nrem[i] = pre_rem[k][i];
        }
    };
    // A tile's copies in two steps: prepare(t) turns the looked-up entries into the element
    // offsets of rows lrow and lrow + 16 (K and V share them), launch(slot) issues the cp.async
    // copies. The loops prepare the next tile after the current one's PV is issued, so that the
    // copies issued between QK^T and the softmax are a few instructions.
    // Byte offsets: the row's, plus the kv head's and the thread's first 16-byte chunk (bf16:
    // chunk lchunk; chunk lchunk + 8 is 128 bytes on).
    constexpr int EB = FP8 ? 1 : 2;  // bytes per cache element
    const int64_t kv_stride_b = kv_stride * EB;
    const int64_t head_b = static_cast<int64_t>(kvh) * D * EB + lchunk * 16;
    int64_t poff[2];
    bool pok[2];
    auto prepare = [&](int t) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            pok[i] = t * TILE + lrow + 16 * i < p.kv_len;
            const int64_t slot_row = static_cast<int64_t>(nblk[i]) * p.block_size + nrem[i];
            poff[i] = pok[i] ? slot_row * kv_stride_b + head_b : 0;
        }
    };
    // The thread's chunks of a slot sit at fixed distances from its first: row lrow + 16 is 16
    // rows (2048 bytes) on in both layouts ((r + 16) & 7 == r & 7), and a bf16 tile's chunk
    // lchunk + 8 one 64-column block on; V is one tile past K.
    const uint32_t soff = FP8 ? swz8(lrow, lchunk) : swz(lrow, lchunk);
    auto launch = [&](int slot) {
        const uint32_t s0 = sbase + slot * 2 * (FP8 ? FP8_TILE : BF16_TILE) + soff;
        const char* k0 = static_cast<const char*>(p.k);
        const char* v0 = static_cast<const char*>(p.v);
        constexpr uint32_t ROW16 = 16 * 128;
        if constexpr (FP8) {
            static_assert(swz8(16, 3) == swz8(0, 3) + ROW16, "the raw tile's rows");
            cp_async16_zfill_at<0, 0>(s0, k0 + poff[0], pok[0]);
            cp_async16_zfill_at<FP8_TILE, 0>(s0, v0 + poff[0], pok[0]);
            cp_async16_zfill_at<ROW16, 0>(s0, k0 + poff[1], pok[1]);
            cp_async16_zfill_at<FP8_TILE + ROW16, 0>(s0, v0 + poff[1], pok[1]);
        } else {
            constexpr uint32_t B = KvLayout::BLOCK;
            static_assert(KvLayout::offset(16, 3) == KvLayout::offset(0, 3) + ROW16 &&
                              KvLayout::offset(5, 11) == KvLayout::offset(5, 3) + B,
                          "the bf16 tile's rows and 64-column blocks");
            const char* kb0 = k0 + poff[0];
            const char* vb0 = v0 + poff[0];
            const char* kb1 = k0 + poff[1];
            const char* vb1 = v0 + poff[1];
            cp_async16_zfill_at<0, 0>(s0, kb0, pok[0]);
            cp_async16_zfill_at<B, 128>(s0, kb0, pok[0]);
            cp_async16_zfill_at<BF16_TILE, 0>(s0, vb0, pok[0]);
            cp_async16_zfill_at<BF16_TILE + B, 128>(s0, vb0, pok[0]);
            cp_async16_zfill_at<ROW16, 0>(s0, kb1, pok[1]);
            cp_async16_zfill_at<ROW16 + B, 128>(s0, kb1, pok[1]);
            cp_async16_zfill_at<BF16_TILE + ROW16, 0>(s0, vb1, pok[1]);
            cp_async16_zfill_at<BF16_TILE + ROW16 + B, 128>(s0, vb1, pok[1]);
        }
    };
    auto issue = [&](int t, int slot) {
        prepare(t);
        launch(slot);
    };

    // ---- Q fragments (A operand, 8 k16 steps), straight from global memory
    uint32_t qa[8][4];
    {
        const uint32_t* q0 = reinterpret_cast<const uint32_t*>(p.q + off0);
        const uint32_t* q1 = reinterpret_cast<const uint32_t*>(p.q + off1);
#pragma unroll
        for (int kk = 0; kk < 8; ++kk) {
            qa[kk][0] = v0 ? __ldg(q0 + kk * 8 + c) : 0u;
            qa[kk][1] = v1 ? __ldg(q1 + kk * 8 + c) : 0u;
            qa[kk][2] = v0 ? __ldg(q0 + kk * 8 + 4 + c) : 0u;
            qa[kk][3] = v1 ? __ldg(q1 + kk * 8 + 4 + c) : 0u;
        }
    }
    // Per row (m0, m1): the softmax scale (times log2 e) of the scores the products give, and the
    // factor that takes the row's max from those scores to true ones.
    float rsl2[2] = {p.scale_log2, p.scale_log2};
    float qmul[2] = {1.f, 1.f};
    auto q_to_f16 = [&] {
        // FP8 caches multiply in f16: E4M3 K / V values are f16 numbers (one conversion
        // instruction a pair), and Q goes to f16 times 2^-qe, qe chosen per row so that its
        // largest |q| lands in [2^14, 2^15): every bf16 value of the row down to 2^-29 of that
        // largest one converts exactly (f16 normals carry more significand bits than bf16), the
        // few smaller ones to the nearest f16. The scores come out times 2^-qe; the row's scale
        // rsl2 = scale_log2 * 2^qe undoes it exactly, and the row's max goes back to true units
        // (times 2^qe, exact) wherever a chunk's state leaves the tile loop, so the folds and
        // everything after them are those of the bf16 kernels.
        float amax[2] = {0.f, 0.f};
#pragma unroll
        for (int kk = 0; kk < 8; ++kk) {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const uint32_t w = qa[kk][j];
                amax[j & 1] = fmaxf(amax[j & 1], fmaxf(fabsf(kcommon::bf16_lo(w)), fabsf(kcommon::bf16_hi(w))));
            }
        }
        float qinv[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            amax[h] = fmaxf(amax[h], __shfl_xor_sync(0xffffffffu, amax[h], 1));
            amax[h] = fmaxf(amax[h], __shfl_xor_sync(0xffffffffu, amax[h], 2));
            const int ex = static_cast<int>((__float_as_uint(amax[h]) >> 23) & 0xffu);  // 0: zero row
            const int qe = ex == 0 ? 0 : max(-126, ex - 127 - 14);
            qmul[h] = __uint_as_float(static_cast<uint32_t>(127 + qe) << 23);
            qinv[h] = __uint_as_float(static_cast<uint32_t>(127 - qe) << 23);
            rsl2[h] = __fmul_rn(p.scale_log2, qmul[h]);
        }
#pragma unroll
        for (int kk = 0; kk < 8; ++kk) {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const uint32_t w = qa[kk][j];
                const float f = qinv[j & 1];
                qa[kk][j] = pack_f16x2(__fmul_rn(kcommon::bf16_lo(w), f), __fmul_rn(kcommon::bf16_hi(w), f));
            }
        }
    };
    float o[16][4];
#pragma unroll
    for (int n = 0; n < 16; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float mrow[2] = {-INFINITY, -INFINITY};
    float lrow_sum[2] = {0.f, 0.f};
    const float sl2 = p.scale_log2;
    [[maybe_unused]] const int mi = lane >> 3;  // ldmatrix: which 8x8 matrix this lane addresses

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    // wgmma descriptors. K tile (B of QK^T, K-major): head_dim step kk (16 values) sits in
    // 64-column block kk / 4 at byte 32 * (kk % 4) of the 128-byte row, 8-row groups 1024 bytes
    // apart. V tile (B of PV, MN-major): the 16 keys of step kk start at row 16 * kk, 8-key
    // groups 1024 bytes apart, 64-column blocks KvLayout::BLOCK bytes apart. A byte offset added
    // to a descriptor goes, in 16-byte units, into its start-address field.
    auto desc_k = [](uint32_t sK, int kk) {
        return kcommon::smem_desc_sw128(sK, 16, 1024) +
               static_cast<uint64_t>(((kk >> 2) * KvLayout::BLOCK + (kk & 3) * 32) >> 4);
    };
    auto desc_v = [](uint32_t sV, int kk) {
        return kcommon::smem_desc_sw128(sV, KvLayout::BLOCK, 1024) +
               static_cast<uint64_t>((kk * 16 * 128) >> 4);
    };
#endif
    // sm_90a: PV runs on while the next tile's barrier and QK^T are issued; o is read only after
    // a wait that covers it, and the bf16 ring slot PV reads is refilled only after every warp's
    // wait (compute's barrier, then after_qk). pin_o() keeps the compiler from moving reads of o
    // above the wait before it; drain_o() waits.
    auto pin_o = [&] {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#pragma unroll
        for (int n = 0; n < 16; ++n) {
#pragma unroll
            for (int e = 0; e < 4; ++e) kcommon::pin(o[n][e]);
        }
#endif
    };
    auto drain_o = [&] {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
        kcommon::wgmma_wait_all();
        pin_o();
#endif
    };
    // Before the barrier that publishes a bf16 tile: this thread's writes to it (cp.async or
    // st.shared) made visible to the wgmma reads (the async proxy) on sm_90a.
    auto publish_tile = [] {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
        kcommon::fence_proxy_async();
#endif
    };

    // One tile's QK^T, mask, online softmax and PV from bf16 tiles sK / sV: per-warp mma.sync
    // m16n8k16 with ldmatrix, or on sm_90a the warpgroup's wgmma (Q and P from registers, K and
    // V read by the tensor cores through descriptors; the same bf16 products in the same order,
    // so both paths give the same bits).
    // after_qk() runs once QK^T is done (on sm_90a: once every warp's share of the previous
    // tile's PV is too).
    auto compute = [&](uint32_t sK, uint32_t sV, int t, auto&& after_qk, auto&& after_pv) {
        float s[4][4];
#pragma unroll
        for (int n = 0; n < 4; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
        kcommon::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 8; ++kk) kcommon::wgmma_m64n32k16_rs<FP8>(s, qa[kk], desc_k(sK, kk));
        kcommon::wgmma_commit();
        kcommon::wgmma_wait_all();  // also the previous tile's PV (committed before)
        // A warp's wait covers its own share of the warpgroup's MMAs: the previous tile's V (and,
        // FP8, its converted tile) is free only once every warp is past its wait.
        __syncthreads();
        after_qk();
#pragma unroll
        for (int n = 0; n < 4; ++n) {
#pragma unroll
            for (int e = 0; e < 4; ++e) kcommon::pin(s[n][e]);
        }
        pin_o();
#else
#pragma unroll
        for (int kk = 0; kk < 8; ++kk) {
#pragma unroll
            for (int np = 0; np < 2; ++np) {
                uint32_t b[4];
                ldsm_x4(b, sK + swz(np * 16 + (mi >> 1) * 8 + (lane & 7), kk * 2 + (mi & 1)));
                mma16816<FP8>(s[2 * np], qa[kk], b[0], b[1]);
                mma16816<FP8>(s[2 * np + 1], qa[kk], b[2], b[3]);
            }
        }
        after_qk();
#endif
        const int key0 = t * TILE;
        if (!(key0 >= a_lo && key0 + TILE - 1 <= a_hi)) {
#pragma unroll
            for (int n = 0; n < 4; ++n) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int key = key0 + n * 8 + 2 * c + (e & 1);
                    const int pos = e < 2 ? pos0 : pos1;
                    bool vis = key < p.kv_len;
                    if (p.causal && key > pos) vis = false;
                    if (p.window && key <= pos - p.window) vis = false;
                    if (!vis) s[n][e] = -INFINITY;
                }
            }
        }
        float mx0 = mrow[0], mx1 = mrow[1];
#pragma unroll
        for (int n = 0; n < 4; ++n) {
            mx0 = fmaxf(mx0, fmaxf(s[n][0], s[n][1]));
            mx1 = fmaxf(mx1, fmaxf(s[n][2], s[n][3]));
        }
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        // The row's reference max moves only when the tile's max passes it by more than
        // LAZY_MAX (exp2 units): the exponentials stay below 2^LAZY_MAX, and most tiles need no
        // rescale of the accumulators (al == 1 exactly).
        float ms0, ms1, al0 = 1.f, al1 = 1.f;
        {
            const float old0 = mrow[0] == -INFINITY ? 0.f : __fmul_rn(mrow[0], rsl2[0]);
            const float old1 = mrow[1] == -INFINITY ? 0.f : __fmul_rn(mrow[1], rsl2[1]);
            const float new0 = mx0 == -INFINITY ? 0.f : __fmul_rn(mx0, rsl2[0]);
            const float new1 = mx1 == -INFINITY ? 0.f : __fmul_rn(mx1, rsl2[1]);
            const bool up0 = mx0 != -INFINITY && (mrow[0] == -INFINITY || __fsub_rn(new0, old0) > LAZY_MAX);
            const bool up1 = mx1 != -INFINITY && (mrow[1] == -INFINITY || __fsub_rn(new1, old1) > LAZY_MAX);
            ms0 = up0 ? new0 : old0;
            ms1 = up1 ? new1 : old1;
            if (up0) al0 = mrow[0] == -INFINITY ? 0.f : ex2(__fsub_rn(old0, new0));
            if (up1) al1 = mrow[1] == -INFINITY ? 0.f : ex2(__fsub_rn(old1, new1));
            if (up0) mrow[0] = mx0;
            if (up1) mrow[1] = mx1;
        }
        float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
        for (int n = 0; n < 4; ++n) {
            s[n][0] = ex2(__fmaf_rn(s[n][0], rsl2[0], -ms0));
            s[n][1] = ex2(__fmaf_rn(s[n][1], rsl2[0], -ms0));
            s[n][2] = ex2(__fmaf_rn(s[n][2], rsl2[1], -ms1));
            s[n][3] = ex2(__fmaf_rn(s[n][3], rsl2[1], -ms1));
            sum0 = __fadd_rn(sum0, __fadd_rn(s[n][0], s[n][1]));
            sum1 = __fadd_rn(sum1, __fadd_rn(s[n][2], s[n][3]));
        }
        lrow_sum[0] = __fadd_rn(__fmul_rn(lrow_sum[0], al0), sum0);
        lrow_sum[1] = __fadd_rn(__fmul_rn(lrow_sum[1], al1), sum1);
        if (__any_sync(0xffffffffu, al0 != 1.f || al1 != 1.f)) {
#pragma unroll
            for (int n = 0; n < 16; ++n) {
                o[n][0] = __fmul_rn(o[n][0], al0);
                o[n][1] = __fmul_rn(o[n][1], al0);
                o[n][2] = __fmul_rn(o[n][2], al1);
                o[n][3] = __fmul_rn(o[n][3], al1);
            }
        }
        uint32_t P[2][4];
        auto pack = [](float lo, float hi) { return FP8 ? pack_f16x2(lo, hi) : kcommon::pack_bf16x2(lo, hi); };
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
            P[kk][0] = pack(s[2 * kk][0], s[2 * kk][1]);
            P[kk][1] = pack(s[2 * kk][2], s[2 * kk][3]);
            P[kk][2] = pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            P[kk][3] = pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
        }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
        kcommon::wgmma_fence();
        kcommon::wgmma_m64n128k16_rs_tb<FP8>(o, P[0], desc_v(sV, 0));
        kcommon::wgmma_m64n128k16_rs_tb<FP8>(o, P[1], desc_v(sV, 1));
        kcommon::wgmma_commit();  // awaited by the next tile's QK^T wait, or by drain_o()
#else
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
#pragma unroll
            for (int dn = 0; dn < 8; ++dn) {
                uint32_t b[4];
                ldsm_x4_t(b, sV + swz(kk * 16 + (mi & 1) * 8 + (lane & 7), dn * 2 + (mi >> 1)));
                mma16816<FP8>(o[2 * dn], P[kk], b[0], b[1]);
                mma16816<FP8>(o[2 * dn + 1], P[kk], b[2], b[3]);
            }
        }
#endif
        after_pv();
    };

    // Unsplit: keys are processed in chunks of `chunk` keys (the splits of the split kernels),
    // each with a fresh online-softmax state, folded into running totals (max and sum in
    // registers, the accumulator in shared memory, one float2 per lane and fragment) with
    // merge_weights / lin2 in chunk order, so unsplit and split outputs are the same bits.
    float tot_m[2] = {-INFINITY, -INFINITY};
    float tot_l[2] = {0.f, 0.f};
    float2* tot_acc = reinterpret_cast<float2*>(smem + (FP8 ? SMEM_FP8 : SMEM_BF16)) +
                      warp * (16 * 2 * 32) + lane;
    bool chunk_open = false;
    auto flush_chunk = [&]() {
        if (SPLIT || !chunk_open) return;
        drain_o();
        chunk_open = false;
        const float lc[2] = {quad_sum(lrow_sum[0]), quad_sum(lrow_sum[1])};
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            if (mrow[h] == -INFINITY) continue;
            float wa, wb;
            merge_weights(tot_m[h], __fmul_rn(mrow[h], qmul[h]), sl2, wa, wb);
            tot_l[h] = lin2(tot_l[h], wa, lc[h], wb);
#pragma unroll
            for (int n = 0; n < 16; ++n) {
                float2 t = tot_acc[(n * 2 + h) * 32];
                t.x = lin2(t.x, wa, o[n][2 * h], wb);
                t.y = lin2(t.y, wa, o[n][2 * h + 1], wb);
                tot_acc[(n * 2 + h) * 32] = t;
            }
        }
#pragma unroll
        for (int n = 0; n < 16; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
        mrow[0] = mrow[1] = -INFINITY;
        lrow_sum[0] = lrow_sum[1] = 0.f;
    };
    if (!SPLIT) {
#pragma unroll
        for (int n = 0; n < 32; ++n) tot_acc[n * 32] = make_float2(0.f, 0.f);
    }
    const int chunk_tiles = chunk / TILE, span_tile = span0 / TILE;
    auto after_tile = [&](int t) {
        chunk_open = true;
        if (!SPLIT && (t + 1 - span_tile) % chunk_tiles == 0) flush_chunk();
    };

    if (t_begin <= t_end) {
        if (!FP8) {
            // Ring of STAGES bf16 slots; tile t lives in slot (t - t_begin) % STAGES.
            lookup_prologue();
#pragma unroll
            for (int i = 0; i < STAGES - 1; ++i) {
                if (t_begin + i <= t_end) {
                    use_pre(i);
                    issue(t_begin + i, i);
                }
                commit();
            }
            use_pre(STAGES - 1);
            if (t_begin + STAGES - 1 <= t_end) prepare(t_begin + STAGES - 1);
            use_pre(STAGES);
            for (int t = t_begin; t <= t_end; ++t) {
                const int k = t - t_begin;
                wait_groups<STAGES - 2>();
                publish_tile();
                __syncthreads();  // tile t visible; every warp is done with tile t - 1 but its PV
                // Tile t + STAGES - 1 (prepared) into tile t - 1's slot, once that tile's PV is
                // done; after this tile's PV, tile t + STAGES prepared and t + STAGES + 1 looked up.
                auto refill = [&] {
                    if (t + STAGES - 1 <= t_end) launch((k + STAGES - 1) % STAGES);
                    commit();
                };
                auto next = [&] {
                    if (t + STAGES <= t_end) {
                        prepare(t + STAGES);
                        if (t + STAGES + 1 <= t_end) lookup(t + STAGES + 1);
                    }
                };
                const uint32_t sK = sbase + (k % STAGES) * 2 * BF16_TILE;
                if constexpr (kCompute) {
                    compute(sK, sK + BF16_TILE, t, refill, next);
                } else {
                    refill();
                    next();
                }
                after_tile(t);
            }
        } else {
            // Raw fp8 ring of STAGES slots, converted into f16 buffer (k & 1) each tile.
            const uint32_t sConv = sbase + STAGES * 2 * FP8_TILE;
            lookup_prologue();
#pragma unroll
            for (int i = 0; i < STAGES; ++i) {
                if (t_begin + i <= t_end) {
                    use_pre(i);
                    issue(t_begin + i, i);
                }
                commit();
            }
            use_pre(STAGES);
            if (t_begin + STAGES <= t_end) {
                prepare(t_begin + STAGES);
                if (t_begin + STAGES + 1 <= t_end) lookup(t_begin + STAGES + 1);
            }
            q_to_f16();  // once the first copies are in flight (it waits for Q's loads)
            wait_groups<STAGES - 1>();
            __syncthreads();
            // Conversion: thread converts row lane, d range [warp * 32, warp * 32 + 32).
            for (int t = t_begin; t <= t_end; ++t) {
                const int k = t - t_begin;
                [[maybe_unused]] const uint32_t rK = sbase + (k % STAGES) * 2 * FP8_TILE;
                const uint32_t cK = sConv + (k & 1) * 2 * BF16_TILE;
                if constexpr (W != Work::reads) {
                    // The four 16-byte loads first (K and V, two chunks each), then the
                    // conversions and stores: loads behind the stores wait for them (the
                    // compiler cannot tell the raw and converted tiles apart).
                    uint4 x[2][2];
#pragma unroll
                    for (int kv = 0; kv < 2; ++kv) {
#pragma unroll
                        for (int j = 0; j < 2; ++j) x[kv][j] = kcommon::lds128(rK + kv * FP8_TILE + swz8(lane, warp * 2 + j));
                    }
#pragma unroll
                    for (int kv = 0; kv < 2; ++kv) {
                        const uint32_t dst = cK + kv * BF16_TILE;
#pragma unroll
                        for (int j = 0; j < 2; ++j) {
                            const uint2 y0 = e4m3x4_to_f16x4(x[kv][j].x), y1 = e4m3x4_to_f16x4(x[kv][j].y);
                            const uint2 y2 = e4m3x4_to_f16x4(x[kv][j].z), y3 = e4m3x4_to_f16x4(x[kv][j].w);
                            kcommon::sts128(dst + swz(lane, warp * 4 + 2 * j), y0.x, y0.y, y1.x, y1.y);
                            kcommon::sts128(dst + swz(lane, warp * 4 + 2 * j + 1), y2.x, y2.y, y3.x, y3.y);
                        }
                    }
                }
                wait_groups<STAGES - 2>();
                publish_tile();
                __syncthreads();  // f16 tile visible; raw tile t + 1 landed; raw slot k free
                if (t + STAGES <= t_end) launch(k % STAGES);  // tile t + STAGES, prepared
                commit();
                // (The raw slots are read by the conversion alone: refilled above.) After this
                // tile's PV, tile t + STAGES + 1 prepared and t + STAGES + 2 looked up.
                auto next = [&] {
                    if (t + STAGES + 1 <= t_end) {
                        prepare(t + STAGES + 1);
                        if (t + STAGES + 2 <= t_end) lookup(t + STAGES + 2);
                    }
                };
                if constexpr (kCompute) {
                    compute(cK, cK + BF16_TILE, t, [] {}, next);
                } else {
                    next();
                }
                after_tile(t);
            }
        }
    }
    wait_groups<0>();
    drain_o();
    kcommon::pdl_release();  // the K / V stream is done (the kernel waits in its entry)

    if (!SPLIT) {
        // Fold the last chunk, then normalise: out = acc / L (times v_scale).
        flush_chunk();
        const float inv0 = tot_l[0] > 0.f ? __fdiv_rn(p.v_scale, tot_l[0]) : 0.f;
        const float inv1 = tot_l[1] > 0.f ? __fdiv_rn(p.v_scale, tot_l[1]) : 0.f;
        uint32_t* out0 = reinterpret_cast<uint32_t*>(p.out + off0);
        uint32_t* out1 = reinterpret_cast<uint32_t*>(p.out + off1);
#pragma unroll
        for (int n = 0; n < 16; ++n) {
            const float2 t0 = tot_acc[(n * 2 + 0) * 32];
            const float2 t1 = tot_acc[(n * 2 + 1) * 32];
            if (v0) out0[n * 4 + c] = kcommon::pack_bf16x2(__fmul_rn(t0.x, inv0), __fmul_rn(t0.y, inv0));
            if (v1) out1[n * 4 + c] = kcommon::pack_bf16x2(__fmul_rn(t1.x, inv1), __fmul_rn(t1.y, inv1));
        }
        return;
    }

    // ---- split: the CTA's partial state (its one chunk: raw max m, sum l, unnormalised
    // accumulator per row) goes into the shared memory of the CTAs that fold it: row slice j
    // (rows 8j .. 8j + 7) to cluster rank j, at [this rank][row] of its receive buffers. After
    // the cluster barrier, CTA rank j folds its slice of the cluster's CLUSTER states in rank
    // (= split) order from its own shared memory. With one cluster that fold is the result.
    // With more, it is the cluster's group state: it goes to the workspace, CTA rank j counts in
    // on the counter of row slice j (atomicInc, which takes the counter back to zero on the last
    // arrival), and the last cluster's CTA folds the group states of that slice in cluster
    // order. (The accumulators are staged in this CTA's ring first: stored to another CTA
    // straight from the registers wgmma wrote, the compiler serialises the FP8 kernel's wgmma.)
    const float l0 = quad_sum(lrow_sum[0]), l1 = quad_sum(lrow_sum[1]);
    const int ring = FP8 ? SMEM_FP8 : SMEM_BF16;
    const uint32_t recv_acc = sbase, recv_ml = sbase + ring;  // [CLUSTER][SLICE] rows
    float* part_acc = reinterpret_cast<float*>(smem + FOLD_ACC_BYTES);  // [ROWS][D]
    float2* part_ml = reinterpret_cast<float2*>(smem + ring) + ROWS;    // [ROWS]
    const uint32_t rank = cluster_rank();
    constexpr bool kPartials = W == Work::full || W == Work::no_fold;
    if constexpr (W == Work::no_partials) {
        // ptxas drops MMAs whose results nothing reads, and with them the softmax: the state is
        // folded into one value, stored only under a condition that does not hold here.
        float x = __fadd_rn(mrow[0], __fadd_rn(mrow[1], __fadd_rn(l0, l1)));
#pragma unroll
        for (int n = 0; n < 16; ++n) x = __fadd_rn(x, __fadd_rn(__fadd_rn(o[n][0], o[n][1]), __fadd_rn(o[n][2], o[n][3])));
        if (__float_as_uint(x) == 0x7fbad000u) p.out[tid] = __float2bfloat16_rn(x);
    }
    if (kPartials) {
        const int r0 = warp * 16 + g, r1 = r0 + 8;
        __syncthreads();  // every warp is done with the ring
        // Staged rows: 8-float groups of row r at group ^ (r & 3), so that the four rows a half
        // warp stores to fill all 32 banks.
        if (t_begin <= t_end) {  // a split without keys sends only m = -inf (its rows are skipped)
#pragma unroll
            for (int n = 0; n < 16; ++n) {
                *reinterpret_cast<float2*>(part_acc + r0 * D + ((n ^ (r0 & 3)) * 8) + 2 * c) = make_float2(o[n][0], o[n][1]);
                *reinterpret_cast<float2*>(part_acc + r1 * D + ((n ^ (r1 & 3)) * 8) + 2 * c) = make_float2(o[n][2], o[n][3]);
            }
        }
        if (c == 0) {
            part_ml[r0] = make_float2(__fmul_rn(mrow[0], qmul[0]), l0);  // the max in true units
            part_ml[r1] = make_float2(__fmul_rn(mrow[1], qmul[1]), l1);
        }
    }
    cluster_sync();  // every CTA of the cluster is done with its ring, its state staged
    if (kPartials) {
        // Destinations in turn from this CTA's own rank on (rank, rank + 1, ...): at each step the
        // cluster's CTAs write to different ones. (All starting with rank 0 would queue the
        // cluster's traffic on one SM at a time.)
        constexpr int kVec = D / 4;  // 16-byte pieces a row
        for (int i = tid; i < ROWS * kVec; i += NTHREADS) {
            const int row = (i / kVec + static_cast<int>(rank) * SLICE) % ROWS, v = i % kVec;
            const uint4 x = *reinterpret_cast<const uint4*>(part_acc + row * D + v * 4);
            const int col4 = (v * 4) ^ ((row & 3) << 3);  // the staged piece's column
            const uint32_t dst = recv_acc + ((rank * SLICE + row % SLICE) * D + col4) * 4;
            kcommon::st_cluster_u32x4(kcommon::cluster_map(dst, row / SLICE), x);
        }
        if (tid < ROWS) {
            const int row = (tid + static_cast<int>(rank) * SLICE) % ROWS;
            const float2 x = part_ml[row];
            const uint32_t dst = recv_ml + (rank * SLICE + row % SLICE) * 8;
            kcommon::st_cluster_f32x2(kcommon::cluster_map(dst, row / SLICE), x.x, x.y);
        }
    }
    cluster_sync();  // every partial state of the cluster has landed where it is folded

    // Fold of slice `slice`: thread handles row slice * 8 + tid / 16, columns col .. col + 3 and
    // col + 64 .. col + 67 (col = 4 * (tid % 16): a quarter warp's 16-byte reads fill the 32
    // banks), in split order with merge_weights / lin2 (a state with m = -inf is skipped).
    const int slice = static_cast<int>(rank);
    const int r = slice * SLICE + (tid >> 4);
    const int col = (tid & 15) * 4;
    const int m = cta_m0 + r;
    float Mt = -INFINITY, L = 0.f;
    float acc[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] = 0.f;
    auto merge = [&](float mc, float lc, const float4& a, const float4& b) {
        if (mc == -INFINITY) return;
        float wa, wb;
        merge_weights(Mt, mc, sl2, wa, wb);
        L = lin2(L, wa, lc, wb);
        acc[0] = lin2(acc[0], wa, a.x, wb);
        acc[1] = lin2(acc[1], wa, a.y, wb);
        acc[2] = lin2(acc[2], wa, a.z, wb);
        acc[3] = lin2(acc[3], wa, a.w, wb);
        acc[4] = lin2(acc[4], wa, b.x, wb);
        acc[5] = lin2(acc[5], wa, b.y, wb);
        acc[6] = lin2(acc[6], wa, b.z, wb);
        acc[7] = lin2(acc[7], wa, b.w, wb);
    };
    auto store_out = [&] {
        const float inv = L > 0.f ? __fdiv_rn(p.v_scale, L) : 0.f;
        __nv_bfloat16* dst = p.out + row_off(m) + col;
        *reinterpret_cast<uint2*>(dst) =
            make_uint2(kcommon::pack_bf16x2(__fmul_rn(acc[0], inv), __fmul_rn(acc[1], inv)),
                       kcommon::pack_bf16x2(__fmul_rn(acc[2], inv), __fmul_rn(acc[3], inv)));
        *reinterpret_cast<uint2*>(dst + 64) =
            make_uint2(kcommon::pack_bf16x2(__fmul_rn(acc[4], inv), __fmul_rn(acc[5], inv)),
                       kcommon::pack_bf16x2(__fmul_rn(acc[6], inv), __fmul_rn(acc[7], inv)));
    };
    if constexpr (W == Work::full) {
        const float* racc = reinterpret_cast<const float*>(smem);
        const float2* rml = reinterpret_cast<const float2*>(smem + ring);
#pragma unroll
        for (int k = 0; k < CLUSTER; ++k) {
            const float* src = racc + (k * SLICE + (tid >> 4)) * D + col;
            const float2 ml = rml[k * SLICE + (tid >> 4)];
            merge(ml.x, ml.y, *reinterpret_cast<const float4*>(src), *reinterpret_cast<const float4*>(src + 64));
        }
    }
    const int nclusters = nsplit / CLUSTER;
    if (nclusters == 1) {
        if (W == Work::full && m < M) store_out();
        return;
    }

    // The group state (slice rows of this cluster) into the workspace: [row block][group][ROWS]
    // accumulators, then [row block][group][ROWS] (m, l) pairs, gridDim.x / CLUSTER groups a
    // row block.
    const int groups = static_cast<int>(gridDim.x) / CLUSTER;
    const int64_t gbase = static_cast<int64_t>(blockIdx.y) * groups;  // the row block's first group
    float* ws_acc = p.ws + gbase * ROWS * D;
    float2* ws_ml = reinterpret_cast<float2*>(p.ws + static_cast<int64_t>(gridDim.y) * groups * ROWS * D) +
                    gbase * ROWS;
    if (W == Work::full && m < M) {
        const int grp = static_cast<int>(blockIdx.x) / CLUSTER;
        float* dst = ws_acc + (static_cast<int64_t>(grp) * ROWS + r) * D + col;
        __stcg(reinterpret_cast<float4*>(dst), make_float4(acc[0], acc[1], acc[2], acc[3]));
        __stcg(reinterpret_cast<float4*>(dst + 64), make_float4(acc[4], acc[5], acc[6], acc[7]));
        if (col == 0) __stcg(ws_ml + grp * ROWS + r, make_float2(Mt, L));
        __threadfence();  // the group state visible to the GPU before the counter moves
    }
    __syncthreads();  // the CTA's group-state writes (each fenced) before its count
    bool last = false;
    if (tid == 0) {
        unsigned int* ctr = reinterpret_cast<unsigned int*>(p.counters + blockIdx.y * CLUSTER + slice);
        last = atomicInc(ctr, static_cast<unsigned int>(nclusters - 1)) ==
               static_cast<unsigned int>(nclusters - 1);
    }
    last = __syncthreads_or(last);
    if (W != Work::full || !last || m >= M) return;
    __threadfence();

    // Final fold of slice `slice`: the nclusters group states (at most MAX_GROUPS) in cluster
    // order, every load in flight first. The reads go to L2 (ld.cg): every group state of this
    // row block was written before the counter could reach nclusters.
    Mt = -INFINITY;
    L = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] = 0.f;
    float4 a[MAX_GROUPS][2];
    float2 ml[MAX_GROUPS];
#pragma unroll
    for (int k = 0; k < MAX_GROUPS; ++k) {
        if (k < nclusters) {
            const float4* s = reinterpret_cast<const float4*>(ws_acc + (static_cast<int64_t>(k) * ROWS + r) * D + col);
            a[k][0] = __ldcg(s);
            a[k][1] = __ldcg(s + 16);
            ml[k] = __ldcg(ws_ml + k * ROWS + r);
        }
    }
#pragma unroll
    for (int k = 0; k < MAX_GROUPS; ++k) {
        if (k < nclusters) merge(ml[k].x, ml[k].y, a[k][0], a[k][1]);
    }
    store_out();
}

}  // namespace dflash_attn
