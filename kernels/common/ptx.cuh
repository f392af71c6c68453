// Small PTX helpers shared by the kernel families: shared-memory addresses and 128-bit shared
// loads, zero-filling 16-byte cp.async copies and their group fence, byte permutes, cluster barriers, the cluster rank,
// distributed shared-memory addresses and loads, an ordered float key and an alignment test.
// Each is static and inlined, so several kernels of one translation unit may include this header.
#pragma once

#include <cstdint>

namespace kcommon {

// A generic pointer into shared memory as the shared-window address PTX takes.
static __device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte load from shared memory; "memory" keeps it after the cp.async wait that makes the
// data visible.
static __device__ __forceinline__ uint4 lds128(uint32_t addr) {
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(addr)
                 : "memory");
    return v;
}

// 16-byte store to shared memory.
static __device__ __forceinline__ void sts128(uint32_t addr, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}
static __device__ __forceinline__ void sts128(uint32_t addr, const uint4& v) { sts128(addr, v.x, v.y, v.z, v.w); }

// 2-byte load from shared memory (zero-extended); "memory" as for lds128.
static __device__ __forceinline__ uint32_t lds16(uint32_t addr) {
    unsigned short v;
    asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(addr) : "memory");
    return v;
}

// 16-byte asynchronous copy global -> shared (cp.async, L2 only); when !pred the 16 bytes are
// zero-filled and src is not read. L2_256B also asks the L2 to fetch the whole 256-byte block
// around src (for a weight row read 64 bytes per k step by a single CTA: the following steps'
// bytes then come from the L2).
template <bool L2_256B = false>
static __device__ __forceinline__ void cp_async16_zfill(uint32_t dst, const void* src, bool pred) {
    if constexpr (L2_256B) {
        asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(pred ? 16 : 0)
                     : "memory");
    } else {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(pred ? 16 : 0)
                     : "memory");
    }
}

// cp_async16_zfill to dst + SOFF from src + GOFF bytes, the offsets immediates of the
// instruction: copies that share a base register take no address arithmetic of their own.
template <uint32_t SOFF, uint32_t GOFF>
static __device__ __forceinline__ void cp_async16_zfill_at(uint32_t dst, const void* src, bool pred) {
    asm volatile("cp.async.cg.shared.global [%0+%3], [%1+%4], 16, %2;" ::"r"(dst), "l"(src), "r"(pred ? 16 : 0),
                 "n"(SOFF), "n"(GOFF)
                 : "memory");
}

// Closes the current group of cp.async copies; waits until at most N groups are pending.
static __device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
static __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" : : "n"(N) : "memory");
}

// Byte permute: the bytes of (b:a) picked by the nibbles of sel.
static __device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
}

// Named barrier `id` (1..15; 0 is __syncthreads') over THREADS threads of the CTA, a
// multiple of 32 (every warp that takes part calls it with the same id): shared memory written
// before it by those threads is visible to them after it.
template <uint32_t THREADS>
static __device__ __forceinline__ void named_barrier_sync(uint32_t id) {
    static_assert(THREADS % 32 == 0, "whole warps");
    asm volatile("bar.sync %0, %1;" : : "r"(id), "n"(THREADS) : "memory");
}

// Thread-block cluster barrier, split in arrive and wait: arrive.release makes the CTA's prior
// (distributed) shared-memory writes visible to the cluster at the matching wait; arrive.relaxed
// orders nothing (for a barrier that only keeps shared memory alive until others are done).
static __device__ __forceinline__ void cluster_arrive_relaxed() {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
static __device__ __forceinline__ void cluster_arrive_release() {
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
static __device__ __forceinline__ void cluster_wait() {
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// arrive.release then wait: every CTA of the cluster has reached this point, and the writes
// each made before it are visible.
static __device__ __forceinline__ void cluster_sync() {
    cluster_arrive_release();
    cluster_wait();
}
// This CTA's rank in its cluster.
static __device__ __forceinline__ uint32_t cluster_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

// Distributed shared memory: the address of the same shared-window offset in the CTA of the
// given cluster rank (for ld / st.shared::cluster).
static __device__ __forceinline__ uint32_t cluster_map(uint32_t addr, uint32_t rank) {
    uint32_t r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
    return r;
}
// Stores of 8 and 16 bytes to a distributed shared-memory address (cluster_map).
static __device__ __forceinline__ void st_cluster_f32x2(uint32_t addr, float x, float y) {
    asm volatile("st.shared::cluster.v2.f32 [%0], {%1, %2};" : : "r"(addr), "f"(x), "f"(y) : "memory");
}
static __device__ __forceinline__ void st_cluster_u32x4(uint32_t addr, uint4 v) {
    asm volatile("st.shared::cluster.v4.u32 [%0], {%1, %2, %3, %4};" : : "r"(addr), "r"(v.x), "r"(v.y), "r"(v.z),
                 "r"(v.w) : "memory");
}

// Ordered key of an f32 bit pattern, for selections on integers: a larger value gives a larger
// key; NaN of either sign -> 0xffffffff (above +inf); -0 and +0 -> 0x80000000; -inf ->
// 0x007fffff; never 0. Selects, no branches.
static __device__ __forceinline__ uint32_t float_key(uint32_t b) {
    const uint32_t a = b & 0x7fffffffu;
    uint32_t k = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
    k = a == 0u ? 0x80000000u : k;
    return a > 0x7f800000u ? 0xffffffffu : k;
}

template <typename... P>
static __device__ __forceinline__ bool aligned16(const P*... p) {
    return ((reinterpret_cast<uintptr_t>(p) | ...) & 15u) == 0;
}

}  // namespace kcommon
