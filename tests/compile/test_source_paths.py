"""A kernel source whose path is also the name of a file in the generated launchers' folder (a
source `one.cu` at the project root for module `one`, whose launchers are generated/<t>/src/one.cu)
builds: the launchers include their sources from the project root, never from their own folder
(which, with a quoted include, made the launcher file include itself until the compiler gave up)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.compile.test_build_errors import SOURCE, SPEC, TARGETS
from tests.conftest import run_cli

pytestmark = pytest.mark.build


def test_a_source_named_like_its_launcher_file_builds(tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / "specs").mkdir(parents=True)
    (root / "specs" / "targets.yaml").write_text(TARGETS)
    (root / "specs" / "one.yaml").write_text(SPEC.format(m="one", symbol="one_kernel").replace("kernels/one.cu", "one.cu"))
    (root / "one.cu").write_text(SOURCE.format(m="one", helper=""))
    res = run_cli("build", "--no-torch-reader", "--no-link", cwd=root)
    assert res.returncode == 0, res.stdout + res.stderr
    launchers = (root / "generated" / "hopper" / "src" / "one.cu").read_text()
    assert "#include <one.cu>\n" in launchers, launchers
    assert list((root / "bindings").rglob("one.*.so")), "the module's extension was not installed"
