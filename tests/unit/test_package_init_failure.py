"""A built module whose initialisation fails (a launcher the runtime refuses): the package's
ImportError names the underlying error, whatever the binding raised it as."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_package_shell import BROKEN, _install, _python

FAILS = {
    # pybind11 turns an error of the module's initialisation into this ImportError
    "pybind11": "raise ImportError('initialization failed') from RuntimeError('any: more than 64 arguments')\n",
    # a CPython binding's initialisation raises the runtime's error itself
    "cpython": "raise RuntimeError('any: more than 64 arguments')\n",
}


@pytest.mark.parametrize("binding", sorted(FAILS))
def test_a_module_whose_initialisation_fails_names_the_cause(tmp_path: Path, binding: str) -> None:
    prefix = _install(tmp_path, ("ops", "scale"))
    (prefix / "shellpkg" / "hopper" / "scale.py").write_text(FAILS[binding])
    lines = _python(prefix, BROKEN, KERNELGEN_TARGET="hopper")
    assert len(lines) == 2 and lines[0] == lines[1], lines
    assert lines[0].startswith("ImportError ") and "RuntimeError: any: more than 64 arguments" in lines[0], lines
    assert "shellpkg: module 'scale' of target 'hopper' cannot be loaded (" in lines[0], lines
