"""The generated tests' cases at the boundaries of a plan (kernelgen.cases.boundary_cases): each
comparison of one argument with constants, and each change of the plan's outcome along one
argument (device limits from the target's table), met at c - 1, c and c + 1; a chain's cases
include its members' boundary and launch-check cases; a chain's reported member
(kernelgen.plan.chain_pick), the launchers' chain code and the contract tests that check them."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from kernelgen import plan
from kernelgen.cases import boundary_cases, expected_plan, search_cases
from kernelgen.emit import render_catalog
from kernelgen.emit.tests import plan_digest
from kernelgen.loader import load_catalog
from kernelgen.lower import lower_module
from kernelgen.testing import built_module, stale_reason
from tests.unit.test_loader import write_project

SPEC = """\
module: demo
summary: A demo module.
sources: [kernels/demo.cu]
constants: {THREADS: 256, LIMIT: 100000000}
kernels:
  vec4:
    summary: Four a thread.
    targets: [hopper]
    args:
      x: {type: const f32*, size: n}
      out: {type: f32*, size: n}
      n: u32
    grid: [div_ceil(n, THREADS * 4), 1, 1]
    block: [THREADS, 1, 1]
    skip_if: [n == 0]
    requires: [n <= LIMIT]
    applies_if: [n % 4 == 0, n >= 1000]
    examples:
      - {n: 4096}
      - {n: 4098}
      - {n: 512}
  vec2:
    summary: Two a thread, elsewhere.
    targets: [gb10]
    args:
      x: {type: const f32*, size: n}
      out: {type: f32*, size: n}
      n: u32
    grid: [div_ceil(n, THREADS * 2), 1, 1]
    block: [THREADS, 1, 1]
    skip_if: [n == 0]
    applies_if: [n % 2 == 0]
    examples:
      - {n: 4096}
      - {n: 4097}
  wsel:
    summary: Variant by width.
    variants:
      arg: width
      symbols: {1: w1_kernel, 2: w2_kernel, 4: w4_kernel}
    args:
      out: {type: f32*, size: n}
      n: u32
      width: u32
    grid: [1, 1, 1]
    block: [32 * width, 1, 1]
    skip_if: [n == 0]
    examples:
      - {n: 16, width: 2}
  coop:
    summary: Cooperative.
    launch: {cooperative: true}
    args:
      out: {type: f32*, size: 1}
      n: u32
    grid: [n, 1, 1]
    block: [1024, 1, 1]
    examples:
      - {n: 48}
  pdl:
    summary: PDL.
    launch: {programmatic_dependent: true}
    args:
      out: {type: f32*, size: 1}
      n: u32
    grid: [n, 1, 1]
    block: [128, 1, 1]
    examples:
      - {n: 10}
fallbacks:
  vec_only: [vec4, vec2]
  coop_then_pdl: [coop, pdl]
"""


def load(tmp_path: Path, spec: str = SPEC):
    tmp_path.mkdir(parents=True, exist_ok=True)
    cat = load_catalog(write_project(tmp_path, spec))
    (m,) = cat.modules
    return cat, m, next(t for t in cat.targets if t.name == "hopper")


def values(m, k, t, name: str = "n") -> set[int]:
    return {dict(c)[name] for c in boundary_cases(m, k, t)}


def test_each_comparison_is_met_on_both_sides(tmp_path: Path) -> None:
    """n >= 1000 at 999, 1000 and 1001 (the example values jump past it), requires n <= LIMIT
    (a constant) at the limit and one above; n % 4 == 0 with a multiple and a non-multiple."""
    _, m, t = load(tmp_path)
    k = m.kernel("vec4")
    got = values(m, k, t)
    assert {999, 1000, 1001} <= got
    assert {100_000_000, 100_000_001} <= got
    assert any(v % 4 == 0 for v in got) and any(v % 4 for v in got)
    codes = {v: expected_plan(m, k, t, {"n": v})[0] for v in (999, 1000, 100_000_000, 100_000_001)}
    assert codes[1000] == codes[100_000_000] == plan.LAUNCHED
    assert codes[999] > 0 and codes[100_000_001] < 0
    # and they are among the cases the generated tests check
    _, cases = search_cases(m, k, t)
    assert {999, 1000, 1001, 100_000_000, 100_000_001} <= {dict(c)["n"] for c in cases}


def test_device_limits_from_the_target_table(tmp_path: Path) -> None:
    """A cooperative grid of n blocks of 1024 threads: sm_count * blocks_per_sm co-resident, from
    each target's table (264 on hopper's 132 SMs, 2 blocks a SM)."""
    cat, m, hopper = load(tmp_path)
    gb10 = next(t for t in cat.targets if t.name == "gb10")
    k = m.kernel("coop")
    table = plan.target_table(gb10)
    gb10_limit = table["sm_count"] * plan.table_blocks_per_sm(table, (1024, 1, 1), 0)
    for t, limit in ((hopper, 264), (gb10, gb10_limit)):
        assert {limit, limit + 1} <= values(m, k, t), t.name  # the last co-resident grid, and one more
        assert expected_plan(m, k, t, {"n": limit})[0] == plan.LAUNCHED
        assert plan.category(expected_plan(m, k, t, {"n": limit + 1})[0]) == plan.E_CORESIDENT


def test_chain_cases_include_members_boundaries_and_launch_checks(tmp_path: Path) -> None:
    """The chain meets its members' boundaries: coop_then_pdl falls through to pdl at n = 265."""
    cat, m, t = load(tmp_path)
    chains = {c.name: c for c in lower_module(cat, m, t).chains}
    ns = {dict(c)["n"] for c in chains["coop_then_pdl"].cases}
    assert {264, 265} <= ns
    ns = {dict(c)["n"] for c in chains["vec_only"].cases}
    assert {999, 1000, 100_000_001} <= ns


def test_chain_pick_passes_over_absent_members() -> None:
    absent, clause = plan.code(plan.NL_ABSENT), plan.code(plan.NL_CLAUSE, 0)
    coresident = plan.code(plan.E_CORESIDENT, 0, True)
    expr_error = plan.code(plan.E_EXPR, 1, True)  # category 2, as ABSENT's: an error all the same
    assert plan.chain_pick([clause, absent]) == 0
    assert plan.chain_pick([absent, clause, absent]) == 1
    assert plan.chain_pick([absent, absent]) == 1
    assert plan.chain_pick([coresident, plan.LAUNCHED]) == 1
    assert plan.chain_pick([coresident, absent]) == 0
    assert plan.chain_pick([expr_error, plan.LAUNCHED]) == 0
    assert plan.chain_pick([clause, None, absent]) == 0
    assert plan.chain_pick([None, None]) is None


def test_chain_launchers_report_the_last_present_member(tmp_path: Path) -> None:
    """The C++ chain and its plan keep the outcome of the last member that is present on the
    target, so that an absent last member does not hide the reason of the one tried."""
    cat, _, _ = load(tmp_path)
    cu = render_catalog(cat)["generated/hopper/src/demo.cu"]
    launcher = cu[cu.index("kernelgen::Outcome vec_only("):]
    launcher = launcher[:launcher.index("\n}\n")]
    assert launcher.count("if (!KG_ABSENT(kg_o.code))") == 2
    assert "return kg_present ? kg_r : kg_o;" in launcher
    planned = cu[cu.index("kg_plan plan_vec_only("):]
    planned = planned[:planned.index("\n}\n")]
    assert "kg_ri = 0;" in planned and "kg_ri = 1;" in planned
    assert "if (kg_kernel != nullptr) *kg_kernel = kg_ri;\n  return kg_r;" in planned


def test_contract_tests_check_variants_and_chain_launchers(tmp_path: Path) -> None:
    cat, m, t = load(tmp_path)
    text = render_catalog(cat)["generated/hopper/tests/test_demo_hopper_contract.py"]
    assert "assert plan[\"variant\"] == [1, 2, 4].index(args['width']), args" in text
    assert "assert plan[\"variant\"] == -1, args" in text  # a kernel without variants
    assert "def test_coop_then_pdl_launcher_tries_members_as_its_plan(args):" in text
    assert "_plan.chain_pick(" in text
    assert f'PLAN_DIGEST = "{plan_digest(lower_module(cat, m, t))}"' in text
    compile(text, "contract.py", "exec")


def test_plan_digest_follows_the_clauses(tmp_path: Path) -> None:
    cat, m, t = load(tmp_path / "a")
    other, om, ot = load(tmp_path / "b", SPEC.replace("n >= 1000", "n >= 2000"))
    same, sm, st = load(tmp_path / "c", SPEC.replace("summary: Four a thread.", "summary: Four each."))
    digest = plan_digest(lower_module(cat, m, t))
    assert digest != plan_digest(lower_module(other, om, ot))
    assert digest == plan_digest(lower_module(same, sm, st))  # words only


@pytest.fixture
def fake_built(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    for name in ("kgstale", "kgstale.t"):
        pkg = types.ModuleType(name)
        pkg.__path__ = []  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, name, pkg)
    mod = types.ModuleType("kgstale.t.demo")
    mod.PLAN_DIGEST = "aaaa"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "kgstale.t.demo", mod)
    monkeypatch.delenv("KERNELGEN_REQUIRE_BUILT", raising=False)
    return mod


def test_a_module_built_from_other_specs_is_skipped(fake_built: types.ModuleType, monkeypatch) -> None:
    assert built_module("t", "demo", package="kgstale", plan_digest="aaaa") is fake_built
    assert built_module("t", "demo", package="kgstale") is fake_built  # no digest given: not checked
    with pytest.raises(pytest.skip.Exception, match=r"built from other specs .*run: kernelgen build --target t"):
        built_module("t", "demo", package="kgstale", plan_digest="bbbb")
    monkeypatch.setenv("KERNELGEN_REQUIRE_BUILT", "1")
    with pytest.raises(pytest.fail.Exception, match="built from other specs"):
        built_module("t", "demo", package="kgstale", plan_digest="bbbb")


def test_a_module_without_a_digest_is_not_called_stale(fake_built: types.ModuleType) -> None:
    del fake_built.PLAN_DIGEST
    assert stale_reason(fake_built, "bbbb") is None
    assert built_module("t", "demo", package="kgstale", plan_digest="bbbb") is fake_built
