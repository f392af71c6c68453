#!/usr/bin/env python3
"""The drafter's linear layers (dense_linear, w4a16_gemm) against cuBLAS bf16 (torch's F.linear),
side by side in one run.

Shapes (n x k) of a Qwen3-8B-sized drafter: qkv 6144x4096, o 4096x4096, gate/up 24576x4096,
down 4096x12288, lm_head 151936x4096, at m = 1, 2, 4, 8, 16, 64, 256, 2048 rows. Weights are
cold: each case cycles through enough copies of its weights to total at least four times the L2
(one copy where it alone is larger). For each kernel: median CUDA-event time (a GPU sleep is
queued before each timed call, so host launch cost stays out), TB/s on the bytes that must be
read and written (weights once, x once, out once; for NVFP4 the packed codes and the scale
bytes), TFLOP/s (2 m n k), that bandwidth as a fraction of the device's copy bandwidth (measured
in the same run) and the speed-up over cuBLAS bf16 on the same m, n, k.

Kernels: dense_gemv_rt1 (hopper, where it applies) and dense_gemv (m <= 16), dense_gemm,
dense_gemm_pipelined, dense_gemm_tma (hopper, m >= 65), w4a16 (w4a16_gemv_rt1_128 / rt1 / rt2 on
hopper where they apply and w4a16_gemv for m <= 16, w4a16_gemm above). Per shape also the read
floor (kernel "read_floor", m = 0): one launch of a plain streaming-read kernel over the bf16
weight bytes, timed the same way (cuda_timing.stream_read_ms, with cupy).

--quick (a tuning run, under a minute): only the GEMV kernels (dense_gemv_rt1, dense_gemv,
w4a16_gemv_rt1_128 / rt1 / rt2, w4a16_gemv) and cuBLAS, at m = 1, 8, 16, on every shape, with
fewer repetitions.

Usage: python3 benchmarks/bench_dense_linear.py --out results.json [--quick]
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F
from cuda_timing import cold_copies, copy_gb_s, launched, median_ms, stream_read_ms
from kernelgen_ops import dense_linear, w4a16_gemm

DEV = "cuda"
BF16 = torch.bfloat16
SHAPES = [("qkv", 6144, 4096), ("o", 4096, 4096), ("gate_up", 24576, 4096), ("down", 4096, 12288),
          ("lm_head", 151936, 4096)]
ROWS = [1, 2, 4, 8, 16, 64, 256, 2048]
QUICK_ROWS = [1, 8, 16]
SLEEP = 100_000  # GPU cycles queued before each timed call


def fp4_weights(n, k):
    wq = torch.randint(0, 256, (n, k // 2), device=DEV, dtype=torch.int32).to(torch.uint8)
    ws = torch.randint(0x20, 0x48, (n, k // 16), device=DEV, dtype=torch.int32).to(torch.uint8)
    return wq, ws.view(torch.float8_e4m3fn)  # E2M1 pairs as uint8 storage; E4M3 scale bytes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true",
                    help="GEMV kernels only (dense_gemv, w4a16_gemv vs cuBLAS) at m = 1, 8, 16; fewer repetitions")
    args = ap.parse_args()
    reps = 10 if args.quick else 25
    row_list = QUICK_ROWS if args.quick else ROWS
    torch.manual_seed(0)
    copy_tbs = copy_gb_s(2 << 30, 2) / 1e3  # TB/s, 1 GiB each way
    rows = []
    print(f"device-to-device copy: {copy_tbs:.2f} TB/s (read + write)")
    print(f"{'shape':8} {'m':>5} {'kernel':22} {'us':>9} {'TB/s':>6} {'TFLOP/s':>8} {'% copy':>7} {'vs cuBLAS':>9}")
    for name, n, k in SHAPES:
        wbytes = n * k * 2
        ws_bf16 = [(torch.randn(n, k, device=DEV, dtype=torch.float32) * 0.02).to(BF16)
                   for _ in range(cold_copies(wbytes))]
        qbytes = n * k // 2 + n * k // 16
        ws_fp4 = [fp4_weights(n, k) for _ in range(cold_copies(qbytes))]
        floor_ms = stream_read_ms(ws_bf16, lambda fn, sets: median_ms(fn, sets, reps=reps, sleep_cycles=SLEEP))
        if floor_ms:  # one launch of a plain streaming-read kernel over the bf16 weight bytes
            r = {"shape": name, "n": n, "k": k, "m": 0, "kernel": "read_floor", "bytes": wbytes,
                 "us": floor_ms * 1e3, "tb_s": wbytes / floor_ms / 1e9, "tflop_s": 0.0,
                 "fraction_of_copy": wbytes / floor_ms / 1e9 / copy_tbs, "speedup_vs_cublas": None,
                 "weight_copies": len(ws_bf16)}
            rows.append(r)
            print(f"{name:8} {'':5} {'read floor (bf16 w)':22} {r['us']:9.2f} {r['tb_s']:6.2f} {'':8} "
                  f"{100 * r['fraction_of_copy']:6.1f}%", flush=True)
        for m in row_list:
            x = torch.randn(m, k, device=DEV, dtype=torch.float32).to(BF16)
            out = torch.empty(m, n, device=DEV, dtype=BF16)
            io = m * k * 2 + m * n * 2
            flops = 2.0 * m * n * k
            sets = [(w,) for w in ws_bf16]
            cublas_ms = median_ms(lambda w: F.linear(x, w), sets, reps=reps, sleep_cycles=SLEEP)
            cases = []
            if m <= 16:
                if dense_linear.plan_dense_gemv_rt1(m=m, n=n, k=k)["launched"]:  # hopper; the chain's first
                    cases.append(("dense_gemv_rt1", wbytes + io, sets,
                                  lambda w: launched(dense_linear.dense_gemv_rt1(x, w, out, m, n, k))))
                cases.append(("dense_gemv", wbytes + io, sets,
                              lambda w: launched(dense_linear.dense_gemv(x, w, out, m, n, k))))
            if not args.quick:
                cases.append(("dense_gemm", wbytes + io, sets,
                              lambda w: launched(dense_linear.dense_gemm(x, w, out, m, n, k))))
                cases.append(("dense_gemm_pipelined", wbytes + io, sets,
                              lambda w: launched(dense_linear.dense_gemm_pipelined(x, w, out, m, n, k))))
                if dense_linear.plan_dense_gemm_tma(m=m, n=n, k=k)["launched"]:  # hopper, m >= 65
                    cases.append(("dense_gemm_tma", wbytes + io, sets,
                                  lambda w: launched(dense_linear.dense_gemm_tma(x, w, out, m, n, k))))
            # hopper builds; rt1 for many row tiles, rt1_128 for 9-16 rows over very many
            for rt in ("w4a16_gemv_rt1_128", "w4a16_gemv_rt1", "w4a16_gemv_rt2"):
                fn = getattr(w4a16_gemm, rt)
                if m <= 16 and getattr(w4a16_gemm, f"plan_{rt}")(m=m, n=n, k=k)["launched"]:
                    cases.append((rt, qbytes + io, ws_fp4,
                                  lambda q, s, fn=fn: launched(fn(x, q, s, 0.01, out, m, n, k))))
            fn4 = w4a16_gemm.w4a16_gemv if m <= 16 else w4a16_gemm.w4a16_gemm
            cases.append(("w4a16_gemv" if m <= 16 else "w4a16_gemm", qbytes + io, ws_fp4,
                          lambda q, s, fn4=fn4: launched(fn4(x, q, s, 0.01, out, m, n, k))))
            entries = [("cublas_bf16", wbytes + io, cublas_ms)]
            for kname, nbytes, ksets, fn in cases:
                entries.append((kname, nbytes, median_ms(fn, ksets, reps=reps, sleep_cycles=SLEEP)))
            for kname, nbytes, ms in entries:
                r = {
                    "shape": name, "n": n, "k": k, "m": m, "kernel": kname, "bytes": nbytes,
                    "us": ms * 1e3, "tb_s": nbytes / ms / 1e9, "tflop_s": flops / ms / 1e9,
                    "fraction_of_copy": nbytes / ms / 1e9 / copy_tbs,
                    "speedup_vs_cublas": cublas_ms / ms,
                    "weight_copies": len(ws_fp4) if kname.startswith("w4a16") else len(ws_bf16),
                }
                plan = getattr(dense_linear, f"plan_{kname}", None)
                if plan is not None:  # the launch the kernel's plan made (its tile shape and K split)
                    r["grid"] = list(plan(m=m, n=n, k=k)["grid"])
                rows.append(r)
                print(f"{name:8} {m:5d} {kname:22} {r['us']:9.2f} {r['tb_s']:6.2f} {r['tflop_s']:8.1f} "
                      f"{100 * r['fraction_of_copy']:6.1f}% {r['speedup_vs_cublas']:8.2f}x", flush=True)
        del ws_bf16, ws_fp4
        torch.cuda.empty_cache()
        # written after every shape, so that a cut-short run keeps what it measured
        result = {"device": torch.cuda.get_device_name(), "copy_tb_s": copy_tbs, "quick": args.quick, "rows": rows}
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
