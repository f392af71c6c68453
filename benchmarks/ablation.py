"""Builds and runs an ablation program (a CUDA source under benchmarks/ that prints one
"RESULT {json}" line per case) with the project's nvcc for the GPU present."""

from __future__ import annotations

import json
import shlex
import subprocess
import tempfile
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
