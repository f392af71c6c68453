// The "obvious binding": a minimal hand-written pybind11 module that launches the probe kernel
// with <<<>>>, the reference a generated launcher is measured against in
// benchmarks/bench_launch_cost.py. No argument checks beyond pybind11's own conversions; the
// launch is checked with cudaGetLastError(), as the generated stub does.
//
//   launch_ints(a, b, c, d, out, n, slot, k0, k1, k2, alpha)     pointers as Python ints
//   launch_tensors(a, b, c, d, out, n, ...)                      pointers from torch tensors,
//                                                                 via x.data_ptr() from C++
//   noop_ints(...)                                               launch_ints without the
//                                                                 launch: pybind11's call floor
//   launch_ints_loop(a, ..., alpha, count)                       count raw <<<>>> launches in a
//                                                                 C++ loop: the floor, measured
//                                                                 in the Python process itself
//
// CUDA source in a .cpp file: compile with nvcc -x cu (bench_launch_cost.py does).
// One translation unit, two parts, so that it also builds where nvcc cannot compile the
// pybind11 headers: `nvcc -x cu -c -DLC_KERNEL_PART` (kernel + C launch function) and
// `c++ -c -DLC_BINDING_PART` (the module), linked together by nvcc. Without either macro, both.
#if !defined(LC_KERNEL_PART) && !defined(LC_BINDING_PART)
#define LC_KERNEL_PART
#define LC_BINDING_PART
#endif

#include <cstdint>

extern "C" int lc_minimal_launch(uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t d, uintptr_t out, uint32_t n,
                                 uint32_t slot, uint32_t k0, uint32_t k1, uint32_t k2, float alpha);
extern "C" int lc_minimal_launch_loop(uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t d, uintptr_t out, uint32_t n,
                                      uint32_t slot, uint32_t k0, uint32_t k1, uint32_t k2, float alpha, int count);
extern "C" const char* lc_minimal_error_string(int err);

#ifdef LC_KERNEL_PART
#include <cuda_runtime.h>

// The same kernel source, renamed so this module's copy cannot clash with another's.
#define launch_probe_kernel minimal_launch_probe_kernel
#include "launch_probe.cu"
#undef launch_probe_kernel

extern "C" int lc_minimal_launch(uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t d, uintptr_t out, uint32_t n,
                                 uint32_t slot, uint32_t k0, uint32_t k1, uint32_t k2, float alpha) {
  using bf16 = launch_probe_bf16;
  minimal_launch_probe_kernel<<<(n + 255) / 256, 256>>>(
      reinterpret_cast<const bf16*>(a), reinterpret_cast<const bf16*>(b), reinterpret_cast<const float*>(c),
      reinterpret_cast<int*>(d), reinterpret_cast<bf16*>(out), n, slot, k0, k1, k2, alpha);
  return static_cast<int>(cudaGetLastError());
}

extern "C" int lc_minimal_launch_loop(uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t d, uintptr_t out, uint32_t n,
                                      uint32_t slot, uint32_t k0, uint32_t k1, uint32_t k2, float alpha, int count) {
  using bf16 = launch_probe_bf16;
  const dim3 grid((n + 255) / 256), block(256);
  for (int i = 0; i < count; ++i) {
    minimal_launch_probe_kernel<<<grid, block>>>(
        reinterpret_cast<const bf16*>(a), reinterpret_cast<const bf16*>(b), reinterpret_cast<const float*>(c),
        reinterpret_cast<int*>(d), reinterpret_cast<bf16*>(out), n, slot, k0, k1, k2, alpha);
  }
  return static_cast<int>(cudaGetLastError());
}

extern "C" const char* lc_minimal_error_string(int err) {
  return cudaGetErrorString(static_cast<cudaError_t>(err));
}
#endif  // LC_KERNEL_PART

#ifdef LC_BINDING_PART
#include <pybind11/pybind11.h>

#include <stdexcept>

namespace py = pybind11;

namespace {

void launch(uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t d, uintptr_t out, uint32_t n, uint32_t slot,
            uint32_t k0, uint32_t k1, uint32_t k2, float alpha) {
  const int err = lc_minimal_launch(a, b, c, d, out, n, slot, k0, k1, k2, alpha);
  if (err != 0) throw std::runtime_error(lc_minimal_error_string(err));
}

uintptr_t data_ptr(const py::object& t) { return t.attr("data_ptr")().cast<uintptr_t>(); }

void launch_tensors(const py::object& a, const py::object& b, const py::object& c, const py::object& d,
                    const py::object& out, uint32_t n, uint32_t slot, uint32_t k0, uint32_t k1, uint32_t k2,
                    float alpha) {
  launch(data_ptr(a), data_ptr(b), data_ptr(c), data_ptr(d), data_ptr(out), n, slot, k0, k1, k2, alpha);
}

void launch_loop(uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t d, uintptr_t out, uint32_t n, uint32_t slot,
                 uint32_t k0, uint32_t k1, uint32_t k2, float alpha, int count) {
  const int err = lc_minimal_launch_loop(a, b, c, d, out, n, slot, k0, k1, k2, alpha, count);
  if (err != 0) throw std::runtime_error(lc_minimal_error_string(err));
}

void noop(uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t,
          float) {}

}  // namespace

PYBIND11_MODULE(lc_minimal_pybind, m) {
  m.doc() = "Minimal pybind11 launcher of the launch-cost probe kernel (benchmarks/launch_cost).";
  m.def("launch_ints", &launch, "Launch with int device pointers.");
  m.def("launch_tensors", &launch_tensors, "Launch with torch tensors (data_ptr() called from C++).");
  m.def("launch_ints_loop", &launch_loop, "count launches with int device pointers in a C++ <<<>>> loop.");
  m.def("noop_ints", &noop, "Same signature as launch_ints; does nothing (pybind11's call overhead).");
}
#endif  // LC_BINDING_PART
