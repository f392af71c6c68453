"""Builds the guards fixture project (tests/fixtures/guards) once per test session and loads
its extension module, for tests/gpu/test_bindings.py and tests/gpu/test_launch_guards.py.

The project is copied into a temporary folder and built with
``python -m kernelgen.cli --root COPY build --target T --build-dir ... --install-dir ...``
for the target of the GPU present; the module is imported straight from its file.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "guards"
TARGETS = {(9, 0): "hopper", (12, 1): "gb10"}

ENV_INSTALL = "KERNELGEN_GUARDS_INSTALL"  # an existing build's kernelgen_ops/<target> folder

_built: dict[str, Path] = {}
_loaded: dict[Path, ModuleType] = {}


def target_for(capability: tuple[int, int]) -> str | None:
    """The kernelgen target for a compute capability, None when there is none."""
    return TARGETS.get(tuple(capability))  # type: ignore[arg-type]


def build(tmp_path_factory: pytest.TempPathFactory, target: str) -> Path:
    """Builds the guards project for ``target`` (once per session); returns the folder
    holding the built extension, ``<install>/kernelgen_ops/<target>``."""
    given = os.environ.get(ENV_INSTALL)
    if given:
        return Path(given)
    if target in _built:
        return _built[target]
    base = tmp_path_factory.mktemp(f"guards_{target}")
    root = base / "project"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("generated", "build", "bindings"))
    cmd = [
        sys.executable, "-m", "kernelgen.cli", "--root", str(root), "build", "--target", target,
        "--build-dir", str(base / "build"), "--install-dir", str(base / "install"),
    ]
    res = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, f"building the guards project failed:\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}"
    _built[target] = base / "install" / "kernelgen_ops" / target
    return _built[target]


def module_path(target_dir: Path, name: str = "guards") -> Path:
    found = sorted(p for p in target_dir.glob(f"{name}.*") if p.suffix in (".so", ".pyd"))
    assert found, f"no built {name} module in {target_dir}"
    return found[0]


def load(target_dir: Path, name: str = "guards") -> ModuleType:
    """Imports the built module from its file (once); kernelgen_ops.set_strict and
    kernelgen_ops.refresh reach it like any other loaded module."""
    path = module_path(target_dir, name)
    if path in _loaded:
        return _loaded[path]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    _loaded[path] = mod
    return mod


def module_or_skip(tmp_path_factory: pytest.TempPathFactory, target: str) -> ModuleType:
    """The built guards module (its target library has its own name, so it loads next to
    the repository's own build of the same target)."""
    return load(build(tmp_path_factory, target))
