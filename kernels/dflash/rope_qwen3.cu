// Qwen3 query/key preparation, in place (head_dim 128):
//
//   q [num_tokens, num_q_heads, 128], k [num_tokens, num_kv_heads, 128]   bf16
//   for every head row x of token t (weight w = q_norm for q heads, k_norm for k heads):
//     n = x * rsqrt(mean_f32(x^2) + eps) * w                      (f32)
//     for i < 64, with a = pos * inv_freq[i], pos = positions[t]:
//       x[i]      = bf16(n[i] * cos(a) - n[i + 64] * sin(a))
//       x[i + 64] = bf16(n[i + 64] * cos(a) + n[i] * sin(a))
//   inv_freq[i] = theta^(-2i / 128), the f32 nearest to it.
//
// Precision.  inv_freq is evaluated in double (exp2 of -i / 64 * log2(theta)) and rounded
// once to f32, so it is the correctly rounded value (barring a double result within
// ~1e-15 of an f32 midpoint).  The angle is the f32 product RN(float(pos) * inv_freq), as
// transformers computes it in f32, and its sine and cosine come from the accurate
// sincosf (the Payne-Hanek reduction takes over for |a| > 105615, which positions up to
// 131072 reach).  The rest is f32 with one rounding to bf16 at the end; the products
// and the sum of the rotation are rounded separately (no contraction into FMAs), like an
// unfused f32 reference.
//
// Layout.  Eight threads per head row: thread chunk c (0..7) holds elements 8c..8c+7 and
// their rotary partners 64+8c..64+8c+7, two 16-byte vectors.  The eight threads of a head
// are consecutive lanes; the sum of squares is reduced over them with three xor shuffles.
// A CTA has 8 * (num_q_heads + num_kv_heads) threads (rounded up to whole warps, at least
// 64, at most 1024: see specs/rope_qwen3.yaml), so it usually covers every head of one
// token at once, and walks tokens t = blockIdx.x, blockIdx.x + gridDim.x, ... (a grid of
// at most the resident CTAs: inv_freq and the weights are computed / loaded once per
// CTA).  Per token, 64 threads compute the 64 (cos, sin) pairs once into shared memory
// (double-buffered by token parity, so one barrier per token suffices); the next token's
// vectors are loaded before the current token is computed, so they are in flight while it
// is.  Shared-memory tables are laid out [part][chunk] in float4s, so
// the 8 lanes of a head read 128 contiguous bytes (no bank conflicts).
//
// Alignment: q and k 16-byte aligned take vector loads and stores; otherwise (views the
// launcher cannot see) the same code moves the 8 values with 2-byte accesses.  Weights are
// read element by element once per CTA, so they need no alignment.  Each element is read
// and written by one thread only, so the in-place update is safe.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "../common/pdl.cuh"
#include "bf16x2.cuh"

namespace dflash_rope_qwen3_detail {

using dflash_common::bf16_hi;
using dflash_common::bf16_lo;
using dflash_common::pack_bf16x2;

constexpr uint32_t kHeadDim = 128;
constexpr uint32_t kPairs = 64;   // rotary pairs (i, i + 64)
constexpr uint32_t kChunks = 8;   // threads per head row

// 8 bf16 at p: one 16-byte load when `vec`, else 2-byte loads.
static __device__ __forceinline__ uint4 load8(const __nv_bfloat16* p, bool vec) {
    if (vec) return *reinterpret_cast<const uint4*>(p);
    const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) w[j] = static_cast<uint32_t>(h[2 * j]) | (static_cast<uint32_t>(h[2 * j + 1]) << 16);
    return make_uint4(w[0], w[1], w[2], w[3]);
}

static __device__ __forceinline__ void store8(__nv_bfloat16* p, const uint4& v, bool vec) {
    if (vec) {
        *reinterpret_cast<uint4*>(p) = v;
        return;
    }
    uint16_t* h = reinterpret_cast<uint16_t*>(p);
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        h[2 * j] = static_cast<uint16_t>(w[j] & 0xffffu);
        h[2 * j + 1] = static_cast<uint16_t>(w[j] >> 16);
    }
}

static __device__ __forceinline__ void unpack8(const uint4& v, float (&f)[8]) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        f[2 * j] = bf16_lo(w[j]);
        f[2 * j + 1] = bf16_hi(w[j]);
    }
}

// Shared tables, in float4 units [part][chunk]: part 0 / 1 hold values 0-3 / 4-7 of the
// chunk's first half (elements 8c..8c+7, or cos), part 2 / 3 those of its second half
// (elements 64+8c.., or sin).
struct Tables {
    float4 weight[2][4][kChunks];  // [0: q_norm, 1: k_norm]
    float4 rot[2][4][kChunks];     // [token parity]: cos (parts 0, 1), sin (parts 2, 3)
    float inv_freq[kPairs];
};

static __device__ __forceinline__ float* slot(float4 (&t)[4][kChunks], uint32_t part, uint32_t chunk, uint32_t j) {
    return reinterpret_cast<float*>(&t[part][chunk]) + j;
}

// The head row of task (token t, head h) and its chunk's vectors.
struct Task {
    __nv_bfloat16* row;
    uint32_t kind;  // 0: q head, 1: k head
};

static __device__ __forceinline__ Task task_of(__nv_bfloat16* q, __nv_bfloat16* k, uint64_t t, uint64_t task,
                                               uint32_t num_q_heads, uint32_t num_kv_heads) {
    const uint64_t h = task / kChunks;
    const uint64_t c = task % kChunks;
    if (h < num_q_heads) return Task{q + (t * num_q_heads + h) * kHeadDim + c * 8, 0u};
    return Task{k + (t * num_kv_heads + (h - num_q_heads)) * kHeadDim + c * 8, 1u};
}

// Normalizes and rotates one chunk (xa: elements 8c.., xb: 64+8c..) and stores it.  All 8
// lanes of the head's group call it together (`group` is their lane mask).
static __device__ __forceinline__ void rotate_chunk(const Task& task, const uint4& xa, const uint4& xb, bool vec,
                                                    Tables& tb, uint32_t buf, uint32_t c, uint32_t group,
                                                    float eps) {
    float a[8], b[8];
    unpack8(xa, a);
    unpack8(xb, b);
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        ss = fmaf(a[j], a[j], ss);
        ss = fmaf(b[j], b[j], ss);
    }
    ss += __shfl_xor_sync(group, ss, 1);
    ss += __shfl_xor_sync(group, ss, 2);
    ss += __shfl_xor_sync(group, ss, 4);
    const float rinv = rsqrtf(__fadd_rn(__fmul_rn(ss, 1.0f / kHeadDim), eps));

    const float4 w0 = tb.weight[task.kind][0][c], w1 = tb.weight[task.kind][1][c];
    const float4 w2 = tb.weight[task.kind][2][c], w3 = tb.weight[task.kind][3][c];
    const float4 c0 = tb.rot[buf][0][c], c1 = tb.rot[buf][1][c];
    const float4 s0 = tb.rot[buf][2][c], s1 = tb.rot[buf][3][c];
    const float wa[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
    const float wb[8] = {w2.x, w2.y, w2.z, w2.w, w3.x, w3.y, w3.z, w3.w};
    const float cs[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
    const float sn[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};

    uint32_t oa[4], ob[4];
#pragma unroll
    for (int j = 0; j < 8; j += 2) {
        float ra[2], rb[2];
#pragma unroll
        for (int u = 0; u < 2; ++u) {
            const float na = __fmul_rn(__fmul_rn(a[j + u], rinv), wa[j + u]);
            const float nb = __fmul_rn(__fmul_rn(b[j + u], rinv), wb[j + u]);
            ra[u] = __fsub_rn(__fmul_rn(na, cs[j + u]), __fmul_rn(nb, sn[j + u]));
            rb[u] = __fadd_rn(__fmul_rn(nb, cs[j + u]), __fmul_rn(na, sn[j + u]));
        }
        oa[j >> 1] = pack_bf16x2(ra[0], ra[1]);
        ob[j >> 1] = pack_bf16x2(rb[0], rb[1]);
    }
    store8(task.row, make_uint4(oa[0], oa[1], oa[2], oa[3]), vec);
    store8(task.row + kPairs, make_uint4(ob[0], ob[1], ob[2], ob[3]), vec);
}

}  // namespace dflash_rope_qwen3_detail

__global__ void __launch_bounds__(1024)
dflash_rope_qwen3_kernel(__nv_bfloat16* q, __nv_bfloat16* k, const __nv_bfloat16* q_norm,
                         const __nv_bfloat16* k_norm, const int32_t* positions, uint32_t num_tokens,
                         uint32_t num_q_heads, uint32_t num_kv_heads, float eps, float theta) {
    kcommon::pdl_enter();
    namespace d = dflash_rope_qwen3_detail;
    __shared__ d::Tables tb;
    const uint32_t tid = threadIdx.x;

    // Once per CTA: the weights (f32) and the inverse frequencies.
    for (uint32_t e = tid; e < 2 * d::kHeadDim; e += blockDim.x) {
        const uint32_t kind = e / d::kHeadDim, i = e % d::kHeadDim;
        const __nv_bfloat16 w = kind == 0 ? q_norm[i] : k_norm[i];
        const uint32_t half = i / d::kPairs, c = (i % d::kPairs) / 8, j = i % 8;
        *d::slot(tb.weight[kind], 2 * half + j / 4, c, j % 4) = __bfloat162float(w);
    }
    if (tid < d::kPairs) {
        const double log2_theta = log2(static_cast<double>(theta));
        for (uint32_t i = tid; i < d::kPairs; i += blockDim.x) {
            tb.inv_freq[i] = __double2float_rn(exp2(-static_cast<double>(i) * log2_theta * (1.0 / d::kPairs)));
        }
    }
    __syncthreads();

    const uint64_t tasks = (static_cast<uint64_t>(num_q_heads) + num_kv_heads) * d::kChunks;
    const bool vec = dflash_common::aligned16(q, k);
    const uint32_t c = tid % d::kChunks;  // blockDim.x is a multiple of 8: a thread keeps its chunk
    const uint32_t group = 0xffu << (tid & 24u);
    const bool has_first = tid < tasks;

    // The first task's vectors of the first token, loaded ahead.
    uint64_t t = blockIdx.x;
    uint4 xa = make_uint4(0u, 0u, 0u, 0u), xb = xa;
    if (has_first && t < num_tokens) {
        const d::Task tk = d::task_of(q, k, t, tid, num_q_heads, num_kv_heads);
        xa = d::load8(tk.row, vec);
        xb = d::load8(tk.row + d::kPairs, vec);
    }
    for (uint32_t buf = 0; t < num_tokens; t += gridDim.x, buf ^= 1u) {
        // This token's (cos, sin) table.
        for (uint32_t i = tid; i < d::kPairs; i += blockDim.x) {
            const float pos = static_cast<float>(__ldg(positions + t));
            const float angle = __fmul_rn(pos, tb.inv_freq[i]);
            float s, co;
            sincosf(angle, &s, &co);
            const uint32_t cc = i / 8, j = i % 8;
            *d::slot(tb.rot[buf], j / 4, cc, j % 4) = co;
            *d::slot(tb.rot[buf], 2 + j / 4, cc, j % 4) = s;
        }
        __syncthreads();

        if (has_first) {
            const d::Task tk = d::task_of(q, k, t, tid, num_q_heads, num_kv_heads);
            const uint4 ca = xa, cb = xb;
            const uint64_t next = t + gridDim.x;
            if (next < num_tokens) {  // the next token's vectors, in flight while this one is computed
                const d::Task tn = d::task_of(q, k, next, tid, num_q_heads, num_kv_heads);
                xa = d::load8(tn.row, vec);
                xb = d::load8(tn.row + d::kPairs, vec);
            }
            d::rotate_chunk(tk, ca, cb, vec, tb, buf, c, group, eps);
        }
        // More heads than threads: the remaining tasks of this token, loaded on the spot.
        for (uint64_t task = tid + static_cast<uint64_t>(blockDim.x); task < tasks; task += blockDim.x) {
            const d::Task tk = d::task_of(q, k, t, task, num_q_heads, num_kv_heads);
            const uint4 a = d::load8(tk.row, vec), b = d::load8(tk.row + d::kPairs, vec);
            d::rotate_chunk(tk, a, b, vec, tb, buf, c, group, eps);
        }
    }
}
