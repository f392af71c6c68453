"""The GPU tests' comparisons, recorded: each comparison against a reference within a bound, and
each comparison for identical bits, is kept with the test that made it, so that a run can say
how many cases each kernel module passed, the worst error as a fraction of its bound, and how
many outputs were compared bit for bit.

    bound(err, tol, what)     asserts err <= tol elementwise (a NaN error fails) and records the
                              worst err / tol;
    same_bits(a, b, what)     asserts that two arrays hold the same bytes and records the count;
    within(value, limit, n, what)   asserts a test's own worst measure (an error in ulps, a
                              normwise error) of n values is at most limit, and records it;
    note(value, limit, n, what)     records such a measure without asserting (a test that
                              gathers its problems first);
    identical(n, what)        records n values found equal by a test's own comparison.

tests/conftest.py writes the summary at the end of a run when KERNELGEN_CHECKS names a file
(scripts/gpu_check.sh: checks.md and checks.json beside the other results): per test module,
the bound comparisons (count, elements, worst err / tol and where) and the bitwise ones.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

RECORDS: list[dict] = []


def _record(kind: str, what: str, elements: int, failed: int, worst: float | None = None) -> None:
    # the test making the comparison: pytest keeps "path::name[params] (phase)" here while it runs
    test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0]
    r = {"test": test, "what": what, "kind": kind, "elements": int(elements), "failed": failed}
    RECORDS.append(r if worst is None else dict(r, worst=worst))


def bound(err: torch.Tensor, tol: torch.Tensor | float, what: str) -> None:
    """err and tol (non-negative; tol a tensor of err's shape or a number): every err <= tol."""
    import torch

    err = err.double()
    tol = torch.as_tensor(tol, dtype=torch.float64, device=err.device).expand_as(err)
    bad = ~(err <= tol)  # NaN errors count as failures
    ratio = torch.where(tol > 0, err / tol, torch.where(err == 0, 0.0, torch.inf))
    ratio = torch.where(torch.isnan(err), torch.inf, ratio)
    nbad = int(bad.sum())
    _record("bound", what, err.numel(), nbad, float(ratio.max()) if ratio.numel() else 0.0)
    if nbad:
        i = int(ratio.flatten().argmax())
        idx = [int(v) for v in torch.unravel_index(torch.tensor(i), err.shape)]
        raise AssertionError(f"{what}: {nbad} of {err.numel()} outside the bound; worst at {idx}: "
                             f"error {float(err.flatten()[i]):.4g}, bound {float(tol.flatten()[i]):.4g}")


def same_bits(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    """a and b hold the same bytes (same shape and element size)."""
    import torch

    assert a.shape == b.shape and a.element_size() == b.element_size(), (what, a.shape, b.shape)
    ab = a.contiguous().view(torch.uint8).reshape(a.numel(), a.element_size())
    bb = b.contiguous().view(torch.uint8).reshape(b.numel(), b.element_size())
    differ = int((ab != bb).any(dim=1).sum())
    _record("bits", what, a.numel(), differ)
    assert differ == 0, f"{what}: {differ} of {a.numel()} values differ"


def note(value: float, limit: float, n: int, what: str) -> bool:
    """Records value / limit (0 when both are 0) for n values; returns value <= limit."""
    worst = value / limit if limit > 0 else (0.0 if value == 0 else float("inf"))
    ok = value <= limit  # False for NaN
    _record("bound", what, n, 0 if ok else 1, worst if ok or worst > 1 else float("inf"))
    return ok


def within(value: float, limit: float, n: int, what: str) -> None:
    """value <= limit (a worst measure over n values), recorded."""
    assert note(value, limit, n, what), f"{what}: {value:.4g} above the bound {limit:.4g}"


def identical(n: int, what: str) -> None:
    """Records n values that the calling test found equal to their expected values."""
    _record("bits", what, n, 0)


def summary(records: list[dict] | None = None) -> dict:
    """Per test module: the bound comparisons and the bitwise ones."""
    records = RECORDS if records is None else records
    out: dict[str, dict] = defaultdict(lambda: {"bound": {"checks": 0, "elements": 0, "failed": 0, "worst": 0.0,
                                                          "worst_at": None},
                                                "bits": {"checks": 0, "elements": 0, "failed": 0}})
    for r in records:
        s = out[r["test"].split("::", 1)[0]][r["kind"]]
        s["checks"] += 1
        s["elements"] += r["elements"]
        s["failed"] += 1 if r["failed"] else 0
        if r["kind"] == "bound" and (s["worst_at"] is None or r["worst"] > s["worst"]):
            s["worst"], s["worst_at"] = r["worst"], f"{r['test'].split('::', 1)[-1]}: {r['what']}"
    return dict(sorted(out.items()))


def write(path: Path) -> None:
    """checks.json (every record and the summary) and checks.md (the summary as a table)."""
    s = summary()
    path = Path(path)
    path.with_suffix(".json").write_text(json.dumps({"summary": s, "records": RECORDS}, indent=1) + "\n")
    lines = ["| test module | bound checks | elements | failed | worst err / bound | where | bitwise checks | "
             "values | differing |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for mod, m in s.items():
        b, e = m["bound"], m["bits"]
        worst = f"{b['worst']:.3f}" if b["checks"] else ""
        lines.append(f"| {mod} | {b['checks']} | {b['elements']} | {b['failed']} | {worst} | {b['worst_at'] or ''} | "
                     f"{e['checks']} | {e['elements']} | {e['failed']} |")
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")
