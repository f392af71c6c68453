"""tests/gpu/checks.py's bookkeeping (the parts that need no GPU): measures against bounds,
bitwise counts, the per-module summary and the files a run writes."""

from __future__ import annotations

import json

import pytest

from tests.gpu import checks


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(checks, "RECORDS", [])


def test_within_records_and_asserts(monkeypatch):
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "tests/gpu/test_a.py::test_x[1] (call)")
    checks.within(1, 2, 10, "ulps")
    checks.within(0, 0, 5, "exact")
    with pytest.raises(AssertionError, match="above the bound"):
        checks.within(3, 2, 10, "too far")
    with pytest.raises(AssertionError):
        checks.within(float("nan"), 2, 1, "nan")
    worst = [r["worst"] for r in checks.RECORDS]
    assert worst == [0.5, 0.0, 1.5, float("inf")]
    assert [r["failed"] for r in checks.RECORDS] == [0, 0, 1, 1]
    assert checks.RECORDS[0]["test"] == "tests/gpu/test_a.py::test_x[1]"
    assert checks.note(1, 0, 1, "nonzero against a zero bound") is False
    assert checks.RECORDS[-1]["worst"] == float("inf")


def test_summary_per_module(monkeypatch, tmp_path):
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "tests/gpu/test_a.py::test_x (call)")
    checks.note(0.25, 1.0, 100, "first")
    checks.note(0.75, 1.0, 50, "second")
    checks.identical(64, "bits")
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "tests/gpu/test_b.py::test_y (call)")
    checks.identical(8, "more bits")
    s = checks.summary()
    a, b = s["tests/gpu/test_a.py"], s["tests/gpu/test_b.py"]
    assert a["bound"] == {"checks": 2, "elements": 150, "failed": 0, "worst": 0.75, "worst_at": "test_x: second"}
    assert a["bits"] == {"checks": 1, "elements": 64, "failed": 0}
    assert b["bound"]["checks"] == 0 and b["bits"]["elements"] == 8
    checks.write(tmp_path / "checks")
    data = json.loads((tmp_path / "checks.json").read_text())
    assert len(data["records"]) == 4 and set(data["summary"]) == {"tests/gpu/test_a.py", "tests/gpu/test_b.py"}
    md = (tmp_path / "checks.md").read_text().splitlines()
    assert md[2] == "| tests/gpu/test_a.py | 2 | 150 | 0 | 0.750 | test_x: second | 1 | 64 | 0 |"
    assert md[3] == "| tests/gpu/test_b.py | 0 | 0 | 0 |  |  | 1 | 8 | 0 |"
