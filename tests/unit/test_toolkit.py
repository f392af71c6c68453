"""Finding the CUDA toolkit: the usual places first, then the toolkit wheels from PyPI;
nothing found is one clear error saying how to get one."""

from __future__ import annotations

import os
import site
from pathlib import Path

import pytest

from kernelgen import toolkit
from kernelgen.errors import ToolkitError


def fake_toolkit(root: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "include").mkdir()
    (root / "include" / "cuda_runtime.h").write_text("")
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.5, V13.5.37'\n")
    nvcc.chmod(0o755)
    return root


@pytest.fixture
def no_system_toolkit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for var in ("CUDACXX", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setattr(toolkit, "SYSTEM_ROOTS", [])
    empty = tmp_path / "site-packages"
    empty.mkdir()
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(empty)])
    monkeypatch.setattr(site, "getusersitepackages", lambda: str(empty))
    monkeypatch.setattr(toolkit.sys, "path", [str(empty)])
    return empty


def test_cuda_home_wins(no_system_toolkit: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = fake_toolkit(tmp_path / "cuda")
    monkeypatch.setenv("CUDA_HOME", str(root))
    tk = toolkit.find_toolkit()
    assert (tk.root, tk.source, tk.version) == (root, "CUDA_HOME", "13.5")


def test_toolkit_wheels_from_pypi_are_found(no_system_toolkit: Path) -> None:
    root = fake_toolkit(no_system_toolkit / "nvidia" / "cu13")
    tk = toolkit.find_toolkit()
    assert tk.root == root and tk.source == "PyPI wheels"


def test_a_folder_without_headers_is_not_a_toolkit(no_system_toolkit: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    wrapper = tmp_path / "wrapper" / "bin"
    wrapper.mkdir(parents=True)
    (wrapper / "nvcc").write_text("#!/bin/sh\n")
    (wrapper / "nvcc").chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper}{os.pathsep}/usr/bin")
    with pytest.raises(ToolkitError):
        toolkit.find_toolkit()


def test_missing_toolkit_is_one_error_that_says_how_to_get_one(no_system_toolkit: Path) -> None:
    with pytest.raises(ToolkitError) as info:
        toolkit.find_toolkit()
    assert "no CUDA toolkit (nvcc) found" in str(info.value)
    assert "pip install 'kernelgen[cuda]'" in str(info.value)
