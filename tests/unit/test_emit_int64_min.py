"""-2**63 in generated C and C++: a constant or a variant value of INT64_MIN is spelled so that
no compiler reads an unsigned literal (`-9223372036854775808` is 9223372036854775808 negated);
Python, Rust and the comments keep the plain number."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kernelgen.emit import base, render_catalog
from kernelgen.loader import load_catalog
from tests.unit.test_loader_mistakes import SOURCE, SPEC, project, sub

MIN = "-9223372036854775808"
SPELLED = "(-9223372036854775807LL - 1)"

WIDE_SOURCE = SOURCE + """\
__global__ void low_kernel(const float* x, float* out, uint32_t n, int64_t t) {}
__global__ void zero_kernel(const float* x, float* out, uint32_t n, int64_t t) {}
"""
WIDE = sub("    symbol: add_kernel\n", f"    variants: {{arg: t, symbols: {{{MIN}: low_kernel, 0: zero_kernel}}}}\n", sub(
    "args: {x: const f32*, out: f32*, n: u32}", "args: {x: const f32*, out: f32*, n: u32, t: i64}", sub(
        "examples: [{n: 1000}]", f"examples: [{{n: 1000, t: {MIN}}}]", sub(
            "sources: [kernels/m.cu]\n", f"sources: [kernels/m.cu]\nconstants: {{LOWEST: {MIN}}}\n", sub(
                "    block: [256, 1, 1]\n", "    block: [256, 1, 1]\n    shared_mem: (LOWEST - LOWEST) * 4\n",
                SPEC)))))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = project(tmp_path_factory.mktemp("wide"), WIDE, WIDE_SOURCE)
    return {str(p): text for p, text in render_catalog(load_catalog(root)).items()}


def test_c_and_cpp_spell_int64_min_without_an_unsigned_literal(files: dict[str, str]) -> None:
    cu = next(text for path, text in files.items() if path.endswith("/m.cu"))
    assert f"constexpr int64_t LOWEST = {SPELLED};" in cu, cu
    assert f"case {SPELLED}: kg_p.variant = 0; break;" in cu, cu
    for path, text in files.items():
        if path.endswith((".cu", ".h", ".cpp")):
            code = [line for line in text.splitlines() if MIN in line and "Variants on" not in line]
            assert not code, (path, code)


def test_python_keeps_the_number(files: dict[str, str]) -> None:
    contract = next(text for path, text in files.items() if path.endswith("_contract.py"))
    assert f"C_LOWEST = {MIN}\n" in contract


def test_c_int() -> None:
    assert base.c_int(-2**63) == SPELLED and base.c_int(-2**63 + 1) == "-9223372036854775807" and base.c_int(0) == "0"


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++")
def test_the_spelling_is_int64_min_in_cpp_without_a_warning(tmp_path: Path) -> None:
    src = tmp_path / "t.cpp"
    src.write_text(f"#include <cstdint>\nconstexpr int64_t v = {SPELLED};\n"
                   "static_assert(v == INT64_MIN, \"\");\n"
                   f"int f(int64_t t) {{ switch (t) {{ case {SPELLED}: return 1; default: return 0; }} }}\n")
    done = subprocess.run(["g++", "-std=c++17", "-Wall", "-Wextra", "-fsyntax-only", str(src)],
                          capture_output=True, text=True)
    assert done.returncode == 0 and not done.stderr, done.stderr
