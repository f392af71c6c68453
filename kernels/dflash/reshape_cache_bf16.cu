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
// One CTA per token, blockDim.x = 32 * ceil(num_kv_heads * head_dim / 256) capped
// at 256 (see specs/reshape_cache_bf16.yaml), i.e. about one 16-byte vector of key
// and one of value per thread for the usual 8 x 128 row; each thread issues up to
// two key and two value loads before its stores.
// Alignment: the vector path needs (num_kv_heads * head_dim) % 8 == 0 (an
// `applies_if` clause) and 16-byte aligned key / value / caches; misaligned base
// pointers (invisible to the launcher) take a scalar path.  Bit-exact copy.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

namespace dflash_reshape_cache_bf16_detail {
constexpr uint32_t kUnroll = 2;
}  // namespace dflash_reshape_cache_bf16_detail

__global__ void __launch_bounds__(1024)
dflash_reshape_cache_bf16_kernel(const __nv_bfloat16* key, const __nv_bfloat16* value,
                                 __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
                                 const int64_t* slot_mapping, uint32_t num_tokens,
                                 uint32_t num_kv_heads, uint32_t head_dim, uint32_t block_size,
                                 uint32_t num_blocks) {
    namespace d = dflash_reshape_cache_bf16_detail;
    const uint32_t t = blockIdx.x;
    if (t >= num_tokens) return;
    const int64_t slot = __ldg(slot_mapping + t);
    if (slot < 0 || slot >= static_cast<int64_t>(num_blocks) * static_cast<int64_t>(block_size)) {
        return;
    }
    const uint64_t row = static_cast<uint64_t>(num_kv_heads) * head_dim;  // elements per token
    const __nv_bfloat16* ks = key + t * row;
    const __nv_bfloat16* vs = value + t * row;
    __nv_bfloat16* kd = k_cache + static_cast<uint64_t>(slot) * row;
    __nv_bfloat16* vd = v_cache + static_cast<uint64_t>(slot) * row;
    const uint32_t tid = threadIdx.x, bd = blockDim.x;

    const bool aligned =
        (row & 7u) == 0 &&
        ((reinterpret_cast<uintptr_t>(key) | reinterpret_cast<uintptr_t>(value) |
          reinterpret_cast<uintptr_t>(k_cache) | reinterpret_cast<uintptr_t>(v_cache)) & 15u) == 0;
    if (!aligned) {
        for (uint64_t j = tid; j < row; j += bd) {
            kd[j] = ks[j];
            vd[j] = vs[j];
        }
        return;
    }

    const uint32_t nvec = static_cast<uint32_t>(row >> 3);
    const uint4* ksv = reinterpret_cast<const uint4*>(ks);
    const uint4* vsv = reinterpret_cast<const uint4*>(vs);
    uint4* kdv = reinterpret_cast<uint4*>(kd);
    uint4* vdv = reinterpret_cast<uint4*>(vd);
    for (uint32_t v = tid; v < nvec; v += d::kUnroll * bd) {
        uint4 kr[d::kUnroll], vr[d::kUnroll];
#pragma unroll
        for (uint32_t k = 0; k < d::kUnroll; ++k) {
            const uint32_t vk = v + k * bd;
            if (vk < nvec) {
                kr[k] = __ldg(ksv + vk);
                vr[k] = __ldg(vsv + vk);
            }
        }
#pragma unroll
        for (uint32_t k = 0; k < d::kUnroll; ++k) {
            const uint32_t vk = v + k * bd;
            if (vk < nvec) {
                kdv[vk] = kr[k];
                vdv[vk] = vr[k];
            }
        }
    }
}
