"""Packaging: installing kernelgen (wheel or editable) writes nothing into its source tree."""

from __future__ import annotations

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_builds_use_a_temporary_build_folder() -> None:
    """scikit-build-core's build folder is its default, a temporary one: a build-dir setting would
    make `pip install <tree>` and `pip wheel <tree>` write a CMake tree into the source tree."""
    skbuild = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["scikit-build"]
    assert "build-dir" not in skbuild and "build_dir" not in skbuild
    # a build-dir-less redirect install is only possible while editable installs do not rebuild
    assert skbuild["editable"]["mode"] == "redirect"
    assert not skbuild["editable"].get("rebuild", False)
