"""Build test of struct arguments whose C++ name is a typedef, and of bool struct fields, for
hopper: CUDA's `half2` and `nv_bfloat162` (typedefs of __half2 and __nv_bfloat162) come from the
toolkit's headers, a user's `typedef struct {...} TdParams;` in a namespace from the spec's
`header`; the module builds, its contract tests pass without a GPU, and a C++ caller compiles its
API header with the typedefs' headers before or after it. Python takes True/False for bool fields
(plain, nested, arrays, dataclass fields) and refuses them for number fields. Without `header`,
the typedef's build fails naming the struct's spec line."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, build_target, contract_tests_pass, ops_env, small_project

pytestmark = pytest.mark.build

TARGET = "hopper"

HEADER = """\
#pragma once
#include <cstdint>
namespace tdns {
typedef struct { int32_t a; float b; } TdParams;
}  // namespace tdns
"""

SOURCE = """\
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "kernels/td.h"
namespace ep {
struct Flags { bool relu; int32_t n; };
struct Params { float alpha; bool has_bias; Flags fl; bool mask[3]; };
__global__ void epilogue(Params p, float* out) { out[0] = p.alpha + p.has_bias + p.fl.relu + p.mask[2]; }
__global__ void scale_h2(half2 s, nv_bfloat162 t, float* out) { out[0] = __low2float(s) + __high2float(t); }
__global__ void read_td(tdns::TdParams t, float* out) { out[0] = t.a + t.b; }
}  // namespace ep
"""

SPEC = """\
module: ep
summary: Bool fields and typedef'd structs.
sources: [kernels/ep.cu]
structs:
  flags: {cpp: ep::Flags, fields: {relu: bool, n: i32}}
  params:
    cpp: ep::Params
    fields: {alpha: f32, has_bias: bool, fl: flags, mask: "bool[3]"}
  h2: {cpp: half2, fields: {x: f16, y: f16}, align: 4}
  b2: {cpp: nv_bfloat162, fields: {x: bf16, y: bf16}, align: 4}
  td: {cpp: tdns::TdParams, fields: {a: i32, b: f32}, header: kernels/td.h}
kernels:
  epilogue:
    symbol: ep::epilogue
    summary: Reads bool fields.
    args: {p: params, out: {type: f32*, size: 1}}
    grid: [1, 1, 1]
    block: [1, 1, 1]
    examples: [{}]
  scale_h2:
    symbol: ep::scale_h2
    summary: Takes CUDA's typedef'd pairs.
    args: {s: h2, t: b2, out: {type: f32*, size: 1}}
    grid: [1, 1, 1]
    block: [1, 1, 1]
    examples: [{}]
  read_td:
    symbol: ep::read_td
    summary: Takes a typedef'd struct.
    args: {t: td, out: {type: f32*, size: 1}}
    grid: [1, 1, 1]
    block: [1, 1, 1]
    examples: [{}]
"""


def _build(root: Path) -> subprocess.CompletedProcess:
    return build_target(root, TARGET)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = small_project(tmp_path_factory.mktemp("struct_typedefs") / "project",
                         {"specs/ep.yaml": SPEC, "kernels/ep.cu": SOURCE, "kernels/td.h": HEADER})
    res = _build(root)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return root


def test_the_api_header_names_typedefs_through_their_headers(built: Path) -> None:
    header = (built / "generated" / TARGET / "include" / "kernelgen" / "ep.h").read_text()
    assert "#include <cuda_fp16.h>" in header and "#include <cuda_bf16.h>" in header
    assert '#include "kernels/td.h"' in header
    assert "struct half2" not in header and "struct nv_bfloat162" not in header and "TdParams;" not in header
    assert re.search(r"namespace ep \{ struct Params; \}  // specs/ep\.yaml:6: struct 'params'", header), header


@pytest.mark.skipif(shutil.which("c++") is None, reason="needs a host C++ compiler")
@pytest.mark.parametrize("order", ["api first", "typedefs first"])
def test_a_cpp_caller_compiles_the_api_header(built: Path, tmp_path: Path, order: str) -> None:
    includes = ['#include "kernelgen/ep.h"', '#include <cuda_fp16.h>\n#include "kernels/td.h"']
    if order == "typedefs first":
        includes.reverse()
    caller = tmp_path / "caller.cpp"
    caller.write_text("\n".join(includes) + "\n"
                      "kernelgen::Outcome run(half2 s, nv_bfloat162 t, tdns::TdParams p, float* out) {\n"
                      "  kernelgen::ep::read_td(p, out);\n"
                      "  return kernelgen::ep::scale_h2(s, t, out);\n"
                      "}\n")
    cuda = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    res = subprocess.run(["c++", "-std=c++17", "-fsyntax-only", f"-I{built / 'generated' / TARGET / 'include'}",
                          f"-I{REPO / 'src' / 'kernelgen' / 'runtime' / 'include'}", f"-I{built}",
                          f"-I{cuda / 'include'}", str(caller)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]


def test_contract_tests_pass_without_gpu(built: Path) -> None:
    contract_tests_pass(built, TARGET)


def test_python_takes_bools_for_bool_fields(built: Path) -> None:
    """True and False (and numpy's bool, 0 and 1) are a bool field's values wherever the field is:
    in the argument, in a nested struct given as a mapping or a dataclass, in an array; a bool is
    no number for an int or float field (also nested), as for a scalar argument."""
    script = """
import dataclasses
import numpy as np
import kernelgen_ops
import kernelgen_ops.hopper.ep as m

@dataclasses.dataclass
class Flags:
    relu: bool
    n: int

def call(fn, *args):
    try:
        fn(*args, 0x10000)
        print("launched")
    except kernelgen_ops.ArgumentError as e:
        print("ArgumentError:", e)
    except kernelgen_ops.LaunchError:
        print("reached the launch")

p = {"alpha": 0.5, "has_bias": True, "fl": {"relu": True, "n": 3}, "mask": [True, False, True]}
for good in (p, dict(p, has_bias=False, fl=Flags(False, 1)), dict(p, fl=Flags(True, 1), mask=(False, True, False)),
             dict(p, has_bias=np.bool_(True), mask=[1, 0, np.bool_(False)])):
    call(m.epilogue, good)
for bad in (dict(p, has_bias=2), dict(p, alpha=True), dict(p, fl={"relu": True, "n": False}),
            dict(p, fl=Flags(True, True)), dict(p, mask=[True, 2, False]), dict(p, alpha=np.bool_(False))):
    call(m.epilogue, bad)
call(m.scale_h2, {"x": 1.0, "y": 2.0}, {"x": 0.5, "y": -1})
call(m.scale_h2, {"x": True, "y": 2.0}, {"x": 0.5, "y": -1})
call(m.read_td, {"a": 1, "b": 2.0})
call(m.read_td, {"a": False, "b": 2.0})
"""
    res = subprocess.run([sys.executable, "-c", script], cwd=built, env=ops_env(built), capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    lines = res.stdout.splitlines()
    reached = ("launched", "reached the launch")
    assert all(ln in reached for ln in lines[:4]), lines
    assert lines[4:10] == [
        "ArgumentError: epilogue: argument 'p': field 'has_bias': expected a bool (True, False, 0 or 1), got int",
        "ArgumentError: epilogue: argument 'p': field 'alpha': expected f32, got bool",
        "ArgumentError: epilogue: argument 'p': field 'fl.n': expected i32, got bool",
        "ArgumentError: epilogue: argument 'p': field 'fl.n': expected i32, got bool",
        "ArgumentError: epilogue: argument 'p': field 'mask[1]': expected a bool (True, False, 0 or 1), got int",
        "ArgumentError: epilogue: argument 'p': field 'alpha': expected f32, got numpy.bool",
    ], lines
    assert lines[10] in reached, lines
    assert lines[11] == "ArgumentError: scale_h2: argument 's': field 'x': expected f16, got bool", lines
    assert lines[12] in reached, lines
    assert lines[13] == "ArgumentError: read_td: argument 't': field 'a': expected i32, got bool", lines
    assert len(lines) == 14, lines


def test_a_typedef_without_header_fails_naming_the_struct(built: Path) -> None:
    """The C++ API header forward-declares a struct without `header`, which a typedef of that name
    contradicts: the build names the struct's spec line and says to give `header`, before the
    compiler's error."""
    spec = built / "specs" / "ep.yaml"
    old = ", header: kernels/td.h}"
    assert old in SPEC
    spec.write_text(SPEC.replace(old, "}"))
    try:
        res = _build(built)
        assert res.returncode == 2, res.stdout + res.stderr
        line = next(i for i, ln in enumerate(spec.read_text().splitlines(), 1) if ln.startswith("  td:"))
        first = next(ln for ln in res.stderr.splitlines() if ln.startswith(f"kernelgen: specs/ep.yaml:{line}: "))
        assert first.startswith(f"kernelgen: specs/ep.yaml:{line}: struct 'td' (C++ tdns::TdParams): the sources "
                                "declare tdns::TdParams otherwise than as a struct or class"), res.stderr
        assert "give the struct header:" in first, first
        assert 'invalid redeclaration of type name "tdns::TdParams"' in res.stderr, res.stderr
    finally:
        spec.write_text(SPEC)
