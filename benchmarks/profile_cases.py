#!/usr/bin/env python3
"""Launches for a profiler: one kernel of the catalog at a drafter shape, launched LAUNCHES times
through its generated launcher (the profiler skips the first ones, which load the module and
warm the caches), then synchronised. scripts/gpu_check.sh --ncu runs each case under Nsight
Compute (ncu) and keeps its report; the kernel-name pattern the profiler needs is printed by
--kernel.

Cases named cublas_* launch the peer instead (torch's F.linear at the same shape, cuBLAS bf16):
Nsight Compute's figures for both, taken the same way, side by side.

Usage: python3 benchmarks/profile_cases.py CASE          (launch it)
       python3 benchmarks/profile_cases.py CASE --kernel (print its kernel-name pattern)
       python3 benchmarks/profile_cases.py --list        (the cases)
"""

from __future__ import annotations

import argparse
import math
import sys

LAUNCHES = 3


def attn(kind: str, kv_len: int):
    """prefill_attn_dflash_{kind}_split: 16 query rows, hq 32, hkv 8, head_dim 128, paged cache
    (block 16, shuffled table), non-causal."""
    import torch
    from bench_attn_dflash import paged
    from cuda_timing import launched
    from kernelgen_ops import attn_dflash

    dev, fp8 = "cuda", kind == "fp8"
    q_rows, hq, hkv, bs, d = 16, 32, 8, 16, 128
    g = torch.Generator().manual_seed(0)
    nb = -(-kv_len // bs)
    q = torch.randn(q_rows, hq, d, generator=g).to(torch.bfloat16).to(dev)
    perm = torch.randperm(nb, generator=g).to(dev)
    kc, vc = (paged(torch.randn(nb * bs, hkv, d, generator=g).to(dev), perm, bs, fp8) for _ in range(2))
    shape = dict(q_rows=q_rows, kv_len=kv_len, q_offset=kv_len - q_rows, num_q_heads=hq, num_kv_heads=hkv,
                 block_size=bs, causal=0, window=0)
    fn = getattr(attn_dflash, f"prefill_attn_dflash_{kind}_split")
    sizes = fn.plan(**shape)["sizes"]
    ws = torch.empty(sizes["workspace"], device=dev)
    counters = torch.zeros(sizes["counters"], dtype=torch.int32, device=dev)
    extra = dict(k_scale=torch.full((1,), 0.01, device=dev), v_scale=torch.full((1,), 0.01, device=dev)) if fp8 else {}
    out = torch.empty_like(q)
    bt = perm.to(torch.int32)
    return lambda: launched(fn(q=q, k_cache=kc, v_cache=vc, **extra, out=out, block_table=bt, **shape,
                               scale=1 / math.sqrt(d), workspace=ws, counters=counters))


def bf16_operands(rows: int, n: int, k: int):
    """x [rows, k] and w [n, k] in bf16, as dense_gemm_tma and its cuBLAS peer take them."""
    import torch

    x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
    return x, w


def dense_tma(rows: int, n: int, k: int):
    """dense_gemm_tma (hopper): bf16 x [rows, k] times w [n, k]^T."""
    import torch
    from cuda_timing import launched
    from kernelgen_ops import dense_linear

    x, w = bf16_operands(rows, n, k)
    out = torch.empty(rows, n, device="cuda", dtype=torch.bfloat16)
    return lambda: launched(dense_linear.dense_gemm_tma(x, w, out, rows, n, k))


def fp8_operands(rows: int, n: int, k: int):
    """bf16 x [rows, k], E4M3 q [n, k] with an f32 scale per weight row, and the bf16 output
    [rows, n], as the FP8 GEMV and GEMM kernels take them."""
    import torch

    x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
    q = torch.randint(0, 0x7F, (n, k), device="cuda", dtype=torch.uint8).view(torch.float8_e4m3fn)
    s = torch.rand(n, device="cuda") * 1e-3 + 1e-3
    out = torch.empty(rows, n, device="cuda", dtype=torch.bfloat16)
    return x, q, s, out


def fp8_tma(rows: int, n: int, k: int):
    """fp8_gemm_tma (hopper): bf16 x [rows, k] times E4M3 q [n, k]^T with a scale per weight row."""
    from cuda_timing import launched
    from kernelgen_ops import fp8_linear

    x, q, s, out = fp8_operands(rows, n, k)
    return lambda: launched(fp8_linear.fp8_gemm_tma(x, q, s, out, rows, n, k))


def topk16(rows: int, vocab: int):
    """dflash2_topk16 over bf16 logits."""
    import torch
    from cuda_timing import launched
    from kernelgen_ops import dflash2

    logits = (torch.randn(rows, vocab, device="cuda") * 4.0).to(torch.bfloat16)
    ids = torch.empty(rows, 16, device="cuda", dtype=torch.int32)
    scores = torch.empty(rows, 16, device="cuda", dtype=torch.float32)
    return lambda: launched(dflash2.dflash2_topk16(logits, ids, scores, rows, vocab, 1.0, 30.0))


def fp8_gemv(rows: int, n: int, k: int, whole_k: bool = False):
    """A register-tiled FP8 GEMV: the split-K one (fp8_gemv_rt2 up to 8 rows, fp8_gemv_rt2_16 up
    to 16) or with `whole_k` the whole-K one (fp8_gemv_rt1 / rt1_16, which the fp8_linear chain
    takes for weights of more than SMs / 2 row tiles): bf16 x [rows, k] times E4M3 q [n, k]^T, a
    scale per weight row."""
    from cuda_timing import launched
    from kernelgen_ops import fp8_gemv_rt

    x, q, s, out = fp8_operands(rows, n, k)
    if whole_k:
        fn = fp8_gemv_rt.fp8_gemv_rt1 if rows <= 8 else fp8_gemv_rt.fp8_gemv_rt1_16
    else:
        fn = fp8_gemv_rt.fp8_gemv_rt2 if rows <= 8 else fp8_gemv_rt.fp8_gemv_rt2_16
    return lambda: launched(fn(x, q, s, out, rows, n, k))


def cublas(rows: int, n: int, k: int):
    """cuBLAS bf16 (torch's F.linear), the peer of the many-row GEMMs: x [rows, k] times w [n, k]^T."""
    import torch.nn.functional as F

    x, w = bf16_operands(rows, n, k)
    return lambda: F.linear(x, w)


# name: (kernel-name pattern for the profiler, setup returning the launch)
CASES = {
    "attn_bf16_32768": ("regex:dflash_attn_bf16_split", lambda: attn("bf16", 32768)),
    "attn_fp8_32768": ("regex:dflash_attn_fp8_split", lambda: attn("fp8", 32768)),
    "attn_fp8_8192": ("regex:dflash_attn_fp8_split", lambda: attn("fp8", 8192)),
    "dense_tma_qkv_256": ("regex:dense_gemm_tma", lambda: dense_tma(256, 6144, 4096)),
    "fp8_tma_qkv_256": ("regex:fp8_gemm_tma", lambda: fp8_tma(256, 6144, 4096)),
    "dense_tma_o_256": ("regex:dense_gemm_tma", lambda: dense_tma(256, 4096, 4096)),
    "fp8_tma_o_256": ("regex:fp8_gemm_tma", lambda: fp8_tma(256, 4096, 4096)),
    "topk16_bf16": ("regex:dflash2_topk16", lambda: topk16(16, 151936)),
    # the drafter's 16-row GEMVs beside the 1-row one on the same weight
    "fp8_gemv16_o": ("regex:dflash_fp8_gemv_rt2_16_kernel", lambda: fp8_gemv(16, 4096, 4096)),
    "fp8_gemv1_o": ("regex:dflash_fp8_gemv_rt2_kernel", lambda: fp8_gemv(1, 4096, 4096)),
    "fp8_gemv16_gate_up": ("regex:dflash_fp8_gemv_rt2_16_kernel", lambda: fp8_gemv(16, 24576, 4096)),
    "fp8_gemv16_gate_up_rt1": ("regex:dflash_fp8_gemv_rt1_16_kernel", lambda: fp8_gemv(16, 24576, 4096, True)),
}
# Peers (not the catalog's kernels), profiled the same way beside ours: cuBLAS's GEMM kernels
# (named by the library's choice of tile and cluster, e.g. nvjet_sm90_tst_128x64_64x8_1x2_h_bz_TNT).
CUBLAS_GEMM = "regex:nvjet|gemm|xmma|cutlass"
PEERS = {
    "cublas_qkv_256": (CUBLAS_GEMM, lambda: cublas(256, 6144, 4096)),
    "cublas_o_256": (CUBLAS_GEMM, lambda: cublas(256, 4096, 4096)),
}
ALL = {**CASES, **PEERS}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case", nargs="?", choices=sorted(ALL))
    ap.add_argument("--kernel", action="store_true", help="print the case's kernel-name pattern and exit")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    args = ap.parse_args()
    if args.list or args.case is None:
        print("\n".join(sorted(ALL)))
        return 0 if args.list else 2
    pattern, setup = ALL[args.case]
    if args.kernel:
        print(pattern)
        return 0
    import torch

    launch = setup()
    for _ in range(LAUNCHES):
        launch()
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
