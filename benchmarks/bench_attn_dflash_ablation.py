#!/usr/bin/env python3
"""Where the drafter attention's split kernels spend their time: the shipped kernel beside itself
with part of its work left out (benchmarks/attn_dflash_ablation.cu, built here with nvcc for the
GPU present).

The drafter's shape (16 query rows, hq 32, hkv 8, head_dim 128, paged cache of block size 16),
BF16 and FP8 caches, kv_len 1024, 8192 and 32768, in one process over the same rotated caches
(400 MB, so every launch reads from memory):
  floor        a plain streaming read of the K / V bytes the kernel must read
  full         the shipped split kernel
  no_fold      partial states sent to the CTAs that fold them and counted, the folds left out
  no_partials  no partial states and no folds (the products and softmax still run)
  loads        no_partials without the tiles' products and softmax (K / V ring, block-table
               reads, barriers and the FP8 conversion kept)
  reads        loads without the FP8 conversion (bf16: loads again): the paged read pattern
Times are means of back-to-back launches (so not bench_attn_dflash's single-launch medians);
the comparison is within one run. Reported: microseconds, the fraction of the floor each
reaches, and the full kernel's time split into loads, compute (no_partials - loads), partial
states (no_fold - no_partials) and the folds (full - no_fold: the cluster's states, and past one
cluster the group states' through the workspace).

Usage: python3 benchmarks/bench_attn_dflash_ablation.py --out results.json
"""

from __future__ import annotations

import argparse
import sys

import ablation


def table(rows: list[dict]) -> str:
    out = ["| cache | kv_len | MB | floor us | full us | no_fold us | no_partials us | loads us | reads us | "
           "full / floor | loads / floor | compute us | partials us | fold us |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['cache']} | {r['kv_len']} | {r['kv_mb']:.1f} | {r['floor_us']:.1f} | {r['full_us']:.1f} | "
                   f"{r['no_fold_us']:.1f} | {r['no_partials_us']:.1f} | {r['loads_us']:.1f} | {r['reads_us']:.1f} | "
                   f"{r['floor_us'] / r['full_us']:.0%} | {r['floor_us'] / r['loads_us']:.0%} | "
                   f"{r['no_partials_us'] - r['loads_us']:.1f} | {r['no_fold_us'] - r['no_partials_us']:.1f} | "
                   f"{r['full_us'] - r['no_fold_us']:.1f} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON results file")
    args = ap.parse_args()
    return ablation.report("attn_dflash_ablation.cu", "drafter attention ablation", args.out, table)


if __name__ == "__main__":
    sys.exit(main())
