"""Shared fixtures: a scratch copy of the fixture project, and GPU detection for the gpu marker."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "project"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A writable copy of tests/fixtures/project (specs/, kernels/)."""
    dst = tmp_path / "project"
    shutil.copytree(FIXTURE, dst, ignore=shutil.ignore_patterns("generated", "build", "bindings"))
    return dst


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    """Run ``kernelgen`` as a user would, in a subprocess."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "kernelgen.cli", *args], cwd=cwd, env=full_env, capture_output=True, text=True,
        timeout=timeout,
    )


def _gpu_present() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _gpu_present():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU and torch (run scripts/gpu_check.sh on a GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """With KERNELGEN_CHECKS=PATH: the GPU tests' recorded comparisons (tests/gpu/checks.py),
    summarised per test module into PATH's .md and .json."""
    path = os.environ.get("KERNELGEN_CHECKS")
    checks = sys.modules.get("tests.gpu.checks")
    if path and checks is not None:
        checks.write(Path(path))


def small_project(root: Path, files: dict[str, str]) -> Path:
    """A project at ``root`` made of ``files`` (relative path -> text), with the fixture's targets."""
    (root / "specs").mkdir(parents=True)
    (root / "specs" / "targets.yaml").write_text((REPO / "tests" / "fixtures" / "structs_setup" / "specs" /
                                                  "targets.yaml").read_text())
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def build_target(root: Path, target: str) -> subprocess.CompletedProcess:
    """``kernelgen build`` of one target, as the compile tests run it (no torch reader)."""
    return run_cli("build", "--target", target, "--no-torch-reader", cwd=root)


def ops_env(root: Path) -> dict[str, str]:
    """The environment in which ``kernelgen_ops`` is the build of the project at ``root``."""
    return dict(os.environ, KERNELGEN_OPS_PATH=str(root / "bindings" / "kernelgen_ops"), KERNELGEN_REQUIRE_BUILT="1")


def contract_tests_pass(root: Path, target: str, least: int = 1, timeout: int = 300) -> str:
    """Runs the generated contract tests of the project at ``root`` for ``target`` (its build as
    ``kernelgen_ops``, KERNELGEN_REQUIRE_BUILT on); asserts they pass, at least ``least`` of them.
    Returns pytest's output."""
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"generated/{target}/tests"],
                         cwd=root, env=ops_env(root), capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    passed = re.search(r"\b(\d+) passed", res.stdout)
    assert passed and int(passed.group(1)) >= least, res.stdout[-500:]
    return res.stdout


def cargo_tests_pass(root: Path, target: str, target_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    """``cargo test --offline`` of the project's generated crate for ``target`` against its built
    library; asserts it passes. Returns the finished process."""
    env = dict(os.environ, KERNELGEN_LIB_DIR=str(root / "bindings" / "kernelgen_ops" / target),
               CARGO_TARGET_DIR=str(target_dir))
    res = subprocess.run(["cargo", "test", "--offline", *extra], cwd=root / "generated" / target / "rust", env=env,
                         capture_output=True, text=True, timeout=900)
    out = res.stdout + res.stderr
    assert res.returncode == 0 and "FAILED" not in out, out[-4000:]
    return res


def ops_python(root: Path, code: str) -> list[str]:
    """The lines ``code`` prints, run by a fresh Python in which ``kernelgen_ops`` is the build of
    the project at ``root`` and no CUDA device is visible (the launchers' checks before the driver)."""
    env = dict(os.environ, KERNELGEN_OPS_PATH=str(root / "bindings" / "kernelgen_ops"), CUDA_VISIBLE_DEVICES="")
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()
