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
// tile, each KV tile read from global memory once per 128 query rows (16-byte cp.async).
// Pipeline (attn_detail::LOAD_PIPELINED), per KV tile t:
//   wait K[t]; __syncthreads; start V[t]; QK^T + online softmax on K[t];
//   wait V[t]; __syncthreads; start K[t + 1]; PV on V[t];
// so the V load overlaps QK^T / softmax and the next K load overlaps PV. KV tiles past the
// diagonal of the CTA's last row are never loaded.
//
// Products: on sm_90a (hopper) the two warpgroups issue them as warpgroup MMAs (wgmma, Q / K / V
// read from 128-byte-swizzled shared memory through descriptors, P from registers; see
// attn_wgmma.cuh); elsewhere (gb10) each warp issues mma.sync m16n8k16 as the 64-row kernels do.
// Either way every warp runs the per-warp softmax code of attn_common.cuh over the tiles its own
// rows see, in the same order, with the same bf16 x bf16 -> f32 products accumulated in the same
// order, so each output is bit-identical to attn_prefill_paged_64_kernel<256> /
// attn_prefill_64_kernel<256> with causal = 1, sliding_window = 0.
//
// Measured on an H200 (hq 16, hkv 4, head_dim 256, causal; benchmarks/bench_attn_prefill.py,
// benchmarks/RESULTS.md has the latest run): the contiguous twin runs 1.62x / 1.76x the 64-row
// kernel at L 4096 / 16384 (418 / 486 TFLOP/s; torch's flash SDPA 255 / 312), the paged twin
// 1.56x / 1.68x (390 / 445). At L 512 both are 1.07-1.11x (27 against 30 us): the grid has half
// as many CTAs as the 64-row kernels' (64 for 132 SMs), and the kernel lasts as long as its
// heaviest CTA, 128 rows x 16 KV tiles; with batch 2 (128 twin CTAs) the contiguous twin runs
// 1.45x at L 512. Clock counters in that CTA (hopper, L 512, batch 1) read ~49k cycles: 2.5k
// to the first K tile, 16 tiles of ~2.7k (QK^T ~0.8k, softmax ~0.7-0.85k, PV ~0.65k, the two
// barriers and their load waits ~0.45k), 3.7k for the output store. Nsight Compute times the
// two kernels at 33.8 and 41.3 us (1.22x): 1.5x needs that CTA ~19% shorter. Reordering the
// softmax (O rescale before, after or interleaved with the exponentials) moved time between
// those phases but not the tile's total. With per-warp mma.sync instead of wgmma the twins ran
// at 0.72-0.94x: one 8-warp CTA per SM against two 4-warp CTAs.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "attn_common.cuh"
#include "attn_wgmma.cuh"

// sm_90a: warpgroup MMAs (attn_wgmma.cuh); other targets: per-warp mma.sync.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ATTN_FA128_MODE attn_detail::WGMMA_PIPELINED
#else
#define ATTN_FA128_MODE attn_detail::LOAD_PIPELINED
#endif

__global__ void __launch_bounds__(256, 1)
    attn_prefill_fa128_paged_kernel(const __nv_bfloat16* q, const __nv_bfloat16* k_cache,
                                    const __nv_bfloat16* v_cache, __nv_bfloat16* output,
                                    const int32_t* block_table, uint32_t q_len, uint32_t kv_len,
                                    uint32_t q_offset, uint32_t num_q_heads,
                                    uint32_t num_kv_heads, uint32_t cache_block_size,
                                    float inv_sqrt_d) {
    attn_detail::attn_paged_cta<256, 8, ATTN_FA128_MODE>(q, k_cache, v_cache, output, block_table, q_len,
                                              kv_len, q_offset, num_q_heads, num_kv_heads,
                                              cache_block_size, /*causal=*/1u,
                                              /*sliding_window=*/0u, inv_sqrt_d);
}

__global__ void __launch_bounds__(256, 1)
    attn_prefill_fa128_kernel(const __nv_bfloat16* q, const __nv_bfloat16* k,
                              const __nv_bfloat16* v, __nv_bfloat16* output, uint32_t seq_len,
                              uint32_t num_q_heads, uint32_t num_kv_heads, float inv_sqrt_d) {
    attn_detail::attn_contig_cta<256, 8, ATTN_FA128_MODE>(q, k, v, output, seq_len, num_q_heads,
                                               num_kv_heads, /*causal=*/1u,
                                               /*sliding_window=*/0u, inv_sqrt_d);
}
