"""The .pyi stubs as type checkers read them: every name a stub uses is kernelgen's (``_kg_``) or
a builtin spelled through ``_kg_builtins``, so no struct, launcher or field named after a builtin
(``str``, ``dict``, ``property``...) changes what the stub says; arrays, streams and structs are
typed without ``Any``, so that ``None`` for a non-nullable array, a string for an array and a dict
with missing or extra struct keys are errors, while every kind the launchers accept checks. The
package shell (``__init__.py``, ``_api.py``, ``_project.py``) passes ``mypy --strict`` as built."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from kernelgen import project as kg_project
from kernelgen.emit import render_catalog
from kernelgen.loader import load_catalog
from tests.unit.test_structs_setup_spec import TARGETS

PACKAGE = "kgstubs"

# Structs, a field, a kernel and a dtype key named after the builtins a stub uses.
SPEC = """\
module: shadow
summary: Names that are Python builtins.
sources: [kernels/shadow.cu]
structs:
  str: {cpp: ns::Str, fields: {n: i32, scale: f32}}
  dict:
    cpp: ns::Dict
    fields: {str: u32, property: str, tuple: "str[2]", type: f32}
  tuple: {cpp: ns::Tuple, fields: {object: i64}}
  object: {cpp: ns::Object, fields: {len: u16}}
kernels:
  property:
    symbol: ns::property_kernel
    summary: Takes the structs.
    args:
      x: {type: const f32*, size: n}
      y: {type: f32*, size: n}
      w: {type: const f32*, size: n, nullable: true}
      s: str
      d: dict
      t: tuple
      o: object
      n: u32
    grid: ["div_ceil(n, 256)", 1, 1]
    block: [256, 1, 1]
    examples: [{n: 64}]
  list:
    symbol: ns::list_kernel<{T}>
    summary: A dispatcher.
    instantiate:
      T: [f32, f16]
    args:
      x: {type: "const {T}*", size: n}
      n: u32
    grid: ["div_ceil(n, 256)", 1, 1]
    block: [256, 1, 1]
    examples: [{n: 64}]
"""


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    for rel, text in {"specs/targets.yaml": TARGETS, "specs/shadow.yaml": SPEC, "kernels/shadow.cu": "// shadow\n",
                      "specs/project.yaml": f"package: {PACKAGE}\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _stub(tmp_path: Path) -> str:
    files = render_catalog(load_catalog(_project(tmp_path)))
    return files["generated/hopper/python/shadow.pyi"]


def test_the_stub_uses_only_names_no_spec_name_can_shadow(tmp_path: Path) -> None:
    tree = ast.parse(_stub(tmp_path))
    # the one use of a spec's name: a struct's alias, at module level, of the struct's own class
    structs = {n.targets[0].id: n.value for n in tree.body if isinstance(n, ast.Assign)
               and isinstance(n.targets[0], ast.Name) and n.targets[0].id.startswith("_kg_arg_")}
    allowed = {id(v.left) for v in structs.values() if isinstance(v, ast.BinOp) and isinstance(v.left, ast.Name)}
    used = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    assert used and all(n.id.startswith("_kg_") or id(n) in allowed for n in used), sorted(
        {n.id for n in used if not n.id.startswith("_kg_") and id(n) not in allowed})
    assert {f"_kg_arg_{s}" for s in ("str", "dict", "tuple", "object")} <= structs.keys()
    # every builtin the stub names is a builtin
    import builtins

    spelled = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
               and n.value.id == "_kg_builtins"}
    assert spelled and all(hasattr(builtins, a) for a in spelled)


def _package(tmp_path: Path, root: Path | None) -> Path:
    """``tmp_path/site/kgstubs``: the package shell and _project.py as ``kernelgen build`` (with the
    project's root) or the wheel (without) installs them, target hopper's stub, and its stub at the
    top (as the package installs it)."""
    proj = _project(tmp_path)
    catalog = load_catalog(proj)
    files = kg_project.shell_files(catalog, proj if root is not None else None)
    stub = render_catalog(catalog)["generated/hopper/python/shadow.pyi"]
    pkg = tmp_path / "site" / PACKAGE
    kg_project.write_shell(pkg, {n: t for n, t in files.items() if n.endswith((".py", ".typed"))})
    (pkg / "shadow.pyi").write_text(stub)
    (pkg / "hopper").mkdir()
    (pkg / "hopper" / "__init__.py").write_text("MODULES = ('shadow',)\nCOMPUTE_CAPABILITY = (9, 0)\n")
    (pkg / "hopper" / "shadow.pyi").write_text(stub)
    return tmp_path / "site"


def _mypy(site: Path, *args: str) -> tuple[int, str]:
    pytest.importorskip("mypy")
    res = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--show-error-codes",
                          "--cache-dir", str(site.parent / "mypy_cache"), "--python-version", "3.11", *args],
                         cwd=site, capture_output=True, text=True, timeout=600,
                         env={"MYPYPATH": str(site), "PATH": "/usr/bin:/bin"})
    return res.returncode, res.stdout + res.stderr


@pytest.mark.parametrize("where", ["build", "wheel"])
def test_the_package_shell_passes_mypy_strict(tmp_path: Path, where: str) -> None:
    site = _package(tmp_path, tmp_path if where == "build" else None)
    rc, out = _mypy(site, "-p", PACKAGE)
    assert rc == 0 and out.strip() == "", out


GOOD = """\
from __future__ import annotations

import dataclasses

import numpy as np

import kgstubs
import kgstubs.shadow
from kgstubs.hopper import shadow
from kgstubs.shadow import property as prop


class CudaArray:
    def __init__(self, ptr: int) -> None:
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (64,), "typestr": "<f4", "version": 3}


class DLPackArray:
    def __dlpack__(self, stream: int | None = None) -> object:
        return object()


class Stream:
    cuda_stream: int = 0


@dataclasses.dataclass
class Str:
    n: int
    scale: float


def use(a: CudaArray, b: DLPackArray) -> str:
    s: shadow.str = {"n": 1, "scale": 2.0}
    d: shadow.dict = {"str": 1, "property": {"n": 1, "scale": 0.5}, "tuple": [Str(1, 2.0), s], "type": 1.0}
    out = prop(a, b, None, s, d, {"object": 3}, {"len": 2}, 64, stream=Stream())
    out = prop(0x1000, np.int64(0x2000), a, Str(1, 1.0), d, {"object": 3}, {"len": 2}, n=64, stream=7)
    out = kgstubs.shadow.list(b, 64, stream=None)
    plan = shadow.plan_list(n=64, T="f16")
    sizes = plan["sizes"] or {}
    total: int = sum(sizes.values()) + plan["grid"][0] + shadow.property.plan(n=64)["shared_mem"]
    return shadow.TARGET.upper() + plan["reason"].lower() + str(total) + (out.reason or "") + kgstubs.shadow.PLAN_DIGEST
"""

BAD = """\
from __future__ import annotations

from kgstubs.hopper import shadow
from kgstubs.hopper.shadow import property as prop

S: shadow.str = {"n": 1, "scale": 2.0}
D: shadow.dict = {"str": 1, "property": S, "tuple": [S, S], "type": 1.0}

prop(None, 1, None, S, D, {"object": 3}, {"len": 2}, 64)  # bad: line 9
prop("x", 1, None, S, D, {"object": 3}, {"len": 2}, 64)  # bad: line 10
prop(1, 1, "w", S, D, {"object": 3}, {"len": 2}, 64)  # bad: line 11
prop(1, 1, None, {"n": 1}, D, {"object": 3}, {"len": 2}, 64)  # bad: line 12
prop(1, 1, None, S, D, {"object": 3, "other": 1}, {"len": 2}, 64)  # bad: line 13
prop(1, 1, None, S, D, {"object": 3}, object(), 64)  # bad: line 14
prop(1, 1, None, S, D, {"object": 3}, {"len": 2}, 64, stream="s")  # bad: line 15
prop(1, 1, None, S, D, {"object": 3}, {"len": 2}, 64.0)  # bad: line 16
shadow.list(1.5, 64)  # bad: line 17
shadow.plan_list(n=64, T=3)  # bad: line 18
x: int = shadow.TARGET  # bad: line 19
"""


def test_stubs_check_good_calls_and_report_bad_ones(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    site = _package(tmp_path, tmp_path)
    (site / "good.py").write_text(GOOD)
    (site / "bad.py").write_text(BAD)
    rc, out = _mypy(site, "good.py")
    assert rc == 0 and out.strip() == "", out
    rc, out = _mypy(site, "bad.py")
    lines = {int(ln.split(":")[1]) for ln in out.splitlines() if ln.startswith("bad.py:") and ": error:" in ln}
    expected = {i for i, ln in enumerate(BAD.splitlines(), 1) if "# bad" in ln}
    assert rc == 1 and lines == expected, out
