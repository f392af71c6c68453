// The "obvious binding" of two catalog kernels: a minimal hand-written pybind11 module with the
// generated launchers' signatures (pointers as Python ints, then the scalars), each calling the
// same C ABI function the generated Python launcher calls, so that the launch itself (plan,
// per-device preparation, <<<>>>, cudaGetLastError) is the same on both sides and only the
// Python binding differs. Measured against kernelgen's launchers in
// benchmarks/bench_launch_cost.py.
//
//   rms_norm(x, weight, out, rows, hidden, eps)
//   attn_paged(q, k_cache, v_cache, output, block_table, q_len, kv_len, q_offset, num_q_heads,
//              num_kv_heads, cache_block_size, causal, sliding_window, inv_sqrt_d, head_dim)
//   <name>_noop(...)            the same signature, no call: pybind11's own cost
//   <name>_loop(..., count)     count C ABI calls in a C++ loop: the floor for that kernel
//
// Plain C++ (the C ABI headers need no CUDA): c++ -shared, linked against the target library.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>

#include "kernelgen/attn_prefill_c.h"
#include "kernelgen/rms_norm_c.h"

namespace py = pybind11;

namespace {

void check(int32_t code, const kg_kernel_info* ran) {
  if (code != KG_LAUNCHED) {
    char buf[512];
    kg_rt_describe(ran, code, buf, sizeof buf);
    throw std::runtime_error(buf);
  }
}

int32_t rms_norm_call(uintptr_t x, uintptr_t weight, uintptr_t out, uint32_t rows, uint32_t hidden, float eps,
                      const kg_kernel_info** ran) {
  return kg_rms_norm__rms_norm_bf16(reinterpret_cast<const void*>(x), reinterpret_cast<const void*>(weight),
                                    reinterpret_cast<void*>(out), rows, hidden, eps, nullptr, ran);
}

void rms_norm(uintptr_t x, uintptr_t weight, uintptr_t out, uint32_t rows, uint32_t hidden, float eps) {
  const kg_kernel_info* ran = nullptr;
  check(rms_norm_call(x, weight, out, rows, hidden, eps, &ran), ran);
}

void rms_norm_noop(uintptr_t, uintptr_t, uintptr_t, uint32_t, uint32_t, float) {}

void rms_norm_loop(uintptr_t x, uintptr_t weight, uintptr_t out, uint32_t rows, uint32_t hidden, float eps,
                   int count) {
  const kg_kernel_info* ran = nullptr;
  int32_t code = KG_LAUNCHED;
  for (int i = 0; i < count && code == KG_LAUNCHED; ++i) code = rms_norm_call(x, weight, out, rows, hidden, eps, &ran);
  check(code, ran);
}

int32_t attn_call(uintptr_t q, uintptr_t k_cache, uintptr_t v_cache, uintptr_t output, uintptr_t block_table,
                  uint32_t q_len, uint32_t kv_len, uint32_t q_offset, uint32_t num_q_heads, uint32_t num_kv_heads,
                  uint32_t cache_block_size, uint32_t causal, uint32_t sliding_window, float inv_sqrt_d,
                  uint32_t head_dim, const kg_kernel_info** ran) {
  return kg_attn_prefill__attn_prefill_paged_64(
      reinterpret_cast<const void*>(q), reinterpret_cast<const void*>(k_cache), reinterpret_cast<const void*>(v_cache),
      reinterpret_cast<void*>(output), reinterpret_cast<const void*>(block_table), q_len, kv_len, q_offset,
      num_q_heads, num_kv_heads, cache_block_size, causal, sliding_window, inv_sqrt_d, head_dim, nullptr, ran);
}

void attn_paged(uintptr_t q, uintptr_t k_cache, uintptr_t v_cache, uintptr_t output, uintptr_t block_table,
                uint32_t q_len, uint32_t kv_len, uint32_t q_offset, uint32_t num_q_heads, uint32_t num_kv_heads,
                uint32_t cache_block_size, uint32_t causal, uint32_t sliding_window, float inv_sqrt_d,
                uint32_t head_dim) {
  const kg_kernel_info* ran = nullptr;
  check(attn_call(q, k_cache, v_cache, output, block_table, q_len, kv_len, q_offset, num_q_heads, num_kv_heads,
                  cache_block_size, causal, sliding_window, inv_sqrt_d, head_dim, &ran),
        ran);
}

void attn_paged_noop(uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t, uint32_t, uint32_t, uint32_t, uint32_t,
                     uint32_t, uint32_t, uint32_t, uint32_t, float, uint32_t) {}

void attn_paged_loop(uintptr_t q, uintptr_t k_cache, uintptr_t v_cache, uintptr_t output, uintptr_t block_table,
                     uint32_t q_len, uint32_t kv_len, uint32_t q_offset, uint32_t num_q_heads, uint32_t num_kv_heads,
                     uint32_t cache_block_size, uint32_t causal, uint32_t sliding_window, float inv_sqrt_d,
                     uint32_t head_dim, int count) {
  const kg_kernel_info* ran = nullptr;
  int32_t code = KG_LAUNCHED;
  for (int i = 0; i < count && code == KG_LAUNCHED; ++i) {
    code = attn_call(q, k_cache, v_cache, output, block_table, q_len, kv_len, q_offset, num_q_heads, num_kv_heads,
                     cache_block_size, causal, sliding_window, inv_sqrt_d, head_dim, &ran);
  }
  check(code, ran);
}

}  // namespace

PYBIND11_MODULE(lc_minimal_catalog, m) {
  m.doc() = "Minimal pybind11 bindings of rms_norm_bf16 and attn_prefill_paged_64 over their C ABI.";
  m.def("rms_norm", &rms_norm);
  m.def("rms_norm_noop", &rms_norm_noop);
  m.def("rms_norm_loop", &rms_norm_loop);
  m.def("attn_paged", &attn_paged);
  m.def("attn_paged_noop", &attn_paged_noop);
  m.def("attn_paged_loop", &attn_paged_loop);
}
