// Warpgroup MMA (wgmma, sm_90a only) helpers shared by the attention kernels and the GEMMs:
// shared-memory matrix descriptors for the 128- and 64-byte swizzles, the fence / commit / wait
// of asynchronous MMAs, the proxy fence that makes cp.async (and ordinary) shared-memory writes
// visible to them, and bf16 x bf16 -> f32 MMAs whose A operand comes from registers in
// mma.sync's A-fragment layout (each warp's 16 rows of the 64-row warpgroup tile) or from shared
// memory, and whose accumulator fragment per warp is mma.sync's m16n8 C layout repeated along N.
//
// The layout the descriptors read (BlockSwizzle): a tile of ROWS rows stored as 64-column
// (128-byte) blocks, block b at b * ROWS * 128 bytes, 16-byte chunk c of row r of a block at
// chunk c ^ (r & 7); each block 1024-byte aligned.
#pragma once

#include <cstdint>

namespace kcommon {

// Byte offset of 16-byte chunk `chunk` (16-bit elements 8 * chunk .. + 7) of row `row` in a
// BlockSwizzle tile of ROWS rows.
template <int ROWS>
struct BlockSwizzle {
    static constexpr uint32_t BLOCK = ROWS * 128;  // bytes of one 64-column block
    static __host__ __device__ constexpr uint32_t offset(int row, int chunk) {
        return static_cast<uint32_t>((chunk >> 3) * BLOCK + row * 128 +
                                     (((chunk & 7) ^ (row & 7)) << 4));
    }
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// Shared-memory matrix descriptor, 128-byte swizzle: start address, leading and stride byte
// offsets (all in 16-byte units).
static __device__ __forceinline__ uint64_t smem_desc_sw128(uint32_t addr, uint32_t lbo, uint32_t sbo) {
    return static_cast<uint64_t>((addr & 0x3FFFFu) >> 4) |
           (static_cast<uint64_t>(lbo >> 4) << 16) | (static_cast<uint64_t>(sbo >> 4) << 32) |
           (1ull << 62);
}

// The descriptor of the matrix `bytes` (a multiple of 16) further on: the start address field
// advanced. Shared-memory addresses stay below 2^18, so the field (addr >> 4, 14 bits) does not
// carry into the next one.
static __device__ __forceinline__ uint64_t desc_advance(uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); }

// The same with the 64-byte swizzle (rows of 64 bytes, chunk c of row r at c ^ ((r / 2) % 4);
// 8-row groups of 512 bytes); the leading byte offset is unused for K-major operands.
static __device__ __forceinline__ uint64_t smem_desc_sw64(uint32_t addr, uint32_t sbo) {
    return static_cast<uint64_t>((addr & 0x3FFFFu) >> 4) | (1ull << 16) |
           (static_cast<uint64_t>(sbo >> 4) << 32) | (2ull << 62);
}

static __device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
static __device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most N committed groups of this warpgroup's MMAs are still in flight.
template <int N>
static __device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
static __device__ __forceinline__ void wgmma_wait_all() { wgmma_wait<0>(); }
// Makes this thread's completed cp.async writes (and its ordinary shared-memory stores) visible
// to the wgmma (async proxy) reads that follow the next barrier.
static __device__ __forceinline__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Moves registers between the warpgroups of a CTA (every warp of the warpgroup executes it):
// dec gives back all but N a thread, inc waits until N a thread are free to take.
template <uint32_t N>
static __device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <uint32_t N>
static __device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
// Keeps the compiler from moving accesses of an accumulator across the wgmma wait.
static __device__ __forceinline__ void pin(float& x) { asm volatile("" : "+f"(x)::"memory"); }
// Waits for all of this warpgroup's MMAs, with the accumulator pinned behind the wait.
template <int J>
static __device__ __forceinline__ void wgmma_retire(float (&acc)[J][4]) {
    wgmma_wait_all();
#pragma unroll
    for (int j = 0; j < J; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) pin(acc[j][e]);
    }
}

// Operand lists of the MMAs below. KCOMMON_WG_REGS_N: the asm operands %0 .. %(N-1) of an
// N-register accumulator; KCOMMON_WG_ACC_N(d): the matching "+f" operands of rows 0 .. N/4 - 1
// of a float[N / 4][4] accumulator (each row an m16n8 fragment).
#define KCOMMON_WG_REGS_8 "%0, %1, %2, %3, %4, %5, %6, %7"
#define KCOMMON_WG_REGS_16 KCOMMON_WG_REGS_8 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define KCOMMON_WG_REGS_32 KCOMMON_WG_REGS_16 \
    ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define KCOMMON_WG_REGS_64 KCOMMON_WG_REGS_32 \
    ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47" \
    ", %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define KCOMMON_WG_REGS_96 KCOMMON_WG_REGS_64 \
    ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79" \
    ", %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define KCOMMON_WG_REGS_128 KCOMMON_WG_REGS_64 \
    ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79" \
    ", %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95" \
    ", %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111" \
    ", %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define KCOMMON_WG_ROW(d, n) "+f"(d[n][0]), "+f"(d[n][1]), "+f"(d[n][2]), "+f"(d[n][3])
#define KCOMMON_WG_ACC_8(d, n) KCOMMON_WG_ROW(d, n), KCOMMON_WG_ROW(d, n + 1)
#define KCOMMON_WG_ACC_16(d, n) \
    KCOMMON_WG_ROW(d, n), KCOMMON_WG_ROW(d, n + 1), KCOMMON_WG_ROW(d, n + 2), KCOMMON_WG_ROW(d, n + 3)
#define KCOMMON_WG_ACC_32(d, n) KCOMMON_WG_ACC_16(d, n), KCOMMON_WG_ACC_16(d, n + 4)
#define KCOMMON_WG_ACC_64(d, n) KCOMMON_WG_ACC_32(d, n), KCOMMON_WG_ACC_32(d, n + 8)
#define KCOMMON_WG_ACC_96(d, n) KCOMMON_WG_ACC_64(d, n), KCOMMON_WG_ACC_32(d, n + 16)
#define KCOMMON_WG_ACC_128(d, n) KCOMMON_WG_ACC_64(d, n), KCOMMON_WG_ACC_64(d, n + 16)

// d += A(64 x 16, registers) * B(16 x 16, shared, K-major)^T.
static __device__ __forceinline__ void wgmma_m64n16k16_rs(float (&d)[2][4], const uint32_t (&a)[4],
                                                          uint64_t desc_b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
        "{" KCOMMON_WG_REGS_8 "}, {%8, %9, %10, %11}, %12, p, 1, 1, 0;\n}\n"
        : KCOMMON_WG_ACC_8(d, 0)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

// s += A(64 x 16, registers) * B(32 x 16, shared, K-major)^T; bf16 operands, or f16 with F16.
#define KCOMMON_WG_M64N32K16_RS(T)                                                              \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"                                   \
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32." T "." T " "                      \
                 "{" KCOMMON_WG_REGS_16 "}, {%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"       \
                 : KCOMMON_WG_ACC_16(s, 0)                                                      \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1))
template <bool F16 = false>
static __device__ __forceinline__ void wgmma_m64n32k16_rs(float (&s)[4][4], const uint32_t (&a)[4],
                                                          uint64_t desc_b) {
    if constexpr (F16) {
        KCOMMON_WG_M64N32K16_RS("f16");
    } else {
        KCOMMON_WG_M64N32K16_RS("bf16");
    }
}
#undef KCOMMON_WG_M64N32K16_RS

// d += A(64 x 16, registers) * B(128 x 16, shared, K-major)^T.
static __device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[16][4], const uint32_t (&a)[4],
                                                           uint64_t desc_b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" KCOMMON_WG_REGS_64
        "}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
        : KCOMMON_WG_ACC_64(d, 0)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

// o += A(64 x 16, registers) * B(16 x 128, shared, MN-major: transposed B); bf16 operands, or
// f16 with F16.
#define KCOMMON_WG_M64N128K16_RS_TB(T)                                                          \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                   \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." T "." T " {" KCOMMON_WG_REGS_64  \
                 "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"                                \
                 : KCOMMON_WG_ACC_64(o, 0)                                                      \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1))
template <bool F16 = false>
static __device__ __forceinline__ void wgmma_m64n128k16_rs_tb(float (&o)[16][4], const uint32_t (&a)[4],
                                                              uint64_t desc_b) {
    if constexpr (F16) {
        KCOMMON_WG_M64N128K16_RS_TB("f16");
    } else {
        KCOMMON_WG_M64N128K16_RS_TB("bf16");
    }
}
#undef KCOMMON_WG_M64N128K16_RS_TB

// d += A(64 x 16, registers) * B(256 x 16, shared): TB = 0, B K-major (B^T multiplied); TB = 1,
// B MN-major (16 x 256, the transposed layout).
template <int TB>
static __device__ __forceinline__ void wgmma_m64n256k16_rs_layout(float (&d)[32][4], const uint32_t (&a)[4],
                                                                  uint64_t desc_b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" KCOMMON_WG_REGS_128
        "}, {%128, %129, %130, %131}, %132, p, 1, 1, %134;\n}\n"
        : KCOMMON_WG_ACC_128(d, 0)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1), "n"(TB));
}
// d += A(64 x 16, registers) * B(256 x 16, shared, K-major)^T.
static __device__ __forceinline__ void wgmma_m64n256k16_rs(float (&d)[32][4], const uint32_t (&a)[4],
                                                           uint64_t desc_b) {
    wgmma_m64n256k16_rs_layout<0>(d, a, desc_b);
}
// o += A(64 x 16, registers) * B(16 x 256, shared, MN-major: transposed B).
static __device__ __forceinline__ void wgmma_m64n256k16_rs_tb(float (&o)[32][4], const uint32_t (&a)[4],
                                                              uint64_t desc_b) {
    wgmma_m64n256k16_rs_layout<1>(o, a, desc_b);
}

// d += A(64 x 16, shared, K-major) * B(128 x 16, shared, K-major)^T.
static __device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[16][4], uint64_t desc_a,
                                                          uint64_t desc_b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" KCOMMON_WG_REGS_64
        "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : KCOMMON_WG_ACC_64(d, 0)
        : "l"(desc_a), "l"(desc_b), "r"(1));
}

// d += A(64 x 16, shared, K-major) * B(192 x 16, shared, K-major)^T.
static __device__ __forceinline__ void wgmma_m64n192k16_ss(float (&d)[24][4], uint64_t desc_a,
                                                          uint64_t desc_b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 {" KCOMMON_WG_REGS_96
        "}, %96, %97, p, 1, 1, 0, 0;\n}\n"
        : KCOMMON_WG_ACC_96(d, 0)
        : "l"(desc_a), "l"(desc_b), "r"(1));
}

// d += A(64 x 16, shared, K-major) * B(256 x 16, shared, K-major)^T.
static __device__ __forceinline__ void wgmma_m64n256k16_ss(float (&d)[32][4], uint64_t desc_a,
                                                          uint64_t desc_b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" KCOMMON_WG_REGS_128
        "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
        : KCOMMON_WG_ACC_128(d, 0)
        : "l"(desc_a), "l"(desc_b), "r"(1));
}

// d += A(64 x 16, shared, K-major) * B(64 x 16, shared, K-major)^T.
static __device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[8][4], uint64_t desc_a,
                                                          uint64_t desc_b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" KCOMMON_WG_REGS_32
        "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        : KCOMMON_WG_ACC_32(d, 0)
        : "l"(desc_a), "l"(desc_b), "r"(1));
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

}  // namespace kcommon
