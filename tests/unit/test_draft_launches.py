"""`kernelgen draft` reading the launch geometry from the source's own launches
(``k<<<grid, block, smem, stream>>>(args)``): the launching function's variables put in, the names
the kernel is passed turned into its arguments, the launching function's other integers into host
arguments, template arguments into instances and axes; what it cannot say leaves the guess.
Each draft is loaded with the real loader and rendered, and the drafted plans are evaluated."""

from __future__ import annotations

from pathlib import Path

from kernelgen.expr import evaluate
from kernelgen.launch_sites import geometry, launch_sites
from kernelgen.loader import load_catalog
from tests import drafted

from .test_class_members import TRAITS
from .test_draft_classes import project, write_and_load

SOURCE = """\
#include <cuda_runtime.h>
#include <cstdint>
#define WARP_SIZE 32

template <int block_size>
static __global__ void row_norm(const float * x, float * dst, const int ncols, const float eps) {}

static void row_norm_cuda(const float * x, float * dst, const int ncols, const int nrows, const float eps,
                          cudaStream_t stream) {
    if (ncols < 1024) {
        const dim3 block_dims(WARP_SIZE, 1, 1);
        row_norm<WARP_SIZE><<<nrows, block_dims, 0, stream>>>(x, dst, ncols, eps);
    } else {
        const dim3 block_dims(1024, 1, 1);
        row_norm<1024><<<nrows, block_dims, 0, stream>>>(x, dst, ncols, eps);
    }
}

__global__ void scale_kernel(float* __restrict__ y, const float* __restrict__ x, float a, int64_t n) {}

void launch_scale(float* y, const float* x, float a, int64_t count, cudaStream_t s) {
  constexpr int threads = 256;
  const int64_t blocks = (count + threads - 1) / threads;
  scale_kernel<<<blocks, threads, 0, s>>>(y, x, a, (int64_t)count);
}

__global__ void softmax_rows(float* out, const float* in, int cols) {
  extern __shared__ float buf[];
}

void launch_softmax(float* out, const float* in, int rows, int cols, cudaStream_t s) {
  dim3 grid(rows);
  dim3 block(std::min(cols, 1024));
  size_t smem = cols * sizeof(float);
  softmax_rows<<<grid, block, smem, s>>>(out, in, cols);
}

namespace eng {
template <typename scalar_t>
__global__ void rms_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ input,
                           const float epsilon, const int num_tokens, const int hidden_size) {}
}

void rms(torch::Tensor& out, torch::Tensor& input, double epsilon) {
  int hidden_size = input.size(-1);
  int num_tokens = input.numel() / hidden_size;
  dim3 grid(num_tokens);
  dim3 block(std::min(hidden_size, 1024));
  DISPATCH_FLOATING_TYPES(input.scalar_type(), "rms", [&] {
    eng::rms_kernel<scalar_t><<<grid, block, 0, stream>>>(out.data_ptr<scalar_t>(), input.data_ptr<scalar_t>(),
                                                         epsilon, num_tokens, hidden_size);
  });
}

__global__ void fill_kernel(float* p, float v, int n) {}

void fill(torch::Tensor& t, float v) {
  fill_kernel<<<t.numel() / 256 + 1, 256>>>(t.data_ptr<float>(), v, t.numel());
}

__global__ void row_fill(float* p, float v, int n) {}

void row_fill_launch(torch::Tensor& t, float v) {
  row_fill<<<t.size(0), 256>>>(t.data_ptr<float>(), v, t.numel());
}

template <typename scalar_t>
__global__ void gate_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ in, const int d) {
  extern __shared__ char smem[];
}

void gate(torch::Tensor& out, torch::Tensor& input) {
  int d = input.size(-1) / 2;
  int64_t num_tokens = input.numel() / input.size(-1);
  dim3 grid(num_tokens);
  dim3 block(std::min(d, 1024));
  DISPATCH(input.scalar_type(), "gate", [&] {
    gate_kernel<scalar_t><<<grid, block, d * sizeof(scalar_t), stream>>>(out.data_ptr<scalar_t>(),
                                                                         input.data_ptr<scalar_t>(), d);
  });
}

__global__ void pdl_kernel(float* y, const float* x, int n) { cudaGridDependencySynchronize(); }

void launch_pdl(float* y, const float* x, int n, cudaStream_t stream) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3((n + 127) / 128);
  config.blockDim = 128;
  config.stream = stream;
  cudaLaunchKernelEx(&config, pdl_kernel, y, x, n);
}

__global__ void ex_init(float* y, int n) {}

void launch_ex_init(float* y, int n, cudaStream_t s) {
  cudaLaunchConfig_t cfg = {.gridDim = dim3(n), .blockDim = dim3(32, 4), .dynamicSmemBytes = 512, .stream = s};
  cudaLaunchKernelEx(&cfg, ex_init, y, n);
}

struct sm_params { int64_t nheads; float scale; int64_t ncols; int64_t nrows_x; };

template <bool use_shared, int ncols_template>
static __global__ void soft_max(const float * x, float * dst, const sm_params p) {}

static void soft_max_cuda(const float * x, float * dst, const sm_params & params, cudaStream_t stream) {
    int nth = WARP_SIZE;
    const int64_t ncols_x = params.ncols;
    while (nth < ncols_x && nth < 1024) nth *= 2;
    const dim3 block_dims(nth, 1, 1);
    const dim3 block_nums(params.nrows_x, 1, 1);
    const size_t nbytes_shared = ((ncols_x + WARP_SIZE - 1) / WARP_SIZE * WARP_SIZE + WARP_SIZE) * sizeof(float);
    switch (ncols_x) {
        case 32: soft_max<true, 32><<<block_nums, block_dims, nbytes_shared, stream>>>(x, dst, params); break;
        default: soft_max<true, 0><<<block_nums, block_dims, nbytes_shared, stream>>>(x, dst, params); break;
    }
}

__global__ void opaque(OtherParams p, float* y) {}

void launch_opaque(const OtherParams& params, float* y) { opaque<<<params.rows, 256>>>(params, y); }

__global__ void padded(float* y, int n) { extern __shared__ float s[]; }

void launch_padded(float* y, int n) { padded<<<n, 64, PAD(n, 32) * 4>>>(y, n); }

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

__global__ void ceil_kernel(float* p, int n) {}

void launch_ceil(float* p, int n) { ceil_kernel<<<CEIL_DIV(n, 64), 64>>>(p, n); }

__global__ void two_ways(float* p, int n) {}

void two(float* p, int n, bool wide) {
  if (wide) two_ways<<<(n + 511) / 512, 512>>>(p, n);
  else two_ways<<<(n + 127) / 128, 128>>>(p, n);
}
"""


def kernel_block(text: str, name: str) -> str:
    """The drafted lines of kernel ``name`` (up to the next kernel)."""
    start = text.index(f"\n  {name}:\n")
    end = text.find("\n  ", start + len(name) + 5)
    while end >= 0 and text[end + 3] == " ":
        end = text.find("\n  ", end + 1)
    return text[start:end if end >= 0 else len(text)]


def test_geometry_from_launches(tmp_path: Path) -> None:
    root = project(tmp_path, {"csrc/ops.cu": SOURCE})
    text = write_and_load(root, ["csrc/ops.cu"])["ops"]
    norm = kernel_block(text, "row_norm_1")
    # instances from the launches' template arguments; the block follows the one each launch gives;
    # the launching code's if / else between them: a kernel each with its condition as applies_if
    # (values meeting it as the example), and a chain of them under the kernel's name
    assert "      block_size: [32]  # the source's launches" in norm, norm
    assert "    host_args:  # the launching function's integers the launch uses\n      nrows: i32\n" in norm
    assert "    grid: [nrows, 1, 1]  # as the source's launch at line 12 gives it\n" \
        "    block: [block_size, 1, 1]\n" in norm
    assert '    applies_if: ["ncols < 1024"]  # as the source launches it\n    skip_if: [nrows == 0]\n' \
        "    examples: [{ncols: 64, nrows: 64}]" in norm, norm
    norm2 = kernel_block(text, "row_norm_2")
    assert "    extends: row_norm_1" in norm2 and "      block_size: [1024]  # the source's launches" in norm2
    assert '    applies_if: ["not (ncols < 1024)"]  # as the source launches it\n' \
        "    examples: [{ncols: 1024, nrows: 1}]" in norm2, norm2
    assert text.endswith("fallbacks:  # the launching code's choice among a kernel's instances, by the conditions it "
                         "launches them under\n  row_norm: [row_norm_1, row_norm_2]\n  soft_max: [soft_max_1, "
                         "soft_max_2]\n"), text
    scale = kernel_block(text, "scale")
    assert '    grid: ["div_ceil(n, 256)", 1, 1]  # as the source' in scale and "    block: [256, 1, 1]\n" in scale
    soft = kernel_block(text, "softmax_rows")
    assert '    block: ["min(cols, 1024)", 1, 1]\n    shared_mem: cols * 4\n' in soft, soft
    assert "rows: i32" in soft and "extern __shared__" not in soft
    # a name the kernel is passed is its argument, even where the launching function computes it
    rms = kernel_block(text, "rms")
    assert '    grid: [num_tokens, 1, 1]  # as the source' in rms and '    block: ["min(hidden_size, 1024)", 1, 1]' \
        in rms, rms
    assert "host_args" not in rms
    # an expression the kernel is passed stands for its argument where the launch uses it
    fill = kernel_block(text, "fill")
    assert '    grid: ["n // 256 + 1", 1, 1]  # as the source' in fill, fill
    # what the spec cannot say (a member call the kernel is not passed) leaves the guess
    row_fill = kernel_block(text, "row_fill")
    assert '    grid: ["div_ceil(n, 256)", 1, 1]  # check\n' in row_fill, row_fill
    # launches that disagree: the first, marked
    two = kernel_block(text, "two_ways")
    line = next(i for i, t in enumerate(SOURCE.splitlines(), 1) if "two_ways<<<" in t)
    assert f'    grid: ["div_ceil(n, 512)", 1, 1]  # check: as the source\'s launch at line {line} gives it; its ' \
        "launches give 2 geometries\n    block: [512, 1, 1]\n" in two, two

    # a variable of the launching function the spec cannot compute: a host argument, said so;
    # sizeof of the type a launch gives an axis
    gate = kernel_block(text, "gate")
    assert "      num_tokens: i64  # check: the launching function computes it: input.numel() / input.size(-1)\n" \
        in gate, gate
    assert '    grid: [num_tokens, 1, 1]  # as the source' in gate and '    shared_mem: "d * sizeof(scalar)"\n' in gate
    # cudaLaunchKernelEx: the configuration's members assigned, or its designated initializers
    pdl = kernel_block(text, "pdl")
    assert '    grid: ["div_ceil(n, 128)", 1, 1]  # as the source' in pdl and "    block: [128, 1, 1]\n" in pdl
    assert "launch: {programmatic_dependent: true}" in pdl
    ex = kernel_block(text, "ex_init")
    assert '    grid: ["n", 1, 1]  # as the source' in ex and "    block: [32, 4, 1]\n    shared_mem: 512\n" in ex, ex

    # a struct the kernel is passed: its fields (p.nrows_x); a variable set again after its
    # declaration (nth *= 2): a host argument; instances from the switch's launches
    sm = kernel_block(text, "soft_max_1")
    assert "      ncols_template: [32]  # the source's launches" in sm, sm
    assert "      nth: i32  # check: the launching function computes it: WARP_SIZE, then set again\n" in sm, sm
    assert "    grid: [p.nrows_x, 1, 1]  # as the source" in sm and "    block: [nth, 1, 1]\n" in sm
    assert '    shared_mem: "(div_ceil(p.ncols, 32) * 32 + 32) * 4"\n' in sm, sm
    # the switch's case: its condition over the struct's field that the local variable holds
    assert '    applies_if: ["p.ncols == 32"]  # as the source launches it\n    skip_if: [p.nrows_x == 0]\n' \
        "    examples: [{nth: 32, p.nrows_x: 32, p.ncols: 32}]" in sm, sm
    sm2 = kernel_block(text, "soft_max_2")
    assert '    applies_if: ["not (p.ncols == 32)"]  # as the source launches it\n' in sm2 and \
        "p.nrows_x: 1, p.ncols: 1}]" in sm2, sm2
    # a field of a struct whose declaration the draft does not read: the guess (the spec has no such field)
    opaque = kernel_block(text, "opaque")
    assert "# as the source" not in opaque and "rows" not in opaque.split("args:")[1], opaque
    # a function-like macro of the source, expanded
    ceil = kernel_block(text, "ceil")
    assert '    grid: ["div_ceil(n, 64)", 1, 1]  # as the source' in ceil, ceil
    # shared memory the spec cannot say (a macro): zero, marked with the launch's text
    padded = kernel_block(text, "padded")
    assert "    shared_mem: 0  # check: the launch gives PAD(n, 32) * 4 bytes, which the draft cannot write" in padded

    ks = {k.name: k for k in load_catalog(root).modules[0].kernels}

    def geo(name: str, **env: int) -> tuple[tuple[int, ...], tuple[int, ...], int]:
        k = ks[name]
        return (tuple(int(evaluate(e, env)) for e in k.grid), tuple(int(evaluate(e, env)) for e in k.block),
                int(evaluate(k.shared_mem, env)))

    assert geo("row_norm_1024", ncols=4096, nrows=7) == ((7, 1, 1), (1024, 1, 1), 0)
    assert geo("row_norm_32", ncols=512, nrows=3) == ((3, 1, 1), (32, 1, 1), 0)
    assert geo("softmax_rows", cols=300, rows=5) == ((5, 1, 1), (300, 1, 1), 1200)
    assert geo("scale", n=1000) == ((4, 1, 1), (256, 1, 1), 0)
    assert geo("gate_f32", d=300, num_tokens=9) == ((9, 1, 1), (300, 1, 1), 1200)
    assert geo("soft_max_32", nth=64, p_ncols=40, p_nrows_x=5) == ((5, 1, 1), (64, 1, 1), (64 + 32) * 4)
    # the chains launch the instance the source's code takes
    def applies(name: str, **env: int) -> bool:
        return all(evaluate(c.expr, env) for c in ks[name].applies_if)

    chains = {f.name: [m.kernel for m in f.members] for f in load_catalog(root).modules[0].fallbacks if not f.dispatch}
    assert chains == {"row_norm": ["row_norm_32", "row_norm_1024"], "soft_max": ["soft_max_32", "soft_max_0"]}, chains
    for ncols, want in ((100, "row_norm_32"), (1023, "row_norm_32"), (1024, "row_norm_1024"), (5000, "row_norm_1024")):
        assert next(k for k in chains["row_norm"] if applies(k, ncols=ncols, nrows=1)) == want, ncols
    for ncols, want in ((32, "soft_max_32"), (31, "soft_max_0"), (64, "soft_max_0")):
        assert next(k for k in chains["soft_max"] if applies(k, p_ncols=ncols, p_nrows_x=1, nth=32)) == want, ncols


def test_launch_site_reading() -> None:
    text = """
    void go(float* y, int n, int rows, cudaStream_t s) {
      const unsigned threads = 128;
      int blocks = static_cast<int>((n + threads - 1) / threads);
      dim3 grid = dim3(blocks, rows);
      ns::k<float, 4><<<grid, threads, threads * sizeof(float) * 2, s>>>(y, static_cast<int64_t>(n));
    }
    """
    (site,) = launch_sites(text, "k")
    assert site.template_args == ["float", "4"] and site.call_args == ["y", "static_cast<int64_t>(n)"]
    assert site.host_params == {"n": "int", "rows": "int"}
    geo = geometry(site, [("out", None), ("count", "i64")], {}, {"out", "count"})
    assert geo is not None
    assert geo.grid == ("div_ceil(count, 128)", "rows", "1") and geo.block == ("128", "1", "1")
    assert geo.shared_mem == "1024" and geo.host_args == [("rows", "i32")]
    # a name a host argument would take that the kernel's arguments already use: no geometry
    assert geometry(site, [("out", None), ("count", "i64")], {}, {"out", "count", "rows"}) is None
    # the source's function-like macros expanded; one the spec cannot write leaves the shared memory
    # unwritten, said with the launch's text
    text = """#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
    #define PAD(x, n) (((x) + (n) - 1) & ~((n) - 1))
    void go(float* y, int n) {
      const int smem = CEIL_DIV(n, 32) * 32 * sizeof(float);
      k<<<CEIL_DIV(n, 256), 256, smem>>>(y, n);
      k<<<CEIL_DIV(n, 256), 256, PAD(n, 32) * 4>>>(y, n);
    }"""
    first, second = (geometry(s, [("y", "f32*"), ("n", "i32")], {}, {"y", "n"}) for s in launch_sites(text, "k"))
    assert first is not None and first.grid[0] == "div_ceil(n, 256)" and first.shared_mem == "div_ceil(n, 32) * 32 * 4"
    assert second is not None and second.shared_mem is None and second.smem_text == "PAD(n, 32) * 4"
    # a shift, a float: none
    for config in ("n << 2", "n * 1.5"):
        (bad,) = launch_sites(f"void f(int n) {{ k<<<{config}, 32>>>(n); }}", "k")
        assert geometry(bad, [("n", "i32")], {}, {"n"}) is None, config
    # a ternary: the spec's conditional, also inside brackets and beside a comparison in the list
    text = """void f(int n) {
      const int threads = n < 1024 ? n : 1024;
      k<<<(n + threads - 1) / threads, threads, (n > 4096 ? 2 : 1) * 1024>>>(n);
    }"""
    (site,) = launch_sites(text, "k")
    tern = geometry(site, [("n", "i32")], {}, {"n"})
    assert tern is not None and tern.block[0] == "n if n < 1024 else 1024", tern
    assert tern.grid[0] == "(n + (n if n < 1024 else 1024) - 1) // (n if n < 1024 else 1024)", tern
    assert tern.shared_mem == "(2 if n > 4096 else 1) * 1024", tern
    # another kernel's launch, and a launch of a different arity, are not this kernel's
    assert launch_sites("void f(int n) { kk<<<n, 32>>>(n); }", "k") == []
    (other,) = launch_sites("void f(int n) { k<<<n, 32>>>(n, n); }", "k")
    assert geometry(other, [("n", "i32")], {}, {"n"}) is None


def test_the_conditions_launches_are_under() -> None:
    """if / else if / else (blocks and single statements, nested), switch with fallthrough and
    default: each launch's condition as C++ text; none outside them."""
    text = """
    void go(float* p, int n, bool wide) {
      if (wide) k<<<1, 1>>>(p, n);
      else k<<<2, 1>>>(p, n);
      if (n > 5) { for (int i = 0; i < 2; ++i) { k<<<3, 1>>>(p, n); } } else if (n > 2) { k<<<4, 1>>>(p, n); }
      else { k<<<5, 1>>>(p, n); }
      switch (n) { case 1: case 2: k<<<6, 1>>>(p, n); break; default: { k<<<7, 1>>>(p, n); } }
      k<<<8, 1>>>(p, n);
      if (n == 7) k<<<9, 1>>>(p, n); else if (n == 8) k<<<10, 1>>>(p, n); else k<<<11, 1>>>(p, n);
      if (wide) { if (n < 4) { k<<<12, 1>>>(p, n); } }
    }
    """
    guards = {site.config[0]: site.guard for site in launch_sites(text, "k")}
    assert guards == {
        "1": "wide", "2": "!(wide)", "3": "n > 5", "4": "n > 2 && !(n > 5)", "5": "!(n > 5) && !(n > 2)",
        "6": "n == 1 || n == 2", "7": "!(n == 1 || n == 2)", "8": None, "9": "n == 7", "10": "n == 8 && !(n == 7)",
        "11": "!(n == 7) && !(n == 8)", "12": "n < 4 && wide"}, guards


LAUNCH_FORMS = """\
#include <cuda_runtime.h>
#include <cooperative_groups.h>
namespace cfg { constexpr int kThreads = 128; }
struct Traits { static constexpr int kWarps = 4; };

__global__ void transpose(float* out, const float* in, int rows, int cols) {}

void run_transpose(float* out, const float* in, int rows, int cols, cudaStream_t s) {
  dim3 grid;
  grid.x = (cols + 31) / 32;
  grid.y = (rows + 31) / 32;
  dim3 block(32, 8);
  transpose<<<grid, block, 0, s>>>(out, in, rows, cols);
}

__global__ void bias_relu(float4* x, const float4* bias, unsigned n4, unsigned cols4) {}

void run_bias(float* x, const float* b, unsigned n, unsigned cols, cudaStream_t st) {
  dim3 block(128);
  dim3 grid((n / 4 + block.x - 1) / block.x);
  bias_relu<<<grid, block, block.x * sizeof(float), st>>>((float4*)x, (const float4*)b, n / 4, cols / 4);
}

__global__ void scale(float* x, float a, long n) {}

void run_scale(float* x, float a, long n, cudaStream_t s) {
  scale<<<(n + cfg::kThreads - 1) / cfg::kThreads, cfg::kThreads, 0, s>>>(x, a, n);
}

__global__ void warp_sum(const float* x, float* out, int n) {}

void run_warp_sum(const float* x, float* out, int n, cudaStream_t s) {
  constexpr int warps = Traits::kWarps;
  warp_sum<<<(n + warps * 32 - 1) / (warps * 32), warps * 32, 0, s>>>(x, out, n);
}

__global__ void fill(int* p, int v, unsigned n) {}

void run_fill(int* p, int v, unsigned n, cudaStream_t s) {
  void* args[] = {&p, (void*)&v, &n};
  cudaLaunchKernel((const void*)fill, dim3((n + 255) / 256), dim3(256), args, 0, s);
}

__global__ void grid_pass(float* p, int n) {}

void run_grid_pass(float* p, int n, int sms, cudaStream_t s) {
  void* kargs[2] = {&p, &n};
  cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(&grid_pass), sms * 2, 256, kargs, 1024, s);
}

struct ScaleParams { const float* x; float* y; int n; float alpha; };

__global__ void by_params(const __grid_constant__ ScaleParams p) {}

void run_by_params(const float* x, float* y, int n, float alpha, cudaStream_t s) {
  ScaleParams p{x, y, n, alpha};
  by_params<<<(n + 255) / 256, 256, 0, s>>>(p);
}

__global__ void by_named(ScaleParams p, int reps) {}

void run_by_named(float* y, int count, int reps, cudaStream_t s) {
  ScaleParams p = {.y = y, .alpha = 2.f};
  p.n = count;
  by_named<<<count, 64, 0, s>>>(p, reps);
}

template <typename T = float, bool kAccum = false>
__global__ void axpy(T* y, const T* x, T a, int n) {}

void run_axpy(double* y, const double* x, double a, int n, cudaStream_t s) {
  axpy<<<(n + 127) / 128, 128, 0, s>>>(y, x, a, n);
  axpy<double, true><<<(n + 127) / 128, 128, 0, s>>>(y, x, a, n);
}

template <typename T> __global__ void relu(T* x, int n) {}

template <typename T> void launch_relu(T* x, int n, cudaStream_t s) {
  if (n > 0) relu<T><<<(n + 255) / 256, 256, 0, s>>>(x, n);
}
template void launch_relu<float>(float*, int, cudaStream_t);
template void launch_relu<__nv_bfloat16>(__nv_bfloat16*, int, cudaStream_t);

__global__ void big_tile(const float* x, float* y, int n) { extern __shared__ float buf[]; }

void run_big(const float* x, float* y, int n, cudaStream_t s) {
  const int smem = 96 * 1024;
  cudaFuncSetAttribute(big_tile, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  big_tile<<<(n + 1023) / 1024, 256, smem, s>>>(x, y, n);
}

__global__ void huge_tile(const float* x, float* y, int n) { extern __shared__ float buf[]; }

void run_huge(const float* x, float* y, int n, cudaStream_t s) {
  huge_tile<<<(n + 1023) / 1024, 256, 200 * 1024, s>>>(x, y, n);
}

__global__ void chunked(const float* x, float* y, int n) {}

void run_chunked(const float* x, float* y, int n, cudaStream_t s) { chunked<<<n / 4096, 256, 0, s>>>(x, y, n); }

__global__ void __cluster_dims__(2, 1, 1) pairs(float* p, int n) {}

void run_pairs(float* p, int n, cudaStream_t s) { pairs<<<(n + 255) / 256 * 2, 256, 0, s>>>(p, n); }
"""


def test_launch_forms(tmp_path: Path) -> None:
    """A dim3 built by assigning its components and read by them, constants by qualified names,
    an expression passed to an argument, and launches through cudaLaunchKernel's argument array."""
    root = project(tmp_path, {"csrc/forms.cu": LAUNCH_FORMS})
    text = write_and_load(root, ["csrc/forms.cu"])["forms"]
    transpose = kernel_block(text, "transpose")
    assert '    grid: ["div_ceil(cols, 32)", "div_ceil(rows, 32)", 1]  # as the source' in transpose, transpose
    assert "    block: [32, 8, 1]\n" in transpose
    bias = kernel_block(text, "bias_relu")
    assert '    grid: ["div_ceil(n4, 128)", 1, 1]  # as the source' in bias, bias
    assert "    block: [128, 1, 1]\n    shared_mem: 512\n" in bias and "host_args" not in bias, bias
    scale = kernel_block(text, "scale")
    assert '    grid: ["div_ceil(n, 128)", 1, 1]  # as the source' in scale and "    block: [128, 1, 1]\n" in scale
    warp_sum = kernel_block(text, "warp_sum")
    assert '    grid: ["div_ceil(n, 128)", 1, 1]  # as the source' in warp_sum, warp_sum
    assert "    block: [128, 1, 1]\n" in warp_sum and "host_args" not in warp_sum
    fill = kernel_block(text, "fill")
    assert '    grid: ["div_ceil(n, 256)", 1, 1]  # as the source' in fill and "    block: [256, 1, 1]\n" in fill
    grid_pass = kernel_block(text, "grid_pass")
    assert "    host_args:  # the launching function's integers the launch uses\n      sms: i32\n" in grid_pass
    assert "    grid: [sms * 2, 1, 1]  # as the source" in grid_pass and "    shared_mem: 1024\n" in grid_pass
    assert "    launch: {cooperative: true}  # the source launches it with cudaLaunchCooperativeKernel\n" \
        in grid_pass, grid_pass
    # a cluster kernel's launch: its grid, and the cluster its declaration gives
    pairs = kernel_block(text, "pairs")
    assert '    grid: ["div_ceil(n, 256) * 2", 1, 1]  # as the source' in pairs, pairs
    assert "    block: [256, 1, 1]\n    cluster: [2, 1, 1]\n" in pairs, pairs

    # names the launching function puts into a struct it passes: that argument's fields, by
    # position or by designator or assigned after; the struct's count not drafted a second time
    by_params = kernel_block(text, "by_params")
    assert '    grid: ["div_ceil(p.n, 256)", 1, 1]  # as the source' in by_params, by_params
    assert "host_args" not in by_params and "    examples: [{p.n: 1024}]" in by_params, by_params
    by_named = kernel_block(text, "by_named")
    assert "    grid: [p.n, 1, 1]  # as the source" in by_named and "host_args" not in by_named, by_named
    # template arguments a launch leaves out: deduced from what it passes, or the defaults
    assert "  axpy_false:\n" in text and "  axpy_true:\n" in text, text
    assert 'symbol: "axpy<{T}, false>"' in text and "      T: [f64]  # the source's launches" in text, text

    # shared memory past 48 KB, up to what every target lets a block opt in to (gb10's 99 KB)
    big = kernel_block(text, "big_tile")
    assert '    grid: ["div_ceil(n, 1024)", 1, 1]  # as the source' in big and "    shared_mem: 98304\n" in big, big
    huge = kernel_block(text, "huge_tile")
    assert "# as the source" not in huge and "    # check: the source's launch at line" in huge and \
        "shared memory 204800) launches for none of the values tried (1 to 65536) within every target's limits (1024 threads " \
        "a block, 101376 bytes of shared memory): a guess stands in for it\n" in huge, huge
    # a grid of n / 4096 launches for larger values than the usual 1024
    chunked = kernel_block(text, "chunked")
    assert "    grid: [n // 4096, 1, 1]  # as the source" in chunked and '    examples: [{"n": 65536}]' in chunked
    # a launch in a function template: the instances the source instantiates that function with
    relu = kernel_block(text, "relu")
    assert "      T: [f32, bf16]  # the source's launches" in relu and '    grid: ["div_ceil(n, 256)", 1, 1]  # as' \
        in relu, relu

    ks = {k.name: k for k in load_catalog(root).modules[0].kernels}
    env = {"rows": 70, "cols": 100}
    assert [int(evaluate(e, env)) for e in ks["transpose"].grid] == [4, 3, 1]
    assert [int(evaluate(e, {"n4": 300})) for e in ks["bias_relu"].grid] == [3, 1, 1]


def test_passed_expressions_stand_where_they_are_whole() -> None:
    """An expression passed to an integer argument replaces only whole occurrences of it: not
    where a tighter or equally tight operator on its left would take part of it."""
    def grid(config: str, passed: str = "n / 4") -> str | None:
        (site,) = launch_sites(f"void f(float* x, int n, int m) {{ k<<<{config}, 32>>>(x, {passed}); }}", "k")
        geo = geometry(site, [("x", "f32*"), ("n4", "i32")], {}, {"x", "n4"})
        return geo.grid[0] if geo else None

    assert grid("(n / 4 + 31) / 32") == "div_ceil(n4, 32)"
    assert grid("m - n / 4") == "m - n4"
    assert grid("m * n / 4") == "m * n // 4"  # (m * n) / 4: n / 4 is not a part of it
    assert grid("n / 4 * 2") == "n4 * 2"
    assert grid("n / 4 / 2") == "n4 // 2"
    assert grid("m - n + 1", "n + 1") == "m - n + 1"  # (m - n) + 1
    assert grid("(n + 1) * 2", "n + 1") == "n4 * 2"
    assert grid("n + 1 * 2", "n + 1") == "n + 2"  # n + (1 * 2)
    assert grid("n + 1 - 2", "n + 1") == "n4 - 2"


def test_launches_in_function_templates_take_the_sources_instantiations() -> None:
    """A launch inside a function template whose template arguments are that function's parameters
    stands for each set of values the source gives the function: explicit instantiations, calls
    with template arguments, calls deducing them from what they pass. A launch after a condition
    on the same line is that kernel's (not a name inside the condition)."""
    text = """
    template <typename T> __global__ void relu(T* x, int n) {}
    template <typename T> void launch_relu(T* x, int n, cudaStream_t s) {
      relu<T><<<(n + 255) / 256, 256, 0, s>>>(x, n);
    }
    template void launch_relu<float>(float*, int, cudaStream_t);
    template void launch_relu<half>(half*, int, cudaStream_t);

    template <typename T, int BLOCK> __global__ void rowsum(const T* x, float* out, int cols) {}
    template <typename T, int WIDE = 512>
    void launch_rowsum(const T* x, float* out, int rows, int cols, cudaStream_t s) {
      if (cols <= 256) rowsum<T, 128><<<rows, 128, 0, s>>>(x, out, cols);
      else rowsum<T, WIDE><<<rows, WIDE, 0, s>>>(x, out, cols);
    }
    void run_all(const double* xd, const half* xh, float* out, int rows, int cols, cudaStream_t s) {
      launch_rowsum<double, 1024>(xd, out, rows, cols, s);
      launch_rowsum(xh, out, rows, cols, s);
    }
    """
    assert [s.template_args for s in launch_sites(text, "relu")] == [["float"], ["half"]]
    sites = launch_sites(text, "rowsum")
    assert [(s.template_args, s.config[1], s.guard) for s in sites] == [
        (["double", "128"], "128", "cols <= 256"), (["half", "128"], "128", "cols <= 256"),
        (["double", "1024"], "WIDE", "!(cols <= 256)"), (["half", "512"], "WIDE", "!(cols <= 256)")], sites
    # (T and WIDE, passed whole as the kernel's template arguments, keep their names in the configuration)
    assert [s.passed_params for s in sites] == [{0: "T"}, {0: "T"}, {0: "T", 1: "WIDE"}, {0: "T", 1: "WIDE"}]
    # a function template the source never instantiates: its launch as written
    (lone,) = launch_sites("template <typename T> void f(T* x, int n) { k<T><<<n, 32>>>(x, n); }", "k")
    assert lone.template_args == ["T"]


def test_a_launch_through_a_variable_naming_the_kernel() -> None:
    """auto kernel = &k<...>; kernel<<<...>>>(...): a launch of k with those template arguments."""
    text = """
    template <typename T, bool kEven> __global__ void k(const T* x, int n) {}
    void go(const float* x, int n, bool even, cudaStream_t s) {
      if (even) {
        auto kernel = &k<float, true>;
        kernel<<<n, 128, 0, s>>>(x, n);
      } else {
        auto kernel = k<float, false>;
        kernel<<<n, 64, 0, s>>>(x, n);
      }
    }
    """
    assert [(s.template_args, s.config[1], s.guard) for s in launch_sites(text, "k")] == [
        (["float", "true"], "128", "even"), (["float", "false"], "64", "!(even)")]
    assert launch_sites(text, "kernel") == []


def test_values_changed_after_they_are_given_are_not_read_as_given() -> None:
    """A dim3 given again whole is read so; one changed otherwise, and a struct member changed by a
    compound assignment, are not read as first given."""
    text = """
    void go(float* y, Params p, int n, int rows) {
      dim3 grid(n);
      grid = dim3(rows, 2);
      dim3 block(64);
      block.x *= 2;
      Params q{y, rows};
      q.n += 1;
      Params r{y, rows};
      k<<<grid, 32>>>(q, n);
      k<<<grid, block>>>(q, n);
      k<<<rows, 32>>>(r, n);
      k<<<rows, 32>>>(q, n);
    }
    """
    first, second, third, fourth = launch_sites(text, "k")
    assert first.dims["grid"] == ["rows", "2"] and "block" not in second.dims
    params = [("p", "params"), ("count", "i32")]
    members = {"p": ["y", "n"]}
    geo = geometry(first, params, {}, {"p", "count"}, members=members)
    assert geo is not None and geo.grid == ("rows", "2", "1") and geo.host_args == [("rows", "i32")]
    assert geometry(second, params, {}, {"p", "count"}, members=members) is None
    # rows is what r's member n holds, and r is passed as p: p.n; q's n, changed after, is not rows
    geo = geometry(third, params, {}, {"p", "count"}, members=members)
    assert geo is not None and geo.grid == ("p.n", "1", "1") and geo.host_args == []
    geo = geometry(fourth, params, {}, {"p", "count"}, members=members)
    assert geo is not None and geo.grid == ("rows", "1", "1") and geo.host_args == [("rows", "i32")]
    assert fourth.aggregates["q"] == {"0": "y", "1": "rows", "~n": "1"}


def test_a_flag_of_the_launching_function_chooses_the_instance(tmp_path: Path) -> None:
    """if (wide) k<512>... else k<128>...: the flag is a bool host argument, the conditions its
    applies_if, the examples 1 and 0."""
    source = """
    template <int BLOCK> __global__ void pick(float* y, int n) {}
    void run_pick(float* y, int n, bool wide, cudaStream_t s) {
      if (wide) pick<512><<<(n + 511) / 512, 512, 0, s>>>(y, n);
      else pick<128><<<(n + 127) / 128, 128, 0, s>>>(y, n);
    }
    """
    root = project(tmp_path, {"csrc/pick.cu": source})
    text = write_and_load(root, ["csrc/pick.cu"])["pick"]
    first, second = kernel_block(text, "pick_1"), kernel_block(text, "pick_2")
    assert "    host_args:  # the launching function's integers the launch uses\n      wide: bool\n" in first, first
    assert '    applies_if: ["wide != 0"]  # as the source launches it\n' in first and "wide: 1}]" in first, first
    assert '    applies_if: ["wide == 0"]  # as the source launches it\n' in second and "wide: 0}]" in second, second
    assert text.endswith("  pick: [pick_1, pick_2]\n"), text


def test_conditions_beside_a_guessed_geometry_are_said_not_written(tmp_path: Path) -> None:
    """Where the first condition's launch cannot be written (a member call), every condition is a
    check comment: an applies_if on a later kernel would not meet the guessed example."""
    source = """
    template <int BLOCK> __global__ void pick(float* y, int n) {}
    void run_pick(torch::Tensor& t, int n) {
      if (n < 100) pick<32><<<t.size(0), 32>>>(t.data_ptr<float>(), n);
      else pick<256><<<(n + 255) / 256, 256>>>(t.data_ptr<float>(), n);
    }
    """
    root = project(tmp_path, {"csrc/pick.cu": source})
    text = write_and_load(root, ["csrc/pick.cu"])["pick"]
    assert "applies_if:" not in text, text
    assert "    # check: the source launches it where n < 100: write that as applies_if" in text, text
    assert "    # check: the source launches it where !(n < 100): write that as applies_if" in text, text


def test_a_dispatch_macro_around_a_launch(tmp_path: Path) -> None:
    """BOOL_SWITCH(cond, kIsEven, [&] { k<kIsEven><<<...>>>(...); }), the dispatch macro of
    FlashAttention-style sources: expanded, its branches' constexpr give the instances, their
    conditions the applies_if; the lines after it keep their numbers."""
    source = """#define BOOL_SWITCH(COND, CONST_NAME, ...)      \\
  [&] {                                         \\
    if (COND) {                                 \\
      constexpr static bool CONST_NAME = true;  \\
      return __VA_ARGS__();                     \\
    } else {                                    \\
      constexpr static bool CONST_NAME = false; \\
      return __VA_ARGS__();                     \\
    }                                           \\
  }()
template <bool kEven> __global__ void even_k(float* y, int n) {}
void run(float* y, int n, cudaStream_t s) {
  BOOL_SWITCH(n % 4 == 0, kIsEven, [&] {
    even_k<kIsEven><<<(n + 255) / 256, 256, 0, s>>>(y, n);
  });
}
__global__ void after(float* y, int n) {}
void run_after(float* y, int n) { after<<<n, 32>>>(y, n); }
"""
    sites = launch_sites(source, "even_k")
    assert [(s.template_args, s.guard) for s in sites] == [(["true"], "n % 4 == 0"), (["false"], "!(n % 4 == 0)")]
    assert [s.line for s in launch_sites(source, "after")] == [18]
    root = project(tmp_path, {"csrc/even.cu": source})
    text = write_and_load(root, ["csrc/even.cu"])["even"]
    first, second = kernel_block(text, "even_k_true"), kernel_block(text, "even_k_false")
    assert '    applies_if: ["n % 4 == 0"]  # as the source launches it\n' in first, first
    assert '    applies_if: ["not (n % 4 == 0)"]  # as the source launches it\n' in second, second
    assert "  even_k: [even_k_true, even_k_false]\n" in text, text


def test_a_class_type_template_argument_of_the_launches_is_fixed(tmp_path: Path) -> None:
    """k<Cfg<64>, true> launched by the source (a traits class of its own as the type argument):
    the symbol spells it, where a guess stood before."""
    source = """
    template <int N> struct Cfg { static constexpr int kThreads = N; };
    template <typename Traits, bool kCausal> __global__ void attn(float* o, int n) {}
    void run(float* o, int n, cudaStream_t s) { attn<Cfg<64>, true><<<n, 64, 0, s>>>(o, n); }
    """
    root = project(tmp_path, {"csrc/attn.cu": source})
    text = write_and_load(root, ["csrc/attn.cu"])["attn"]
    assert '    symbol: "attn<Cfg<64>, true>"\n' in text and '    grid: ["n", 1, 1]  # as the source' in text, text


TRAITS_HEADER = "#pragma once\n" + TRAITS  # (traits classes with a base, defaults, sizeof)
def test_members_of_traits_classes_give_the_geometry(tmp_path: Path) -> None:
    """A launch sized by the members of a traits class template (FlashAttention's style:
    Kernel_traits::kNThreads, the traits given to the launching function template by a function
    template that an explicit instantiation fixes, or a local alias) reads the members' values from
    the class declarations in the source's header, the template arguments through both callers."""
    root = project(tmp_path, {f"csrc/{f.name}": f.read_text() for f in drafted.SOURCES.iterdir()})
    text = write_and_load(root, ["csrc/fwd.cu"])["fwd"]  # (tests/fixtures/drafted: traits.h, fwd.cu)
    first = kernel_block(text, drafted.FWD_128)  # (no '__' in a name)
    assert '    symbol: "fwd_kernel<Fwd_traits<128, 128, 64, 4, false, __half>, false>"\n' in first, first
    assert '    grid: ["div_ceil(params.seqlen_q, 128)", params.b, params.h]' in first, first
    assert "    block: [128, 1, 1]\n" in first and f"    shared_mem: {(128 + 128) * 128 * 2}\n" in first, first
    # the other instance, launched through a local alias: the alias's type, its own launch's geometry
    second = kernel_block(text, drafted.FWD_64)
    assert '    symbol: "fwd_kernel<Fwd_traits<64, 64, 32, 8>, true>"\n' in second, second
    assert "    grid: [params.b, 1, 1]" in second and "    block: [256, 1, 1]\n" in second, second
    assert f"    shared_mem: {(64 + 64) * 64 * 4}\n" in second and "    skip_if: [params.b == 0]\n" in second, second


def test_launch_bounds_of_a_traits_member_give_each_instance_its_block(tmp_path: Path) -> None:
    """Without a launch to read, __launch_bounds__(Kernel_traits::kNThreads) gives each explicit
    instantiation's block from its own traits class; an unreadable bound leaves the marked guess."""
    source = TRAITS_HEADER.replace("#pragma once\n", "") + """
    template <typename Kernel_traits, bool Is_causal>
    __global__ void __launch_bounds__(Kernel_traits::kNThreads) attn(float* o, int n) {}
    template __global__ void attn<Fwd_traits<128, 128, 64, 4>, true>(float*, int);
    template __global__ void attn<Fwd_traits<64, 64, 64, 8>, false>(float*, int);
    template <typename T> __global__ void __launch_bounds__(T::kUnknown) other(float* o, int n) {}
    template __global__ void other<Fwd_traits<64, 64, 64, 8>>(float*, int);
    """
    root = project(tmp_path, {"csrc/attn.cu": source})
    text = write_and_load(root, ["csrc/attn.cu"])["attn"]
    first = kernel_block(text, "attn_fwd_traits_128_128_64_4_true")
    assert "    block: [128, 1, 1]  # its __launch_bounds__(Kernel_traits::kNThreads) for this instance\n" in first, first
    second = kernel_block(text, "attn_fwd_traits_64_64_64_8_false")
    assert "    block: [256, 1, 1]  # its __launch_bounds__(Kernel_traits::kNThreads) for this instance" in second, second
    assert "    block: [256, 1, 1]  # check\n" in kernel_block(text, "other"), text


DISPATCH_HEADER = """\
#pragma once
#define ENG_DISPATCH_CASE_FLOATING_TYPES(...)              \\
  AT_DISPATCH_CASE(at::ScalarType::Float, __VA_ARGS__)     \\
  AT_DISPATCH_CASE(at::ScalarType::BFloat16, __VA_ARGS__)
#define ENG_DISPATCH_FLOATING_TYPES(TYPE, NAME, ...) \\
  AT_DISPATCH_SWITCH(TYPE, NAME, ENG_DISPATCH_CASE_FLOATING_TYPES(__VA_ARGS__))
"""
DISPATCH_SOURCE = """\
#include "dispatch.h"
template <typename scalar_t>
__global__ void act_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ input, const int d) {}
template <typename scalar_t, int width>
__global__ void add_norm_kernel(scalar_t* __restrict__ x, const scalar_t* __restrict__ w, const int n, const int h) {}

void act(torch::Tensor& out, torch::Tensor& input) {
  int d = input.size(-1);
  int64_t num_tokens = input.numel() / d;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::kBFloat16, input.scalar_type(), "act", [&] {
    act_kernel<<<num_tokens, std::min(d, 1024), 0, stream>>>(out.data_ptr<scalar_t>(), input.data_ptr<scalar_t>(), d);
  });
}

#define LAUNCH_ADD_NORM(width)                                                              \\
  ENG_DISPATCH_FLOATING_TYPES(x.scalar_type(), "add_norm", [&] {                           \\
    add_norm_kernel<scalar_t, width><<<n, 256, 0, stream>>>(x.data_ptr<scalar_t>(),      \\
                                                          w.data_ptr<scalar_t>(), n, h); \\
  });

void add_norm(torch::Tensor& x, torch::Tensor& w, int n, int h, cudaStream_t stream) {
  if (h % 8 == 0) {
    LAUNCH_ADD_NORM(8);
  } else {
    LAUNCH_ADD_NORM(1);
  }
}
"""


def test_pytorch_dispatch_macros_give_the_instances(tmp_path: Path) -> None:
    """Launches inside PyTorch's dispatch macros (ATen's AT_DISPATCH_* by their types, a project's
    own through its AT_DISPATCH_CASEs) are instances of each type they dispatch, c10's 16-bit
    types as CUDA's; a function-like macro whose body launches (LAUNCH_ADD_NORM(8)) is a launch
    where it is invoked, under the invocation's condition, and its #define none."""
    root = project(tmp_path, {"csrc/dispatch.h": DISPATCH_HEADER, "csrc/ops.cu": DISPATCH_SOURCE})
    text = write_and_load(root, ["csrc/ops.cu"])["ops"]
    act = kernel_block(text, "act")
    assert "      scalar: [f64, f32, f16, bf16]  # the source's launches; the types the source's " \
           "AT_DISPATCH_FLOATING_TYPES_AND2 gives scalar_t, c10's Half and BFloat16 as CUDA's __half and " \
           "__nv_bfloat16: check the kernel builds with those;" in act, act
    assert '    grid: [num_tokens, 1, 1]' in act and '    block: ["min(d, 1024)", 1, 1]' in act, act
    wide = kernel_block(text, "add_norm_8")
    assert "      scalar: [f32, bf16]" in wide and "      width: [8]  # the source's launches" in wide, wide
    assert '    applies_if: ["h % 8 == 0"]  # as the source launches it' in wide, wide
    assert "      width: [1]" in kernel_block(text, "add_norm_1"), text
    assert "fallbacks:" in text and "  add_norm: [add_norm_8, add_norm_1]" in text, text


def test_a_source_with_pytorch_code_is_told_to_keep_it_out_of_the_build(tmp_path: Path) -> None:
    (tmp_path / "torch").mkdir()
    (tmp_path / "plain").mkdir()
    root = project(tmp_path / "torch", {"csrc/dispatch.h": DISPATCH_HEADER,
                                        "csrc/ops.cu": "#include <torch/all.h>\n" + DISPATCH_SOURCE})
    text = write_and_load(root, ["csrc/ops.cu"])["ops"]
    assert "# check: csrc/ops.cu includes PyTorch's headers: the build compiles the whole source into the " \
           "project's library, which does not link libtorch" in text, text
    plain = write_and_load(project(tmp_path / "plain", {"csrc/ops.cu": "__global__ void k(float* x) {}\n"}),
                           ["csrc/ops.cu"])["ops"]
    assert "PyTorch" not in plain, plain


def test_enumerators_a_launch_gives_an_enum_template_parameter(tmp_path: Path) -> None:
    """k<Mode::kAdd> and k<Mode::kMul, 8> launched: an entry for each enumerator (an enum parameter
    is fixed per kernel), with the integer parameter's values (default or written) as its instances."""
    source = """
    enum class Mode : int { kAdd = 0, kMul = 1 };
    template <Mode M, int N = 4>
    __global__ void combine(float* out, const float* a, const long long n) {}
    void run(float* out, const float* a, long long n, cudaStream_t s) {
      combine<Mode::kAdd><<<(n + 255) / 256, 256, 0, s>>>(out, a, n);
      combine<Mode::kMul, 8><<<(n + 255) / 256, 256, 0, s>>>(out, a, n);
    }
    """
    text = write_and_load(project(tmp_path, {"csrc/combine.cu": source}), ["csrc/combine.cu"])["combine"]
    add, mul = kernel_block(text, "combine_kadd"), kernel_block(text, "combine_kmul")
    assert '    symbol: "combine<Mode::kAdd, {N}>"\n' in add and "      N: [4]  # the source's launches" in add, add
    assert '    symbol: "combine<Mode::kMul, {N}>"\n' in mul and "      N: [8]  # the source's launches" in mul, mul


def test_a_function_templates_parameters_stay_the_axes_in_its_launch(tmp_path: Path) -> None:
    """time<ROWS, W, KS>(...) launching k<ROWS, W, KS><<<n / ROWS * KS, 256, 3 * ROWS * W>>>: the
    parameters are the axes by name, whatever values the instances give them (ROWS == W in one, KS
    == 1: not read back as W or as the grid's unwritten extents)."""
    source = """
    template <int ROWS, int W, int KS> __global__ void pattern(const unsigned char* x, unsigned* sink) {}
    template <int ROWS, int W, int KS> void time_it(const unsigned char* x, unsigned* sink, unsigned n) {
      auto kern = pattern<ROWS, W, KS>;
      const int smem = 3 * ROWS * W;
      const unsigned grid = n / ROWS * KS;
      kern<<<grid, 256, smem>>>(x, sink);
    }
    void run(const unsigned char* x, unsigned* sink, unsigned n) {
      time_it<16, 64, 1>(x, sink, n);
      time_it<64, 64, 2>(x, sink, n);
    }
    """
    text = write_and_load(project(tmp_path, {"csrc/pattern.cu": source}), ["csrc/pattern.cu"])["pattern"]
    assert "      - {ROWS: 16, W: 64, KS: 1}\n      - {ROWS: 64, W: 64, KS: 2}\n" in text, text
    assert "    grid: [n // ROWS * KS, 1, 1]  # as the source's launch at line 7 gives it\n" in text, text
    assert '    shared_mem: "3 * ROWS * W"\n' in text and "    block: [256, 1, 1]\n" in text, text


def test_calls_of_one_line_helpers_and_library_ceil_divisions(tmp_path: Path) -> None:
    """A launch's expressions may call a one-line integer function of the source or its headers
    (its body put in, with the arguments) or a library's ceil-division (div_ceil); another call
    leaves the guess."""
    header = "#pragma once\n__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }\n"
    source = """
    #include "util.h"
    static inline int64_t round_up(int64_t x, int64_t m) { return ceil_div(x, m) * m; }
    __global__ void fill(float* x, int n) {}
    __global__ void pad(float* x, int n) {}
    __global__ void other(float* x, int n) {}
    void run(float* x, int n, cudaStream_t s) {
      fill<<<ceil_div(n, 256), 256, 0, s>>>(x, n);
      pad<<<cuda::ceil_div(n, 128), 128, round_up(n, 4) * 4, s>>>(x, n);
      other<<<compute_blocks(n), 128, 0, s>>>(x, n);
    }
    """
    text = write_and_load(project(tmp_path, {"csrc/util.h": header, "csrc/fill.cu": source}), ["csrc/fill.cu"])["fill"]
    assert '    grid: ["div_ceil(n, 256)", 1, 1]  # as the source' in kernel_block(text, "fill"), text
    pad = kernel_block(text, "pad")
    assert '    grid: ["div_ceil(n, 128)", 1, 1]  # as the source' in pad, pad
    assert '    shared_mem: "(div_ceil(n, 4) * 4) * 4"' in pad, pad
    assert "    grid: [" in kernel_block(text, "other") and "  # check" in kernel_block(text, "other"), text


def test_a_function_templates_element_type_stays_the_type_axis_in_sizeof(tmp_path: Path) -> None:
    """reduce<T> instantiated for double and float, launching k<T, 256> with T's sizeof in its
    shared memory: sizeof of the type axis, one geometry for both (not 8 and 4 read as two)."""
    source = """
    template <class T, unsigned int blockSize> __global__ void reduce6(T* in, T* out, unsigned int n) {}
    template <class T> void reduce(int size, int threads, int blocks, T* in, T* out) {
      int smem = (threads <= 32) ? 2 * threads * sizeof(T) : threads * sizeof(T);
      reduce6<T, 256><<<blocks, threads, smem>>>(in, out, size);
    }
    template void reduce<double>(int, int, int, double*, double*);
    template void reduce<float>(int, int, int, float*, float*);
    """
    text = write_and_load(project(tmp_path, {"csrc/reduce.cu": source}), ["csrc/reduce.cu"])["reduce"]
    assert "      T: [f64, f32]  # the source's launches" in text, text
    assert '    shared_mem: "2 * threads * sizeof(T) if threads <= 32 else threads * sizeof(T)"\n' in text, text
    assert "its launches give" not in text, text


def test_what_the_launching_code_queries_of_the_device_is_the_specs_device_names(tmp_path: Path) -> None:
    """cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ...), a cudaDeviceProp's
    members and cudaOccupancyMaxActiveBlocksPerMultiprocessor are the spec's device.* names and
    kernel.blocks_per_sm, where the spec takes them (not in block)."""
    source = """
    __global__ void persist(float* x, int n) {}
    __global__ void wide(float* x, int n) {}
    __global__ void blocky(float* x, int n) {}
    void run(float* x, int n, cudaStream_t s) {
      int dev = 0, sms = 0;
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
      int per_sm = 0;
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persist, 256, 0);
      persist<<<sms * per_sm, 256, 0, s>>>(x, n);
      cudaDeviceProp prop;
      cudaGetDeviceProperties(&prop, dev);
      wide<<<prop.multiProcessorCount * 2, 128, prop.sharedMemPerBlockOptin / 2, s>>>(x, n);
      blocky<<<n, at::cuda::getCurrentDeviceProperties()->maxThreadsPerBlock, 0, s>>>(x, n);
    }
    """
    text = write_and_load(project(tmp_path, {"csrc/k.cu": source}), ["csrc/k.cu"])["k"]
    assert "    grid: [device.sm_count * kernel.blocks_per_sm, 1, 1]  # as the source" in kernel_block(text, "persist")
    wide = kernel_block(text, "wide")
    assert "    grid: [device.sm_count * 2, 1, 1]  # as the source" in wide, wide
    assert "    shared_mem: device.max_shared_mem_optin // 2\n" in wide, wide
    assert "  # check" in kernel_block(text, "blocky").split("block:")[0], text  # a device name in block: the guess


def test_launch_conditions_split_explicit_instantiations_the_source_launches(tmp_path: Path) -> None:
    """Explicitly instantiated instances that the source launches under if / else are split by
    those conditions (applies_if and a chain), as launched ones are; an explicit instance no launch
    reaches keeps them comments."""
    head = """
    template <int BS> __global__ void rownorm(const float* x, float* y, int cols) {}
    template __global__ void rownorm<32>(const float*, float*, int);
    template __global__ void rownorm<1024>(const float*, float*, int);
    """
    body = """
    void run(const float* x, float* y, int rows, int cols, cudaStream_t s) {
      if (cols < 1024) rownorm<32><<<rows, 32, 0, s>>>(x, y, cols);
      else rownorm<1024><<<rows, 1024, 0, s>>>(x, y, cols);
    }
    """
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    text = write_and_load(project(tmp_path / "a", {"csrc/k.cu": head + body}), ["csrc/k.cu"])["k"]
    assert '    applies_if: ["cols < 1024"]  # as the source launches it' in kernel_block(text, "rownorm_1"), text
    assert '    applies_if: ["not (cols < 1024)"]' in kernel_block(text, "rownorm_2"), text
    assert "  rownorm: [rownorm_1, rownorm_2]" in text, text
    extra = head + "template __global__ void rownorm<64>(const float*, float*, int);\n" + body
    text = write_and_load(project(tmp_path / "b", {"csrc/k.cu": extra}), ["csrc/k.cu"])["k"]
    assert "applies_if" not in text and "fallbacks:" not in text, text


def test_a_number_given_a_template_parameter_is_that_parameter_only_where_the_launches_need_it(tmp_path: Path) -> None:
    """k<1, 2> and k<2, 1> launched over one dim3(g, 1, 2) with 2 * 1024 bytes: the numbers stay
    numbers (not UNROLL and VEC by their values, which gave k<2, 1> half the shared memory and a
    grid of [g, 2, 1]); b<128> and b<256> launched with blocks of 128 and 256 threads: the block is
    the parameter, one geometry for both."""
    source = """
    template <int UNROLL, int VEC> __global__ void k(float* x, int n) {}
    template <int BS> __global__ void b(float* x, int n) {}
    void h(float* x, int n, cudaStream_t s) {
      dim3 grid((n + 255) / 256, 1, 2);
      k<1, 2><<<grid, 256, 2 * 1024, s>>>(x, n);
      k<2, 1><<<grid, 256, 2 * 1024, s>>>(x, n);
      b<128><<<n, 128, 0, s>>>(x, n);
      b<256><<<n, 256, 0, s>>>(x, n);
    }
    """
    root = project(tmp_path, {"csrc/u.cu": source})
    text = write_and_load(root, ["csrc/u.cu"])["u"]
    k = kernel_block(text, "k")
    assert '    grid: ["div_ceil(n, 256)", 1, 2]  # as the source' in k, k
    assert "    shared_mem: 2048\n" in k and "geometries" not in k, k
    b = kernel_block(text, "b")
    assert "    block: [BS, 1, 1]\n" in b, b


def test_an_instance_the_launching_code_chooses_gets_its_own_launchs_geometry(tmp_path: Path) -> None:
    """if / else and switch between instances whose launches differ in more than the template
    argument: each entry of the chain has its own launch's grid, block and shared memory (the later
    ones took the first's: rn<2> planned with rn<1>'s block of 64)."""
    source = """
    template <int V> __global__ void rn(const float* x, float* y, int ncols) {}
    void run(const float* x, float* y, int ncols, int nrows, cudaStream_t s) {
      if (ncols < 1024) rn<1><<<nrows, 64, 0, s>>>(x, y, ncols); else rn<2><<<nrows * 2, 512, 128, s>>>(x, y, ncols);
    }
    template <int HD> __global__ void hd(const float* x, int n) {}
    void run2(const float* x, int n, int d, cudaStream_t s) {
      switch (d) { case 64: hd<64><<<n, 64, 0, s>>>(x, n); break; case 128: hd<128><<<n, 256, 0, s>>>(x, n); break; }
    }
    """
    root = project(tmp_path, {"csrc/l3.cu": source})
    text = write_and_load(root, ["csrc/l3.cu"])["l3"]
    first, second = kernel_block(text, "rn_v1"), kernel_block(text, "rn_v2")
    assert "    block: [64, 1, 1]\n" in first, text
    assert "    grid: [nrows * 2, 1, 1]  # as the source's launch" in second and "    block: [512, 1, 1]\n" in second \
        and "    shared_mem: 128\n" in second, text
    assert "    block: [256, 1, 1]\n" in kernel_block(text, "hd_2"), text
    plans = load_catalog(root)
    by = {k.name: k for m in plans.modules for k in m.kernels}
    assert {"rn_1", "rn_2", "hd_64", "hd_128"} <= set(by), sorted(by)
