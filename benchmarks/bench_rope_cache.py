#!/usr/bin/env python3
"""Achieved bandwidth of the drafter's rope_qwen3 and reshape_cache_fp8 kernels.

For each kernel and token count: the bytes it must move (each input read once, each output
written once) over its median time (CUDA events, after warm-up, a GPU sleep queued before each
timed run so the host's launch cost stays out), as GB/s and as a fraction of the
device-to-device copy bandwidth measured in the same run, both at 2 GiB (the device's copy
bandwidth) and at the kernel's own byte count (what a copy reaches where launch ramp-up and
tail weigh as much). Data is cold: each case rotates over enough input sets to span more than
128 MB (2.5x the 50 MB L2); a set larger than that alone is used twice in turn.

  rope_qwen3:        q [T, 32, 128] and k [T, 8, 128] bf16, in place (read + write), positions
                     int32 [T], theta 1e6, eps 1e-6
  reshape_cache_fp8: key, value [T, 8, 128] bf16 read, E4M3 rows written at random distinct
                     slots of a cache of 2T slots (block size 16), int64 slots, f32 scales

T in {16, 1024, 8192} (the target: >= 80% of the copy bandwidth at 8192), plus 32768.

Usage: python3 benchmarks/bench_rope_cache.py --out results.json
"""

from __future__ import annotations

import argparse
import json
import math

import torch
from cuda_timing import copy_gb_s, launched, median_ms
from kernelgen_ops import reshape_cache_fp8, rope_qwen3

DEV = "cuda"
BF16 = torch.bfloat16
E4M3 = torch.float8_e4m3fn
COLD_BYTES = 128e6  # input sets rotated until they span this much
MAX_SETS = 1024
SLEEP = 200_000     # GPU cycles queued before each timed run
TOKENS = [16, 1024, 8192, 32768]
HQ, HKV, D = 32, 8, 128
KVH, BS = 8, 16


def n_sets(set_bytes):
    return max(2, min(MAX_SETS, math.ceil(COLD_BYTES / set_bytes)))


def copy_like_kernels_gb_s(nbytes):
    """GB/s of a device-to-device copy moving nbytes in all, buffers rotated like the kernels'
    inputs and each copy queued behind a GPU sleep like them."""
    return copy_gb_s(nbytes, rotate=n_sets(nbytes), sleep_cycles=SLEEP)


def rope_case(T):
    q_norm = (1.0 + 0.2 * torch.randn(D, device=DEV)).to(BF16)
    k_norm = (1.0 + 0.2 * torch.randn(D, device=DEV)).to(BF16)
    moved = 2 * T * (HQ + HKV) * D * 2 + T * 4 + 2 * D * 2
    sets = [(torch.randn(T, HQ, D, device=DEV).to(BF16), torch.randn(T, HKV, D, device=DEV).to(BF16),
             torch.randint(0, 131073, (T,), device=DEV, dtype=torch.int32))
            for _ in range(n_sets(moved))]

    def fn(q, k, pos):
        launched(rope_qwen3.rope_qwen3(q, k, q_norm, k_norm, pos, T, HQ, HKV, 1e-6, 1e6, head_dim=D))

    return "rope_qwen3", f"{T}x({HQ}+{HKV})x{D}", moved, fn, sets


def reshape_case(T):
    nb = 2 * T // BS
    row = KVH * D
    moved = 2 * T * row * 2 + 2 * T * row + T * 8 + 8
    ks = torch.tensor([0.37], device=DEV)
    vs = torch.tensor([1.9], device=DEV)
    sets = []
    for _ in range(n_sets(moved + 2 * nb * BS * row)):
        kc = torch.empty(nb, BS, KVH, D, device=DEV, dtype=E4M3)
        slots = torch.randperm(nb * BS, device=DEV)[:T].to(torch.int64)
        sets.append((torch.randn(T, KVH, D, device=DEV).to(BF16), torch.randn(T, KVH, D, device=DEV).to(BF16),
                     kc, torch.empty_like(kc), slots))

    def fn(key, value, kc, vc, slots):
        launched(reshape_cache_fp8.reshape_cache_fp8(key, value, kc, vc, slots, ks, vs, T, KVH, D, BS, nb))

    return "reshape_cache_fp8", f"{T}x{KVH}x{D}", moved, fn, sets


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    copy = copy_like_kernels_gb_s(2 << 30)  # 1 GiB each way
    rows = []
    for make in (rope_case, reshape_case):
        for T in TOKENS:
            name, shape, moved, fn, sets = make(T)
            ms = median_ms(fn, sets, sleep_cycles=SLEEP)
            del sets
            torch.cuda.empty_cache()
            same = copy_like_kernels_gb_s(moved)
            gbs = moved / ms / 1e6
            rows.append({
                "kernel": name, "tokens": T, "shape": shape, "bytes": moved, "ms": ms, "gb_s": gbs,
                "fraction_of_copy": gbs / copy, "same_size_copy_gb_s": same,
                "fraction_of_same_size_copy": gbs / same,
            })
    result = {"device": torch.cuda.get_device_name(), "copy_gb_s": copy, "rows": rows}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(f"device-to-device copy at 2 GiB: {copy:.0f} GB/s (read + write)")
    print(f"{'kernel':18} {'shape':>18} {'MB':>8} {'us':>8} {'GB/s':>7} {'% copy':>7} {'% same-size copy':>17}")
    for r in rows:
        print(f"{r['kernel']:18} {r['shape']:>18} {r['bytes'] / 1e6:8.2f} {r['ms'] * 1e3:8.2f} {r['gb_s']:7.0f} "
              f"{100 * r['fraction_of_copy']:6.1f}% {100 * r['fraction_of_same_size_copy']:16.1f}%")


if __name__ == "__main__":
    main()
