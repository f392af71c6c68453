"""Build test of host integers read from a struct argument's fields (`from`): a kernel taking a
parameter struct (a nested one inside) whose grid, array sizes and clauses come from the struct's
own fields, and a chain of two such kernels. The module builds with nvcc for hopper (the C++
launcher reads the fields), its generated contract tests pass without a GPU (they set the fields
from each argument set), the Python launcher takes no such argument (plan() takes it, as an
integer) and checks the arrays against the sizes the struct's fields give, and the Rust crate
compiles and passes its tests (where cargo is installed)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import build_target, cargo_tests_pass, contract_tests_pass, ops_env, small_project

pytestmark = pytest.mark.build

TARGET = "hopper"

SOURCE = """\
#include <cstdint>
#include <cuda.h>
namespace rp {
struct Span { int32_t first, count; };
struct Shape { int64_t rows; uint32_t cols; Span span; float eps; };
__global__ void row_scale(Shape s, const float* x, float* y) {
  const int64_t r = blockIdx.x;
  for (uint32_t c = threadIdx.x; c < s.cols; c += blockDim.x) y[r * s.cols + c] = x[r * s.cols + c] * s.eps;
}
__global__ void row_tma(Shape s, const float* x, const __grid_constant__ CUtensorMap x_map) {}
__global__ void row_scale_wide(Shape s, const float* x, float* y) {
  const int64_t r = blockIdx.x;
  for (uint32_t c = threadIdx.x; c < s.cols; c += blockDim.x) y[r * s.cols + c] = x[r * s.cols + c] * s.eps;
}
}  // namespace rp
"""

SPEC = """\
module: rp
summary: Rows scaled, their shape in a parameter struct.
sources: [kernels/rp.cu]
structs:
  span: {cpp: rp::Span, fields: {first: i32, count: i32}}
  shape: {cpp: rp::Shape, fields: {rows: i64, cols: u32, span: span, eps: f32}}
kernels:
  row_scale:
    symbol: rp::row_scale
    summary: y = x * eps, one block a row.
    args:
      s: shape
      x: {type: const f32*, size: rows * cols}
      "y": {type: f32*, size: rows * cols}
    host_args:
      rows: {type: i64, from: s.rows}
      cols: {type: u32, from: s.cols}
      count: {type: i32, from: s.span.count}
    grid: [rows, 1, 1]
    block: [128, 1, 1]
    skip_if: [rows == 0]
    requires: [count >= 0]
    applies_if: [cols <= 4096]
    examples: [{rows: 3, cols: 100, count: 1}]
  row_scale_wide:
    extends: row_scale
    symbol: rp::row_scale_wide
    summary: The same for any row length.
    host_args:
      rows: {type: i64, from: s.rows}
      cols: {type: u32, from: s.cols}
    block: [256, 1, 1]
    requires: null
    applies_if: null
    examples: [{rows: 2, cols: 5000}]
  row_tma:
    symbol: rp::row_tma
    summary: Reads x through a TMA descriptor whose extents are the struct's.
    args:
      s: shape
      x: {type: const f32*, size: rows * cols}
    host_args:
      rows: {type: i64, from: s.rows}
      cols: {type: u32, from: s.cols}
    tensor_maps:
      x_map: {array: x, dims: [rows, cols], box: [1, 32]}
    grid: [rows, 1, 1]
    block: [32, 1, 1]
    skip_if: [rows == 0]
    applies_if: [cols % 4 == 0]
    examples: [{rows: 2, cols: 64}]
  row_scale_fields:
    symbol: rp::row_scale
    summary: row_scale with the struct's fields read in its expressions.
    args:
      s: shape
      x: {type: const f32*, size: s.rows * s.cols}
      "y": {type: f32*, size: s.rows * s.cols}
    grid: [s.rows, 1, 1]
    block: [128, 1, 1]
    skip_if: [s.rows == 0]
    requires: [s.span.count >= 0]
    applies_if: [s.cols <= 4096]
    examples: [{s.rows: 3, s.cols: 100, s.span.count: 1}]
fallbacks:
  row_scale_any: [row_scale, row_scale_wide]
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = small_project(tmp_path_factory.mktemp("struct_from") / "project",
                         {"specs/rp.yaml": SPEC, "kernels/rp.cu": SOURCE})
    res = build_target(root, TARGET)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return root


def test_the_launchers_read_the_fields(built: Path) -> None:
    cu = (built / "generated" / TARGET / "src" / "rp.cu").read_text()
    assert "const int32_t count = s.span.count;  // from the struct argument" in cu
    # the tensor maps' extents come from the struct too; their encoding, defined before the
    # sources (which complete the struct's type), takes the values read from it
    assert "int32_t kg_tensor_maps_row_tma(const float* x, int64_t rows, uint32_t cols, CUtensorMap* kg_tm) {" in cu
    assert "kg_tensor_maps_row_tma(x, rows, cols, kg_tm);" in cu
    header = (built / "generated" / TARGET / "include" / "kernelgen" / "rp.h").read_text()
    assert "kernelgen::Outcome row_scale(::rp::Shape s, const float* x, float* y, cudaStream_t stream" in header
    assert "kg_plan plan_row_scale(int64_t rows, uint32_t cols, int32_t count);" in header
    assert "Read from struct arguments' fields (not arguments of the launchers; plans take them): rows (s.rows), " \
        "cols (s.cols), count (s.span.count)." in header
    # the fields read in expressions directly: host arguments named after them
    assert "const int64_t s_rows = s.rows;  // from the struct argument" in cu
    assert "kg_plan plan_row_scale_fields(int64_t s_rows, uint32_t s_cols, int32_t s_span_count);" in header


def test_contract_tests_pass_without_gpu(built: Path) -> None:
    contract_tests_pass(built, TARGET)
    contract = (built / "generated" / TARGET / "tests" / f"test_rp_{TARGET}_contract.py").read_text()
    assert "DERIVED_row_scale = {'rows': ('s', ('rows',)), 'cols': ('s', ('cols',)), 'count': ('s', ('span', " \
        "'count'))}" in contract


def test_python_reads_the_fields_and_plan_takes_them(built: Path) -> None:
    script = """
import inspect
import kernelgen_ops
import kernelgen_ops.hopper.rp as m
from kernelgen.testing import FakeCudaArray

print(list(inspect.signature(m.row_scale).parameters))
print(m.row_scale.plan(rows=3, cols=100, count=1)["grid"], m.row_scale_any.plan(rows=2, cols=5000, count=1)["kernel"])
s = {"rows": 3, "cols": 100, "span": {"first": 0, "count": 1}, "eps": 0.5}
try:
    m.row_scale(s, FakeCudaArray("<f4", (300,)), FakeCudaArray("<f4", (300,)), rows=3)
except TypeError as e:
    print("TypeError:", e)
print(m.row_scale_fields.plan(s_rows=3, s_cols=100, s_span_count=1)["grid"])
for shape, n in ((s, 299), (dict(s, cols=5000), 15000), (dict(s, span={"first": 0, "count": -1}), 300)):
    for launcher in (m.row_scale, m.row_scale_any, m.row_scale_fields):
        try:
            o = launcher(shape, FakeCudaArray("<f4", (n,)), FakeCudaArray("<f4", (n,), 1))
            print(launcher.__name__, "outcome:", o.launched, o.kernel, o.reason)
        except kernelgen_ops.ArgumentError as e:
            print(launcher.__name__, "ArgumentError:", e)
        except kernelgen_ops.LaunchError:
            print(launcher.__name__, "reached the launch")
"""
    res = subprocess.run([sys.executable, "-c", script], cwd=built, env=ops_env(built), capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    lines = res.stdout.splitlines()
    # row_scale_fields reads the fields in its expressions: the same outcomes as row_scale's, its
    # reasons naming the fields
    assert lines[3] == "(3, 1, 1)", lines
    fields = [line for line in lines[4:] if line.startswith("row_scale_fields ")]
    assert fields == [
        "row_scale_fields ArgumentError: row_scale_fields: argument 'x': array has 299 elements but the kernel "
        "accesses 300 (of f32: 1196 bytes, 1200 needed)",
        "row_scale_fields outcome: False row_scale_fields row_scale_fields: not launched: s.cols <= 4096 is false",
        "row_scale_fields ArgumentError: row_scale_fields: invalid arguments: requires s.span.count >= 0"], fields
    lines = lines[:3] + [line for line in lines[4:] if not line.startswith("row_scale_fields ")]
    assert lines[:3] == [
        "['s', 'x', 'y', 'stream']",
        "(3, 1, 1) row_scale_wide",
        "TypeError: row_scale() got an unexpected keyword argument 'rows': it is read from struct argument 's' "
        "(give the struct's field that value)",
    ], lines
    # 3 x 100 from the struct: 299 elements are too few, for the kernel and the chain
    assert lines[3] == "row_scale ArgumentError: row_scale: argument 'x': array has 299 elements but the kernel " \
        "accesses 300 (of f32: 1196 bytes, 1200 needed)", lines
    assert lines[4].startswith("row_scale_any ArgumentError: row_scale_any: argument 'x': array has 299 elements"), lines
    # cols 5000: row_scale does not apply (cols <= 4096); the chain goes on to row_scale_wide
    assert lines[5] == "row_scale outcome: False row_scale row_scale: not launched: cols <= 4096 is false", lines
    assert lines[6] in ("row_scale_any reached the launch", "row_scale_any outcome: True row_scale_wide "), lines
    # the nested field span.count = -1 fails the requires clause
    assert lines[7].startswith("row_scale ArgumentError: row_scale: invalid arguments: requires count >= 0"), lines


@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed (apt-get install cargo)")
def test_rust_crate_builds_and_passes(built: Path, tmp_path: Path) -> None:
    crate = built / "generated" / TARGET / "rust"
    text = (crate / "src" / "rp.rs").read_text()
    assert "pub unsafe fn launch(s: super::Shape, x: impl Into<crate::DevicePtr>" in text, text
    assert "let count: i32 = s.span.count;" in text
    tests = (crate / "tests" / "rp.rs").read_text()
    assert "kg_s.span.count = " in tests
    res = cargo_tests_pass(built, TARGET, tmp_path / "t")
    assert sum(int(n) for n in re.findall(r"test result: ok\. (\d+) passed", res.stdout)) >= 10, res.stdout[-2000:]
