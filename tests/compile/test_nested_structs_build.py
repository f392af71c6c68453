"""Build test of structs nested by value (FlashAttention/CUTLASS-style parameter blocks) for
hopper: a struct holding another struct and an array of them, and one holding a CUtensorMap
(128-byte aligned) between scalars. The module builds with nvcc (its layout checks pass against
the C++ types), its generated contract tests pass without a GPU, Python takes nested mappings and
names a nested field by its path, and its Rust crate compiles and passes its tests (where cargo is
installed). A spec that disagrees with the C++ type fails the (incremental) rebuild naming the
spec's line, the struct and the field: a member the C++ type lacks (the flattened fields of a
nested struct), and a CUtensorMap member spelled as its bytes (placed at 8, where C++ puts 128)."""

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
namespace fa {
struct Window { int32_t left, right; };
struct Params { const float* q; int64_t stride; Window window; float alpha; Window extra[2]; uint8_t layout; };
struct TmaParams { int32_t m, k; CUtensorMap map_q; float scale; int32_t dims[40]; };
__global__ void read_params(Params p, float* out) {
  out[0] = p.alpha + p.window.left - p.window.right + p.extra[1].left + p.layout + p.stride;
}
__global__ void read_tma(const __grid_constant__ TmaParams t, float* out) {
  out[0] = t.scale * t.m + t.k + static_cast<float>(t.map_q.opaque[0]);
}
}  // namespace fa
"""

SPEC = """\
module: fa
summary: Parameter structs nested by value.
sources: [kernels/fa.cu]
structs:
  params:
    cpp: fa::Params
    fields:
      q: u64
      stride: i64
      window: window
      alpha: f32
      extra: "window[2]"
      layout: u8
  window: {cpp: fa::Window, fields: {left: i32, right: i32}}
  tensor_map: {cpp: CUtensorMap, fields: {opaque: "u64[16]"}, align: 128}
  tma_params:
    cpp: fa::TmaParams
    fields: {m: i32, k: i32, map_q: tensor_map, scale: f32, dims: "i32[40]"}
kernels:
  read_params:
    symbol: fa::read_params
    summary: Reads the nested parameters.
    args: {p: params, out: {type: f32*, size: 1}}
    grid: [1, 1, 1]
    block: [1, 1, 1]
    examples: [{}]
  read_tma:
    symbol: fa::read_tma
    summary: Reads the TMA parameters.
    args: {t: tma_params, out: {type: f32*, size: 1}}
    grid: [1, 1, 1]
    block: [1, 1, 1]
    examples: [{}]
"""


def _build(root: Path) -> subprocess.CompletedProcess:
    return build_target(root, TARGET)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = small_project(tmp_path_factory.mktemp("nested_structs") / "project",
                         {"specs/fa.yaml": SPEC, "kernels/fa.cu": SOURCE})
    res = _build(root)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return root


def _line_of(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


def test_contract_tests_pass_without_gpu(built: Path) -> None:
    contract_tests_pass(built, TARGET)
    contract = (built / "generated" / TARGET / "tests" / f"test_fa_{TARGET}_contract.py").read_text()
    assert "'window': {'left': 0, 'right': 0}" in contract and "'map_q': {'opaque': [0, 0," in contract


def test_python_takes_nested_mappings(built: Path) -> None:
    """A nested struct is a mapping (or an object with its fields) inside the argument's; a bad one
    is an ArgumentError naming the field by its path. A good one reaches the launch (which, without
    a GPU, fails there)."""
    script = """
import dataclasses
import kernelgen_ops
import kernelgen_ops.hopper.fa as m

@dataclasses.dataclass
class Window:
    left: int
    right: int

w = {"left": -1, "right": 2}
p = {"q": 0, "stride": 8, "window": Window(-1, 2), "alpha": 0.5, "extra": [w, w], "layout": 1}
for bad in (dict(p, window={"left": 1}), dict(p, extra=[w, {"left": 1, "right": 2**40}]), dict(p, extra=[w]),
            dict(p, window={"left": 1, "right": 2, "top": 3}), dict(p, extra=[w, 7])):
    try:
        m.read_params(bad, 0x10000)
    except kernelgen_ops.ArgumentError as e:
        print("ArgumentError:", e)
t = {"m": 1, "k": 2, "map_q": {"opaque": list(range(16))}, "scale": 1.0, "dims": [0] * 40}
for args in ((p, 0x10000), (t, 0x10000)):
    try:
        (m.read_params if args[0] is p else m.read_tma)(*args)
        print("launched")
    except kernelgen_ops.ArgumentError as e:
        print("ArgumentError:", e)
    except kernelgen_ops.LaunchError:
        print("reached the launch")
"""
    res = subprocess.run([sys.executable, "-c", script], cwd=built, env=ops_env(built), capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    lines = res.stdout.splitlines()
    assert lines[:5] == [
        "ArgumentError: read_params: argument 'p': field 'window.right' of struct window is missing (its fields: "
        "left, right)",
        "ArgumentError: read_params: argument 'p': field 'extra[1].right': 1099511627776 is out of range for i32 "
        "[-2**31, 2**31-1]",
        "ArgumentError: read_params: argument 'p': field 'extra': expected 2 values, got 1",
        "ArgumentError: read_params: argument 'p': field 'window': unknown field 'top' for struct window (its "
        "fields: left, right)",
        "ArgumentError: read_params: argument 'p': field 'extra[1]': expected struct window: a mapping or an object "
        "with the fields left, right, got int",
    ], lines
    assert all(ln in ("launched", "reached the launch") for ln in lines[5:]) and len(lines) == 7, lines


@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed (apt-get install cargo)")
def test_rust_crate_builds_and_passes(built: Path, tmp_path: Path) -> None:
    crate = built / "generated" / TARGET / "rust"
    text = (crate / "src" / "fa.rs").read_text()
    assert "pub window: Window," in text
    # Rust derives Default for arrays of at most 32 elements: TmaParams (box: [i32; 40]) writes it out
    assert "impl Default for TmaParams" in text and "dims: [Default::default(); 40]," in text, text
    res = cargo_tests_pass(built, TARGET, tmp_path / "t")
    assert sum(int(n) for n in re.findall(r"test result: ok\. (\d+) passed", res.stdout)) >= 10, res.stdout[-2000:]


@pytest.mark.parametrize("old,new,needle,message", [
    # the flattened fields of a nested struct: the C++ type has no such member
    ("      window: window\n", "      window_left: i32\n      window_right: i32\n", "window_left: i32",
     "struct 'params' (C++ fa::Params): field 'window_left': the C++ type has no public member "
     "'window_left'"),
    # a CUtensorMap spelled as its bytes: C++ aligns it to 128
    ('fields: {m: i32, k: i32, map_q: tensor_map, scale: f32, dims: "i32[40]"}',
     'fields: {m: i32, k: i32, map_q: "u64[16]", scale: f32, dims: "i32[40]"}\n    align: 128', "map_q: \"u64[16]\"",
     "struct 'tma_params' (C++ fa::TmaParams): field 'map_q' is not at offset 8, as the spec lays it out"),
])
def test_a_spec_that_disagrees_fails_naming_the_field(built: Path, old: str, new: str, needle: str,
                                                      message: str) -> None:
    spec = built / "specs" / "fa.yaml"
    assert old in SPEC
    spec.write_text(SPEC.replace(old, new))
    try:
        res = _build(built)
        assert res.returncode == 2, res.stdout + res.stderr
        line = _line_of(spec.read_text(), needle)
        assert f"kernelgen: specs/fa.yaml:{line}: {message}" in res.stderr, res.stderr
    finally:
        spec.write_text(SPEC)
