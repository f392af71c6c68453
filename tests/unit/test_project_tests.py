"""A project's own tests: kernelgen.testing finds the project they belong to and says why a module
cannot be imported, and the scaffold's test skips (not errors) where the package is not built."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelgen import testing
from kernelgen.cli import main


def _fake_package(site: Path, package: str, root: Path | None, targets: list[str]) -> None:
    """An importable package shell: its record of the project folder and its built targets."""
    (site / package).mkdir(parents=True)
    (site / package / "_project.py").write_text(f"ROOT = {str(root) if root else None!r}\n")
    (site / package / "__init__.py").write_text(f"def available_targets():\n    return {targets!r}\n")


def test_project_root_is_the_folder_above_the_test_holding_specs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    root = tmp_path / "proj"
    (root / "specs").mkdir(parents=True)
    (root / "specs" / "project.yaml").write_text("package: p\n")
    test = root / "tests" / "gpu" / "test_rowsum_gpu.py"
    test.parent.mkdir(parents=True)
    test.write_text("")
    assert testing.project_root("absentpkg_root", str(test)) == root
    monkeypatch.chdir(tmp_path)
    assert testing.project_root("absentpkg_root", str(tmp_path)) is None
    monkeypatch.chdir(test.parent)
    assert testing.project_root("absentpkg_root") == root  # the current folder's project


def test_project_root_comes_from_the_installed_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built_in = tmp_path / "elsewhere"
    _fake_package(tmp_path / "site", "rootpkg_xyz", built_in, [])
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.chdir(tmp_path)
    assert testing.project_root("rootpkg_xyz", str(tmp_path)) == built_in
    reason = testing.not_built_reason("rootpkg_xyz", root=built_in)
    assert reason == (f"rootpkg_xyz is not built (looked in {tmp_path / 'site' / 'rootpkg_xyz'}); run: kernelgen "
                      f"build (in {built_in})")


def test_reason_without_a_target_tells_not_built_from_not_on_the_path(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    assert testing.not_built_reason("absentpkg_any", root=root) == \
        f"absentpkg_any is not built; run: kernelgen build (in {root})"
    (root / "bindings" / "absentpkg_any" / "ampere").mkdir(parents=True)
    (root / "bindings" / "absentpkg_any" / "ampere" / "__init__.py").write_text("")
    assert testing.not_built_reason("absentpkg_any", root=root) == (
        f"absentpkg_any is built in {root / 'bindings' / 'absentpkg_any'}, but the package absentpkg_any is not "
        f"on this Python's path ({sys.executable}); run: kernelgen build (in {root}), which makes it importable "
        "in the active environment")


def test_built_target_returns_a_built_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_package(tmp_path / "site", "builtpkg_xyz", None, ["ampere", "hopper"])
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert testing.built_target("builtpkg_xyz") == "ampere"
    assert testing.not_built_reason("builtpkg_xyz") is None


def _pytest(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KERNELGEN_REQUIRE_BUILT"}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *args], cwd=root,
                          capture_output=True, text=True, env=env, timeout=300)


def test_scaffolded_and_own_tests_skip_with_the_reason_where_not_built(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "proj"
    assert main(["init", str(root), "--package", "ownpkg_xyz", "--target", "ampere"]) == 0
    capsys.readouterr()
    assert 'markers = ["gpu: ' in (root / "pyproject.toml").read_text()
    (root / "tests" / "test_rowsum_gpu.py").write_text(textwrap.dedent("""\
        from kernelgen.testing import built_module

        scale = built_module("ampere", "scale", package="ownpkg_xyz", test_file=__file__)


        def test_rowsum():
            pass
    """))
    res = _pytest(root, "tests")
    assert res.returncode == 5, res.stdout[-3000:]  # every file skipped: none errors in collection
    assert "2 skipped" in res.stdout and "warning" not in res.stdout.lower(), res.stdout[-3000:]
    assert f"ownpkg_xyz is not built; run: kernelgen build (in {root})" in res.stdout, res.stdout[-3000:]
    assert f"ownpkg_xyz is not built for target ampere; run: kernelgen build --target ampere (in {root})" \
        in res.stdout, res.stdout[-3000:]
    # built, but not on this Python's path (after `kernelgen unlink`, say)
    built = root / "bindings" / "ownpkg_xyz" / "ampere"
    built.mkdir(parents=True)
    (built / "__init__.py").write_text("")
    res = _pytest(root, "-m", "not gpu", "tests")
    assert res.returncode == 5, res.stdout[-3000:]
    assert f"ownpkg_xyz is built in {built.parent}, but the package ownpkg_xyz is not on this Python's path" \
        in res.stdout, res.stdout[-3000:]
    assert f"ampere is built in {built}, but the package ownpkg_xyz is not on this Python's path" in res.stdout
