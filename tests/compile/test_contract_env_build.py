"""Build test of a `kernelgen init` project for hopper, without a GPU: its generated contract tests
pass whatever kill switch the environment sets, and leave the built libraries' state agreeing with
the environment for the tests that run after them in the same process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.build

TARGET = "hopper"
PACKAGE = "envops"
SWITCH = "ENVOPS_NO_SCALE"  # the scaffold's kill switch: <PACKAGE>_NO_SCALE

AFTER = f'''\
import os

from {PACKAGE}.{TARGET} import scale


def test_the_kill_switch_is_in_force_as_the_environment_says():
    plan = scale.scale_f32.plan(n=1000)
    if os.environ.get("{SWITCH}"):
        assert not plan["launched"] and "kill switch {SWITCH} is set" in plan["reason"], plan
    else:
        assert plan["launched"], plan
'''


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("contract_env") / PACKAGE
    res = run_cli("init", str(root), "--package", PACKAGE, "--target", TARGET, cwd=root.parent)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"kill_switch: {SWITCH}" in (root / "specs" / "scale.yaml").read_text()
    res = run_cli("build", "--target", TARGET, "--no-link", "--no-torch-reader", cwd=root)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    (root / "tests" / "test_zz_after_contract.py").write_text(AFTER)
    return root


@pytest.mark.parametrize("switch", [None, "1"])
def test_contract_tests_pass_under_the_kill_switch_and_leave_it_in_force(built: Path, switch: str | None) -> None:
    env = {k: v for k, v in os.environ.items() if k != SWITCH}
    # built without a .pth link: importable from its bindings folder
    env.update(PYTHONPATH=os.pathsep.join(p for p in (str(built / "bindings"), env.get("PYTHONPATH")) if p),
               KERNELGEN_REQUIRE_BUILT="1")
    if switch:
        env[SWITCH] = switch
    contract = f"generated/{TARGET}/tests/test_{PACKAGE}_scale_{TARGET}_contract.py"
    text = (built / contract).read_text()
    assert "def test_scale_f32_sizes_match_spec" in text and "def test_scale_f32_too_small_arrays_are_refused" in text
    res = subprocess.run(
        # one process, in this order: the contract tests, then a test that reads the switch's state
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:xdist",
         contract, "tests/test_zz_after_contract.py"],
        cwd=built, env=env, capture_output=True, text=True, timeout=300,
    )
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert re.search(r"\b\d{2,} passed", res.stdout) and "skipped" not in res.stdout, res.stdout[-500:]
