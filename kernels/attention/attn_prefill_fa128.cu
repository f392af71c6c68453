// Flash-attention prefill "twins": 128 query rows per CTA, head_dim 256, causal, no sliding
// window. BF16 in/out, f32 softmax and accumulation.
//
//   attn_prefill_fa128_paged_kernel: paged KV cache, same layouts and parameters as
//     attn_prefill_paged_64_kernel<256> less causal / sliding_window.
//     Grid [num_q_heads, ceil(q_len / 128), 1].
//   attn_prefill_fa128_kernel: contiguous [batch, seq_len, heads, 256] self-attention, as
//     attn_prefill_64_kernel<256>. Grid [num_q_heads, ceil(seq_len / 128), batch].
//
// 256 threads = 8 warps; warp w owns query rows 16w .. 16w + 15 of the CTA and runs both
// QK^T and PV for them with the probabilities P kept in registers. Dynamic shared memory is
// 96 KiB = (128 + 32 + 32) * 512 bytes: the 128 Q rows, one 32-row K tile and one 32-row V
// tile, each KV tile read from global memory once per 128 query rows (16-byte cp.async into
// swizzled rows). Pipeline (attn_detail::LOAD_PIPELINED), per KV tile t:
//   wait K[t]; __syncthreads; start V[t]; QK^T + online softmax on K[t];
//   wait V[t]; __syncthreads; start K[t + 1]; PV on V[t];
// so the V load overlaps QK^T / softmax and the next K load overlaps PV. KV tiles past the
// diagonal of the CTA's last row are never loaded; a warp skips the tiles its own rows cannot
// see. (attn_detail::LOAD_SPLIT, mbarrier / named-barrier version of the same schedule, measured
// ~4% faster contiguous and equal paged on an H200, but compute-sanitizer racecheck flags its
// cp.async-vs-ldmatrix ordering, which it does not seem to model; not used until that is settled.)
//
// Every warp runs exactly the per-warp code of attn_common.cuh over exactly the tiles that the
// same warp-row group gets in the 64-row kernels, so each output is bit-identical to
// attn_prefill_paged_64_kernel<256> / attn_prefill_64_kernel<256> with causal = 1,
// sliding_window = 0.
//
// Measured on an H200 (hq 16, hkv 4, head_dim 256, causal; benchmarks/bench_attn_prefill.py):
// the twins run at 0.72-0.73x (L 512: half as many CTAs as the 64-row kernels, on 64 of the 132
// SMs) and 0.90-0.94x (L 4096 / 16384) the speed of the 64-row kernels, which fit two CTAs per
// SM and so overlap one CTA's loads with the other's math.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "attn_common.cuh"

__global__ void __launch_bounds__(256, 1)
    attn_prefill_fa128_paged_kernel(const __nv_bfloat16* q, const __nv_bfloat16* k_cache,
                                    const __nv_bfloat16* v_cache, __nv_bfloat16* output,
                                    const int32_t* block_table, uint32_t q_len, uint32_t kv_len,
                                    uint32_t q_offset, uint32_t num_q_heads,
                                    uint32_t num_kv_heads, uint32_t cache_block_size,
                                    float inv_sqrt_d) {
    attn_detail::attn_paged_cta<256, 8, attn_detail::LOAD_PIPELINED>(q, k_cache, v_cache, output, block_table, q_len,
                                              kv_len, q_offset, num_q_heads, num_kv_heads,
                                              cache_block_size, /*causal=*/1u,
                                              /*sliding_window=*/0u, inv_sqrt_d);
}

__global__ void __launch_bounds__(256, 1)
    attn_prefill_fa128_kernel(const __nv_bfloat16* q, const __nv_bfloat16* k,
                              const __nv_bfloat16* v, __nv_bfloat16* output, uint32_t seq_len,
                              uint32_t num_q_heads, uint32_t num_kv_heads, float inv_sqrt_d) {
    attn_detail::attn_contig_cta<256, 8, attn_detail::LOAD_PIPELINED>(q, k, v, output, seq_len, num_q_heads,
                                               num_kv_heads, /*causal=*/1u,
                                               /*sliding_window=*/0u, inv_sqrt_d);
}
