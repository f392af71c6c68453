"""benchmarks/profile_cases.py (the kernels scripts/gpu_check.sh --ncu profiles) names launchers and
kernels that exist: each case's kernel-name pattern matches a kernel symbol of the catalog (but the
peers' cases, cuBLAS beside ours), and every launcher it calls is in the hopper build's Python
stubs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from kernelgen.loader import load_catalog

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "profile_cases.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_each_case_names_a_kernel_of_the_catalog() -> None:
    cases = run("--list").stdout.split()
    assert cases and run().returncode == 2  # no case: the list, and a usage error
    symbols = [k.symbol or "" for m in load_catalog(ROOT).modules for k in m.kernels]
    for case in cases:
        res = run(case, "--kernel")
        assert res.returncode == 0, res.stderr
        pattern = res.stdout.strip()
        assert pattern.startswith("regex:"), pattern
        if case.startswith("cublas_"):  # a peer's launch: whatever kernel cuBLAS picks
            continue
        assert any(re.search(pattern.removeprefix("regex:"), s) for s in symbols), (case, pattern)
    assert {"cublas_o_256", "dense_tma_o_256", "fp8_tma_o_256"} <= set(cases)  # a peer beside ours


def test_the_launchers_it_calls_are_generated() -> None:
    source = SCRIPT.read_text()
    calls = re.findall(r"\b(attn_dflash|dense_linear|fp8_linear|dflash2)\.(\w+)\(", source)
    calls += [("attn_dflash", f"prefill_attn_dflash_{kind}_split") for kind in ("bf16", "fp8")]  # the getattr
    calls += re.findall(r"\b(fp8_gemv_rt)\.(fp8_gemv_\w+)\b", source)  # chosen by rows, then called
    assert len(calls) >= 5
    for module, launcher in calls:
        stub = (ROOT / "generated" / "hopper" / "python" / f"{module}.pyi").read_text()
        assert re.search(rf"^{launcher}: ", stub, re.M), (module, launcher)
