// y = a * x + y. #included into tinyops' generated launcher file for module axpy.
#pragma once
#include <cstdint>

// Four consecutive floats a thread, through 16-byte loads (x and y 16-byte aligned, n % 4 == 0).
__global__ void tinyops_axpy_vec4_kernel(const float* __restrict__ x, float* __restrict__ y, float a, uint32_t n) {
  const uint32_t i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
  if (i >= n) return;
  const float4 xv = *reinterpret_cast<const float4*>(x + i);
  float4 yv = *reinterpret_cast<float4*>(y + i);
  yv.x = a * xv.x + yv.x;
  yv.y = a * xv.y + yv.y;
  yv.z = a * xv.z + yv.z;
  yv.w = a * xv.w + yv.w;
  *reinterpret_cast<float4*>(y + i) = yv;
}

// One float a thread, any n.
__global__ void tinyops_axpy_kernel(const float* __restrict__ x, float* __restrict__ y, float a, uint32_t n) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
