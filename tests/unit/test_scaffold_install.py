"""Where kernelgen comes from: it is not on PyPI, so no instruction (the README, a new project's
README and pyproject.toml) installs it by name from an index, and every build that finds it through
--find-links leaves the index out. kernelgen's own wheel without targets is pure Python."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelgen import scaffold

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

REPO = Path(__file__).resolve().parents[2]

# `pip install kernelgen` (by name, from an index); `pip install DIR/kernelgen-*.whl` is a file
BY_NAME = re.compile(r"pip install (?:-\S+ )*kernelgen(?![\w./-])")


def _texts(tmp_path: Path) -> dict[str, str]:
    scaffold.init(tmp_path / "p", "wops", ["hopper"])
    return {"README.md": (REPO / "README.md").read_text(), "docs/adopting.md": (REPO / "docs/adopting.md").read_text(),
            **{f"new project's {n}": (tmp_path / "p" / n).read_text() for n in ("README.md", "pyproject.toml")}}


def test_no_instruction_installs_kernelgen_from_an_index(tmp_path: Path) -> None:
    for name, text in _texts(tmp_path).items():
        flat = " ".join(text.replace("#", " ").split())
        assert not BY_NAME.search(flat), (name, BY_NAME.search(flat))
        for cmd in re.findall(r"pip (?:wheel|install)[^`;\n]*--find-links[^`;\n]*", flat):
            assert "--no-index" in cmd, (name, cmd)


def test_a_new_projects_isolated_build_takes_kernelgen_from_a_folder_of_wheels(tmp_path: Path) -> None:
    texts = _texts(tmp_path)
    assert "pip wheel . --no-index --find-links DIR" in texts["new project's pyproject.toml"]
    assert "pip wheel --no-build-isolation ." in texts["new project's pyproject.toml"]
    assert "pip install /path/to/kernelgen" in texts["new project's README.md"]


def test_kernelgens_own_wheel_is_pure_python() -> None:
    # scikit-build-core tags a wheel that CMake installs into as platlib (cp311-cp311-linux_x86_64):
    # kernelgen's holds no binary unless targets are built into it
    skbuild = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["scikit-build"]
    assert skbuild["wheel"]["platlib"] is False
