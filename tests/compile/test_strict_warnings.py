"""The generated files compile without a warning under the strict options a project may set:
`nvcc_flags: [-Werror=all-warnings, -Xcompiler=-Wall, -Xcompiler=-Wextra]` in specs/project.yaml
for the launchers (with the runtime headers they include), and -Wall -Wextra -Werror for the
bindings and kernelgen's runtime sources (CXXFLAGS / CUDAFLAGS, which CMake reads at the first
configure). Fixture projects are built whole; modules of kernelgen's own catalog (a dtype-keyed
chain among them) are compiled from generated/ as their build does."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli

pytestmark = pytest.mark.build

STRICT = '["-Werror=all-warnings", "-Xcompiler=-Wall", "-Xcompiler=-Wextra"]'
ENV = {"CXXFLAGS": "-Wall -Wextra -Werror", "CUDAFLAGS": "-Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror"}


@pytest.mark.parametrize("fixture", ["project", "launch_modes"])
def test_a_project_with_strict_warnings_builds(tmp_path: Path, fixture: str) -> None:
    root = tmp_path / "project"
    shutil.copytree(REPO / "tests" / "fixtures" / fixture, root)
    (root / "specs" / "project.yaml").write_text(f"package: strict_{fixture}\nbuild:\n  nvcc_flags: {STRICT}\n")
    res = run_cli("build", "--target", "hopper", "--no-torch-reader", "--no-link", cwd=root, env=ENV)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "warning" not in res.stdout + res.stderr, res.stdout + res.stderr


@pytest.mark.parametrize("module", ["rms_norm", "dflash2"])
def test_catalog_launchers_compile_with_strict_warnings(tmp_path: Path, module: str) -> None:
    from kernelgen.toolkit import find_toolkit

    gen = REPO / "generated" / "hopper"
    cmd = [str(find_toolkit().nvcc), "-c", "-std=c++17", "-arch=sm_90a", "--expt-relaxed-constexpr",
           "-Xcompiler=-fPIC,-fvisibility=hidden", "-Werror=all-warnings", "-Xcompiler=-Wall,-Wextra,-Werror",
           '-DKERNELGEN_TARGET_NAME="hopper"', "-DKERNELGEN_TARGET_CC=90", f"-I{gen / 'include'}",
           f"-I{REPO / 'src' / 'kernelgen' / 'runtime' / 'include'}", f"-I{REPO}", str(gen / "src" / f"{module}.cu"),
           "-o", str(tmp_path / f"{module}.o")]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
