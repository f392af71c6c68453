#!/usr/bin/env python3
"""The drafter's FP8-weight linear layers on a Qwen3-8B drafter's shapes, side by side with torch
in one run.

For each weight shape (N x K) and row count M (1-16; 32, 48 and 64: batches of two to four 16-row
blocks; 256 and 2048): every kernel that accepts M (the GEMVs fp8_gemv_tma (hopper) and the
register-tiled rt2 / rt2_16 and (hopper) rt2_32 / rt2_64 with their whole-K forms rt1* (and
rt1_64_128), the plain GEMV, the m16 and n128 tile GEMMs,
fp8_gemm_tma (hopper), and the engine's chain), torch's row-wise scaled FP8 GEMM
(`torch._scaled_mm` with FP8 activations, scales [M, 1] and [1, N], activation quantization not
timed), cuBLAS BF16 (`F.linear` on the BF16 weight), and the read floor: one launch of a plain
streaming-read kernel over the FP8 weight (the faster of a grid-stride and a one-shot kernel,
compiled with cupy), timed the same way. Reported:
median time (CUDA events, the host launch kept out by a GPU sleep queued before each run), TB/s
on the bytes that must be read (weight, scales, x), the weight bytes' rate as a fraction of the
device-to-device copy bandwidth measured in the same run, TFLOP/s, and each peer's time over the
kernel's. Weights are cold: each case rotates over enough copies of its weight to total at least
four times the L2 (one copy where it alone exceeds that). Also quantize_bf16_to_fp8 at 4096 x 4096
against torch's row-wise quantization.

Usage: python3 benchmarks/bench_fp8_linear.py --out results.json [--quick] [--rows M ...]
       [--shapes NAME ...]

--quick (a tuning run, under a minute): only the GEMVs (rt2, rt2_16, fp8_gemv_tma) at M in
{1, 8, 16} on every shape, and the quantization; no torch peers, no other kernels.
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F
from cuda_timing import cold_copies, copy_gb_s, launched, median_ms, stream_read_ms
from kernelgen_ops import fp8_gemv_rt, fp8_linear

DEV = "cuda"
BF16 = torch.bfloat16
E4M3 = torch.float8_e4m3fn

SLEEP = 200_000     # GPU cycles queued before each timed run

SHAPES = {  # name: (N, K)
    "qkv": (6144, 4096),
    "o": (4096, 4096),
    "gate_up": (24576, 4096),
    "down": (4096, 12288),
    "lm_head": (151936, 4096),
    "delta": (512, 4096),  # the DFlash2 convolution's delta projection (2 x hidden / 16 outputs)
}
ROWS = [1, 2, 4, 8, 16, 32, 48, 64, 256, 2048]
QUICK_ROWS = [1, 8, 16]


def time_ms(fn, sets):
    return median_ms(fn, sets, warmup=3, reps=25, sleep_cycles=SLEEP)


def ours(rows, quick=False):
    """(name, launcher) of every kernel that accepts `rows` (K % 16 == 0 here); with `quick`, the
    GEMVs only."""
    tma = [("fp8_gemv_tma", fp8_gemv_rt.fp8_gemv_tma)] \
        if rows <= 16 and fp8_gemv_rt.plan_fp8_gemv_tma(rows=rows, n=4096, k=4096)["launched"] else []  # hopper
    if quick:
        return ([("fp8_gemv_rt2", fp8_gemv_rt.fp8_gemv_rt2)] if rows <= 8 else []) + \
               ([("fp8_gemv_rt2_16", fp8_gemv_rt.fp8_gemv_rt2_16)] if rows <= 16 else []) + tma
    out = list(tma)
    if rows <= 8:
        out += [("fp8_gemv_rt2", fp8_gemv_rt.fp8_gemv_rt2), ("fp8_gemv_rt1", fp8_gemv_rt.fp8_gemv_rt1),
                ("dense_gemv_fp8w", fp8_linear.dense_gemv_fp8w)]
    if rows <= 16:
        out += [("fp8_gemv_rt2_16", fp8_gemv_rt.fp8_gemv_rt2_16), ("fp8_gemv_rt1_16", fp8_gemv_rt.fp8_gemv_rt1_16),
                ("fp8_gemm_n128_row_scaled_m16", fp8_linear.fp8_gemm_n128_row_scaled_m16)]
    if rows <= 32:  # hopper (elsewhere absent: their plans skip them below)
        out += [("fp8_gemv_rt2_32", fp8_gemv_rt.fp8_gemv_rt2_32), ("fp8_gemv_rt1_32", fp8_gemv_rt.fp8_gemv_rt1_32)]
    if rows <= 64:  # hopper
        out += [("fp8_gemv_rt2_64", fp8_gemv_rt.fp8_gemv_rt2_64), ("fp8_gemv_rt1_64", fp8_gemv_rt.fp8_gemv_rt1_64),
                ("fp8_gemv_rt1_64_128", fp8_gemv_rt.fp8_gemv_rt1_64_128)]
    out += [("fp8_gemm_n128_row_scaled", fp8_linear.fp8_gemm_n128_row_scaled)]
    if fp8_linear.plan_fp8_gemm_tma(rows=rows, n=4096, k=4096)["launched"]:  # hopper, rows >= 65
        out += [("fp8_gemm_tma", fp8_linear.fp8_gemm_tma)]
    return out + [("chain", fp8_linear.fp8_linear)]


def bench_shape(name, n, k, rows_list, copy_tbs, quick=False):
    wbytes = n * k
    nq = cold_copies(wbytes)
    qs = [torch.randint(0, 0x7f, (n, k), device=DEV, dtype=torch.uint8).view(E4M3) for _ in range(nq)]  # finite codes
    scales = [torch.rand(n, device=DEV) * 1e-3 + 1e-3 for _ in range(nq)]
    nb = 0 if quick else cold_copies(2 * wbytes)
    wb = [(torch.randn(n, k, device=DEV, dtype=BF16) * 0.02) for _ in range(nb)]
    floor_ms = stream_read_ms(qs, time_ms)
    if floor_ms:
        print(f"{name:8} read floor: {1e3 * floor_ms:.1f} us for the {wbytes / 1e6:.1f} MB weight "
              f"({wbytes / floor_ms / 1e9 / copy_tbs:.0%} of copy)")
    results = []
    for rows in rows_list:
        x = torch.randn(rows, k, device=DEV, dtype=BF16)
        out = torch.empty(rows, n, device=DEV, dtype=BF16)
        read = wbytes + 4 * n + 2 * rows * k
        flops = 2.0 * rows * n * k
        sets = [(q, s) for q, s in zip(qs, scales)]
        row = {"shape": name, "n": n, "k": k, "rows": rows, "weight_copies": nq, "kernels": {},
               "read_floor_ms": floor_ms}
        for kname, fn in ours(rows, quick):
            if not fn.plan(rows=rows, n=n, k=k)["launched"]:
                continue  # a kernel that does not take this shape (the whole-K GEMVs: few row tiles)
            ms = time_ms(lambda q, s, fn=fn: launched(fn(x, q, s, out, rows, n, k)), sets)
            entry = {"ms": ms, "tb_s": read / ms / 1e9, "weight_fraction_of_copy": wbytes / ms / 1e9 / copy_tbs,
                     "tflop_s": flops / ms / 1e9, "of_read_floor": floor_ms / ms if floor_ms else None}
            if kname == "fp8_gemm_tma":  # the launch its plan made (tile height and K split)
                entry["grid"] = list(fp8_linear.plan_fp8_gemm_tma(rows=rows, n=n, k=k)["grid"])
            if kname == "chain":
                entry["ran"] = fp8_linear.fp8_linear(x, qs[0], scales[0], out, rows, n, k).kernel
            row["kernels"][kname] = entry
        if quick:
            row["scaled_mm_ms"] = row["cublas_bf16_ms"] = None
            results.append(row)
            print_row(row)
            continue
        # torch peers
        a8 = x.float().clamp(-448, 448).to(E4M3)
        sa = torch.ones(rows, 1, device=DEV)
        try:
            sm_ms = time_ms(lambda q, s: torch._scaled_mm(a8, q.t(), scale_a=sa, scale_b=s.view(1, n),
                                                          out_dtype=BF16), sets)
        except (RuntimeError, TypeError) as e:  # shapes or versions torch does not take
            sm_ms, row["scaled_mm_error"] = None, str(e).splitlines()[0][:200]
        bf_ms = time_ms(lambda w: F.linear(x, w), [(w,) for w in wb])
        row["scaled_mm_ms"] = sm_ms
        row["cublas_bf16_ms"] = bf_ms
        row["cublas_bf16_tflop_s"] = flops / bf_ms / 1e9
        row["cublas_bf16_tb_s"] = (2 * wbytes + 2 * rows * k) / bf_ms / 1e9
        for e in row["kernels"].values():
            e["vs_scaled_mm"] = (sm_ms / e["ms"]) if sm_ms else None
            e["vs_cublas_bf16"] = bf_ms / e["ms"]
        results.append(row)
        print_row(row)
    del qs, wb
    torch.cuda.empty_cache()
    return results


def print_row(r):
    if r["cublas_bf16_ms"] is None:  # --quick: no peers
        print(f"{r['shape']:8} M={r['rows']:<5} (N {r['n']}, K {r['k']})")
    else:
        sm = f"{1e3 * r['scaled_mm_ms']:9.1f}" if r["scaled_mm_ms"] else f"{'n/a':>9}"
        print(f"{r['shape']:8} M={r['rows']:<5} scaled_mm {sm} us   cuBLAS bf16 {1e3 * r['cublas_bf16_ms']:9.1f} us "
              f"({r['cublas_bf16_tflop_s']:.1f} TFLOP/s)")
    for kname, e in r["kernels"].items():
        vs = f"{e['vs_scaled_mm']:6.2f}x" if e.get("vs_scaled_mm") else f"{'n/a':>7}"
        bf = f"{e['vs_cublas_bf16']:6.2f}x" if e.get("vs_cublas_bf16") else f"{'n/a':>7}"
        ran = f"  [{e['ran']}]" if "ran" in e else ""
        print(f"    {kname:30} {1e3 * e['ms']:9.1f} us {e['tb_s']:6.2f} TB/s "
              f"{100 * e['weight_fraction_of_copy']:6.1f}% copy "
              f"{100 * (e.get('of_read_floor') or 0):5.0f}% floor "
              f"{e['tflop_s']:7.1f} TFLOP/s  vs scaled_mm {vs}  vs bf16 {bf}{ran}")


def bench_quantize(copy_tbs, n=4096, k=4096, quick=False):
    sets = []
    for _ in range(cold_copies(3 * n * k)):
        sets.append((torch.randn(n, k, device=DEV, dtype=BF16), torch.empty(n, k, device=DEV, dtype=E4M3),
                     torch.empty(n, device=DEV)))
    ms = time_ms(lambda w, q, s: launched(fp8_linear.quantize_bf16_to_fp8(w, q, s, n, k)), sets)

    def torch_quant(w, q, s):
        amax = w.abs().amax(dim=1).float()
        sc = torch.where(amax == 0, torch.ones_like(amax), amax / torch.full_like(amax, 448.0))
        return (w.float() / sc[:, None]).to(E4M3), sc

    tms = None if quick else time_ms(torch_quant, sets)
    # The same traffic without the arithmetic: torch's elementwise bf16 -> E4M3 cast (no scale)
    # reads the 2 bytes and writes the 1 byte of every element, one pass, like the quantizer.
    cast_ms = time_ms(lambda w, q, s: q.copy_(w), sets)
    nbytes = n * k * 2 + n * k + 4 * n
    # A plain copy moving the same bytes (half read, half written), timed the same way: what one
    # launch of this size reaches, ramp and tail included.
    same_tbs = copy_gb_s(nbytes, rotate=cold_copies(nbytes, minimum=4), sleep_cycles=SLEEP) / 1e3
    r = {"n": n, "k": k, "bytes": nbytes, "ms": ms, "tb_s": nbytes / ms / 1e9,
         "fraction_of_copy": nbytes / ms / 1e9 / copy_tbs, "torch_ms": tms,
         "speedup_vs_torch": tms / ms if tms else None, "cast_ms": cast_ms,
         "cast_fraction_of_copy": nbytes / cast_ms / 1e9 / copy_tbs,
         "same_size_copy_tb_s": same_tbs, "same_size_copy_fraction_of_copy": same_tbs / copy_tbs}
    peer = f"; torch {1e3 * tms:.1f} us ({r['speedup_vs_torch']:.2f}x)" if tms else ""
    print(f"quantize {n}x{k}: {1e3 * ms:.1f} us, {r['tb_s']:.2f} TB/s = {100 * r['fraction_of_copy']:.1f}% of copy"
          f"{peer}; the same traffic as a plain cast: {1e3 * cast_ms:.1f} us = "
          f"{100 * r['cast_fraction_of_copy']:.1f}% of copy; a same-size copy: "
          f"{100 * r['same_size_copy_fraction_of_copy']:.1f}% of copy")
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true",
                    help="the GEMVs at M in {1, 8, 16} and the quantization only, no torch peers")
    ap.add_argument("--rows", type=int, nargs="+", help=f"row counts M (default {ROWS})")
    ap.add_argument("--shapes", nargs="+", choices=list(SHAPES), help="weight shapes (default: all)")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    copy_tbs = copy_gb_s(2 << 30) / 1e3  # TB/s
    print(f"device-to-device copy: {copy_tbs:.2f} TB/s (read + write); {torch.cuda.get_device_name()}")
    rows_list = args.rows or (QUICK_ROWS if args.quick else ROWS)
    result = {"device": torch.cuda.get_device_name(), "copy_tb_s": copy_tbs, "quick": args.quick,
              "quantize": bench_quantize(copy_tbs, quick=args.quick), "linear": []}
    for name, (n, k) in SHAPES.items():
        if args.shapes and name not in args.shapes:
            continue
        result["linear"] += bench_shape(name, n, k, rows_list, copy_tbs, quick=args.quick)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
