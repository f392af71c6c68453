"""A target's build tree whose CMake cache CMake would refuse (made in another folder, or from
kernelgen's driver project where kernelgen was installed then, as by an isolated `pip wheel`) is
configured afresh by the next build, whichever of `kernelgen build` and a wheel build comes first."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from kernelgen import build
from kernelgen.build import BuildOptions

ISOLATED = "/tmp/pip-build-env-54uxbvsy/overlay/lib/python3.11/site-packages/kernelgen/cmake"


def _fake_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, driver: Path) -> tuple[list[list[str]], list[str]]:
    """Runs one target's build with ``driver`` as kernelgen's driver folder and every command faked:
    the configure writes the cache CMake would (this folder, this driver). Returns the commands run and
    the messages shown."""
    monkeypatch.setattr(build, "DRIVER_DIR", driver)
    commands: list[list[str]] = []

    def run(cmd: list[str], cwd: Path, echo: object, verbose: bool) -> tuple[int, list[str], list[str]]:
        commands.append(cmd)
        if "-S" in cmd:
            bdir = Path(cmd[cmd.index("-B") + 1])
            home = cmd[cmd.index("-S") + 1]
            (bdir / "CMakeFiles").mkdir(exist_ok=True)
            (bdir / "CMakeCache.txt").write_text(
                f"CMAKE_CACHEFILE_DIR:INTERNAL={bdir}\nCMAKE_HOME_DIRECTORY:INTERNAL={home}\n")
        return 0, [], []

    monkeypatch.setattr(build, "_run", run)
    tk = SimpleNamespace(nvcc="/cuda/bin/nvcc", root="/cuda", version="13.0", source="PATH")
    tools = build.Tools(tk, "cmake", "ninja", "/pybind11", None)  # type: ignore[arg-type]
    opts = BuildOptions(tmp_path, tmp_path / "build", tmp_path / "bindings", torch_reader=False)
    shown: list[str] = []
    build._build_one(opts, SimpleNamespace(name="hopper", arch="sm_90a"), tools, shown.append)  # type: ignore[arg-type]
    return commands, shown


def _configures(commands: list[list[str]]) -> list[str]:
    return [c[c.index("-S") + 1] for c in commands if "-S" in c]


def test_a_tree_configured_by_another_kernelgen_install_is_configured_afresh(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bdir = tmp_path / "build" / "hopper"
    # an isolated wheel build configured the tree from its temporary environment's driver
    commands, shown = _fake_build(tmp_path, monkeypatch, Path(ISOLATED))
    assert _configures(commands) == [ISOLATED]
    (bdir / "CMakeFiles" / "stale").write_text("x")
    # then `kernelgen build`, with kernelgen installed here: the cache is dropped before CMake sees it
    here = tmp_path / "site" / "kernelgen" / "cmake"
    here.mkdir(parents=True)
    commands, shown = _fake_build(tmp_path, monkeypatch, here)
    assert _configures(commands) == [str(here)]
    assert (f"kernelgen: build/hopper was configured from kernelgen's CMake driver at {ISOLATED}, and kernelgen's "
            f"is now {here}; configuring it afresh") in shown
    assert not (bdir / "CMakeFiles" / "stale").exists()
    # a second build with the same kernelgen reuses the tree: no configure
    commands, shown = _fake_build(tmp_path, monkeypatch, here)
    assert _configures(commands) == []
    assert not any("afresh" in s for s in shown)
