"""The command line's --root after the command: the same as before it, for every command."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from kernelgen.cli import build_parser, main


@pytest.fixture
def root(project: Path) -> Path:
    """A writable copy of tests/fixtures/project (tests/conftest.py)."""
    return project


# ---------------------------------------------------------------- --root after the command


def test_every_command_takes_root_after_its_name() -> None:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in action.choices.items():
        assert any("--root" in a.option_strings for a in sub._actions), name


@pytest.mark.parametrize("args", [["list"], ["plan", "fixture_ops.scale_f32", "n=4", "-t", "hopper"],
                                  ["generate", "--check"], ["schema", "--targets"]])
def test_root_after_the_command_means_root_before_it(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    monkeypatch.chdir(tmp_path)  # no project here: only --root finds it
    before = main(["--root", str(root), *args])
    wanted = capsys.readouterr()
    assert main([*args, "--root", str(root)]) == before
    assert capsys.readouterr() == wanted
    assert main([args[0], "--root", str(root), *args[1:]]) == before
    assert capsys.readouterr() == wanted


def test_root_after_the_command_is_checked_as_before_it(root: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--root", str(tmp_path / "absent")]) == 2
    assert f"--root {tmp_path / 'absent'}: no such folder" in capsys.readouterr().err
    # the same folder twice is fine; two folders are a usage error
    assert main(["--root", str(root), "list", "--root", str(root) + "/"]) == 0
    capsys.readouterr()
    assert main(["--root", str(root), "list", "--root", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "usage: kernelgen list" in err
    assert f"kernelgen list: error: --root {root} and --root {tmp_path} name two folders: give one\n" in err


def test_init_takes_root_after_its_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", "--package", "afterops", "-t", "hopper", "--root", str(tmp_path / "p")]) == 0
    assert (tmp_path / "p" / "specs" / "targets.yaml").is_file()
