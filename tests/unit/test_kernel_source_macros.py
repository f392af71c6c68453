"""kernel_source reads kernels declared through macros as the draft does: the macros that spell
``__global__`` (object-like or function-like, in the source or a header it includes) are expanded
before declarations are read, by the one expansion both use; macros in parameter lists are
expanded before parameters are read, and an invocation left makes the list unread."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen.kernel_source import (
    expand_macros,
    global_declarations,
    global_decls,
    global_names,
    macros_of,
    params_of,
    source_global_decls,
    strip_comments,
)
from kernelgen.loader import load_catalog
from tests.unit.test_loader import write_project

HEADER = '#pragma once\n#define KERNEL_API extern "C" __global__\n#define MAKE(T, N) __global__ void fill_##N(T* p)\n'
SOURCE = """\
#include "common.cuh"
KERNEL_API void c_axpy(float a, const float* x, float* y, int n) {}
MAKE(float, f32) {}
__global__ void plain(float* y, int n) {}
"""


def test_global_decls_expand_the_kernel_macros_of_the_text_and_of_its_headers() -> None:
    assert [d.qualified for d in global_decls(strip_comments(SOURCE))] == ["plain"]  # the header's are not known
    assert [d.qualified for d in global_decls(strip_comments(HEADER + SOURCE))] == ["c_axpy", "fill_f32", "plain"]
    sources = [("csrc/x.cu", SOURCE), ("csrc/common.cuh", HEADER)]
    assert [(p, d.qualified) for p, d in source_global_decls(sources)] == [
        ("csrc/x.cu", "c_axpy"), ("csrc/x.cu", "fill_f32"), ("csrc/x.cu", "plain")]
    assert global_names(sources) == ["c_axpy", "fill_f32", "plain"]
    (decl,) = global_declarations(sources, "c_axpy")
    assert decl.where == "csrc/x.cu:2" and [p.spec_type for p in decl.params or ()] == ["f32", "const f32*", "f32*",
                                                                                         "i32"]
    (made,) = global_declarations(sources, "fill_f32")  # a function-like macro's: parameters left to the build
    assert made.where == "csrc/x.cu:3" and made.params is None
    # a macro's body is no declaration where it is defined
    assert global_decls(strip_comments(HEADER)) == []


def test_macros_in_parameter_lists() -> None:
    macros = macros_of("#define PTR(T) T* RESTRICT\n#define RESTRICT __restrict__\n#define TWO(T) T* a, T* b\n"
                       "#define V(...) __VA_ARGS__\n#define SELF SELF\n")
    assert expand_macros("PTR(const float) x, TWO(int), V(int n, float s), SELF q", macros) == (
        "const float* __restrict__ x, int* a, int* b , int n, float s , SELF q", [])
    assert expand_macros("PTR(float, int) x", macros)[1] == ["PTR(float, int)"]
    # an invocation left may stand for several parameters: the list is not read
    assert params_of("TWO(float), int n") is None
    assert params_of("void (*fn)(int), int n") is not None
    src = "#define TWO(T) T* a, T* b\n__global__ void k(TWO(float), int n) {}\n"
    (decl,) = global_declarations([("k.cu", src)], "k")
    assert [p.spec_type for p in decl.params or ()] == ["f32*", "f32*", "i32"]


SPEC = """\
module: demo
summary: d
sources: [kernels/demo.cu]
kernels:
  c_axpy:
    symbol: c_axpy
    summary: s
    args: {a: f32, x: const f32*, y: f32*, n: i32}
    grid: [1, 1, 1]
    block: [32, 1, 1]
    examples: [{n: 1}]
"""


def test_a_macro_declared_extern_c_kernel_loads_without_a_warning(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    root = write_project(tmp_path, SPEC)
    (root / "kernels" / "demo.cu").write_text(HEADER + SOURCE.replace('#include "common.cuh"\n', ""))
    load_catalog(root)
    assert "warning" not in capsys.readouterr().err
    # the kernel's parameters are read through the macro: a wrong spec is an error
    (root / "specs" / "demo.yaml").write_text(SPEC.replace("n: i32", "n: i64"))
    with pytest.raises(Exception, match="parameter 4"):
        load_catalog(root)
