"""`kernelgen sass` over the real build: every kernel of the catalog built for a target is found
in the build's objects (its spec symbol, each variant, matched to one compiled function), with
its registers and instructions, printed and written by --json (tests/unit/test_sass.py covers
--against)."""

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
