"""The catalog's programmatic dependent launches: a kernel whose spec sets
`launch: {programmatic_dependent: true}` may start while the kernel before it on the stream still
runs, which is only correct when the kernel waits (griddepcontrol.wait) before touching that
kernel's data. Every such kernel's definition must open with kcommon::pdl_enter() (trigger, then
wait), or with kcommon::pdl_launch_dependents() when its source waits later (kcommon::pdl_wait(),
after work that reads nothing the previous kernel may write: the FP8 GEMVs' L2 prefetch).
tests/gpu/test_pdl_order.py checks on the GPU that the waits hold."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelgen.loader import load_catalog

REPO = Path(__file__).resolve().parents[2]


def definitions() -> dict[str, tuple[Path, str]]:
    """Kernel function name -> (file, first statement of its body), over every source under
    kernels/ (definitions start a line with __global__)."""
    out: dict[str, tuple[Path, str]] = {}
    for path in sorted((REPO / "kernels").rglob("*.cu*")):
        text = path.read_text()
        for m in re.finditer(r"^__global__\b", text, re.MULTILINE):
            brace = text.index("{", m.end())
            head = re.sub(r"__\w+__\s*\([^)]*\)", "", text[m.end():brace])  # __launch_bounds__(..) etc.
            name = re.search(r"(\w+)\s*\(", head)
            assert name, f"{path}: no kernel name in {head!r}"
            body = text[brace + 1:].lstrip()
            out[name.group(1)] = (path, body[:body.index(";") + 1])
    return out


def pdl_kernels() -> list[tuple[str, str, str]]:
    catalog = load_catalog(REPO)
    found = []
    for module in catalog.modules:
        for k in module.kernels:
            if k.launch is not None and k.launch.programmatic_dependent:
                found.append((module.name, k.name, k.symbol.split("<")[0]))
    return found


PDL = pdl_kernels()


def test_the_drafter_catalog_launches_with_pdl():
    names = {k for _, k, _ in PDL}
    for k in ("fp8_gemv_rt2_16", "fp8_gemv_rt2_16_x3", "rms_norm_bf16", "residual_rms_norm_bf16",
              "prefill_attn_dflash_bf16_indirect_split", "dflash2_topk16_bf16", "rope_qwen3"):
        assert k in names, f"{k} is not launched as a programmatic dependent"


@pytest.mark.parametrize("module,kernel,symbol", PDL, ids=[k for _, k, _ in PDL])
def test_pdl_kernel_waits_before_its_work(module, kernel, symbol):
    defs = definitions()
    assert symbol in defs, f"{module}.{kernel}: no __global__ definition of {symbol} under kernels/"
    path, first = defs[symbol]
    if first == "kcommon::pdl_enter();":
        return
    assert first == "kcommon::pdl_launch_dependents();", (
        f"{module}.{kernel} ({path.relative_to(REPO)}): a programmatic dependent launch must open with "
        f"kcommon::pdl_enter() (or pdl_launch_dependents() and a later pdl_wait()); it opens with {first!r}")
    assert "pdl_wait();" in path.read_text(), f"{path.relative_to(REPO)} never calls pdl_wait()"
