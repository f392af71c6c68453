#!/usr/bin/env python3
"""Where the FP8 register-tiled GEMVs' time goes: the shipped kernel beside itself with part of
its work left out (benchmarks/fp8_gemv_ablation.cu, built here with nvcc for the GPU present).

Per drafter shape (qkv, o, gate/up, down, lm_head, the convolution's delta) at 1, 16, 48 and 64 rows,
in one process over the same rotated weights (400 MB, so every launch reads from memory):
  floor   a plain streaming read of the weight (the fastest of a grid-stride and a one-shot grid)
  full    fp8_gemv_rt2 (1 row), fp8_gemv_rt2_16 (16 rows) or fp8_gemv_rt2_64 (48, 64), as shipped
  loads   the kernel without conversions and products (ring, x loads, reduction, exchange kept;
          at 48 and 64 rows the shared-memory reads of x too)
  convert the kernel with the E4M3 -> bf16 conversions and without the products
  mma     the kernel with the products (on raw weight bytes) and without the conversions
  rt1     the whole-K form (fp8_gemv_rt1 / rt1_16 / rt1_64: one CTA over all of K, no cluster), which the
          chain takes for weights of more than SMs / 2 row tiles
Times are means of back-to-back launches (so not the single-launch medians of
bench_fp8_linear); the comparison is within one run. Reported: microseconds, the fraction of
the read floor each reaches, and the share of the full kernel's time above `loads` that
each of the two compute parts accounts for.

Usage: python3 benchmarks/bench_fp8_gemv_ablation.py --out results.json [--quick]
"""

from __future__ import annotations

import argparse
import sys

import ablation


def table(rows: list[dict]) -> str:
    out = ["| shape | rows | MB | floor us | full us | loads us | convert us | mma us | rt1 us | full / floor | "
           "loads / floor |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        rt1 = f"{r['rt1_us']:.1f}" if r.get("rt1_us") else "-"
        out.append(f"| {r['shape']} | {r['rows']} | {r['weight_mb']:.1f} | {r['floor_us']:.1f} | {r['full_us']:.1f} | "
                   f"{r['loads_us']:.1f} | {r['convert_us']:.1f} | {r['mma_us']:.1f} | {rt1} | "
                   f"{r['floor_us'] / r['full_us']:.0%} | {r['floor_us'] / r['loads_us']:.0%} |")
    return "\n".join(out)


def shares(r: dict) -> None:
    """The share of the time the full kernel spends above `loads` that each compute part adds."""
    gap = r["full_us"] - r["loads_us"]
    r["convert_share"] = (r["convert_us"] - r["loads_us"]) / gap if gap > 0 else None
    r["mma_share"] = (r["mma_us"] - r["loads_us"]) / gap if gap > 0 else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON results file")
    ap.add_argument("--quick", action="store_true", help="gate/up and o only")
    args = ap.parse_args()
    return ablation.report("fp8_gemv_ablation.cu", "fp8 GEMV ablation", args.out, table,
                           ["--quick"] if args.quick else [], shares)


if __name__ == "__main__":
    sys.exit(main())
