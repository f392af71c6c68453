#!/usr/bin/env python3
"""The regenerate-and-build loop, timed on this machine for the whole catalog.

Measures, in a scratch copy of the project (so the working tree is untouched):
  generate      kernelgen generate of every module and target (cold process);
  cold build    a first `kernelgen build` of each target (compiler cache off);
  no-op build   `kernelgen build` again: no compiler may run;
  spec edit     one spec's summary edited: which translation units recompile;
  kernel edit   one kernel source touched: which translation units recompile;
  ccache        a clean rebuild (build/ removed) through `--compiler-launcher ccache`,
                after a cold build that filled the cache;
  sccache       the same through `--compiler-launcher sccache` (local disk cache, a private
                server), with hits and misses per compile step for each of the two builds.

Usage: python3 benchmarks/bench_build_loop.py --out benchmarks/results/build_loop.json
       python3 benchmarks/bench_build_loop.py --out benchmarks/results/build_loop.json --only sccache --merge
       (--only runs some sections; --merge keeps the other entries of an existing --out file)
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

from kernelgen.testing import ccache_stats, private_sccache, sccache_counts, sccache_stats

REPO = Path(__file__).resolve().parents[1]


def kernelgen(root: Path, *args: str, env: dict[str, str] | None = None,
              full_env: dict[str, str] | None = None) -> tuple[float, str]:
    """Runs the CLI in root: env is added to this process's environment, full_env replaces it."""
    start = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "kernelgen.cli", *args], cwd=root, capture_output=True, text=True,
                         env=full_env if full_env is not None else dict(os.environ, **(env or {})))
    took = time.perf_counter() - start
    if res.returncode != 0:
        raise SystemExit(f"kernelgen {' '.join(args)} failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    return took, res.stdout


def compiled(log: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"compiling (\S+)", log)]


def bench_sccache(root: Path, scratch: Path, t: str, sccache: str) -> dict[str, object]:
    with private_sccache(sccache, scratch) as env:
        version = subprocess.run([sccache, "--version"], env=env, capture_output=True, text=True,
                                 check=True).stdout.split()[-1]
        shutil.rmtree(root / "build", ignore_errors=True)
        fill_s, log = kernelgen(root, "build", "--target", t, "--compiler-launcher", "sccache", full_env=env)
        filled = sccache_stats(sccache, env)
        shutil.rmtree(root / "build")
        warm_s, _ = kernelgen(root, "build", "--target", t, "--compiler-launcher", "sccache", full_env=env)
        warm = sccache_stats(sccache, env)
    return {"target": t, "version": version, "compiled": len(compiled(log)), "filling_build_s": fill_s,
            "clean_rebuild_s": warm_s,
            "stats": {"filling_build": sccache_counts({}, filled), "clean_rebuild": sccache_counts(filled, warm)}}


def main() -> None:
    sections = ["loop", "ccache", "sccache"]
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--targets", nargs="+", default=["gb10", "hopper"])
    ap.add_argument("--only", nargs="+", choices=sections, default=sections,
                    help="sections to run (loop: generate and the per-target builds)")
    ap.add_argument("--merge", action="store_true", help="keep the entries of --out that this run does not measure")
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="kernelgen-bench-"))
    root = scratch / "project"
    shutil.copytree(REPO, root, ignore=shutil.ignore_patterns(".git", ".venv", "build", "bindings", "__pycache__",
                                                               ".pytest_cache", "gpu-results", ".scratch", ".whl"))
    (root / "bindings").mkdir()
    out = Path(args.out)
    res: dict[str, object] = json.loads(out.read_text()) if args.merge and out.is_file() else {}
    res["machine"] = f"{platform.machine()}, {os.cpu_count()} cores"
    if "loop" in args.only:
        res["targets"] = {}
    shutil.rmtree(root / "generated")
    gen_s, _ = kernelgen(root, "generate")
    if "loop" in args.only:
        res["generate_s"] = gen_s
        res["generate_unchanged_s"], _ = kernelgen(root, "generate")
    for t in args.targets if "loop" in args.only else []:
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
    if "ccache" in args.only and shutil.which("ccache"):
        env = {"CCACHE_DIR": str(scratch / "ccache"), "CCACHE_BASEDIR": str(root)}
        t = args.targets[-1]
        shutil.rmtree(root / "build", ignore_errors=True)
        fill_s, _ = kernelgen(root, "build", "--target", t, "--compiler-launcher", "ccache", env=env)
        shutil.rmtree(root / "build")
        warm_s, _ = kernelgen(root, "build", "--target", t, "--compiler-launcher", "ccache", env=env)
        res["ccache"] = {"target": t, "filling_build_s": fill_s, "clean_rebuild_s": warm_s,
                         "stats": {k: v for k, v in ccache_stats(env).items() if "hit" in k or "miss" in k}}
    sccache = shutil.which("sccache")
    if "sccache" in args.only and sccache:
        res["sccache"] = bench_sccache(root, scratch, args.targets[-1], sccache)
    for tool in ("ccache", "sccache"):
        if tool in args.only and not shutil.which(tool):
            print(f"{tool} is not on PATH: its section was not measured", file=sys.stderr)
    shutil.rmtree(scratch, ignore_errors=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
