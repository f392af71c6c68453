// Flash-attention prefill, 64 query rows per CTA (4 warps x 16 rows, 128 threads), BF16 in/out,
// f32 softmax and accumulation, HEAD_DIM in {64, 128, 256}.
//
//   attn_prefill_paged_64_kernel<HEAD_DIM>: q / output [q_len, num_q_heads, HEAD_DIM] over a
//     paged KV cache k_cache / v_cache [num_blocks, cache_block_size, num_kv_heads, HEAD_DIM]
//     with block_table [ceil(kv_len / cache_block_size)]; query i sits at absolute position
//     q_offset + i, keys at 0 .. kv_len - 1. Grid [num_q_heads, ceil(q_len / 64), 1].
//   attn_prefill_64_kernel<HEAD_DIM>: self-attention over contiguous q, k, v, output
//     [batch, seq_len, heads, HEAD_DIM]. Grid [num_q_heads, ceil(seq_len / 64), batch].
//
// Masking: key k is visible to the query at position p when (causal == 0 || k <= p) and, with a
// nonzero sliding_window, p - sliding_window < k <= p. Grouped-query attention: q head h reads
// kv head h / (num_q_heads / num_kv_heads). A row with no visible key is written as zeros.
//
// Dynamic shared memory: (64 + 32 + 32) * HEAD_DIM * 2 bytes (Q rows, one K tile, one V tile).
// Per KV tile of 32 keys the CTA loads K and V (16-byte cp.async into swizzled rows; for a paged
// cache the block-table entries of the next tile are fetched one tile ahead), waits, and each
// warp runs the shared per-warp code of attn_common.cuh (attn_detail::LOAD_SERIAL). Tiles that
// no row of the CTA can see (causal / window) are never loaded, and a warp skips the tiles its
// own rows cannot see. With HEAD_DIM 256 two CTAs fit on an H200 SM (<= 255 registers x 128
// threads, 64 KiB shared memory each), which hides one CTA's loads behind the other's math.
// The 128-row twins in attn_prefill_fa128.cu run the same per-warp code and are bit-identical.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "attn_common.cuh"

namespace attn_detail {
// Resident CTAs per SM that the register budget of a 64-row kernel aims for: 4 (head_dim 64) and
// 3 (128) are what their shared memory and registers allow (without the hint ptxas picked 128
// registers for head_dim 128 and spilled); 0, no minimum, for 256, which needs up to 255.
constexpr int min_ctas_per_sm_64(int head_dim) {
    return head_dim == 64 ? 4 : head_dim == 128 ? 3 : 0;
}
}  // namespace attn_detail

template <int HEAD_DIM>
__global__ void __launch_bounds__(128, attn_detail::min_ctas_per_sm_64(HEAD_DIM))
    attn_prefill_paged_64_kernel(const __nv_bfloat16* q, const __nv_bfloat16* k_cache,
                                 const __nv_bfloat16* v_cache, __nv_bfloat16* output,
                                 const int32_t* block_table, uint32_t q_len, uint32_t kv_len,
                                 uint32_t q_offset, uint32_t num_q_heads, uint32_t num_kv_heads,
                                 uint32_t cache_block_size, uint32_t causal,
                                 uint32_t sliding_window, float inv_sqrt_d) {
    static_assert(HEAD_DIM == 64 || HEAD_DIM == 128 || HEAD_DIM == 256, "HEAD_DIM");
    attn_detail::attn_paged_cta<HEAD_DIM, 4, attn_detail::LOAD_SERIAL>(
        q, k_cache, v_cache, output, block_table, q_len, kv_len, q_offset, num_q_heads,
        num_kv_heads, cache_block_size, causal, sliding_window, inv_sqrt_d);
}

template <int HEAD_DIM>
__global__ void __launch_bounds__(128, attn_detail::min_ctas_per_sm_64(HEAD_DIM))
    attn_prefill_64_kernel(const __nv_bfloat16* q, const __nv_bfloat16* k,
                           const __nv_bfloat16* v, __nv_bfloat16* output, uint32_t seq_len,
                           uint32_t num_q_heads, uint32_t num_kv_heads, uint32_t causal,
                           uint32_t sliding_window, float inv_sqrt_d) {
    static_assert(HEAD_DIM == 64 || HEAD_DIM == 128 || HEAD_DIM == 256, "HEAD_DIM");
    attn_detail::attn_contig_cta<HEAD_DIM, 4, attn_detail::LOAD_SERIAL>(
        q, k, v, output, seq_len, num_q_heads, num_kv_heads, causal, sliding_window, inv_sqrt_d);
}

#ifndef ATTN_PREFILL_NO_EXPLICIT_INSTANTIATION
// Instantiate every variant here so that a plain `nvcc -c` of this file builds (and reports
// registers for) all of them.
template __global__ void attn_prefill_paged_64_kernel<64>(
    const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*,
    const int32_t*, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t,
    uint32_t, float);
template __global__ void attn_prefill_paged_64_kernel<128>(
    const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*,
    const int32_t*, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t,
    uint32_t, float);
template __global__ void attn_prefill_paged_64_kernel<256>(
    const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*,
    const int32_t*, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t,
    uint32_t, float);
template __global__ void attn_prefill_64_kernel<64>(const __nv_bfloat16*, const __nv_bfloat16*,
                                                    const __nv_bfloat16*, __nv_bfloat16*,
                                                    uint32_t, uint32_t, uint32_t, uint32_t,
                                                    uint32_t, float);
template __global__ void attn_prefill_64_kernel<128>(const __nv_bfloat16*, const __nv_bfloat16*,
                                                     const __nv_bfloat16*, __nv_bfloat16*,
                                                     uint32_t, uint32_t, uint32_t, uint32_t,
                                                     uint32_t, float);
template __global__ void attn_prefill_64_kernel<256>(const __nv_bfloat16*, const __nv_bfloat16*,
                                                     const __nv_bfloat16*, __nv_bfloat16*,
                                                     uint32_t, uint32_t, uint32_t, uint32_t,
                                                     uint32_t, float);
#endif
