#!/usr/bin/env python3
"""Host launch cost: what one launch of the same kernel costs on the host, per launcher.

The kernel (benchmarks/launch_cost/project/kernels/launch_probe.cu) takes 11 arguments (5
pointers, 5 u32, 1 f32) and does almost nothing, so the GPU is never the bottleneck. It is
launched, in one Python process, by:

- kernelgen's generated Python launcher: int pointers positional, int pointers by keyword,
  torch tensors by keyword (and, to see where the time goes: tensors positional, tensors with
  a stream object, and calls that plan but do not launch because n == 0);
- a minimal hand-written pybind11 module (benchmarks/launch_cost/minimal_pybind.cpp), with
  int pointers and with torch tensors (data_ptr() called from C++), and its no-op twin;
- CuPy RawKernel, cuda.core launch, a Triton @triton.jit kernel with the same 11 arguments,
  torch's own x.add_(1) on a small tensor, and a CUDA graph replay;

and, in a C++ subprocess (benchmarks/launch_cost/raw.cu), by a raw <<<>>> loop (the floor),
the generated C++ stub and the C ABI.

Method, the same everywhere: bursts of 64 launches, each burst timed on the host clock
(time.perf_counter_ns, std::chrono::steady_clock in C++) and followed by an untimed
synchronisation, so the launch queue never fills; per launch = burst time / 64; the
statistic is the median over many bursts after a warm-up. In Python each burst is one
function holding 64 copies of the call with every name a local, so no loop or global lookup
is counted. The launchers are interleaved: round r times one burst of every launcher in
turn, because the launch cost of a VM's GPU drifts by up to 25% within seconds (seen on the
H200 here) and launchers measured one after another would inherit whichever spell they fell
in (--sequential restores one-after-another). The floor is measured twice: by raw.cu in its
own process (the "x raw C++" ratio) and, interleaved with everything else, by a C++ loop of
64 <<<>>> launches inside this process (the "x floor" ratio, the one to compare launchers by).
Launcher variants that plan but do not launch (n == 0) isolate the binding's own cost, which
the launch's noise would hide. Every launcher's result is checked (out[slot] and the launch
counter), and 64 generated-Python launches captured into a CUDA graph must replay to what
eager launches wrote.

Builds what it needs first (under --work, default /tmp/lc): the probe project with kernelgen
for the GPU's target, raw.cu with nvcc, the minimal pybind11 module with nvcc. A peer whose
package is missing, or that fails, is skipped with a note in the JSON; nothing crashes.

Usage: python3 benchmarks/bench_launch_cost.py --out results.json [--bursts 2000] [--warmup 200]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import importlib
import importlib.util
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
LC = REPO / "benchmarks" / "launch_cost"
PROJECT = LC / "project"
KERNEL_SRC = PROJECT / "kernels" / "launch_probe.cu"
BURST = 64

# The probe's arguments; out[SLOT] becomes 1 + 2 + 0.5 + 0.25 * (5 + 6 + 7) = 8.0 (exact in bf16).
N, SLOT, K0, K1, K2, ALPHA = 4096, 3, 5, 6, 7, 0.25
EXPECTED = 1.0 + 2.0 + 0.5 + ALPHA * (K0 + K1 + K2)
ARGS = ("a", "b", "c", "d", "out", "n", "slot", "k0", "k1", "k2", "alpha")
POS = ", ".join(ARGS)
KW = ", ".join(f"{x}={x}" for x in ARGS)

try:  # the Triton peer is defined at module level so triton.jit can read its source
    import triton
    import triton.language as tl

    @triton.jit
    def triton_probe(a, b, c, d, out, n, slot, k0, k1, k2, alpha):
        if tl.program_id(0) == 0:
            if slot < n:
                v = tl.load(a).to(tl.float32) + tl.load(b).to(tl.float32) + tl.load(c)
                v = v + alpha * (k0 + k1 + k2).to(tl.float32)
                tl.store(out + slot, v.to(tl.bfloat16))
                tl.store(d, tl.load(d) + 1)

    TRITON_ERROR = None
except Exception as exc:  # ImportError, or a Triton that fails to import here
    triton = None
    TRITON_ERROR = f"{type(exc).__name__}: {exc}"


def log(msg: str) -> None:
    print(msg, flush=True)


def short_exc(exc: BaseException) -> str:
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return f"{type(exc).__name__}: {exc}"[:600] + " | " + "".join(tb[-3:])[-900:].replace("\n", " / ")


# ---------------------------------------------------------------------------------------------
# Builds


@dataclass
class Step:
    ok: bool = False
    seconds: float = 0.0
    command: str = ""
    log_tail: str = ""


def run_step(cmd: list[str], cwd: Path = REPO, timeout: int = 600, env: dict[str, str] | None = None) -> Step:
    start = time.monotonic()
    step = Step(command=shlex.join(cmd))
    try:
        res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, errors="replace",
                             env=env)
        step.ok = res.returncode == 0
        step.log_tail = (res.stdout + res.stderr)[-3000:]
    except Exception as exc:
        step.log_tail = short_exc(exc)
    step.seconds = round(time.monotonic() - start, 2)
    return step


def find_nvcc() -> str | None:
    """The nvcc kernelgen builds with (the same search), None when there is none."""
    try:
        from kernelgen import toolkit

        return str(toolkit.find_toolkit().nvcc)
    except Exception:
        return None


def project_targets() -> dict[str, dict[str, Any]]:
    """The probe project's target registry (specs/targets.yaml)."""
    import yaml

    return yaml.safe_load((PROJECT / "specs" / "targets.yaml").read_text())


def target_arch(target: str) -> str:
    return project_targets()[target]["arch"]


def target_for(cc: tuple[int, int]) -> str | None:
    return next((n for n, t in project_targets().items() if t["compute_capability"] == f"{cc[0]}.{cc[1]}"), None)


def find_library(lib_dir: Path, target: str) -> Path | None:
    """The target library kernelgen installed: libkernelgen_<target>.so, or a newer kernelgen's
    libkernelgen_<target>_<hash>.so (named per set of modules); the newest if several."""
    found = [p for p in lib_dir.glob(f"libkernelgen_{target}*.so") if p.is_file()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


@dataclass
class Built:
    kernelgen_ops: Path | None = None  # install dir's kernelgen_ops folder
    raw_exe: Path | None = None
    minimal: Path | None = None  # the minimal pybind11 extension
    catalog_ops: Path | None = None  # the catalog's kernelgen_ops/<target> folder (kernelgen build)
    minimal_catalog: Path | None = None  # minimal pybind11 bindings of two catalog kernels
    steps: dict[str, Step] = field(default_factory=dict)


def build_all(target: str, work: Path) -> Built:
    built = Built()
    work.mkdir(parents=True, exist_ok=True)
    nvcc = find_nvcc()
    arch = target_arch(target)
    kernels_inc = f"-I{PROJECT / 'kernels'}"

    # The minimal pybind11 module compiles while kernelgen builds.
    minimal_proc = None
    ext = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    minimal_out = work / f"lc_minimal_pybind{ext}"
    pyb = subprocess.run([sys.executable, "-m", "pybind11", "--includes"], capture_output=True, text=True)
    py_includes = shlex.split(pyb.stdout) if pyb.returncode == 0 else []
    src = LC / "minimal_pybind.cpp"
    minimal_cmd = [str(nvcc), "-O2", "-std=c++17", f"-arch={arch}", "-x", "cu", "-shared", "-Xcompiler",
                   "-fPIC,-fvisibility=hidden", *py_includes, kernels_inc, str(src), "-o", str(minimal_out)]
    if nvcc and py_includes:
        minimal_proc = subprocess.Popen(minimal_cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, errors="replace")
    else:
        built.steps["minimal_pybind"] = Step(log_tail=f"nvcc={nvcc} pybind11 includes: {pyb.stderr[-500:]}")

    log(f"build: kernelgen probe project for {target} ...")
    kg = run_step([sys.executable, "-m", "kernelgen.cli", "--root", str(PROJECT), "build", "--target", target,
                   "--build-dir", str(work / "build"), "--install-dir", str(work / "inst")],
                  env={**os.environ, "PYTHONPATH": os.pathsep.join(
                      x for x in (os.environ.get("PYTHONPATH"), str(REPO / "src")) if x)})
    built.steps["kernelgen"] = kg
    log(f"build: kernelgen {'ok' if kg.ok else 'FAILED'} ({kg.seconds} s)")
    ops = work / "inst" / "kernelgen_ops"
    lib_dir = ops / target
    lib = find_library(lib_dir, target)
    if kg.ok and lib is not None:
        built.kernelgen_ops = ops
        if nvcc:
            exe = work / "raw_launch_cost"
            raw = run_step([str(nvcc), "-O2", "-std=c++17", f"-arch={arch}",
                            f"-I{PROJECT / 'generated' / target / 'include'}",
                            f"-I{REPO / 'src' / 'kernelgen' / 'runtime' / 'include'}", kernels_inc,
                            str(LC / "raw.cu"), f"-L{lib_dir}", f"-l:{lib.name}", "-Xlinker", "-rpath",
                            "-Xlinker", str(lib_dir), "-o", str(exe)])
            built.steps["raw_cu"] = raw
            log(f"build: raw.cu {'ok' if raw.ok else 'FAILED'} ({raw.seconds} s)")
            if raw.ok:
                built.raw_exe = exe

    build_catalog(built, target, work, py_includes, ext)

    if minimal_proc is not None:
        start = time.monotonic()
        out, _ = minimal_proc.communicate()
        step = Step(ok=minimal_proc.returncode == 0, command=shlex.join(minimal_cmd), log_tail=out[-3000:])
        if not step.ok:  # nvcc could not take the pybind11 headers: kernel with nvcc, module with c++
            obj_k, obj_b = work / "minimal_kernel.o", work / "minimal_binding.o"
            cxx = shutil.which("c++") or shutil.which("g++") or "c++"
            steps = [
                [str(nvcc), "-O2", "-std=c++17", f"-arch={arch}", "-x", "cu", "-c", "-Xcompiler", "-fPIC",
                 "-DLC_KERNEL_PART", kernels_inc, str(src), "-o", str(obj_k)],
                [cxx, "-O2", "-std=c++17", "-fPIC", "-fvisibility=hidden", "-c", "-DLC_BINDING_PART", *py_includes,
                 str(src), "-o", str(obj_b)],
                [str(nvcc), "-shared", str(obj_k), str(obj_b), "-o", str(minimal_out)],
            ]
            for cmd in steps:
                s2 = run_step(cmd)
                step.log_tail += "\n[two-step fallback] " + s2.command + "\n" + s2.log_tail
                step.ok = s2.ok
                if not s2.ok:
                    break
        step.seconds = round(time.monotonic() - start, 2)
        built.steps["minimal_pybind"] = step
        log(f"build: minimal pybind11 module {'ok' if step.ok else 'FAILED'}")
        if step.ok:
            built.minimal = minimal_out
    return built


def build_catalog(built: Built, target: str, work: Path, py_includes: list[str], ext: str) -> None:
    """The repository's own catalog for the target (`kernelgen build`, a no-op when it is built), and
    the minimal pybind11 bindings of rms_norm_bf16 and attn_prefill_paged_64 over its C ABI."""
    log(f"build: kernelgen catalog for {target} ...")
    step = run_step([sys.executable, "-m", "kernelgen.cli", "build", "--target", target,
                     "-j", str(os.cpu_count() or 2)], timeout=900,
                    env={**os.environ, "PYTHONPATH": os.pathsep.join(
                        x for x in (os.environ.get("PYTHONPATH"), str(REPO / "src")) if x)})
    built.steps["catalog"] = step
    log(f"build: catalog {'ok' if step.ok else 'FAILED'} ({step.seconds} s)")
    lib_dir = REPO / "bindings" / "kernelgen_ops" / target
    lib = find_library(lib_dir, target)
    if not step.ok or lib is None:
        return
    built.catalog_ops = lib_dir
    out = work / f"lc_minimal_catalog{ext}"
    cxx = shutil.which("c++") or shutil.which("g++") or "c++"
    step = run_step([cxx, "-O2", "-std=c++17", "-shared", "-fPIC", "-fvisibility=hidden", *py_includes,
                     f"-I{REPO / 'generated' / target / 'include'}",
                     f"-I{REPO / 'src' / 'kernelgen' / 'runtime' / 'include'}",
                     str(LC / "minimal_catalog.cpp"), f"-L{lib_dir}", f"-l:{lib.name}", f"-Wl,-rpath,{lib_dir}",
                     "-o", str(out)])
    built.steps["minimal_catalog"] = step
    log(f"build: minimal catalog bindings {'ok' if step.ok else 'FAILED'}")
    if step.ok:
        built.minimal_catalog = out


# ---------------------------------------------------------------------------------------------
# Measurement


def burst_function(call: str, names: list[str], reps: int) -> Callable[..., None]:
    """def _burst(<names>): <call> x reps -- every name a fast local, no loop counted."""
    src = f"def _burst({', '.join(names)}):\n" + f"    {call}\n" * reps
    ns: dict[str, Any] = {}
    exec(compile(src, f"<burst: {call[:60]}>", "exec"), ns)
    return ns["_burst"]


def measure(call: str, env: dict[str, Any], sync: Callable[[], None], bursts: int, warmup: int,
            launches_per_call: int = 1) -> dict[str, float]:
    reps = BURST // launches_per_call
    fn = burst_function(call, list(env), reps)
    args = tuple(env.values())
    for _ in range(warmup):
        fn(*args)
        sync()
    clock = time.perf_counter_ns
    ns = []
    gc.collect()
    gc.disable()
    try:
        for _ in range(bursts):
            t0 = clock()
            fn(*args)
            t1 = clock()
            sync()
            ns.append(t1 - t0)
    finally:
        gc.enable()
    return stats_of(ns)


def stats_of(ns: list[int]) -> dict[str, float]:
    us = sorted(x / BURST / 1e3 for x in ns)
    n = len(us)
    return {
        "us_per_launch": statistics.median(us),
        "p10": us[n // 10],
        "p90": us[(9 * n) // 10],
        "min": us[0],
        "mean": statistics.fmean(us),
        "bursts": n,
    }


@dataclass
class Peer:
    key: str
    label: str
    call: str  # one launch, as Python source over the names in env
    env: dict[str, Any]
    check: Callable[[Callable[[], None]], str] | None = None  # given "run one burst", returns a verdict
    launches_per_call: int = 1
    note: str = ""


# ---------------------------------------------------------------------------------------------
# The benchmark


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out_path = Path(args.out)
        self.doc: dict[str, Any] = {
            "benchmark": "host launch cost per launcher, same kernel",
            "method": (
                f"bursts of {BURST} launches timed on the host clock, then an untimed synchronize; "
                f"per launch = burst time / {BURST}; median over {args.bursts} bursts after {args.warmup} "
                "warm-up bursts; Python bursts are one function with 64 copies of the call, all names local; "
                + ("launchers one after another" if args.sequential else
                   "launchers interleaved (round r: one burst of each in turn)")
            ),
            "kernel": {
                "source": str(KERNEL_SRC.relative_to(REPO)),
                "args": "const bf16* a, const bf16* b, const f32* c, i32* d, bf16* out, u32 n, u32 slot, "
                        "u32 k0, u32 k1, u32 k2, f32 alpha",
                "values": {"n": N, "slot": SLOT, "k0": K0, "k1": K1, "k2": K2, "alpha": ALPHA},
                "grid": [(N + 255) // 256, 1, 1],
                "block": [256, 1, 1],
            },
            "meta": {},
            "builds": {},
            "raw_cpp": None,
            "results": {},
            "skipped": {},
            "graph_check": None,
            "micro_ns": {},
            "notes": [],
        }
        self.order: list[str] = []  # keys as results and skips arrive
        self.peer_order: list[str] = []  # the Python launchers' keys as declared

    # -- output

    def save(self) -> None:
        self.out_path.parent.mkdir(parents=True, exist_ok=True)
        self.out_path.write_text(json.dumps(self.doc, indent=2, default=str) + "\n")

    def skip(self, key: str, label: str, reason: str) -> None:
        self.order.append(key)
        self.doc["skipped"][key] = {"label": label, "reason": reason}
        log(f"skip: {label}: {reason[:300]}")
        self.save()

    def add_result(self, key: str, label: str, stats: dict[str, Any], source: str, **extra: Any) -> None:
        self.order.append(key)
        self.doc["results"][key] = {"label": label, "source": source, **stats, **extra}
        self.save()

    # -- runs

    def run(self) -> int:
        try:
            return self._run()
        except Exception as exc:  # never crash: record and write what there is
            self.doc["notes"].append(f"benchmark stopped early: {short_exc(exc)}")
            log(f"bench_launch_cost: stopped early: {exc}")
            return 0
        finally:
            self.finish()

    def _run(self) -> int:
        meta = self.doc["meta"]
        meta.update(python=sys.version.split()[0], platform=platform.platform(), machine=platform.machine(),
                    cpu=_cpu_model(), cpu_count=os.cpu_count())
        try:
            import torch

            meta["torch"] = torch.__version__
            gpu = torch.cuda.is_available()
        except ImportError as exc:
            torch, gpu = None, False
            self.doc["notes"].append(f"torch is missing ({exc})")
        if not gpu:
            self.doc["notes"].append("no CUDA GPU visible: nothing measured")
            if self.args.target:  # still check that everything builds
                self.doc["builds"] = _steps(build_all(self.args.target, Path(self.args.work)).steps)
            return 0
        cc = torch.cuda.get_device_capability()
        meta["device"] = torch.cuda.get_device_name()
        meta["compute_capability"] = f"{cc[0]}.{cc[1]}"
        target = self.args.target or target_for(cc)
        meta["target"] = target
        if target is None:
            self.doc["notes"].append(f"compute capability {cc} has no kernelgen target")
            return 0
        for name in ("cupy", "triton", "cuda.core", "cuda.bindings", "numpy", "pybind11"):
            meta[f"version_{name}"] = _version(name)
        # Which binding runtime was measured (the working tree's, which may differ from a commit).
        rt = REPO / "src" / "kernelgen" / "runtime"
        meta["runtime_sources_sha256"] = {
            str(p.relative_to(REPO)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted([*rt.glob("src/*.cpp"), *rt.glob("src/*.h"), *rt.glob("include/kernelgen/*.h")])
            if p.is_file()
        }

        built = build_all(target, Path(self.args.work)) if not self.args.skip_build else _prebuilt(
            target, Path(self.args.work))
        self.doc["builds"] = _steps(built.steps)
        self.save()

        self.run_raw_cpp(built)
        self.run_python(torch, target, built)
        self.run_raw_cpp(built, again=True)
        return 0

    def run_raw_cpp(self, built: Built, again: bool = False) -> None:
        """raw.cu in its own process; run again after the Python launchers to see the machine's drift."""
        if built.raw_exe is None:
            if not again:
                self.doc["notes"].append("raw.cu was not built: no raw C++ floor; ratios are unavailable")
            return
        if again:
            if self.doc["raw_cpp"] is None:
                return
            try:
                res = subprocess.run([str(built.raw_exe), "--bursts", str(max(200, self.args.bursts // 4)),
                                      "--warmup", "50"], capture_output=True, text=True, timeout=240)
                data = json.loads(res.stdout)
                self.doc["raw_cpp_after"] = data
                self.doc["meta"]["raw_cpp_floor_before_after_us"] = [
                    self.doc["raw_cpp"].get("results", {}).get("raw_cpp", {}).get("us_per_launch"),
                    data["results"]["raw_cpp"]["us_per_launch"]]
            except Exception as exc:
                self.doc["notes"].append(f"second raw.cu run failed: {short_exc(exc)}")
            self.save()
            return
        log("raw C++: measuring ...")
        cmd = [str(built.raw_exe), "--bursts", str(self.args.bursts), "--warmup", str(self.args.warmup)]
        if self.args.sequential:
            cmd.append("--sequential")
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
            try:
                data = json.loads(res.stdout)
            except ValueError:
                raise RuntimeError(f"exit {res.returncode}, no JSON; stderr: {res.stderr[-600:]!r}") from None
            data["exit_code"] = res.returncode
            if res.stderr.strip():
                data["stderr"] = res.stderr[-1500:]
            self.doc["raw_cpp"] = data
            for key, r in data["results"].items():
                self.add_result(key, _RAW_LABELS.get(key, key), {k: v for k, v in r.items() if k != "what"},
                                "raw.cu (C++ subprocess)", what=r.get("what", ""),
                                check="pass" if data["check"]["passed"] else f"FAIL {data['check']}")
        except Exception as exc:
            self.doc["notes"].append(f"raw.cu run failed: {short_exc(exc)}")
            log(f"raw C++: failed: {exc}")
        self.save()

    def run_python(self, torch: Any, target: str, built: Built) -> None:
        dev = torch.device("cuda", torch.cuda.current_device())
        sync = torch.cuda.synchronize
        bf16 = torch.bfloat16
        a = torch.tensor([1.0], dtype=bf16, device=dev)
        b = torch.tensor([2.0], dtype=bf16, device=dev)
        c = torch.tensor([0.5], dtype=torch.float32, device=dev)
        d = torch.zeros(1, dtype=torch.int32, device=dev)
        out = torch.zeros(N, dtype=bf16, device=dev)
        tensors = {"a": a, "b": b, "c": c, "d": d, "out": out}
        ptrs = {k: t.data_ptr() for k, t in tensors.items()}
        scalars = {"n": N, "slot": SLOT, "k0": K0, "k1": K1, "k2": K2, "alpha": ALPHA}
        grid = (N + 255) // 256

        def probe_check(run_burst: Callable[[], None], counter: bool = True) -> str:
            sync()
            out.zero_()
            d.zero_()
            sync()
            run_burst()
            sync()
            got, cnt = float(out[SLOT]), int(d[0])
            others = int(torch.count_nonzero(out)) - (1 if got != 0 else 0)
            problems = []
            if got != EXPECTED:
                problems.append(f"out[{SLOT}] = {got}, expected {EXPECTED}")
            if others:
                problems.append(f"{others} other elements of out written")
            if counter and cnt != BURST:
                problems.append(f"counter {cnt}, expected {BURST}")
            return "pass" if not problems else "FAIL: " + "; ".join(problems)

        def not_launched_check(fn: Callable[..., Any], env: dict[str, Any],
                               **kw: Any) -> Callable[[Callable[[], None]], str]:
            """fn called with env's arguments (less the launcher "f") must not launch, nor may a burst."""
            args = {k: v for k, v in env.items() if k != "f"}

            def check(run_burst: Callable[[], None]) -> str:
                o = fn(**args, **kw)
                if o:
                    return f"FAIL: launched ({o!r})"
                sync()
                d.zero_()
                run_burst()
                sync()
                return "pass" if int(d[0]) == 0 else "FAIL: kernel ran"
            return check

        peers: list[Peer | tuple[str, str, str]] = []

        # -- kernelgen's generated Python launcher
        kg_mod = None
        if built.kernelgen_ops is not None:
            try:
                kg_mod = _import_kernelgen(built.kernelgen_ops, target)
                self.doc["meta"]["kernelgen_module"] = getattr(kg_mod, "__file__", "?")
            except Exception as exc:
                self.doc["notes"].append(f"kernelgen module import failed: {short_exc(exc)}")
        if kg_mod is None:
            for key, label in _KG_LABELS.items():
                peers.append((key, label, "kernelgen probe module not built or not importable"))
        else:
            f = kg_mod.probe
            cur_stream = torch.cuda.current_stream()
            ints_env = {"f": f, **ptrs, **scalars}
            tens_env = {"f": f, **tensors, **scalars}
            empty_ints = {**ints_env, "n": 0}
            empty_tens = {**tens_env, "n": 0}
            peers += [
                Peer("kg_py_ints_pos", _KG_LABELS["kg_py_ints_pos"], f"f({POS})", ints_env, probe_check),
                Peer("kg_py_ints_kw", _KG_LABELS["kg_py_ints_kw"], f"f({KW})", ints_env, probe_check),
                Peer("kg_py_tensors_kw", _KG_LABELS["kg_py_tensors_kw"], f"f({KW})", tens_env, probe_check),
                Peer("kg_py_tensors_pos", _KG_LABELS["kg_py_tensors_pos"], f"f({POS})", tens_env, probe_check),
                Peer("kg_py_tensors_kw_stream", _KG_LABELS["kg_py_tensors_kw_stream"], f"f({KW}, stream=s)",
                     {**tens_env, "s": cur_stream}, probe_check),
                Peer("kg_py_tensors_kw_bare", _KG_LABELS["kg_py_tensors_kw_bare"], f"f({KW})",
                     {**tens_env, "f": kg_mod.probe_bare}, probe_check,
                     note="launcher probe_bare: same kernel, no size or contiguity declared"),
                Peer("kg_py_ints_pos_not_launched", _KG_LABELS["kg_py_ints_pos_not_launched"], f"f({POS})",
                     empty_ints, not_launched_check(f, empty_ints)),
                Peer("kg_py_tensors_kw_not_launched", _KG_LABELS["kg_py_tensors_kw_not_launched"], f"f({KW})",
                     empty_tens, not_launched_check(f, empty_tens)),
                Peer("kg_py_ints_kw_not_launched", _KG_LABELS["kg_py_ints_kw_not_launched"], f"f({KW})",
                     empty_ints, not_launched_check(f, empty_ints)),
                Peer("kg_py_ints_pos_stream0_not_launched", _KG_LABELS["kg_py_ints_pos_stream0_not_launched"],
                     f"f({POS}, stream=0)", empty_ints, not_launched_check(f, empty_ints, stream=0)),
                Peer("kg_py_tensors_kw_stream_not_launched", _KG_LABELS["kg_py_tensors_kw_stream_not_launched"],
                     f"f({KW}, stream=s)", {**empty_tens, "s": cur_stream},
                     not_launched_check(f, empty_tens, stream=cur_stream)),
                Peer("kg_py_tensors_kw_bare_not_launched", _KG_LABELS["kg_py_tensors_kw_bare_not_launched"],
                     f"f({KW})", {**empty_tens, "f": kg_mod.probe_bare},
                     not_launched_check(kg_mod.probe_bare, empty_tens)),
            ]

        # -- the minimal pybind11 module
        mp = None
        if built.minimal is not None:
            try:
                spec = importlib.util.spec_from_file_location("lc_minimal_pybind", built.minimal)
                assert spec is not None and spec.loader is not None
                mp = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mp)
            except Exception as exc:
                self.doc["notes"].append(f"minimal pybind11 import failed: {short_exc(exc)}")
                mp = None
        if mp is None:
            for key in ("floor_in_process", "pybind_ints", "pybind_tensors", "pybind_noop"):
                peers.append((key, _LABELS[key], "minimal pybind11 module not built (see builds.minimal_pybind)"))
        else:
            peers += [
                Peer("floor_in_process", _LABELS["floor_in_process"], f"f({POS}, 64)",
                     {"f": mp.launch_ints_loop, **ptrs, **scalars}, probe_check, launches_per_call=BURST,
                     note="one call of a C++ loop of 64 <<<>>> launches; the floor, interleaved with the rest"),
                Peer("pybind_ints", _LABELS["pybind_ints"], f"f({POS})",
                     {"f": mp.launch_ints, **ptrs, **scalars}, probe_check),
                Peer("pybind_tensors", _LABELS["pybind_tensors"], f"f({POS})",
                     {"f": mp.launch_tensors, **tensors, **scalars}, probe_check),
                Peer("pybind_noop", _LABELS["pybind_noop"], f"f({POS})", {"f": mp.noop_ints, **ptrs, **scalars},
                     note="no launch: pybind11's call overhead for these 11 arguments"),
            ]

        # -- two catalog kernels, each against a minimal binding of the same signature
        peers += self.catalog_peers(torch, target, built, kg_mod, dev, sync)

        # -- CuPy, cuda.core, Triton, torch: set up lazily so one failure skips one peer
        peers += self.cupy_peers(ptrs, tensors, grid, torch, probe_check)
        peers += self.cuda_core_peers(ptrs, grid, probe_check)
        if triton is None:
            peers.append(("triton", _LABELS["triton"], f"triton not importable: {TRITON_ERROR}"))
        else:
            peers.append(Peer("triton", _LABELS["triton"], f"f({POS})",
                              {"f": triton_probe[(grid,)], **tensors, **scalars}, probe_check,
                              note="kernel[grid] bound once outside the burst"))
        x = torch.zeros(16, dtype=torch.float32, device=dev)

        def add_check(run_burst: Callable[[], None]) -> str:
            sync()
            x.zero_()
            run_burst()
            sync()
            return "pass" if float(x[0]) == BURST else f"FAIL: x[0] = {float(x[0])}"

        peers.append(Peer("torch_add", _LABELS["torch_add"], "x.add_(1)", {"x": x}, add_check,
                          note="framework reference: a different (elementwise) kernel on 16 floats"))

        def noop(a, b, c, d, out, n, slot, k0, k1, k2, alpha):
            return None

        peers.append(Peer("python_noop", _LABELS["python_noop"], f"f({POS})", {"f": noop, **ptrs, **scalars},
                          note="no launch: a Python def with the same 11 arguments"))

        # -- measure, in one process
        self.peer_order = [p[0] if isinstance(p, tuple) else p.key for p in peers]
        runnable = []
        for p in peers:
            if isinstance(p, tuple):
                self.skip(*p)
            elif self.args.sequential:  # one at a time: each "interleaved" with itself only
                self.measure_interleaved([p], sync)
            else:
                runnable.append(p)
        if runnable:
            self.measure_interleaved(runnable, sync)

        # -- CUDA graph: capture 64 generated-Python launches, replay, compare with eager
        if kg_mod is not None:
            self.graph_check(torch, kg_mod.probe, tensors, sync)
        else:
            self.doc["graph_check"] = {"passed": None, "note": "kernelgen probe module unavailable"}

        # -- what a torch tensor costs the launcher: each attribute/method it reads, per call
        self.micro(torch, a, sync)

    def measure_interleaved(self, peers: list[Peer], sync: Callable[[], None]) -> None:
        """Round r times one burst of every peer in turn; a peer that fails is dropped with a note."""
        live: list[tuple[Peer, Callable[..., None], tuple[Any, ...]]] = []
        for p in peers:  # first call: JIT, module load, preparation; then the warm-up
            log(f"prepare: {p.label} ...")
            try:
                fn = burst_function(p.call, list(p.env), BURST // p.launches_per_call)
                args = tuple(p.env.values())
                for _ in range(1 + self.args.warmup):
                    fn(*args)
                    sync()
                live.append((p, fn, args))
            except Exception as exc:
                self.skip(p.key, p.label, f"error: {short_exc(exc)}")
                self._resync()
        samples: dict[str, list[int]] = {p.key: [] for p, _, _ in live}
        log(f"measure: {len(live)} launchers interleaved, {self.args.bursts} rounds ...")
        clock = time.perf_counter_ns
        gc.collect()
        gc.disable()
        try:
            for _ in range(self.args.bursts):
                for entry in list(live):
                    p, fn, args = entry
                    try:
                        t0 = clock()
                        fn(*args)
                        t1 = clock()
                        sync()
                    except Exception as exc:
                        live.remove(entry)
                        self.skip(p.key, p.label, f"error while measuring: {short_exc(exc)}")
                        self._resync()
                        continue
                    samples[p.key].append(t1 - t0)
        finally:
            gc.enable()
        for p, fn, args in live:
            stats = stats_of(samples[p.key])
            verdict = "n/a"
            if p.check is not None:
                try:
                    verdict = p.check(lambda fn=fn, args=args: fn(*args))
                except Exception as exc:
                    verdict = f"FAIL: {short_exc(exc)}"
            self.add_result(p.key, p.label, stats, "this process", call=p.call, check=verdict, note=p.note)
            log(f"  {p.label}: {stats['us_per_launch']:.3f} us/launch, check {verdict}")

    def _resync(self) -> None:
        try:
            import torch

            torch.cuda.synchronize()
        except Exception as exc:
            self.doc["notes"].append(f"synchronize after a failure failed: {short_exc(exc)}")

    def catalog_peers(self, torch: Any, target: str, built: Built, kg_mod: Any, dev: Any,
                      sync: Callable[[], None]) -> list[Any]:
        """rms_norm.rms_norm_bf16 and attn_prefill.attn_prefill_paged_64 from the repository's build,
        called by their generated launchers (torch tensors by keyword and positional, int pointers
        positional and by keyword) and by minimal pybind11 bindings over the same C ABI function."""
        keys = [k for k in _CATALOG_LABELS]
        if kg_mod is None or built.catalog_ops is None or built.minimal_catalog is None:
            why = ("catalog not built (see builds.catalog)" if built.catalog_ops is None else
                   "minimal catalog bindings not built (see builds.minimal_catalog)" if built.minimal_catalog is None
                   else "kernelgen probe module unavailable")
            return [(k, _CATALOG_LABELS[k], why) for k in keys]
        try:
            # The catalog's modules, next to the probe's in the same target package.
            pkg = importlib.import_module(f"kernelgen_ops.{target}")
            if str(built.catalog_ops) not in pkg.__path__:
                pkg.__path__.append(str(built.catalog_ops))
            rms = importlib.import_module(f"kernelgen_ops.{target}.rms_norm").rms_norm_bf16
            attn = importlib.import_module(f"kernelgen_ops.{target}.attn_prefill").attn_prefill_paged_64
            spec = importlib.util.spec_from_file_location("lc_minimal_catalog", built.minimal_catalog)
            assert spec is not None and spec.loader is not None
            mc = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mc)
        except Exception as exc:
            return [(k, _CATALOG_LABELS[k], f"catalog import failed: {short_exc(exc)}") for k in keys]
        self.doc["meta"]["catalog_modules"] = [getattr(rms, "__module__", "?"), str(built.catalog_ops)]
        bf16 = torch.bfloat16
        gen = torch.Generator(device=dev).manual_seed(0)

        def randn(*shape: int) -> Any:
            return torch.randn(*shape, device=dev, dtype=torch.float32, generator=gen).to(bf16)

        peers: list[Any] = []
        kernels = {
            "rms": dict(CATALOG_RMS),
            "attn": dict(CATALOG_ATTN),
        }
        r = kernels["rms"]
        rms_t = {"x": randn(r["rows"], r["hidden"]), "weight": randn(r["hidden"]),
                 "out": torch.empty(r["rows"], r["hidden"], device=dev, dtype=bf16)}
        a = kernels["attn"]
        blocks = -(-a["kv_len"] // a["cache_block_size"])
        kv_shape = (blocks * a["cache_block_size"], a["num_kv_heads"], a["head_dim"])
        attn_t = {"q": randn(a["q_len"], a["num_q_heads"], a["head_dim"]), "k_cache": randn(*kv_shape),
                  "v_cache": randn(*kv_shape),
                  "output": torch.empty(a["q_len"], a["num_q_heads"], a["head_dim"], device=dev, dtype=bf16),
                  "block_table": torch.arange(blocks, device=dev, dtype=torch.int32)}
        setups = [
            ("rms", rms, mc.rms_norm, mc.rms_norm_noop, mc.rms_norm_loop, rms_t, r, "out", ()),
            ("attn", attn, mc.attn_paged, mc.attn_paged_noop, mc.attn_paged_loop, attn_t, a, "output",
             ("head_dim",)),
        ]
        self.doc["catalog"] = {}
        for name, launcher, minimal, noop, loop, tens, scal, out_name, kw_only in setups:
            out = tens[out_name]
            ptrs = {k: t.data_ptr() for k, t in tens.items()}
            order = list(launcher.arg_names)
            pos_names = [x for x in order if x not in kw_only]
            pos = ", ".join(pos_names) + "".join(f", {x}={x}" for x in kw_only)
            kw = ", ".join(f"{x}={x}" for x in order)
            allpos = ", ".join(order)
            # The reference: one generated launch; every peer must write the same bits.
            out.zero_()
            launcher(**tens, **scal)
            sync()
            ref = out.clone()
            info: dict[str, Any] = {"args": order, "values": scal,
                                    "shapes": {k: list(t.shape) for k, t in tens.items()},
                                    "plan": launcher.plan(**{k: v for k, v in scal.items()
                                                             if not isinstance(v, float)})}
            if name == "rms":
                xf = tens["x"].float()
                want = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + scal["eps"])
                        * tens["weight"].float()).to(bf16)
                info["max_abs_diff_to_torch"] = float((ref.float() - want.float()).abs().max())
            self.doc["catalog"][name] = info

            def same_bits(run_burst: Callable[[], None], out: Any = out, ref: Any = ref) -> str:
                sync()
                out.zero_()
                sync()
                run_burst()
                sync()
                return "pass" if torch.equal(out, ref) else "FAIL: output differs from the reference launch"

            t_env = {"f": launcher, **tens, **scal}
            i_env = {"f": launcher, **ptrs, **scal}
            m_env = {"f": minimal, **ptrs, **scal}
            peers += [
                Peer(f"{name}_kg_tensors_kw", _CATALOG_LABELS[f"{name}_kg_tensors_kw"], f"f({kw})", t_env, same_bits),
                Peer(f"{name}_kg_tensors_pos", _CATALOG_LABELS[f"{name}_kg_tensors_pos"], f"f({pos})", t_env,
                     same_bits),
                Peer(f"{name}_kg_ints_pos", _CATALOG_LABELS[f"{name}_kg_ints_pos"], f"f({pos})", i_env, same_bits),
                Peer(f"{name}_kg_ints_kw", _CATALOG_LABELS[f"{name}_kg_ints_kw"], f"f({kw})", i_env, same_bits),
                Peer(f"{name}_pybind_ints", _CATALOG_LABELS[f"{name}_pybind_ints"], f"f({allpos})", m_env, same_bits,
                     note="minimal pybind11 binding calling the same C ABI function"),
                Peer(f"{name}_pybind_noop", _CATALOG_LABELS[f"{name}_pybind_noop"], f"f({allpos})",
                     {**m_env, "f": noop}, note="no launch: pybind11's call overhead for this signature"),
                Peer(f"{name}_floor", _CATALOG_LABELS[f"{name}_floor"], f"f({allpos}, 64)", {**m_env, "f": loop},
                     same_bits, launches_per_call=BURST, note="one call of a C++ loop of 64 C ABI calls"),
            ]
            zero = {**scal, **({"rows": 0} if name == "rms" else {"q_len": 0})}
            peers += [
                Peer(f"{name}_kg_tensors_kw_not_launched", _CATALOG_LABELS[f"{name}_kg_tensors_kw_not_launched"],
                     f"f({kw})", {"f": launcher, **tens, **zero}, note="empty work: the binding's own cost"),
                Peer(f"{name}_kg_ints_pos_not_launched", _CATALOG_LABELS[f"{name}_kg_ints_pos_not_launched"],
                     f"f({pos})", {"f": launcher, **ptrs, **zero}, note="empty work: the binding's own cost"),
            ]
        return peers

    def cupy_peers(self, ptrs: dict[str, int], tensors: dict[str, Any], grid: int, torch: Any,
                   probe_check: Callable[..., str]) -> list[Any]:
        try:
            import cupy
            import numpy as np
        except Exception as exc:
            return [(k, _LABELS[k], f"cupy not importable: {type(exc).__name__}: {exc}")
                    for k in ("cupy_ints", "cupy_arrays")]
        try:
            kern = cupy.RawKernel(KERNEL_SRC.read_text(), "launch_probe_kernel", options=("-std=c++17",))
            kern.compile()
        except Exception as exc:
            return [(k, _LABELS[k], f"cupy compile failed: {short_exc(exc)}") for k in ("cupy_ints", "cupy_arrays")]
        u32 = np.uint32
        scal = (u32(N), u32(SLOT), u32(K0), u32(K1), u32(K2), np.float32(ALPHA))
        int_args = (*(ptrs[x] for x in ARGS[:5]), *scal)
        note = "int pointers, numpy u32/f32 scalars, argument tuple built once"
        try:
            kern((grid, 1, 1), (256, 1, 1), int_args)
        except Exception as exc:  # a CuPy that takes no Python int: pointers as numpy uint64
            int_args = (*(np.uint64(ptrs[x]) for x in ARGS[:5]), *scal)
            note = f"pointers as numpy uint64 (Python ints refused: {type(exc).__name__}), numpy u32/f32 scalars"
        peers: list[Any] = [
            Peer("cupy_ints", _LABELS["cupy_ints"], "k(g, blk, args)",
                 {"k": kern, "g": (grid, 1, 1), "blk": (256, 1, 1), "args": int_args}, probe_check, note=note),
        ]
        try:
            arrays = tuple(cupy.from_dlpack(t.view(torch.int16) if t.dtype == torch.bfloat16 else t)
                           for t in (tensors[x] for x in ARGS[:5]))
            peers.append(Peer("cupy_arrays", _LABELS["cupy_arrays"], "k(g, blk, args)",
                              {"k": kern, "g": (grid, 1, 1), "blk": (256, 1, 1), "args": (*arrays, *scal)},
                              probe_check, note="cupy arrays viewing the torch tensors (bf16 as int16)"))
        except Exception as exc:
            peers.append(("cupy_arrays", _LABELS["cupy_arrays"], f"cupy arrays from torch failed: {short_exc(exc)}"))
        return peers

    def cuda_core_peers(self, ptrs: dict[str, int], grid: int, probe_check: Callable[..., str]) -> list[Any]:
        try:
            import numpy as np

            try:
                from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
                flavour = "cuda.core"
            except ImportError:
                from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch
                flavour = "cuda.core.experimental"
        except Exception as exc:
            return [("cuda_core", _LABELS["cuda_core"], f"cuda.core not importable: {type(exc).__name__}: {exc}")]
        try:
            dev = Device()
            dev.set_current()
            opts = ProgramOptions(std="c++17", arch=f"sm_{dev.arch}")
            mod = Program(KERNEL_SRC.read_text(), code_type="c++", options=opts).compile("cubin")
            kern = mod.get_kernel("launch_probe_kernel")
            cfg = LaunchConfig(grid=grid, block=256)
            stream = dev.default_stream
            u32 = np.uint32
            env = {"launch": launch, "s": stream, "cfg": cfg, "k": kern, **ptrs, "n": u32(N), "slot": u32(SLOT),
                   "k0": u32(K0), "k1": u32(K1), "k2": u32(K2), "alpha": np.float32(ALPHA)}
            note = f"{flavour}; default stream; int pointers, numpy u32/f32 scalars"
            try:
                launch(stream, cfg, kern, *list(env.values())[4:])
            except Exception as exc:  # a cuda.core that takes no Python int: pointers as numpy uint64
                env.update({x: np.uint64(ptrs[x]) for x in ARGS[:5]})
                note = f"{flavour}; default stream; pointers as numpy uint64 (ints refused: {type(exc).__name__})"
            self.doc["meta"]["cuda_core_flavour"] = flavour
            return [Peer("cuda_core", _LABELS["cuda_core"], f"launch(s, cfg, k, {POS})", env, probe_check,
                         note=note)]
        except Exception as exc:
            return [("cuda_core", _LABELS["cuda_core"], f"cuda.core setup failed: {short_exc(exc)}")]

    def graph_check(self, torch: Any, f: Any, tensors: dict[str, Any], sync: Callable[[], None]) -> None:
        log("graph: capture 64 generated-Python launches, replay, compare with eager ...")
        out, d = tensors["out"], tensors["d"]
        res: dict[str, Any] = {"launches": BURST, "passed": False}
        self.doc["graph_check"] = res

        def launches(stream: int | None) -> list[Any]:
            kw = {} if stream is None else {"stream": stream}
            return [f(a=tensors["a"], b=tensors["b"], c=tensors["c"], d=d, out=out, n=N, slot=i, k0=i, k1=1, k2=2,
                      alpha=ALPHA, **kw) for i in range(BURST)]

        try:
            sync()
            out.zero_()
            d.zero_()
            eager_outcomes = launches(None)
            sync()
            eager_out, eager_d = out.clone(), int(d[0])
            ref = torch.zeros_like(out, dtype=torch.float32)
            ref[:BURST] = torch.tensor([3.5 + ALPHA * (i + 3) for i in range(BURST)])
            res["eager_matches_reference"] = bool(torch.equal(eager_out.float(), ref)) and eager_d == BURST
            res["eager_all_launched"] = all(bool(o) for o in eager_outcomes)

            out.zero_()
            d.zero_()
            sync()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                cs = torch.cuda.current_stream()
                captured = launches(cs.cuda_stream)
            sync()
            res["captured_all_launched"] = all(bool(o) for o in captured)
            res["nothing_ran_at_capture"] = int(d[0]) == 0 and int(torch.count_nonzero(out)) == 0
            g.replay()
            sync()
            res["replay_out_equals_eager"] = bool(torch.equal(out, eager_out))
            res["replay_counter"] = int(d[0])
            g.replay()
            sync()
            res["second_replay_counter"] = int(d[0])
            res["passed"] = bool(
                res["eager_matches_reference"] and res["eager_all_launched"] and res["captured_all_launched"]
                and res["nothing_ran_at_capture"] and res["replay_out_equals_eager"]
                and res["replay_counter"] == eager_d == BURST and res["second_replay_counter"] == 2 * BURST
                and torch.equal(out, eager_out)
            )
            stats = measure("g.replay()", {"g": g}, sync, max(200, self.args.bursts // 4), 20,
                            launches_per_call=BURST)
            self.add_result("cuda_graph_replay", _LABELS["cuda_graph_replay"], stats, "this process",
                            call="g.replay()", check="pass" if res["passed"] else "FAIL",
                            note="one replay of the 64 captured generated-Python launches, per kernel")
        except Exception as exc:
            res["error"] = short_exc(exc)
        log(f"graph: {'PASS' if res['passed'] else 'FAIL'} {res}")
        self.save()

    def micro(self, torch: Any, t: Any, sync: Callable[[], None]) -> None:
        calls = {
            "t.data_ptr()": "t.data_ptr()",
            "t.get_device()": "t.get_device()",
            "t.is_contiguous()": "t.is_contiguous()",
            "t.numel()": "t.numel()",
            "t.dtype": "t.dtype",
            "t.is_cuda": "t.is_cuda",
            "isinstance(t, T)": "isinstance(t, T)",
            "torch.cuda.current_stream()": "cs()",
        }
        env = {"t": t, "T": torch.Tensor, "cs": torch.cuda.current_stream}
        for label, call in calls.items():
            try:
                st = measure(call, env, lambda: None, max(200, self.args.bursts // 4), 20)
                self.doc["micro_ns"][label] = round(st["us_per_launch"] * 1e3, 1)
            except Exception as exc:
                self.doc["micro_ns"][label] = f"error: {exc}"
        self.save()

    # -- the table

    def finish(self) -> None:
        self.save()
        res, skipped = self.doc["results"], self.doc["skipped"]
        base = res.get("raw_cpp", {}).get("us_per_launch")
        floor = res.get("floor_in_process", {}).get("us_per_launch")
        for r in res.values():
            r["ratio_to_raw_cpp"] = (r["us_per_launch"] / base) if base else None
            in_proc = r.get("source") == "this process"
            r["ratio_to_floor_in_process"] = (r["us_per_launch"] / floor) if floor and in_proc else None
        for name in ("rms", "attn"):  # catalog kernels: against the minimal binding of the same signature
            mini = res.get(f"{name}_pybind_ints", {}).get("us_per_launch")
            kfloor = res.get(f"{name}_floor", {}).get("us_per_launch")
            for key, r in res.items():
                if key.startswith(f"{name}_"):
                    r["ratio_to_floor_in_process"] = None  # the probe's floor: another kernel
                    r["ratio_to_minimal_pybind"] = (r["us_per_launch"] / mini) if mini else None
                    r["ratio_to_kernel_floor"] = (r["us_per_launch"] / kfloor) if kfloor else None
        self.save()
        m = self.doc["meta"]
        print()
        for note in self.doc["notes"][:4]:
            print(f"note: {note[:300]}")
        if len(self.doc["notes"]) > 4:
            print(f"note: ... {len(self.doc['notes']) - 4} more in the JSON")
        print(f"host launch cost, {m.get('device', '?')}, torch {m.get('torch', '?')}, python {m.get('python')}; "
              f"median of {self.args.bursts} bursts of {BURST}")
        print(f"{'launcher':<58} {'us/launch':>9} {'x raw C++':>9} {'x floor':>7}  check")
        raw_keys = [k for k in self.order if res.get(k, {}).get("source", "").startswith("raw.cu")]
        order = raw_keys + [k for k in self.peer_order if k in res or k in skipped]
        order += [k for k in self.order if k not in order]
        for key in order:
            if key in res:
                r = res[key]
                ratio = f"{r['ratio_to_raw_cpp']:.2f}" if r.get("ratio_to_raw_cpp") else "-"
                rf = f"{r['ratio_to_floor_in_process']:.2f}" if r.get("ratio_to_floor_in_process") else "-"
                print(f"{r['label'][:58]:<58} {r['us_per_launch']:9.3f} {ratio:>9} {rf:>7}  "
                      f"{str(r.get('check', ''))[:40]}")
            elif key in skipped:
                print(f"{skipped[key]['label'][:58]:<58} {'skipped':>9} {'':>17}  {skipped[key]['reason'][:60]}")
        cat = [k for k in self.peer_order if k in res and "ratio_to_minimal_pybind" in res[k]]
        if cat:
            print(f"{'catalog kernel, launcher':<58} {'us/launch':>9} {'x minimal':>9} {'x floor':>7}  check")
            for key in cat:
                r = res[key]
                rm = f"{r['ratio_to_minimal_pybind']:.2f}" if r.get("ratio_to_minimal_pybind") else "-"
                rf = f"{r['ratio_to_kernel_floor']:.2f}" if r.get("ratio_to_kernel_floor") else "-"
                print(f"{r['label'][:58]:<58} {r['us_per_launch']:9.3f} {rm:>9} {rf:>7}  "
                      f"{str(r.get('check', ''))[:40]}")
        gcheck = self.doc.get("graph_check")
        verdict = "not run" if not gcheck else "PASS" if gcheck.get("passed") else "FAIL " + str(gcheck)[:200]
        print(f"CUDA graph replay check (64 generated-Python launches, torch tensors): {verdict}")
        if self.doc["micro_ns"]:
            print("torch accessors, ns/call: " + ", ".join(f"{k} {v}" for k, v in self.doc["micro_ns"].items()))
        print(f"full results: {self.out_path}")


_RAW_LABELS = {
    "raw_cpp": "raw C++ <<<>>> loop (the floor)",
    "raw_cpp_checked": "raw C++ <<<>>> + cudaGetLastError()",
    "kernelgen_cpp_stub": "kernelgen C++ stub launch_probe::probe(...)",
    "kernelgen_c_abi": "kernelgen C ABI kg_launch_probe__probe(...)",
    "raw_cpp_side_stream": "raw C++ <<<>>>, non-blocking stream",
    "kernelgen_cpp_stub_side_stream": "kernelgen C++ stub, non-blocking stream",
    "kernelgen_cpp_stub_not_launched": "kernelgen C++ stub, n=0 (plan only, no launch)",
    "kernelgen_cpp_plan": "kernelgen C++ plan_probe() alone",
    "cuda_get_device": "C++ cudaGetDevice() alone (no launch)",
    "cuda_get_last_error": "C++ cudaGetLastError() alone (no launch)",
}
_KG_LABELS = {
    "kg_py_ints_pos": "kernelgen Python, int pointers, positional",
    "kg_py_ints_kw": "kernelgen Python, int pointers, keywords",
    "kg_py_tensors_kw": "kernelgen Python, torch tensors, keywords",
    "kg_py_tensors_pos": "kernelgen Python, torch tensors, positional",
    "kg_py_tensors_kw_stream": "kernelgen Python, tensors, keywords, stream=torch stream",
    "kg_py_tensors_kw_bare": "kernelgen Python, tensors, keywords, no size/contiguity",
    "kg_py_ints_pos_not_launched": "kernelgen Python, ints positional, n=0 (no launch)",
    "kg_py_tensors_kw_not_launched": "kernelgen Python, tensors keywords, n=0 (no launch)",
    "kg_py_ints_kw_not_launched": "kernelgen Python, ints keywords, n=0 (no launch)",
    "kg_py_ints_pos_stream0_not_launched": "kernelgen Python, ints positional, stream=0, n=0 (no launch)",
    "kg_py_tensors_kw_stream_not_launched": "kernelgen Python, tensors kw, stream=torch stream, n=0",
    "kg_py_tensors_kw_bare_not_launched": "kernelgen Python, tensors kw, no size/contig., n=0",
}
# The catalog kernels' arguments: small problems, so the GPU never holds the launches back.
CATALOG_RMS = {"rows": 4, "hidden": 4096, "eps": 1e-6}
CATALOG_ATTN = {"q_len": 16, "kv_len": 64, "q_offset": 48, "num_q_heads": 4, "num_kv_heads": 2,
                "cache_block_size": 16, "causal": 1, "sliding_window": 0, "inv_sqrt_d": 0.125, "head_dim": 64}
_CATALOG_LABELS = {
    f"{k}_{v}": f"{title}, {what}"
    for k, title in (("rms", "rms_norm_bf16"), ("attn", "attn_prefill_paged_64"))
    for v, what in (
        ("kg_tensors_kw", "kernelgen, torch tensors, keywords"),
        ("kg_tensors_pos", "kernelgen, torch tensors, positional"),
        ("kg_ints_pos", "kernelgen, int pointers, positional"),
        ("kg_ints_kw", "kernelgen, int pointers, keywords"),
        ("pybind_ints", "minimal pybind11 (same C ABI), ints"),
        ("pybind_noop", "minimal pybind11 no-op (no launch)"),
        ("floor", "C++ loop of 64 C ABI calls (floor)"),
        ("kg_tensors_kw_not_launched", "kernelgen, tensors kw, empty (no launch)"),
        ("kg_ints_pos_not_launched", "kernelgen, ints positional, empty (no launch)"),
    )
}
_LABELS = {
    "floor_in_process": "C++ loop of 64 <<<>>> called from this process (floor)",
    "pybind_ints": "minimal pybind11, int pointers",
    "pybind_tensors": "minimal pybind11, torch tensors (data_ptr() from C++)",
    "pybind_noop": "minimal pybind11 no-op, 11 args (no launch)",
    "cupy_ints": "CuPy RawKernel, int pointers",
    "cupy_arrays": "CuPy RawKernel, cupy arrays",
    "cuda_core": "cuda.core launch()",
    "triton": "Triton @triton.jit, tensors + ints + float",
    "torch_add": "torch x.add_(1), 16 floats (framework reference)",
    "cuda_graph_replay": "CUDA graph replay of 64 generated launches, per kernel",
    "python_noop": "Python def no-op, 11 args (no launch)",
}


def _import_kernelgen(ops: Path, target: str) -> Any:
    # Builds installed outside the package are found through KERNELGEN_OPS_PATH, read when
    # kernelgen_ops is first imported; extend __path__ too in case it was imported already.
    os.environ["KERNELGEN_OPS_PATH"] = str(ops)
    try:
        import kernelgen_ops
    except ImportError:
        sys.path.insert(0, str(REPO / "bindings"))
        import kernelgen_ops
    if str(ops) not in kernelgen_ops.__path__:
        kernelgen_ops.__path__.insert(0, str(ops))
    return importlib.import_module(f"kernelgen_ops.{target}.launch_probe")


def _prebuilt(target: str, work: Path) -> Built:
    built = Built()
    ops = work / "inst" / "kernelgen_ops"
    if find_library(ops / target, target) is not None:
        built.kernelgen_ops = ops
    if (work / "raw_launch_cost").is_file():
        built.raw_exe = work / "raw_launch_cost"
    ext = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    if (work / f"lc_minimal_pybind{ext}").is_file():
        built.minimal = work / f"lc_minimal_pybind{ext}"
    if find_library(REPO / "bindings" / "kernelgen_ops" / target, target) is not None:
        built.catalog_ops = REPO / "bindings" / "kernelgen_ops" / target
    if (work / f"lc_minimal_catalog{ext}").is_file():
        built.minimal_catalog = work / f"lc_minimal_catalog{ext}"
    return built


def _steps(steps: dict[str, Step]) -> dict[str, Any]:
    return {k: vars(v) for k, v in steps.items()}


def _version(name: str) -> str | None:
    try:
        from importlib.metadata import version

        dist = {"cupy": None, "cuda.core": "cuda-core", "cuda.bindings": "cuda-bindings"}.get(name, name)
        if dist is None:
            mod = importlib.import_module(name)
            return getattr(mod, "__version__", "?")
        return version(dist)
    except Exception:
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(LC / "last_run.json"), help="JSON results (default: %(default)s)")
    ap.add_argument("--bursts", type=int, default=2000, help="timed bursts of 64 launches per launcher")
    ap.add_argument("--warmup", type=int, default=200, help="untimed bursts first")
    ap.add_argument("--work", default="/tmp/lc", help="build folder (probe project, raw.cu, pybind11 module)")
    ap.add_argument("--target", help="kernelgen target (default: from the GPU's compute capability)")
    ap.add_argument("--skip-build", action="store_true", help="reuse what --work holds")
    ap.add_argument("--sequential", action="store_true",
                    help="measure launchers one after another instead of interleaved")
    args = ap.parse_args()
    return Bench(args).run()


if __name__ == "__main__":
    sys.exit(main())
