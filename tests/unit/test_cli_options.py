"""The command line's options: integer options out of range are usage errors, repeated options
are merged, --root is checked (and is init's folder), a closed output ends printing quietly while
a build goes on, `build --help` tells where the CUDA toolkit comes from, and `list` shows structs."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelgen import cli
from kernelgen.cli import build_parser, main
from kernelgen.loader import load_catalog

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def root(project: Path) -> Path:
    """A writable copy of tests/fixtures/project (tests/conftest.py)."""
    return project


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


# ---------------------------------------------------------------- integer options


@pytest.mark.parametrize(("args", "want"), [
    (["build", "-j", "-1"], "--jobs must be 1 or more (got --jobs -1)"),
    (["build", "--jobs", "0"], "--jobs must be 1 or more (got --jobs 0)"),
    (["sass", "--ops", "-1"], "--ops must be 0 or more (got --ops -1)"),
    (["sass", "--loops", "-3"], "--loops must be 0 or more (got --loops -3)"),
    # an int32 at most: CMake's own limit for --parallel, whose refusal is a usage dump
    (["build", "-j", "2147483648"], "--jobs must be 2147483647 or less (got --jobs 2147483648)"),
    (["build", "-j", str(10**30)], f"--jobs must be 2147483647 or less (got --jobs {10**30})"),
    (["sass", "--ops", "2147483648"], "--ops must be 2147483647 or less (got --ops 2147483648)"),
    (["sass", "--loops", "2147483648"], "--loops must be 2147483647 or less (got --loops 2147483648)"),
])
def test_an_integer_option_out_of_range_is_a_usage_error(root: Path, capsys: pytest.CaptureFixture[str],
                                                         args: list[str], want: str) -> None:
    assert main(["--root", str(root), *args]) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"usage: kernelgen {args[0]}" in err and f"kernelgen {args[0]}: error: {want}\n" in err, err
    assert not (root / "generated").exists()  # refused before anything is written


def test_every_integer_option_has_its_range_checked() -> None:
    for name, sub in _subparsers().items():
        counts = {dest for dest, _, least, most in sub.get_default("counts") or () if least <= most <= cli.MOST}
        ints = {a.dest for a in sub._actions if a.type is int}
        assert ints == counts, (name, ints, counts)


# ---------------------------------------------------------------- repeated options


def test_init_merges_a_target_given_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "p"
    assert main(["init", str(folder), "--package", "twice", "-t", "hopper", "-t", "ampere", "-t", "hopper"]) == 0
    assert sorted(t.name for t in load_catalog(folder).targets) == ["ampere", "hopper"]
    assert (folder / "specs" / "targets.yaml").read_text().count("\nhopper:\n") == 1
    assert main(["--root", str(folder), "generate"]) == 0


# ---------------------------------------------------------------- --root


def test_a_bad_root_is_named_with_its_absolute_path(root: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        (tmp_path / "absent", f"--root {tmp_path / 'absent'}: no such folder"),
        (root / "specs" / "targets.yaml", f"{root / 'specs' / 'targets.yaml'} is a file; give the project's folder"),
        (root / "specs", f"no specs/targets.yaml in {root / 'specs'} (its parent {root} has one: --root {root})"),
        (root / "kernels", f"no specs/targets.yaml in {root / 'kernels'} (its parent {root} has one"),
    ]
    (tmp_path / "empty").mkdir()
    cases.append((tmp_path / "empty", f"no specs/targets.yaml in {tmp_path / 'empty'}, so it is not a kernelgen "
                  "project (kernelgen init creates one)"))
    for path, want in cases:
        assert main(["--root", str(path), "list"]) == 2
        err = capsys.readouterr().err
        assert want in err and "target registry not found" not in err, (path, err)


def test_init_writes_into_root(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    assert main(["--root", "../initroot", "init", "--package", "pp", "-t", "hopper"]) == 0
    assert (tmp_path / "initroot" / "specs" / "project.yaml").is_file()
    assert list(here.iterdir()) == []
    # DIR and --root: the same folder is fine, two folders are an error
    assert main(["--root", str(tmp_path / "same"), "init", str(tmp_path / "same"), "--package", "pp"]) == 0
    assert main(["--root", str(tmp_path / "a"), "init", str(tmp_path / "b"), "--package", "pp"]) == 2
    err = capsys.readouterr().err
    assert "name two folders" in err and not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


# ---------------------------------------------------------------- a closed output


def _with_closed_output(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``kernelgen ARGS`` whose standard output is a pipe that nobody reads any more."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "kernelgen.cli", *args], stdout=write, stderr=subprocess.PIPE,
                              text=True, cwd=cwd, timeout=300)
    finally:
        os.close(write)


@pytest.mark.parametrize("args", [["list"], ["plan", "fixture_ops.scale_f32", "n=1,2,3,4,5,6,7,8"], ["schema"]])
def test_printing_into_a_closed_pipe_ends_quietly(root: Path, args: list[str]) -> None:
    res = _with_closed_output(["--root", str(root), *args], root)
    assert res.returncode == 1 and res.stderr == "", res.stderr


def test_generate_into_a_closed_pipe_still_writes(root: Path) -> None:
    res = _with_closed_output(["--root", str(root), "generate"], root)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert (root / "generated" / "hopper" / "src" / "fixture_ops.cu").is_file()


def test_a_build_goes_on_when_its_output_is_closed(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    import kernelgen.build

    built: list[str] = []

    def build_targets(opts, targets) -> None:  # a build that prints its progress
        for t in targets:
            print(f"  [1/1] compiling {t.name}")
            built.append(t.name)

    monkeypatch.setattr(kernelgen.build, "build_targets", build_targets)
    read, write = os.pipe()
    os.close(read)
    stream = os.fdopen(write, "w", buffering=1)
    monkeypatch.setattr(sys, "stdout", stream)
    try:
        code = main(["--root", str(root), "build", "--install-dir", str(tmp_path / "inst"),
                     "--build-dir", str(tmp_path / "b")])
    finally:
        monkeypatch.undo()
        stream.close()
    assert code == 0 and built == ["gb10", "hopper"]
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- help and list


def test_build_help_tells_where_the_toolkit_comes_from() -> None:
    text = " ".join(_subparsers()["build"].format_help().split())
    for words in ("$CUDACXX", "$CUDA_HOME or $CUDA_PATH", "nvcc on PATH", "/usr/local/cuda", "wheels from PyPI",
                  "about 130 MB", "KERNELGEN_NO_CUDA_INSTALL=1", "KERNELGEN_IGNORE_SYSTEM_CUDA=1"):
        assert words in text, words
    assert " ".join(cli.BUILD_TOOLKIT_HELP.split()) in text


def test_list_shows_structs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(REPO / "tests" / "fixtures" / "structs_setup"), "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "  pair  struct float2 (8 bytes, align 8): x: f32, y: f32" in out
    assert ("  rope_params  struct rope_params (40 bytes): n_dims: i32, freq_base: f32, freq_scale: f32, ext_factor: "
            "f32, attn_factor: f32, pos_offset: i64, bias: f32[2]") in out
    assert "  silu_op  struct ops::SiluOp (1 byte): no fields (a functor type: callers pass nothing)" in out


def test_list_shows_the_modules_named(capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(__file__).resolve().parents[2]  # the repository's catalog: many modules
    modules = [m.name for m in load_catalog(root).modules]
    assert len(modules) >= 3
    assert main(["--root", str(root), "list", modules[2], modules[0]]) == 0
    out = capsys.readouterr().out
    shown = [m for m in modules if f"\n{m}: " in out]
    assert shown == [modules[0], modules[2]]
    assert main(["--root", str(root), "list"]) == 0
    everything = capsys.readouterr().out
    assert all(f"\n{m}: " in everything for m in modules)


def test_list_names_an_unknown_module_with_the_closest(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = load_catalog(root).modules[0].name
    assert main(["--root", str(root), "list", name + "x"]) == 2
    err = capsys.readouterr().err
    assert f"no module '{name}x'; did you mean '{name}'?" in err
