"""The permissions of the files kernelgen writes: a new file follows the umask, as any file a
program creates does; a file being replaced keeps its mode."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelgen import writer


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("umask")
def test_new_generated_files_follow_the_umask(tmp_path: Path) -> None:
    writer.write_files(tmp_path, {"generated/hopper/a.h": "x\n"}, ["hopper"])
    writer.write_text(tmp_path / "specs" / "m.yaml", "y\n")
    assert _mode(tmp_path / "generated" / "hopper" / "a.h") == 0o600
    assert _mode(tmp_path / "specs" / "m.yaml") == 0o600


def test_new_files_follow_a_permissive_umask_too(tmp_path: Path) -> None:
    old = os.umask(0o002)
    try:
        writer.write_text(tmp_path / "f.txt", "y\n")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "f.txt") == 0o664


@pytest.mark.usefixtures("umask")
def test_a_replaced_file_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "generated" / "hopper" / "run.sh"
    path.parent.mkdir(parents=True)
    path.write_text("old\n")
    path.chmod(0o755)
    writer.write_files(tmp_path, {"generated/hopper/run.sh": "new\n"}, ["hopper"])
    assert path.read_text() == "new\n" and _mode(path) == 0o755
