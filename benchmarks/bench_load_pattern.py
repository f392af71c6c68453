#!/usr/bin/env python3
"""How the shape of a warp's weight copies decides a GEMV's read rate: the streamed GEMVs' load
structure alone (benchmarks/load_pattern.cu, built here with nvcc for the GPU present) with
64-byte pieces of a row per copy instruction (half lines), 128-byte chunks copied as two such
instructions, and whole 128-byte lines (kcommon::LineChunk, what dense_gemv and
fp8_gemv_rt2 / rt2_16 use), beside a plain streaming read of the same cold bytes. Means of
back-to-back launches within one process; reported: microseconds and each variant's rate as a
fraction of the streaming read's.

Usage: python3 benchmarks/bench_load_pattern.py --out results.json
"""

from __future__ import annotations

import argparse
import sys

import ablation


def table(rows: list[dict]) -> str:
    out = ["| weight | shape | MB | floor us | half lines us | two halves us | whole lines us | half / floor "
           "| lines / floor |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['dtype']} | {r['shape']} | {r['weight_mb']:.1f} | {r['floor_us']:.1f} | {r['half_us']:.1f} | "
                   f"{r['halves_us']:.1f} | {r['line_us']:.1f} | {r['floor_us'] / r['half_us']:.0%} | "
                   f"{r['floor_us'] / r['line_us']:.0%} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON results file")
    args = ap.parse_args()
    return ablation.report("load_pattern.cu", "GEMV load pattern", args.out, table)


if __name__ == "__main__":
    sys.exit(main())
