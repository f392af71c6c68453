// Paged-KV slot indices for a run of consecutive token positions:
//
//   slots[i] = block_table[(start + i) / block_size] * block_size + (start + i) % block_size
//
// for i < count, computed in 64-bit (int64 output).  One thread per slot, 256-thread
// CTAs, ceil(count / 256) CTAs (see specs/fill_slots.yaml).  The spec requires
// start + count <= 2^32 - 1, so positions fit 32 bits and the division is 32-bit.
// A block_table entry is used as given (a negative entry yields a negative slot,
// which reshape_cache_bf16 treats as padding).
#pragma once

#include <cstdint>

__global__ void __launch_bounds__(256)
dflash_fill_slots_kernel(const int32_t* block_table, int64_t* slots, uint32_t start,
                         uint32_t count, uint32_t block_size) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    const uint32_t pos = start + i;
    const uint32_t blk = pos / block_size;
    const uint32_t off = pos - blk * block_size;
    slots[i] = static_cast<int64_t>(__ldg(block_table + blk)) * static_cast<int64_t>(block_size) +
               static_cast<int64_t>(off);
}
