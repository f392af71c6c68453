// Shared by the ablation benchmarks (fp8_gemv_ablation.cu, attn_dflash_ablation.cu): the CUDA
// error check, random inputs, a mean-of-back-to-back-launches timer and the streaming-read floor
// (the fastest of a grid-stride read and a one-shot grid over the same bytes: what one launch
// reading them can reach).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                                  \
    do {                                                                                          \
        cudaError_t e_ = (x);                                                                     \
        if (e_ != cudaSuccess) {                                                                  \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            std::exit(1);                                                                         \
        }                                                                                         \
    } while (0)

namespace ablation {

__device__ __forceinline__ uint4 ld_nc(const uint4* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

// Grid-stride read, 16 loads in flight a thread.
__global__ void __launch_bounds__(256) read_stride(const uint4* p, uint64_t nvec, unsigned* sink) {
    unsigned acc = 0;
    const uint64_t stride = static_cast<uint64_t>(gridDim.x) * 256;
    uint64_t i = static_cast<uint64_t>(blockIdx.x) * 256 + threadIdx.x;
    for (; i + 15 * stride < nvec; i += 16 * stride) {
        uint4 v[16];
#pragma unroll
        for (int u = 0; u < 16; ++u) v[u] = ld_nc(p + i + u * stride);
#pragma unroll
        for (int u = 0; u < 16; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < nvec; i += stride) {
        const uint4 v = ld_nc(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u) sink[0] = acc;  // keeps the loads
}

// One shot: one CTA per 64 KB, each thread's 16 loads issued at once.
__global__ void __launch_bounds__(256) read_once(const uint4* p, uint64_t nvec, unsigned* sink) {
    const uint64_t base = static_cast<uint64_t>(blockIdx.x) * 4096 + threadIdx.x;
    unsigned acc = 0;
    uint4 v[16];
#pragma unroll
    for (int u = 0; u < 16; ++u) v[u] = base + u * 256 < nvec ? ld_nc(p + base + u * 256) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < 16; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    if (acc == 0x9e3779b9u) sink[0] = acc;
}

// Fills p[0 .. n) with make(hash of the index and seed), grid-stride.
template <typename T, typename Make>
__device__ __forceinline__ void fill_hashed(T* p, uint64_t n, uint32_t seed, Make make) {
    for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
        uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
        h ^= h >> 13;
        h *= 0x5bd1e995u;
        h ^= h >> 15;
        p[i] = make(h);
    }
}

// Random E4M3 bytes without NaN codes.
__global__ void fill_e4m3(uint8_t* p, uint64_t n, uint32_t seed) {
    fill_hashed(p, n, seed, [](uint32_t h) {
        const uint8_t b = h & 0xffu;
        return static_cast<uint8_t>((b & 0x7fu) == 0x7fu ? b & 0xfeu : b);
    });
}

// bf16 values in [-2, 2) from a hash of the index.
__global__ void fill_bf16(__nv_bfloat16* p, uint64_t n, uint32_t seed) {
    fill_hashed(p, n, seed,
                [](uint32_t h) { return __float2bfloat16(static_cast<float>(h & 0xffffu) / 16384.f - 2.f); });
}

struct Timer {
    cudaEvent_t a, b;
    Timer() {
        CHECK(cudaEventCreate(&a));
        CHECK(cudaEventCreate(&b));
    }
    // Mean microseconds of `reps` launches f(i % sets), after one warm-up pass over the sets.
    template <typename F>
    double us(F f, int sets, int reps) {
        for (int i = 0; i < sets; ++i) f(i);
        CHECK(cudaEventRecord(a));
        for (int i = 0; i < reps; ++i) f(i % sets);
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float ms = 0.f;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        return 1e3 * ms / reps;
    }
};

// Microseconds of the floor over `bufs` (each `nbytes`, a multiple of 16, read in turn).
inline double read_floor_us(Timer& timer, const std::vector<const void*>& bufs, uint64_t nbytes, int reps,
                            int sms, unsigned* sink) {
    const uint64_t nvec = nbytes / 16;
    const int sets = static_cast<int>(bufs.size());
    auto stride = [&](int i) {
        read_stride<<<sms * 8, 256>>>(static_cast<const uint4*>(bufs[i]), nvec, sink);
    };
    auto once = [&](int i) {
        read_once<<<static_cast<unsigned>((nvec + 4095) / 4096), 256>>>(static_cast<const uint4*>(bufs[i]), nvec,
                                                                        sink);
    };
    return std::min(timer.us(stride, sets, reps), timer.us(once, sets, reps));
}

}  // namespace ablation
