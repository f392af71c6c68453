"""Golden files of the launch_modes fixture (tests/fixtures/launch_modes): the launchers using
cudaLaunchKernelEx with launch attributes, plans reading device values, and the contract tests
evaluating device names with the target's table, byte for byte. Refresh as for test_golden.py:
    KERNELGEN_UPDATE_GOLDEN=1 pytest tests/golden
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelgen.emit import render_catalog
from kernelgen.loader import load_catalog

HERE = Path(__file__).resolve().parent
REF = HERE / "launch_modes"
FIXTURE = HERE.parent / "fixtures" / "launch_modes"
CHECKED = [
    "generated/hopper/src/launch_modes.cu",
    "generated/hopper/include/kernelgen/launch_modes_c.h",
    "generated/hopper/include/kernelgen/target_table.h",
    "generated/hopper/tests/test_launch_modes_hopper_contract.py",
]


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    return render_catalog(load_catalog(FIXTURE))


@pytest.mark.parametrize("path", CHECKED)
def test_generated_text_matches_reference(rendered: dict[str, str], path: str) -> None:
    ref = REF / (path.replace("/", "__") + ".ref")
    if os.environ.get("KERNELGEN_UPDATE_GOLDEN"):
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(rendered[path])
    assert ref.is_file(), f"missing {ref}; create it with KERNELGEN_UPDATE_GOLDEN=1 pytest tests/golden"
    assert rendered[path] == ref.read_text(), (
        f"{path} differs from {ref.name}. If the change is intended, run "
        "KERNELGEN_UPDATE_GOLDEN=1 pytest tests/golden and review the diff."
    )


def test_targets_differ_only_in_their_tables(rendered: dict[str, str]) -> None:
    hopper = rendered["generated/hopper/src/launch_modes.cu"]
    gb10 = rendered["generated/gb10/src/launch_modes.cu"]
    assert hopper.replace("232448", "X").replace("hopper", "T").replace("sm_90a", "A") == gb10.replace(
        "101376", "X").replace("gb10", "T").replace("sm_121a", "A")
