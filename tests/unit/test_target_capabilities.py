"""What a kernel needs of its targets' compute capability: a compile-time or launch-time cluster
and a tensor map need 9.0, so a kernel built for a target below it is refused at load, naming
the target; a programmatic-dependent launch is accepted there. And a target's unknown `arch`
suggests an architecture that exists."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen.cli import main
from kernelgen.errors import SpecError
from kernelgen.loader import known_arches, load_catalog, load_targets

TARGETS = """\
ampere:
  arch: sm_80
  compute_capability: "8.0"
  max_shared_mem_per_block_optin: 166912
hopper:
  arch: sm_90a
  compute_capability: "9.0"
  max_shared_mem_per_block_optin: 232448
blackwell:
  arch: sm_100a
  compute_capability: "10.0"
  max_shared_mem_per_block_optin: 232448
"""

SOURCE = """\
#include <cuda.h>
__global__ void __cluster_dims__(1, 1, 1) fixed(const float* x, float* out, unsigned n) {}
__global__ void dynamic(const float* x, float* out, unsigned n, unsigned cx) {}
__global__ void tma(const float* x, float* out, unsigned m, unsigned k, const __grid_constant__ CUtensorMap x_map) {}
__global__ void pdl(const float* x, float* out, unsigned n) {}
"""

KERNELS = {
    "fixed": """\
  fixed:
    summary: A compile-time cluster of one block.
{targets}    args: {{x: {{type: const f32*, size: n}}, out: {{type: f32*, size: n}}, n: u32}}
    cluster: [1, 1, 1]
    grid: [div_ceil(n, 256), 1, 1]
    block: [256, 1, 1]
    skip_if: [n == 0]
    examples: [{{n: 1000}}]
""",
    "dynamic": """\
  dynamic:
    summary: A launch-time cluster.
{targets}    args: {{x: {{type: const f32*, size: n}}, out: {{type: f32*, size: n}}, n: u32, cx: u32}}
    launch: {{cluster: [cx, 1, 1]}}
    grid: [div_ceil(n, 256) * cx, 1, 1]
    block: [256, 1, 1]
    skip_if: [n == 0]
    requires: [cx >= 1]
    examples: [{{n: 1000, cx: 1}}]
""",
    "tma": """\
  tma:
    summary: A tensor map.
{targets}    args: {{x: {{type: const f32*, size: m * k}}, out: {{type: f32*, size: m * k}}, m: u32, k: u32}}
    tensor_maps:
      x_map: {{array: x, dims: [m, k], box: [64, 32]}}
    grid: [div_ceil(m * k, 256), 1, 1]
    block: [256, 1, 1]
    skip_if: [m == 0]
    applies_if: [k % 4 == 0]
    examples: [{{m: 64, k: 64}}]
""",
    "pdl": """\
  pdl:
    summary: A programmatic-dependent launch.
{targets}    args: {{x: {{type: const f32*, size: n}}, out: {{type: f32*, size: n}}, n: u32}}
    launch: {{programmatic_dependent: true}}
    grid: [div_ceil(n, 256), 1, 1]
    block: [256, 1, 1]
    skip_if: [n == 0]
    examples: [{{n: 1000}}]
""",
}


def _project(tmp_path: Path, kernel: str, targets: list[str] | None) -> Path:
    listed = f"    targets: [{', '.join(targets)}]\n" if targets is not None else ""
    (tmp_path / "specs").mkdir()
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "demo.cu").write_text(SOURCE)
    (tmp_path / "specs" / "targets.yaml").write_text(TARGETS)
    (tmp_path / "specs" / "demo.yaml").write_text(
        "module: demo\nsummary: A demo module.\nsources: [kernels/demo.cu]\nkernels:\n"
        + KERNELS[kernel].format(targets=listed))
    return tmp_path


# (kernel, its field, the line of the field's value without `targets`, what needs 9.0)
NEEDS_90 = [
    ("fixed", "cluster", 8, "a compile-time cluster (__cluster_dims__)"),
    ("dynamic", "launch.cluster", 8, "a launch-time cluster (launch.cluster)"),
    ("tma", "tensor_maps", 9, "a tensor map (the tensor memory accelerator, TMA)"),
]


@pytest.mark.parametrize(("kernel", "field", "line", "what"), NEEDS_90, ids=[k for k, *_ in NEEDS_90])
@pytest.mark.parametrize("targets", [None, ["ampere", "hopper"]], ids=["every target", "listed"])
def test_a_feature_of_9_0_on_a_target_below_it_is_refused_naming_it(tmp_path: Path, kernel: str, field: str,
                                                                   line: int, what: str,
                                                                   targets: list[str] | None) -> None:
    root = _project(tmp_path, kernel, targets)
    with pytest.raises(SpecError) as info:
        load_catalog(root)
    text = str(info.value)
    assert text.startswith(f"specs/demo.yaml:{line + (targets is not None)}: kernels.{kernel}.{field}: {what} needs "
                           "compute capability 9.0, but the kernel is built for target 'ampere' (sm_80, compute "
                           "capability 8.0)"), text
    assert "list under 'targets' only targets of compute capability 9.0 and above: blackwell, hopper" in text, text


@pytest.mark.parametrize("kernel", [k for k, *_ in NEEDS_90])
def test_a_feature_of_9_0_on_targets_of_9_0_and_above_loads(tmp_path: Path, kernel: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    root = _project(tmp_path, kernel, ["hopper", "blackwell"])
    (k,) = load_catalog(root).modules[0].kernels
    assert k.targets == ("blackwell", "hopper")
    args = {"fixed": ["n=1000"], "dynamic": ["n=1000", "cx=1"], "tma": ["m=64", "k=64"]}[kernel]
    assert main(["--root", str(root), "plan", f"demo.{kernel}", *args]) == 0
    out = capsys.readouterr().out
    assert "ampere" in out and "not launched: absent" in out, out


def test_a_programmatic_dependent_launch_below_9_0_loads(tmp_path: Path) -> None:
    """Below 9.0 the launch attribute has no effect (the launch waits as a plain one does)."""
    (k,) = load_catalog(_project(tmp_path, "pdl", None)).modules[0].kernels
    assert k.targets == ("ampere", "blackwell", "hopper")
    assert k.launch is not None and k.launch.programmatic_dependent


def test_the_project_without_a_target_of_9_0_is_told_to_add_one(tmp_path: Path) -> None:
    root = _project(tmp_path, "fixed", None)
    (root / "specs" / "targets.yaml").write_text(TARGETS.split("hopper:")[0])
    with pytest.raises(SpecError, match=r"the project has no target of compute capability 9\.0 or above: add one"):
        load_catalog(root)


@pytest.mark.parametrize(("arch", "suggested"), [
    ("sm_80a", "sm_80"), ("sm_86a", "sm_86"), ("sm_89f", "sm_89"), ("sm_90f", "sm_90"), ("sm_91a", "sm_90a"),
])
def test_an_unknown_arch_suggests_one_that_exists(tmp_path: Path, arch: str, suggested: str) -> None:
    path = tmp_path / "targets.yaml"
    cc = f"{arch[3:-2]}.{arch[-2]}"
    path.write_text(f'x:\n  arch: {arch}\n  compute_capability: "{cc}"\n  max_shared_mem_per_block_optin: 1024\n')
    with pytest.raises(SpecError) as info:
        load_targets(path, tmp_path)
    assert str(info.value) == (f"targets.yaml:2: x.arch: '{arch}' is not an architecture nvcc knows (did you mean "
                               f"'{suggested}'?)")
    assert suggested in known_arches() and arch not in known_arches()


def test_known_arches_take_the_suffixes_nvcc_takes() -> None:
    arches = known_arches()
    assert {"sm_80", "sm_90", "sm_90a", "sm_100a", "sm_100f", "sm_121a"} <= arches
    assert not {"sm_80a", "sm_89a", "sm_90f", "sm_75f"} & arches


def test_a_module_with_no_kernel_on_a_target_leaves_its_sources_out_of_it(tmp_path: Path) -> None:
    """The sources go into the translation unit of the targets where one of the module's kernels
    is present; each unit is compiled with the target's KERNELGEN_TARGET_CC and KERNELGEN_TARGET_NAME,
    the guards the docs name."""
    from kernelgen.emit import render_catalog

    files = render_catalog(load_catalog(_project(tmp_path, "fixed", ["hopper"])))
    included = {t: "#include <kernels/demo.cu>" in files[f"generated/{t}/src/demo.cu"]
                for t in ("ampere", "hopper", "blackwell")}
    assert included == {"ampere": False, "hopper": True, "blackwell": False}
    assert 'KERNELGEN_TARGET_NAME="hopper" KERNELGEN_TARGET_CC=90' in files["generated/hopper/CMakeLists.txt"]
    assert 'KERNELGEN_TARGET_NAME="blackwell" KERNELGEN_TARGET_CC=100' in files["generated/blackwell/CMakeLists.txt"]


def test_the_docs_name_the_source_guards() -> None:
    from kernelgen import schema

    docs = (Path(__file__).resolve().parents[2] / "docs" / "spec-format.md").read_text()
    targets = next(f.description for f in schema.KERNEL.fields if f.name == "targets")
    for text in (docs, targets):
        assert "#if KERNELGEN_TARGET_CC >= 90" in text and "KERNELGEN_TARGET_NAME" in text
        assert "compiled for every target where any" in " ".join(text.split())
