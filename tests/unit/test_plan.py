"""Plan semantics are written once (kernelgen.plan): the C header's codes and limits, the
clause order, and the Python evaluation all come from it."""

from __future__ import annotations

import re

from kernelgen import plan
from tests.conftest import REPO

RUNTIME = REPO / "src" / "kernelgen" / "runtime" / "include" / "kernelgen"


def test_codes_header_is_generated_from_the_plan_module() -> None:
    header = (REPO / "generated" / "hopper" / "include" / "kernelgen" / "plan_codes.h").read_text()
    assert header == (REPO / "generated" / "gb10" / "include" / "kernelgen" / "plan_codes.h").read_text()
    for name, (value, _) in plan.NOT_LAUNCHED.items():
        assert re.search(rf"^#define KG_NL_{name} {value}\b", header, re.M), name
    for name, (value, _) in plan.ERRORS.items():
        assert re.search(rf"^#define KG_E_{name} {value}\b", header, re.M), name
    for axis, limit in zip("XYZ", plan.GRID_LIMITS):
        assert f"#define KG_GRID_LIMIT_{axis} {limit}LL" in header


def test_no_hand_written_copy_of_the_codes_or_limits() -> None:
    abi = (RUNTIME / "abi.h").read_text()
    runtime = (RUNTIME / "runtime.h").read_text()
    assert not re.search(r"#define KG_(NL|E|EXPR)_", abi)
    assert '#include "kernelgen/plan_codes.h"' in abi
    assert "65535" not in runtime and "2147483647" not in runtime


def test_families_in_plan_order_with_their_meaning() -> None:
    assert [f.name for f in plan.FAMILIES] == ["skip", "requires", "applies"]
    skip, requires, applies = plan.FAMILIES
    assert (skip.decides_when, skip.error) == (True, False)
    assert (requires.decides_when, requires.error) == (False, True)
    assert (applies.decides_when, applies.error) == (False, False)
    step = plan.Step(requires, 2, "n > 0")
    assert step.code == -((plan.E_REQUIRES << 16) | 2)
    assert step.code_cpp == "-KG_CODE(KG_E_REQUIRES, 2)"


def test_expect_checks_in_order_and_reports_expression_errors() -> None:
    def geometry(st, a):
        return (a["n"], 1, 1), (256, 1, 1), 0

    clauses = [
        (plan.Step(plan.FAMILY["skip"], 0, "n == 0").code, True, lambda st, a: a["n"] == 0),
        (plan.Step(plan.FAMILY["applies"], 0, "n % 8 == 0").code, False, lambda st, a: a["n"] % 8 == 0),
        (plan.Step(plan.FAMILY["requires"], 0, "").code, False, lambda st, a: plan.pyexpr.div_ceil(st, 1, a["d"]) >= 0),
    ]
    limits = ((1024, 1024, 64), 1024, 49152)
    kw = {"geometry": geometry, "limits": limits}
    assert plan.expect(clauses, {"n": 0, "d": 1}, **kw)[0] == plan.code(plan.NL_EMPTY, 0)
    assert plan.expect(clauses, {"n": 3, "d": 1}, **kw)[0] == plan.code(plan.NL_CLAUSE, 0)
    assert plan.expect(clauses, {"n": 8, "d": 0}, **kw)[0] == plan.code(plan.E_EXPR, plan.pyexpr.DIV_ZERO, True)
    assert plan.expect(clauses, {"n": 8, "d": 1}, **kw) == (0, (8, 1, 1), (256, 1, 1), 0)
    assert plan.expect(clauses, {"n": 2**31 + 7, "d": 1}, **kw)[0] == plan.code(plan.NL_CLAUSE, 0)
    assert plan.expect(clauses, {"n": 2**31 * 8, "d": 1}, **kw)[0] == plan.code(plan.E_GRID, 0, True)
    assert plan.expect(clauses, {"n": 2**64 - 8, "d": 1}, u64=["n"], **kw)[0] == plan.code(
        plan.E_EXPR, plan.pyexpr.OVERFLOW, True)


# ---------------------------------------------------------------- below the range, not over it

LIMITS = ((1024, 1024, 64), 1024, 49152)
NEG, ZERO = plan.DETAIL_NEGATIVE, plan.DETAIL_ZERO


def test_a_dimension_below_its_range_has_a_code_apart_from_one_over_it() -> None:
    def geometry(grid=(8, 1, 1), block=(256, 1, 1), smem=0) -> int:
        return plan.geometry_code(grid, block, smem, *LIMITS)

    assert geometry(grid=(-1, 1, 1)) == plan.code(plan.E_GRID, 0 | NEG, True)
    assert geometry(grid=(8, 1, -3)) == plan.code(plan.E_GRID, 2 | NEG, True)
    assert geometry(grid=(2**31, 1, 1)) == plan.code(plan.E_GRID, 0, True)
    assert geometry(grid=(0, 1, 1)) == plan.code(plan.NL_EMPTY_GRID, 0)
    assert geometry(block=(256, -2, 1)) == plan.code(plan.E_BLOCK, 1 | NEG, True)
    assert geometry(block=(256, 1, 0)) == plan.code(plan.E_BLOCK, 2 | ZERO, True)
    assert geometry(block=(256, 1, 65)) == plan.code(plan.E_BLOCK, 2, True)
    assert geometry(block=(64, 32, 1)) == plan.code(plan.E_BLOCK, 3, True)
    assert geometry(smem=-1) == plan.code(plan.E_SHARED_MEM, NEG, True)
    assert geometry(smem=49153) == plan.code(plan.E_SHARED_MEM, 0, True)
    for c in (geometry(grid=(-1, 1, 1)), geometry(block=(0, 1, 1)), geometry(smem=-1)):
        assert plan.falls_through(c), c  # still the device-limit errors a chain goes on after


def test_a_dimension_below_its_range_is_described_as_what_it_is() -> None:
    k = object()
    grid, block = (5, -7, 1), (256, 1, -2)
    assert plan.describe(k, plan.code(plan.E_GRID, 1 | NEG, True)) == "grid y is negative"
    assert plan.describe(k, plan.code(plan.E_GRID, 1 | NEG, True), grid=grid) == "grid y is negative (-7)"
    assert plan.describe(k, plan.code(plan.E_GRID, 2, True)) == "grid z exceeds the CUDA limit (65535)"
    assert plan.describe(k, plan.code(plan.E_BLOCK, 2 | NEG, True), block=block) == "block z is negative (-2)"
    assert plan.describe(k, plan.code(plan.E_BLOCK, 0 | ZERO, True)) == "block x is 0"
    assert plan.describe(k, plan.code(plan.E_BLOCK, 0, True)) == "block x is outside the target's limits"
    assert plan.describe(k, plan.code(plan.E_SHARED_MEM, NEG, True), shared_mem=-8) == \
        "dynamic shared memory is negative (-8 bytes)"
    assert plan.describe(k, plan.code(plan.E_SHARED_MEM, 0, True)) == \
        "dynamic shared memory exceeds the device's opt-in limit"


def test_an_expression_error_has_no_geometry() -> None:
    def geometry(st, a):
        return (plan.pyexpr.floordiv(st, a["n"], a["d"]), 1, 1), (256, 1, 1), 0

    c, grid, block, smem = plan.expect([], {"n": 8, "d": 0}, geometry=geometry, limits=LIMITS)
    assert (c, grid, block, smem) == (plan.code(plan.E_EXPR, plan.pyexpr.DIV_ZERO, True), (None,) * 3, (None,) * 3,
                                      None)
    assert plan.describe(object(), c, expression="grid x 'n // d'") == \
        "invalid arguments: division by zero while computing the launch, in grid x 'n // d'"


def test_expect_cluster() -> None:
    """The plan's cluster: none, the spec's constant one, or launch.cluster for the arguments
    (None when evaluating it fails, as a u64 argument past INT64_MAX does)."""
    assert plan.expect_cluster(None, {"n": 4}) is None
    assert plan.expect_cluster((2, 1, 1), {"n": 4}) == (2, 1, 1)
    split = lambda _st, a: (1, 1, max(1, a["k"] // 1024))  # noqa: E731
    assert plan.expect_cluster(split, {"k": 4096}) == (1, 1, 4)
    assert plan.expect_cluster(split, {"k": 2 ** 63}, ["k"]) is None
