"""Build test of tests/fixtures/build_settings: the project's, the target's and a module's `build:`
settings reach nvcc for the modules they belong to and no others. The fixture's kernels `#error`
when a folder, a macro or an option is missing or leaks into another module, so the build
succeeding is the check; the options are also read back from the build's command lines. The
project defines the half / bfloat16 macros a PyTorch extension build sets
(__CUDA_NO_HALF_CONVERSIONS__ ...), under which the generated launchers of f16 / bf16 scalars,
vectors and a struct with f16 fields must compile."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli

pytestmark = pytest.mark.build

TARGET = "hopper"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("build_settings") / "project"
    shutil.copytree(REPO / "tests" / "fixtures" / "build_settings", root)
    res = run_cli("build", "--target", TARGET, "--no-link", cwd=root)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return root


def _flags(built: Path, module: str) -> str:
    ninja = (built / "build" / TARGET / "build.ninja").read_text()
    m = re.search(rf"^build \S+_{module}\.dir/src/{module}\.cu\.o: .*\n(?:  .*\n)*?  FLAGS = (.*)$", ninja, re.M)
    assert m, f"no compile line for {module}"
    return m.group(1)


def test_each_module_is_compiled_with_its_settings(built: Path) -> None:
    half = _flags(built, "half_ops")
    plain = _flags(built, "plain")
    assert half.endswith("--ptxas-options=--warn-on-spills --extended-lambda -maxrregcount=40 -Xptxas -O3"), half
    assert plain.endswith("--ptxas-options=--warn-on-spills --extended-lambda"), plain


def test_the_built_package_plans_and_checks_arguments(built: Path) -> None:
    code = """
import bsettings
from bsettings.hopper import half_ops, plain
print(half_ops.apply_affine.plan(n=1000)["grid"], plain.scale.plan(n=1000)["grid"])
try:
    half_ops.apply_affine({"scale": 1.0, "shift": 0.5, "n": 1 << 40}, 1 << 20, 1 << 20, n=1000)
except bsettings.ArgumentError as e:
    print("ArgumentError", e.argument)
"""
    env = dict(os.environ, PYTHONPATH=str(built / "bindings"), CUDA_VISIBLE_DEVICES="")
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["(4, 1, 1) (4, 1, 1)", "ArgumentError p"], res.stdout


def test_a_missing_include_folder_stops_the_build_before_compiling(tmp_path: Path) -> None:
    root = tmp_path / "project"
    shutil.copytree(REPO / "tests" / "fixtures" / "build_settings", root)
    shutil.rmtree(root / "vendor" / "extra")
    res = run_cli("build", "--target", TARGET, "--no-link", cwd=root)
    assert res.returncode != 0
    assert re.search(r"specs/half_ops\.yaml:\d+: build\.include_dirs: include folder vendor/extra does not exist",
                     res.stderr), res.stderr
    assert not (root / "build").exists()
