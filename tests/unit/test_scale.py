"""Generation time grows linearly with the spec: a spec of 50 kernels with 64 arguments and 64
clauses each (a seventh of the 1 MB spec of tests/bigspec.py) generates well within a generous
bound, and the test-case search does not grow with the number of kernels."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kernelgen import cases, forked
from kernelgen.emit import render_catalog
from kernelgen.errors import SpecError
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


def test_a_second_process_renders_the_same_files(tmp_path: Path, monkeypatch) -> None:
    """Large catalogs search and render partly in a forked child: the files are the same as
    when everything runs in this process."""
    write_project(tmp_path / "p", 40, 64, 64)
    assert forked.possible(40 * 64)
    with_child = render_catalog(load_catalog(tmp_path / "p"))
    monkeypatch.setattr(forked, "possible", lambda args: False)
    cases._CASES.clear()
    cases._PLANS.clear()
    alone = render_catalog(load_catalog(tmp_path / "p"))
    assert with_child == alone


def test_a_failing_child_leaves_the_work_to_the_parent() -> None:
    parent = os.getpid()
    assert forked.start(os.getpid)() != parent  # computed in the child
    calls = []

    def fails_in_child() -> int:
        calls.append(os.getpid())
        if os.getpid() != parent:
            raise RuntimeError("only in the child")
        return 7

    assert forked.start(fails_in_child)() == 7  # the parent computed it after the child failed
    assert calls == [parent]  # the child's call was in its own memory


def test_spec_errors_in_the_childs_half_are_reported_as_without_it(tmp_path: Path, monkeypatch) -> None:
    """A clause that never decides alone, in a kernel of the half that the child searches: the
    same error, from the same place, as a search in one process."""
    spec = write_project(tmp_path / "p", 40, 64, 64)
    lines = spec.read_text().splitlines()
    at = lines.index("  big_37:")
    req = next(i for i in range(at, len(lines)) if lines[i].startswith("    requires: ["))
    lines[req] = lines[req].replace("requires: [", "requires: [n1 <= 4294967295, ", 1)  # always true
    spec.write_text("\n".join(lines) + "\n")
    with pytest.raises(SpecError) as with_child:
        load_catalog(tmp_path / "p")
    monkeypatch.setattr(forked, "possible", lambda args: False)
    cases._CASES.clear()
    with pytest.raises(SpecError) as alone:
        load_catalog(tmp_path / "p")
    assert str(with_child.value) == str(alone.value)
    assert "big_37" in str(alone.value) and "n1 <= 4294967295" in str(alone.value)
