#!/usr/bin/env python3
"""Chains of the drafter's FP8 GEMVs (and RMS norms) captured in a CUDA graph, with programmatic
dependent launch and without it (KERNELGEN_NO_PDL), side by side.

Each chain is a run of launches on one stream: the same GEMV over `count` different weights
(cold: together they exceed the L2, and each replay follows a 256 MB write), the GEMV alone once,
a norm before each GEMV (the step's pattern), and the norms alone. With PDL a kernel's CTAs are
placed while the one before finishes and the GEMVs load their first weight chunks meanwhile;
without it each kernel starts after the one before has ended. Times are medians of CUDA-event
times of graph replays.

Usage: python3 benchmarks/bench_pdl_chains.py --out results.json
"""

from __future__ import annotations

import argparse
import json

import torch
from cuda_timing import cold_replay_us, without_pdl
from kernelgen_ops import fp8_gemv_rt, rms_norm

DEV = "cuda"
SHAPES = [("o", 4096, 4096, 10), ("gate_up", 24576, 4096, 4), ("down", 4096, 12288, 6)]


def fp8_weights(n: int, k: int, count: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator(device=DEV).manual_seed(n + k)
    return [(torch.randint(-100, 100, (n, k), device=DEV, dtype=torch.int8, generator=g).view(torch.float8_e4m3fn),
             torch.rand(n, device=DEV, generator=g) * 0.01) for _ in range(count)]


def replay_us(calls, flush: torch.Tensor, reps: int = 21) -> float:
    """Median time of one replay of the graph of ``calls`` (each takes the stream handle)."""
    for c in calls:  # warm-up: plans, shared-memory opt-ins
        c(torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=torch.cuda.Stream()):
        h = torch.cuda.current_stream().cuda_stream
        for c in calls:
            c(h)
    return cold_replay_us(graph, flush, reps)


def both(name: str, calls, flush: torch.Tensor) -> dict:
    row = {"chain": name, "launches": len(calls)}
    row["pdl_us"] = replay_us(calls, flush)
    with without_pdl():
        row["plain_us"] = replay_us(calls, flush)
    print(f"{name:<28} pdl {row['pdl_us']:8.1f} us  plain {row['plain_us']:8.1f} us  "
          f"plain / pdl {row['plain_us'] / row['pdl_us']:.2f}", flush=True)
    return row


def run() -> dict:
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=DEV)
    out: dict = {"device": torch.cuda.get_device_name(), "chains": []}
    for label, n, k, count in SHAPES:
        ws = fp8_weights(n, k, count)
        x = torch.randn(16, k, device=DEV, dtype=torch.bfloat16)
        y = torch.empty(16, n, device=DEV, dtype=torch.bfloat16)
        for rows, fn in ((16, fp8_gemv_rt.fp8_gemv_rt2_16), (1, fp8_gemv_rt.fp8_gemv_rt2)):
            calls = [lambda h, q=q, s=s, fn=fn, rows=rows: fn(x=x, q=q, scale=s, out=y, rows=rows, n=n, k=k, stream=h)
                     for q, s in ws]
            out["chains"].append(both(f"{label} M{rows} x{count}", calls, flush))
            out["chains"].append(both(f"{label} M{rows} x1", calls[:1], flush))
        w = torch.ones(k, device=DEV, dtype=torch.bfloat16)
        xn = torch.randn(16, k, device=DEV, dtype=torch.bfloat16)

        def norm(h):
            return rms_norm.rms_norm_bf16(x=xn, weight=w, out=xn, rows=16, hidden=k, eps=1e-6, stream=h)

        pairs = []
        for q, s in ws:
            pairs += [norm, lambda h, q=q, s=s: fp8_gemv_rt.fp8_gemv_rt2_16(x=xn, q=q, scale=s, out=y, rows=16, n=n,
                                                                          k=k, stream=h)]
        out["chains"].append(both(f"{label} (norm, M16) x{count}", pairs, flush))
        out["chains"].append(both(f"norm x{count}", [norm] * count, flush))
        del ws
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = run()
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
