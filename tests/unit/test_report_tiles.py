"""benchmarks/report.py names the GEMMs' tiles from the grids the benchmarks record: the tile it
reads back from a grid is the one the spec chose (the `bn` / `xtile` lets of `kernelgen plan`)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from kernelgen.cli import main

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from report import fp8_tma_tile, tma_tile  # noqa: E402

SHAPES = [(n, k) for n, k in ((6144, 4096), (4096, 4096), (24576, 4096), (4096, 12288), (151936, 4096), (4104, 1040))]


def hopper_plan(capsys, kernel: str, **args: int) -> tuple[list[int], dict[str, int]]:
    rc = main(["--root", str(ROOT), "plan", kernel, *(f"{a}={v}" for a, v in args.items()), "-t", "hopper"])
    out = capsys.readouterr().out
    assert rc == 0, out
    grid = [int(v) for v in re.search(r"grid \[(\d+), (\d+), (\d+)\]", out).groups()]
    lets = {name: int(v) for name, v in re.findall(r"(\w+) = (\d+)", out.split("let:", 1)[1])}
    return grid, lets


@pytest.mark.parametrize("m", [65, 129, 256, 300, 2048])
@pytest.mark.parametrize("n,k", SHAPES)
def test_dense_tile_is_the_specs(capsys, m, n, k) -> None:
    grid, lets = hopper_plan(capsys, "dense_linear.dense_gemm_tma", m=m, n=n, k=k)
    split = f", K / {grid[2]}" if grid[2] > 1 else ""
    assert tma_tile({"m": m, "n": n, "grid": grid}) == f", 128 x {lets['bn']}{split}"


@pytest.mark.parametrize("rows", [65, 129, 256, 300, 2048])
@pytest.mark.parametrize("n,k", SHAPES)
def test_fp8_tile_is_the_specs(capsys, rows, n, k) -> None:
    grid, lets = hopper_plan(capsys, "fp8_linear.fp8_gemm_tma", rows=rows, n=n, k=k)
    split = f", K / {grid[2]}" if grid[2] > 1 else ""
    assert fp8_tma_tile({"grid": grid}, rows, n) == f", {lets['xtile']} x 128{split}"
    assert fp8_tma_tile({}, rows, n) == ""
