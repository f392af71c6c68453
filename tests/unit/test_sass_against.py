"""`kernelgen sass --against FILE`: the whole file is checked before anything is printed; a file
that is not what `sass --json` writes is a user error naming what is wrong and where."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kernelgen import sass
from kernelgen.cli import main

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "project"

GOOD = {"function": "f", "registers": 10, "stack": 0, "local": 0, "instructions": 100,
        "opcodes": {"FFMA": 60, "IMAD": 40}, "loops": [[12, 256, 432]]}

BAD = [
    ({"hopper": {"m.k": {"registers": 10}}}, "hopper: m.k: no 'stack' (each kernel has registers, stack, instructions)"),
    ({"hopper": {"m.k": {"registers": 10, "stack": 0}}}, "hopper: m.k: no 'instructions' (each kernel has registers, stack, instructions)"),
    ({"hopper": 5}, "hopper: not an object of kernels (got 5)"),
    ({"hopper": {"m.k": "x"}}, 'hopper: m.k: not an object of figures (got "x")'),
    ({"hopper": {"m.k": {**GOOD, "registers": "10"}}}, 'hopper: m.k: registers: not a count (got "10")'),
    ({"hopper": {"m.k": {**GOOD, "instructions": True}}}, "hopper: m.k: instructions: not a count (got true)"),
    ({"hopper": {"m.k": {**GOOD, "opcodes": [1]}}}, "hopper: m.k: opcodes: not an object of opcode families (got [1])"),
    ({"hopper": {"m.k": {**GOOD, "opcodes": {"FFMA": -1}}}}, "hopper: m.k: opcodes: FFMA: not a count (got -1)"),
    ({"hopper": {"m.k": {**GOOD, "loops": [[1, 2]]}}}, "hopper: m.k: loops[0]: not [instructions, first address, "
     "last address] (got [1, 2])"),
    ({"hopper": {"m.k": {**GOOD, "loops": 3}}}, "hopper: m.k: loops: not a list (got 3)"),
    ({"hopper": {"m.k": {**GOOD, "function": 1}}}, "hopper: m.k: function: not a string (got 1)"),
    ([1, 2], "not an object of targets (got [1, 2])"),
]


@pytest.mark.parametrize(("data", "want"), BAD, ids=[str(i) for i in range(len(BAD))])
def test_a_file_unlike_sass_json_is_named_where(data: object, want: str) -> None:
    assert sass.json_problem(data) == want


def test_what_sass_json_writes_is_accepted() -> None:
    code = sass.KernelCode("f", 10, 8, 0)
    code.opcodes.update(FFMA=3)
    code.loops = [(3, 0x10, 0x40)]
    assert sass.json_problem(json.loads(sass.to_json({"hopper": {"m.k": code}, "gb10": {}}))) is None
    assert sass.json_problem({"hopper": {"m.k": {"registers": 1, "stack": 0, "instructions": 2}}}) is None


@pytest.mark.parametrize("data", [{"hopper": {"fixture_ops.scale_f32": {"registers": 10}}}, {"hopper": 5},
                                  {"hopper": {"fixture_ops.scale_f32": "x"}}])
def test_the_command_refuses_before_printing(tmp_path: Path, capsys: pytest.CaptureFixture[str], data: object) -> None:
    root = tmp_path / "proj"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("generated", "build", "bindings"))
    (tmp_path / "build" / "hopper").mkdir(parents=True)  # a build folder: the check comes before reading it
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    assert main(["--root", str(root), "sass", "--build-dir", str(tmp_path / "build"), "--against", str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == "", out
    assert err.startswith(f"kernelgen: error: cannot read {bad} (a kernelgen sass --json file): hopper: "), err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
