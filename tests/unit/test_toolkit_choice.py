"""Which toolkit a build takes and what it says when there is none: CUDACXX names an nvcc; a
toolkit whose nvcc cannot link is passed over; the advice follows the switches that are set; the
automatic install knows an isolated build environment and one without pip, and shows pip's
progress bar on a terminal."""

from __future__ import annotations

import os
import shlex
import site
import sys
from pathlib import Path

import pytest

from kernelgen import toolkit
from kernelgen.errors import ToolkitError

NVCC = ("#!/bin/sh\n[ \"$1\" = -dryrun ] && echo '#$ LIBRARIES=  \"-L{lib}/stubs\" \"-L{lib}\"' >&2\n"
        "echo 'Cuda compilation tools, release {version}, V{version}'\n")


def make_toolkit(root: Path, version: str = "13.5.37", looks_in: str = "lib", libs_in: str = "lib") -> Path:
    """A toolkit whose nvcc's profile looks for the libraries in ``looks_in`` and whose runtime
    put them in ``libs_in``."""
    (root / "bin").mkdir(parents=True)
    (root / "include").mkdir()
    (root / "include" / "cuda_runtime.h").write_text("")
    (root / libs_in).mkdir()
    for lib in toolkit.LINKED_LIBRARIES:
        (root / libs_in / lib).write_text("")
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text(NVCC.replace("{lib}", f"{root}/bin/../{looks_in}").replace("{version}", version))
    nvcc.chmod(0o755)
    return root


@pytest.fixture
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No toolkit anywhere; the site-packages folder returned is where wheels go."""
    for var in ("CUDACXX", "CUDA_HOME", "CUDA_PATH", "KERNELGEN_IGNORE_SYSTEM_CUDA", "KERNELGEN_NO_CUDA_INSTALL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setattr(toolkit, "SYSTEM_ROOTS", [])
    monkeypatch.setattr(toolkit, "_WARNED", set())
    monkeypatch.setattr(toolkit, "_LINK_PROBLEMS", {})
    sp = tmp_path / "site-packages"
    sp.mkdir()
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(sp)])
    monkeypatch.setattr(site, "getusersitepackages", lambda: str(sp))
    monkeypatch.setattr(toolkit.sys, "path", [str(sp)])
    return sp


# ---------------------------------------------------------------- nvcc that cannot link

@pytest.mark.parametrize("version", ["13.0.88", "13.1.80", "13.2.51"])
def test_wheels_whose_nvcc_looks_in_lib64_are_unusable(clean: Path, version: str) -> None:
    make_toolkit(clean / "nvidia" / "cu13", version, looks_in="lib64")
    with pytest.raises(ToolkitError) as info:
        toolkit.find_toolkit()
    msg = str(info.value)
    assert f"nvcc {version} cannot link: libcudadevrt.a and libcudart_static.a are not where its bin/nvcc.profile " \
           "looks" in msg
    assert "To fix: upgrade the CUDA wheels" in msg and "pip install --upgrade 'nvidia-cuda-nvcc>=13.2.86,<14'" in msg


def test_a_toolkit_that_cannot_link_is_passed_over_for_one_that_can(clean: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    broken = make_toolkit(tmp_path / "old", "13.0.88", looks_in="lib64")
    good = make_toolkit(clean / "nvidia" / "cu13")
    monkeypatch.setenv("CUDA_HOME", str(broken))
    lines: list[str] = []
    tk = toolkit.find_toolkit(echo=lines.append)
    assert tk.root == good
    assert len(lines) == 1 and lines[0].startswith(f"kernelgen: warning: CUDA_HOME={broken} has an nvcc that cannot link")


def test_the_wheel_bounds_exclude_the_nvcc_that_cannot_link() -> None:
    assert "nvidia-cuda-nvcc>=13.2.86,<14" in toolkit.CUDA_WHEELS


# ---------------------------------------------------------------- CUDACXX

@pytest.mark.parametrize("name", ["ptxas", "include/cuda_runtime.h"])
def test_cudacxx_naming_another_file_of_a_toolkit_is_passed_over(clean: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    home = make_toolkit(tmp_path / "cuda")
    other = home / ("bin/" + name if "/" not in name else name)
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    wheels = make_toolkit(clean / "nvidia" / "cu13")
    monkeypatch.setenv("CUDACXX", str(other))
    lines: list[str] = []
    tk = toolkit.find_toolkit(echo=lines.append)
    assert tk.root == wheels
    assert lines == [f"kernelgen: warning: CUDACXX={other} is not nvcc (CUDACXX names the CUDA compiler: a toolkit's "
                     f"bin/nvcc, or nvcc on the PATH); using nvcc 13.5.37 from {wheels} (PyPI wheels) instead"]


def test_cudacxx_may_name_nvcc_on_the_path(clean: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = make_toolkit(tmp_path / "cuda")
    make_toolkit(clean / "nvidia" / "cu13")
    monkeypatch.setenv("PATH", f"{home / 'bin'}{os.pathsep}/usr/bin")
    monkeypatch.setenv("CUDACXX", "nvcc")
    lines: list[str] = []
    tk = toolkit.find_toolkit(echo=lines.append)
    assert (tk.root, tk.source, lines) == (home, "CUDACXX", [])


def test_cudacxx_naming_no_program_on_the_path_says_so(clean: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheels = make_toolkit(clean / "nvidia" / "cu13")
    monkeypatch.setenv("CUDACXX", "nvcc")
    lines: list[str] = []
    assert toolkit.find_toolkit(echo=lines.append).root == wheels
    assert lines[0].startswith("kernelgen: warning: CUDACXX=nvcc is not a program on the PATH; using")


# ---------------------------------------------------------------- advice

def test_advice_with_the_machines_toolkits_hidden_and_no_install(clean: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cu12 = clean / "nvidia" / "cuda_nvcc"
    (cu12 / "bin").mkdir(parents=True)
    (cu12 / "bin" / "nvcc").write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.9, V12.9.86'\n")
    (cu12 / "bin" / "nvcc").chmod(0o755)
    monkeypatch.setenv("KERNELGEN_IGNORE_SYSTEM_CUDA", "1")
    monkeypatch.setenv("KERNELGEN_NO_CUDA_INSTALL", "1")
    with pytest.raises(ToolkitError) as info:
        toolkit.find_toolkit(install=True)
    msg = str(info.value)
    assert "looked in: nothing" not in msg and f"{cu12} (nvcc 12.9 without the toolkit's headers" in msg
    assert "KERNELGEN_NO_CUDA_INSTALL is set, so kernelgen build did not install the CUDA wheels" in msg
    assert "set CUDA_HOME" not in msg and "KERNELGEN_IGNORE_SYSTEM_CUDA is set" in msg
    assert "kernelgen[cuda]" not in msg
    assert " ".join(shlex.quote(w) for w in toolkit.CUDA_WHEELS) in msg
    assert f"{shlex.quote(sys.executable)} -m pip install 'nvidia-cuda-nvcc" in msg


def test_advice_without_switches_names_cuda_home_and_the_wheels(clean: Path) -> None:
    with pytest.raises(ToolkitError) as info:
        toolkit.find_toolkit()
    msg = str(info.value)
    assert "install the CUDA toolkit (nvcc) and set CUDA_HOME, or install the CUDA wheels into this environment: " \
        f"{toolkit.pip_install_wheels()}" in msg
    assert "kernelgen[cuda]" not in msg and "looked in: nothing" not in msg


# ---------------------------------------------------------------- the automatic install

class FakePip:
    calls: list[tuple[list[str], dict[str, object]]] = []

    def __init__(self, cmd: list[str], **kw: object) -> None:
        FakePip.calls.append((cmd, kw))
        said = iter([f"{sys.executable}: No module named pip\n"])
        self.stdout = said if kw.get("stdout") is not None else None
        self.stderr = said if kw.get("stderr") is not None and kw.get("stdout") is None else None

    def wait(self) -> int:
        return 1


def test_an_environment_without_pip_is_named(clean: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    FakePip.calls = []
    monkeypatch.setattr(toolkit.subprocess, "Popen", FakePip)
    with pytest.raises(ToolkitError) as info:
        toolkit.find_toolkit(install=True, echo=lambda _: None)
    assert f"pip is not installed in this environment ({sys.prefix})" in str(info.value)
    assert "-m ensurepip" in str(info.value)


def test_a_terminal_gets_pips_progress_bar(clean: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    FakePip.calls = []
    monkeypatch.setattr(toolkit.subprocess, "Popen", FakePip)
    monkeypatch.setattr(toolkit, "_terminal", lambda: True)
    with pytest.raises(ToolkitError, match="pip is not installed"):
        toolkit.find_toolkit(install=True, echo=lambda _: None)
    cmd, kw = FakePip.calls[0]
    assert "--progress-bar" not in cmd and kw.get("stdout") is None  # pip draws on the terminal
    FakePip.calls = []
    monkeypatch.setattr(toolkit, "_terminal", lambda: False)
    with pytest.raises(ToolkitError):
        toolkit.find_toolkit(install=True, echo=lambda _: None)
    assert FakePip.calls[0][0][3:6] == ["install", "--progress-bar", "off"]


def test_an_isolated_build_installs_nothing_and_says_how_to_supply_the_toolkit(
        clean: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    FakePip.calls = []
    monkeypatch.setattr(toolkit.subprocess, "Popen", FakePip)
    overlay = tmp_path / "pip-build-env-54uxbvsy"
    monkeypatch.setattr(toolkit, "__file__", str(overlay / "overlay/lib/python3.11/site-packages/kernelgen/toolkit.py"))
    with pytest.raises(ToolkitError) as info:
        toolkit.find_toolkit(install=True, echo=lambda _: None)
    msg = str(info.value)
    assert FakePip.calls == []
    assert f"kernelgen runs in an isolated build environment ({overlay})" in msg
    assert f"install the CUDA wheels into the environment that runs the build: {toolkit.pip_install_wheels()}" in msg
    assert "[build-system] requires" in msg and "--no-build-isolation" in msg
