"""`kernelgen plan` takes a kernel's float arguments as the launchers take them (numbers in the
specs' decimal spelling, in the type's finite range), checks and leaves them out (no plan reads a
float: they are no names in expressions), saying so; integers are taken exactly as the specs
write them (no '+')."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen import plan_cli, yamlio
from kernelgen.cli import main
from kernelgen.errors import SourceLoc, SpecError
from kernelgen.loader import load_catalog
from tests.conftest import FIXTURE


def _plan(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["--root", str(FIXTURE), "plan", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("value", ["2.0", "2", "-0.5", "0", "1.5e+3", "3.0e-2", "-2,0.5"])
def test_a_float_argument_is_left_out_of_the_plan(capsys: pytest.CaptureFixture[str], value: str) -> None:
    rc, out, err = _plan(capsys, "fixture_ops.scale_f32", "n=1000", f"alpha={value}", "-t", "hopper")
    want_rc, want_out, _ = _plan(capsys, "fixture_ops.scale_f32", "n=1000", "-t", "hopper")
    assert rc == want_rc == 0 and out == want_out, (out, err)  # the same plan, one row: no sweep over alpha
    assert err == "kernelgen: note: alpha: a float argument, which no plan reads (left out)\n"


def test_a_chain_takes_its_members_float_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _plan(capsys, "fixture_ops.scale_any", "n=6", "alpha=0.5", "-t", "hopper")
    assert rc == 0 and "<- runs" in out and "alpha" not in out, out
    assert "alpha: a float argument" in err


SPELLING = "write numbers in decimal, as the specs do (e.g. 2, -0.5 or 1.0e-3)"


@pytest.mark.parametrize(("value", "want"), [
    ("1e3", f"expected a number (f32), got '1e3'; {SPELLING}"),
    ("+2.0", f"expected a number (f32), got '+2.0'; {SPELLING}"),
    ("inf", f"expected a number (f32), got 'inf'; {SPELLING}"),
    ("two", f"expected a number (f32), got 'two'; {SPELLING}"),
    ("", f"expected a number (f32), got ''; {SPELLING}"),
    ("1.0e+39", "1.0e+39 is out of range for f32 (finite values up to 3.4028235e+38 in magnitude)"),
    ("-1.0e+39", "-1.0e+39 is out of range for f32 (finite values up to 3.4028235e+38 in magnitude)"),
])
def test_a_float_argument_is_checked_as_launchers_check_it(capsys: pytest.CaptureFixture[str], value: str,
                                                           want: str) -> None:
    rc, out, err = _plan(capsys, "fixture_ops.scale_f32", "n=1000", f"alpha={value}")
    assert rc == 2 and out == "", out
    assert err == f"kernelgen: error: fixture_ops.scale_f32: argument 'alpha': {want}\n"


def test_the_cli_takes_the_numbers_the_specs_take() -> None:
    f32 = next(a.scalar for k in load_catalog(FIXTURE).modules[0].kernels for a in k.args if a.name == "alpha")
    for text in ["0", "-0", "7", "-7", "2.0", "-0.5", "1.0e-3", "1.5E+3", "007", "0x10", "1_000", "+5", "1e3",
                 "1.", ".5", "1.0e3", "-", "", "inf", ".inf", "nan", "\u0663.0"]:
        try:
            value = yamlio._scalar(SourceLoc("s.yaml", 1), text, None).value
        except SpecError:  # a number the specs refuse to read
            value = None
        takes = isinstance(value, (int, float)) and not isinstance(value, bool)
        assert (plan_cli._real_problem(f32, text) is None) == takes, text


@pytest.mark.parametrize(("scalar", "fits", "over"), [
    ("f32", "3.4028235e+38", "3.4028236e+38"),  # FLT_MAX rounds to itself; beyond half an ulp, to inf
    ("f16", "65519.0", "65520.0"),
    ("bf16", "3.3961775e+38", "3.3961776e+38"),
    ("f64", "1.0e+308", None),
])
def test_the_float_range_is_the_types_finite_range(scalar: str, fits: str, over: str | None) -> None:
    from kernelgen.types import SCALAR_TYPES

    t = next(s for s in SCALAR_TYPES if s.name == scalar)
    assert plan_cli._real_problem(t, fits) is None
    if over is not None:
        assert "is out of range" in (plan_cli._real_problem(t, over) or "")


def test_floats_are_no_names_in_expressions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Why plans may leave floats out: the loader refuses a float in any expression."""
    from tests.conftest import small_project

    root = small_project(tmp_path / "p", {"specs/m.yaml": """module: m
summary: M.
sources: [kernels/m.cu]
kernels:
  k:
    symbol: k
    summary: K.
    args: {x: f32*, n: u32, alpha: f32}
    grid: [alpha, 1, 1]
    block: [256, 1, 1]
    examples:
      - {n: 4}
""", "kernels/m.cu": "__global__ void k(float* x, unsigned n, float alpha) {}\n"})
    assert main(["--root", str(root), "list"]) == 2
    assert "'alpha' is a float; expressions use integer arguments only" in capsys.readouterr().err
