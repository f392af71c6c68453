// launch_probe: the kernel of the host launch-cost benchmark (benchmarks/bench_launch_cost.py).
//
// It takes 11 arguments, like a real kernel (5 pointers, 5 u32, 1 f32), and does almost
// nothing: thread 0 of block 0 writes one bf16 value and bumps a launch counter, so the GPU
// is never the bottleneck and every launcher's result can be checked.
//
//   out[slot] = bf16(float(a[0]) + float(b[0]) + c[0] + alpha * float(k0 + k1 + k2)); d[0] += 1
//
// One source for every launcher: the generated kernelgen launcher #includes it, raw.cu and
// minimal_pybind.cpp #include it with the symbol renamed (so their copy cannot clash with the
// library's), and CuPy and cuda.core compile it with NVRTC. Under NVRTC it needs no header:
// bf16 is a 2-byte storage type with the same round-to-nearest-even conversions as
// cuda_bf16.h, and the kernel has C linkage so it is found by its plain name.
#ifdef __CUDACC_RTC__
struct launch_probe_bf16 {
  unsigned short bits;
};
static __device__ inline float launch_probe_to_f32(launch_probe_bf16 v) {
  return __uint_as_float(static_cast<unsigned int>(v.bits) << 16);
}
static __device__ inline launch_probe_bf16 launch_probe_from_f32(float f) {
  unsigned int u = __float_as_uint(f);
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even (inputs are finite)
  launch_probe_bf16 r;
  r.bits = static_cast<unsigned short>(u >> 16);
  return r;
}
#define LAUNCH_PROBE_LINKAGE extern "C"
#else
#include <cuda_bf16.h>
typedef __nv_bfloat16 launch_probe_bf16;
static __device__ __forceinline__ float launch_probe_to_f32(launch_probe_bf16 v) { return __bfloat162float(v); }
static __device__ __forceinline__ launch_probe_bf16 launch_probe_from_f32(float f) { return __float2bfloat16(f); }
#define LAUNCH_PROBE_LINKAGE
#endif

LAUNCH_PROBE_LINKAGE __global__ void launch_probe_kernel(const launch_probe_bf16* a, const launch_probe_bf16* b,
                                                         const float* c, int* d, launch_probe_bf16* out,
                                                         unsigned int n, unsigned int slot, unsigned int k0,
                                                         unsigned int k1, unsigned int k2, float alpha) {
  if (blockIdx.x == 0 && threadIdx.x == 0 && slot < n) {
    const float v = launch_probe_to_f32(a[0]) + launch_probe_to_f32(b[0]) + c[0] +
                    alpha * static_cast<float>(k0 + k1 + k2);
    out[slot] = launch_probe_from_f32(v);
    d[0] += 1;
  }
}
