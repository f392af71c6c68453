"""Builds and runs an ablation program (a CUDA source under benchmarks/ that prints one
"RESULT {json}" line per case) with the project's nvcc for the GPU present."""

from __future__ import annotations

import json
import shlex
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from bench_launch_cost import find_nvcc

HERE = Path(__file__).resolve().parent


def gpu_arch() -> str | None:
    """sm_90a on a Hopper GPU (the ablated kernels use sm_90 features and clusters), else None."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return "sm_90a" if torch.cuda.get_device_capability() == (9, 0) else None


def run(source: str, args: list[str] | None = None) -> tuple[list[dict] | None, str]:
    """(rows, "") on success; (None, why) when nvcc or a Hopper GPU is missing ("skipped: ...")
    or the build or the run fails."""
    nvcc, arch = find_nvcc(), gpu_arch()
    if not nvcc or not arch:
        return None, f"skipped: needs nvcc ({nvcc}) and a Hopper GPU ({arch})"
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / Path(source).stem
        cmd = [nvcc, "-O3", "-std=c++17", f"-arch={arch}", str(HERE / source), "-o", str(exe)]
        build = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
        if build.returncode != 0:
            return None, f"build failed: {shlex.join(cmd)}\n{build.stdout[-2000:]}{build.stderr[-2000:]}"
        res = subprocess.run([str(exe)] + (args or []), capture_output=True, text=True, errors="replace",
                             timeout=600)
    rows = [json.loads(line[len("RESULT "):]) for line in res.stdout.splitlines() if line.startswith("RESULT ")]
    if res.returncode != 0 or not rows:
        return None, f"run failed (exit {res.returncode}):\n{res.stdout[-2000:]}{res.stderr[-2000:]}"
    return rows, ""


def report(source: str, what: str, out: str, table: Callable[[list[dict]], str], args: list[str] | None = None,
           annotate: Callable[[dict], None] | None = None) -> int:
    """Runs `source` (see run), lets `annotate` add derived fields to each row, prints the GPU and
    table(rows), and writes {"device", "cases"} as JSON to `out`. Without nvcc or a Hopper GPU
    it writes {"skipped": True, "why"} and returns 0; a failed build or run returns 1."""
    rows, why = run(source, args)
    if rows is None:
        print(f"{what}: {why}")
        if why.startswith("skipped"):
            Path(out).write_text(json.dumps({"skipped": True, "why": why}))
            return 0
        return 1
    import torch

    for r in rows:
        if annotate:
            annotate(r)
    print(f"{torch.cuda.get_device_name(0)}, {torch.cuda.get_device_properties(0).multi_processor_count} SMs")
    print(table(rows))
    Path(out).write_text(json.dumps({"device": torch.cuda.get_device_name(0), "cases": rows}, indent=1))
    return 0
