#!/usr/bin/env python3
"""What a kernel spends its instructions and its stalls on, from Nsight Compute's source page.

Reads the per-instruction table that `ncu --section SourceCounters --page source --print-source
sass --csv ...` prints (scripts/gpu_check.sh --ncu writes one per case: ncu-CASE-source.csv)
and prints:

- the warp-level instructions executed, in all and (with --per N) per unit of work, e.g. per
  warp and tile;
- their opcode families (the mnemonic before its first dot: IMAD.SHL and IMAD count as IMAD),
  largest first;
- the warp stall samples by reason (ncu's stall_* columns, all samples), largest first;
- the instructions with the most stall samples, each with the reasons that make up most of them.

Usage: scripts/ncu_mix.py FILE.csv [--per N] [--top K] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from collections import Counter
from pathlib import Path

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def _int(text: str) -> int:
    text = text.replace(",", "").strip()
    return int(float(text)) if text not in ("", "-") else 0


def opcode(source: str) -> str:
    """The opcode family of one SASS line: its mnemonic (after a predicate) up to the first dot."""
    words = source.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else "?"


def read_table(text: str) -> list[dict[str, str]]:
    """The rows of the first per-instruction table in ncu's CSV output (its header names
    'Address' and 'Source'; lines before it, such as ==PROF== notes or the kernel's name, are
    skipped)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"Address"')), None)
    if start is None:
        raise ValueError("no per-instruction table (a header starting with \"Address\"): was ncu run with "
                         "--section SourceCounters --page source --print-source sass --csv?")
    rows = csv.DictReader(io.StringIO("\n".join(lines[start:])))
    missing = {"Source", EXECUTED} - set(rows.fieldnames or [])
    if missing:
        raise ValueError(f"the table lacks the columns {sorted(missing)}")
    table = []
    for row in rows:
        if None in row.values():
            break  # a short row (a second kernel's name line): the first table ends here
        table.append(row)
    return table


def summarize(table: list[dict[str, str]], per: float = 1.0, top: int = 12) -> dict:
    stall_cols = [c for c in (table[0].keys() if table else []) if c.startswith("stall_") and "Not Issued" not in c]
    ops: Counter[str] = Counter()
    stalls: Counter[str] = Counter()
    total = samples = 0
    hot = []
    for row in table:
        n = _int(row[EXECUTED])
        total += n
        ops[opcode(row["Source"])] += n
        s = _int(row.get(SAMPLES, "0"))
        samples += s
        by_reason = {c[len("stall_"):]: _int(row[c]) for c in stall_cols}
        for reason, v in by_reason.items():
            stalls[reason] += v
        if s:
            hot.append((s, row.get("Address", ""), row["Source"].strip(), by_reason))
    stall_total = sum(stalls.values()) or 1
    hot.sort(key=lambda h: -h[0])
    return {
        "instructions": total,
        "per": per,
        "instructions_per": total / per,
        "opcodes": [{"op": op, "count": n, "per": n / per, "share": n / total if total else 0.0}
                    for op, n in ops.most_common()],
        "stall_samples": samples,
        "stalls": [{"reason": r, "samples": v, "share": v / stall_total} for r, v in stalls.most_common() if v],
        "hot": [{"address": a, "source": src, "samples": s, "share": s / samples if samples else 0.0,
                 "reasons": {r: v for r, v in sorted(d.items(), key=lambda kv: -kv[1]) if v >= 0.2 * s}}
                for s, a, src, d in hot[:top]],
    }


def report(summary: dict, top: int = 12) -> str:
    per = summary["per"]
    out = [f"warp instructions executed: {summary['instructions']:,}"
           + (f" ({summary['instructions_per']:.1f} per unit, {per:g} units)" if per != 1 else "")]
    out.append("opcodes:")
    for o in summary["opcodes"][:top]:
        count = f"{o['per']:10.1f}" if per != 1 else f"{o['count']:12,}"
        out.append(f"  {o['op']:<12} {count}  {100 * o['share']:5.1f}%")
    out.append(f"stall samples: {summary['stall_samples']:,}")
    for s in summary["stalls"][:top]:
        out.append(f"  {s['reason']:<20} {100 * s['share']:5.1f}%")
    if summary["hot"]:
        out.append("most stalled instructions:")
        for h in summary["hot"]:
            reasons = ", ".join(f"{r} {v}" for r, v in h["reasons"].items())
            out.append(f"  {100 * h['share']:5.1f}%  {h['source'][:64]:<64}  {reasons}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", type=Path, help="ncu's source page as CSV")
    ap.add_argument("--per", type=float, default=1.0, help="units of work to divide the counts by (e.g. warps x tiles)")
    ap.add_argument("--top", type=int, default=12, help="opcodes, stall reasons and instructions to list")
    ap.add_argument("--json", type=Path, help="also write the summary here")
    args = ap.parse_args(argv)
    if args.per <= 0:
        ap.error("--per must be positive")
    try:
        table = read_table(args.csv.read_text(errors="replace"))
    except (OSError, ValueError) as e:
        print(f"ncu_mix: {args.csv}: {e}", file=sys.stderr)
        return 1
    if not table:
        print(f"ncu_mix: {args.csv}: the table has no rows", file=sys.stderr)
        return 1
    summary = summarize(table, args.per, args.top)
    print(report(summary, args.top))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
