"""Generation time grows linearly with the spec: a spec of 50 kernels with 64 arguments and 64
clauses each (a seventh of the 1 MB spec of tests/bigspec.py) generates well within a generous
bound, and the test-case search does not grow with the number of kernels."""

from __future__ import annotations

import time
from pathlib import Path

from kernelgen import cases
from kernelgen.emit import render_catalog
from kernelgen.loader import load_catalog
from tests.bigspec import write_project


def _generate(root: Path, kernels: int) -> float:
    write_project(root, kernels, 64, 64)
    start = time.perf_counter()
    files = render_catalog(load_catalog(root))
    took = time.perf_counter() - start
    assert len([p for p in files if p.endswith(".cu")]) == 1
    return took


def test_large_spec_generates_within_a_generous_bound(tmp_path: Path) -> None:
    took = _generate(tmp_path / "p", 50)
    assert took < 30, f"50 kernels of 64 arguments and 64 clauses took {took:.1f} s"


def test_case_search_is_cached_by_kernel_not_by_module_contents(tmp_path: Path) -> None:
    write_project(tmp_path / "p", 3, 16, 8)
    cat = load_catalog(tmp_path / "p")
    m, t = cat.modules[0], cat.targets[0]
    first = cases.search_cases(m, m.kernels[0], t)
    assert cases.search_cases(m, m.kernels[0], t) is first
    assert cases.search_cases(m, m.kernels[1], t) is not first
