#!/usr/bin/env python3
"""The times of scripts/gpu_ab.sh's rounds side by side: every time a benchmark's JSON holds, in
each round (a1, the B rounds, a2), and each B round over the mean of the two A rounds.

    python3 scripts/ab_table.py DIR_OR_TGZ [--match REGEX] [--min-change FRACTION]

DIR_OR_TGZ is gpu_ab.sh's result folder or its gpu-ab.tgz. A time is a number under a key named
`ms` or `us` or ending in `_ms` / `_us` (or anywhere below such a key); times in ms are shown in
us. List items are told apart by their short identifying fields (integers, except sizes and copy
counts, and strings of at most 16 characters), so the rows of two rounds line up by what they
measured, not by position. --match keeps the rows whose name matches; --min-change keeps those
where some B round differs from the A mean by at least that fraction.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tarfile
import tempfile
from pathlib import Path

_ROUND = re.compile(r"^(?P<bench>.+)-(?P<round>a1|a2|b|b-[^/]+)\.json$")


def _is_time_key(key: str) -> bool:
    return key in ("ms", "us") or key.endswith(("_ms", "_us"))


def _label(item: dict) -> str:
    parts = []
    for k, v in item.items():
        if isinstance(v, bool):
            continue
        if isinstance(v, int) and not any(w in k for w in ("bytes", "copies")):
            parts.append(f"{k}={v}")
        elif isinstance(v, str) and len(v) <= 16:
            parts.append(f"{k}={v}")
    return ",".join(parts)


def times(obj, path: str = "", scale: float | None = None) -> dict[str, float]:
    """Every time in a benchmark's JSON, in us, by a path that names what was measured."""
    out: dict[str, float] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            s = scale
            if _is_time_key(k):
                s = 1e3 if k == "ms" or k.endswith("_ms") else 1.0
            out.update(times(v, f"{path}.{k}" if path else k, s))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            label = _label(v) if isinstance(v, dict) else ""
            out.update(times(v, f"{path}[{label or i}]", scale))
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool) and scale is not None:
        out[path] = float(obj) * scale
    return out


def load_rounds(folder: Path) -> dict[str, dict[str, dict[str, float]]]:
    """{benchmark: {round: {path: us}}} from the round JSON files in folder."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for f in sorted(folder.glob("*.json")):
        m = _ROUND.match(f.name)
        if not m:
            continue
        try:
            data = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError) as e:
            print(f"ab_table: {f.name}: {e}", file=sys.stderr)
            continue
        out.setdefault(m["bench"], {})[m["round"]] = times(data)
    return out


def table(rounds: dict[str, dict[str, float]], match: str | None = None, min_change: float = 0.0) -> list[str]:
    bs = sorted(r for r in rounds if r.startswith("b"))
    order = [r for r in ("a1", *bs, "a2") if r in rounds]
    if not any(r.startswith("a") for r in order):
        return ["(no A round)"]
    first = rounds[order[0]]
    rx = re.compile(match) if match else None
    head = ["case", *order, *[f"{b} / A" for b in bs]]
    rows = []
    for path in first:
        if rx and not rx.search(path):
            continue
        vals = [rounds[r].get(path) for r in order]
        a = [rounds[r][path] for r in ("a1", "a2") if r in rounds and path in rounds[r]]
        a_mean = sum(a) / len(a) if a else None
        ratios = [rounds[b][path] / a_mean if a_mean and path in rounds[b] else None for b in bs]
        if min_change and not any(x is not None and abs(x - 1) >= min_change for x in ratios):
            continue
        rows.append([path, *("" if v is None else f"{v:.1f}" for v in vals),
                     *("" if x is None else f"{x:.3f}" for x in ratios)])
    widths = [max(len(str(c)) for c in col) for col in zip(head, *rows)]

    def fmt(cells: list[str]) -> str:  # the case left-aligned, the numbers right-aligned
        return "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return [fmt(head), *(fmt(r) for r in rows)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", help="gpu_ab.sh's result folder or gpu-ab.tgz")
    ap.add_argument("--match", help="only the cases whose name matches this regular expression")
    ap.add_argument("--min-change", type=float, default=0.0,
                    help="only the cases where a B round differs from the A mean by this fraction")
    args = ap.parse_args(argv)
    src = Path(args.results)
    if not src.exists():
        print(f"ab_table: no {src}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        folder = src
        if src.is_file():
            with tarfile.open(src) as t:
                t.extractall(tmp, filter="data")
            folder = Path(tmp)
        benches = load_rounds(folder)
    if not benches:
        print(f"ab_table: no round JSON (BENCH-a1.json ...) in {src}", file=sys.stderr)
        return 1
    for bench, rounds in benches.items():
        print(f"== {bench} (us)")
        print("\n".join(table(rounds, args.match, args.min_change)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
