#!/usr/bin/env python3
"""Throughput of the catalog's memory-bound kernels, side by side with torch, in one run.

For each kernel at engine-like large shapes: the bytes it must move (each input read
once, each output written once) over its median time (CUDA events, after warm-up, inputs
rotated over several buffers so L2 does not serve them), as TB/s and as a fraction of the
device-to-device copy bandwidth measured in the same run; beside it torch's equivalent on
the same data. At small shapes (1-64 rows), where launch cost dominates, the time per call
of a CUDA-graph-free Python call loop is reported instead (host launch included).

Usage: python3 benchmarks/bench_memory_bound.py --out results.json
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn.functional as F
from cuda_timing import copy_gb_s, launched, median_ms
from kernelgen_ops import (
    argmax,
    batched_embed,
    fill_slots,
    reshape_cache_bf16,
    residual_add,
    residual_rms_norm,
    rms_norm,
    silu_mul,
)

DEV = "cuda"
BF16 = torch.bfloat16
ROTATE = 4  # input sets cycled through, so repeated runs do not hit L2


def host_us_per_call(fn, args, calls=2000):
    """Wall time per call of a tight Python loop (launch cost included), synchronised at the end."""
    for _ in range(50):
        fn(*args)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / calls * 1e6


def copy_bandwidth(nbytes):
    """TB/s of a plain device-to-device copy moving nbytes in all (nbytes / 2 read, nbytes / 2
    written), counting read + write; buffers rotate like the kernels' inputs. At 2 GiB it is the
    device's copy bandwidth; at a kernel's own size, what a copy reaches where fixed costs weigh
    more."""
    return copy_gb_s(nbytes, ROTATE) / 1e3


def rnd(*shape, dtype=BF16):
    return torch.randn(*shape, device=DEV, dtype=torch.float32).to(dtype)


def reshape_case(T, KVH=8, D=128, BS=16):
    NB = T // BS * 2
    kc = torch.empty(NB, BS, KVH, D, device=DEV, dtype=BF16)
    vc = torch.empty_like(kc)
    csets = []
    for _ in range(ROTATE):
        slots = torch.randperm(NB * BS, device=DEV)[:T].to(torch.int64)
        csets.append((rnd(T, KVH, D), rnd(T, KVH, D), slots))

    def torch_cache(k, v, s):
        kc.view(-1, KVH, D).index_copy_(0, s, k)
        vc.view(-1, KVH, D).index_copy_(0, s, v)

    return ("reshape_cache_bf16", f"{T}x{KVH}x{D}", 4 * T * KVH * D * 2 + T * 8,
            lambda k, v, s: launched(reshape_cache_bf16.reshape_cache_bf16(k, v, kc, vc, s, T, KVH, D, BS, NB)),
            torch_cache, csets)


def cases():
    """(name, shape text, bytes, kernel fn, torch fn or None, input sets)."""
    out = []
    R, H = 8192, 4096
    w = rnd(H)
    sets = [(rnd(R, H), torch.empty(R, H, device=DEV, dtype=BF16)) for _ in range(ROTATE)]
    out.append(("rms_norm", f"{R}x{H}", 2 * R * H * 2 + H * 2,
                lambda x, o: launched(rms_norm.rms_norm_bf16(x, w, o, R, H, 1e-6)),
                lambda x, o: torch.nn.functional.rms_norm(x, (H,), w, 1e-6), sets))
    rsets = [(rnd(R, H), rnd(R, H), torch.empty(R, H, device=DEV, dtype=BF16)) for _ in range(ROTATE)]

    def torch_res_norm(x, r, o):
        r.add_(x)
        torch.nn.functional.rms_norm(r, (H,), w, 1e-6)

    out.append(("residual_rms_norm", f"{R}x{H}", 4 * R * H * 2 + H * 2,
                lambda x, r, o: launched(residual_rms_norm.residual_rms_norm_bf16(x, r, w, o, R, H, 1e-6)),
                torch_res_norm, rsets))
    N = R * H
    asets = [(rnd(N), rnd(N), torch.empty(N, device=DEV, dtype=BF16)) for _ in range(ROTATE)]
    out.append(("residual_add", f"{N}", 3 * N * 2,
                lambda a, b, o: launched(residual_add.residual_add_bf16(a, b, o, N)),
                lambda a, b, o: torch.add(a, b, out=o), asets))
    I = 14336
    ssets = [(rnd(R, 2 * I), torch.empty(R, I, device=DEV, dtype=BF16)) for _ in range(ROTATE)]
    out.append(("silu_mul", f"{R}x{I}", (R * 2 * I + R * I) * 2,
                lambda x, o: launched(silu_mul.silu_mul_bf16(x, o, R, I)),
                lambda x, o: torch.mul(F.silu(x[:, :I]), x[:, I:], out=o), ssets))
    AR, V = 1024, 151936
    gsets = [(rnd(AR, V), torch.empty(AR, device=DEV, dtype=torch.int32)) for _ in range(ROTATE)]
    out.append(("argmax", f"{AR}x{V}", AR * V * 2 + AR * 4,
                lambda x, o: launched(argmax.argmax_bf16(x, o, AR, V)),
                lambda x, o: torch.argmax(x, dim=-1), gsets))
    EV, EN = 151936, 8192
    table = rnd(EV, H)
    esets = [(torch.randint(0, EV, (EN,), device=DEV, dtype=torch.int32), torch.empty(EN, H, device=DEV, dtype=BF16))
             for _ in range(ROTATE)]
    out.append(("batched_embed", f"{EN}x{H}", EN * H * 2 * 2 + EN * 4,
                lambda i, o: launched(batched_embed.batched_embed_bf16(i, table, o, EN, H, EV)),
                lambda i, o: torch.index_select(table, 0, i, out=o), esets))
    # 8192 tokens (one prefill chunk) moves 64 MiB, ~20 us: launch ramp-up and tail are a large
    # part of that, and a plain copy of the same bytes is slow too (see the same-size copy
    # column); 32768 tokens (a long prompt) is the large-size case.
    for T in (8192, 32768):
        out.append(reshape_case(T))
    # 2^26 slots (512 MiB of int64 out, ~0.15 ms): large enough that the kernel, not the
    # host call (5-10 us, which the events also span when the GPU is idle), is what is
    # timed.  Engines call it with small counts: small_cases() gives the per-call cost.
    C, FB = 1 << 26, 16
    bt = torch.randperm((C // FB) + 1, device=DEV).to(torch.int32)
    fsets = [(torch.empty(C, device=DEV, dtype=torch.int64),) for _ in range(ROTATE)]
    pos = torch.arange(C, device=DEV)

    def torch_slots(o):
        torch.add(bt[pos // FB].to(torch.int64) * FB, pos % FB, out=o)

    out.append(("fill_slots", f"{C}", C * 8 + (C // FB) * 4,
                lambda o: launched(fill_slots.fill_slots(bt, o, 0, C, FB)), torch_slots, fsets))
    return out


def small_cases():
    """Per-call time at 1-64 rows (hidden 4096), launch cost included, kernelgen vs torch.
    For fill_slots, rows is the slot count (positions from 4093, block size 16)."""
    rows_list = [1, 8, 64]
    H = 4096
    w = rnd(H)
    res = []
    for R in rows_list:
        x, o = rnd(R, H), torch.empty(R, H, device=DEV, dtype=BF16)
        res.append({
            "kernel": "rms_norm", "rows": R,
            "kernelgen_us": host_us_per_call(lambda: rms_norm.rms_norm_bf16(x, w, o, R, H, 1e-6), ()),
            "torch_us": host_us_per_call(lambda: torch.nn.functional.rms_norm(x, (H,), w, 1e-6), ()),
        })
        g = rnd(R, 2 * 14336)
        so = torch.empty(R, 14336, device=DEV, dtype=BF16)
        res.append({
            "kernel": "silu_mul", "rows": R,
            "kernelgen_us": host_us_per_call(lambda: silu_mul.silu_mul_bf16(g, so, R, 14336), ()),
            "torch_us": host_us_per_call(lambda: F.silu(g[:, :14336]) * g[:, 14336:], ()),
        })
        lg = rnd(R, 151936)
        ao = torch.empty(R, device=DEV, dtype=torch.int32)
        res.append({
            "kernel": "argmax", "rows": R,
            "kernelgen_us": host_us_per_call(lambda: argmax.argmax_bf16(lg, ao, R, 151936), ()),
            "torch_us": host_us_per_call(lambda: torch.argmax(lg, dim=-1), ()),
        })
        FB, st = 16, 4093
        bts = torch.randperm((st + R) // FB + 2, device=DEV).to(torch.int32)
        so = torch.empty(R, device=DEV, dtype=torch.int64)
        ps = torch.arange(st, st + R, device=DEV)
        res.append({
            "kernel": "fill_slots", "rows": R,
            "kernelgen_us": host_us_per_call(lambda: fill_slots.fill_slots(bts, so, st, R, FB), ()),
            "torch_us": host_us_per_call(
                lambda: torch.add(bts[ps // FB].to(torch.int64) * FB, ps % FB, out=so), ()),
        })
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    copy_tbs = copy_bandwidth(2 << 30)  # 1 GiB each way
    rows = []
    for name, shape, nbytes, fn, ref, sets in cases():
        ms = median_ms(fn, sets)
        tms = median_ms(ref, sets)
        same = copy_bandwidth(nbytes)
        rows.append({
            "kernel": name, "shape": shape, "bytes": nbytes, "ms": ms, "tb_s": nbytes / ms / 1e9,
            "fraction_of_copy": nbytes / ms / 1e9 / copy_tbs,
            "same_size_copy_tb_s": same, "fraction_of_same_size_copy": nbytes / ms / 1e9 / same,
            "torch_ms": tms, "torch_tb_s": nbytes / tms / 1e9, "speedup_vs_torch": tms / ms,
        })
    small = small_cases()
    result = {"device": torch.cuda.get_device_name(), "copy_tb_s": copy_tbs, "large": rows, "small": small}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(f"device-to-device copy: {copy_tbs:.2f} TB/s (read + write)")
    print(f"{'kernel':20} {'shape':>14} {'TB/s':>6} {'% copy':>7} {'% same-size copy':>17} "
          f"{'torch TB/s':>10} {'vs torch':>8}")
    for r in rows:
        print(f"{r['kernel']:20} {r['shape']:>14} {r['tb_s']:6.2f} {100 * r['fraction_of_copy']:6.1f}% "
              f"{100 * r['fraction_of_same_size_copy']:16.1f}% {r['torch_tb_s']:10.2f} {r['speedup_vs_torch']:7.2f}x")
    print(f"{'small shapes':20} {'rows':>6} {'kernelgen us/call':>18} {'torch us/call':>14}")
    for r in small:
        print(f"{r['kernel']:20} {r['rows']:6d} {r['kernelgen_us']:18.2f} {r['torch_us']:14.2f}")


if __name__ == "__main__":
    main()
