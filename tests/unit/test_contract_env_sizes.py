"""The generated contract tests' independence of the environment's kill switches
(kernelgen.testing.kill_switches_unset, and the fixture every file with a kill switch uses), and
their tests of plan()["sizes"]: the size expressions as evaluators (kernelgen.testing.expected_sizes)
and the too-small arrays of each sized argument's element type."""

from __future__ import annotations

import ast
import os
import re
import sys
import types

import pytest

from kernelgen import pyexpr
from kernelgen.emit import render_catalog
from kernelgen.loader import load_catalog
from kernelgen.testing import expected_sizes, kill_switches_unset
from tests.conftest import FIXTURE, REPO

# ---------------------------------------------------------------- kill switches


@pytest.fixture
def fake_package(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, str | None]]:
    """A package kgfakepkg with target t and modules a (switch KGFAKE_A), b (switch KGFAKE_B) and
    c (none); each refresh() records the switches as the environment has them then."""
    seen: list[dict[str, str | None]] = []
    pkg = types.ModuleType("kgfakepkg")
    pkg.refresh = lambda: seen.append({n: os.environ.get(n) for n in ("KGFAKE_A", "KGFAKE_B")})  # type: ignore[attr-defined]
    pkg.__path__ = []  # type: ignore[attr-defined]
    target = types.ModuleType("kgfakepkg.t")
    target.__path__ = []  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "kgfakepkg", pkg)
    monkeypatch.setitem(sys.modules, "kgfakepkg.t", target)
    for name, switch in (("a", "KGFAKE_A"), ("b", "KGFAKE_B"), ("c", None)):
        m = types.ModuleType(f"kgfakepkg.t.{name}")
        m.KILL_SWITCH = switch  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, f"kgfakepkg.t.{name}", m)
    monkeypatch.setenv("KGFAKE_A", "1")
    monkeypatch.delenv("KGFAKE_B", raising=False)
    return seen


def test_kill_switches_are_unset_inside_and_restored_and_reread_after(fake_package: list) -> None:
    with kill_switches_unset("kgfakepkg", "t", ["a", "b", "c", "not_built"]) as names:
        assert names == ["KGFAKE_A", "KGFAKE_B"]  # c has none; a module that cannot be imported is left out
        assert "KGFAKE_A" not in os.environ and "KGFAKE_B" not in os.environ
        assert fake_package == [{"KGFAKE_A": None, "KGFAKE_B": None}]  # re-read unset
        os.environ["KGFAKE_B"] = "1"  # what a test sets and leaves
    assert os.environ.get("KGFAKE_A") == "1" and "KGFAKE_B" not in os.environ
    # the last re-read sees the environment as it is at the end: the libraries agree with it
    assert fake_package[-1] == {"KGFAKE_A": "1", "KGFAKE_B": None}


def test_kill_switches_are_restored_when_the_tests_fail(fake_package: list) -> None:
    with pytest.raises(AssertionError), kill_switches_unset("kgfakepkg", "t", ["a"]):
        raise AssertionError
    assert os.environ.get("KGFAKE_A") == "1"
    assert fake_package[-1]["KGFAKE_A"] == "1"


def _contract(files: dict[str, str], module: str, target: str = "hopper") -> str:
    return files[f"generated/{target}/tests/test_{module}_{target}_contract.py"]


@pytest.fixture(scope="module")
def fixture_files() -> dict[str, str]:
    return render_catalog(load_catalog(FIXTURE))


def test_a_module_with_a_kill_switch_runs_its_tests_with_it_unset(fixture_files: dict[str, str]) -> None:
    text = _contract(fixture_files, "fixture_ops")
    fixture = re.search(r"@pytest\.fixture\(autouse=True, scope=\"module\"\)\ndef _kill_switches_unset\(\):\n"
                        r"(.*?)\n\n", text, re.S)
    assert fixture, text[:3000]
    assert "with kill_switches_unset(\"kernelgen_ops\", \"hopper\", ['fixture_ops']):\n        yield" in fixture[1]
    # every test of the file comes after it (the fixture is module-wide, and applies to all)
    assert text.index("def _kill_switches_unset") < text.index("\ndef test_")


@pytest.fixture(scope="module")
def catalog_files() -> dict[str, str]:
    return render_catalog(load_catalog(REPO))


def test_chains_unset_their_members_modules_switches_too(catalog_files: dict[str, str]) -> None:
    text = _contract(catalog_files, "fp8_linear")
    assert "kill_switches_unset(\"kernelgen_ops\", \"hopper\", ['fp8_linear', 'fp8_gemv_rt'])" in text
    assert "['attn_prefill_fa128', 'attn_prefill']" in _contract(catalog_files, "attn_prefill_fa128")


def test_a_module_without_switches_has_no_fixture() -> None:
    files = render_catalog(load_catalog(REPO / "tests" / "fixtures" / "arrays"))
    text = _contract(files, "arrays")
    assert "KILL_SWITCH = None" in text and "def _kill_switches_unset" not in text


# ---------------------------------------------------------------- sizes


def _list(text: str, name: str) -> str:
    m = re.search(rf"^{name} = \[.*?^\]", text, re.S | re.M)
    assert m, name
    return m[0].split("=", 1)[1]


def test_expected_sizes_are_the_size_expressions_as_the_plan_evaluates_them(fixture_files: dict[str, str]) -> None:
    text = _contract(fixture_files, "fixture_ops")
    sizes = eval(_list(text, "SIZES_add_bias"), {"_x": pyexpr})  # the generated text
    assert [n for n, _ in sizes] == ["x", "bias", "out"]
    # the built plan's answer (tests/compile/test_build_fixture.py)
    assert expected_sizes(sizes, {"rows": 4, "cols": 4096, "vec": 8}) == {"x": 16384, "bias": 4096, "out": 16384}
    assert expected_sizes(sizes, {"rows": 0, "cols": 7, "vec": 1}) == {"x": 0, "bias": 7, "out": 0}
    # the test compares them in every case of the plan tests, with the kernel's u64 arguments
    assert re.search(r"def test_add_bias_sizes_match_spec\(\):\n(.*\n){2}    for args in CASES_add_bias:\n"
                     r"        sizes = mod\.add_bias\.plan\(\*\*args\)\[\"sizes\"\]\n"
                     r"        assert sizes == expected_sizes\(SIZES_add_bias, args, u64=\[\]\), args\n", text), text


def test_expected_sizes_leave_out_negative_counts_and_fail_as_a_whole() -> None:
    sizes = [("x", lambda st, a: pyexpr.mul(st, a["rows"], a["cols"])),
             ("w", lambda st, a: pyexpr.sub(st, a["cols"], 8))]
    assert expected_sizes(sizes, {"rows": 4, "cols": 16}) == {"x": 64, "w": 8}
    assert expected_sizes(sizes, {"rows": 4, "cols": 4}) == {"x": 16}  # w < 0: not in the plan's sizes
    assert expected_sizes(sizes, {"rows": 2**62, "cols": 4}) is None  # x overflows: no sizes at all
    # a u64 argument above 2**63 - 1 fails the plan's size computation, used by a size or not
    assert expected_sizes(sizes, {"rows": 1, "cols": 9, "big": 2**63}, u64=["big"]) is None
    assert expected_sizes(sizes, {"rows": 1, "cols": 9, "big": 2**63 - 1}, u64=["big"]) == {"x": 9, "w": 1}


def test_sized_arrays_are_made_of_each_element_types_encoding() -> None:
    files = render_catalog(load_catalog(REPO / "tests" / "fixtures" / "arrays"))
    text = _contract(files, "arrays")
    rows = {name: ast.literal_eval(_list(text, f"SIZED_{name}")) for name in ("scale4", "byte_copy", "sum_rows",
                                                                            "add_bf16x2", "vec_mix")}
    assert rows["scale4"] == [("x", "<f4", 1, 4), ("y", "<f4", 1, 4)]  # f32x4: four f32 items an element
    assert rows["byte_copy"] == [("src", "|u1", 1, 1), ("dst", "|u1", 1, 1)]  # void: counted in bytes
    assert rows["sum_rows"][0] == ("rows", "<i8", 1, 1)  # a pointer array: 64-bit addresses
    assert rows["add_bf16x2"][0] == ("a", "<V2", 1, 2)
    # device scalars have a test of their own, not this one
    scalars = re.findall(r"def test_(\w+)_device_scalar_(\w+)_is_one_element", text)
    assert scalars
    for kernel, arg in scalars:
        assert f"SIZED_{kernel} = " in text and arg not in [r[0] for r in ast.literal_eval(_list(text, f"SIZED_{kernel}"))]


def test_packed_elements_are_made_of_bytes_of_two(catalog_files: dict[str, str]) -> None:
    w4 = _contract(catalog_files, "w4a16_gemm")
    packed = [r for n in re.findall(r"^SIZED_(\w+) = ", w4, re.M)
              for r in ast.literal_eval(_list(w4, f"SIZED_{n}")) if r[2] == 2]
    assert packed and all(r[1] == "|V1" and r[3] == 1 for r in packed), packed


def test_the_too_small_array_test_launches_one_element_short(fixture_files: dict[str, str]) -> None:
    text = _contract(fixture_files, "fixture_ops")
    body = re.search(r"def test_scale_f32_too_small_arrays_are_refused\(\):\n(.*?)\n\n\n", text, re.S)
    assert body, text
    assert "items = (need - 1) * lanes // per_item" in body[1]
    assert "mod.scale_f32(**{**launch_args(OTHER_ARGS_scale_f32, args, DERIVED_scale_f32), name: FakeCudaArray(typestr, " \
        "(items,))})" in body[1]
    assert "assert e.value.argument == name" in body[1]
    # an absent kernel (big_smem is hopper's only) has the sizes test but launches nothing
    gb10 = _contract(fixture_files, "fixture_ops", "gb10")
    assert "def test_big_smem_sizes_match_spec" in gb10 and "def test_big_smem_too_small" not in gb10
    assert "def test_big_smem_too_small_arrays_are_refused" in text
