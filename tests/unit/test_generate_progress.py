"""`kernelgen generate` says on stderr that it is generating a large catalog before rendering it,
and stays silent there for a small one."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen import cli
from kernelgen.cli import main
from tests.unit.test_loader_mistakes import project


def test_a_small_catalog_generates_without_a_progress_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(project(tmp_path)), "generate"]) == 0
    out, err = capsys.readouterr()
    assert "generating" not in err and out.startswith("kernelgen: 1 module, "), (out, err)


def test_a_large_catalog_says_it_is_generating_first(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "PROGRESS_MODULES", 1)
    assert main(["--root", str(project(tmp_path)), "generate"]) == 0
    out, err = capsys.readouterr()
    assert "kernelgen: generating 1 module ...\n" in err and "generating" not in out, (out, err)
