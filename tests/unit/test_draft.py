"""`kernelgen draft`: a first module spec from the __global__ functions of a CUDA source. The
C++ parameter types map to the registry's, names the spec may not use are renamed, templates
become instantiations, unknown by-value types become struct entries, overloads get a kernel
each; the draft loads and generates as written. (That the drafted args agree with the compiled
kernels is checked by a build: tests/compile/test_arrays_fixture.py.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kernelgen.cli import main
from kernelgen.draft import draft, read_globals
from kernelgen.emit import render_catalog
from kernelgen.loader import load_catalog
from tests.unit.test_loader import write_project

SOURCE = """\
#include <cstdint>
#include <cuda_bf16.h>
// __global__ void commented_out(float* x);
enum class Mode : uint8_t { a, b };
enum Plain { p0, p1 };
struct Params { float scale; int n; };
namespace lib { namespace detail {
template <typename T, int BLOCK, bool kFast = true>
__global__ void __launch_bounds__(BLOCK) norm_kernel(const T* __restrict__ in, T* __restrict__ out,
                                                     const float* const weight, int64_t rows, int cols,
                                                     float eps = 1e-6f);
template <typename T, int BLOCK, bool kFast>
__global__ void __launch_bounds__(BLOCK) norm_kernel(const T* __restrict__ in, T* __restrict__ out,
                                                     const float* const weight, int64_t rows, int cols,
                                                     float eps) {}
} }
__global__ void __launch_bounds__(128, 2) mixed(const float4* v, const float* const* rows, float** outs,
                                              size_t n, long long off, unsigned char flag, Mode mode,
                                              Plain plain, Params params, unsigned short w, char c,
                                              __nv_bfloat16 b, int stream, float*) {}
__global__ void add(float* x, unsigned n) {}
__global__ void add(double* x, unsigned n) {}
__global__ void noargs() {}
template <typename T, int VEC> __global__ void scale_by(T a, T* y, unsigned n) {}
template <class Op> __global__ void apply(Op op, float* y, unsigned n) {}
__global__ void gather(const Params* params, float3* out, unsigned n) {}
using index_t = int64_t;
typedef unsigned int uint;
typedef index_t offset_t;
__global__ void aliased(const index_t* idx, offset_t off, uint count, float* out) {}
template <int B> __global__ void tsum(const float* x, float* out, unsigned n) { extern __shared__ float acc[]; }
template __global__ void tsum<128>(const float*, float*, unsigned);
__global__ void by_vec(float3 d, __half2 h, int2 lim, float* out);
__global__ void by_vec(float3 d, __half2 h, int2 lim, float* out) {
  extern __shared__ __align__(16) unsigned char raw[];
}
__global__ void handles(cudaTextureObject_t tex, const __grid_constant__ CUtensorMap tmap, float* out) {}
"""


def test_draft_maps_parameters_templates_and_overloads() -> None:
    assert [g.qualified for g in read_globals(SOURCE)] == ["lib::detail::norm_kernel", "mixed", "add", "add",
                                                           "noargs", "scale_by", "apply", "gather", "aliased",
                                                           "tsum", "by_vec", "handles"]
    text = draft("kernels/src.cu", SOURCE, "src")
    assert "commented_out" not in text
    assert """\
  norm:
    symbol: "lib::detail::norm_kernel<{T}, {BLOCK}, true>"  # check the template arguments
    summary: What norm_kernel computes.  # check
    instantiate:
      T: [f32]  # check: the element types to build it for
      BLOCK: [256]  # check: the values to build it for
    args:
      in_arg: "const {T}*"
      out: "{T}*"
      weight: const f32*
      rows: i64
      cols: i32
      eps: f32
    grid: ["div_ceil(rows, BLOCK)", 1, 1]  # check
    block: [BLOCK, 1, 1]
    skip_if: [rows == 0]
""" in text, text
    assert """\
    args:
      v: const f32x4*
      rows: const f32* const*
      outs: f32**
      "n": u64
      "off": i64
      flag: u8
      mode: u8  # enum Mode
      plain: u32  # check: plain enum Plain has no negative enumerator, so GCC and nvcc give it the underlying type unsigned int (fix it: enum E : uint32_t)
      params: params_type  # 'Params' by value
      w: u16
      c: i8
      b: bf16
      stream_arg: i32
      arg13: f32*
    grid: ["div_ceil(n, 128)", 1, 1]  # check
    block: [128, 1, 1]
""" in text, text
    assert "structs:  # check: give each its fields" in text
    assert "  params_type: {cpp: Params, fields: {scale: f32, n: i32}}  # not 'params': an argument of mixed\n" in text
    assert "  add_f32:\n    symbol: add\n" in text and "  add_f64:\n    symbol: add\n" in text
    assert '      x: f64*\n      "n": u32\n' in text
    assert "  noargs:\n    symbol: noargs\n" in text and '    grid: ["1", 1, 1]  # check' in text
    assert '    args:\n      a: "{T}"\n      "y": "{T}*"\n' in text  # a scalar of the element type
    assert "      VEC: [4]  # check: the values to build it for" in text
    assert "    symbol: \"apply<Op>\"  # check the template arguments" in text
    assert "      op: op_type  # template type 'Op' by value: give the type" in text
    assert "  op_type: {cpp: Op, fields: {}}" in text
    assert "    args:\n      idx: const i64*\n      \"off\": i64\n      count: u32\n      out: f32*\n" in text  # aliases
    assert "      params: const void*  # 'Params*': untyped memory, sized in bytes; the kernel keeps its type\n" \
           "      out: f32x3*\n" in text
    assert 'examples: [{"n": 1024, "off": 1, flag: 1, mode: 1, plain: 1, w: 1, c: 1, stream_arg: 1}]' in text
    # an explicit instantiation is not a kernel of its own; dynamic shared memory gets a guess
    assert text.count("symbol: \"tsum<{B}>\"") == 1 and "tsum_f32" not in text
    assert "      B: [128]  # the source's explicit instantiations\n" in text
    assert '    shared_mem: "256 * 4"  # check: the bytes of its extern __shared__ float array\n' in text
    assert '    shared_mem: "256 * 1"  # check: the bytes of its extern __shared__ unsigned char array\n' in text
    # CUDA's vector types by value: struct entries with their lanes (and alignment)
    assert "      d: float3  # 'float3' by value\n      h: half2  # '__half2' by value\n" \
           "      lim: int2  # 'int2' by value\n" in text, text
    assert "  float3: {cpp: float3, fields: {x: f32, y: f32, z: f32}}\n" in text
    assert "  half2: {cpp: __half2, fields: {x: f16, y: f16}, align: 4}\n" in text
    assert "  int2: {cpp: int2, fields: {x: i32, y: i32}, align: 8}\n" in text
    # CUDA's handles and TMA descriptors
    assert "      tex: u64  # cudaTextureObject_t: a handle, passed as its integer\n" in text
    assert '  cutensormap: {cpp: CUtensorMap, fields: {opaque: "u64[16]"}, align: 128}\n' in text


def test_a_draft_loads_and_generates(tmp_path: Path) -> None:
    """The draft is a valid spec as written (the struct entry without fields stands for the
    by-value type until its fields are given)."""
    text = draft("kernels/demo.cu", SOURCE, "demo")
    root = write_project(tmp_path, text)
    (root / "kernels" / "demo.cu").write_text(SOURCE)
    catalog = load_catalog(root)
    names = [k.name for k in catalog.module("demo").kernels]
    assert names == ["norm_f32_256", "mixed", "add_f32", "add_f64", "noargs", "scale_by_f32_4", "apply", "gather",
                     "aliased", "tsum_128", "by_vec", "handles"], names
    files = render_catalog(catalog)
    pyi = files["generated/hopper/python/demo.pyi"]
    ast.parse(pyi)  # a kernel without parameters has no bare '*' in its stubs
    assert "    def plan(self) -> _kg_Plan: ...\n\nnoargs: _kg_launcher_noargs" in pyi
    assert "def plan_noargs() -> _kg_Plan: ..." in pyi and '"""(*, stream=None) -> Outcome' in pyi


def test_draft_command_prints_writes_and_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_project(tmp_path, draft("kernels/demo.cu", SOURCE, "demo"), "other.yaml")
    (root / "kernels" / "mine.cu").write_text(SOURCE)
    assert main(["--root", str(root), "draft", str(root / "kernels" / "mine.cu"), "-k", "add"]) == 0
    out = capsys.readouterr().out
    assert "module: mine\n" in out and "sources: [kernels/mine.cu]" in out
    assert "add_f32:" in out and "norm" not in out
    assert main(["--root", str(root), "draft", str(root / "kernels" / "mine.cu"), "--write", "-m", "mine_ops"]) == 0
    assert "wrote specs/mine_ops.yaml" in capsys.readouterr().out
    assert (root / "specs" / "mine_ops.yaml").read_text().startswith("# Drafted by `kernelgen draft`")
    assert main(["--root", str(root), "draft", str(root / "kernels" / "mine.cu"), "--write", "-m", "mine_ops"]) == 2
    assert "specs/mine_ops.yaml exists; use --force" in capsys.readouterr().err
    assert main(["--root", str(root), "draft", str(root / "kernels" / "mine.cu"), "-k", "nothing"]) == 2
    assert "declares no __global__ function nothing (it declares: lib::detail::norm_kernel, mixed, add, add, " \
           "noargs, scale_by, apply, gather, aliased, tsum, by_vec, handles)" in capsys.readouterr().err
    outside = tmp_path.parent / f"{tmp_path.name}_outside.cu"
    outside.write_text(SOURCE)
    assert main(["--root", str(root), "draft", str(outside)]) == 2
    assert "is outside the project" in capsys.readouterr().err
    (root / "kernels" / "2d-blur.cu").write_text("__global__ void blur(const float* x, float* y, int n) {}\n")
    assert main(["--root", str(root), "draft", str(root / "kernels" / "mine.cu"),
                 str(root / "kernels" / "2d-blur.cu")]) == 2
    assert "several sources need --write: each writes its own spec file" in capsys.readouterr().err
    assert main(["--root", str(root), "draft", str(root / "kernels" / "mine.cu"),
                 str(root / "kernels" / "2d-blur.cu"), "--write", "--force"]) == 0
    assert "wrote specs/mine.yaml\nkernelgen: wrote specs/m_2d_blur.yaml\n" in capsys.readouterr().out
    assert "module: m_2d_blur\n" in (root / "specs" / "m_2d_blur.yaml").read_text()
    (root / "kernels" / "empty.cu").write_text("// nothing\n")
    assert main(["--root", str(root), "draft", str(root / "kernels" / "empty.cu")]) == 2
    assert "declares no __global__ function" in capsys.readouterr().err


def test_drafts_of_the_catalogs_own_sources_load(tmp_path: Path) -> None:
    """Every kernel source of this repository drafts into a spec that loads and generates:
    clusters (literal and template parameters), launch bounds, templates, FP8 and BF16 types."""
    import shutil

    from kernelgen.errors import KernelgenError

    repo = Path(__file__).resolve().parents[2]
    shutil.copytree(repo / "kernels", tmp_path / "kernels")
    drafted = 0
    for src in sorted((repo / "kernels").rglob("*.cu*")):
        rel = src.relative_to(repo).as_posix()
        module = "d_" + src.stem.lower()
        try:
            text = draft(rel, src.read_text(), module)
        except KernelgenError as exc:  # a header of device helpers
            assert "declares no __global__ function" in str(exc), (rel, exc)
            continue
        shutil.rmtree(tmp_path / "specs", ignore_errors=True)
        (tmp_path / "specs").mkdir()
        shutil.copy(repo / "specs" / "targets.yaml", tmp_path / "specs")
        (tmp_path / "specs" / f"{module}.yaml").write_text(text)
        catalog = load_catalog(tmp_path)
        assert catalog.modules[0].kernels, rel
        render_catalog(catalog)
        drafted += 1
    assert drafted >= 25, drafted
