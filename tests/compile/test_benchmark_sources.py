"""The benchmark programs that include kernel sources still compile without a GPU: the FP8 GEMV
ablation (benchmarks/fp8_gemv_ablation.cu) instantiates fp8_gemv_rt.cu's Gemv with each Work value
beside the shipped kernels, so a change of that interface shows here rather than on the GPU
machine. Compiled to PTX for sm_90a (the ablation's target) with the project's toolkit."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from kernelgen.toolkit import find_toolkit

pytestmark = pytest.mark.build

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_fp8_gemv_ablation_compiles(tmp_path: Path) -> None:
    tk = find_toolkit()
    ptx = tmp_path / "ablation.ptx"
    res = subprocess.run(
        [str(tk.nvcc), "-std=c++17", "-O3", "-arch=sm_90a", "-ptx", str(BENCH / "fp8_gemv_ablation.cu"), "-o",
         str(ptx)],
        capture_output=True, text=True, timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    entries = set(re.findall(r"\.entry\s+(\w+)", ptx.read_text()))
    # the shipped kernels and an ablation kernel per (rows tile, Work) that the program times
    for name in ("dflash_fp8_gemv_rt2_kernel", "dflash_fp8_gemv_rt2_16_kernel"):
        assert any(name in e for e in entries), sorted(entries)
    ablations = [e for e in entries if "ablation_kernel" in e]
    assert len(ablations) == 6, sorted(entries)  # 2 row tiles x (loads, convert, mma)
