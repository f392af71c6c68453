"""A target's build tree after a failed configure, and ninja's records of a tree copied or moved
from elsewhere: the next build configures from scratch, and a build never removes a file outside
its own tree."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from kernelgen import build, toolkit
from kernelgen.build import BuildOptions
from kernelgen.errors import BuildError

NINJA = toolkit.find_ninja()


def _tools() -> build.Tools:
    tk = SimpleNamespace(nvcc="/cuda/bin/nvcc", root="/cuda", version="13.0", source="PATH")
    return build.Tools(tk, "cmake", NINJA, "/pybind11", None)  # type: ignore[arg-type]


def _build(root: Path, run: object) -> list[str]:
    shown: list[str] = []
    opts = BuildOptions(root, root / "build", root / "bindings", torch_reader=False)
    build._build_one(opts, SimpleNamespace(name="hopper", arch="sm_90a"), _tools(), shown.append)  # type: ignore[arg-type]
    return shown


def test_a_failed_configure_leaves_nothing_the_next_one_would_reuse(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    bdir = tmp_path / "build" / "hopper"
    configures: list[bool] = []

    def run(cmd: list[str], cwd: Path, echo: object, verbose: bool) -> tuple[int, list[str], list[str]]:
        if "-S" in cmd:
            # what CMake leaves after compiler checks that failed: a cache and a compiler without features
            configures.append((bdir / "CMakeFiles").exists())
            (bdir / "CMakeFiles" / "4.4.5").mkdir(parents=True, exist_ok=True)
            (bdir / "CMakeFiles" / "4.4.5" / "CMakeCXXCompiler.cmake").write_text('set(CMAKE_CXX_COMPILE_FEATURES "")\n')
            (bdir / "CMakeCache.txt").write_text(f"CMAKE_CACHEFILE_DIR:INTERNAL={bdir}\n")
            return 1, ["CMake Error: The C++ compiler is not able to compile a simple test program."], []
        return 0, [], []

    monkeypatch.setattr(build, "_run", run)
    with pytest.raises(BuildError) as info:
        _build(tmp_path, run)
    assert "the next build configures it from scratch" in str(info.value)
    assert not (bdir / "CMakeCache.txt").exists() and not (bdir / "CMakeFiles").exists()
    with pytest.raises(BuildError):
        _build(tmp_path, run)
    assert configures == [False, False]  # each configure started from scratch


def _tree(bdir: Path, outputs: list[str]) -> None:
    """A ninja build tree whose build makes ``outputs`` (paths as build.ninja spells them)."""
    bdir.mkdir(parents=True, exist_ok=True)
    lines = ["rule touch", "  command = touch $out", ""]
    lines += [f"build {o.replace(':', '$:').replace(' ', '$ ')}: touch" for o in outputs]
    (bdir / "build.ninja").write_text("\n".join(lines) + "\n")


def _log(bdir: Path, paths: list[str]) -> None:
    (bdir / ".ninja_log").write_text("# ninja log v7\n" + "".join(
        f"{i}\t{i + 1}\t1796455918751192061\t{p}\tb460ccb8dd39f4c2\n" for i, p in enumerate(paths)))


def test_cleaning_dead_outputs_leaves_another_trees_files(tmp_path: Path) -> None:
    original = tmp_path / "proj" / "build" / "hopper"
    (original / "kg_local").mkdir(parents=True)
    theirs = original / "kg_local" / "scale.o"
    theirs.write_text("the original's object")
    copy = tmp_path / "proj_copy" / "build" / "hopper"
    _tree(copy, [f"{copy}/kg_local/scale.o"])
    (copy / "kg_local").mkdir()
    (copy / "kg_local" / "old.o").write_text("a dead output of this tree")
    # the copy's log still lists the original's absolute paths, and an output this tree no longer makes
    _log(copy, [str(theirs), "kg_local/old.o"])
    build._clean_dead(copy, NINJA, tmp_path)
    assert theirs.read_text() == "the original's object"
    assert not (copy / "kg_local" / "old.o").exists()
    assert str(theirs) not in (copy / ".ninja_log").read_text()


def test_a_build_tree_reached_through_a_link_keeps_its_outputs(tmp_path: Path) -> None:
    moved = tmp_path / "moved" / "hopper"
    _tree(moved, [f"{moved}/kg_local/scale.o"])
    (moved / "kg_local").mkdir()
    (moved / "kg_local" / "scale.o").write_text("built")
    (tmp_path / "proj" / "build").mkdir(parents=True)
    (tmp_path / "proj" / "build" / "hopper").symlink_to(moved)
    # the log names the object by the link's path, which leads to this tree's own output
    _log(moved, [str(tmp_path / "proj" / "build" / "hopper" / "kg_local" / "scale.o")])
    build._clean_dead(moved, NINJA, tmp_path)
    assert (moved / "kg_local" / "scale.o").read_text() == "built"


def test_an_output_outside_the_tree_that_the_build_makes_stays_in_the_log(tmp_path: Path) -> None:
    bdir = tmp_path / "build" / "hopper"
    elsewhere = tmp_path / "out" / "lib.so"
    _tree(bdir, [str(elsewhere)])
    _log(bdir, [str(elsewhere)])
    build._clean_dead(bdir, NINJA, tmp_path)
    assert str(elsewhere) in (bdir / ".ninja_log").read_text()


def test_a_tree_configured_afresh_drops_ninjas_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = tmp_path / "proj"
    bdir = tmp_path / "proj_copy" / "build" / "hopper"
    bdir.mkdir(parents=True)
    (bdir / "CMakeCache.txt").write_text(f"CMAKE_CACHEFILE_DIR:INTERNAL={original}/build/hopper\n")
    for name in build.NINJA_RECORDS:
        (bdir / name).write_text(f"{original}/build/hopper/kg_local/scale.o\n")
    seen: list[list[str]] = []

    def run(cmd: list[str], cwd: Path, echo: object, verbose: bool) -> tuple[int, list[str], list[str]]:
        if "-S" in cmd:
            seen.append(sorted(p.name for p in bdir.iterdir()))
            (bdir / "CMakeCache.txt").write_text(f"CMAKE_CACHEFILE_DIR:INTERNAL={bdir}\n")
        return 0, [], []

    monkeypatch.setattr(build, "_run", run)
    shown = _build(tmp_path / "proj_copy", run)
    assert any("configuring it afresh" in s for s in shown)
    assert seen and not set(seen[0]) & {"CMakeCache.txt", *build.NINJA_RECORDS}
