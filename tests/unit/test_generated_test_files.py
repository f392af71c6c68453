"""The generated contract tests' file names: ``pytest generated/`` collects every target's tests
with pytest's default options (no ``--import-mode=importlib``), in a project with no pytest
configuration of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelgen.emit import _check_test_basenames
from kernelgen.errors import GenerationError
from tests.conftest import run_cli


def _stub_builds(root: Path, targets: list[str], module: str, package: str = "kernelgen_ops") -> Path:
    """Empty stand-ins for the built modules, so the test files import (instead of skipping at
    import, which would hide a clash of module names) without building anything."""
    ops = root / "stub_ops" / package
    for t in targets:
        (ops / t).mkdir(parents=True)
        (ops / t / "__init__.py").write_text("")
        (ops / t / f"{module}.py").write_text("")
    return ops


def test_pytest_collects_both_targets_contract_tests_in_default_import_mode(project: Path) -> None:
    assert run_cli("generate", cwd=project).returncode == 0
    names = sorted(p.relative_to(project).as_posix() for p in (project / "generated").glob("*/tests/*.py"))
    assert names == ["generated/gb10/tests/test_fixture_ops_gb10_contract.py",
                     "generated/hopper/tests/test_fixture_ops_hopper_contract.py"]
    assert not any((project / n).is_file() for n in ("pyproject.toml", "pytest.ini", "setup.cfg", "tox.ini"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELGEN_", "PYTEST_"))}
    env["KERNELGEN_OPS_PATH"] = str(_stub_builds(project, ["gb10", "hopper"], "fixture_ops"))
    res = subprocess.run(
        # prepend is pytest's default import mode; named so that no configuration above the project can change it
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "--import-mode=prepend",
         "generated"],
        cwd=project, env=env, capture_output=True, text=True, timeout=300,
    )
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert "import file mismatch" not in out and "error" not in out.lower(), out[-3000:]
    collected = [ln for ln in res.stdout.splitlines() if "::" in ln]
    for t in ("gb10", "hopper"):
        assert any(ln.startswith(f"generated/{t}/tests/") for ln in collected), out[-3000:]


def test_test_files_of_the_old_name_are_orphans(project: Path) -> None:
    assert run_cli("generate", cwd=project).returncode == 0
    old = project / "generated" / "hopper" / "tests" / "test_fixture_ops_contract.py"
    old.write_text("# an older kernelgen's name for the hopper contract tests\n")
    res = run_cli("generate", "--check", cwd=project)
    assert res.returncode == 1
    assert "orphaned: generated/hopper/tests/test_fixture_ops_contract.py" in res.stderr
    assert run_cli("generate", cwd=project).returncode == 0
    assert not old.exists()
    assert run_cli("generate", "--check", cwd=project).returncode == 0


def test_two_test_files_of_one_basename_are_refused() -> None:
    # module a_b on target c and module a on target b_c
    files = {"generated/c/tests/test_a_b_c_contract.py": "", "generated/b_c/tests/test_a_b_c_contract.py": "",
             "generated/c/python/__init__.py": "", "generated/b_c/python/__init__.py": ""}
    with pytest.raises(GenerationError, match=r"generated/b_c/tests/test_a_b_c_contract.py and "
                       r"generated/c/tests/test_a_b_c_contract.py have the same file name"):
        _check_test_basenames(files)


def test_two_projects_tests_collect_in_one_run(tmp_path: Path) -> None:
    # Two projects of their own packages from `kernelgen init`, each with module scale: `pytest
    # alpha_ops beta_ops` in pytest's default import mode needs every test file's basename to
    # differ, the generated contract tests' and the example's own test alike.
    for package in ("alpha_ops", "beta_ops"):
        root = tmp_path / package
        assert run_cli("init", str(root), "--package", package, "--target", "hopper", cwd=tmp_path).returncode == 0
        assert run_cli("generate", cwd=root).returncode == 0
        # the project's own test asks the package for its built targets
        ops = _stub_builds(tmp_path, ["hopper"], "scale", package)
        (ops / "__init__.py").write_text("def available_targets():\n    return ['hopper']\n")
    names = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("*_ops/**/test_*.py"))
    assert names == [f"{pkg}/{rel}" for pkg in ("alpha_ops", "beta_ops")
                     for rel in (f"generated/hopper/tests/test_{pkg}_scale_hopper_contract.py", f"tests/test_{pkg}_scale.py")]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELGEN_", "PYTEST_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "stub_ops"), *filter(None, [env.get("PYTHONPATH")])])
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "--import-mode=prepend",
         "alpha_ops", "beta_ops"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert "import file mismatch" not in out and "error" not in out.lower(), out[-3000:]
    # (node ids are relative to the rootdir pytest picks: a project folder, whose pyproject.toml it reads)
    files = {ln.split("::")[0].rsplit("/", 1)[-1] for ln in res.stdout.splitlines() if "::" in ln}
    assert files == {n.rsplit("/", 1)[-1] for n in names}, out[-3000:]
