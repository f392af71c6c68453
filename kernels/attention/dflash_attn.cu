// Drafter (DFlash) attention kernels over a paged KV cache, head_dim 128 (see dflash_attn.cuh
// for the CTA layout, the masks and the split-KV merge).
//
//   dflash_attn_{bf16,fp8}{,_split}_kernel: kv_len and the query position q_offset are kernel
//     arguments; query row i sits at position q_offset + i.
//   dflash_attn_bf16_indirect{,_split}_kernel: kv_len, q_offset and q_rope_pos are read from
//     device memory at entry (one i32 each); query row i sits at q_rope_pos + i, kv_len is
//     clamped to max_kv_len (the host bound the grid, the block table and the workspace are
//     sized by). q_offset (the block's first cache row) does not enter the arithmetic.
//
// q / out: [q_rows, num_q_heads, 128] bf16; k_cache / v_cache: [num_blocks, block_size,
// num_kv_heads, 128] (bf16 or E4M3); block_table: i32 entries of one sequence. Grid
// [splits, num_kv_heads * ceil(q_rows * group / 64), 1], block 128 threads. The split kernels
// run in clusters of 8 CTAs along x (a grid of splits = min(ceil(kv_len / (8 * 128)), 5) * 8:
// 128-key splits, and longer contexts use fewer, longer splits, at most 40: chunk_keys in
// dflash_attn.cuh), take 64 KB + FOLD_ML_BYTES of shared memory (the K / V ring, reused by the
// fold, and the fold's (max, sum) pairs), a f32 workspace of num_kv_heads * mblocks *
// (splits / 8) * 64 * 130 values (one group state per cluster) and 8 i32 counters per (kv head,
// m-block), one per 8-row slice of the merge: zero before the first launch, and left zero by
// every launch.
#pragma once

#include "dflash_attn.cuh"

// Split kernels: CTAs per SM the register budget is sized for.
#define SPLIT_MIN_CTAS 3

namespace dflash_attn {
constexpr int SPLIT_KEYS = 128;  // keys per chunk (split) at least (a multiple of TILE)
static_assert(CLUSTER == 8, "__cluster_dims__ of the split kernels below");
static_assert(FOLD_ML_BYTES == 1024 && MAX_GROUPS == 5, "FOLD_ML and MAX_GROUPS in specs/attn_dflash.yaml");
constexpr float LOG2E = 1.4426950408889634f;

__device__ __forceinline__ Params make_params(const __nv_bfloat16* q, const void* k, const void* v,
                                              __nv_bfloat16* out, const int32_t* block_table,
                                              uint32_t q_rows, int kv_len, int qpos0,
                                              uint32_t num_q_heads, uint32_t num_kv_heads,
                                              uint32_t block_size, uint32_t causal,
                                              uint32_t window, float scale) {
    Params p;
    p.q = q;
    p.k = k;
    p.v = v;
    p.out = out;
    p.block_table = block_table;
    p.q_rows = static_cast<int>(q_rows);
    p.kv_len = kv_len;
    p.qpos0 = qpos0;
    p.hq = static_cast<int>(num_q_heads);
    p.hkv = static_cast<int>(num_kv_heads);
    p.block_size = static_cast<int>(block_size);
    p.causal = causal ? 1 : 0;
    p.window = static_cast<int>(min(window, 0x40000000u));
    p.scale_log2 = __fmul_rn(scale, LOG2E);
    p.v_scale = 1.f;
    p.ws = nullptr;
    p.counters = nullptr;
    return p;
}
}  // namespace dflash_attn

#define DFLASH_BF16_ARGS                                                                       \
    const __nv_bfloat16 *q, const __nv_bfloat16 *k_cache, const __nv_bfloat16 *v_cache,       \
        __nv_bfloat16 *out, const int32_t *block_table, uint32_t q_rows, uint32_t kv_len,      \
        uint32_t q_offset, uint32_t num_q_heads, uint32_t num_kv_heads, uint32_t block_size,   \
        uint32_t causal, uint32_t window, float scale
#define DFLASH_FP8_ARGS                                                                        \
    const __nv_bfloat16 *q, const __nv_fp8_e4m3 *k_cache, const __nv_fp8_e4m3 *v_cache,       \
        const float *k_scale, const float *v_scale, __nv_bfloat16 *out,                        \
        const int32_t *block_table, uint32_t q_rows, uint32_t kv_len, uint32_t q_offset,       \
        uint32_t num_q_heads, uint32_t num_kv_heads, uint32_t block_size, uint32_t causal,     \
        uint32_t window, float scale
#define DFLASH_INDIRECT_ARGS                                                                   \
    const __nv_bfloat16 *q, const __nv_bfloat16 *k_cache, const __nv_bfloat16 *v_cache,       \
        __nv_bfloat16 *out, const int32_t *block_table, uint32_t q_rows,                       \
        const int32_t *kv_len, const int32_t *q_offset, const int32_t *q_rope_pos,             \
        uint32_t max_kv_len, uint32_t num_q_heads, uint32_t num_kv_heads, uint32_t block_size, \
        uint32_t causal, uint32_t window, float scale

__global__ void __launch_bounds__(128, 2) dflash_attn_bf16_kernel(DFLASH_BF16_ARGS) {
    kcommon::pdl_wait();
    const dflash_attn::Params p = dflash_attn::make_params(
        q, k_cache, v_cache, out, block_table, q_rows, static_cast<int>(kv_len),
        static_cast<int>(q_offset), num_q_heads, num_kv_heads, block_size, causal, window, scale);
    dflash_attn::attn_cta<false, false, dflash_attn::SPLIT_KEYS>(p);
}

__global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(128, SPLIT_MIN_CTAS)
    dflash_attn_bf16_split_kernel(DFLASH_BF16_ARGS, float* workspace, int32_t* counters) {
    kcommon::pdl_wait();
    dflash_attn::Params p = dflash_attn::make_params(
        q, k_cache, v_cache, out, block_table, q_rows, static_cast<int>(kv_len),
        static_cast<int>(q_offset), num_q_heads, num_kv_heads, block_size, causal, window, scale);
    p.ws = workspace;
    p.counters = counters;
    dflash_attn::attn_cta<false, true, dflash_attn::SPLIT_KEYS>(p);
}

__device__ __forceinline__ dflash_attn::Params dflash_fp8_params(DFLASH_FP8_ARGS) {
    dflash_attn::Params p = dflash_attn::make_params(
        q, k_cache, v_cache, out, block_table, q_rows, static_cast<int>(kv_len),
        static_cast<int>(q_offset), num_q_heads, num_kv_heads, block_size, causal, window, scale);
    p.scale_log2 = __fmul_rn(__fmul_rn(scale, __ldg(k_scale)), dflash_attn::LOG2E);
    p.v_scale = __ldg(v_scale);
    return p;
}

__global__ void __launch_bounds__(128, 2) dflash_attn_fp8_kernel(DFLASH_FP8_ARGS) {
    kcommon::pdl_wait();
    const dflash_attn::Params p =
        dflash_fp8_params(q, k_cache, v_cache, k_scale, v_scale, out, block_table, q_rows, kv_len,
                          q_offset, num_q_heads, num_kv_heads, block_size, causal, window, scale);
    dflash_attn::attn_cta<true, false, dflash_attn::SPLIT_KEYS>(p);
}

__global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(128, SPLIT_MIN_CTAS)
    dflash_attn_fp8_split_kernel(DFLASH_FP8_ARGS, float* workspace, int32_t* counters) {
    kcommon::pdl_wait();
    dflash_attn::Params p =
        dflash_fp8_params(q, k_cache, v_cache, k_scale, v_scale, out, block_table, q_rows, kv_len,
                          q_offset, num_q_heads, num_kv_heads, block_size, causal, window, scale);
    p.ws = workspace;
    p.counters = counters;
    dflash_attn::attn_cta<true, true, dflash_attn::SPLIT_KEYS>(p);
}

__device__ __forceinline__ dflash_attn::Params dflash_indirect_params(DFLASH_INDIRECT_ARGS) {
    // Device values, read once at entry; kv_len is clamped to [0, max_kv_len].
    const int kv = min(max(__ldg(kv_len), 0), static_cast<int>(min(max_kv_len, 0x40000000u)));
    const int pos0 = max(__ldg(q_rope_pos), 0);
    (void)q_offset;
    return dflash_attn::make_params(q, k_cache, v_cache, out, block_table, q_rows, kv, pos0,
                                    num_q_heads, num_kv_heads, block_size, causal, window, scale);
}

__global__ void __launch_bounds__(128, 2) dflash_attn_bf16_indirect_kernel(DFLASH_INDIRECT_ARGS) {
    kcommon::pdl_wait();
    const dflash_attn::Params p = dflash_indirect_params(
        q, k_cache, v_cache, out, block_table, q_rows, kv_len, q_offset, q_rope_pos, max_kv_len,
        num_q_heads, num_kv_heads, block_size, causal, window, scale);
    dflash_attn::attn_cta<false, false, dflash_attn::SPLIT_KEYS>(p);
}

__global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(128, SPLIT_MIN_CTAS)
    dflash_attn_bf16_indirect_split_kernel(DFLASH_INDIRECT_ARGS, float* workspace,
                                           int32_t* counters) {
    kcommon::pdl_wait();
    dflash_attn::Params p = dflash_indirect_params(
        q, k_cache, v_cache, out, block_table, q_rows, kv_len, q_offset, q_rope_pos, max_kv_len,
        num_q_heads, num_kv_heads, block_size, causal, window, scale);
    p.ws = workspace;
    p.counters = counters;
    dflash_attn::attn_cta<false, true, dflash_attn::SPLIT_KEYS>(p);
}

#undef DFLASH_BF16_ARGS
#undef DFLASH_FP8_ARGS
#undef DFLASH_INDIRECT_ARGS
