// Embedding gather: out[i, :] = table[ids[i], :] for i < n (bf16 rows of `hidden`).
//
// An id outside [0, vocab) writes a row of zeros (bf16 +0.0) instead of reading out
// of bounds, so padded / invalid tokens give a well-defined, finite output.
//
// One CTA per output row, blockDim.x = 32 * ceil(hidden / 1024) capped at 256 (see
// specs/batched_embed.yaml); each thread copies up to four 16-byte vectors per
// step (all loads issued before the stores), looping for hidden > 8192.
// Alignment: the vector path needs hidden % 8 == 0 (an `applies_if` clause) and
// 16-byte aligned table / out; misaligned base pointers (invisible to the launcher)
// take a scalar path.  A pure copy: the output is bit-exact.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "../common/pdl.cuh"
#include "bf16x2.cuh"

namespace dflash_batched_embed_detail {
constexpr uint32_t kUnroll = 4;
}  // namespace dflash_batched_embed_detail

__global__ void __launch_bounds__(1024)
dflash_batched_embed_bf16_kernel(const int32_t* ids, const __nv_bfloat16* table,
                                 __nv_bfloat16* out, uint32_t n, uint32_t hidden, uint32_t vocab) {
    kcommon::pdl_enter();
    namespace d = dflash_batched_embed_detail;
    const uint32_t i = blockIdx.x;
    if (i >= n) return;
    const int32_t id = __ldg(ids + i);
    const bool valid = id >= 0 && static_cast<uint32_t>(id) < vocab;
    const __nv_bfloat16* src = table + static_cast<size_t>(valid ? id : 0) * hidden;
    __nv_bfloat16* dst = out + static_cast<size_t>(i) * hidden;
    const uint32_t tid = threadIdx.x, bd = blockDim.x;

    const bool aligned = (hidden & 7u) == 0 && dflash_common::aligned16(table, out);
    if (!aligned) {
        const __nv_bfloat16 zero = __float2bfloat16_rn(0.f);
        for (uint32_t j = tid; j < hidden; j += bd) dst[j] = valid ? src[j] : zero;
        return;
    }

    const uint32_t nvec = hidden >> 3;
    const uint4* sv = reinterpret_cast<const uint4*>(src);
    uint4* dv = reinterpret_cast<uint4*>(dst);
    for (uint32_t v = tid; v < nvec; v += d::kUnroll * bd) {
        uint4 r[d::kUnroll];
#pragma unroll
        for (uint32_t k = 0; k < d::kUnroll; ++k) {
            const uint32_t vk = v + k * bd;
            r[k] = (valid && vk < nvec) ? __ldg(sv + vk) : make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (uint32_t k = 0; k < d::kUnroll; ++k) {
            const uint32_t vk = v + k * bd;
            if (vk < nvec) dv[vk] = r[k];
        }
    }
}
