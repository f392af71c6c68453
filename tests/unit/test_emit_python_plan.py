"""The Python emitters' view of plans and docs: plan() needs only the integer arguments the
plan's expressions use (as `kernelgen plan` asks), in the binding's tables and in the stubs;
docstrings mark nullable pointers and spell a dispatcher's arguments by the types it takes."""

from __future__ import annotations

import functools
import re

from kernelgen import plan_cli
from kernelgen.emit import render_catalog
from kernelgen.emit.python import plan_args
from kernelgen.loader import load_catalog
from kernelgen.lower import lower_module
from tests.conftest import FIXTURE, REPO

ARRAYS = REPO / "tests" / "fixtures" / "arrays"


@functools.cache
def _files(root: str) -> dict[str, str]:
    cat = load_catalog(REPO / root)
    return render_catalog(cat, [cat.target("hopper")])


def test_plan_args_are_the_ones_kernelgen_plan_asks_for() -> None:
    for root in (ARRAYS, FIXTURE):
        cat = load_catalog(root)
        hopper = cat.target("hopper")
        for m in cat.modules:
            lm = lower_module(cat, m, hopper)
            for lk, k in zip(lm.kernels, m.kernels):
                assert plan_args(lm, lk) == frozenset(plan_cli.needed(k)), k.name
            for ch in lm.chains:  # a chain's: any member's
                want = {n for mod, name in ch.members for n in plan_cli.needed(cat.module(mod).kernel(name))}
                assert plan_args(lm, ch) == frozenset(want), ch.name
    lm = lower_module(cat := load_catalog(ARRAYS), cat.modules[0], cat.target("hopper"))
    narrow = next(k for k in lm.kernels if k.name == "narrow_ints")
    assert plan_args(lm, narrow) == {"n", "scale8"}  # flag and shift: read by the kernel alone


def test_stub_plans_let_unused_integers_be_left_out() -> None:
    pyi = _files("tests/fixtures/arrays")["generated/hopper/python/arrays.pyi"]
    assert "def plan_narrow_ints(*, flag: _kg_builtins.int | None = None, scale8: _kg_builtins.int, n: _kg_builtins.int, shift: _kg_builtins.int | None = None) " \
           "-> _kg_Plan: ..." in pyi
    assert ("def plan(self, *, rows: _kg_builtins.int, cols: _kg_builtins.int, eps: _kg_builtins.float | None = None) "
            "-> _kg_Plan: ...") in pyi  # layer_norm: the integers all used, the float may be left out


def test_binding_marks_scalars_the_plan_does_not_use() -> None:
    cpp = _files("tests/fixtures/arrays")["generated/hopper/python/arrays.cpp"]
    table = cpp[cpp.index("kg_args_narrow_ints[] = {"):]
    table = table[:table.index("};")]
    rows = {m.group(1): m.group(2) for m in re.finditer(r'\{"(\w+)", kg::py::kScalar, (?:-?\d+, ){5}(\d), ', table)}
    assert rows == {"flag": "1", "scale8": "0", "n": "0", "shift": "1"}
    assert "// u8, unused by the plan" in table


def test_docstrings_mark_nullable_pointers_and_name_a_dispatchers_types() -> None:
    files = _files("tests/fixtures/arrays")
    for text in (files["generated/hopper/python/arrays.pyi"], files["generated/hopper/python/arrays.cpp"]):
        assert "weight: const f32* | None, y: f32*, mean: f32* | None, rstd: f32* | None, rows: u32" in text
        assert "(n: u32, alpha: f32|f16|bf16|f64, x: const f32|f16|bf16|f64*, y: f32|f16|bf16|f64*, *, " \
               "stream=None) -> Outcome" in text
    fixture = _files("tests/fixtures/project")
    for text in fixture.values():
        assert "{T}*" not in text
