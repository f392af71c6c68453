"""Numbers that a catalog spec and its kernel source both state agree: the spec's constant
decides the launch (grid, shared memory, applicability), the kernel's constexpr decides what each
CTA covers, and a mismatch leaves outputs unwritten or rows computed twice. Each pair below is a
spec constant and the constexpr integer literal that restates it in the kernel source."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelgen.loader import load_catalog

REPO = Path(__file__).resolve().parents[2]

# (module, spec constant, kernel source, constexpr name)
PAIRS = [
    ("dense_linear", "GEMV_TILE_N", "kernels/dflash/dense_gemv.cu", "kRows"),
    ("dense_linear", "GEMV_CLUSTER", "kernels/dflash/dense_gemv.cu", "kCluster"),
    ("dense_linear", "GEMV_SMEM", "kernels/dflash/dense_gemv.cu", "kRingBytes"),
    ("dense_linear", "GEMV_MAX_M", "kernels/dflash/dense_gemv.cu", "kMaxRows"),
    ("dense_linear", "GEMV_RT1_SMEM", "kernels/dflash/dense_gemv.cu", "kRt1RingBytes"),
    ("fp8_gemv_rt", "CLUSTER", "kernels/dflash/fp8_gemv_rt.cu", "kCluster"),
    ("fp8_gemv_rt", "TILE_N", "kernels/dflash/fp8_gemv_rt.cu", "kRows"),
    ("fp8_gemv_rt", "RING_SMEM", "kernels/dflash/fp8_gemv_rt.cu", "kRingBytes"),
    ("w4a16_gemm", "GEMV_MAX_M", "kernels/dflash/w4a16_gemm.cu", "kMaxRows"),
    ("w4a16_gemm", "GEMV_TILE_N", "kernels/dflash/w4a16_gemm.cu", "kRows"),
    ("w4a16_gemm", "GEMV_CLUSTER", "kernels/dflash/w4a16_gemm.cu", "kCluster"),
    ("w4a16_gemm", "GEMV_RING_8", "kernels/dflash/w4a16_gemm.cu", "kRing8Bytes"),
    ("w4a16_gemm", "GEMV_RING_16", "kernels/dflash/w4a16_gemm.cu", "kRing16Bytes"),
]


def constexpr_value(source: Path, name: str) -> int:
    found = re.findall(rf"\bconstexpr\s+[\w:]+\s+{name}\s*=\s*([0-9]+)[uUlL]*\s*;", source.read_text())
    assert len(found) == 1, f"{source}: expected one 'constexpr ... {name} = <integer>;', found {found}"
    return int(found[0])


@pytest.fixture(scope="module")
def constants() -> dict[str, dict[str, int]]:
    return {m.name: dict(m.constants) for m in load_catalog(REPO).modules}


@pytest.mark.parametrize("module,constant,source,name", PAIRS)
def test_kernel_restates_the_spec_constant(constants, module, constant, source, name) -> None:
    assert constexpr_value(REPO / source, name) == constants[module][constant], (
        f"{source}: {name} disagrees with {constant} in specs/{module}.yaml")
