// Paged KV-cache write (bf16):
//
//   key, value       [num_tokens, num_kv_heads, head_dim]
//   k_cache, v_cache [num_blocks, block_size, num_kv_heads, head_dim]   (contiguous)
//   slot_mapping     [num_tokens] int64
//   for each token t with s = slot_mapping[t]:
//     k_cache[s / block_size][s % block_size] = key[t];  v_cache[...] = value[t]
//
// A negative slot is padding: the token is skipped.  A slot >= num_blocks *
// block_size (out of the cache) is skipped too rather than written out of bounds;
// this is why num_blocks is an argument (it also sizes the cache arrays).
// Since the cache is contiguous, cache[s / bs][s % bs] is the row at flat offset
// s * num_kv_heads * head_dim.
//
// One warp per token: warp w of CTA b takes token b * (blockDim.x / 32) + w, then
// strides by the grid's warp count (so any grid is correct).  The spec launches
// 128-thread CTAs, 4 tokens each (specs/reshape_cache_bf16.yaml).  The warp reads
// the token's slot once (one broadcast load), and issues it together with the row's
// loads: lane l loads 16-byte vectors l + 32 * k (k < kVecs) of the key row and of the
// value row, 2 * kVecs = 8 loads (128 bytes) in flight per lane, 4 KiB per warp: the
// whole 8 x 128 row pair in one pass (longer rows loop in passes of 32 * kVecs
// vectors).  The row loads do not wait for the slot, so a padding token's row is read
// (and dropped); this saves a dependent load latency per token.  Every warp
// instruction moves 512 contiguous bytes.  Loads are ld.global.nc.L1::no_allocate
// (key and value are read once); stores are plain, since attention reads the cache
// next.  No shared memory, no barriers.
// Alignment: the vector path needs (num_kv_heads * head_dim) % 8 == 0 (an
// `applies_if` clause) and 16-byte aligned key / value / caches; misaligned base
// pointers (invisible to the launcher) take a scalar path (one warp per token, lane
// strided).  Bit-exact copy.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "../common/pdl.cuh"
#include "bf16x2.cuh"

namespace dflash_reshape_cache_bf16_detail {

constexpr uint32_t kVecs = 4;  // 16-byte vectors per lane per row (key and value each) per pass

using dflash_common::ld_stream;  // key and value are read once

}  // namespace dflash_reshape_cache_bf16_detail

__global__ void __launch_bounds__(1024)
dflash_reshape_cache_bf16_kernel(const __nv_bfloat16* key, const __nv_bfloat16* value,
                                 __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
                                 const int64_t* slot_mapping, uint32_t num_tokens,
                                 uint32_t num_kv_heads, uint32_t head_dim, uint32_t block_size,
                                 uint32_t num_blocks) {
    kcommon::pdl_enter();
    namespace d = dflash_reshape_cache_bf16_detail;
    const uint64_t row = static_cast<uint64_t>(num_kv_heads) * head_dim;  // elements per token
    const int64_t num_slots = static_cast<int64_t>(num_blocks) * static_cast<int64_t>(block_size);
    if ((blockDim.x & 31u) != 0) {
        // Not whole warps (the spec launches 128 threads): one CTA per token, scalar.
        for (uint64_t t = blockIdx.x; t < num_tokens; t += gridDim.x) {
            const int64_t slot = __ldg(slot_mapping + t);
            if (slot < 0 || slot >= num_slots) continue;
            for (uint64_t j = threadIdx.x; j < row; j += blockDim.x) {
                k_cache[static_cast<uint64_t>(slot) * row + j] = key[t * row + j];
                v_cache[static_cast<uint64_t>(slot) * row + j] = value[t * row + j];
            }
        }
        return;
    }
    const uint32_t lane = threadIdx.x & 31u;
    const uint32_t warps = blockDim.x >> 5;
    const bool aligned =
        (row & 7u) == 0 && dflash_common::aligned16(key, value, k_cache, v_cache);
    const uint64_t nvec = row >> 3;
    const uint64_t warp_stride = static_cast<uint64_t>(gridDim.x) * warps;

    for (uint64_t t = static_cast<uint64_t>(blockIdx.x) * warps + (threadIdx.x >> 5);
         t < num_tokens; t += warp_stride) {
        const int64_t slot = __ldg(slot_mapping + t);  // same address in every lane: one request
        const __nv_bfloat16* ks = key + t * row;
        const __nv_bfloat16* vs = value + t * row;

        if (!aligned) {
            if (slot < 0 || slot >= num_slots) continue;
            __nv_bfloat16* kd = k_cache + static_cast<uint64_t>(slot) * row;
            __nv_bfloat16* vd = v_cache + static_cast<uint64_t>(slot) * row;
            for (uint64_t j = lane; j < row; j += 32) {
                kd[j] = ks[j];
                vd[j] = vs[j];
            }
            continue;
        }

        const uint4* ksv = reinterpret_cast<const uint4*>(ks) + lane;
        const uint4* vsv = reinterpret_cast<const uint4*>(vs) + lane;
        for (uint64_t base = 0; base < nvec; base += 32u * d::kVecs) {
            const uint64_t mine = base + lane;  // this lane's vector k is mine + 32 * k
            uint4 kr[d::kVecs], vr[d::kVecs];
#pragma unroll
            for (uint32_t k = 0; k < d::kVecs; ++k) {
                if (mine + 32u * k < nvec) {
                    kr[k] = d::ld_stream(ksv + base + 32u * k);
                    vr[k] = d::ld_stream(vsv + base + 32u * k);
                }
            }
            if (slot < 0 || slot >= num_slots) break;  // padding / out of the cache: drop the row
            uint4* kdv = reinterpret_cast<uint4*>(k_cache + static_cast<uint64_t>(slot) * row) + lane;
            uint4* vdv = reinterpret_cast<uint4*>(v_cache + static_cast<uint64_t>(slot) * row) + lane;
#pragma unroll
            for (uint32_t k = 0; k < d::kVecs; ++k) {
                if (mine + 32u * k < nvec) {
                    kdv[base + 32u * k] = kr[k];
                    vdv[base + 32u * k] = vr[k];
                }
            }
        }
    }
}
