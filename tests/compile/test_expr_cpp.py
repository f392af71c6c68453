"""Property test: for random valid expressions and arguments (32- and 64-bit boundaries
included), the generated C++ (kg::x_* helpers of runtime.h) and the Python evaluation give
the same value or the same error."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kernelgen import expr
from kernelgen.errors import ExprError
from kernelgen.toolkit import find_toolkit

pytestmark = pytest.mark.build

RUNTIME = Path(__file__).resolve().parents[2] / "src" / "kernelgen" / "runtime" / "include"
GENERATED = Path(__file__).resolve().parents[2] / "generated" / "hopper" / "include"  # plan_codes.h
NAMES = ("a", "b", "c")
EDGE = [0, 1, -1, 2, 3, 7, 31, 32, 62, 63, 64, 65535, 65536, 2**31 - 1, 2**31, 2**32 - 1, 2**32,
        2**62, 2**63 - 1, -(2**31), -(2**63)]

ints = st.one_of(st.sampled_from(EDGE), st.integers(-(2**63), 2**63 - 1), st.integers(-300, 300))


def int_expr(depth: int = 3) -> st.SearchStrategy[str]:
    leaf = st.one_of(st.sampled_from(NAMES), st.integers(0, 2**31).map(str))
    if depth == 0:
        return leaf
    sub = int_expr(depth - 1)
    binop = st.tuples(sub, st.sampled_from(list(expr.ARITH)), sub).map(lambda t: f"({t[0]} {t[1]} {t[2]})")
    call = st.tuples(st.sampled_from(["div_ceil", "min", "max"]), sub, sub).map(lambda t: f"{t[0]}({t[1]}, {t[2]})")
    neg = sub.map(lambda s: f"-({s})")
    cmp = st.tuples(sub, st.sampled_from(sorted(expr.COMPARE)), sub).map(lambda t: " ".join(t))
    cond = st.tuples(sub, cmp, sub).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})")
    return st.one_of(leaf, binop, call, neg, cond)


def bool_expr() -> st.SearchStrategy[str]:
    cmp = st.tuples(int_expr(2), st.sampled_from(sorted(expr.COMPARE)), int_expr(2)).map(lambda t: " ".join(t))
    return st.one_of(cmp, st.tuples(cmp, st.sampled_from(["and", "or"]), cmp).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"))


def py_value(tree: expr.Node, env: dict[str, int]) -> str:
    try:
        v = expr.evaluate(tree, env)
    except ExprError as exc:
        return f"E{exc.code}"
    return str(int(v))


CPP_HEAD = """#include <cstdio>
#include <cinttypes>
#include "kernelgen/runtime.h"
static void out(int64_t v, const kg::ExprStatus& e) {
  if (e.code) std::printf("E%d\\n", e.code); else std::printf("%" PRId64 "\\n", v);
}
int main() {
"""


def _lit(v: int) -> str:
    """A C++ int64 literal (-2**63 has none: its magnitude does not fit)."""
    return "INT64_MIN" if v == -(2**63) else f"{v}LL"


@settings(max_examples=2, deadline=None, phases=[Phase.generate], derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    exprs=st.lists(st.tuples(st.one_of(int_expr(), bool_expr()), st.tuples(ints, ints, ints)), min_size=150,
                   max_size=200),
)
def test_cpp_and_python_agree(tmp_path_factory: pytest.TempPathFactory, exprs: list) -> None:
    tk = find_toolkit()
    body, want = [], []
    for text, (a, b, c) in exprs:
        try:
            tree = expr.parse(text, dict.fromkeys(NAMES, 0), expr.Ty.INT)
        except expr.ParseError:
            tree = expr.parse(text, dict.fromkeys(NAMES, 0), expr.Ty.BOOL)
        env = {"a": a, "b": b, "c": c}
        cpp = expr.to_cpp(tree, lambda n: f"int64_t{{{n}}}")
        body.append(
            f"  {{ kg::ExprStatus kg_err; const int64_t a = {_lit(a)}, b = {_lit(b)}, c = {_lit(c)}; "
            f"(void)a; (void)b; (void)c; const int64_t v = {cpp}; out(v, kg_err); }}"
        )
        want.append(py_value(tree, env))
    d = tmp_path_factory.mktemp("exprcpp")
    src = d / "t.cpp"
    src.write_text(CPP_HEAD + "\n".join(body) + "\n}\n")
    exe = d / "t"
    cc = subprocess.run(
        ["g++", "-std=c++17", "-O1", f"-I{RUNTIME}", f"-I{GENERATED}", f"-I{tk.root / 'include'}", str(src), "-o",
         str(exe)],
        capture_output=True, text=True,
    )
    assert cc.returncode == 0, cc.stderr[-3000:]
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    mismatches = [(exprs[i][0], exprs[i][1], got[i], want[i]) for i in range(len(want)) if got[i] != want[i]]
    assert not mismatches, mismatches[:5]
