"""Builds a small kernelgen project once per test session and loads its extension modules:
the guards fixture project (tests/fixtures/guards), for tests/gpu/test_bindings.py and
tests/gpu/test_launch_guards.py, or a project that a test assembles itself.

The project is copied (or assembled) into a temporary folder and built with
``python -m kernelgen.cli --root COPY build --target T --build-dir ... --install-dir ...``;
the modules are imported straight from their files.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "guards"

ENV_INSTALL = "KERNELGEN_GUARDS_INSTALL"  # an existing build's kernelgen_ops/<target> folder

_built: dict[str, Path] = {}
_loaded: dict[Path, ModuleType] = {}


def target_for(capability: tuple[int, int]) -> str | None:
    """The kernelgen target for a compute capability, None when there is none."""
    from kernelgen.loader import load_targets

    targets = load_targets(REPO / "specs" / "targets.yaml", REPO)
    return {t.compute_capability: t.name for t in targets}.get(tuple(capability))  # type: ignore[arg-type]


def build(tmp_path_factory: pytest.TempPathFactory, target: str,
          populate: Callable[[Path], None] | None = None, name: str = "guards") -> Path:
    """Builds a project for ``target`` (once per session and name); returns the folder holding
    the built extensions, ``<install>/<package>/<target>`` (``kernelgen_ops`` unless the project
    names its package). The project is the guards
    fixture, or what ``populate(root)`` writes into the empty folder ``root``."""
    given = os.environ.get(ENV_INSTALL) if populate is None else None
    if given:
        return Path(given)
    key = f"{name}:{target}"
    if key in _built:
        return _built[key]
    base = tmp_path_factory.mktemp(f"{name}_{target}")
    root = base / "project"
    if populate is None:
        shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("generated", "build", "bindings"))
    else:
        root.mkdir()
        populate(root)
    cmd = [
        sys.executable, "-m", "kernelgen.cli", "--root", str(root), "build", "--target", target,
        "--build-dir", str(base / "build"), "--install-dir", str(base / "install"),
    ]
    res = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, f"building the {name} project failed:\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}"
    _built[key] = base / "install" / package_of(root) / target
    return _built[key]


MMA_TARGET = "sm90_mma"


def mma_path_torch():
    """torch, for a test module of a per-warp mma.sync path (the ones gb10 builds) run on this
    GPU; skips the calling module without torch or a compute capability 9.0 GPU. Called before
    the module imports the test module it builds on: one that pytest has already skipped stays
    half-imported."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):  # pragma: no cover
        pytest.skip("the sm_90 build of the mma.sync path needs a compute capability 9.0 GPU",
                    allow_module_level=True)
    return torch


def build_mma_path(tmp_path_factory: pytest.TempPathFactory, modules: tuple[str, ...],
                   kernel_folders: tuple[str, ...], name: str) -> Path:
    """Builds, for MMA_TARGET, a project of the given modules' specs and kernel folders of this
    repository and a target registry with MMA_TARGET only: gb10's entry with arch sm_90 and
    compute capability 9.0, so that the sources compile their per-warp mma.sync paths (those
    gb10 builds: no sm_90a features) and the library loads on an H200. Returns build()'s folder."""
    import yaml

    def populate(root: Path) -> None:
        (root / "specs").mkdir()
        for m in modules:
            shutil.copy(REPO / "specs" / f"{m}.yaml", root / "specs")
        for folder in kernel_folders:
            shutil.copytree(REPO / "kernels" / folder, root / "kernels" / folder)
        targets = yaml.safe_load((REPO / "specs" / "targets.yaml").read_text())
        entry = dict(targets["gb10"], arch="sm_90", compute_capability="9.0")
        # The other targets stay declared (not built), so that kernels of their own (`targets`:
        # hopper's TMA GEMMs) are absent here and the chains go on to the kernels gb10 builds.
        others = {name: t for name, t in targets.items() if name != "gb10"}
        (root / "specs" / "targets.yaml").write_text(yaml.safe_dump({MMA_TARGET: entry, **others}))

    return build(tmp_path_factory, MMA_TARGET, populate=populate, name=name)


def package_of(root: Path) -> str:
    """The project's Python package (specs/project.yaml; kernelgen_ops without one)."""
    from kernelgen.loader import load_project

    return load_project(root / "specs" / "project.yaml", root).package


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


def current_target_or_skip() -> str:
    """The kernelgen target of the current GPU; skips the calling test module when none."""
    import torch

    cc = torch.cuda.get_device_capability()
    target = target_for(cc)
    if target is None:
        pytest.skip(f"no kernelgen target for compute capability {cc}", allow_module_level=True)
    return target


def build_and_load(tmp_path_factory: pytest.TempPathFactory, target: str) -> ModuleType:
    """The built guards module (its target library has its own name, so it loads next to
    the repository's own build of the same target)."""
    return load(build(tmp_path_factory, target))
