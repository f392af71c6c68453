"""`kernelgen draft` on names the global scope must spell, macros inside parameter lists and class
types declared other than by ``struct Name {``: template arguments of explicit instantiations
and defaults qualified from the global scope (enumerators, constants, types), parameters whose
types are macros expanded (or said to be unexpandable), typedef'd and templated structs found
with their namespaces and fields. Each draft is loaded and rendered."""

from __future__ import annotations

from pathlib import Path

from kernelgen.draft import draft, read_globals
from kernelgen.emit import render_catalog
from kernelgen.loader import load_catalog
from tests.unit.test_loader import write_project


def load(tmp_path: Path, source: str) -> str:
    text = draft("kernels/src.cu", source, "demo")
    root = write_project(tmp_path, text)
    (root / "kernels" / "src.cu").write_text(source)
    render_catalog(load_catalog(root))
    return text


TEMPLATE_ARGS = """\
namespace pr {
enum class Act { Relu, Gelu };
enum Mode { kA, kB };
constexpr int kBlock = 128;
template <typename T> struct Vec { T x; };
struct Identity {};
namespace detail { struct Op2 {}; }
template <bool HAS_BIAS, Act A> __global__ void tbool(float* x, int n) {}
template __global__ void tbool<true, Act::Relu>(float*, int);
template <typename V, Mode M, int B> __global__ void tinst(float* x, int n) {}
template __global__ void tinst<Vec<float>, kA, kBlock>(float*, int);
template __global__ void tinst<detail::Op2, kB, 64>(float*, int);
template <typename T, int B = kBlock, Act A = Act::Gelu, Mode M = kB, typename O = Identity>
__global__ void tdef(T* x, int n) {}
template <class Op> __global__ void functor(Op op, float* out) {}
template __global__ void functor<Identity>(Identity, float*);
}
template __global__ void pr::tbool<false, pr::Act::Gelu>(float*, int);
"""


def test_template_arguments_are_spelled_from_the_global_scope(tmp_path: Path) -> None:
    text = load(tmp_path, TEMPLATE_ARGS)
    assert 'symbol: "pr::tbool<true, pr::Act::Relu>"' in text, text
    assert 'symbol: "pr::tbool<false, pr::Act::Gelu>"' in text, text  # already qualified: kept
    assert 'symbol: "pr::tinst<pr::Vec<float>, pr::kA, {B}>"' in text, text
    assert 'symbol: "pr::tinst<pr::detail::Op2, pr::kB, {B}>"' in text, text
    assert "      B: [128]  # the source's explicit instantiations" in text  # a constexpr constant's value
    assert "      B: [64]  # the source's explicit instantiations" in text
    # defaults, written in the template's namespace
    assert 'symbol: "pr::tdef<{T}, {B}, pr::Act::Gelu, pr::kB, pr::Identity>"' in text, text
    assert "      B: [128]  # check: the values to build it for" in text
    # a functor's type, given by the explicit instantiation, is its struct entry's C++ type
    assert 'symbol: "pr::functor<pr::Identity>"' in text
    assert '  identity: {cpp: "pr::Identity", fields: {}}' in text, text
    assert "Act::Relu>" not in text.replace("pr::Act::Relu>", "")


PARAM_MACROS = """\
#include "ptr.cuh"
#define ARGS2(T) T* a, T* b
#define IDX long long
#define V(...) __VA_ARGS__
#define ONE(T, U) T
__global__ void mac(PTR(float) x, PTR(const float) y, int n) {}
__global__ void more(ARGS2(float), IDX n, V(const float*) z, HIDDEN(float) w, ONE(int) q) {}
"""


def test_macros_in_parameter_lists_are_expanded(tmp_path: Path) -> None:
    (tmp_path / "a" / "kernels").mkdir(parents=True)
    (tmp_path / "a" / "kernels" / "ptr.cuh").write_text("#pragma once\n#define RESTRICT __restrict__\n"
                                                        "#define PTR(T) T* RESTRICT\n")
    text = draft("kernels/src.cu", PARAM_MACROS, "demo", root=tmp_path / "a")
    assert "structs:" not in text and "PTR(" not in text.split("kernels:")[1].split("more:")[0], text
    assert "    args:\n      x: f32*\n      \"y\": const f32*\n      \"n\": i32\n" in text, text
    assert "    args:\n      a: f32*\n      b: f32*\n      \"n\": i64\n      z: const f32*\n" in text, text
    # a macro the source does not define, or one its arguments do not match: said, not a struct
    assert "      w: void*  # check: 'HIDDEN(float) w' uses HIDDEN(...), a macro neither the source nor " \
           "the headers it includes with quotes define: give its type\n" in text, text
    assert "# check: more: parameter w: 'HIDDEN(float) w' uses HIDDEN(...)" in text
    assert "      q: void*  # check: 'ONE(int) q' uses ONE(...), a macro whose parameters its arguments do " \
           "not match: give its type\n" in text, text
    (tmp_path / "b").mkdir()
    root = write_project(tmp_path / "b", text)
    (root / "kernels" / "src.cu").write_text(PARAM_MACROS)
    (root / "kernels" / "ptr.cuh").write_text((tmp_path / "a" / "kernels" / "ptr.cuh").read_text())
    render_catalog(load_catalog(root))


RECORDS = """\
#include <cstdint>
namespace pr {
template <typename T> struct TP { T a; int b; };
template <typename T> __global__ void k(TP<T> t, T* out) {}
template __global__ void k<float>(TP<float>, float*);
template __global__ void k<double>(TP<double>, double*);
typedef struct { int a; float b; } TdParams;
typedef struct Tagged { int64_t n; } Named, *NamedPtr;
struct Raw { double d; };
using Alias = Raw;
__global__ void td(TdParams p, Named q, Alias r, float* out) {}
namespace in { template <int N> struct Tile { float v[4]; int n; }; }
template <int N> __global__ void tiled(in::Tile<N> t, float* out) {}
}
"""


def test_typedef_and_template_structs_are_found_with_their_namespaces(tmp_path: Path) -> None:
    text = load(tmp_path, RECORDS)
    assert "neither the source nor the headers" not in text, text
    # a class template's instance or a typedef'd struct cannot be forward-declared: its file is the header
    assert '  tp_float: {cpp: "pr::TP<float>", fields: {a: f32, b: i32}, header: kernels/src.cu}  # check: ' \
        'the C++ API header includes kernels/src.cu for the type, and the build includes it again' in text, text
    assert '  tp_double: {cpp: "pr::TP<double>", fields: {a: f64, b: i32}, header: kernels/src.cu}' in text, text
    assert 'symbol: "pr::k<float>"' in text and 'symbol: "pr::k<double>"' in text
    assert "      t: tp_double" in text and "      out: f64*" in text  # the second kernel's own args
    assert '  tdparams: {cpp: "pr::TdParams", fields: {a: i32, b: f32}, header: kernels/src.cu}' in text, text
    assert '  named: {cpp: "pr::Named", fields: {n: i64}, header: kernels/src.cu}' in text, text
    assert '  raw: {cpp: "pr::Raw", fields: {d: f64}}' in text, text
    # an integer parameter of a class template passed by value: fixed per kernel, not an axis
    assert 'symbol: "pr::tiled<4>"' in text, text
    assert '{cpp: "pr::in::Tile<4>", fields: {v: "f32[4]", n: i32}, header: kernels/src.cu}' in text, text
    assert [g.qualified for g in read_globals(RECORDS)] == ["pr::k", "pr::td", "pr::tiled"]


KERNEL_API = """\
#define KERNEL_API extern "C" __global__
#define MAKE(T, N) __global__ void fill_##N(T* p, int n)
KERNEL_API void c_axpy(float a, const float* x, float* y, int n) {}
MAKE(float, f32) {}
__global__ void plain(float* y, int n) {}
"""


def test_the_draft_and_the_loader_read_macro_declared_kernels_alike(tmp_path: Path) -> None:
    """The draft's kernels are the loader's __global__ functions: no warning for a symbol declared
    through a macro."""
    from kernelgen.kernel_source import global_decls, strip_comments

    text = load(tmp_path, KERNEL_API)
    assert "    symbol: c_axpy\n" in text and "    symbol: fill_f32\n" in text
    assert [d.qualified for d in global_decls(strip_comments(KERNEL_API))] == ["c_axpy", "fill_f32", "plain"]
