#!/usr/bin/env python3
"""Where dflash2_topk16's time goes (benchmarks/topk16_ablation.cu, built here with nvcc for the
GPU present): the shipped kernel at 16 x 151936 logits (bf16 and f32, rotated beyond the L2)
beside itself ended after each stage, an empty kernel of the same grid and 8-CTA clusters, and a
plain streaming read of the logits:
  empty      the launch alone (128 CTAs of 512 threads in clusters of 8, no work)
  maxima     the loads, the keys and each thread's maximum
  cta_top16  ... and each CTA's 16 largest thread maxima (warp sorts, a merge tree)
  threshold  ... and the row's threshold (the lists exchanged in the cluster, merged again)
  full       the whole kernel (candidates gathered in CTA 0, sorted, written)
"single" is one launch queued behind a GPU spin (as bench_dflash2.py times the kernel), "b2b"
the mean of back-to-back launches with programmatic dependent launch; medians over rounds.

Usage: python3 benchmarks/bench_topk16_ablation.py --out results.json
"""

from __future__ import annotations

import argparse
import sys

import ablation

STAGES = ("empty", "maxima", "cta_top16", "threshold", "full")


def table(rows: list[dict]) -> str:
    out = ["| logits | MB | read floor us | timing | " + " | ".join(f"{s} us" for s in STAGES) + " |",
           "|---|---|---|---|" + "---|" * len(STAGES)]
    for r in rows:
        for t in ("single", "b2b"):
            out.append(f"| {r['dtype']} | {r['mb']:.1f} | {r['read_floor_us']:.1f} | {t} | "
                       + " | ".join(f"{r[f'{s}_{t}_us']:.1f}" for s in STAGES) + " |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON results file")
    args = ap.parse_args()
    return ablation.report("topk16_ablation.cu", "dflash2_topk16 ablation", args.out, table)


if __name__ == "__main__":
    sys.exit(main())
