#!/usr/bin/env python3
"""Where the NVFP4 few-row GEMVs' time goes: w4a16_gemv_rt1 beside itself with part of its work
left out, and beside w4a16_gemv_rt2 and w4a16_gemv (benchmarks/w4a16_gemv_ablation.cu, built here
with nvcc for the GPU present).

Per drafter shape (qkv, o, gate/up, lm_head) at 1 and 16 rows, in one process over the same
rotated weights (400 MB, so every launch reads from memory):
  floor    a plain streaming read of the packed codes and scale bytes
  gemv / rt2 / rt1   the three kernels as shipped
  loads    rt1 without the conversions and products (code ring, scale window, x, reduction kept)
  convert  rt1 with the E2M1 and scale conversions, without the products
  mma      rt1 with the products on the raw code words, without the conversions
Times are means of back-to-back launches, in microseconds.

Usage: python3 benchmarks/bench_w4a16_gemv_ablation.py --out results.json [--quick]
"""

from __future__ import annotations

import argparse
import sys

import ablation


def table(rows: list[dict]) -> str:
    out = ["| shape | rows | MB | floor us | w4a16_gemv us | rt2 us | rt1 us | loads us | convert us | mma us "
           "| rt1 / floor | loads / floor |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        times = " | ".join(f"{r[k + '_us']:.1f}" for k in ("floor", "gemv", "rt2", "rt1", "rt1_loads", "rt1_convert",
                                                            "rt1_mma"))
        out.append(f"| {r['shape']} | {r['rows']} | {r['weight_mb']:.1f} | {times} | "
                   f"{r['floor_us'] / r['rt1_us']:.0%} | {r['floor_us'] / r['rt1_loads_us']:.0%} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON results file")
    ap.add_argument("--quick", action="store_true", help="lm_head only")
    args = ap.parse_args()
    return ablation.report("w4a16_gemv_ablation.cu", "NVFP4 GEMV ablation", args.out, table,
                           ["--quick"] if args.quick else [])


if __name__ == "__main__":
    sys.exit(main())
