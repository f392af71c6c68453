"""What a plan's outcome says about the values it computed: a negative or zero dimension is
described as such (not as over a limit), and an expression error names the expression that
failed (kernelgen.plan.failed_expression), in `kernelgen plan` and at load."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen import cases, plan
from kernelgen.cli import main
from kernelgen.errors import SpecError
from kernelgen.loader import load_catalog
from tests.unit.test_launch_modes import SOURCE, SPEC, project

# A plain kernel with a signed argument d for the expressions to divide by and shift with.
PLAIN = SPEC.replace("launch: {cooperative: true}", "symbol: plain").replace(
    "[device.sm_count * kernel.blocks_per_sm, 1, 1]", "[n, 1, 1]").replace(
    "n: u32}", "n: u32, d: i32}").replace("{n: 1024}", "{n: 1024, d: 1}")
PLAIN_SOURCE = SOURCE.replace("plain(const float* x, float* out, unsigned n)",
                              "plain(const float* x, float* out, unsigned n, int d)")


def _spec(grid: str = "[n, 1, 1]", extra: str = "") -> str:
    return PLAIN.replace("[n, 1, 1]", grid).replace("    block: [256, 1, 1]\n", f"    block: [256, 1, 1]\n{extra}")


def _kernel(tmp_path: Path, spec: str):
    cat = load_catalog(project(tmp_path, spec, PLAIN_SOURCE))
    m = cat.modules[0]
    return m, m.kernels[0], cat.target("hopper")


def _failed(tmp_path: Path, spec: str, **args: int) -> tuple[int, str | None]:
    m, k, t = _kernel(tmp_path, spec)
    env = {"n": 1024, "d": 1} | args
    c = cases.expected_plan(m, k, t, env)[0]
    return c, plan.failed_expression(k, c, env | dict(m.constants), plan.target_table(t))


# ---------------------------------------------------------------- negative geometry


def test_a_first_example_with_a_negative_grid_is_said_to_have_one(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_catalog(project(tmp_path, _spec("[-1, 1, 1]"), PLAIN_SOURCE))
    err = str(info.value)
    assert "its plan says error: grid x is negative (-1) (code GRID, detail 4)" in err, err
    assert "exceeds" not in err, err


@pytest.mark.parametrize("grid,args,text", [
    ("[n, d, 1]", {"d": -3}, "error: grid y is negative (-3)"),
    ("[n, 1, d * 35000]", {"d": 2}, "error: grid z exceeds the CUDA limit (65535)"),
    ("[n, 1, d]", {"d": 0}, "not launched: grid z is 0"),
])
def test_the_cli_says_whether_a_grid_dimension_is_negative_or_too_large(tmp_path: Path, capsys, grid, args,
                                                                        text) -> None:
    root = project(tmp_path, _spec(grid), PLAIN_SOURCE)
    rc = main(["--root", str(root), "plan", "demo.coop", "n=1024", *(f"{n}={v}" for n, v in args.items()),
               "-t", "hopper"])
    out = capsys.readouterr().out
    assert rc == 0 and f"hopper (132 SMs): {text}\n" in out, out


@pytest.mark.parametrize("block,d,text", [
    ("[256, d, 1]", -2, "error: block y is negative (-2)"),
    ("[256, 1, d]", 0, "error: block z is 0"),
    ("[256, d, 1]", 2048, "error: block y is outside the target's limits"),
])
def test_the_cli_says_whether_a_block_dimension_is_negative_zero_or_too_large(tmp_path: Path, capsys, block, d,
                                                                             text) -> None:
    root = project(tmp_path, PLAIN.replace("[256, 1, 1]", block), PLAIN_SOURCE)
    rc = main(["--root", str(root), "plan", "demo.coop", "n=1024", f"d={d}", "-t", "hopper"])
    out = capsys.readouterr().out
    assert rc == 0 and f"hopper (132 SMs): {text}\n" in out, out


def test_negative_shared_memory_is_said_to_be_negative(tmp_path: Path, capsys) -> None:
    root = project(tmp_path, _spec(extra="    shared_mem: 'd * 16 if d > -5 else 0'\n"), PLAIN_SOURCE)
    rc = main(["--root", str(root), "plan", "demo.coop", "n=1024", "d=-2", "-t", "hopper"])
    out = capsys.readouterr().out
    assert rc == 0 and "error: dynamic shared memory is negative (-32 bytes)" in out, out


# ---------------------------------------------------------------- which expression failed


@pytest.mark.parametrize("grid,extra,args,named", [
    ("[n // d, 1, 1]", "", {"d": 0}, "grid x 'n // d'"),
    ("[n, 1, 1]", "    shared_mem: n << d\n", {"d": -1}, "shared_mem 'n << d'"),
    ("[n, 1, 1]", "    requires: [n // d > 0]\n", {"d": 0}, "requires[0] '(n // d) > 0'"),
    ("[n, 1, 1]", "    skip_if: [n == 0, n % d == 1]\n", {"d": 0}, "skip_if[1] '(n % d) == 1'"),
    ("[t, 1, 1]", "    let: {t: n // d}\n", {"d": 0}, "let t 'n // d' (in grid x)"),
    # the plan keeps the highest error: division by zero (grid y) over the overflow (grid x)
    ("[n << (62 - 62 * d), n // d, 1]", "", {"d": 0}, "grid y 'n // d'"),
])
def test_an_expression_error_names_the_expression(tmp_path: Path, grid, extra, args, named) -> None:
    spec = _spec(grid, extra).replace("    skip_if: [n == 0]\n", "") if "skip_if" in extra else _spec(grid, extra)
    c, failed = _failed(tmp_path, spec, **args)
    assert c < 0 and plan.category(c) == plan.E_EXPR, c
    assert failed == named


def test_a_clause_that_decides_first_leaves_no_expression_to_name(tmp_path: Path) -> None:
    c, failed = _failed(tmp_path, _spec("[n // d, 1, 1]"), n=0, d=0)  # skip_if n == 0 holds before the grid
    assert c == plan.code(plan.NL_EMPTY, 0) and failed is None


def test_a_u64_argument_over_the_signed_range_is_named(tmp_path: Path) -> None:
    spec = _spec().replace("n: u32, d: i32}", "n: u64, d: i32}")
    source = PLAIN_SOURCE.replace("unsigned n, int d", "unsigned long long n, int d")
    cat = load_catalog(project(tmp_path, spec, source))
    m, k = cat.modules[0], cat.modules[0].kernels[0]
    env = {"n": 2**63 + 5, "d": 1}
    c = cases.expected_plan(m, k, cat.target("hopper"), env)[0]
    assert plan.failed_expression(k, c, env, plan.target_table(cat.target("hopper"))) == \
        f"argument n ({2**63 + 5} is over 2**63 - 1, the limit of 64-bit arithmetic)"


def test_the_cli_names_the_expression_that_failed(tmp_path: Path, capsys) -> None:
    root = project(tmp_path, _spec("[div_ceil(n, d), 1, 1]"), PLAIN_SOURCE)
    rc = main(["--root", str(root), "plan", "demo.coop", "n=1024", "d=0,4", "-t", "hopper"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert ("| 1024 | 0 | error: invalid arguments: division by zero while computing the launch, in grid x "
            "'div_ceil(n, d)' |") in out, out


def test_a_first_example_with_an_expression_error_shows_no_geometry(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_catalog(project(tmp_path, _spec("[n // (d - 1), 1, 1]"), PLAIN_SOURCE))
    err = str(info.value)
    assert "division by zero while computing the launch" in err and "(code EXPR, detail 2)" in err, err
    assert "grid [" not in err, err  # nothing was computed to show
