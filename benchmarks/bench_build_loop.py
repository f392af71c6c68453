#!/usr/bin/env python3
"""The regenerate-and-build loop, timed on this machine for the whole catalog.

Measures, in a scratch copy of the project (so the working tree is untouched):
  generate      kernelgen generate of every module and target (cold process);
  cold build    a first `kernelgen build` of each target (compiler cache off);
  no-op build   `kernelgen build` again: no compiler may run;
  spec edit     one spec's summary edited: which translation units recompile;
  kernel edit   one kernel source touched: which translation units recompile;
  ccache        a clean rebuild (build/ removed) through `--compiler-launcher ccache`,
                after a cold build that filled the cache.

Usage: python3 benchmarks/bench_build_loop.py --out benchmarks/results/build_loop.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def kernelgen(root: Path, *args: str, env: dict[str, str] | None = None) -> tuple[float, str]:
    start = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "kernelgen.cli", *args], cwd=root, capture_output=True, text=True,
                         env=dict(os.environ, **(env or {})))
    took = time.perf_counter() - start
    if res.returncode != 0:
        raise SystemExit(f"kernelgen {' '.join(args)} failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    return took, res.stdout


def compiled(log: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"compiling (\S+)", log)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--targets", nargs="+", default=["gb10", "hopper"])
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="kernelgen-bench-"))
    root = scratch / "project"
    shutil.copytree(REPO, root, ignore=shutil.ignore_patterns(".git", ".venv", "build", "bindings", "__pycache__",
                                                               ".pytest_cache", "gpu-results", ".scratch", ".whl"))
    (root / "bindings").mkdir()
    res: dict[str, object] = {"machine": f"{platform.machine()}, {os.cpu_count()} cores", "targets": {}}
    shutil.rmtree(root / "generated")
    res["generate_s"], _ = kernelgen(root, "generate")
    res["generate_unchanged_s"], _ = kernelgen(root, "generate")
    for t in args.targets:
        r: dict[str, object] = {}
        r["cold_build_s"], log = kernelgen(root, "build", "--target", t)
        r["cold_compiled"] = len(compiled(log))
        r["noop_build_s"], log = kernelgen(root, "build", "--target", t)
        r["noop_compiled"] = compiled(log)
        spec = root / "specs" / "rms_norm.yaml"
        spec.write_text(re.sub(r"f32 accumulation[^.\n]*\.", f"f32 accumulation ({t}).", spec.read_text(), count=1))
        r["spec_edit_s"], log = kernelgen(root, "build", "--target", t)
        r["spec_edit_compiled"] = compiled(log)
        (root / "kernels" / "dflash" / "silu_mul.cu").touch()
        r["kernel_edit_s"], log = kernelgen(root, "build", "--target", t)
        r["kernel_edit_compiled"] = compiled(log)
        res["targets"][t] = r  # type: ignore[index]
    if shutil.which("ccache"):
        env = {"CCACHE_DIR": str(scratch / "ccache"), "CCACHE_BASEDIR": str(root)}
        t = args.targets[-1]
        shutil.rmtree(root / "build")
        fill_s, _ = kernelgen(root, "build", "--target", t, "--compiler-launcher", "ccache", env=env)
        shutil.rmtree(root / "build")
        warm_s, _ = kernelgen(root, "build", "--target", t, "--compiler-launcher", "ccache", env=env)
        stats = subprocess.run(["ccache", "--print-stats"], capture_output=True, text=True,
                               env=dict(os.environ, **env)).stdout
        res["ccache"] = {"target": t, "filling_build_s": fill_s, "clean_rebuild_s": warm_s,
                         "stats": {k: int(v) for k, v in (ln.split("\t") for ln in stats.splitlines() if "\t" in ln)
                                   if v.isdigit() and ("hit" in k or "miss" in k)}}
    shutil.rmtree(scratch, ignore_errors=True)
    Path(args.out).write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
