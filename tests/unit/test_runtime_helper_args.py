"""The package's runtime helpers check their arguments as launchers check theirs: flags take
True, False, 0 or 1 (set_strict, use_target_table), counts take integers, not bools or floats,
within their range (limit_sms, falls_through), and ``target_name`` an installed target's name;
anything else is a TypeError or ValueError naming the helper and the argument, raised before the
target is chosen or its runtime called."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelgen import project

# A target runtime that records what the helpers pass it.
RUNTIME = """def device_count():
    return 0
def limit_sms(n):
    print('runtime.limit_sms', repr(n))
def use_target_table(on):
    print('runtime.use_target_table', repr(on))
def device_values():
    return {'sm_count': 132}
"""

CHECK = """
import numpy as np
import helperpkg as k

def check(label, call):
    try:
        result = call()
    except (TypeError, ValueError) as e:
        print(label, type(e).__name__, e)
    except k.TargetError as e:
        print(label, 'TargetError', e)
    else:
        if result is not None:
            print(label, '->', result)
"""


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    """A package of the shell (helperpkg) with a built target "hopper" whose runtime is RUNTIME."""
    pkg = tmp_path / "helperpkg"
    files = {n: (project.SHELL_DIR / n).read_text() for n in project.SHELL_FILES}
    files["_project.py"] = "PACKAGE = 'helperpkg'\nTARGETS = {'hopper': (9, 0), 'ampere': (8, 0)}\nROOT = None\n"
    project.write_shell(pkg, files)
    (pkg / "hopper").mkdir()
    (pkg / "hopper" / "__init__.py").write_text("MODULES = ()\nCOMPUTE_CAPABILITY = (9, 0)\n")
    (pkg / "hopper" / "_runtime.py").write_text(RUNTIME)
    return tmp_path


def _python(prefix: Path, code: str) -> list[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("KERNELGEN_TARGET", "KERNELGEN_OPS_PATH")}
    environ.update(PYTHONPATH=str(prefix), KERNELGEN_TARGET="hopper")
    res = subprocess.run([sys.executable, "-c", CHECK + code], capture_output=True, text=True, env=environ,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()


BOOL = "expected a bool (True, False, 0 or 1)"


def test_set_strict_takes_a_bool_or_0_or_1(prefix: Path) -> None:
    out = _python(prefix, """
for value in (True, False, 1, 0, np.True_, np.int64(1), 'no', '', None, 2, -1, 1.0, [], np.float64(0)):
    check(f'set_strict({value!r})', lambda: (k.set_strict(value), k.strict())[1])
check('set_strict()', lambda: (k.set_strict(), k.strict())[1])
""")
    where = "helperpkg.set_strict: argument 'strict'"
    assert out == [
        "set_strict(True) -> True",
        "set_strict(False) -> False",
        "set_strict(1) -> True",
        "set_strict(0) -> False",
        "set_strict(np.True_) -> True",
        "set_strict(np.int64(1)) -> True",
        f"set_strict('no') TypeError {where}: {BOOL}, got str",
        f"set_strict('') TypeError {where}: {BOOL}, got str",
        f"set_strict(None) TypeError {where}: {BOOL}, got NoneType",
        f"set_strict(2) ValueError {where}: {BOOL}, got 2",
        f"set_strict(-1) ValueError {where}: {BOOL}, got -1",
        f"set_strict(1.0) TypeError {where}: {BOOL}, got float",
        f"set_strict([]) TypeError {where}: {BOOL}, got list",
        f"set_strict(np.float64(0.0)) TypeError {where}: {BOOL}, got numpy.float64",
        "set_strict() -> True",
    ]


def test_limit_sms_takes_an_integer_in_range(prefix: Path) -> None:
    out = _python(prefix, """
for value in (0, 1, 132, np.int32(8), 2**31 - 1, 1.5, 2.0, True, False, np.True_, '3', None, np.float32(2), -1, 2**31):
    check(f'limit_sms({value!r})', lambda: k.limit_sms(value))
""")
    where = "helperpkg.limit_sms: argument 'n'"
    sms = "(a number of SMs; 0 lifts the limit)"
    assert out == [
        "runtime.limit_sms 0",
        "runtime.limit_sms 1",
        "runtime.limit_sms 132",
        "runtime.limit_sms 8",
        "runtime.limit_sms 2147483647",
        f"limit_sms(1.5) TypeError {where}: expected an integer, got float",
        f"limit_sms(2.0) TypeError {where}: expected an integer, got float",
        f"limit_sms(True) TypeError {where}: expected an integer, got bool",
        f"limit_sms(False) TypeError {where}: expected an integer, got bool",
        f"limit_sms(np.True_) TypeError {where}: expected an integer, got numpy.bool",
        f"limit_sms('3') TypeError {where}: expected an integer, got str",
        f"limit_sms(None) TypeError {where}: expected an integer, got NoneType",
        f"limit_sms(np.float32(2.0)) TypeError {where}: expected an integer, got numpy.float32",
        f"limit_sms(-1) ValueError {where}: -1 is out of range [0, 2147483647] {sms}",
        f"limit_sms(2147483648) ValueError {where}: 2147483648 is out of range [0, 2147483647] {sms}",
    ]


def test_use_target_table_takes_a_bool_or_0_or_1(prefix: Path) -> None:
    out = _python(prefix, """
for value in (True, 0, np.False_, 'yes', 2, 0.0, None):
    check(f'use_target_table({value!r})', lambda: k.use_target_table(value))
check('use_target_table()', lambda: k.use_target_table())
""")
    where = "helperpkg.use_target_table: argument 'on'"
    assert out == [
        "runtime.use_target_table True",
        "runtime.use_target_table False",
        "runtime.use_target_table False",
        f"use_target_table('yes') TypeError {where}: {BOOL}, got str",
        f"use_target_table(2) ValueError {where}: {BOOL}, got 2",
        f"use_target_table(0.0) TypeError {where}: {BOOL}, got float",
        f"use_target_table(None) TypeError {where}: {BOOL}, got NoneType",
        "runtime.use_target_table True",
    ]


def test_falls_through_takes_an_outcome_code(prefix: Path) -> None:
    out = _python(prefix, """
for value in (0, 5, -(3 << 16), -(6 << 16), np.int32(-(4 << 16)), -2**31, 'x', None, -196608.0, True, 2**31, -2**31 - 1):
    check(f'falls_through({value!r})', lambda: k.falls_through(value))
""")
    where = "helperpkg.falls_through: argument 'code'"
    assert out == [
        "falls_through(0) -> False",
        "falls_through(5) -> False",
        "falls_through(-196608) -> True",
        "falls_through(-393216) -> False",
        "falls_through(np.int32(-262144)) -> True",
        "falls_through(-2147483648) -> False",
        f"falls_through('x') TypeError {where}: expected an integer, got str",
        f"falls_through(None) TypeError {where}: expected an integer, got NoneType",
        f"falls_through(-196608.0) TypeError {where}: expected an integer, got float",
        f"falls_through(True) TypeError {where}: expected an integer, got bool",
        f"falls_through(2147483648) ValueError {where}: 2147483648 is out of range [-2147483648, 2147483647]",
        f"falls_through(-2147483649) ValueError {where}: -2147483649 is out of range [-2147483648, 2147483647]",
    ]


def test_target_name_is_an_installed_target(prefix: Path) -> None:
    out = _python(prefix, """
for value in (None, 'hopper', 'ampere', 'volta', '', 9, b'hopper'):
    check(f'device_values({value!r})', lambda: k.device_values(value)['sm_count'])
check('limit_sms(4, 7)', lambda: k.limit_sms(4, 7))
check('use_target_table(True, "volta")', lambda: k.use_target_table(True, 'volta'))
check('limit_sms(1.5, "volta")', lambda: k.limit_sms(1.5, 'volta'))
""")
    where = "helperpkg.device_values: argument 'target_name'"
    assert out == [
        "device_values(None) -> 132",
        "device_values('hopper') -> 132",
        "device_values('ampere') TargetError helperpkg: target 'ampere' is not built (built: hopper); run: pip wheel "
        "--no-build-isolation . -Ccmake.define.KERNELGEN_TARGETS=\"hopper;ampere\" in helperpkg's project folder "
        "(this helperpkg is an installed wheel), then install that wheel",
        "device_values('volta') TargetError helperpkg.device_values(target_name='volta'): helperpkg has no target "
        "'volta' (its specs/targets.yaml has: ampere, hopper)",
        "device_values('') TargetError helperpkg.device_values(target_name=''): helperpkg has no target '' (its "
        "specs/targets.yaml has: ampere, hopper)",
        f"device_values(9) TypeError {where}: expected a target's name (str) or None, got int",
        f"device_values(b'hopper') TypeError {where}: expected a target's name (str) or None, got bytes",
        "limit_sms(4, 7) TypeError helperpkg.limit_sms: argument 'target_name': expected a target's name (str) or "
        "None, got int",
        "use_target_table(True, \"volta\") TargetError helperpkg.use_target_table(target_name='volta'): helperpkg "
        "has no target 'volta' (its specs/targets.yaml has: ampere, hopper)",
        # the argument is checked first
        "limit_sms(1.5, \"volta\") TypeError helperpkg.limit_sms: argument 'n': expected an integer, got float",
    ]
