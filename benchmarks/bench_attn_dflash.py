#!/usr/bin/env python3
"""Throughput of the drafter attention kernels (module attn_dflash) on one GPU.

16 query rows, hq 32, hkv 8, head_dim 128, non-causal, paged cache (block size 16, shuffled
block table), kv_len in --lengths (1024, 8192, 32768). For the BF16 and FP8 caches, the split
and unsplit members (called directly) and the chain: median CUDA-event time (a GPU sleep is
queued before each timed launch so the host's launch cost stays out), GB/s on the K / V bytes
the kernel must read (kv_len * hkv * 128 * 2 * element size), and that as a fraction of the
device-to-device copy bandwidth measured in the same run (read + write counted). Caches are
cold: each case rotates over enough cache copies to exceed twice the 50 MB L2. Beside them,
torch scaled_dot_product_attention on the same data made contiguous (K / V gathered from the
cache and heads expanded outside the timing; BF16 values, dequantized for FP8).
Then the same with a sliding window (--windows, 2048 as DFlash2's sliding layers use) at the
lengths above it: GB/s there on the bytes of the keys some query row can see (window + q_rows - 1
rows), torch with the window as a boolean mask.

Usage: python3 benchmarks/bench_attn_dflash.py --out results.json [--lengths 1024 8192 32768]
       [--windows 2048]
"""

import argparse
import json
import math

import torch
import torch.nn.functional as F
from cuda_timing import copy_gb_s, launched, median_ms
from kernelgen_ops import attn_dflash

DEV = "cuda"
L2_BYTES = 50 * 10**6


def paged(vals, perm, bs, fp8):
    """Rows vals [blocks * bs, hkv, d] (f32) as a paged cache [blocks, bs, hkv, d] whose logical
    block i is physical block perm[i]: bf16, or E4M3 of vals / 0.01 (the scale the benchmarks
    pass; clamped to the E4M3 range, where a larger value would become NaN)."""
    nb, (hkv, d) = perm.numel(), vals.shape[1:]
    c = torch.empty(nb, bs, hkv, d, dtype=torch.uint8 if fp8 else torch.bfloat16, device=DEV)
    if fp8:
        c[perm] = (vals / 0.01).clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8).view(nb, bs, hkv, d)
        return c.view(torch.float8_e4m3fn)
    c[perm] = vals.to(torch.bfloat16).view(nb, bs, hkv, d)
    return c


def bench_case(kv_len, fp8, q_rows, hq, hkv, bs, copy_gbs, warmup, reps, gen, window=0):
    d = 128
    scale = 1.0 / math.sqrt(d)
    esize = 1 if fp8 else 2
    seen = min(kv_len, window + q_rows - 1) if window else kv_len  # keys some row can see
    kv_bytes = seen * hkv * d * 2 * esize
    cache_bytes = kv_len * hkv * d * 2 * esize
    copies = 1 if cache_bytes > 2 * L2_BYTES else math.ceil(2 * L2_BYTES / cache_bytes)
    nb = -(-kv_len // bs)
    q = torch.randn(q_rows, hq, d, generator=gen).to(torch.bfloat16).to(DEV)
    sets = []
    for _ in range(copies):
        K = torch.randn(nb * bs, hkv, d, generator=gen).to(DEV)
        V = torch.randn(nb * bs, hkv, d, generator=gen).to(DEV)
        perm = torch.randperm(nb, generator=gen).to(DEV)
        sets.append((paged(K, perm, bs, fp8), paged(V, perm, bs, fp8), perm.to(torch.int32)))
    ks = torch.full((1,), 0.01, device=DEV)
    vs = torch.full((1,), 0.01, device=DEV)
    out = torch.empty_like(q)
    kind = "fp8" if fp8 else "bf16"
    shape = dict(q_rows=q_rows, kv_len=kv_len, q_offset=kv_len - q_rows, num_q_heads=hq,
                 num_kv_heads=hkv, block_size=bs, causal=0, window=window)
    common = dict(shape, scale=scale)
    # The split member's plan: whether it applies, and its workspace and counters' sizes.
    split_plan = getattr(attn_dflash, f"prefill_attn_dflash_{kind}_split").plan(**shape)
    ws = torch.empty(split_plan["sizes"]["workspace"], device=DEV)
    cnt = torch.zeros(split_plan["sizes"]["counters"], dtype=torch.int32, device=DEV)

    def runner(name, split_args):
        fn = getattr(attn_dflash, name)

        def run(kc, vc, bt):
            extra = dict(k_scale=ks, v_scale=vs) if fp8 else {}
            sa = dict(workspace=ws, counters=cnt) if split_args else {}
            launched(fn(q=q, k_cache=kc, v_cache=vc, **extra, out=out, block_table=bt, **common, **sa))
        return run

    runs = {"unsplit": runner(f"prefill_attn_dflash_{kind}_unsplit", False),
            "chain": runner(f"prefill_attn_dflash_{kind}", True)}
    if split_plan["code"] == 0:
        runs["split"] = runner(f"prefill_attn_dflash_{kind}_split", True)

    # torch SDPA on contiguous copies of the same values (one set; heads expanded beforehand)
    kc0, vc0, bt0 = sets[0]
    idx = torch.arange(kv_len, device=DEV)
    rows = bt0.long()[idx // bs] * bs + idx % bs

    def contiguous(c, s):
        flat = c.view(torch.uint8).view(-1, hkv, d)[rows] if fp8 else c.view(-1, hkv, d)[rows]
        v = flat.view(torch.float8_e4m3fn).float() * s if fp8 else flat
        return v.to(torch.bfloat16).repeat_interleave(hq // hkv, dim=1).transpose(0, 1).unsqueeze(0)
    kt, vt = contiguous(kc0, 0.01), contiguous(vc0, 0.01)
    qt = q.transpose(0, 1).unsqueeze(0)
    sdpa_sets = [(kt, vt)]
    mask = None
    if window:  # key k visible to row i (position kv_len - q_rows + i) when k > position - window
        pos = torch.arange(kv_len - q_rows, kv_len, device=DEV)[:, None]
        mask = idx[None, :] > pos - window
    res = {"kv_len": kv_len, "dtype": kind, "window": window, "kv_bytes": kv_bytes, "cache_copies": copies,
           "ms": {}, "gb_s": {}, "fraction_of_copy": {}}
    for name, fn in runs.items():
        ms = median_ms(fn, sets, warmup=warmup, reps=reps, sleep_cycles=1_000_000)
        res["ms"][name] = ms
        res["gb_s"][name] = kv_bytes / ms / 1e6
        res["fraction_of_copy"][name] = kv_bytes / ms / 1e6 / copy_gbs
    ms = median_ms(lambda k, v: F.scaled_dot_product_attention(qt, k, v, attn_mask=mask, scale=scale), sdpa_sets,
                   warmup=warmup, reps=reps, sleep_cycles=1_000_000)
    res["ms"]["torch_sdpa"] = ms
    # SDPA reads expanded bf16 K / V (hq heads), not comparable bytes: report time only
    res["speedup_chain_vs_sdpa"] = ms / res["ms"]["chain"]
    # accuracy check against SDPA on the same values
    runs["chain"](*sets[0])
    ref = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, scale=scale)[0].transpose(0, 1)
    torch.cuda.synchronize()
    res["max_abs_diff_vs_sdpa"] = float((out.float() - ref.float()).abs().max().item())
    res["chain_member"] = getattr(attn_dflash, f"prefill_attn_dflash_{kind}").plan(**{
        k: v for k, v in common.items() if k != "scale"})["kernel"]
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="path of the JSON results")
    ap.add_argument("--lengths", type=int, nargs="+", default=[1024, 8192, 32768])
    ap.add_argument("--windows", type=int, nargs="*", default=[2048],
                    help="sliding windows, each timed at the lengths above it")
    ap.add_argument("--q-rows", type=int, default=16)
    ap.add_argument("--hq", type=int, default=32)
    ap.add_argument("--hkv", type=int, default=8)
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    gen = torch.Generator().manual_seed(args.seed)
    copy_gbs = copy_gb_s(2 << 30)
    print(f"device: {torch.cuda.get_device_name()}  copy {copy_gbs:.0f} GB/s (read + write)")
    print(f"q_rows={args.q_rows} hq={args.hq} hkv={args.hkv} d=128 block {args.block_size}, non-causal")
    results = []
    print(f"{'dtype':5} {'kv_len':>7} {'window':>6} {'kernel':8} {'us':>8} {'GB/s':>7} {'% copy':>7}   "
          "sdpa us  chain/sdpa")
    cases = [(L, 0) for L in args.lengths] + [(L, w) for w in args.windows for L in args.lengths if L > w]
    for fp8 in (False, True):
        for L, w in cases:
            r = bench_case(L, fp8, args.q_rows, args.hq, args.hkv, args.block_size, copy_gbs,
                           args.warmup, args.reps, gen, window=w)
            results.append(r)
            for name in r["gb_s"]:
                print(f"{r['dtype']:5} {L:7d} {w:6d} {name:8} {r['ms'][name] * 1e3:8.1f} {r['gb_s'][name]:7.0f} "
                      f"{100 * r['fraction_of_copy'][name]:6.1f}%   {r['ms']['torch_sdpa'] * 1e3:7.1f}  "
                      f"{r['speedup_chain_vs_sdpa']:6.2f}x", flush=True)
    by = {(r["dtype"], r["kv_len"]): r for r in results if not r["window"]}
    for L in args.lengths:
        if ("bf16", L) in by and ("fp8", L) in by:
            sp = by[("bf16", L)]["ms"]["chain"] / by[("fp8", L)]["ms"]["chain"]
            print(f"fp8 speed-up over bf16 at kv_len {L}: {sp:.2f}x")
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "copy_gb_s": copy_gbs,
                   "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
