"""The benchmark programs that include kernel sources still compile without a GPU, so that a change
of the interfaces they use shows here rather than on the GPU machine:

* the FP8 GEMV ablation (benchmarks/fp8_gemv_ablation.cu) instantiates fp8_gemv_rt.cu's Gemv with
  each Work value beside the shipped kernels;
* the drafter attention ablation (benchmarks/attn_dflash_ablation.cu) instantiates dflash_attn.cuh's
  attn_cta with each of its Work values, for BF16 and FP8 caches;
* the GEMV load-pattern study (benchmarks/load_pattern.cu) uses the shared PTX helpers.

Compiled to PTX for sm_90a (the ablations' target) with the project's toolkit."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from kernelgen.toolkit import find_toolkit

pytestmark = pytest.mark.build

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def ptx_entries(source: str, tmp_path: Path) -> set[str]:
    tk = find_toolkit()
    ptx = tmp_path / "ablation.ptx"
    res = subprocess.run(
        [str(tk.nvcc), "-std=c++17", "-O3", "-arch=sm_90a", "-ptx", str(BENCH / source), "-o", str(ptx)],
        capture_output=True, text=True, timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return set(re.findall(r"\.entry\s+(\w+)", ptx.read_text()))


def test_fp8_gemv_ablation_compiles(tmp_path: Path) -> None:
    entries = ptx_entries("fp8_gemv_ablation.cu", tmp_path)
    # the shipped kernels and an ablation kernel per (rows tile, Work) that the program times
    for name in ("dflash_fp8_gemv_rt2_kernel", "dflash_fp8_gemv_rt2_16_kernel"):
        assert any(name in e for e in entries), sorted(entries)
    ablations = [e for e in entries if "ablation_kernel" in e]
    assert len(ablations) == 6, sorted(entries)  # 2 row tiles x (loads, convert, mma)


def test_attn_dflash_ablation_compiles(tmp_path: Path) -> None:
    entries = ptx_entries("attn_dflash_ablation.cu", tmp_path)
    assert any("dflash_attn_bf16_split_kernel" in e for e in entries), sorted(entries)
    ablations = [e for e in entries if "ablation_kernel" in e]
    assert len(ablations) == 8, sorted(entries)  # 2 caches x (full, no_fold, no_partials, loads)


def test_load_pattern_compiles(tmp_path: Path) -> None:
    entries = ptx_entries("load_pattern.cu", tmp_path)
    # 3 copy shapes x (bf16, fp8) layouts, plus the streaming-read floor's two kernels
    assert len([e for e in entries if "pattern_kernel" in e]) == 6, sorted(entries)
