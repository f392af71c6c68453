"""`kernelgen draft` on the idioms of widely used CUDA libraries (ggml, vLLM, Apex, FlashInfer):
function pointers as template arguments, template arguments deduced inside host function
templates, ``dim3`` and integer variables as those libraries declare them, launches through
``cudaLaunchKernel`` and ``cudaLaunchKernelEx`` with a cluster, headers that only declare kernels,
and ``switch`` dispatches. Each draft is loaded with the real loader and rendered."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen.draft import draft_files
from kernelgen.errors import KernelgenError

from .test_draft_classes import project, write_and_load
from .test_draft_launches import kernel_block


def test_function_pointer_template_parameters_take_the_launchs_function(tmp_path: Path) -> None:
    """A template parameter of a function pointer type (an alias of one, or declared ``R (*fn)(args)``)
    takes the function the launch gives as a fixed argument, and the launch's other arguments stand."""
    root = project(tmp_path, {"csrc/deq.cu": """\
typedef void (*dq_t)(const void*, const int, float2&);
__device__ void dq_a(const void* vx, const int ib, float2& v) {}
template <int qk, dq_t dq> __global__ void deq(const void* vx, float* y, const long k) {}
void run(const void* vx, float* y, const long k, cudaStream_t s) {
  deq<32, dq_a><<<(k + 255) / 256, 256, 0, s>>>(vx, y, k);
}
""", "csrc/act.cu": """\
template <typename T> __device__ T silu(const T& x) { return x; }
template <typename scalar_t, scalar_t (*ACT_FN)(const scalar_t&)>
__global__ void act_kernel(scalar_t* out, const scalar_t* in, const int d) { out[0] = ACT_FN(in[0]); }
template <typename scalar_t, scalar_t (*ACT_FN)(const scalar_t&)>
__global__ void unlaunched(scalar_t* out, const int d) {}
void run(float* out, const float* in, int d, int64_t num_tokens, cudaStream_t s) {
  act_kernel<float, silu<float>><<<num_tokens, 256, 0, s>>>(out, in, d);
}
"""})
    texts = write_and_load(root, ["csrc/deq.cu", "csrc/act.cu"])
    deq = kernel_block(texts["deq"], "deq")
    assert 'symbol: "deq<{qk}, dq_a>"\n' in deq and "qk: [32]  # the source's launches" in deq
    act = kernel_block(texts["act"], "act")
    assert 'symbol: "act_kernel<{scalar}, silu<float>>"\n' in act and "scalar: [f32]  # the source's launches" in act
    # no launch: the parameter's name, marked
    assert 'symbol: "unlaunched<{scalar}, ACT_FN>"  # check the template arguments' in texts["act"]


def test_template_arguments_deduced_inside_a_host_function_template(tmp_path: Path) -> None:
    """A launch that leaves the kernel's template arguments (all or the last ones) to deduction
    inside a function template stands for each set of values the source gives that function: the
    types of what it passes follow them, and so do the arguments it writes (macros read)."""
    root = project(tmp_path, {"csrc/ln.cu": """\
#include <cuda_fp16.h>
template <typename T, typename U> __global__ void ln(T* y, const T* x, U* mean, int n) {}
template <typename T, typename U> void host_ln(T* y, const T* x, U* mean, int n, cudaStream_t s) {
  ln<<<n, 128, 0, s>>>(y, x, mean, n);
}
template void host_ln<__half, float>(__half*, const __half*, float*, int, cudaStream_t);
""", "csrc/deq.cu": """\
#define QK4_0 32
#define QR4_0 2
template <int qk, int qr, typename dst_t> __global__ void deq(const void* vx, dst_t* y, const int k) {}
template <int qk, int qr, typename dst_t>
static void deq_cuda(const void* vx, dst_t* y, const int k, cudaStream_t stream) {
  deq<qk, qr><<<(k + 255) / 256, 256, 0, stream>>>(vx, y, k);
}
void run(const void* vx, float* y, const int k, cudaStream_t stream) { deq_cuda<QK4_0, QR4_0>(vx, y, k, stream); }
"""})
    texts = write_and_load(root, ["csrc/ln.cu", "csrc/deq.cu"])
    ln = kernel_block(texts["ln"], "ln")
    assert "      T: [f16]  # the source's launches\n      U: [f32]  # the source's launches\n" in ln
    deq = kernel_block(texts["deq"], "deq")
    assert "      qk: [32]  # the source's launches\n      qr: [2]  # the source's launches\n      dst: [f32]" in deq


DIM3_FORMS = """\
#include <algorithm>
#include <cstdint>
__global__ void tr_auto(float* o, const float* i, int width, int height) {}
__global__ void tr_list(float* o, const float* i, int width, int height) {}
__global__ void tr_braced(float* o, const float* i, int width, int height) {}
__global__ void k_minmax(float* x, int64_t n, int d) {}
__global__ void k_flag(float* x, int n) {}
__global__ void k_int_flag(float* x, int n) {}
void h1(float* o, const float* i, int size_x, int size_y) {
  auto grid = dim3(size_x / 16, size_y / 16); auto threads = dim3(16, 16);
  tr_auto<<<grid, threads>>>(o, i, size_x, size_y);
}
void h2(float* o, const float* i, int size_x, int size_y) {
  dim3 grid(size_x / 16, size_y / 16), threads(16, 16);
  tr_list<<<grid, threads>>>(o, i, size_x, size_y);
}
void h3(float* o, const float* i, int size_x, int size_y) {
  dim3 grid{size_x / 16, size_y / 16}; dim3 threads = {16, 16, 1};
  tr_braced<<<grid, threads>>>(o, i, size_x, size_y);
}
void h4(float* x, int64_t n, int d, cudaStream_t s) {
  const uint32_t block_size = std::min<uint32_t>(1024, d / 4);
  const int64_t blocks = std::max<int64_t>(1, n / 8);
  k_minmax<<<blocks, block_size, 0, s>>>(x, n, d);
}
void h5(float* x, int n, bool big, cudaStream_t s) {
  const int threads = big ? 512 : 128;
  k_flag<<<(n + threads - 1) / threads, threads, 0, s>>>(x, n);
}
void h6(float* x, int n, int big, cudaStream_t s) {
  const int threads = big ? 512 : 128;
  k_int_flag<<<(n + threads - 1) / threads, threads, 0, s>>>(x, n);
}
"""


def test_dim3_and_integer_variables_as_libraries_declare_them(tmp_path: Path) -> None:
    """``auto v = dim3(...)``, several dim3 declarators in one declaration, ``= {...}`` and ``{...}``
    initializers, ``std::min<T>`` / ``std::max<T>``, and a bool or int flag tested by ``?:``."""
    root = project(tmp_path, {"csrc/forms.cu": DIM3_FORMS})
    text = write_and_load(root, ["csrc/forms.cu"])["forms"]
    for name in ("tr_auto", "tr_list", "tr_braced"):
        block = kernel_block(text, name)
        assert "grid: [width // 16, height // 16, 1]  # as the source's launch" in block, block
        assert "block: [16, 16, 1]\n" in block and "host_args" not in block
    minmax = kernel_block(text, "k_minmax")
    assert 'grid: ["max(1, n // 8)", 1, 1]' in minmax and 'block: ["min(1024, d // 4)", 1, 1]' in minmax
    for name in ("k_flag", "k_int_flag"):
        block = kernel_block(text, name)
        assert 'block: ["512 if big != 0 else 128", 1, 1]' in block, block


def test_cuda_launch_kernel_through_a_variable_and_a_constexpr_of_the_function_template(tmp_path: Path) -> None:
    """FlashInfer's idiom: ``auto kernel = K<vec_size, T>;`` launched by ``cudaLaunchKernel((void*)kernel,
    ...)``, ``vec_size`` a ``constexpr`` of the launching function template computed from ``T``: an
    instance per explicit instantiation, ``vec_size`` evaluated for each."""
    root = project(tmp_path, {"csrc/norm.cu": """\
#include <cuda_fp16.h>
#include <algorithm>
#include <cstdint>
namespace fi {
template <uint32_t VEC_SIZE, typename T>
__global__ void RMSNormKernel(T* __restrict__ input, T* __restrict__ output, const uint32_t d, float eps) {}

template <typename T>
cudaError_t RMSNorm(T* input, T* output, uint32_t batch_size, uint32_t d, float eps = 1e-5, cudaStream_t stream = 0) {
  constexpr uint32_t vec_size = 16 / sizeof(T);
  const uint32_t block_size = std::min<uint32_t>(1024, d / vec_size);
  dim3 nblks(batch_size);
  dim3 nthrs(32, (block_size + 31) / 32);
  void* args[] = {&input, &output, &d, &eps};
  auto kernel = RMSNormKernel<vec_size, T>;
  return cudaLaunchKernel((void*)kernel, nblks, nthrs, args, 0, stream);
}
template cudaError_t RMSNorm<half>(half*, half*, uint32_t, uint32_t, float, cudaStream_t);
template cudaError_t RMSNorm<float>(float*, float*, uint32_t, uint32_t, float, cudaStream_t);
}
"""})
    block = kernel_block(write_and_load(root, ["csrc/norm.cu"])["norm"], "RMSNorm")
    assert "      - {VEC_SIZE: 8, T: f16}\n      - {VEC_SIZE: 4, T: f32}\n" in block
    assert "grid: [batch_size, 1, 1]  # as the source's launch at line 16 gives it" in block
    assert 'block: [32, "((min(1024, d // (16 // sizeof(T)))) + 31) // 32", 1]' in block


def test_a_cluster_launch_attribute_is_the_specs_launch_cluster(tmp_path: Path) -> None:
    """``cudaLaunchKernelEx`` with a ``cudaLaunchAttributeClusterDimension`` attribute (an array's
    element or one attribute): ``launch: {cluster: ...}``, its expressions over the arguments; one the
    draft cannot write is said in a check line, not dropped."""
    root = project(tmp_path, {"csrc/ex.cu": """\
#include <cuda_runtime.h>
__global__ void gemm_k(const float* __restrict__ a, float* c, int m, int n) {}
__global__ void split_k(const float* __restrict__ a, float* c, int m, int splits) {}
__global__ void odd_k(const float* __restrict__ a, float* c, int m) {}
cudaError_t launch(const float* a, float* c, int m, int n, cudaStream_t stream) {
  cudaLaunchConfig_t config = {0};
  config.gridDim = dim3((m + 127) / 128, (n + 127) / 128, 1);
  config.blockDim = dim3(256, 1, 1);
  config.stream = stream;
  cudaLaunchAttribute attrs[2];
  attrs[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[0].val.programmaticStreamSerializationAllowed = 1;
  attrs[1].id = cudaLaunchAttributeClusterDimension;
  attrs[1].val.clusterDim.x = 2; attrs[1].val.clusterDim.y = 1; attrs[1].val.clusterDim.z = 1;
  config.attrs = attrs; config.numAttrs = 2;
  return cudaLaunchKernelEx(&config, gemm_k, a, c, m, n);
}
cudaError_t launch_split(const float* a, float* c, int m, int splits, cudaStream_t stream) {
  cudaLaunchConfig_t config = {0};
  config.gridDim = dim3(splits * 4, 1, 1);
  config.blockDim = dim3(128, 1, 1);
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = splits;
  config.attrs = &attr; config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, split_k, a, c, m, splits);
}
cudaError_t launch_odd(const float* a, float* c, int m, cudaStream_t stream) {
  cudaLaunchConfig_t config = {0};
  config.gridDim = dim3(m, 1, 1);
  config.blockDim = dim3(128, 1, 1);
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = a[0] > 0 ? 2 : 1;
  config.attrs = &attr; config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, odd_k, a, c, m);
}
"""})
    text = write_and_load(root, ["csrc/ex.cu"])["ex"]
    assert "    launch: {cluster: [2, 1, 1]}  # the source launches it in clusters" in kernel_block(text, "gemm_k")
    split = kernel_block(text, "split_k")
    assert "    launch: {cluster: [splits, 1, 1]}" in split
    assert "# check: the source launches it in clusters of (a[0] > 0 ? 2 : 1, 1, 1)" in kernel_block(text, "odd_k")


def test_a_kernel_only_declared_is_drafted_where_it_is_defined(tmp_path: Path) -> None:
    """A header declaring a kernel that a source of another name defines: drafted with that source
    (one module, the source's); alone it is refused; a source that declares one kernel and defines
    another drafts only the one it defines, and says so."""
    root = project(tmp_path, {"csrc/kdecl.cuh": "#pragma once\n__global__ void kfoo(float* x, int n);\n",
                              "csrc/kdef.cu": '#include "kdecl.cuh"\n__global__ void kfoo(float* x, int n) {}\n',
                              "csrc/mixed.cu": "__global__ void kfoo(float* x, int n);\n__global__ void kbar(float* x, int n) {}\n"})
    texts = write_and_load(root, ["csrc/kdecl.cuh", "csrc/kdef.cu"])
    assert set(texts) == {"kdef"} and "from csrc/kdef.cu, csrc/kdecl.cuh:" in texts["kdef"]
    assert "sources: [csrc/kdef.cu]" in texts["kdef"] and "\n  kfoo:\n" in texts["kdef"]
    with pytest.raises(KernelgenError, match="declares __global__ kfoo but does not define it"):
        draft_files(root, [root / "csrc/kdecl.cuh"])
    ((_, mixed),) = draft_files(root, [root / "csrc/mixed.cu"])
    assert "\n  kbar:\n" in mixed and "\n  kfoo:\n" not in mixed
    assert "# check: kfoo: declared here but defined in none of the module's sources, so not drafted" in mixed


SOFTMAX = """\
#include <cuda_fp16.h>
#include <cstdint>
template <typename input_t, typename output_t, int log2_elements>
__global__ void softmax_warp_forward(output_t* dst, const input_t* src, int micro_batch_size, int element_count) {}

template <typename input_t, typename output_t>
void dispatch_softmax(output_t* dst, const input_t* src, int key_seq_len, int batch_count, cudaStream_t stream) {
  int log2_elements = 0;
  while ((1 << log2_elements) < key_seq_len) ++log2_elements;
  const int next_power_of_two = 1 << log2_elements;
  int warp_size = (next_power_of_two < 32) ? next_power_of_two : 32;
  constexpr int threads_per_block = 128;
  int warps_per_block = (threads_per_block / warp_size);
  int blocks = batch_count / warps_per_block;
  dim3 threads(warp_size, warps_per_block, 1);
  switch (log2_elements) {
    case 3:
      softmax_warp_forward<input_t, output_t, 3><<<blocks, threads, 0, stream>>>(dst, src, batch_count, key_seq_len);
      break;
    case 10:
      softmax_warp_forward<input_t, output_t, 10><<<blocks, threads, 0, stream>>>(dst, src, batch_count, key_seq_len);
      break;
    default:
      break;
  }
}
template void dispatch_softmax<__half, __half>(__half*, const __half*, int, int, cudaStream_t);

template <int mode> __global__ void by_mode(float* x, int n, int m) {}
void run(float* x, int n, int m, cudaStream_t s) {
  switch (m) {
    case 0: by_mode<0><<<n, 128, 0, s>>>(x, n, m); break;
    case 1: by_mode<1><<<n, 128, 0, s>>>(x, n, m); break;
  }
}
"""


def test_a_switch_the_spec_cannot_say_drafts_no_chain(tmp_path: Path) -> None:
    """Megatron's softmax dispatch: a ``switch`` on a variable the spec cannot compute gives a
    kernel per case, unchained (a chain without applies_if would never reach its later members),
    each saying its case; inside a case the variable is the case's value (``1 << log2_elements``).
    A switch on an argument still gives each member its applies_if (its examples meet it, ``m == 0``
    too) and the chain."""
    root = project(tmp_path, {"csrc/softmax.cu": SOFTMAX})
    text = write_and_load(root, ["csrc/softmax.cu"])["softmax"]
    assert "  softmax_warp_forward:" not in text.split("fallbacks:")[-1]
    first = kernel_block(text, "softmax_warp_forward_1")
    assert "# check: the source chooses among softmax_warp_forward_1, softmax_warp_forward_2 by conditions" in first
    assert "# check: the source launches it where log2_elements == 3: write that as applies_if" in first
    assert 'block: [8, "128 // 8", 1]' in first and "next_power_of_two" not in first
    assert "# check: the source launches it where log2_elements == 10" in kernel_block(text, "softmax_warp_forward_2")
    # (kernels numbered apart from the instances by_mode_0, by_mode_1)
    assert 'applies_if: ["m == 0"]' in kernel_block(text, "by_mode_v1")
    assert "  by_mode: [by_mode_v1, by_mode_v2]" in text
