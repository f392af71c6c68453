"""`kernelgen sass` over the real build: every kernel of the catalog built for a target is found
in the build's objects (its spec symbol, each variant, matched to one compiled function), with
its registers, instructions and loops, printed and written by --json (tests/unit/test_sass.py
covers --against)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kernelgen.cli import main
from kernelgen.loader import load_catalog, load_targets
from kernelgen.sass import kernel_symbols, module_objects
from tests.conftest import REPO

pytestmark = pytest.mark.build


@pytest.mark.parametrize("target", [t.name for t in load_targets(REPO / "specs" / "targets.yaml", REPO)])
def test_every_built_kernel_is_found(cuobjdump, target: str, tmp_path: Path, capsys) -> None:
    if not module_objects(REPO / "build", target):
        if os.environ.get("KERNELGEN_REQUIRE_BUILT"):
            pytest.fail(f"target {target} is not built (no module objects under build/{target})")
        pytest.skip(f"target {target} is not built (kernelgen build --target {target})")
    catalog = load_catalog(REPO)
    expected = {f"{m.name}.{k.name}{suffix}" for m in catalog.modules for k in m.kernels if target in k.targets
                for suffix, _ in kernel_symbols(k)}
    out = tmp_path / "sass.json"
    assert main(["--root", str(REPO), "sass", "-t", target, "--json", str(out)]) == 0
    figures = json.loads(out.read_text())[target]
    assert set(figures) == expected
    for label, f in figures.items():
        assert f["registers"] > 0 and f["instructions"] > 0 and sum(f["opcodes"].values()) == f["instructions"], label
    printed = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.endswith(" instructions")]
    assert sorted(printed) == sorted(expected)
    # every loop lies inside its function and holds instructions; the attention's tile loop is one
    for label, f in figures.items():
        assert all(n > 0 and lo < hi for n, lo, hi in f["loops"]), label
    attn = figures["attn_dflash.prefill_attn_dflash_bf16_split"]["loops"]
    assert attn and attn[0][0] > 100, attn


def test_loops_printed(cuobjdump, capsys) -> None:
    if not module_objects(REPO / "build", "hopper"):
        pytest.skip("target hopper is not built")
    assert main(["--root", str(REPO), "sass", "silu_mul", "attn_dflash.prefill_attn_dflash_bf16_split", "-t",
                 "hopper", "--loops", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    loops = [line.split("loops: ", 1)[1] for line in out if "loops: " in line]
    assert len(loops) == 1 + len(load_catalog(REPO).module("silu_mul").kernels), out
    assert all(entry == "none" or entry[0].isdigit() for entry in loops), loops
