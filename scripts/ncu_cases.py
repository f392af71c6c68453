#!/usr/bin/env python3
"""Several profiled cases side by side, as one JSON for benchmarks/report.py.

scripts/gpu_check.sh --ncu=CASE,... leaves, per case, Nsight Compute's details (ncu-CASE.txt) and
its per-instruction table (ncu-CASE-source.csv) in its results. This reads both for each case
named: the kernel's name, grid and block, the duration, the SMs' active cycles and the issue rate
from the details; the instructions executed, their opcode families and the stall samples from the
table (scripts/ncu_mix.py's summary; absent when the table is missing or empty, e.g. a profile
that was stopped).

Usage: scripts/ncu_cases.py DIR CASE [CASE ...] --json OUT.json [--note TEXT]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ncu_mix import read_table, summarize

# a metric line of the details page: its name, unit (optional) and value
METRICS = {
    key: re.compile(rf"^\s+{re.escape(name)}\s+(?:[a-zA-Z/%]+\s+)?([\d,.]+)\s*$")
    for key, name in {
        "duration_us": "Duration",
        "sm_active_cycles": "SM Active Cycles",
        "issued_per_scheduler": "Issued Warp Per Scheduler",
        "grid_size": "Grid Size",
        "block_size": "Block Size",
        "cluster_size": "Cluster Size",
    }.items()
}
# the profiled kernel's line: its name, then (grid)x(block)
LAUNCH = re.compile(r"^\s*([A-Za-z_]\w*)(?:\(.*\))?\s+\((\d+), (\d+), (\d+)\)x\((\d+), (\d+), (\d+)\)")


def details(text: str) -> dict:
    """The figures of one ncu details page (the first profiled kernel's)."""
    out: dict = {}
    for line in text.splitlines():
        m = LAUNCH.match(line)
        if m and "kernel" not in out:
            out["kernel"] = m.group(1)
            out["grid"] = [int(g) for g in m.group(2, 3, 4)]
            out["block"] = [int(b) for b in m.group(5, 6, 7)]
            continue
        for key, pattern in METRICS.items():
            m = pattern.match(line)
            if m and key not in out:
                value = float(m.group(1).replace(",", ""))
                out[key] = int(value) if key.endswith("size") else value
    if "kernel" not in out or "duration_us" not in out:
        raise ValueError("no profiled kernel (its name and launch, and a Duration line) in the details")
    return out


def case(folder: Path, name: str, top: int) -> dict:
    d = details((folder / f"ncu-{name}.txt").read_text(errors="replace"))
    source = folder / f"ncu-{name}-source.csv"
    try:
        table = read_table(source.read_text(errors="replace"))
    except (OSError, ValueError):
        table = []
    if table:
        s = summarize(table, 1.0, top)
        d.update(instructions=s["instructions"], opcodes=s["opcodes"][:top], stall_samples=s["stall_samples"],
                 stalls=s["stalls"][:top])
    return d


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path, help="the unpacked gpu-results of gpu_check.sh --ncu")
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--note", default="", help="what the cases are (kept in the JSON)")
    ap.add_argument("--top", type=int, default=12, help="opcode families and stall reasons kept per case")
    args = ap.parse_args(argv)
    out = {"how": "scripts/gpu_check.sh --ncu=" + ",".join(args.cases) + " (one launch each), "
                  "summarised by scripts/ncu_cases.py", "note": args.note, "cases": {}}
    gpu = args.dir / "gpu.txt"
    if gpu.exists():
        lines = gpu.read_text().splitlines()
        out["device"] = lines[1].split(",")[0].strip() if len(lines) > 1 else ""
    for name in args.cases:
        try:
            out["cases"][name] = case(args.dir, name, args.top)
        except (OSError, ValueError) as e:
            print(f"ncu_cases: {name}: {e}", file=sys.stderr)
            return 1
    args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
