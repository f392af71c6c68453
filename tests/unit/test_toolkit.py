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
    assert toolkit.pip_install_wheels() in str(info.value)
    assert "kernelgen[cuda]" not in str(info.value)


# ---------------------------------------------------------------- the architectures nvcc builds

ARCHES = "compute_75\ncompute_80\ncompute_90\ncompute_100\ncompute_120\ncompute_121\n"


def nvcc_listing(root: Path, listing: str | None) -> toolkit.Toolkit:
    """A toolkit whose nvcc answers --list-gpu-arch with ``listing`` (None: refuses the option),
    counting its calls in root/calls."""
    fake_toolkit(root)
    nvcc = root / "bin" / "nvcc"
    answer = f"printf '{listing}'" if listing is not None else "echo 'nvcc fatal : Unknown option' >&2; exit 1"
    nvcc.write_text(f"#!/bin/sh\necho x >> {root / 'calls'}\n"
                    f"case \"$1\" in --list-gpu-arch) {answer} ;; *) echo 'release 13.5, V13.5.37' ;; esac\n")
    return toolkit.Toolkit(nvcc, root, "13.5", "CUDA_HOME")


def test_the_arches_nvcc_builds_are_asked_once_per_nvcc(tmp_path: Path) -> None:
    tk = nvcc_listing(tmp_path / "cuda", ARCHES)
    assert toolkit.gpu_arches(tk.nvcc) == {"75", "80", "90", "100", "120", "121"}
    assert toolkit.gpu_arches(tk.nvcc) == {"75", "80", "90", "100", "120", "121"}
    assert (tmp_path / "cuda" / "calls").read_text().count("x") == 1
    other = nvcc_listing(tmp_path / "other", "compute_70\n")
    assert toolkit.gpu_arches(other.nvcc) == {"70"}


@pytest.mark.parametrize("arch,ok", [("sm_90a", True), ("sm_121a", True), ("sm_100f", True), ("sm_80", True),
                                     ("sm_70", False), ("sm_60", False), ("sm_89", False)])
def test_a_target_arch_is_checked_against_what_nvcc_lists(tmp_path: Path, arch: str, ok: bool) -> None:
    tk = nvcc_listing(tmp_path / "cuda", ARCHES)
    problem = toolkit.arch_problem(tk, "old", arch)
    assert (problem is None) == ok, problem
    if not ok:
        assert problem is not None and "\n" not in problem
        assert problem.startswith(f"target 'old' has arch {arch}, which nvcc 13.5 ({tk.nvcc}, from CUDA_HOME) "
                                  "cannot build; it builds sm_75, sm_80, sm_90, sm_100, sm_120, sm_121"), problem


def test_an_nvcc_without_the_listing_is_not_second_guessed(tmp_path: Path) -> None:
    tk = nvcc_listing(tmp_path / "cuda", None)
    assert toolkit.gpu_arches(tk.nvcc) is None
    assert toolkit.arch_problem(tk, "volta", "sm_70") is None


# ---------------------------------------------------------------- variables that name no toolkit

@pytest.mark.parametrize(("var", "value", "wrong"), [
    ("CUDA_HOME", "{tmp}/nonexistent/cuda", "does not exist"),
    ("CUDA_HOME", "{tmp}/empty", "is not a CUDA toolkit (no executable bin/nvcc in it)"),
    ("CUDA_PATH", "{tmp}/empty", "is not a CUDA toolkit (no executable bin/nvcc in it)"),
    ("CUDACXX", "{tmp}/nonexistent/nvcc", "does not exist"),
    ("CUDACXX", "{tmp}/empty", "is not an executable file"),
])
def test_a_variable_naming_no_toolkit_is_passed_over_with_a_warning(
        no_system_toolkit: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, var: str, value: str,
        wrong: str) -> None:
    (tmp_path / "empty").mkdir()
    used = fake_toolkit(no_system_toolkit / "nvidia" / "cu13")
    value = value.format(tmp=tmp_path)
    monkeypatch.setenv(var, value)
    monkeypatch.setattr(toolkit, "_WARNED", set())
    lines: list[str] = []
    tk = toolkit.find_toolkit(echo=lines.append)
    assert tk.root == used
    assert lines == [f"kernelgen: warning: {var}={value} {wrong}; using nvcc 13.5 from {used} (PyPI wheels) instead"]
    toolkit.find_toolkit(echo=lines.append)
    assert len(lines) == 1  # once per process


def test_an_nvcc_outside_a_toolkit_is_named_as_such(no_system_toolkit: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    lone = tmp_path / "lone" / "bin" / "nvcc"
    lone.parent.mkdir(parents=True)
    lone.write_text("#!/bin/sh\n")
    lone.chmod(0o755)
    home = fake_toolkit(tmp_path / "cuda")
    monkeypatch.setenv("CUDACXX", str(lone))
    monkeypatch.setenv("CUDA_HOME", str(home))
    monkeypatch.setattr(toolkit, "_WARNED", set())
    lines: list[str] = []
    assert toolkit.find_toolkit(echo=lines.append).source == "CUDA_HOME"
    assert lines == [f"kernelgen: warning: CUDACXX={lone} is not in a CUDA toolkit ({lone.parent.parent} has no "
                     f"include/cuda_runtime.h); using nvcc 13.5 from {home} (CUDA_HOME) instead"]


def test_variables_that_name_the_toolkit_used_or_are_hidden_give_no_warning(
        no_system_toolkit: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = fake_toolkit(tmp_path / "cuda")
    monkeypatch.setenv("CUDA_HOME", str(home))
    monkeypatch.setenv("CUDA_PATH", str(tmp_path / "nonexistent"))  # looked at after CUDA_HOME
    monkeypatch.setattr(toolkit, "_WARNED", set())
    lines: list[str] = []
    toolkit.find_toolkit(echo=lines.append)
    fake_toolkit(no_system_toolkit / "nvidia" / "cu13")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "nonexistent"))
    monkeypatch.setenv("KERNELGEN_IGNORE_SYSTEM_CUDA", "1")
    assert toolkit.find_toolkit(echo=lines.append).source == "PyPI wheels"
    assert lines == []


# ---------------------------------------------------------------- on/off variables

@pytest.mark.parametrize(("value", "on"), [
    (None, False), ("", False), ("0", False), ("false", False), ("False", False), ("NO", False), ("off", False),
    (" 0 ", False), ("1", True), ("true", True), ("yes", True), ("on", True), ("2", True),
])
def test_on_off_variables_read_one_rule(monkeypatch: pytest.MonkeyPatch, value: str | None, on: bool) -> None:
    if value is None:
        monkeypatch.delenv("KERNELGEN_SOME_SWITCH", raising=False)
    else:
        monkeypatch.setenv("KERNELGEN_SOME_SWITCH", value)
    assert toolkit.env_flag("KERNELGEN_SOME_SWITCH") is on


@pytest.mark.parametrize("value", ["false", "off", "no"])
def test_ignore_system_cuda_false_hides_nothing(no_system_toolkit: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CUDA_HOME", str(fake_toolkit(tmp_path / "cuda")))
    monkeypatch.setenv("KERNELGEN_IGNORE_SYSTEM_CUDA", value)
    assert toolkit.find_toolkit().source == "CUDA_HOME"


def test_no_cuda_install_false_lets_the_build_install_the_wheels(no_system_toolkit: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELGEN_NO_CUDA_INSTALL", "false")
    calls: list[list[str]] = []

    class FakePip:
        def __init__(self, cmd: list[str], **kw: object) -> None:
            calls.append(cmd)
            self.stdout = iter(["ERROR: no network here\n"])

        def wait(self) -> int:
            return 1

    monkeypatch.setattr(toolkit.subprocess, "Popen", FakePip)
    with pytest.raises(ToolkitError, match="installing the CUDA toolkit from PyPI failed"):
        toolkit.find_toolkit(install=True, echo=lambda _: None)
    assert len(calls) == 1
