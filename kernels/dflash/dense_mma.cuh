// Tensor-core building blocks shared by the drafter's linear layers (dense_gemv, dense_gemm,
// dense_gemm_pipelined, w4a16_gemm): the bf16 mma.sync m16n8k16 product with f32 accumulation,
// ldmatrix, cp.async and guarded 16-byte loads. Everything is static and inlined, so several
// kernels may include this header in one translation unit.
//
// Fragment layouts of mma.sync.m16n8k16.row.col (lane = 4 * g + t, g = lane / 4, t = lane % 4):
//   A (16 x 16, row m, column k): a0 = (g, 2t..2t+1), a1 = (g + 8, 2t..), a2 = (g, 8 + 2t..),
//                                 a3 = (g + 8, 8 + 2t..);
//   B (16 x 8, row k, column n):  b0 = (k 2t..2t+1, n g), b1 = (k 8 + 2t.., n g);
//   C (16 x 8, f32):              c0, c1 = (m g, n 2t, 2t + 1), c2, c3 = (m g + 8, n 2t, 2t + 1).
// Each 32-bit register holds two bf16 with the lower k in its low half. Because the k index is
// summed over, any permutation of k applied identically to A and B gives the same product
// terms; the GEMV kernels use that to feed fragments straight from 16-byte global loads.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "../common/bf16x2.cuh"
#include "../common/ptx.cuh"

namespace dense_mma {

using kcommon::aligned16;
using kcommon::cp_async_commit;
using kcommon::cp_async_wait;
using kcommon::lds128;
using kcommon::pack_bf16x2;
using kcommon::smem_addr;

// c += a * b, bf16 inputs, f32 accumulator (one m16n8k16 tensor-core product).
static __device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                                uint32_t a3, uint32_t b0, uint32_t b1) {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Four 8x8 bf16 matrices from shared memory; lane i gives the row address of matrix i / 8.
static __device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}


using kcommon::cp_async16_zfill;


// 16-byte streaming load of data read once (weights): no L1 allocation.
static __device__ __forceinline__ uint4 ld_stream16(const void* p) {
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

static __device__ __forceinline__ uint32_t bf16_bits(__nv_bfloat16 v) {
    return static_cast<uint32_t>(__bfloat16_as_ushort(v));
}

// Eight consecutive bf16 p[0..7] as four packed words; elements at index >= valid read as 0.
// VEC: one 16-byte load (p 16-byte aligned, valid is 0 or >= 8); otherwise element by element.
template <bool VEC, bool STREAM>
static __device__ __forceinline__ uint4 load8(const __nv_bfloat16* p, int64_t valid) {
    if constexpr (VEC) {
        if (valid <= 0) return make_uint4(0u, 0u, 0u, 0u);
        return STREAM ? ld_stream16(p) : __ldg(reinterpret_cast<const uint4*>(p));
    } else {
        uint32_t h[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) h[i] = i < valid ? bf16_bits(p[i]) : 0u;
        return make_uint4(h[0] | (h[1] << 16), h[2] | (h[3] << 16), h[4] | (h[5] << 16),
                          h[6] | (h[7] << 16));
    }
}



// Writes a C fragment row pair (n, n + 1) of row m, scaled by `scale`, with bounds checks;
// one 4-byte store when both columns exist and the address is 4-byte aligned.
static __device__ __forceinline__ void store_pair(__nv_bfloat16* out, uint32_t m, uint32_t n,
                                                  uint32_t M, uint32_t N, float v0, float v1,
                                                  float scale) {
    if (m >= M || n >= N) return;
    __nv_bfloat16* p = out + static_cast<uint64_t>(m) * N + n;
    if (n + 1 < N && (reinterpret_cast<uintptr_t>(p) & 3u) == 0) {
        *reinterpret_cast<uint32_t*>(p) = pack_bf16x2(v0 * scale, v1 * scale);
    } else {
        p[0] = __float2bfloat16_rn(v0 * scale);
        if (n + 1 < N) p[1] = __float2bfloat16_rn(v1 * scale);
    }
}

}  // namespace dense_mma
