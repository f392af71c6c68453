"""Tensor maps (a kernel's `tensor_maps`): what the loader accepts and refuses, naming file and
line, and what the launchers generate (the kernel's parameters, the encoding before the launch,
the UNALIGNED and TENSOR_MAP codes in every language)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen import plan
from kernelgen.emit import render_catalog
from kernelgen.errors import SpecError
from kernelgen.loader import load_catalog

REPO = Path(__file__).resolve().parents[2]
TARGETS = (REPO / "tests" / "fixtures" / "project" / "specs" / "targets.yaml").read_text()

SOURCE = """\
#include <cuda.h>
__global__ void gemm(const __nv_bfloat16* x, const unsigned char* w, float* out, unsigned m, unsigned k,
                     const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap w_map) {}
"""

SPEC = """\
module: demo
summary: A demo module.
sources: [kernels/demo.cu]
constants:
  BOX: 64
kernels:
  gemm:
    summary: A GEMM over tensor maps.
    args: {x: const bf16*, w: const u8*, out: f32*, m: u32, k: u32}
    tensor_maps:
      x_map: {array: x, dims: [m, k], box: [128, BOX], swizzle: 128}
      w_map: {array: w, dims: [m, k], box: [min(m, 256), 64]}
    grid: [div_ceil(m, 128), 1, 1]
    block: [128, 1, 1]
    skip_if: [m == 0]
    examples:
      - {m: 256, k: 64}
"""


def project(tmp_path: Path, spec: str = SPEC, source: str = SOURCE) -> Path:
    (tmp_path / "specs").mkdir()
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "demo.cu").write_text(source)
    (tmp_path / "specs" / "targets.yaml").write_text(TARGETS)
    (tmp_path / "specs" / "demo.yaml").write_text(spec)
    return tmp_path


def test_tensor_maps_are_loaded(tmp_path: Path) -> None:
    (m,) = load_catalog(project(tmp_path)).modules
    k = m.kernels[0]
    assert [t.name for t in k.tensor_maps] == ["x_map", "w_map"]
    x_map, w_map = k.tensor_maps
    assert (x_map.array, x_map.elem_bytes, x_map.swizzle, len(x_map.dims)) == ("x", 2, 128, 2)
    assert (w_map.array, w_map.elem_bytes, w_map.swizzle) == ("w", 1, 0)


BAD = [
    ("unknown array", ("array: x,", "array: y,"), 11, "'y' is not an argument of the kernel"),
    ("scalar array", ("array: x,", "array: m,"), 11, "a tensor map describes an array"),
    ("box rank", ("box: [128, BOX]", "box: [BOX]"), 11, "the box has 1 entries but 'dims' has 2"),
    ("box too large", ("box: [128, BOX]", "box: [512, BOX]"), 11, "box entry 0 is 512"),
    ("row not 16 bytes", ("box: [128, BOX]", "box: [128, 4]"), 11, "innermost entry is 8 bytes"),
    ("row over swizzle", ("box: [128, BOX], swizzle: 128", "box: [128, BOX], swizzle: 64"), 11,
     "more than the 64-byte swizzle span"),
    ("bad swizzle", ("swizzle: 128", "swizzle: 100"), 11, "swizzle 100"),
    ("six dims", ("dims: [m, k], box: [128, BOX]", "dims: [m, k, k, k, k, k], box: [1, 1, 1, 1, 1, 8]"), 11,
     "1 to 5 expressions"),
    ("float in dims", ("dims: [m, k]", "dims: [m, 1.5]"), 11, ""),
    ("name of an argument", ("      x_map:", "      k:"), 11, "has the name of an argument"),
    ("unknown key", ("swizzle: 128", "swizle: 128"), 11, "did you mean 'swizzle'"),
    ("vector elements", ("x: const bf16*,", "x: const f32x4*,"), 11, "plain elements of 1, 2, 4 or 8 bytes"),
    ("strided array", ("x: const bf16*,", "x: {type: const bf16*, contiguous: false},"), 11,
     "'x' is declared contiguous: false; a tensor map describes a contiguous row-major array"),
    ("size below the map", ("x: const bf16*,", "x: {type: const bf16*, size: m},"), 11,
     "tensor map 'x_map' covers 16384 elements of 'x' (256 * 64) for examples[0] ("),
    ("size below a map of expressions", ("w: const u8*,", "w: {type: const u8*, size: m * k - 1},"), 12,
     "but the size of 'w' is 16383 ('(m * k) - 1'): its copies would read past the arrays the launchers accept "
     "(give 'w' a size that covers the map (size: m * k))"),
    ("rows never 16 bytes", ("dims: [m, k], box: [min(m, 256), 64]", "dims: [m, 3], box: [min(m, 256), 64]"), 12,
     "the map's rows are 3 bytes (3 elements of 1 bytes); TMA needs a row stride that is a multiple of 16 bytes"),
    ("constant rows never 16 bytes", ("dims: [m, k], box: [128, BOX]", "dims: [m, BOX + 1], box: [128, BOX]"), 11,
     "the map's rows are 130 bytes (65 elements of 2 bytes)"),
    ("constant extent 0", ("dims: [m, k], box: [128, BOX]", "dims: [0, k], box: [128, BOX]"), 11,
     "dims entry 0 is 0; each extent is at least 1"),
]


@pytest.mark.parametrize("old,new,line,fragment", [b[1] + b[2:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_tensor_maps_name_file_and_line(tmp_path: Path, old: str, new: str, line: int, fragment: str) -> None:
    assert old in SPEC
    with pytest.raises(SpecError) as info:
        load_catalog(project(tmp_path, SPEC.replace(old, new, 1)))
    text = str(info.value)
    assert f"specs/demo.yaml:{line}:" in text or f"specs/demo.yaml:{line + 1}:" in text, text
    assert fragment in text, text


@pytest.mark.parametrize("args,dims", [
    ("x: {type: const bf16*, size: m * k},", "dims: [m, k]"),  # the size covers the map
    ("x: {type: const bf16*, size: m * k},", "dims: [m, 8]"),  # 16-byte rows
    ("x: const bf16*,", "dims: [m, 4096]"),  # no size: nothing to compare
])
def test_sizes_and_strides_that_a_launch_can_meet_load(tmp_path: Path, args: str, dims: str) -> None:
    spec = SPEC.replace("x: const bf16*,", args, 1).replace("dims: [m, k], box: [128, BOX]", f"{dims}, box: [128, BOX]")
    load_catalog(project(tmp_path, spec))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return render_catalog(load_catalog(project(tmp_path_factory.mktemp("tm"))))


def test_launcher_encodes_the_maps_and_passes_them_after_the_args(rendered) -> None:
    cu = rendered["generated/hopper/src/demo.cu"]
    assert '#include "kernelgen/runtime_tma.h"' in cu
    assert ("void (*)(const __nv_bfloat16*, const uint8_t*, float*, uint32_t, uint32_t, CUtensorMap, CUtensorMap)"
            in cu)
    assert "kg::encode_tensor_map(&kg_tm[0], x, 2, 2, kg_dims, kg_box, 128, 0);" in cu
    assert "kg::encode_tensor_map(&kg_tm[1], w, 1, 2, kg_dims, kg_box, 0, 1);" in cu
    assert "const int64_t kg_dims[2] = {int64_t{m}, int64_t{k}};" in cu
    assert "const int64_t kg_box[2] = {int64_t{128}, BOX};" in cu
    assert "const int64_t kg_box[2] = {kg::x_min(int64_t{m}, int64_t{256}), int64_t{64}};" in cu
    launch = cu.split("kernelgen::Outcome gemm(")[1].split("\n}\n")[0]
    # Encoded after the plan, before the launch; an encoding that fails is the launcher's outcome.
    assert launch.index("plan_gemm(") < launch.index("kg_tensor_maps_gemm(") < launch.index("::kg_kernel_gemm_0<<<")
    assert "if (kg_rc != KG_LAUNCHED) return {kg_rc, &kg_info_gemm};" in launch
    assert "::kg_kernel_gemm_0<<<kg::dims(kg_p.grid), kg::dims(kg_p.block), static_cast<std::size_t>(kg_p.shared_mem), " \
           "stream>>>(x, kg::arg<kg_f, 1>(w), out, kg::arg<kg_f, 3>(m), kg::arg<kg_f, 4>(k), kg_tm[0], kg_tm[1]);" in launch


def test_a_nullable_array_passed_as_null_is_not_encoded(tmp_path: Path) -> None:
    """A tensor map of a nullable array: where the array is null, the launcher encodes nothing (no
    alignment check, no driver call) and passes a zero map; a non-null array is encoded as any."""
    spec = SPEC.replace("x: const bf16*,", "x: {type: const bf16*, nullable: true},", 1)
    cu = render_catalog(load_catalog(project(tmp_path, spec)))["generated/hopper/src/demo.cu"]
    maps = cu.split("int32_t kg_tensor_maps_gemm(")[1].split("\n}\n")[0]
    null = maps.index("if (x == nullptr) {")
    assert null < maps.index("kg_tm[0] = CUtensorMap{};") < maps.index("} else {") < maps.index(
        "kg::encode_tensor_map(&kg_tm[0], x,")
    assert "if (w == nullptr)" not in maps and "kg::encode_tensor_map(&kg_tm[1], w," in maps


def test_modules_without_maps_do_not_include_the_header(rendered) -> None:
    assert all("runtime_tma.h" not in text for path, text in rendered.items()
               if path.endswith(".cu") and not path.endswith("/demo.cu"))


def test_codes_reach_every_language(rendered) -> None:
    assert plan.NOT_LAUNCHED["UNALIGNED"][0] == plan.NL_UNALIGNED == 8
    assert plan.ERRORS["TENSOR_MAP"][0] == plan.E_TENSOR_MAP == 12
    codes = rendered["generated/hopper/include/kernelgen/plan_codes.h"]
    assert "#define KG_NL_UNALIGNED 8" in codes and "#define KG_E_TENSOR_MAP 12" in codes
    # Not a device limit: a chain stops at the error (an unaligned array is "not launched" instead).
    assert "TENSOR_MAP" not in plan.FALLS_THROUGH
    lib = rendered["generated/hopper/rust/src/lib.rs"]
    assert "pub const NL_UNALIGNED: i32 = 8;" in lib and "pub const E_TENSOR_MAP: i32 = 12;" in lib
    pyi = rendered["generated/hopper/python/demo.pyi"]
    assert "TMA descriptors encoded for each launch: x_map (of x), w_map (of w)" in pyi


def test_runtime_describes_the_codes() -> None:
    src = (REPO / "src" / "kernelgen" / "runtime" / "src" / "runtime.cpp").read_text()
    assert "case KG_NL_UNALIGNED:" in src and "case KG_E_TENSOR_MAP:" in src
    header = (REPO / "src" / "kernelgen" / "runtime" / "include" / "kernelgen" / "runtime_tma.h").read_text()
    assert "cudaGetDriverEntryPointByVersion(\"cuTensorMapEncodeTiled\"" in header
