"""What every language's launcher docs tell a caller beyond the signature: that a kernel is
absent on the target, which arrays the launcher zeroes (and how many elements), which values the
variant argument takes; and the build's message for a kernel whose parameters disagree with the
spec's, where tensor maps are among them."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen.emit import render_catalog
from kernelgen.loader import load_catalog
from tests.unit.test_launch_modes import project

SOURCE = "".join(f"__global__ void {name}(const float* x, unsigned* done, float* ws, unsigned n, unsigned head_dim) {{}}\n"
                 for name in ("k64", "k128", "k256"))

SPEC = """\
module: demo
summary: A demo module.
sources: [kernels/demo.cu]
kernels:
  attn:
    summary: Attends.
    targets: [hopper]
    args:
      x: {type: const f32*, size: n}
      done: {type: u32*, size: 1, zero: true}
      ws: {type: f32*, size: n * 2, zero: true, nullable: true}
      n: u32
      head_dim: u32
    variants:
      arg: head_dim
      symbols: {64: k64, 128: k128, 256: k256}
    grid: [n, 1, 1]
    block: [128, 1, 1]
    examples:
      - {n: 4, head_dim: 64}
"""

ZEROED = "Set to zero before each launch (cudaMemsetAsync on the launch stream): done (1 element), " \
         "ws (n * 2 elements, unless null)."
VARIANTS = "Variants on head_dim: 64, 128 or 256 (another value: not launched)."


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return render_catalog(load_catalog(project(tmp_path_factory.mktemp("docs"), SPEC, SOURCE)))


def docs(files: dict[str, str], target: str) -> dict[str, str]:
    """The text documenting launcher 'attn' in each language's file."""
    base = f"generated/{target}/"
    cpp = files[base + "include/kernelgen/demo.h"]
    c = files[base + "include/kernelgen/demo_c.h"]
    binding = files[base + "python/demo.cpp"]
    pyi = files[base + "python/demo.pyi"]
    rust = files[base + "rust/src/demo.rs"]
    return {
        "cpp": next(line for line in cpp.splitlines() if line.startswith("// Attends.")),
        "c": next(line for line in c.splitlines() if line.startswith("/* Attends.")),
        "python": next(line for line in binding.splitlines() if '"attn", "(' in line),
        "pyi": pyi.split("class _kg_launcher_attn(")[1].split('"""')[1],
        "rust": rust.split("/// Attends.")[1].split("pub mod attn")[0],
    }


@pytest.mark.parametrize("language", ["cpp", "c", "python", "pyi", "rust"])
def test_zeroed_arrays_and_variant_values_are_documented(files: dict[str, str], language: str) -> None:
    for target in ("hopper", "gb10"):
        text = docs(files, target)[language]
        assert ZEROED in text, text
        assert VARIANTS in text, text
        assert text.count("Variants on") == 1, text


@pytest.mark.parametrize("language,absent", [
    ("cpp", '(absent on gb10: always "not launched")'),
    ("c", '(absent on gb10: always "not launched")'),
    ("python", 'Absent on gb10: always \\"not launched\\".'),
    ("pyi", 'Absent on gb10: always \\"not launched\\".'),
    ("rust", "Absent on target `gb10`"),
])
def test_a_kernel_absent_on_the_target_says_so_in_every_language(files: dict[str, str], language: str,
                                                                  absent: str) -> None:
    assert absent in docs(files, "gb10")[language]
    assert "bsent on" not in docs(files, "hopper")[language]


TMA_SOURCE = """\
#include <cuda.h>
__global__ void gemm(const float* x, unsigned m, const __grid_constant__ CUtensorMap a_map,
                     const __grid_constant__ CUtensorMap b_map) {}
"""

TMA_SPEC = """\
module: demo
summary: A demo module.
sources: [kernels/demo.cu]
kernels:
  gemm:
    summary: Tiles.
    args: {x: const f32*, m: u32}
    tensor_maps:
      a_map: {array: x, dims: [m, 64], box: [16, 64]}
      b_map: {array: x, dims: [m, 64], box: [16, 64]}
    grid: [m, 1, 1]
    block: [128, 1, 1]
    examples:
      - {m: 4}
"""


def test_the_parameter_count_message_counts_tensor_maps_once(tmp_path: Path) -> None:
    files = render_catalog(load_catalog(project(tmp_path, TMA_SPEC, TMA_SOURCE)))
    cu = files["generated/hopper/src/demo.cu"]
    message = next(line for line in cu.splitlines() if "does not take the spec's" in line)
    assert "the spec's 4 parameters (const f32* x, u32 m, const CUtensorMap a_map, const CUtensorMap b_map);" \
        in message, message
    assert "tensor maps)" not in message and "then 2" not in message, message
