"""The skips of kernelgen.testing's helpers (a module not built) are reported at the test file
that skipped, not at kernelgen's code: one line per file in pytest's summary, and each file
counted under pytest-xdist."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TEST_FILE = """from kernelgen.testing import {helper}

{call}


def test_never_runs():
    pass
"""

CALLS = {
    "built_module": 'built_module("hopper", "ops", package="kgskip_nosuch_pkg", test_file=__file__)',
    "built_target": 'built_target("kgskip_nosuch_pkg", test_file=__file__)',
}


def _write(tmp_path: Path) -> list[str]:
    names = []
    for i, (helper, call) in enumerate([*CALLS.items(), ("built_module", CALLS["built_module"])]):
        name = f"test_skips_{i}.py"
        (tmp_path / name).write_text(TEST_FILE.format(helper=helper, call=call))
        names.append(name)
    return names


def _pytest(tmp_path: Path, *args: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELGEN_", "PYTEST_"))}
    environ.update(env)
    res = subprocess.run([sys.executable, "-m", "pytest", "-rsf", "-p", "no:cacheprovider", *args, "."],
                         cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=300)
    return res.stdout + res.stderr


def test_each_skip_is_reported_at_its_test_file(tmp_path: Path) -> None:
    names = _write(tmp_path)
    out = _pytest(tmp_path)
    skipped = sorted(ln for ln in out.splitlines() if ln.startswith("SKIPPED"))
    assert [ln.split(": ")[0] for ln in skipped] == [f"SKIPPED [1] {n}:3" for n in names], out[-3000:]
    assert "testing.py" not in out and "3 skipped" in out, out[-3000:]


def test_xdist_counts_each_skipped_file(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    _write(tmp_path)
    out = _pytest(tmp_path, "-n", "2", "--dist", "loadfile")
    assert "3 skipped" in out and "testing.py" not in out, out[-3000:]
