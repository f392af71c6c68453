// Paged-KV slot indices for a run of consecutive token positions:
//
//   slots[i] = block_table[(start + i) / block_size] * block_size + (start + i) % block_size
//
// for i < count, computed in 64-bit (int64 output).  The spec requires
// start + count <= 2^32 - 1, so positions fit 32 bits and the division is 32-bit.
// A block_table entry is used as given (a negative entry yields a negative slot,
// which reshape_cache_bf16 treats as padding).
//
// Vector path (slots 8-byte aligned, as an int64 array is; blockDim.x a multiple of
// 32): the output is written as 16-byte pairs (two slots per store).  If `slots` is
// not 16-byte aligned, element 0 is written alone (the head, by thread 0) so the
// pairs are; an odd element left at the end (the tail) is written alone too (thread 1).  Pairs are cut into
// warp chunks of 32 * kPairs; lane l takes pairs l + 32 * k (k < kPairs) of its
// chunk, so every warp store covers 512 contiguous bytes.  Per pair: one 32-bit
// division for the first position, the table entries of both positions (the same
// entry unless the pair straddles a block boundary: a second, L1-hit load), and one
// 16-byte store; a thread issues the table loads of all kPairs pairs before its
// first store.  The launcher sizes the grid as min(ceil(count / 2048), 8192) CTAs of
// 256 threads (specs/fill_slots.yaml): one chunk per warp up to 2^24 slots, a
// grid-stride loop over chunks beyond (and for any other grid).  Stores are plain
// (the slots are read by the next kernel).  Other pointers or block sizes take a
// scalar grid-stride path.
#pragma once

#include <cstdint>

namespace dflash_fill_slots_detail {

constexpr uint32_t kPairs = 4;  // 16-byte (two-slot) stores per thread per chunk

static __device__ __forceinline__ int64_t slot_of(const int32_t* block_table, uint32_t pos,
                                                  uint32_t block_size) {
    const uint32_t blk = pos / block_size;
    const uint32_t off = pos - blk * block_size;
    return static_cast<int64_t>(__ldg(block_table + blk)) * static_cast<int64_t>(block_size) +
           static_cast<int64_t>(off);
}

}  // namespace dflash_fill_slots_detail

__global__ void __launch_bounds__(1024)
dflash_fill_slots_kernel(const int32_t* block_table, int64_t* slots, uint32_t start,
                         uint32_t count, uint32_t block_size) {
    namespace d = dflash_fill_slots_detail;
    const uint64_t tid = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const uint64_t nthreads = static_cast<uint64_t>(gridDim.x) * blockDim.x;
    const uintptr_t addr = reinterpret_cast<uintptr_t>(slots);

    if ((addr & 7u) != 0 || (blockDim.x & 31u) != 0) {
        for (uint64_t i = tid; i < count; i += nthreads) {
            slots[i] = d::slot_of(block_table, start + static_cast<uint32_t>(i), block_size);
        }
        return;
    }

    // head: 1 if slots is 8 but not 16-byte aligned (element 0 alone), else 0.
    const uint32_t head = count == 0 ? 0u : static_cast<uint32_t>((addr >> 3) & 1u);
    const uint32_t npairs = (count - head) >> 1;
    const uint32_t tail = head + 2 * npairs;  // == count - 1 if an element is left, else count
    if (tid < 2) {  // thread 0: the head element, thread 1: the tail element (either may be absent)
        const uint32_t i = tid == 0 ? 0u : tail;
        if (tid == 0 ? head == 1 : tail < count) slots[i] = d::slot_of(block_table, start + i, block_size);
    }

    const uint64_t per_warp = 32u * d::kPairs;
    const uint64_t per_step = per_warp * (blockDim.x >> 5);  // pairs per CTA step
    const uint64_t first = blockIdx.x * per_step + (threadIdx.x >> 5) * per_warp;
    const uint64_t stride = gridDim.x * per_step;
    const uint32_t lane = threadIdx.x & 31u;
    longlong2* out = reinterpret_cast<longlong2*>(slots + head);
    for (uint64_t w0 = first; w0 < npairs; w0 += stride) {
        const uint64_t mine = w0 + lane;  // this lane's pair k is mine + 32 * k
        int32_t t0[d::kPairs], t1[d::kPairs];
        uint32_t off0[d::kPairs], off1[d::kPairs];
#pragma unroll
        for (uint32_t k = 0; k < d::kPairs; ++k) {
            if (mine + 32u * k < npairs) {
                // First position of the pair; < 2^32 since start + count <= 2^32 - 1.
                const uint32_t pos = start + head + 2u * static_cast<uint32_t>(mine + 32u * k);
                const uint32_t blk = pos / block_size;
                off0[k] = pos - blk * block_size;
                const bool next = off0[k] + 1u == block_size;  // second position in the next block
                off1[k] = next ? 0u : off0[k] + 1u;
                t0[k] = __ldg(block_table + blk);
                t1[k] = __ldg(block_table + blk + (next ? 1u : 0u));
            }
        }
#pragma unroll
        for (uint32_t k = 0; k < d::kPairs; ++k) {
            if (mine + 32u * k < npairs) {
                const int64_t bs = static_cast<int64_t>(block_size);
                out[mine + 32u * k] =
                    make_longlong2(static_cast<int64_t>(t0[k]) * bs + static_cast<int64_t>(off0[k]),
                                   static_cast<int64_t>(t1[k]) * bs + static_cast<int64_t>(off1[k]));
            }
        }
    }
}
