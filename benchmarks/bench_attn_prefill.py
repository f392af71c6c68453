#!/usr/bin/env python3
"""Side-by-side timing of the prefill attention kernels on one GPU.

For q_len (= kv_len) in 512, 4096, 16384 with hq = 16, hkv = 4, head_dim = 256, causal, it
times through the generated bindings (kernelgen_ops):

  attn_prefill.attn_prefill_64            64-row kernel, contiguous q/k/v
  attn_prefill_fa128.attn_prefill_fa128   128-row twin, contiguous
  attn_prefill.attn_prefill_paged_64      64-row kernel, paged KV cache (block size 64, shuffled)
  attn_prefill_fa128.attn_prefill_fa128_paged   128-row twin, paged

and torch.nn.functional.scaled_dot_product_attention restricted to the flash backend (K/V heads
expanded to hq beforehand, outside the timing). Each timing is the median of --reps launches,
each measured with CUDA events after --warmup launches; a long torch.cuda._sleep is queued
before each timed launch so that the host-side launch cost stays out of the measurement.
Causal FLOPs = 2 * 2 * hq * L^2 * d / 2. It also counts differing bf16 values between each twin
and its 64-row kernel (expected 0).

Grid fill: a twin CTA covers 128 query rows, so at short prompts its grid can have fewer CTAs than
the GPU has SMs (at L 512, hq 16: 64 CTAs, where the 64-row kernel has 128). The contiguous pair
is also timed at --fill-length for each batch of --fill-batches, to show the speed-up once the
twins' grid fills the GPU.

--sms N runs everything on N SMs of the GPU (a CUDA green context; 48 is GB10's SM count) and
records how many SMs a probe grid actually reached. Such a run shows the effect of GB10's SM
count only: not its memory bandwidth (about 273 GB/s of LPDDR5x against the H200's 4.8 TB/s of
HBM3e) nor its sm_121a code path (no warpgroup MMAs: the twins take their mma.sync path there).

Usage: python3 benchmarks/bench_attn_prefill.py --out results.json [--lengths 512 4096 16384] [--sms 48]
"""

import argparse
import json
import math

import torch
import torch.nn.functional as F
from cuda_timing import launched, median_ms, sm_limited, sms_used
from kernelgen_ops import attn_prefill, attn_prefill_fa128
from torch.nn.attention import SDPBackend, sdpa_kernel

STREAM = 0  # the stream launchers are given (a green context's under --sms)

# The contiguous pair (64-row kernel and twin); both take the same arguments.
CONTIGUOUS = {"attn_prefill_64": attn_prefill.attn_prefill_64,
              "attn_prefill_fa128": attn_prefill_fa128.attn_prefill_fa128}


def contiguous_runs(q, k, v, outs, inv_sqrt_d, **shape):
    """Launch closures of the contiguous pair (causal, no window), each writing outs[name];
    shape: seq_len, num_q_heads, num_kv_heads, head_dim, batch."""
    def run(launcher, out):
        return lambda: launched(launcher(q=q, k=k, v=v, output=out, inv_sqrt_d=inv_sqrt_d,
                                         causal=1, sliding_window=0, stream=STREAM, **shape))
    return {name: run(launcher, outs[name]) for name, launcher in CONTIGUOUS.items()}


def bit_diffs(a, b):
    """Number of differing bf16 values."""
    return int((a.view(torch.int16) != b.view(torch.int16)).sum().item())


def bench_length(L, hq, hkv, d, cbs, warmup, reps, gen):
    scale = 1.0 / math.sqrt(d)
    dev = "cuda"

    def rnd(*shape):
        return torch.randn(*shape, generator=gen).to(torch.bfloat16).to(dev)

    q = rnd(1, L, hq, d)
    k = rnd(1, L, hkv, d)
    v = rnd(1, L, hkv, d)
    # paged copy of k / v with a shuffled block table
    nb = (L + cbs - 1) // cbs
    perm = torch.randperm(nb, generator=gen)
    kc = torch.zeros(nb, cbs, hkv, d, dtype=torch.bfloat16, device=dev)
    vc = torch.zeros_like(kc)
    pad = nb * cbs - L
    kc[perm.to(dev)] = torch.cat([k[0], k.new_zeros(pad, hkv, d)]).view(nb, cbs, hkv, d)
    vc[perm.to(dev)] = torch.cat([v[0], v.new_zeros(pad, hkv, d)]).view(nb, cbs, hkv, d)
    bt = perm.to(torch.int32).to(dev)

    outs = {name: torch.empty_like(q) for name in
            (*CONTIGUOUS, "attn_prefill_paged_64", "attn_prefill_fa128_paged")}
    q0 = q[0]

    runs = contiguous_runs(q, k, v, outs, scale, seq_len=L, num_q_heads=hq, num_kv_heads=hkv,
                           head_dim=d, batch=1)
    runs["attn_prefill_paged_64"] = lambda: launched(attn_prefill.attn_prefill_paged_64(
        q0, kc, vc, outs["attn_prefill_paged_64"][0], bt, L, L, 0, hq, hkv, cbs, 1, 0, scale,
        head_dim=d, stream=STREAM))
    runs["attn_prefill_fa128_paged"] = lambda: launched(attn_prefill_fa128.attn_prefill_fa128_paged(
        q0, kc, vc, outs["attn_prefill_fa128_paged"][0], bt, L, L, 0, hq, hkv, cbs, scale,
        head_dim=d, causal=1, sliding_window=0, stream=STREAM))
    qt = q.transpose(1, 2)
    kt = k.repeat_interleave(hq // hkv, dim=2).transpose(1, 2)
    vt = v.repeat_interleave(hq // hkv, dim=2).transpose(1, 2)

    def sdpa():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=True, scale=scale)

    runs["torch_sdpa_flash"] = sdpa

    flops = 2.0 * 2.0 * hq * L * L * d / 2.0
    result = {"L": L, "hq": hq, "hkv": hkv, "head_dim": d, "cache_block_size": cbs,
              "flops": flops, "ms": {}, "tflops": {}}
    for name, fn in runs.items():
        ms = median_ms(fn, warmup=warmup, reps=reps, sleep_cycles=1_000_000)
        result["ms"][name] = ms
        result["tflops"][name] = flops / (ms * 1e-3) / 1e12
    torch.cuda.synchronize()

    result["bit_diffs"] = {
        "contiguous": bit_diffs(outs["attn_prefill_fa128"], outs["attn_prefill_64"]),
        "paged": bit_diffs(outs["attn_prefill_fa128_paged"], outs["attn_prefill_paged_64"])}
    ref = sdpa().transpose(1, 2)
    result["max_abs_diff_vs_sdpa"] = float(
        (outs["attn_prefill_fa128"].float() - ref.float()).abs().max().item())
    ms = result["ms"]
    result["speedup_twin_vs_64"] = {
        "contiguous": ms["attn_prefill_64"] / ms["attn_prefill_fa128"],
        "paged": ms["attn_prefill_paged_64"] / ms["attn_prefill_fa128_paged"],
    }
    return result


def bench_fill(L, batches, hq, hkv, d, warmup, reps, gen):
    """The contiguous pair at one length for several batch sizes (CTA counts grow with batch)."""
    rows = []
    for b in batches:
        q, k, v = (torch.randn(b, L, h, d, generator=gen).to(torch.bfloat16).to("cuda")
                   for h in (hq, hkv, hkv))
        outs = {name: torch.empty_like(q) for name in CONTIGUOUS}
        shape = {"seq_len": L, "num_q_heads": hq, "num_kv_heads": hkv, "head_dim": d, "batch": b}
        runs = contiguous_runs(q, k, v, outs, 1.0 / math.sqrt(d), **shape)
        ms = {name: median_ms(fn, warmup=warmup, reps=reps, sleep_cycles=1_000_000)
              for name, fn in runs.items()}
        torch.cuda.synchronize()
        rows.append({
            "L": L, "batch": b,
            "ctas": {name: math.prod(launcher.plan(causal=1, sliding_window=0, **shape)["grid"])
                     for name, launcher in CONTIGUOUS.items()},
            "ms": ms,
            "speedup_twin_vs_64": ms["attn_prefill_64"] / ms["attn_prefill_fa128"],
            "bit_diffs": bit_diffs(outs["attn_prefill_64"], outs["attn_prefill_fa128"]),
        })
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="path of the JSON results")
    ap.add_argument("--lengths", type=int, nargs="+", default=[512, 4096, 16384])
    ap.add_argument("--hq", type=int, default=16)
    ap.add_argument("--hkv", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=256)
    ap.add_argument("--cache-block-size", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fill-length", type=int, default=512)
    ap.add_argument("--fill-batches", type=int, nargs="*", default=[1, 2, 4])
    ap.add_argument("--sms", type=int, default=0, help="run on this many SMs (a green context); 0: all")
    args = ap.parse_args()
    with sm_limited(args.sms) as stream:
        global STREAM
        STREAM = stream
        run(args)


def run(args):

    gen = torch.Generator().manual_seed(args.seed)
    results = []
    for L in args.lengths:
        results.append(bench_length(L, args.hq, args.hkv, args.head_dim, args.cache_block_size,
                                    args.warmup, args.reps, gen))

    names = ["attn_prefill_64", "attn_prefill_fa128", "attn_prefill_paged_64",
             "attn_prefill_fa128_paged", "torch_sdpa_flash"]
    print(f"device: {torch.cuda.get_device_name()}  hq={args.hq} hkv={args.hkv} "
          f"d={args.head_dim} causal, paged block size {args.cache_block_size}")
    print(f"{'kernel':28s}" + "".join(f"{'L=' + str(r['L']):>22s}" for r in results))
    for n in names:
        cells = "".join(f"{r['ms'][n]:9.3f} ms {r['tflops'][n]:6.1f} TF" for r in results)
        print(f"{n:28s}{cells}")
    print(f"{'speedup twin/64 contiguous':28s}"
          + "".join(f"{r['speedup_twin_vs_64']['contiguous']:21.2f}x" for r in results))
    print(f"{'speedup twin/64 paged':28s}"
          + "".join(f"{r['speedup_twin_vs_64']['paged']:21.2f}x" for r in results))
    print(f"{'bit diffs twin vs 64 (c/p)':28s}"
          + "".join(f"{str(r['bit_diffs']['contiguous']) + '/' + str(r['bit_diffs']['paged']):>22s}"
                    for r in results))
    fill = bench_fill(args.fill_length, args.fill_batches, args.hq, args.hkv, args.head_dim,
                      args.warmup, args.reps, gen)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    reached = sms_used(STREAM)
    if args.sms:
        print(f"SM limit {args.sms} of {sms}: a probe grid ran on {reached} SMs")
        sms = args.sms
    print(f"grid fill, contiguous, L={args.fill_length} ({sms} SMs):")
    for r in fill:
        c, ms = r["ctas"], r["ms"]
        print(f"  batch {r['batch']}: 64-row {c['attn_prefill_64']} CTAs "
              f"{ms['attn_prefill_64'] * 1e3:.1f} us, twin {c['attn_prefill_fa128']} CTAs "
              f"{ms['attn_prefill_fa128'] * 1e3:.1f} us: {r['speedup_twin_vs_64']:.2f}x, "
              f"bit diffs {r['bit_diffs']}")
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "sms": sms, "sm_limit": args.sms,
                   "probe_sms": reached, "results": results, "grid_fill": fill}, f, indent=2)


if __name__ == "__main__":
    main()
