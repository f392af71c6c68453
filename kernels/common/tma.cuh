// Tensor memory access (TMA) and mbarriers for sm_90a kernels that take tensor maps (a spec's
// `tensor_maps`: the launcher encodes them; the kernel takes them as `const __grid_constant__
// CUtensorMap` parameters and passes their addresses here).
//
// A TMA copy lands in shared memory asynchronously and counts its bytes on an mbarrier: the
// issuing thread arms the barrier with the bytes to expect (mbar_expect_tx, which is also its
// arrival), and waiters see the phase complete once every byte has landed. mbar_wait spins on a
// phase's parity: on a fresh barrier, parity 1 (the phase before the first) counts as complete.
#pragma once

#include <cuda.h>
#include <cstdint>

namespace kcommon {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

static __device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
// Makes the initialised barriers visible to the async proxy (TMA) and the cluster.
static __device__ __forceinline__ void mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
static __device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
static __device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    asm volatile(
        "{\n.reg .pred p;\nKG_MBAR_WAIT_%=:\n"
        "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%0], %1;\n"
        "@!p bra KG_MBAR_WAIT_%=;\n}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
}

// The box of `map` at element coordinates (c0 innermost, c1) into shared memory at dst, counted on
// `bar`. Out-of-range elements land as zeros.
static __device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, uint32_t c0, uint32_t c1,
                                                   uint32_t bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
        "[%4];" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}

// Where a box of `box` rows meant to start at row `own` of an array of `rows` rows should start
// so that it stays inside the array: `own`, or the array's last `box` rows when `own`'s box would
// reach past them (rows >= box; a box partly past the array measured up to 1.5x slower on the
// H200). The rows before `own` that such a box holds belong to the box before: its user stores
// only rows from `own` on.
static __device__ __forceinline__ uint32_t inside_box_row(uint32_t own, uint32_t rows, uint32_t box) {
    return rows >= box ? min(own, rows - box) : own;
}

// A ring of SLOTS shared-memory slots that one producer thread fills by TMA, step u into slot
// u % SLOTS, and consumer warps drain: land[s] completes when a step's bytes have landed (the
// producer's expect_tx is its one arrival), empty[s] when each of the `consumers` warps has
// released the step it read. The mbarriers take 16 * SLOTS bytes of shared memory at `bars`.
// No step is published or released two rounds ahead of its waiter, so the parity waits are exact.
template <uint32_t SLOTS>
struct TmaRing {
    uint32_t land, empty;

    // Every thread of the CTA constructs it (thread 0 initialises; a CTA barrier follows).
    __device__ __forceinline__ TmaRing(uint32_t bars, uint32_t consumers) : land(bars), empty(bars + 8u * SLOTS) {
        if (threadIdx.x == 0) {
            for (uint32_t s = 0; s < SLOTS; ++s) {
                mbar_init(land + 8u * s, 1);
                mbar_init(empty + 8u * s, consumers);
            }
            mbar_init_fence();
        }
        __syncthreads();
    }
    // Producer: waits until step u's slot is free (step u - SLOTS released), arms it for `bytes`
    // and returns the barrier the step's copies count on.
    __device__ __forceinline__ uint32_t acquire(uint32_t u, uint32_t bytes) const {
        const uint32_t s = u % SLOTS;
        mbar_wait(empty + 8u * s, ((u / SLOTS) & 1u) ^ 1u);
        mbar_expect_tx(land + 8u * s, bytes);
        return land + 8u * s;
    }
    // Consumer: waits until step t's bytes have landed.
    __device__ __forceinline__ void wait(uint32_t t) const { mbar_wait(land + 8u * (t % SLOTS), (t / SLOTS) & 1u); }
    // Consumer warp (one lane of it): step t's slot may be refilled.
    __device__ __forceinline__ void release(uint32_t t) const { mbar_arrive(empty + 8u * (t % SLOTS)); }
};

#endif

}  // namespace kcommon
