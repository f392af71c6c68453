"""`kernelgen init` writes only names the loader accepts: the package (the loader's own rule for
specs/project.yaml), a package YAML would read as another value, and the example's kill switch;
and the test it writes passes where the example's kill switch is set in the environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelgen import scaffold
from kernelgen.cli import main
from kernelgen.emit import render_catalog
from kernelgen.errors import KernelgenError
from kernelgen.loader import RESERVED, SHADOWED_PACKAGES, load_catalog, project_name_problem


@pytest.mark.parametrize("package", ["class", "int", "import", "def", "std", "cuda", "torch", "numpy"])
def test_init_refuses_a_package_the_loader_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   package: str) -> None:
    assert main(["init", str(tmp_path / "p"), "--package", package, "-t", "hopper"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kernelgen: error: --package {package}: "), err
    assert not (tmp_path / "p").exists()


def test_init_and_the_loader_agree_on_every_package_name() -> None:
    """The loader's words (and the other names init writes from the package) against init."""
    for name in sorted(RESERVED | set(SHADOWED_PACKAGES) | {"ok", "scale", "hopper", "a__b", "__x"}):
        if name in ("kernelgen", "kernelgen_ops") or not name.isidentifier() or name != name.lower():
            continue
        refused = project_name_problem("package", name) is not None
        try:
            scaffold.check_package(name)
            accepted = True
        except KernelgenError:
            accepted = False
        assert accepted != refused, name


@pytest.mark.parametrize("package", ["cuda_ops", "python", "kernelgen_x", "ld", "proxy", "null", "off", "yes"])
def test_what_init_writes_loads_and_generates(tmp_path: Path, package: str) -> None:
    """Names the package gives the example (its kill switch), and packages YAML reads as another
    value unquoted (null, off)."""
    folder = tmp_path / "p"
    scaffold.init(folder, package, ["hopper"])
    catalog = load_catalog(folder)
    assert catalog.naming.package == package
    assert catalog.modules[0].kill_switch
    render_catalog(catalog, templates=folder / "templates")


_FAKE_INIT = """\
import os
_SWITCHES = set()

def available_targets():
    return ["hopper"]

def refresh():
    _SWITCHES.clear()
    _SWITCHES.update(n for n in ("@KILL@",) if os.environ.get(n))

refresh()
"""

_FAKE_MODULE = """\
import @PKG@

KILL_SWITCH = "@KILL@"


class scale_f32:
    @staticmethod
    def plan(n):
        if KILL_SWITCH in @PKG@._SWITCHES:
            return {"grid": (0, 0, 0), "block": (0, 0, 0), "launched": False, "reason": "kill switch set"}
        if n == 0:
            return {"grid": (0, 0, 0), "block": (0, 0, 0), "launched": False, "reason": "empty work"}
        return {"grid": ((n + 255) // 256, 1, 1), "block": (256, 1, 1), "launched": True, "reason": ""}
"""


def test_the_scaffolded_test_passes_with_the_kill_switch_set(tmp_path: Path) -> None:
    """A stand-in for the built package (a module whose plans honour the kill switch, read at
    refresh()), so that the scaffolded test runs without a build."""
    folder = tmp_path / "proj"
    scaffold.init(folder, "fakescale", ["hopper"])
    kill = load_catalog(folder).modules[0].kill_switch
    site = tmp_path / "site" / "fakescale"
    (site / "hopper").mkdir(parents=True)
    (site / "__init__.py").write_text(_FAKE_INIT.replace("@KILL@", kill))
    (site / "hopper" / "__init__.py").write_text("")
    (site / "hopper" / "scale.py").write_text(_FAKE_MODULE.replace("@PKG@", "fakescale").replace("@KILL@", kill))
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site"), kill: "1"}
    env.pop("KERNELGEN_REQUIRE_BUILT", None)
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not gpu",
                          "tests/test_fakescale_scale.py"], cwd=folder, capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0 and "1 passed" in res.stdout, res.stdout[-3000:]
