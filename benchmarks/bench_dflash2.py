#!/usr/bin/env python3
"""DFlash2 kernels (specs/dflash2.yaml) at the drafter's shapes.

- dflash2_conv2, hidden 4096, rows 16, 256, 4096, 16384: the bytes it must move (x and delta read,
  out written; base is small) over the median CUDA-event time, as GB/s and as a fraction of
  the device-to-device copy bandwidth measured in the same run (2 GiB, read + write), and of a
  copy of the kernel's own byte count timed the same way (single copies queued behind a GPU
  sleep: what a copy reaches where its ramp-up and tail count too). Inputs (and the copy's
  buffers) rotate over enough sets that the L2 no longer holds the ones timed (cold data).
- dflash2_topk16 at 16 x 151936, f32 and bf16 logits (the drafter's lm_head writes bf16):
  microseconds per launch, beside torch.topk on the same logits: cold logits, and logits the
  L2 holds (in the drafter's step the lm_head has just written them). The kernel needs no
  zeroed counter, so one launch is all there is to time. Also the mean of back-to-back
  launches over the cold logits (with programmatic dependent launch, as the launcher does, and
  without), beside torch.topk timed the same way.
- dflash2_selector_walk at B = 1, S = 16, rank 256, vocab 151936: microseconds per launch.
Device times are taken with the GPU kept busy while the launch is queued (torch.cuda._sleep),
so the host's call cost stays out; the per-call time of a plain Python call loop (host cost
included) is reported beside them.

Usage: python3 benchmarks/bench_dflash2.py --out results.json
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from cuda_timing import back_to_back_ms, cold_copies, copy_gb_s, launched, median_ms, without_pdl
from kernelgen_ops import dflash2

DEV = "cuda"
BF16, F32, I32 = torch.bfloat16, torch.float32, torch.int32
ROTATE = 4
SLEEP = 200_000  # cycles of GPU work queued before each timed launch (~0.1 ms)
TOP = 16


def host_us_per_call(fn, calls=1000):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / calls * 1e6


def bench_conv2(copy_gbs):
    res = []
    H = 4096
    for R in (16, 256, 4096, 16384):
        base = torch.randn(2, H, device=DEV).to(BF16)
        nbytes = 2 * R * H * 2 + R * 2 * (H // 16) * 2
        nsets = cold_copies(nbytes, l2s=3, minimum=ROTATE)
        sets = [
            (
                torch.randn(R, H, device=DEV).to(BF16),
                torch.randn(R, 2, H // 16, device=DEV).to(BF16),
                torch.empty(R, H, device=DEV, dtype=BF16),
            )
            for _ in range(nsets)
        ]
        ms = median_ms(lambda x, d, o: launched(dflash2.dflash2_conv2(x, base, d, o, R, H)), sets, sleep_cycles=SLEEP)
        gbs = nbytes / ms / 1e6
        same = copy_gb_s(nbytes, nsets, sleep_cycles=SLEEP)
        res.append(
            {"rows": R, "hidden": H, "bytes": nbytes, "us": ms * 1e3, "gb_s": gbs, "fraction_of_copy": gbs / copy_gbs,
             "same_size_copy_gb_s": same, "fraction_of_same_size_copy": gbs / same}
        )
    return res


def bench_topk(rows=16, vocab=151936, dtype=F32):
    """Cold logits (rotated past the L2), and logits the L2 holds, as after the lm_head that
    writes them (one set, launched again and again: the kernel overwrites 16 logits a row with
    -inf, and the timing does not depend on their values)."""
    sets = []
    for _ in range(cold_copies(rows * vocab * dtype.itemsize, l2s=3, minimum=ROTATE)):
        sets.append(((torch.randn(rows, vocab, device=DEV) * 4.0).to(dtype),))
    ids = torch.empty(rows, TOP, device=DEV, dtype=I32)
    scores = torch.empty(rows, TOP, device=DEV, dtype=F32)

    def kern(lg):
        launched(dflash2.dflash2_topk16(lg, ids, scores, rows, vocab, 1.0, 30.0))

    ms = median_ms(kern, sets, sleep_cycles=SLEEP)
    tms = median_ms(lambda lg: torch.topk(lg, TOP, dim=-1), sets, sleep_cycles=SLEEP)
    b2b = back_to_back_ms(kern, sets)
    with without_pdl():
        b2b_plain = back_to_back_ms(kern, sets)
    tb2b = back_to_back_ms(lambda lg: torch.topk(lg, TOP, dim=-1), sets)
    warm = sets[:1]
    ms_l2 = median_ms(kern, warm, sleep_cycles=SLEEP)
    tms_l2 = median_ms(lambda lg: torch.topk(lg, TOP, dim=-1), warm, sleep_cycles=SLEEP)
    lg = sets[0][0]
    return {
        "rows": rows,
        "vocab": vocab,
        "dtype": str(dtype).removeprefix("torch."),
        "us": ms * 1e3,
        "torch_topk_us": tms * 1e3,
        "us_l2": ms_l2 * 1e3,
        "torch_topk_us_l2": tms_l2 * 1e3,
        "us_b2b": b2b * 1e3,
        "us_b2b_no_pdl": b2b_plain * 1e3,
        "torch_topk_us_b2b": tb2b * 1e3,
        "host_loop_us": host_us_per_call(lambda: kern(lg)),
        "torch_topk_host_loop_us": host_us_per_call(lambda: torch.topk(lg, TOP, dim=-1)),
    }


def bench_walk(batch=1, slots=16, rank=256, vocab=151936):
    p = (torch.randn(vocab, rank, device=DEV) * 0.25).to(BF16)
    q = (torch.randn(vocab, rank, device=DEV) * 0.25).to(BF16)
    out = torch.empty(batch, slots, device=DEV, dtype=I32)
    sets = []
    for _ in range(ROTATE):
        cand = torch.randint(0, vocab, (batch, slots, TOP), device=DEV, dtype=I32)
        u = torch.randn(batch, slots, TOP, device=DEV)
        h = torch.randn(batch, slots, rank, device=DEV).to(BF16)
        anchor = torch.randint(0, vocab, (batch,), device=DEV, dtype=I32)
        sets.append((cand, u, h, anchor))

    def kern(cand, u, h, anchor):
        launched(dflash2.dflash2_selector_walk(cand, u, h, p, q, anchor, out, batch, slots, rank, vocab))

    ms = median_ms(kern, sets, sleep_cycles=SLEEP)
    return {
        "batch": batch,
        "slots": slots,
        "rank": rank,
        "vocab": vocab,
        "us": ms * 1e3,
        "host_loop_us": host_us_per_call(lambda: kern(*sets[0])),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    copy_gbs = copy_gb_s(2 << 30, ROTATE)
    conv = bench_conv2(copy_gbs)
    topk = bench_topk()
    topk_bf16 = bench_topk(dtype=BF16)
    walk = bench_walk()
    result = {
        "device": torch.cuda.get_device_name(),
        "copy_gb_s": copy_gbs,
        "conv2": conv,
        "topk16": topk,
        "topk16_bf16": topk_bf16,
        "selector_walk": walk,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(f"device-to-device copy: {copy_gbs:.0f} GB/s (read + write)")
    for r in conv:
        print(
            f"dflash2_conv2 {r['rows']:5d} x {r['hidden']}: {r['us']:8.2f} us {r['gb_s']:8.0f} GB/s "
            f"{100 * r['fraction_of_copy']:5.1f}% of copy, {100 * r['fraction_of_same_size_copy']:5.1f}% of a "
            f"same-size copy"
        )
    for t in (topk, topk_bf16):
        print(
            f"dflash2_topk16 {t['rows']} x {t['vocab']} {t['dtype']}: {t['us']:.2f} us/launch cold, "
            f"{t['us_l2']:.2f} from the L2 (torch.topk {t['torch_topk_us']:.2f} / {t['torch_topk_us_l2']:.2f} us); "
            f"back to back {t['us_b2b']:.2f} us/launch, {t['us_b2b_no_pdl']:.2f} without PDL "
            f"(torch.topk {t['torch_topk_us_b2b']:.2f}); "
            f"host loop {t['host_loop_us']:.2f} us/call "
            f"(torch.topk {t['torch_topk_host_loop_us']:.2f})"
        )
    print(
        f"dflash2_selector_walk B={walk['batch']} S={walk['slots']} r={walk['rank']} vocab={walk['vocab']}: "
        f"{walk['us']:.2f} us/launch; host loop {walk['host_loop_us']:.2f} us/call"
    )


if __name__ == "__main__":
    main()
